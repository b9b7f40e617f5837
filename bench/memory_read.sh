#!/bin/bash
# Usage: bench/memory_read.sh SERVER-BINARY   (needs /tmp/big/big_trace.json.gz: bench/make_big_trace.py --size-mb 1024 --out /tmp/big)
# VmHWM of a server after ingesting the 1 GB trace, then after GET /memory?points=0 (every point),
# then after GET /memory?points=2000 (what the run page asks)
srv=$1
d=$(mktemp -d); port=18483
$srv --listen 127.0.0.1:$port --db $d/t.db --log-level warn & pid=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:$port/healthz >/dev/null && break; sleep 0.1; done
curl -sS -X POST -H 'Expect:' -T /tmp/big/big_trace.json.gz "http://127.0.0.1:$port/api/v1/runs/b/artifacts?name=big&rank=0" -o /dev/null
kill $pid; wait $pid
# a fresh process on the same database: only the read's memory
$srv --listen 127.0.0.1:$port --db $d/t.db --log-level warn & pid=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:$port/healthz >/dev/null && break; sleep 0.1; done
echo "before the read: $(grep VmHWM /proc/$pid/status)"
s=$(date +%s.%N)
curl -sS "http://127.0.0.1:$port/api/v1/runs/b/memory?points=0" -o $d/all.json
e=$(date +%s.%N)
echo "read: $(echo "$e - $s" | bc) s, $(stat -c %s $d/all.json) bytes, points_total $(python3 -c "import json;print(json.load(open('$d/all.json'))['points_total'])"); after: $(grep VmHWM /proc/$pid/status)"
md5sum < $d/all.json
# the page's read: at most 2000 points, each the highest of its stretch (all points loaded, then picked)
s=$(date +%s.%N)
curl -sS "http://127.0.0.1:$port/api/v1/runs/b/memory?points=2000" -o $d/some.json
e=$(date +%s.%N)
echo "read of 2000 points: $(echo "$e - $s" | bc) s, $(stat -c %s $d/some.json) bytes; after: $(grep VmHWM /proc/$pid/status)"
md5sum < $d/some.json
kill $pid; wait $pid; rm -rf $d
