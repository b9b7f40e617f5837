#!/usr/bin/env python3
"""Small hostile inputs against what they cost the server (issue 50), one fresh server each.

Builds each input in memory (snapshots whose entries are copies, memory
timelines with a long first row), starts a fresh trainscope-server under its
default caps (SQLite in a temporary folder), uploads the input once and
prints: the status, the bytes sent, the server's peak memory (VmHWM), its
CPU in the upload, the database's bytes (with its WAL) and the answer's
bytes. The goal of the issue: no upload under 1 MB takes the server past
256 MiB.

Usage: bench/hostile_inputs.py SERVER
Stdlib only; bench/results/hostile_inputs-DATE.txt keeps runs.
"""
import gzip
import os
import pickle
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402


def snapshot(traces):
    return pickle.dumps({"segments": [], "device_traces": traces}, protocol=4)


def distinct(n):
    return [{"action": "alloc" if i % 2 == 0 else "free_completed", "addr": 4096 * (i // 2), "size": 512}
            for i in range(n)]


def inputs():
    one = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0}
    gz = lambda b: gzip.compress(b, 9, mtime=0)  # noqa: E731
    yield "one entry x 498,000, list x 64 (pickle, gzip)", gz(snapshot([[one] * 498000] * 64)), "gzip"
    yield "one entry x 498,000, list x 64 (pickle)", snapshot([[one] * 498000] * 64), None
    yield "400,000 entries, list x 64 (pickle, gzip)", gz(snapshot([distinct(400000)] * 64)), "gzip"
    yield "74,000 entries, list x 64 (pickle, gzip)", gz(snapshot([distinct(74000)] * 64)), "gzip"
    yield "50,000 entries, list x 64 (pickle, gzip)", gz(snapshot([distinct(50000)] * 64)), "gzip"
    yield "one entry x 3.3 M, one device (pickle, gzip)", gz(snapshot([[one] * 3300000])), "gzip"
    row = b"[[0,1,2,3,4,5,6,7,8]]"
    yield "timeline: 32 M zero times, 1 row (64 MB)", b"[[" + b"0," * 31999999 + b"0]," + row + b"]", None
    yield "timeline: 8 M zero times, 1 row (gzip)", gz(b"[[" + b"0," * 7999999 + b"0]," + row + b"]"), "gzip"


def one(server, label, body, encoding):
    work = tempfile.mkdtemp(prefix="hostile_inputs.")
    srv, base = cb.start_server(server, work)
    try:
        cpu0 = cb.server_cpu(srv)
        req = urllib.request.Request(base + "/api/v1/runs/h/artifacts?name=input", data=body, method="POST")
        if encoding:
            req.add_header("Content-Encoding", encoding)
        t0 = time.time()
        try:
            with urllib.request.urlopen(req, timeout=3600) as r:
                status, answer = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, answer = e.code, e.read()
        wall = time.time() - t0
        cpu = cb.server_cpu(srv) - cpu0
        with open(f"/proc/{srv.pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        db = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work) if f.startswith("t.db"))
        print(f"{status:4} {len(body):>10} {hwm / 1024:8.0f} {cpu:6.2f} {wall:6.2f} {db:>11} {len(answer):>7}  {label}",
              flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    server = sys.argv[1] if len(sys.argv) > 1 else "build/trainscope-server"
    print("# status, bytes sent, VmHWM MiB, server CPU s, wall s, database bytes, answer bytes, input")
    for label, body, enc in inputs():
        one(server, label, body, enc)


if __name__ == "__main__":
    main()
