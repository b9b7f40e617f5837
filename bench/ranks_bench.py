#!/usr/bin/env python3
"""Runs of many ranks (issue 50): uploads, /ranks and /critical_path against the rank count.

For each count N in --ranks, starts a fresh trainscope-server (SQLite in a
temporary folder) and uploads N small NCCL traces to one run, rank r with
distributedInfo {rank r, world_size N}: two ProfilerStep spans of 1 ms, in
each a computation kernel and an all_reduce (record_param_comms with its Seq,
a cudaLaunchKernel and its ncclDevKernel), each rank launching a little
later than the last. Uploads go 3 at a time (under the server's per-address cap of 4).
It then times the first GET /ranks (which derives the ranks not yet derived), a second one
(from the answer cache when the answer fits it: at 10,000 ranks it does not), the
first /critical_path?step=1 and ?step=2, and reports the server's CPU and
peak memory (VmHWM) and the database's size (with its WAL, whose size
follows when checkpoints ran, not what is stored). The uploads' wall time
per upload (upms) and the server's CPU in them (upcpu) are what stay flat
when an upload costs the same whatever the ranks already in the run.
With --cycles C, each rank uploads C traces, one per profiling cycle (cycle c:
ProfilerStep#2c+1 and #2c+2, Seq counting on, 8 ms after the last), every
rank's cycle c before any cycle c+1: a later trace joins its rank, which marks
the rank to derive again, so the first /ranks derives every rank from its
stored events.

Usage: bench/ranks_bench.py SERVER [--ranks 1000,3000,10000] [--cycles 1]
Stdlib only; bench/results/ranks_bench-DATE.txt keeps runs.
"""
import argparse
import concurrent.futures
import os
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402

KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def rank_trace(rank, world, cycle=0):
    ev = []
    corr = 100
    for step in (2 * cycle + 1, 2 * cycle + 2):
        t0 = step * 1000 + cycle * 8000
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": t0, "dur": 1000, "args": {}})
        late = rank % 97
        for what, at, name, stream, args in (
                ("mm", t0 + 100, "volta_sgemm_128x64_nn", 7, None),
                ("ar", t0 + 400 + late, KERNEL, 9,
                 {"Collective name": "allreduce", "Process Group Name": "0", "Seq": step,
                  "In msg nelems": 1048576, "Out msg nelems": 1048576, "dtype": "Float", "Group size": world})):
            corr += 1
            if args:
                ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                           "ts": at - 2, "dur": 40, "args": args})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": at, "dur": 5, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": at + 30,
                       "dur": 200, "args": {"device": 0, "stream": stream, "correlation": corr}})
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
           "traceEvents": ev}
    return cb.json.dumps(doc).encode()


def upload(base, r, n, cycle=0):
    """One rank's trace; a 429 (the server frees an upload's slot just after its answer) is retried."""
    name = f"r{r}.json" if not cycle else f"r{r}c{cycle}.json"
    for _ in range(100):
        try:
            return cb.post(base, f"/api/v1/runs/big/artifacts?rank={r}&name={name}", rank_trace(r, n, cycle))
        except cb.urllib.error.HTTPError as e:
            if e.code != 429:
                raise
            time.sleep(0.01)
    raise RuntimeError(f"rank {r}: 429 a hundred times")


def timed_get(base, path, srv=None, cpu=None):
    """Wall seconds and answer bytes; with srv, the server's CPU seconds in it appended to cpu."""
    c0 = cb.server_cpu(srv) if srv else 0
    t0 = time.time()
    body = cb.get(base, path)
    if srv:
        cpu.append(cb.server_cpu(srv) - c0)
    return time.time() - t0, len(body)


def one(server, n, cycles):
    work = tempfile.mkdtemp(prefix="ranks_bench.")
    srv, base = cb.start_server(server, work)
    try:
        c0 = cb.server_cpu(srv)
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            for c in range(cycles):
                list(pool.map(lambda r: upload(base, r, n, c), range(n)))
        up = time.time() - t0
        upcpu = cb.server_cpu(srv) - c0
        cpu0 = cb.server_cpu(srv)
        cpus = []
        ranks1, rb = timed_get(base, "/api/v1/runs/big/ranks", srv, cpus)
        ranks2, _ = timed_get(base, "/api/v1/runs/big/ranks")
        cp1, cb1 = timed_get(base, "/api/v1/runs/big/critical_path?step=1", srv, cpus)
        cp2, _ = timed_get(base, "/api/v1/runs/big/critical_path?step=2")
        steps, _ = timed_get(base, "/api/v1/runs/big/steps")
        cpu = cb.server_cpu(srv) - cpu0
        with open(f"/proc/{srv.pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        db = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work) if f.startswith("t.db"))
        print(f"{n:>6} {up:8.1f} {ranks1:8.2f} {ranks2:7.3f} {cp1:8.2f} {cp2:8.2f} {steps:7.2f} {cpu:7.1f}"
              f" {hwm / 1024:7.0f} {db / 1048576:7.1f} {rb:9} {cb1:8} {cpus[0]:7.2f} {cpus[1]:7.2f}"
              f" {up * 1000 / (n * cycles):6.2f} {upcpu:7.1f}", flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("server")
    ap.add_argument("--ranks", default="1000,3000,10000")
    ap.add_argument("--cycles", type=int, default=1, help="traces per rank (profiling cycles)")
    a = ap.parse_args()
    print("# ranks: upload s (3 at a time); first /ranks s; cached /ranks s; /critical_path?step=1 s,"
          " ?step=2 s; /steps s; server CPU s in the reads; VmHWM MiB; database MiB; /ranks bytes;"
          " /critical_path bytes; the server's CPU s in the first /ranks, in /critical_path?step=1;"
          " upload ms per trace; the server's CPU s in the uploads")
    print(f"{'ranks':>6} {'upload':>8} {'ranks1':>8} {'ranks2':>7} {'cp1':>8} {'cp2':>8} {'steps':>7} {'cpu':>7}"
          f" {'hwm':>7} {'db':>7} {'rbytes':>9} {'cpbytes':>8} {'r1cpu':>7} {'cp1cpu':>7} {'upms':>6} {'upcpu':>7}")
    for n in (int(x) for x in a.ranks.split(",")):
        one(a.server, n, a.cycles)


if __name__ == "__main__":
    main()
