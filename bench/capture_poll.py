#!/usr/bin/env python3
"""What the collectors' capture polls cost the server when nobody asks for a capture (issue 52).

Starts a fresh trainscope-server, uploads one small trace as run "poll", then:

  1. busy: --clients threads, each a rank, send GET /api/v1/runs/poll/captures/next?rank=R&wait=0
     back to back on a kept-alive connection for --seconds: requests/s, p50 and p99 latency, and the
     server's CPU per poll (what a collector polling without wait would cost);
  2. idle: --waiters ranks hold GET ...&wait=30 (the collector's long poll; the server lets a quarter
     of its threads wait, the rest are answered 204 at once with Retry-After and come back then) for
     --seconds: the server's CPU per waiting rank and second (a waiter looks again every second);
  3. one capture made while they wait: how long until a waiting rank has it.

Usage: bench/capture_poll.py SERVER [--clients 4] [--waiters 4] [--seconds 10] [SERVER FLAGS...]
Stdlib only; bench/results/capture_poll-DATE.txt keeps runs.
"""
import argparse
import http.client
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

TRACE = json.dumps({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100}]}).encode()


def busy(port, rank, until, lat):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.monotonic() < until:
        t0 = time.monotonic()
        c.request("GET", f"/api/v1/runs/poll/captures/next?rank={rank}&wait=0")
        r = c.getresponse()
        r.read()
        if r.status != 204:
            raise SystemExit(f"rank {rank}: {r.status}")
        lat.append(time.monotonic() - t0)
    c.close()


def waiter(port, rank, until, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    polls = turned = 0
    while time.monotonic() < until:
        wait = max(1, min(30, int(until - time.monotonic())))
        c.request("GET", f"/api/v1/runs/poll/captures/next?rank={rank}&wait={wait}")
        r = c.getresponse()
        body = r.read()
        polls += 1
        if r.status == 200:
            out.append(("took", time.monotonic(), json.loads(body)["capture"]["id"]))
            break
        if r.getheader("Retry-After"):
            turned += 1
            time.sleep(min(float(r.getheader("Retry-After")), max(0, until - time.monotonic())))
    out.append((rank, polls, turned))
    c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("server")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--waiters", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10)
    a, flags = ap.parse_known_args()
    work = tempfile.mkdtemp(prefix="capture-poll-")
    srv, base = cb.start_server(a.server, work, flags)
    port = int(base.rsplit(":", 1)[1])
    try:
        cb.post(base, "/api/v1/runs/poll/artifacts?rank=0&name=t.json", TRACE)
        print(f"# {a.server} {' '.join(flags)}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")

        lat, cpu0 = [], cb.server_cpu(srv)
        until = time.monotonic() + a.seconds
        ts = [threading.Thread(target=busy, args=(port, r, until, lat)) for r in range(a.clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        cpu = cb.server_cpu(srv) - cpu0
        lat.sort()
        n = len(lat)
        print(f"busy: {a.clients} ranks polling wait=0 for {a.seconds:.0f} s: {n} polls, {n / a.seconds:.0f}/s, "
              f"p50 {lat[n // 2] * 1e3:.2f} ms, p99 {lat[int(n * 0.99)] * 1e3:.2f} ms, "
              f"server CPU {cpu / n * 1e6:.0f} us a poll")

        out, cpu0 = [], cb.server_cpu(srv)
        until = time.monotonic() + a.seconds
        ts = [threading.Thread(target=waiter, args=(port, 100 + r, until, out)) for r in range(a.waiters)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        cpu = cb.server_cpu(srv) - cpu0
        polls = sum(o[1] for o in out if o[0] != "took")
        turned = sum(o[2] for o in out if o[0] != "took")
        print(f"idle: {a.waiters} ranks long-polling (wait up to 30 s) for {a.seconds:.0f} s: {polls} requests, {turned} turned "
              f"away (Retry-After), server CPU {cpu * 1e3:.0f} ms = {cpu / a.waiters / a.seconds * 1e6:.0f} us per rank "
              f"and second ({cpu / a.seconds * 100:.3f} % of a core)")

        out = []
        until = time.monotonic() + 5
        ts = [threading.Thread(target=waiter, args=(port, 200 + r, until, out)) for r in range(1)]
        for t in ts:
            t.start()
        time.sleep(1)
        t0 = time.monotonic()
        made = cb.post(base, "/api/v1/runs/poll/captures", b'{"steps": 5}')["capture"]["id"]
        for t in ts:
            t.join()
        got = [o for o in out if o[0] == "took" and o[2] == made]
        print(f"wake: a capture made while a rank waits reaches it in "
              f"{(got[0][1] - t0) * 1e3:.1f} ms" if got else "wake: the waiting rank never got it")
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
