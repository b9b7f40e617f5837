#!/usr/bin/env python3
"""What a live run's derivations cost as it grows, read after every chunk (issue 15: "a chunk's
cost is proportional to the chunk and the steps it touches, not to the run").

Takes a trace (bench/make_big_trace.py's: copies of the V100 fixture one after another in time),
cuts its traceEvents into chunks of about --chunk-mb MiB, starts a fresh trainscope-server
(--derive-quiet 0: only reads derive) and uploads the chunks as one run (rank 0), reading the
run's steps after each, as the run's page does while it grows: each read derives the rank with
the chunk that joined (server/pipeline/runrank.c). Per window of --every chunks it reports the
run's size, the mean and largest derivation (the read's time), and the server's CPU so far; at
the end, the parts /metrics counted (trainscope_rank_parts_total: a part cut inside its traces
is how a derivation stops finishing the whole rank), the memory models
(trainscope_rank_memory_models_total: went on from the parts before, or made from all) and the
memory points' blocks the derivations' writes kept or wrote (trainscope_rank_memory_blocks_total)
and the collectives' rows they left or wrote (trainscope_rank_collectives_total).

--order says how the chunks cut the trace:
  file  at event boundaries in the file's order (bench/chunks_bench.py's cut). kineto writes a
        trace's host events, then its GPU events: each chunk of a section reaches back to where
        the section began, so no part can be cut inside it (runrank.c: split()).
  time  windows of time, each chunk the events that began in it, in the file's order (as the
        collector writes one a second): each begins after the one before.

Usage: bench/live_cost.py SERVER TRACE [--order file|time] [--chunk-mb 4] [--every 32] [SERVER FLAGS...]
Stdlib only; bench/results/live_cost-DATE.txt keeps runs.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402

TS = re.compile(r'"ts"\s*:\s*"?(-?[0-9.eE+]+)')


def time_bodies(text, chunk_bytes):
    """The events in windows of time of about chunk_bytes each (those without a time first)."""
    head, evs, tail = cb.events_split(text)
    keyed = []
    for i, e in enumerate(evs):
        m = TS.search(e)
        keyed.append((float(m.group(1)) if m else float("-inf"), i))
    keyed.sort()
    chunks, cur, size = [], [], 0
    for k, (ts, i) in enumerate(keyed):
        cur.append(i)
        size += len(evs[i]) + 1
        # a window ends where the time moves on: events of one instant stay together
        if size >= chunk_bytes and (k + 1 == len(keyed) or keyed[k + 1][0] > ts):
            chunks.append(sorted(cur))
            cur, size = [], 0
    if cur:
        chunks.append(sorted(cur))
    return [(head + ",".join(evs[i] for i in c) + tail).encode() for c in chunks]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("server")
    ap.add_argument("trace")
    ap.add_argument("--order", choices=("file", "time"), default="time")
    ap.add_argument("--chunk-mb", type=float, default=4)
    ap.add_argument("--every", type=int, default=32)
    a, flags = ap.parse_known_args()
    with open(a.trace) as f:
        text = f.read()
    cut = time_bodies if a.order == "time" else cb.chunk_bodies
    bodies = cut(text, int(a.chunk_mb * (1 << 20)))
    del text
    print(f"# {a.trace}: {len(bodies)} chunks in {a.order} order, server {a.server} {' '.join(flags)}")
    work = tempfile.mkdtemp(prefix="live-cost-")
    srv, base = cb.start_server(a.server, work, ["--derive-quiet", "0", *flags])
    times, size = [], 0
    try:
        for i, b in enumerate(bodies):
            cb.post(base, f"/api/v1/runs/live/artifacts?rank=0&name=chunk{i:05d}.json", b)
            size += len(b)
            t0 = time.monotonic()
            cb.get(base, "/api/v1/runs/live/steps")
            times.append(time.monotonic() - t0)
            if (i + 1) % a.every == 0 or i + 1 == len(bodies):
                w = times[-a.every:]
                print(f"chunks {i + 1:5d}  run {size / (1 << 20):8.1f} MiB  derivation mean {sum(w) / len(w):6.3f} s"
                      f"  max {max(w):6.3f} s  server cpu {cb.server_cpu(srv):7.1f} s", flush=True)
        m = cb.get(base, "/metrics").decode()
        parts = [line.split("{", 1)[1] for line in m.splitlines() if line.startswith(("trainscope_rank_parts_total", "trainscope_rank_memory_models_total"))]
        print("parts:", " ".join(p.replace('"}', "").replace('how="', "") for p in parts))
        blocks = [line.split("{", 1)[1] for line in m.splitlines() if line.startswith("trainscope_rank_memory_blocks_total")]
        if blocks:  # servers since the rank's memory points are gone over block by block
            print("memory point blocks:", " ".join(p.replace('"}', "").replace('how="', "") for p in blocks))
        colls = [line.split("{", 1)[1] for line in m.splitlines() if line.startswith("trainscope_rank_collectives_total")]
        if colls:  # servers since the parts' collectives stay as stored
            print("collectives' rows:", " ".join(p.replace('"}', "").replace('how="', "") for p in colls))
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
