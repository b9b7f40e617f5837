#!/bin/sh
# tests/collector/kineto_real/run.sh: collector/kineto.c against Kineto's own
# daemon client, compiled from a Kineto checkout (not in CI: CI has none).
# Builds client.cpp with libkineto/src/IpcFabricConfigClient.cpp,
# ThreadUtil.cpp and the dynolog IPC fabric headers Kineto vendors (the
# stubs here stand in for Kineto's logger and fmt), then runs it against
# build/tests/kineto_serve: a registration, a poll that gets an armed
# capture's config, and a poll that gets none. The sockets are files in a
# scratch folder (KINETO_IPC_SOCKET_DIR), so the node's "dynolog" name is
# never taken.
#
# Usage: tests/collector/kineto_real/run.sh KINETO_CHECKOUT [BUILD_DIR]
#   e.g. git clone https://github.com/pytorch/kineto /tmp/kineto
# Exit 0 when every answer is what the collector means it to be.
set -eu
src=${1:?usage: run.sh KINETO_CHECKOUT [BUILD_DIR]}/libkineto
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$here/../../../build}
w=$(mktemp -d /tmp/kineto-real.XXXXXX)
trap 'rm -rf "$w"' EXIT
# copied out of src/, whose own Logger.h (a quoted include looks beside the file first) needs
# the rest of libkineto
mkdir "$w/k"
cp "$src/src/IpcFabricConfigClient.cpp" "$src/src/IpcFabricConfigClient.h" "$src/src/ThreadUtil.cpp" "$w/k/"
g++ -std=c++17 -O1 -DKINETO_NAMESPACE=libkineto -DENABLE_IPC_FABRIC -I"$here/stub" -I"$w/k" \
	-I"$src/include" -I"$src/third_party/dynolog_headers" \
	-I"$src/third_party/dynolog_headers/dynolog/src/ipcfabric" \
	"$here/client.cpp" "$w/k/IpcFabricConfigClient.cpp" "$w/k/ThreadUtil.cpp" -o "$w/client"
mkdir "$w/sock" "$w/spool"
KINETO_IPC_SOCKET_DIR=$w/sock "$build/tests/kineto_serve" --timeout 5 "$w/spool" \
	0:real1:steps=3:cpu,cuda,memory >"$w/serve.out" 2>"$w/serve.err" &
serve=$!
for _ in $(seq 50); do [ -S "$w/sock/dynolog" ] && break; sleep 0.1; done
env -i KINETO_IPC_SOCKET_DIR="$w/sock" RANK=0 SLURM_JOB_ID=4242 "$w/client" ctxt req req \
	>"$w/client.out" 2>"$w/client.err"
wait $serve || true
cat "$w/client.out"
pid=$(sed -n 's/.*process \([0-9]*\) registered.*/\1/p' "$w/serve.err" | head -1)
cat >"$w/config" <<END
ACTIVITIES_LOG_FILE=$w/spool/kineto-$pid-creal1.trace
PROFILE_START_ITERATION=0
PROFILE_START_ITERATION_ROUNDUP=1
ACTIVITIES_ITERATIONS=3
PROFILE_REPORT_INPUT_SHAPES=true
PROFILE_PROFILE_MEMORY=true
PROFILE_WITH_STACK=false
REQUEST_TRACE_ID=real1
END
{ echo "ctxt 1"; echo "config $(wc -c <"$w/config")"; cat "$w/config"; echo "config 0"; } >"$w/want"
if diff -u "$w/want" "$w/client.out"; then
	echo "kineto_real: Kineto's client got what the collector meant (job 4242, rank 0, pid $pid)"
else
	cat "$w/serve.err" "$w/client.err"
	exit 1
fi
