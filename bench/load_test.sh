#!/usr/bin/env bash
# Load test on loopback (issue 9): UPLOADERS concurrent uploaders sending the
# fixture traces (each upload a run of its own, rank = uploader) while READERS
# readers hammer the read endpoints, for SECONDS; then every acknowledged
# artifact is checked (ready, raw bytes' sha256 = the bytes sent), and the
# server is stopped and restarted on the same database, which must open clean
# and list the same artifacts. Writes bench/results/load_test-DATE.txt.
#
#   bench/load_test.sh            (60 s, 8 uploaders, 32 readers)
#   SECONDS_=10 bench/load_test.sh
# Environment: SECONDS_ [60], UPLOADERS [8], READERS [32], SERVER_THREADS [16],
#   CLIENT_UPLOADS [8]: --max-client-uploads (every uploader is 127.0.0.1 here;
#   on a team network each node is its own client)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECONDS_:-60}
up=${UPLOADERS:-8}
rd=${READERS:-32}
cmake -S . -B build >/dev/null && cmake --build build -j"$(nproc)" --target trainscope-server load_test >/dev/null
fx=../shared/fixtures/traces
files=("$fx"/hta_v100_train_memory.json.gz "$fx"/kineto_resnet50_workers0.json.gz "$fx"/hta_nccl_rel_ts.json.gz
	"$fx"/hta_alexnet.json.gz "$fx"/hta_compare_base.json.gz "$fx"/hta_amd_mi250.json.gz ../shared/fixtures/memory/cs336_memory_snapshot.pickle
	../shared/fixtures/memory/hta_memory_timeline.raw.json.gz)
work=$(mktemp -d)
pid=
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# start a server on db; sets pid and url
start() {
	./build/trainscope-server --listen 127.0.0.1:0 --db "$work/db" --threads "${SERVER_THREADS:-16}" \
		--max-client-uploads "${CLIENT_UPLOADS:-8}" --log-level warn >"$work/out" 2>>"$work/log" &
	pid=$!
	url=
	for _ in $(seq 100); do
		url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/out" || true)
		[ -n "$url" ] && return
		sleep 0.1
	done
	echo "the server did not start: $(cat "$work/log")" >&2
	exit 1
}

metric() { curl -s "$url/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

start
mkdir -p bench/results
out=bench/results/load_test-$(date -u +%Y%m%d-%H%M%S).txt
exec > >(tee "$out")
{
	echo "# bench/load_test.sh $(date -u +%FT%TZ), $(nproc) cores, $(uname -r)"
	echo "# server --threads ${SERVER_THREADS:-16} --max-client-uploads ${CLIENT_UPLOADS:-8}; files: ${files[*]##*/}"
	rc=0
	./build/bench/load_test "$url" "$secs" "$up" "$rd" "${files[@]}" || rc=$?
	before=$(metric 'trainscope_artifacts{status="ready"}')
	kill -TERM "$pid"
	wait "$pid" || rc=1
	start
	after=$(metric 'trainscope_artifacts{status="ready"}')
	echo "restart             database opens clean: $after artifacts ready (before the stop: $before), $(metric 'trainscope_artifacts{status="ingesting"}') ingesting"
	[ "$before" = "$after" ] || rc=1
	echo "exit                $rc"
}
exit "$rc"
