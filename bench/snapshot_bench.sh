#!/usr/bin/env bash
# Snapshot benchmark: a large memory snapshot uploaded to trainscope-server,
# against Python's pickle.load of the same file.
#
# Builds the snapshot with bench/make_big_snapshot.py from the real fixture
# cs336_memory_snapshot.pickle (its device trace repeated, frames shared
# through the memo as PyTorch writes them; --unique-frames: a frame list of
# its own per entry), starts a fresh server on an empty SQLite file, uploads
# it and measures the upload's wall-clock time until the answer (the answer
# comes once the artifact is stored), the server's peak RSS (VmHWM) and the
# entries read; then `pickle.load` of the file with /usr/bin/time.
#
# Usage:  bench/snapshot_bench.sh [--size-mb N] [--unique-frames] [--keep] [--file F]
#   --file F  an existing snapshot instead of generating one (kept)
# Server binary: $TRAINSCOPE_SERVER, default build/trainscope-server.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=$HERE/out
SERVER=${TRAINSCOPE_SERVER:-$ROOT/build/trainscope-server}
SIZE_MB=1024 UNIQUE= KEEP=0 FILE=
while [ $# -gt 0 ]; do
	case $1 in
	--size-mb) SIZE_MB=$2; shift 2 ;;
	--unique-frames) UNIQUE=--unique-frames; shift ;;
	--keep) KEEP=1; shift ;;
	--file) FILE=$2; KEEP=1; shift 2 ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done
BENCH=snapshot_bench
. "$HERE/lib.sh"
[ -x "$SERVER" ] || die "no server at $SERVER"
mkdir -p "$OUT"
SNAP=${FILE:-$OUT/big_snapshot.pickle}
SPID=
cleanup() {
	if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then kill -TERM "$SPID"; wait "$SPID" || true; fi
	rm -f "$OUT/snap.db" "$OUT/snap.db-wal" "$OUT/snap.db-shm"
	[ "$KEEP" = 1 ] || rm -f "$SNAP"
}
trap cleanup EXIT

if [ -z "$FILE" ]; then
	echo "== generating a ${SIZE_MB} MiB snapshot ${UNIQUE}"
	python3 "$HERE/make_big_snapshot.py" "$SNAP" --size-mb "$SIZE_MB" $UNIQUE
fi
BYTES=$(stat -c %s "$SNAP")

rm -f "$OUT/snap.db"*
"$SERVER" --listen 127.0.0.1:0 --db "$OUT/snap.db" >"$OUT/server.out" 2>"$OUT/server.err" &
SPID=$!
wait_port "$OUT"

t0=$(now)
resp=$(curl -sS -X POST -H 'Expect:' -T "$SNAP" "http://127.0.0.1:$PORT/api/v1/runs/snap/artifacts?name=big&rank=0")
t1=$(now)
echo "$resp" | cut -c1-300
grep -q '"status":"ready"' <<<"$resp" || die "not stored: $resp"
EVENTS=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["artifact"]["events"])' "$resp")
SECS=$(calc "$t1 - $t0" .2f)
HWM=$(awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$SPID/status")
kill -TERM "$SPID"; wait "$SPID" || die "server exited with status $?"
SPID=

echo "== python3 pickle.load"
/usr/bin/time -f '%e %M' -o "$OUT/py.time" python3 -c "import pickle; pickle.load(open('$SNAP', 'rb'))"
read -r PY_SECS PY_KB <"$OUT/py.time"

MB=$(calc "$BYTES / 1048576" .1f)
echo
echo "Snapshot: $(basename "$SNAP"), $MB MiB, $EVENTS trace entries"
echo "Server: $SERVER"
printf '%-22s %9s %9s %13s\n' "" seconds "MiB/s" "peak RSS MiB"
printf '%-22s %9s %9s %13s\n' "trainscope upload" "$SECS" "$(calc "$MB / $SECS" .1f)" "$HWM"
printf '%-22s %9s %9s %13s\n' "python3 pickle.load" "$PY_SECS" "$(calc "$MB / $PY_SECS" .1f)" "$(calc "$PY_KB / 1024" .0f)"
