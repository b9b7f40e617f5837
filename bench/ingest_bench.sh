#!/usr/bin/env bash
# Ingest benchmark: trainscope-server vs. python's json.load on one large trace.
#
# Builds a ~1 GiB trace by repeating the events of the real fixture
# hta_v100_train_memory.json.gz (bench/make_big_trace.py), plus a gzip -1 copy.
# Starts a fresh trainscope-server on an empty database, uploads the gzip copy
# (and with --plain also the uncompressed file, as a second run) and measures:
#   - upload wall-clock time, from the start of curl to the JSON answer
#     (the answer comes only once the artifact is fully ingested);
#   - throughput in MiB/s of *uncompressed* trace;
#   - server peak RSS (VmHWM from /proc/PID/status);
#   - size of the SQLite database files after ingest;
# and compares with `python3 -c 'import json; json.load(open(F))'` on the
# uncompressed file (time, and peak RSS via /usr/bin/time if installed).
#
# Usage:  bench/ingest_bench.sh [--size-mb N] [--plain] [--keep] [--db URI]
#   --size-mb N  trace size in MiB (default: $SIZE_MB or 1024)
#   --db URI     a PostgreSQL database (empty) instead of a fresh SQLite file
#   --plain      also upload the uncompressed file (second run)
#   --keep       keep the generated traces in bench/out/
# Server binary: $TRAINSCOPE_SERVER, default build/trainscope-server, built with
#   cmake -S . -B build -DBUILD_TESTS=OFF && cmake --build build -j2
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=$HERE/out
SERVER=${TRAINSCOPE_SERVER:-$ROOT/build/trainscope-server}
SIZE_MB=${SIZE_MB:-1024}
PLAIN=0 KEEP=0 URI=
while [ $# -gt 0 ]; do
	case $1 in
	--db) URI=$2; shift 2 ;;
	--size-mb) SIZE_MB=$2; shift 2 ;;
	--plain) PLAIN=1; shift ;;
	--keep) KEEP=1; shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
done
BENCH=ingest_bench
. "$HERE/lib.sh"
[ -x "$SERVER" ] || die "no server at $SERVER (build it: cmake -S . -B build -DBUILD_TESTS=OFF && cmake --build build -j2)"
command -v curl >/dev/null || die "curl is needed"
mkdir -p "$OUT"

SPID=
cleanup() {
	if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
		kill -TERM "$SPID"; wait "$SPID" || true
	fi
	[ "$KEEP" = 1 ] || rm -f "$OUT/big_trace.json" "$OUT/big_trace.json.gz"
}
trap cleanup EXIT

# jget JSON KEY: one field of a flat JSON object, or of {"artifact":{...}}.
jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d=d.get("artifact",d); print(d[sys.argv[2]])' "$1" "$2"; }
mib() { calc "$1 / 1048576" .1f; }

# 1. Generate the trace.
echo "== generating a ${SIZE_MB} MiB trace in $OUT"
INFO=$(python3 "$HERE/make_big_trace.py" --size-mb "$SIZE_MB" --out "$OUT")
echo "$INFO"
JSON=$(jget "$INFO" json) GZ=$(jget "$INFO" gz)
JSON_BYTES=$(jget "$INFO" json_bytes) GZ_BYTES=$(jget "$INFO" gz_bytes)
EVENTS=$(jget "$INFO" events)
FIX_EVENTS=$(jget "$INFO" fixture_events) COPIES=$(jget "$INFO" copies)

# 2. Fresh server on an empty database; the port is read from its first line.
DB=$OUT/t.db
rm -f "$DB" "$DB-wal" "$DB-shm"
"$SERVER" --listen 127.0.0.1:0 --db "${URI:-$DB}" --max-ratio 100000 \
	>"$OUT/server.out" 2>"$OUT/server.err" &
SPID=$!
wait_port "$OUT"
echo "== server pid $SPID on port $PORT"

