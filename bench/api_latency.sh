#!/usr/bin/env bash
# Latency benchmark of the analysis endpoints on a run of >= 2 million events.
#
# 1. Builds a trace from COPIES time-shifted copies of the real fixture
#    hta_v100_train_memory.json.gz (216,092 events each; bench/make_big_trace.py),
#    gzip -1. Kept in $WORK and reused by the next run with the same COPIES.
# 2. Starts a fresh trainscope-server on an empty temporary database, uploads
#    the gzip file as run "big" and times the upload (the answer comes once the
#    artifact is ingested and analysed); checks status ready and >= MIN_EVENTS.
# 3. Measures each endpoint with curl, one request at a time (service time
#    without queueing): the first request after the upload (which computes the
#    answer and fills the server's answer cache), then SAMPLES more.
# 4. Runs, for each endpoint,  wrk -t$WRK_THREADS -c$CONNS -d$DURATION --latency URL
#    on /steps, /ops?limit=50, /kernels?limit=50, /diagnosis, then (MIXED=1)
#    one run with bench/api_latency_mixed.lua rotating the four paths, and
#    (UNCACHED=1) one more where every URL carries a new ignored nc=N
#    parameter, so that the server's answer cache never hits: the rows above
#    measure repeated identical GETs, this one answers computed from SQLite.
# 5. Prints a table (requests/s, p50, p90, p99, max from wrk's --latency
#    output) with machine info and event count, and writes it to
#    bench/results/api_latency-DATE.txt (raw wrk output: ...-DATE.raw.txt).
#
# Usage:  bench/api_latency.sh            (full run: 6 x 30 s, about 4 minutes)
#         DURATION=3s bench/api_latency.sh  (smoke run)
# Environment (defaults in brackets):
#   DURATION [30s]  wrk duration per endpoint      CONNS [32]  wrk connections
#   WRK_THREADS [2] wrk threads                    MIXED [1]   also the mixed run
#   UNCACHED [1]    also the mixed run with the answer cache bypassed
#   COPIES [11]     fixture copies (11 = 2,377,012 events)
#   MIN_EVENTS [2000000]  fail if the upload reports fewer events
#   SAMPLES [20]    sequential curl requests per endpoint
#   TARGET_P99_MS [20]    p99 target shown in the verdict column
#   SERVER_THREADS  --threads for the server [server default, 16]
#   WRK_EXTRA       extra wrk options, e.g. "--timeout 10s" [none: wrk's 2 s
#                   timeout; timed-out requests are not in wrk's percentiles,
#                   so they are shown in the errors column]
#   WORK [bench/out/api_latency]  where the trace is kept (shared by runs; a
#                   lock serialises its generation)
#   KEEP [0]        1: keep this run's database and server log (each run has
#                   its own temporary folder, so that runs never share a db)
#   TRAINSCOPE_SERVER [build/trainscope-server]  server binary
# Needs: python3, curl, gzip, wrk (installed with apt-get if missing and root).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SERVER=${TRAINSCOPE_SERVER:-$ROOT/build/trainscope-server}
WORK=${WORK:-$HERE/out/api_latency}
RESULTS=$HERE/results
DURATION=${DURATION:-30s}
CONNS=${CONNS:-32}
WRK_THREADS=${WRK_THREADS:-2}
MIXED=${MIXED:-1}
UNCACHED=${UNCACHED:-1}
COPIES=${COPIES:-11}
MIN_EVENTS=${MIN_EVENTS:-2000000}
SAMPLES=${SAMPLES:-20}
TARGET_P99_MS=${TARGET_P99_MS:-20}
SERVER_THREADS=${SERVER_THREADS:-}
WRK_EXTRA=${WRK_EXTRA:-}
KEEP=${KEEP:-0}
RUN=big
PATHS=(
	"/api/v1/runs/$RUN/steps"
	"/api/v1/runs/$RUN/ops?limit=50"
	"/api/v1/runs/$RUN/kernels?limit=50"
	"/api/v1/runs/$RUN/diagnosis"
)

case ${1:-} in
-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) echo "unknown argument: $1 (settings are environment variables, see --help)" >&2; exit 2 ;;
esac
BENCH=api_latency
. "$HERE/lib.sh"
[ -x "$SERVER" ] || die "no server at $SERVER (cmake --build build -j2, or set TRAINSCOPE_SERVER)"
for c in python3 curl gzip; do command -v $c >/dev/null || die "$c is needed"; done
if ! command -v wrk >/dev/null; then
	[ "$(id -u)" = 0 ] || die "wrk is needed (apt-get install -y wrk)"
	echo "== installing wrk"
	apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
	command -v wrk >/dev/null || die "could not install wrk"
fi
mkdir -p "$WORK" "$RESULTS"
RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/api_latency.XXXXXX")

