#!/usr/bin/env python3
"""Side by side: one file uploaded to each of several server builds, in alternating order.

For each round, every SERVER in turn (the order reversed every other round) starts fresh on a
database of its own, takes FILE as one upload (Content-Encoding: gzip when FILE is gzip, as the
collector sends it) and answers its run's first /steps read; the wall time from the upload's
start to that answer, the server's CPU seconds (all threads) and its minor page faults are kept.
Prints each server's medians and every round's wall time. Two builds of one commit apart, on a
2-core machine whose timings move 10-15 % run to run: the CPU column is the steadier one.

Usage: bench/upload_pairs.py [--rounds 10] FILE SERVER [SERVER...]
Stdlib only.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
import chunks_bench as cb  # noqa: E402


def one(server, body, gz):
    work = tempfile.mkdtemp(prefix="upload-pairs-")
    srv, base = cb.start_server(server, work, quiet=True)
    try:
        f0, c0 = cb.proc_stat(srv.pid)
        t0 = time.monotonic()
        req = urllib.request.Request(base + "/api/v1/runs/p/artifacts?rank=0&name=f.json", data=body,
                                     method="POST", headers={"Content-Encoding": "gzip"} if gz else {})
        urllib.request.urlopen(req, timeout=3600).read()
        urllib.request.urlopen(base + "/api/v1/runs/p/steps", timeout=600).read()
        t1 = time.monotonic()
        f1, c1 = cb.proc_stat(srv.pid)
        return t1 - t0, c1 - c0, f1 - f0
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("file")
    ap.add_argument("servers", nargs="+")
    a = ap.parse_args()
    with open(a.file, "rb") as f:
        body = f.read()
    gz = body[:2] == b"\x1f\x8b"
    res = {s: [] for s in a.servers}
    for r in range(a.rounds):
        for s in (a.servers if r % 2 == 0 else a.servers[::-1]):
            res[s].append(one(s, body, gz))
    print(f"# {a.file} ({len(body) / 1e6:.1f} MB{', gzip' if gz else ''}), {a.rounds} rounds, medians:")
    for s in a.servers:
        v = res[s]
        med = [statistics.median(x[i] for x in v) for i in range(3)]
        print(f"{s}: wall {med[0]:.3f} s, CPU {med[1]:.3f} s, minor faults {med[2]:.0f}"
              f"  (wall: {' '.join('%.3f' % x[0] for x in v)})")


if __name__ == "__main__":
    main()
