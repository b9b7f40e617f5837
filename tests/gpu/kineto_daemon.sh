#!/bin/sh
# tests/gpu/kineto_daemon.sh: the Kineto daemon path against a real PyTorch
# process, on a GPU machine (not in CI: it needs torch and CUDA). The
# training loop of train_loop.py runs with KINETO_USE_DAEMON=1 and no code
# change; tests/collector/kineto_serve (collector/kineto.c alone) serves as
# the node's daemon with two captures armed for rank 0: 3 steps, then 2
# seconds with memory. Kineto polls every 5 s, so the second is handed about
# 5 s after the first is written.
#
# Usage: BUILD=build OUT=/tmp/kineto-out tests/gpu/kineto_daemon.sh
# Writes under OUT: serve.txt (one "done ..." line per capture), serve.log,
# loop.log (Kineto's log), and the traces. Exit 0 when both traces came whole.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/kineto-out}
mkdir -p "$OUT"
# under /tmp: Kineto writes on-demand traces only there (or KINETO_ONDEMAND_TRACE_DIR)
spool=$(mktemp -d /tmp/kineto-spool.XXXXXX)
"$BUILD/tests/kineto_serve" --timeout 240 "$spool" 0:k1:steps=3 0:k2:seconds=2:cpu,cuda,memory \
	>"$OUT/serve.txt" 2>"$OUT/serve.log" &
serve=$!
sleep 0.5
KINETO_USE_DAEMON=1 KINETO_LOG_LEVEL=0 RANK=0 timeout 240 \
	python3 tests/gpu/train_loop.py --steps 100000 --warmup 5 >"$OUT/loop.json" 2>"$OUT/loop.log" &
loop=$!
wait $serve
rc=$?
kill $loop 2>/dev/null
wait $loop 2>/dev/null
cp "$spool"/*.pt.trace.json "$OUT"/ 2>/dev/null
cat "$OUT/serve.txt"
tail -3 "$OUT/serve.log"
grep -i -E 'dyno|daemon|on-demand|ondemand|trace' "$OUT/loop.log" | head -20
ls -la "$OUT"
rm -rf "$spool"
exit $rc