SPID=
cleanup() {
	if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
		kill -TERM "$SPID"; wait "$SPID" || true
	fi
	if [ "$KEEP" = 1 ]; then
		echo "kept: $RUNDIR (database t.db, server.out, server.err)"
	else
		rm -rf "$RUNDIR"
	fi
}
trap cleanup EXIT

jget() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d=d.get("artifact",d); print(d[sys.argv[2]])' "$1" "$2"; }

# Two runs at once would measure each other: the second waits for the first.
exec 8>"$WORK/.run.lock"
flock -n 8 || { echo "== another api_latency.sh run holds $WORK/.run.lock: waiting"; flock 8; }

# 1. The trace (reused when $WORK has one made with the same COPIES).
exec 9>"$WORK/.lock"
flock 9
INFO_FILE=$WORK/trace.info
if [ -s "$INFO_FILE" ] && [ "$(jget "$(cat "$INFO_FILE")" copies)" = "$COPIES" ] &&
	[ -s "$(jget "$(cat "$INFO_FILE")" gz)" ]; then
	echo "== reusing the trace in $WORK ($COPIES copies)"
else
	echo "== generating a trace of $COPIES fixture copies in $WORK"
	rm -f "$INFO_FILE"
	python3 "$HERE/make_big_trace.py" --copies "$COPIES" --out "$WORK" >"$INFO_FILE.tmp"
	mv "$INFO_FILE.tmp" "$INFO_FILE"
	rm -f "$WORK/big_trace.json"	# only the gzip copy is uploaded
fi
INFO=$(cat "$INFO_FILE")
flock -u 9
echo "$INFO"
GZ=$(jget "$INFO" gz)
GZ_BYTES=$(stat -c %s "$GZ")
JSON_BYTES=$(jget "$INFO" json_bytes)

# 2. Fresh server on an empty database; the port is read from its first line.
DB=$RUNDIR/t.db
SARGS=(--listen 127.0.0.1:0 --db "$DB")
[ -n "$SERVER_THREADS" ] && SARGS+=(--threads "$SERVER_THREADS")
"$SERVER" "${SARGS[@]}" >"$RUNDIR/server.out" 2>"$RUNDIR/server.err" 8>&- 9>&- &
SPID=$!
wait_port "$RUNDIR"
BASE=http://127.0.0.1:$PORT
echo "== server pid $SPID on port $PORT"

# curl -T streams the file (same bytes as --data-binary @FILE, without first
# reading it into curl's memory); "Expect:" skips the 100-continue round trip.
echo "== uploading $GZ ($(calc "$GZ_BYTES / 1048576" .1f) MiB)"
t0=$(now)
RESP=$(curl -sS -X POST -H 'Expect:' -T "$GZ" "$BASE/api/v1/runs/$RUN/artifacts?name=big.json.gz") ||
	die "upload failed"
t1=$(now)
UPLOAD_S=$(calc "$t1 - $t0" .2f)
echo "$RESP" | cut -c1-400
grep -q '"status":"ready"' <<<"$RESP" || die "artifact not ready: $RESP"
EVENTS=$(jget "$RESP" events)
[ "$EVENTS" -ge "$MIN_EVENTS" ] || die "only $EVENTS events (< $MIN_EVENTS): $RESP"
echo "== upload: $UPLOAD_S s, $EVENTS events"