# upload FILE RUN: POST the file, check the answer, set SECS and HWM_KB.
# curl -T -X POST streams the file (--data-binary @FILE would first read it
# all into curl's memory); "Expect:" skips the 100-continue round trip.
# Peak RSS is reset before each upload (clear_refs 5) so each run gets its own
# figure; if the kernel refuses, VmHWM covers everything since server start.
upload() {
	echo 5 >"/proc/$SPID/clear_refs" 2>/dev/null || true
	local t0 t1 resp
	t0=$(now)
	resp=$(curl -sS -X POST -H 'Expect:' -T "$1" \
		"http://127.0.0.1:$PORT/api/v1/runs/$2/artifacts?name=big_trace&rank=0") ||
		die "upload of $1 failed"
	t1=$(now)
	echo "$resp" | cut -c1-300
	grep -q '"status":"ready"' <<<"$resp" || die "artifact not ready: $resp"
	[ "$(jget "$resp" events)" = "$EVENTS" ] ||
		die "expected $EVENTS events ($FIX_EVENTS x $COPIES), got: $resp"
	SECS=$(calc "$t1 - $t0" .2f)
	HWM_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$SPID/status")
}

echo "== uploading gzip copy"
upload "$GZ" bench-gzip
GZ_SECS=$SECS GZ_HWM=$HWM_KB
if [ "$PLAIN" = 1 ]; then
	echo "== uploading uncompressed file"
	upload "$JSON" bench-plain
	PL_SECS=$SECS PL_HWM=$HWM_KB
fi

# 3. Stop the server cleanly (checkpoints the WAL), then size the database.
PG_BYTES=$(curl -sS "http://127.0.0.1:$PORT/metrics" | awk '/^trainscope_database_bytes / {print $2}')
kill -TERM "$SPID"; wait "$SPID" || die "server exited with status $?"
SPID=
DB_FILES= DB_BYTES=0
for f in t.db t.db-wal t.db-shm; do
	[ -e "$OUT/$f" ] || continue
	DB_FILES+="$f $(mib "$(stat -c %s "$OUT/$f")") MiB, "
	DB_BYTES=$((DB_BYTES + $(stat -c %s "$OUT/$f")))
done

# 4. python3 json.load on the uncompressed file.
echo "== python3 json.load"
PYCODE="import json; json.load(open('$JSON'))"
if [ -x /usr/bin/time ]; then
	/usr/bin/time -f '%e %M' -o "$OUT/py.time" python3 -c "$PYCODE"
	read -r PY_SECS PY_KB <"$OUT/py.time"
	PY_RSS=$PY_KB
else
	t0=$(now); python3 -c "$PYCODE"; t1=$(now)
	PY_SECS=$(calc "$t1 - $t0" .2f)
	PY_RSS="n/a"
	echo "(no /usr/bin/time: install apt package 'time' for python's peak RSS)"
fi

# 5. Summary.
MB=$(mib "$JSON_BYTES")
GZ_MB=$(mib "$GZ_BYTES")
FMT='%-20s %10s %9s %8s %9s %13s %10s\n'
row() { # name input_MiB seconds peak_rss_KiB(or text)
	local rss=$4
	[[ $rss =~ ^[0-9]+$ ]] && rss=$(calc "$rss / 1024" .0f)
	printf "$FMT" "$1" "$2" "$EVENTS" "$3" "$(calc "$MB / $3" .1f)" "$rss" \
		"$(calc "$PY_SECS / $3" .1f)x"
}
echo
echo "Trace: $MB MiB uncompressed, $GZ_MB MiB gzip -1, $EVENTS events ($FIX_EVENTS x $COPIES copies)"
printf "$FMT" "" "input MiB" events seconds "MiB/s" "peak RSS MiB" "vs python"
row "trainscope (gzip)" "$GZ_MB" "$GZ_SECS" "$GZ_HWM"
[ "$PLAIN" = 1 ] && row "trainscope (plain)" "$MB" "$PL_SECS" "$PL_HWM"
row "python3 json.load" "$MB" "$PY_SECS" "$PY_RSS"
if [ -n "$URI" ]; then
	echo "PostgreSQL database after ingest: $(mib "${PG_BYTES:-0}") MiB (pg_database_size)"
else
	echo "SQLite database after ingest: $(mib "$DB_BYTES") MiB (${DB_FILES%, })"
fi
echo "(MiB/s = uncompressed MiB / seconds; vs python = python seconds / seconds;"
echo " MiB = 2^20 bytes; server peak RSS = VmHWM during that upload)"
