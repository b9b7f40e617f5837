#!/usr/bin/env bash
# The V100 fixture, whole process: the server from its start to the upload's answer (gzip), and
# with PEERS (a folder set up as ../shared/reference/peers/README.md says) torch-tb-profiler's and
# HTA's loads of the same file, each with its peak memory.
#
# Usage:  bench/peers_v100.sh [SERVER] [PEERS]    (SERVER: build-release/trainscope-server)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
S=${1:-$ROOT/build-release/trainscope-server}
PEERS=${2:-}
F=$(cd "$ROOT/.." && pwd)/shared/fixtures/traces/hta_v100_train_memory.json.gz
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
P=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$(date +%s.%N)
"$S" --listen 127.0.0.1:$P --db "$D/t.db" >"$D/server.out" 2>&1 &
SP=$!
until curl -s -o /dev/null "http://127.0.0.1:$P/api/v1/runs"; do sleep 0.01; done
curl -sS -f -X POST -H 'Expect:' -T "$F" "http://127.0.0.1:$P/api/v1/runs/v/artifacts?name=v100&rank=0" >/dev/null
t1=$(date +%s.%N)
h=$(awk '/^VmHWM:/ {print int($2 / 1024)}' /proc/$SP/status)
kill $SP
wait $SP 2>/dev/null || true
echo "trainscope-server: $(echo "$t1 - $t0" | bc) s, $h MiB (start to the upload's answer)"
if [ -n "$PEERS" ]; then
	mkdir -p "$D/hta/v100" && ln -s "$F" "$D/hta/v100/"
	(cd "$PEERS" && /usr/bin/time -f "torch-tb-profiler: %e s, %M KB" /usr/bin/python3 tb_load.py "$F" 2>&1 >/dev/null | tail -1)
	(cd "$PEERS" && /usr/bin/time -f "HTA: %e s, %M KB" /usr/bin/python3 hta_load.py "$D/hta/v100" 2>&1 >/dev/null | tail -1)
fi
