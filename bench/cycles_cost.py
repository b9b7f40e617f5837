#!/usr/bin/env python3
"""What one more profiling cycle costs the rank's derivation as a run of cycles grows (issue 15:
"a chunk's cost is proportional to the chunk and the steps it touches, not to the run"; the QLoRA
guide's schedule profiles 1 step in 10, forever).

Takes one cycle of the GPU fixtures (tests/fixtures/gpu/train's first trace: 8 K events, 708
[memory] events, one step) and makes N cycles of it, each after the one before in time (a gap
of 1 ms), its ids (correlation, External id, Ev Idx) moved past the one before's and its step
number 10 on: one process profiled 1 step in 10. Starts a fresh trainscope-server
(--derive-quiet 0, --derive-parts as given) and uploads them as one run (rank 0), reading the
run's steps after each (that read derives the rank with the cycle: server/pipeline/runrank.h).
At each mark it reports the derivation's time (the read's), the server's CPU in it, the steps
the run answers, the server's peak memory so far (VmHWM) and its temporary files.

Usage: bench/cycles_cost.py SERVER [--cycles 400] [--marks 10,50,100,200,400] [--parts on|off]
Stdlib only; bench/results/cycles_cost-DATE.txt keeps runs.
"""
import argparse
import gzip
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ from the imports below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chunks_bench import get, post, server_cpu, start_server  # noqa: E402
from derive_cost import status_kib, temp_bytes  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDS = ("correlation", "External id", "Ev Idx")


def cycles(path, n):
    """n cycles of the trace at path, one after another in time, ids and step numbers moved on."""
    d = json.load(gzip.open(path, "rt"))
    ev = d.pop("traceEvents")
    timed = [e for e in ev if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed)
    top = max([e["args"][k] for e in ev if isinstance(e.get("args"), dict) for k in IDS
               if isinstance(e["args"].get(k), int)] + [0])
    for c in range(n):
        out = []
        for e in ev:
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = e["ts"] + c * (span + 1000)
            if isinstance(e.get("args"), dict):
                e["args"] = {k: (v + c * (top + 1) if k in IDS and isinstance(v, int) and v > 0 else v)
                             for k, v in e["args"].items()}
            m = re.match(r"ProfilerStep#(\d+)$", e.get("name") or "")
            if m:
                e["name"] = "ProfilerStep#%d" % (int(m.group(1)) + 10 * c)
            out.append(e)
        yield json.dumps(dict(d, traceEvents=out)).encode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("server")
    ap.add_argument("--cycles", type=int, default=400)
    ap.add_argument("--marks", default="10,50,100,200,400")
    ap.add_argument("--parts", default="on", choices=("on", "off"))
    a = ap.parse_args()
    marks = {int(x) for x in a.marks.split(",")}
    trace = sorted(f for f in os.listdir(os.path.join(ROOT, "tests/fixtures/gpu/train")) if f.endswith(".pt.trace.json.gz"))[0]
    work = tempfile.mkdtemp(prefix="cycles-")
    srv, base = start_server(a.server, work, ("--derive-quiet", "0", "--derive-parts", a.parts))
    try:
        total = 0
        for i, body in enumerate(cycles(os.path.join(ROOT, "tests/fixtures/gpu/train", trace), a.cycles), 1):
            total += len(body)
            post(base, f"/api/v1/runs/cycles/artifacts?rank=0&name=c{i}.json", body)
            c0, t0 = server_cpu(srv), time.monotonic()
            steps = json.loads(get(base, "/api/v1/runs/cycles/steps"))["steps"]
            dt, dc = time.monotonic() - t0, server_cpu(srv) - c0
            if i in marks:
                print(f"parts {a.parts:3}  cycles {i:4}  run {total / 2**20:7.1f} MiB  derivation {dt:6.3f} s"
                      f"  server cpu {dc:5.2f} s  steps {len(steps):4}"
                      f"  peak {status_kib(srv.pid, 'VmHWM') / 1024:6.1f} MiB"
                      f"  temp files {temp_bytes(srv.pid) / 2**20:6.1f} MiB", flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