# 3. Single requests: the first after the upload, then min/median/max of
#    SAMPLES sequential ones.
SINGLE=
for p in "${PATHS[@]}"; do
	read -r code first < <(curl -sS -o "$RUNDIR/resp.json" -w '%{http_code} %{time_total}\n' "$BASE$p")
	[ "$code" = 200 ] || die "GET $p answered $code: $(head -c 300 "$RUNDIR/resp.json")"
	bytes=$(stat -c %s "$RUNDIR/resp.json")
	times=$(for _ in $(seq "$SAMPLES"); do curl -sS -o /dev/null -w '%{time_total}\n' "$BASE$p"; done)
	SINGLE+=$(python3 - "$p" "$bytes" "$first" $times <<'EOF'
import statistics, sys
p, b, first = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) * 1000
t = sorted(float(x) * 1000 for x in sys.argv[4:])
print(f"{p:<34} {b:>9} {first:>8.2f} {t[0]:>8.2f} {statistics.median(t):>8.2f} {t[-1]:>8.2f}")
EOF
)$'\n'
done

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# 4. wrk, one endpoint at a time, then (MIXED=1) the four rotated.
STAMP=$(date +%Y%m%d-%H%M%S)
RAW=$RESULTS/api_latency-$STAMP.raw.txt
: >"$RAW"
ROWS=
FMT='%-34s %9s %9s %9s %9s %9s %7s %8s  %s\n'
CLK_TCK=$(getconf CLK_TCK)
srv_cpu_ticks() { awk '{print $14 + $15}' "/proc/$SPID/stat"; }
# wrk prints 850.00us / 1.23ms / 2.01s: to ms.
ms() { python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", sys.argv[1])
f = {"us": 1e-3, "ms": 1, "s": 1e3, "m": 6e4, "h": 3.6e6}
print(format(float(m.group(1)) * f[m.group(2)], ".2f") if m else sys.argv[1])' "$1"; }
bench() { # label, wrk args...
	local label=$1 out rps p50 p90 p99 max errs verdict
	shift
	echo "== wrk -t$WRK_THREADS -c$CONNS -d$DURATION --latency${WRK_EXTRA:+ $WRK_EXTRA} $*"
	# shellcheck disable=SC2086
	local cpu0 cpu1 nreq cpu_ms
	cpu0=$(srv_cpu_ticks)
	out=$(wrk -t"$WRK_THREADS" -c"$CONNS" -d"$DURATION" --latency $WRK_EXTRA "$@")
	cpu1=$(srv_cpu_ticks)
	printf '### %s\n%s\n\n' "$label" "$out" >>"$RAW"
	echo "$out" | sed 's/^/    /'
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	p50=$(ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
	p90=$(ms "$(awk '$1 == "90%" {print $2}' <<<"$out")")
	p99=$(ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
	max=$(ms "$(awk '$1 == "Latency" && NF >= 4 {print $4; exit}' <<<"$out")")
	# errors: non-2xx answers + socket errors (connect, read, write, timeout)
	errs=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(",", ""); n += $4 + $6 + $8 + $10} END {print n + 0}' <<<"$out")
	# server CPU (user + system) per request, from /proc/PID/stat
	nreq=$(awk '/requests in/ {print $1}' <<<"$out")
	cpu_ms=$(calc "($cpu1 - $cpu0) * 1000 / $CLK_TCK / max(1, ${nreq:-0})" .3f)
	verdict=$(python3 -c "print('ok' if float('$p99') < $TARGET_P99_MS else 'MISS')" 2>/dev/null || echo '?')
	ROWS+=$(printf "$FMT" "$label" "$rps" "$p50" "$p90" "$p99" "$max" "$errs" "$cpu_ms" "$verdict")$'\n'
}
for p in "${PATHS[@]}"; do
	bench "$p" "$BASE$p"
done
if [ "$MIXED" = 1 ]; then
	bench "mixed (4 paths rotated)" -s "$HERE/api_latency_mixed.lua" "$BASE/" -- "${PATHS[@]}"
fi
if [ "$UNCACHED" = 1 ]; then
	bench "mixed, answer cache bypassed" -s "$HERE/api_latency_mixed.lua" "$BASE/" -- --bust "${PATHS[@]}"
fi
RSS_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$SPID/status")

# 5. Report.
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
[ -n "$CPU" ] || CPU=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
REV="commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$ROOT" diff --quiet HEAD -- server common 2>/dev/null || REV+=", server/ or common/ modified"
REPORT=$RESULTS/api_latency-$STAMP.txt
{
	echo "trainscope API latency benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "machine:  $(nproc) CPUs, ${CPU:-unknown CPU}, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
	echo "server:   $SERVER (file dated $(date -u -r "$SERVER" '+%Y-%m-%d %H:%M UTC'); work tree at $REV)"
	echo "          threads ${SERVER_THREADS:-default (16)}, peak RSS $(calc "${RSS_KB:-0} / 1024" .0f) MiB"
	echo "run:      '$RUN', $EVENTS events ($(jget "$INFO" fixture_events) x $(jget "$INFO" copies) copies of hta_v100_train_memory.json.gz),"
	echo "          $(calc "$JSON_BYTES / 1048576" .1f) MiB JSON, $(calc "$GZ_BYTES / 1048576" .1f) MiB gzip -1"
	echo "upload:   $UPLOAD_S s (POST of the gzip file until the ready answer; $(calc "$EVENTS / $UPLOAD_S / 1e6" .2f) M events/s)"
	echo "loadavg:  $LOAD0 before the wrk runs, $(cut -d' ' -f1-3 /proc/loadavg) after (other work on the machine skews results)"
	echo "load:     wrk -t$WRK_THREADS -c$CONNS -d$DURATION --latency${WRK_EXTRA:+ $WRK_EXTRA} URL  (wrk runs on the same machine)"
	echo
	echo "Under load (latencies in ms; errors = non-2xx + socket errors incl. wrk timeouts;"
	echo " srv-cpu = server user+system CPU ms per request; p99 target < $TARGET_P99_MS ms):"
	printf "$FMT" endpoint "req/s" p50 p90 p99 max errors "srv-cpu" "p99"
	printf '%s' "$ROWS"
	echo
	echo "One request at a time, no load (curl time_total in ms: the first request after the upload,"
	echo "then min/median/max of $SAMPLES sequential requests; bytes = JSON answer size):"
	printf '%-34s %9s %8s %8s %8s %8s\n' endpoint "bytes" first min median max
	printf '%s' "$SINGLE"
} | tee "$REPORT"
echo
echo "written: $REPORT"
echo "raw wrk output: $RAW"
