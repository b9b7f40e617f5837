#!/usr/bin/env python3
"""A run of many ranks, each uploading its trace in chunks: what the first read costs.

Each of --ranks ranks uploads the 20 chunks of bench/chunks_bench.py (the V100-based trace of
--size-mb MiB cut into --chunk-mb MiB at event boundaries) to one run, the ranks taking turns:
chunk 1 of every rank, then chunk 2, as the collectors of one job send them (each rank's copy
ends in blanks of its own: a run keeps a file once). The server replays
each chunk that joins a rank into that rank's kept analysis as it lands (growing ahead), for as
many ranks as it keeps analyses (pipeline/runrank.c: MAX_GROWN); a rank left out is replayed
whole by its first read. The first read here is GET /api/v1/runs/R/ranks, which derives every
rank not yet derived.

Prints, per server and sitting, the uploads' wall time, the first /ranks read's, the server's CPU
in that read and its peak memory (VmHWM); then the medians. Servers alternate by sitting.
Stdlib only.

Usage: bench/ranks_grow.py [--ranks 8] [--sittings 3] [--size-mb 51] SERVER [SERVER...]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chunks_bench as cb  # noqa: E402


def hwm_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def sitting(server, bodies, ranks):
    """(uploads ms, first read ms, read's server CPU ms, VmHWM MiB) on a fresh server."""
    work = tempfile.mkdtemp(prefix="ranks-grow-")
    srv, base = cb.start_server(server, work, quiet=True)
    try:
        t0 = time.monotonic()
        for i, b in enumerate(bodies):
            for r in range(ranks):
                # trailing blanks make each rank's copy a file of its own (one run keeps a file once)
                cb.post(base, f"/api/v1/runs/job/artifacts?rank={r}&name=r{r}-part{i}.json", b + b" " * r)
        t1 = time.monotonic()
        c0 = cb.server_cpu(srv)
        cb.get(base, "/api/v1/runs/job/ranks")
        t2 = time.monotonic()
        cpu = (cb.server_cpu(srv) - c0) * 1000
        return (t1 - t0) * 1000, (t2 - t1) * 1000, cpu, hwm_mib(srv.pid)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("servers", nargs="+")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--sittings", type=int, default=3)
    ap.add_argument("--size-mb", type=float, default=51)
    ap.add_argument("--chunk-mb", type=float, default=2.02)
    args = ap.parse_args()
    text = cb.make_trace(args.size_mb)
    bodies = cb.chunk_bodies(text, int(args.chunk_mb * (1 << 20)))
    print(f"{args.ranks} ranks, each {len(text) / (1 << 20):.1f} MiB in {len(bodies)} chunks")
    got = {s: [] for s in args.servers}
    for k in range(args.sittings):
        for s in (args.servers if k % 2 == 0 else list(reversed(args.servers))):
            res = sitting(s, bodies, args.ranks)
            got[s].append(res)
            print(f"sitting {k + 1} {s}: uploads {res[0]:.0f} ms, first /ranks {res[1]:.0f} ms "
                  f"(server CPU {res[2]:.0f} ms), VmHWM {res[3]:.0f} MiB", flush=True)
    for s, res in got.items():
        print(f"{s}: medians: uploads {statistics.median(r[0] for r in res):.0f} ms, first /ranks "
              f"{statistics.median(r[1] for r in res):.0f} ms (server CPU {statistics.median(r[2] for r in res):.0f} "
              f"ms), VmHWM {statistics.median(r[3] for r in res):.0f} MiB")


if __name__ == "__main__":
    main()
