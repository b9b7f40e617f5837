#!/usr/bin/env python3
"""Side by side: one file uploaded to each of several server builds, in alternating order.

For each round, every SERVER in turn (the order reversed every other round) starts fresh on a
database of its own, takes FILE as one upload (Content-Encoding: gzip when FILE is gzip, as the
collector sends it) and answers its run's first /steps read; the wall time from the upload's
start to that answer, the server's CPU seconds (all threads) and its minor page faults are kept.
Prints each server's medians and every round's wall time. Two builds of one commit apart, on a
2-core machine whose timings move 10-15 % run to run: the CPU column is the steadier one.

Usage: bench/upload_pairs.py [--rounds 10] FILE SERVER [SERVER...]
Stdlib only.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_stat(pid):
    """(minor faults, CPU seconds) of pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return int(st[7]), (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def one(server, body, gz):
    work = tempfile.mkdtemp(prefix="upload-pairs-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([server, "--listen", f"127.0.0.1:{port}", "--db", os.path.join(work, "t.db"),
                            "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5).read()
                break
            except OSError:
                time.sleep(0.05)
        f0, c0 = proc_stat(srv.pid)
        t0 = time.monotonic()
        req = urllib.request.Request(base + "/api/v1/runs/p/artifacts?rank=0&name=f.json", data=body,
                                     method="POST", headers={"Content-Encoding": "gzip"} if gz else {})
        urllib.request.urlopen(req, timeout=3600).read()
        urllib.request.urlopen(base + "/api/v1/runs/p/steps", timeout=600).read()
        t1 = time.monotonic()
        f1, c1 = proc_stat(srv.pid)
        return t1 - t0, c1 - c0, f1 - f0
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("file")
    ap.add_argument("servers", nargs="+")
    a = ap.parse_args()
    with open(a.file, "rb") as f:
        body = f.read()
    gz = body[:2] == b"\x1f\x8b"
    res = {s: [] for s in a.servers}
    for r in range(a.rounds):
        for s in (a.servers if r % 2 == 0 else a.servers[::-1]):
            res[s].append(one(s, body, gz))
    print(f"# {a.file} ({len(body) / 1e6:.1f} MB{', gzip' if gz else ''}), {a.rounds} rounds, medians:")
    for s in a.servers:
        v = res[s]
        med = [statistics.median(x[i] for x in v) for i in range(3)]
        print(f"{s}: wall {med[0]:.3f} s, CPU {med[1]:.3f} s, minor faults {med[2]:.0f}"
              f"  (wall: {' '.join('%.3f' % x[0] for x in v)})")


if __name__ == "__main__":
    main()
