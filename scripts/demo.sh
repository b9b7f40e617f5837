#!/bin/sh
# scripts/demo.sh: loads the H200 recordings of tests/fixtures/gpu/ (README.md there) into a
# running server as thirteen runs, one a folder, named after it: each folder's traces, the
# train run's memory timeline export and snapshot, and dist's two ranks as ranks 0 and 1.
# Waits up to 30 s for $TRAINSCOPE_URL/healthz (default http://127.0.0.1:8470), sends
# $TRAINSCOPE_TOKEN as a bearer token when set, prints one line per run and the page to
# open; exits 1 when an upload fails (its answer printed), 2 when no server answered.
# Running it again is harmless: the same bytes uploaded to a run again answer 200.
set -eu
cd "$(dirname "$0")/.."
url=${TRAINSCOPE_URL:-http://127.0.0.1:8470}
url=${url%/}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# curl reads the header from a file, so that the token is not on a command line
: >"$tmp/headers"
[ -z "${TRAINSCOPE_TOKEN:-}" ] || printf 'Authorization: Bearer %s\n' "$TRAINSCOPE_TOKEN" >"$tmp/headers"

i=0
until curl -fsS -o /dev/null --max-time 2 "$url/healthz" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 60 ] || { echo "demo: no server answered $url/healthz for 30 s (start it: ./build/trainscope-server &)" >&2; exit 2; }
	sleep 0.5
done

# upload RUN RANK FILE: prints the answer's status and keeps its body in $tmp/answer
upload() {
	curl -sS -o "$tmp/answer" -w '%{http_code}' -H @"$tmp/headers" -H 'Expect:' \
		--data-binary @"$3" "$url/api/v1/runs/$1/artifacts?rank=$2&name=$(basename "$3")" || echo 000
}

failed=0
runs=0
for dir in tests/fixtures/gpu/*/; do
	run=$(basename "$dir")
	files=0 new=0 bytes=0
	for f in "$dir"*.pt.trace.json.gz "$dir"*.memory.raw.json.gz "$dir"*.snapshot.pickle; do
		[ -f "$f" ] || continue
		# dist: rank0.*, rank1.*; every other run is one process, rank 0
		case $(basename "$f") in rank[0-9]*) rank=$(basename "$f" | sed 's/^rank\([0-9]*\).*/\1/') ;; *) rank=0 ;; esac
		code=$(upload "$run" "$rank" "$f")
		case $code in
		201) new=$((new + 1)) ;;
		200) ;;
		*)
			echo "demo: $run: $(basename "$f"): HTTP $code: $(cat "$tmp/answer" 2>/dev/null)" >&2
			failed=$((failed + 1))
			continue ;;
		esac
		files=$((files + 1))
		bytes=$((bytes + $(wc -c <"$f")))
	done
	runs=$((runs + 1))
	printf '%-11s %d file(s), %d KiB, %d new\n' "$run" "$files" $((bytes / 1024)) "$new"
done
[ $failed = 0 ] || { echo "demo: $failed upload(s) failed" >&2; exit 1; }
echo "demo: $runs runs on $url; open $url/"
