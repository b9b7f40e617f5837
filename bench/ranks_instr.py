#!/usr/bin/env python3
"""Instructions the server spends on the first reads of a run of many ranks (issue 47's
"nothing slower", measured where wall and CPU times are too noisy on a shared machine).

For each count N in --ranks: a fresh server under valgrind's callgrind, instrumentation
off (--instr-atstart=no) while N ranks' traces are uploaded (bench/ranks_bench.py's
2-step NCCL traces), with --derive-quiet 0 so that nothing is analysed in the background;
then, each with instrumentation on alone, the first GET /ranks (it derives every rank),
and GET /critical_path?step=1. Prints the instructions (Ir) of each, which do not
depend on the machine's load: run it on two builds to compare them.

Usage: bench/ranks_instr.py SERVER [--ranks 300,1000]
Needs valgrind (callgrind_control). Stdlib only.
"""
import argparse
import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no bench/__pycache__ from the imports below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402
import ranks_bench as rb  # noqa: E402


def instr(pid, out, base, path):
    """The instructions the server ran for GET path: zeroed, on, the read, dumped, off."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
    subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True, capture_output=True)
    cb.get(base, path)
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    subprocess.run(["callgrind_control", "-i", "off", str(pid)], check=True, capture_output=True)
    newest = max(glob.glob(out + ".*"), key=os.path.getmtime)
    with open(newest) as f:
        total = next(int(line.split()[1]) for line in f if line.startswith(("summary:", "totals:")))
    os.unlink(newest)
    return total


def start_counted(server, work):
    """server (an absolute path) under callgrind, instrumentation off, nothing derived in the
    background, its database in work: (process, base URL, the dump files' prefix)."""
    out = os.path.join(work, "callgrind.out")
    wrapper = os.path.join(work, "server.sh")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec valgrind -q --tool=callgrind --instr-atstart=no "
                f"--callgrind-out-file={out} {server} \"$@\" --derive-quiet 0\n")
    os.chmod(wrapper, 0o755)
    srv, base = cb.start_server(wrapper, work)
    return srv, base, out


def one(server, n):
    work = tempfile.mkdtemp(prefix="ranks_instr.")
    srv, base, out = start_counted(server, work)
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda r: rb.upload(base, r, n), range(n)))
        r1 = instr(srv.pid, out, base, "/api/v1/runs/big/ranks")
        cp1 = instr(srv.pid, out, base, "/api/v1/runs/big/critical_path?step=1")
        print(f"{n:>6} {r1 / 1e6:12.1f} {cp1 / 1e6:12.1f}", flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("server")
    ap.add_argument("--ranks", default="300,1000")
    a = ap.parse_args()
    print(f"# {a.server}: millions of instructions in the first /ranks and /critical_path?step=1")
    print(f"{'ranks':>6} {'ranks1_Mi':>12} {'cp1_Mi':>12}")
    for n in (int(x) for x in a.ranks.split(",")):
        one(os.path.abspath(a.server), n)


if __name__ == "__main__":
    main()
