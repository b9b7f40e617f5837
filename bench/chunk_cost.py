#!/usr/bin/env python3
"""What one chunk of a run costs the server: N chunks of about 1 MiB, cut from a trace at event
boundaries (as bench/chunks_bench.py cuts them), uploaded one after another to a fresh server as
one run; prints the mean time per chunk for each 100, the total, and the server's CPU time.

Usage: bench/chunk_cost.py SERVER TRACE.json [N]   (TRACE: e.g. bench/make_big_trace.py's output)
"""
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402


def main():
    server, trace = sys.argv[1], sys.argv[2]
    nmax = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    with open(trace) as f:
        text = f.read()
    bodies = cb.chunk_bodies(text, 1048576)[:nmax]
    del text
    work = tempfile.mkdtemp(prefix="chunk-cost-")
    srv, base = cb.start_server(server, work)
    try:
        times = []
        for i, b in enumerate(bodies):
            t = time.monotonic()
            cb.post(base, f"/api/v1/runs/chunks/artifacts?rank=0&name=part{i}.json", b)
            times.append(time.monotonic() - t)
        for k in range(0, len(times), 100):
            seg = times[k:k + 100]
            print(f"chunks {k}-{k + len(seg) - 1}: {sum(seg) / len(seg) * 1000:.1f} ms each")
        with open(f"/proc/{srv.pid}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        cpu = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
        print(f"{len(bodies)} chunks: {sum(times):.2f} s, server CPU {cpu:.2f} s")
    finally:
        srv.terminate()
        srv.wait()
        subprocess.call(["rm", "-rf", work])


if __name__ == "__main__":
    main()
