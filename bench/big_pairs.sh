#!/usr/bin/env bash
# The large trace against Debian's json.load, side by side (issue 51): builds the ~1 GiB trace
# of bench/make_big_trace.py once (the V100 fixture's events, repeated in time, and a gzip -1
# copy), then N alternating pairs (default 5): the gzip copy uploaded to a fresh
# trainscope-server (SQLite in a temporary folder; wall time from curl's start to the answer,
# the server's peak RSS, VmHWM) and $PY (default /usr/bin/python3) json.load of the plain file.
# Prints each pair and the medians and their ratio.
#   bench/big_pairs.sh [--pairs N] [--size-mb M]    server: $TRAINSCOPE_SERVER (build-release/)
set -euo pipefail
BENCH=big_pairs
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
. "$HERE/lib.sh"
SERVER=${TRAINSCOPE_SERVER:-$ROOT/build-release/trainscope-server}
PY=${TRAINSCOPE_PYTHON:-/usr/bin/python3}
N=5 SIZE_MB=1024
while [ $# -gt 0 ]; do
	case $1 in
	--pairs) N=$2; shift 2 ;;
	--size-mb) SIZE_MB=$2; shift 2 ;;
	*) die "unknown option: $1" ;;
	esac
done
[ -x "$SERVER" ] || die "no server at $SERVER"
OUT=$(mktemp -d)
SPID=
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$OUT"' EXIT
INFO=$(python3 "$HERE/make_big_trace.py" --size-mb "$SIZE_MB" --out "$OUT")
JSON=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["json"])' "$INFO")
GZ=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["gz"])' "$INFO")
echo "$BENCH: $(stat -c %s "$JSON") bytes of JSON, $(stat -c %s "$GZ") gzip'd; $SERVER against $PY json.load"
ups=() pys=()
for i in $(seq "$N"); do
	rm -f "$OUT"/t.db*
	"$SERVER" --listen 127.0.0.1:0 --db "$OUT/t.db" --max-ratio 100000 >"$OUT/server.out" 2>"$OUT/server.err" &
	SPID=$!
	wait_port "$OUT"
	t0=$(now)
	resp=$(curl -sS -X POST -H 'Expect:' -T "$GZ" "http://127.0.0.1:$PORT/api/v1/runs/big/artifacts?name=big&rank=0")
	t1=$(now)
	grep -q '"status":"ready"' <<<"$resp" || die "not ready: ${resp:0:300}"
	hwm=$(awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$SPID/status")
	kill -TERM "$SPID"; wait "$SPID" || true; SPID=
	t2=$(now)
	"$PY" -c "import json; json.load(open('$JSON'))"
	t3=$(now)
	up=$(calc "$t1 - $t0" .2f) py=$(calc "$t3 - $t2" .2f)
	ups+=("$up") pys+=("$py")
	echo "$BENCH: pair $i: upload $up s (peak $hwm MiB), json.load $py s, ratio $(calc "$up / $py" .3f)"
done
mu=$(printf '%s\n' "${ups[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
mp=$(printf '%s\n' "${pys[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "$BENCH: medians: upload $mu s ($(calc "$(stat -c %s "$JSON") / 1e6 / $mu" .0f) MB/s of JSON), json.load $mp s, ratio $(calc "$mu / $mp" .3f)"
