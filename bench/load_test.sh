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
#   on a team network each node is its own client), DB: a PostgreSQL URI (an
#   empty database) instead of a fresh SQLite file, SERVERS [1]: servers on it
#   (PostgreSQL only), uploaders and readers spread over them, every artifact
#   checked through another server than the one it was sent to
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
pids=
trap 'kill $pids 2>/dev/null || true; rm -rf "$work"' EXIT
nsrv=${SERVERS:-1}
db=${DB:-$work/db}

# start the servers on db; sets pids, url (the first) and urls (all, comma-separated)
start() {
	pids= urls=
	for k in $(seq "$nsrv"); do
		./build/trainscope-server --listen 127.0.0.1:0 --db "$db" --threads "${SERVER_THREADS:-16}" \
			--max-client-uploads "${CLIENT_UPLOADS:-8}" --log-level warn >"$work/out$k" 2>>"$work/log" &
		pids="$pids $!"
		u=
		for _ in $(seq 100); do
			u=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/out$k" || true)
			[ -n "$u" ] && break
			sleep 0.1
		done
		[ -n "$u" ] || { echo "a server did not start: $(cat "$work/log")" >&2; exit 1; }
		urls=${urls:+$urls,}$u
	done
	url=${urls%%,*}
}

metric() { curl -s "$url/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }

start
mkdir -p bench/results
out=bench/results/load_test-$(date -u +%Y%m%d-%H%M%S).txt
exec > >(tee "$out")
{
	echo "# bench/load_test.sh $(date -u +%FT%TZ), $(nproc) cores, $(uname -r)"
	echo "# $nsrv server(s) on $( [ -n "${DB:-}" ] && echo PostgreSQL || echo SQLite), each --threads ${SERVER_THREADS:-16} --max-client-uploads ${CLIENT_UPLOADS:-8}; files: ${files[*]##*/}"
	rc=0
	./build/bench/load_test "$urls" "$secs" "$up" "$rd" "${files[@]}" || rc=$?
	before=$(metric 'trainscope_artifacts{status="ready"}')
	# shellcheck disable=SC2086
	kill -TERM $pids
	for p in $pids; do wait "$p" || rc=1; done
	start
	after=$(metric 'trainscope_artifacts{status="ready"}')
	echo "restart             database opens clean: $after artifacts ready (before the stop: $before), $(metric 'trainscope_artifacts{status="ingesting"}') ingesting"
	[ "$before" = "$after" ] || rc=1
	echo "exit                $rc"
}
exit "$rc"
