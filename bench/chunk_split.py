#!/usr/bin/env python3
"""What twenty chunks pay above the whole file, split in two: per request, and for joining a rank.

The trace is bench/make_big_trace.py's (--size-mb, default 51: copies of the V100 fixture) cut into
chunks of --chunk-mb MiB at event boundaries, as bench/chunks_bench.py cuts them (the issue-51
figure's 20 chunks of 2 MiB). Three sides, each timed to the answer of its /steps read(s):

  whole     the file, one upload, then /steps;
  joined    the chunks, one after another, as one run (each joins rank 0: the overlap check, the
            growing thread's replay, the read's finish of the rank's kept analysis), then /steps;
  separate  the chunks, one after another, each as a run of its own (each analysed as it is
            parsed, as the whole file is), then the /steps of each.

Each side's time is also given in two: its uploads, and its reads after them. The whole file's
analysis finishes inside its upload, each separate chunk's inside its own, the joined chunks' in
the first read (the rank's kept analysis, forked and finished). separate - whole is then what the
requests cost (each one's setup, the pipeline filling and draining, its commit), and joined -
separate what joining a rank costs (the overlap check, the growing thread beside the next chunk's
parse, the fork at the read).

Every side, in every round, gets a fresh server of its own that first takes one chunk of another
run and its /steps, untimed: no side pays a fresh server's first page faults, and none runs on a
server that an earlier side warmed more (bench/chunks_bench.py --pairs explains the order effect).
The sides' order turns each round.

Usage: bench/chunk_split.py [--rounds 5] [--size-mb 51] [--chunk-mb 2.02] SERVER
Writes its report to stdout; bench/results/chunk_split-DATE.txt keeps runs. Stdlib only.
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

SIDES = ("whole", "joined", "separate")


def side_time(server, side, whole, bodies):
    """(wall ms, server CPU ms, the uploads' wall ms) of one side on a fresh, warmed server."""
    work = tempfile.mkdtemp(prefix="chunk-split-")
    srv, base = cb.start_server(server, work, quiet=True)
    try:
        cb.post(base, "/api/v1/runs/warm/artifacts?rank=0&name=warm.json", bodies[-1])
        cb.get(base, "/api/v1/runs/warm/steps")
        c0, t0 = cb.server_cpu(srv), time.monotonic()
        if side == "whole":
            cb.post(base, "/api/v1/runs/w/artifacts?rank=0&name=whole.json", whole)
            t1 = time.monotonic()
            cb.get(base, "/api/v1/runs/w/steps")
        elif side == "joined":
            for i, b in enumerate(bodies):
                cb.post(base, f"/api/v1/runs/j/artifacts?rank=0&name=part{i}.json", b)
            t1 = time.monotonic()
            cb.get(base, "/api/v1/runs/j/steps")
        else:
            for i, b in enumerate(bodies):
                cb.post(base, f"/api/v1/runs/s{i}/artifacts?rank=0&name=part{i}.json", b)
            t1 = time.monotonic()
            for i in range(len(bodies)):
                cb.get(base, f"/api/v1/runs/s{i}/steps")
        return (time.monotonic() - t0) * 1000, (cb.server_cpu(srv) - c0) * 1000, (t1 - t0) * 1000
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("server")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size-mb", type=int, default=51)
    ap.add_argument("--chunk-mb", type=float, default=2.02)
    args = ap.parse_args()

    text = cb.make_trace(args.size_mb)
    whole = text.encode()
    bodies = cb.chunk_bodies(text, int(args.chunk_mb * 1048576))
    print(f"{args.server}: {len(whole) / 1048576:.1f} MiB, {len(bodies)} chunks, {args.rounds} rounds")
    got = {s: [] for s in SIDES}
    for r in range(args.rounds):
        order = SIDES[r % 3:] + SIDES[:r % 3]
        for side in order:
            got[side].append(side_time(args.server, side, whole, bodies))
        print("  round %d: %s" % (r + 1, "  ".join(f"{s} {got[s][-1][0]:.0f} ms" for s in SIDES)), flush=True)
    med = {s: statistics.median(g[0] for g in got[s]) for s in SIDES}
    cpu = {s: statistics.median(g[1] for g in got[s]) for s in SIDES}
    up = {s: statistics.median(g[2] for g in got[s]) for s in SIDES}
    rd = {s: statistics.median(g[0] - g[2] for g in got[s]) for s in SIDES}
    for s in SIDES:
        print(f"{s:9s} median {med[s]:6.1f} ms (uploads {up[s]:6.1f}, reads {rd[s]:5.1f})  server CPU {cpu[s]:6.1f} ms"
              f"  ({med[s] / med['whole']:.2f}x the whole file)")
    print(f"per request (separate - whole): {med['separate'] - med['whole']:+.1f} ms; "
          f"joining a rank (joined - separate): {med['joined'] - med['separate']:+.1f} ms")


if __name__ == "__main__":
    main()
