#!/usr/bin/env python3
"""The first /steps read after 20 chunks of 2 MiB: its wall time, the server's CPU and page faults.

For each server given, alternating, REPS times (env, default 8): a fresh server warmed by one chunk
of another run and its /steps, the trace cut into chunks of 2 MiB as bench/chunks_bench.py cuts
it (bench/make_big_trace.py --size-mb 51, 20 chunks; TRACE=path.json: another trace), 0.3 s for
the growing thread to finish with them, then the read under `perf stat -e task-clock,page-faults
-p PID` (root, perf). Medians.

Usage: [REPS=8] [TRACE=path.json] bench/read_faults.py SERVER...
"""
import json, os, re, shutil, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb
servers = sys.argv[1:]
HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("TRACE"):
    text = open(os.environ["TRACE"]).read()
else:
    _work = tempfile.mkdtemp()
    _made = json.loads(subprocess.check_output([sys.executable, os.path.join(HERE, "make_big_trace.py"), "--size-mb", "51", "--out", _work]))
    text = open(_made["json"]).read()
    shutil.rmtree(_work)
bodies = cb.chunk_bodies(text, int(2.02 * 1048576))
res = {s: [] for s in servers}
for rep in range(int(os.environ.get("REPS", "8"))):
    for s in (servers if rep % 2 == 0 else servers[::-1]):
        work = tempfile.mkdtemp()
        srv, base = cb.start_server(s, work, quiet=True)
        try:
            cb.post(base, "/api/v1/runs/warm/artifacts?rank=0&name=w.json", bodies[-1])
            cb.get(base, "/api/v1/runs/warm/steps")
            for i, b in enumerate(bodies):
                cb.post(base, f"/api/v1/runs/j/artifacts?rank=0&name=p{i}.json", b)
            time.sleep(0.3)
            p = subprocess.Popen(["perf", "stat", "-e", "task-clock,page-faults", "-p", str(srv.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
            t0 = time.monotonic()
            cb.get(base, "/api/v1/runs/j/steps")
            w = (time.monotonic() - t0) * 1000
            time.sleep(0.1)
            p.send_signal(2)
            err = p.communicate()[1]
            tc = float(re.search(r"([\d.,]+) msec task-clock", err).group(1).replace(",", ""))
            pf = int(re.search(r"([\d,]+)\s+page-faults", err).group(1).replace(",", ""))
            res[s].append((w, tc, pf))
        finally:
            srv.terminate(); srv.wait(); shutil.rmtree(work)
for s, v in res.items(): print(f"{s}: the first /steps after 20 chunks, medians of {len(v)}: wall {statistics.median(a for a,b,c in v):.1f} ms, server CPU {statistics.median(b for a,b,c in v):.1f} ms, page faults {statistics.median(c for a,b,c in v):.0f}")
