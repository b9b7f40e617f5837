#!/usr/bin/env python3
"""The first /steps read after 20 chunks of 2 MiB: its wall time, the server's CPU and page faults.

For each server given, alternating, REPS times (env, default 8): a fresh server warmed by one chunk
of another run and its /steps, the trace cut into chunks of 2 MiB as bench/chunks_bench.py cuts
it (bench/make_big_trace.py --size-mb 51, 20 chunks; TRACE=path.json: another trace), 0.3 s for
the growing thread to finish with them, then the read under `perf stat -e task-clock,page-faults
-p PID` (root, perf). Medians.

Usage: [REPS=8] [TRACE=path.json] bench/read_faults.py SERVER...
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chunks_bench as cb  # noqa: E402


def trace_text():
    """TRACE's text, else bench/make_big_trace.py --size-mb 51's."""
    if os.environ.get("TRACE"):
        with open(os.environ["TRACE"]) as f:
            return f.read()
    work = tempfile.mkdtemp(prefix="faults-trace-")
    try:
        made = json.loads(subprocess.check_output(
            [sys.executable, os.path.join(HERE, "make_big_trace.py"), "--size-mb", "51", "--out", work]))
        with open(made["json"]) as f:
            return f.read()
    finally:
        shutil.rmtree(work)


def perf_stat(server, warm, before, timed, settle=0.1):
    """(wall ms, server CPU ms, page faults) of timed(base) on a fresh server that first took warm
    as another run and its /steps, then before(base) (None: nothing), both untimed; the CPU and
    faults counted until settle seconds after timed() returns."""
    work = tempfile.mkdtemp(prefix="faults-")
    srv, base = cb.start_server(server, work, quiet=True)
    try:
        cb.post(base, "/api/v1/runs/warm/artifacts?rank=0&name=w.json", warm)
        cb.get(base, "/api/v1/runs/warm/steps")
        if before:
            before(base)
        p = subprocess.Popen(["perf", "stat", "-e", "task-clock,page-faults", "-p", str(srv.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        t0 = time.monotonic()
        timed(base)
        w = (time.monotonic() - t0) * 1000
        time.sleep(settle)
        p.send_signal(2)
        err = p.communicate()[1]
        tc = float(re.search(r"([\d.,]+) msec task-clock", err).group(1).replace(",", ""))
        pf = int(re.search(r"([\d,]+)\s+page-faults", err).group(1).replace(",", ""))
        return w, tc, pf
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


def main():
    servers = sys.argv[1:]
    bodies = cb.chunk_bodies(trace_text(), int(2.02 * 1048576))
    res = {s: [] for s in servers}

    def uploads(base):
        for i, b in enumerate(bodies):
            cb.post(base, f"/api/v1/runs/j/artifacts?rank=0&name=p{i}.json", b)
        time.sleep(0.3)

    for rep in range(int(os.environ.get("REPS", "8"))):
        for s in (servers if rep % 2 == 0 else servers[::-1]):
            res[s].append(perf_stat(s, bodies[-1], uploads, lambda base: cb.get(base, "/api/v1/runs/j/steps")))
    for s, v in res.items():
        print(f"{s}: the first /steps after {len(bodies)} chunks, medians of {len(v)}:"
              f" wall {statistics.median(a for a, b, c in v):.1f} ms, server CPU {statistics.median(b for a, b, c in v):.1f} ms,"
              f" page faults {statistics.median(c for a, b, c in v):.0f}")


if __name__ == "__main__":
    main()
