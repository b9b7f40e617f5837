#!/usr/bin/env python3
"""Where a run of chunks' time goes, chunk by chunk, and what a server costs over several runs.

The trace is bench/make_big_trace.py's (--size-mb, default 51: copies of the V100 fixture) cut
into chunks of --chunk-mb MiB at event boundaries, as bench/chunks_bench.py cuts them (the
issue-51 figure's 20 chunks of 2 MiB).

  bench/chunk_sched.py --sched SERVER
      A fresh server; two runs of the chunks one after another, each then a read of /steps,
      under `perf record -e sched:sched_switch -e sched:sched_wakeup -k mono -a` (root, perf),
      the client marking each request on the same clock. For each chunk of the second run: the
      time from the client's POST to the parser thread's exit (ts-parse), the writer's after it
      (ts-store), from there to the answer in the client, and the idle time of the cores, each
      chunk's line, then medians and sums; then the same for the /steps read, with the threads
      that ran in it.

  bench/chunk_sched.py --rounds N SERVER...
      For each server, alternating, N times: a fresh server, three runs of the chunks each then a
      read of /steps (--whole: the whole file instead of the chunks). Medians of the first run's
      wall time, of the two after it, of the server's CPU over the three and of its minor faults.

Stdlib only (and perf for --sched).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chunks_bench as cb  # noqa: E402


def bodies_of(args, work):
    made = json.loads(subprocess.check_output(
        [sys.executable, os.path.join(HERE, "make_big_trace.py"), "--size-mb", str(args.size_mb), "--out", work]))
    with open(made["json"]) as f:
        text = f.read()
    if args.whole:
        return [text.encode()]
    return cb.chunk_bodies(text, int(args.chunk_mb * 1048576))


def run_chunks(base, run, bodies, marks=None):
    """Upload bodies as run, then read its /steps; marks gets (chunk, start, end) on CLOCK_MONOTONIC."""
    now = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)
    for j, b in enumerate(bodies):
        a = now()
        cb.post(base, f"/api/v1/runs/{run}/artifacts?rank=0&name=part{j}.json", b)
        if marks is not None:
            marks.append((j, a, now()))
    a = now()
    cb.get(base, f"/api/v1/runs/{run}/steps")
    if marks is not None:
        marks.append(("steps", a, now()))


def switches(data):
    """The sched_switch events of a perf file: (time, cpu, prev comm, prev state, next comm)."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "time,cpu,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    ev = []
    for line in out.split("\n"):
        m = re.match(r"\s*\[(\d+)\]\s+([\d.]+): sched:sched_switch: prev_comm=(.+?) prev_pid=\d+ .*"
                     r"prev_state=(\S+) ==> next_comm=(.+?) next_pid=", line)
        if m:
            ev.append((float(m.group(2)), int(m.group(1)), m.group(3), m.group(4), m.group(5)))
    return ev


def busy(ev, a, b):
    """Seconds each comm ran in [a, b], over all cores."""
    run = {}
    for cpu in sorted({e[1] for e in ev}):
        cur, last = None, a
        for t, c, _, _, nxt in (e for e in ev if e[1] == cpu):
            if t < a:
                cur = nxt
                continue
            if t > b:
                break
            if cur:
                run[cur] = run.get(cur, 0) + t - last
            cur, last = nxt, t
        if cur:
            run[cur] = run.get(cur, 0) + b - last
    return run


def sched(args):
    work = tempfile.mkdtemp(prefix="chunk-sched-")
    data = os.path.join(work, "sched.data")
    try:
        bodies = bodies_of(args, work)
        srv, base = cb.start_server(args.servers[0], work, quiet=True)
        rec = subprocess.Popen(["perf", "record", "-e", "sched:sched_switch", "-e", "sched:sched_wakeup",
                                "-k", "mono", "-a", "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        run_chunks(base, "r0", bodies)
        time.sleep(0.3)
        marks = []
        run_chunks(base, "r1", bodies, marks)
        time.sleep(0.3)
        rec.send_signal(2)
        rec.wait()
        srv.terminate()
        srv.wait()
        ev = switches(data)
        rows = []
        print("chunk  total   parse_end  store_tail  end   idle (ms; idle summed over the cores)")
        for j, a, b in marks:
            if j == "steps":
                continue
            w = [e for e in ev if a <= e[0] <= b]
            pe = [e[0] for e in w if e[2] == "ts-parse" and e[3] == "X"]
            se = [e[0] for e in w if e[2] == "ts-store" and e[3] == "X"]
            run = busy(ev, a, b)
            idle = sum(v for k, v in run.items() if k.startswith("swapper"))
            if not pe or not se:
                continue
            r = ((b - a) * 1e3, (pe[0] - a) * 1e3, (se[-1] - pe[0]) * 1e3, (b - se[-1]) * 1e3, idle * 1e3)
            rows.append(r)
            print(f"{j:5d}  " + "  ".join(f"{x:6.2f}" for x in r))
        if rows:
            print("median " + "  ".join(f"{statistics.median(r[k] for r in rows):6.2f}" for k in range(5)))
            print("sum    " + "  ".join(f"{sum(r[k] for r in rows):6.1f}" for k in range(5)))
        for j, a, b in marks:
            if j == "steps":
                run = busy(ev, a, b)
                top = sorted(run.items(), key=lambda kv: -kv[1])[:6]
                print(f"/steps read: {(b - a) * 1e3:.1f} ms; ran: " +
                      ", ".join(f"{k} {v * 1e3:.1f}" for k, v in top))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def rounds(args):
    work = tempfile.mkdtemp(prefix="chunk-rounds-")
    try:
        bodies = bodies_of(args, work)
        res = {s: [] for s in args.servers}
        for r in range(args.rounds):
            for s in (args.servers if r % 2 == 0 else args.servers[::-1]):
                d = tempfile.mkdtemp(dir=work)
                srv, base = cb.start_server(s, d, quiet=True)
                f0, c0 = cb.proc_stat(srv.pid)
                walls = []
                for i in range(3):
                    t0 = time.monotonic()
                    run_chunks(base, f"r{i}", bodies)
                    walls.append(time.monotonic() - t0)
                f1, c1 = cb.proc_stat(srv.pid)
                srv.terminate()
                srv.wait()
                shutil.rmtree(d, ignore_errors=True)
                res[s].append((walls, c1 - c0, f1 - f0))
        for s in args.servers:
            v = res[s]
            print(f"{s}: first run {statistics.median(x[0][0] for x in v) * 1000:.0f} ms, the two after "
                  f"{statistics.median(w for x in v for w in x[0][1:]) * 1000:.0f} ms; server CPU "
                  f"{statistics.median(x[1] for x in v):.2f} s; minor faults {statistics.median(x[2] for x in v):.0f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("servers", nargs="+")
    ap.add_argument("--sched", action="store_true", help="the chunk-by-chunk trace of one server (perf, root)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--whole", action="store_true", help="--rounds: the whole file instead of the chunks")
    ap.add_argument("--size-mb", type=int, default=51)
    ap.add_argument("--chunk-mb", type=float, default=2.02)
    args = ap.parse_args()
    if args.sched:
        sched(args)
    else:
        rounds(args)


if __name__ == "__main__":
    main()
