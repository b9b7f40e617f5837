#!/bin/sh
# The long run: a fresh trainscope-server takes N uploads (default 1000) of
# distinct real traces from 4 clients (bench/soak.py: every 25th the 54 MB
# V100 fixture), and its RSS after them must stay under 150 MB (glibc arenas
# of many threads and freed-but-kept heap grew it to 430 MB after 60 uploads).
# Results go to bench/results/soak-DATE.txt.
#   bench/soak.sh [UPLOADS]
# Server binary: $TRAINSCOPE_SERVER, default build/trainscope-server.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
server=${TRAINSCOPE_SERVER:-$root/build/trainscope-server}
n=${1:-1000}
tmp=$(mktemp -d)
out="$here/results/soak-$(date -u +%Y%m%d-%H%M%S).txt"
mkdir -p "$here/results"
"$server" --listen 127.0.0.1:0 --db "$tmp/soak.db" --log-level warn >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
i=0
until port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/out") && [ -n "$port" ]; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$tmp/err" >&2; exit 1; }; sleep 0.1
done
echo "# bench/soak.sh $n on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores (load $(cut -d' ' -f1 /proc/loadavg)), $(git -C "$root" rev-parse --short HEAD)" | tee "$out"
rc=0
python3 "$here/soak.py" --port "$port" --pid "$pid" --uploads "$n" --fixtures "$root/../shared/fixtures/traces" 2>&1 |
	tee -a "$out" || rc=$?
tail -1 "$out" | grep -q '^after' || rc=1
echo "database: $(du -m "$tmp/soak.db" | cut -f1) MB" | tee -a "$out"
grep -q "RSS [0-9.]* MB, peak" "$out" && awk '/^after/ {exit !($9 + 0 < 150)}' "$out" || rc=1
exit $rc
