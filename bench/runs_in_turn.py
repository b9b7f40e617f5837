#!/usr/bin/env python3
"""Runs of chunks one after another on one server: what each run's first read costs.

A team server takes run after run. Each run here is the 20 chunks of bench/chunks_bench.py (the
V100-based trace of --size-mb MiB cut into --chunk-mb MiB at event boundaries), uploaded one after
another to rank 0, then read once (/steps); --gap seconds pass before the next run begins. The
server keeps the analyses of the four ranks used last between derivations (pipeline/runrank.c),
and a rank whose chunks are replayed into its kept analysis as they land (growing ahead) leaves
its first read only the analysis' passes; one that is not left its read every chunk to replay.
So from the fifth run on, a read costs what growing ahead gets its rank: with the four places
full, a new run grows ahead only once one of them has gone unused for 10 s (GROWN_YIELD_S).

Prints, per server and run, the uploads' and the read's wall ms; then each server's medians over
the runs from the fifth on (--from). Servers alternate by sitting (--sittings). --server-arg
passes an option to the servers: `--runs 1 --from 1 --sittings 6 --server-arg=--derive-keep
--server-arg=0` times reads that replay all 20 chunks. Stdlib only.

Usage: bench/runs_in_turn.py [--runs 6] [--gap 11] [--sittings 2] [--from 5] [--server-arg ARG]...
                             SERVER [SERVER...]
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


def sitting(server, bodies, runs, gap, extra):
    """[(uploads ms, read ms)] of each run, on a fresh server of its own."""
    work = tempfile.mkdtemp(prefix="runs-in-turn-")
    srv, base = cb.start_server(server, work, extra=extra, quiet=True)
    out = []
    try:
        for r in range(runs):
            if r:
                time.sleep(gap)
            t0 = time.monotonic()
            for i, b in enumerate(bodies):
                cb.post(base, f"/api/v1/runs/r{r}/artifacts?rank=0&name=part{i}.json", b)
            t1 = time.monotonic()
            cb.get(base, f"/api/v1/runs/r{r}/steps")
            out.append(((t1 - t0) * 1000, (time.monotonic() - t1) * 1000))
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("servers", nargs="+")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--gap", type=float, default=11.0)
    ap.add_argument("--sittings", type=int, default=2)
    ap.add_argument("--from", dest="first", type=int, default=5, help="the medians' first run")
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("--size-mb", type=float, default=51)
    ap.add_argument("--chunk-mb", type=float, default=2.02)
    args = ap.parse_args()
    text = cb.make_trace(args.size_mb)
    bodies = cb.chunk_bodies(text, int(args.chunk_mb * (1 << 20)))
    print(f"{len(text) / (1 << 20):.1f} MiB in {len(bodies)} chunks, {args.runs} runs, {args.gap:g} s apart")
    later = {s: [] for s in args.servers}
    for k in range(args.sittings):
        order = args.servers if k % 2 == 0 else list(reversed(args.servers))
        for s in order:
            res = sitting(s, bodies, args.runs, args.gap, args.server_arg)
            print(f"sitting {k + 1} {s}: " + "  ".join(f"{u:.0f}+{r:.0f}" for u, r in res), flush=True)
            later[s] += res[args.first - 1:]
    for s, res in later.items():
        if res:
            print(f"{s}: runs {args.first} on, median uploads {statistics.median(u for u, _ in res):.0f} ms, "
                  f"read {statistics.median(r for _, r in res):.0f} ms ({len(res)} runs)")


if __name__ == "__main__":
    main()
