#!/usr/bin/env python3
"""20 chunks of 2 MiB uploaded as one run (WHOLE=1: the file instead): wall, server CPU, page faults.

For each server given, alternating, REPS times (env, default 8): a fresh server warmed by one chunk
of another run and its /steps, then the uploads (the trace cut as bench/chunks_bench.py cuts it:
bench/make_big_trace.py --size-mb 51, 20 chunks; TRACE=path.json: another trace) and 0.3 s for the
growing thread, under `perf stat -e task-clock,page-faults -p PID` (root, perf). Medians.

Usage: [REPS=8] [WHOLE=1] [TRACE=path.json] bench/upload_faults.py SERVER...
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402
from read_faults import perf_stat, trace_text  # noqa: E402


def main():
    servers = sys.argv[1:]
    text = trace_text()
    chunks = cb.chunk_bodies(text, int(2.02 * 1048576))
    bodies = [text.encode()] if os.environ.get("WHOLE") else chunks
    warm = chunks[-1]
    res = {s: [] for s in servers}
    for rep in range(int(os.environ.get("REPS", "8"))):
        for s in (servers if rep % 2 == 0 else servers[::-1]):
            def uploads(base):
                for i, b in enumerate(bodies):
                    cb.post(base, f"/api/v1/runs/j/artifacts?rank=0&name=p{i}.json", b)
            res[s].append(perf_stat(s, warm, None, uploads, settle=0.3))
    what = "the file's upload" if os.environ.get("WHOLE") else f"{len(bodies)} chunks' uploads"
    for s, v in res.items():
        print(f"{s}: {what} (and 0.3 s), medians of {len(v)}: wall {statistics.median(a for a, b, c in v):.1f} ms,"
              f" server CPU {statistics.median(b for a, b, c in v):.1f} ms, page faults {statistics.median(c for a, b, c in v):.0f}")


if __name__ == "__main__":
    main()
