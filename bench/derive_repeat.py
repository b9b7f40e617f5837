#!/usr/bin/env python3
"""A run read while it grows: its derivations one after another, and the server's peak.

Cuts TRACE (e.g. bench/make_big_trace.py's output) into chunks of about 1 MiB
at event boundaries (as bench/chunks_bench.py cuts them), uploads them to a
fresh server as one run, and reads /steps after every 100 chunks and after the
last: each read derives the rank from every chunk so far (server/pipeline/runrank.h).
Prints how many derivations, their total and the last one's time, and the
server's VmHWM: what a page reading a growing run costs the server.

Usage: bench/derive_repeat.py SERVER TRACE.json
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
    with open(trace) as f:
        bodies = cb.chunk_bodies(f.read(), 1048576)
    work = tempfile.mkdtemp(prefix="derive-repeat-")
    srv, base = cb.start_server(server, work)
    try:
        took = []
        for i, b in enumerate(bodies):
            cb.post(base, f"/api/v1/runs/grow/artifacts?rank=0&name=part{i}.json", b)
            if i % 100 == 99 or i == len(bodies) - 1:
                t0 = time.monotonic()
                cb.get(base, "/api/v1/runs/grow/steps")
                took.append(time.monotonic() - t0)
        with open(f"/proc/{srv.pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
        print(f"{len(bodies)} chunks, {len(took)} derivations: {sum(took):.2f} s in all, the last "
              f"{took[-1]:.2f} s; server VmHWM {hwm // 1024} MiB")
    finally:
        srv.terminate()
        srv.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
