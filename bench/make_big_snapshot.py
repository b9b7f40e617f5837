#!/usr/bin/env python3
"""A large memory snapshot built from a real one, for the snapshot benchmark.

Repeats the device trace of shared/fixtures/memory/cs336_memory_snapshot.pickle
(a real torch.cuda.memory._dump_snapshot, 5,163 entries with Python frames)
until the pickle reaches --size-mb, each copy shifted in time after the one
before, addresses unchanged (the caching allocator reuses its blocks every
iteration). The copies reuse the original's frame dicts and frame lists, so
the pickle memoizes them as PyTorch's own writer does (a frame is written
once and referred to after); --unique-frames gives every entry a frame list
of its own (a list of references), as a snapshot of many distinct stacks has.

Usage: make_big_snapshot.py OUT --size-mb N [--unique-frames] [--fixture F]
"""
import argparse
import copy
import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--unique-frames", action="store_true")
    fixtures = os.environ.get("FIXTURES_DIR") or os.path.join(HERE, "..", "..", "shared", "fixtures")
    ap.add_argument("--fixture", default=os.path.join(fixtures, "memory", "cs336_memory_snapshot.pickle"))
    a = ap.parse_args()
    with open(a.fixture, "rb") as f:
        raw = f.read()
    snap = pickle.loads(raw)
    trace = snap["device_traces"][0]
    t0, t1 = trace[0]["time_us"], trace[-1]["time_us"]
    span = t1 - t0 + 1000
    per_copy = len(raw) * 0.97           # nearly all of the fixture is its trace
    copies = max(1, int(a.size_mb * 1048576 / per_copy))
    out = []
    for k in range(copies):
        for e in trace:
            x = dict(e)
            x["time_us"] = e["time_us"] + k * span
            if a.unique_frames:
                x["frames"] = list(e["frames"])
            out.append(x)
    big = dict(snap)
    big["device_traces"] = [out]
    with open(a.out, "wb") as f:
        pickle.dump(big, f, protocol=4)
    print(f"{a.out}: {os.path.getsize(a.out) / 1048576:.1f} MiB, {len(out)} entries, {copies} copies",
          file=sys.stderr)


if __name__ == "__main__":
    main()
