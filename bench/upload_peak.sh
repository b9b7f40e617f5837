#!/usr/bin/env bash
# One upload to a fresh server: seconds from the start of curl to the answer (the
# artifact fully ingested and analysed) and the server's peak RSS (VmHWM) at it.
#
# Usage:  bench/upload_peak.sh SERVER FILE    (e.g. a bench/make_big_trace.py trace's .gz)
set -euo pipefail
S=$1
F=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
P=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$S" --listen 127.0.0.1:$P --db "$D/t.db" --max-ratio 100000 >"$D/server.out" 2>&1 &
SP=$!
until curl -s -o /dev/null "http://127.0.0.1:$P/api/v1/runs"; do sleep 0.05; done
t0=$(date +%s.%N)
curl -sS -f -X POST -H 'Expect:' -T "$F" "http://127.0.0.1:$P/api/v1/runs/p/artifacts?name=$(basename "$F")&rank=0" >/dev/null
t1=$(date +%s.%N)
h=$(awk '/^VmHWM:/ {print int($2 / 1024)}' /proc/$SP/status)
kill $SP
wait $SP 2>/dev/null || true
echo "$(basename "$F"): $(echo "$t1 - $t0" | bc) s, peak $h MiB"
