#!/usr/bin/env python3
"""Instructions the server spends on each of a list of reads, after uploads it is not timed on.

A fresh server under valgrind's callgrind with its instrumentation off
(--instr-atstart=no, --derive-quiet 0: nothing analysed in the background) takes the
uploads; then each GET, with instrumentation on alone, is counted in instructions (Ir,
all threads). Instruction counts do not move with the machine's load: run it on two
builds to compare a read path where wall times are too noisy (a shared machine).

Usage: bench/read_instr.py SERVER --upload RUN[:RANK]=FILE ... --read PATH ...
(FILE as it is, gzip'd or not; a directory: its traces, exports and snapshots, as scripts/demo.sh). Needs valgrind. Stdlib only.
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no bench/__pycache__ from the imports below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402
import ranks_instr as ri  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import urllib.parse  # noqa: E402


KINDS = (".pt.trace.json.gz", ".memory.raw.json.gz", ".snapshot.pickle")


def upload(base, spec):
    """RUN[:RANK]=FILE, or a directory's traces, memory exports and snapshots (as scripts/demo.sh), as they are."""
    target, path = spec.split("=", 1)
    run, _, rank = target.partition(":")
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(KINDS)) \
        if os.path.isdir(path) else [path]
    for f in files:
        q = {"name": os.path.basename(f)}
        if rank:
            q["rank"] = rank
        with open(f, "rb") as fh:
            cb.post(base, f"/api/v1/runs/{run}/artifacts?" + urllib.parse.urlencode(q), fh.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("server")
    ap.add_argument("--upload", action="append", default=[])
    ap.add_argument("--read", action="append", default=[])
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="read_instr.")
    srv, base, out = ri.start_counted(os.path.abspath(a.server), work)
    try:
        for spec in a.upload:
            upload(base, spec)
        print(f"# {a.server}: millions of instructions per read")
        for path in a.read:
            print(f"{ri.instr(srv.pid, out, base, path) / 1e6:12.1f}  {path}", flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
