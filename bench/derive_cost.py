#!/usr/bin/env python3
"""What one more chunk costs the rank's derivation as a run grows (issue 15: "a chunk's cost is
proportional to the chunk and the steps it touches, not to the run").

Builds nothing: takes a trace (bench/make_big_trace.py's, copies of the V100
fixture one after another in time), cuts its traceEvents into chunks of
about --chunk-mb MiB at event boundaries (chunks_bench.py's cut), starts a
fresh trainscope-server and uploads the chunks as one run (rank 0). At each
mark (a count of chunks), it first reads the run (so that what came before
is derived), then uploads one more chunk and reads the run's steps again:
that read derives the rank with the new chunk (server/pipeline/runrank.h).
It reports, per mark, the run's size, the chunk's upload time, the
derivation's time (the read's), the server's CPU in it, its peak memory so
far (VmHWM) and the temporary files it holds after it (the analysis kept
for the rank: server/pipeline/runrank.c).

With --quiet-read S, it instead uploads every chunk one after another to a
server started with --derive-quiet S, waits until the list of runs (which
derives nothing) says the run is analysed, and times the first read then:
the server derived the run itself once the uploads paused (0 for S: the
read derives).

(bench/chunk_cost.py times the uploads alone, chunk after chunk.)

With --two-in-flight N, it instead uploads the first N chunks of 1 MiB two
at a time (as trainscope-collect ships a backlog) with a page polling the
run (?wait=0, every 0.5 s), and prints the replay counters of /metrics: a
chunk ready while an earlier one is still uploading is replayed twice.

Usage: bench/derive_cost.py SERVER TRACE [--chunk-mb 4] [--marks 8,32,128,255] [--two-in-flight N]
                            [--quiet-read S]
Stdlib only; bench/results/derive_cost-DATE.txt keeps runs.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def temp_bytes(pid):
    """Bytes in the server's open temporary files (unlinked: trainscope-* ... (deleted))."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if "/trainscope-" in target and target.endswith("(deleted)"):
                n += os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except OSError:
            pass
    return n


def two_in_flight(base, bodies):
    stop = threading.Event()

    def page():
        while not stop.wait(0.5):
            cb.get(base, "/api/v1/runs/r/ranks?wait=0")

    cb.post(base, "/api/v1/runs/r/artifacts?rank=0&name=p0.json", bodies[0])
    reader = threading.Thread(target=page)
    reader.start()
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda i: cb.post(base, f"/api/v1/runs/r/artifacts?rank=0&name=p{i}.json", bodies[i]),
                    range(1, len(bodies))))
    stop.set()
    reader.join()
    cb.get(base, "/api/v1/runs/r/steps")
    metrics = cb.get(base, "/metrics").decode()
    print(f"{len(bodies)} chunks two at a time with a page polling: {time.time() - t0:.2f} s; " +
          "; ".join(line for line in metrics.splitlines() if line.startswith("trainscope_rank_replay_artifacts_total{")))


def pending(base):
    for r in json.loads(cb.get(base, "/api/v1/runs"))["runs"]:
        if r["name"] == "r":
            return r["analysis_pending"]
    raise SystemExit("derive_cost: run r is not listed")


def metric(base, name):
    for line in cb.get(base, "/metrics").decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def quiet_read(base, bodies, quiet):
    u0 = time.time()
    for i, b in enumerate(bodies):
        cb.post(base, f"/api/v1/runs/r/artifacts?rank=0&name=p{i}.json", b)
    t0 = time.time()
    if quiet:
        while pending(base):
            time.sleep(0.05)
    t1 = time.time()
    steps = json.loads(cb.get(base, "/api/v1/runs/r/steps"))["steps"]
    t2 = time.time()
    print(f"--derive-quiet {quiet}: {len(bodies)} chunks uploaded in {t0 - u0:5.2f} s; analysed {t1 - t0:5.2f} s after "
          f"the last with no read; then the first read {t2 - t1:6.3f} s ({len(steps)} steps); derivations "
          f"{metric(base, 'trainscope_rank_derivation_seconds_count'):.0f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("trace")
    ap.add_argument("--chunk-mb", type=float, default=4)
    ap.add_argument("--marks", default="8,32,128,255")
    ap.add_argument("--two-in-flight", type=int, default=0)
    ap.add_argument("--quiet-read", type=int, default=-1)
    a = ap.parse_args()
    with open(a.trace) as f:
        bodies = cb.chunk_bodies(f.read(), int((1 if a.two_in_flight else a.chunk_mb) * 1048576))
    work = tempfile.mkdtemp()
    srv, base = cb.start_server(a.server, work,
                                ("--derive-quiet", str(a.quiet_read)) if a.quiet_read >= 0 else ())
    try:
        if a.quiet_read >= 0:
            quiet_read(base, bodies, a.quiet_read)
            return
        if a.two_in_flight:
            two_in_flight(base, bodies[:a.two_in_flight])
            return
        done, size = 0, 0
        for m in [int(x) for x in a.marks.split(",")]:
            m = min(m, len(bodies) - 1)
            while done < m:
                cb.post(base, f"/api/v1/runs/r/artifacts?rank=0&name=p{done}.json", bodies[done])
                size += len(bodies[done])
                done += 1
            cb.get(base, "/api/v1/runs/r/steps")
            t0 = time.time()
            cb.post(base, f"/api/v1/runs/r/artifacts?rank=0&name=p{done}.json", bodies[done])
            size += len(bodies[done])
            done += 1
            t1 = time.time()
            c0 = cb.server_cpu(srv)
            steps = json.loads(cb.get(base, "/api/v1/runs/r/steps"))["steps"]
            t2 = time.time()
            print(f"chunks {done:5d}  run {size / 1048576:8.1f} MiB  chunk upload {t1 - t0:6.3f} s  "
                  f"derivation {t2 - t1:6.3f} s  server cpu {cb.server_cpu(srv) - c0:6.2f} s  steps {len(steps)}  "
                  f"peak {status_kib(srv.pid, 'VmHWM') / 1024:5.1f} MiB  "
                  f"temp files {temp_bytes(srv.pid) / 1048576:6.1f} MiB", flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
