#!/usr/bin/env python3
"""What on-demand capture costs while nobody asks (issue 52: "under 0.1 % of step time").

Runs, for --seconds each, a fake training loop (tests/collector/cupti_host: the real
libtrainscope-cupti.so against the stand-in libcupti, steps of --step-ms, each an NVTX range push,
a kernel and a sleep) three ways:
  bare      the loop with the library off (no TRAINSCOPE_SPOOL): the baseline;
  ondemand  the loop under `trainscope-collect run --captures` (the library in on-demand mode,
            its thread looking for .capture every 100 ms), against a fake server whose
            GET .../captures/next holds 25 s and answers 204 (nothing asked), as the contract says;
and reports the CPU time (the scheduler's, /proc/PID/task/*/schedstat) of the training process and of the
collector over the window, after a 2 s settle, per second and per step.
Step time here is --step-ms of sleep: the overhead is the library's and collector's CPU per step
over the step's time (a loop that computes would only make the ratio smaller).

Usage: bench/capture_idle.py BUILD_DIR [--seconds 60] [--step-ms 100]
Stdlib only; bench/results/capture_idle-DATE.txt keeps runs.
"""
import argparse
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

def cpu_s(pid):
    """CPU time of a process's live threads, seconds: the scheduler's ns (/proc/PID/task/*/schedstat),
    not /proc/PID/stat's 10 ms ticks, too coarse for this."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total / 1e9


def child_of(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = f.read().split()
    return int(kids[0]) if kids else None


class Fake(http.server.BaseHTTPRequestHandler):
    polls = 0

    def do_GET(self):
        if "/captures/next" in self.path:
            Fake.polls += 1
            time.sleep(25)
            self.send_response(204)
            self.end_headers()
            return
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error":{"code":"not_found","message":"no"}}')

    def log_message(self, *a):
        pass


def measure(cmd, env, window, find_host):
    """Start cmd; after a 2 s settle, CPU of (host, collector or None) over window seconds."""
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    time.sleep(2)
    host = find_host(p.pid)
    coll = p.pid if host != p.pid else None
    h0, c0 = cpu_s(host), cpu_s(coll) if coll else 0.0
    time.sleep(window)
    h1, c1 = cpu_s(host), cpu_s(coll) if coll else 0.0
    p.wait()
    return h1 - h0, c1 - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--step-ms", type=int, default=100)
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    lib, fake, host = f"{b}/libtrainscope-cupti.so", f"{b}/tests/libfake_cupti.so", f"{b}/tests/cupti_host"
    collect = f"{b}/trainscope-collect"
    steps = int((a.seconds + 4) * 1000 / a.step_ms)
    loop = [host, lib, fake, f"steps:{steps}:{a.step_ms}"]

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="capture-idle-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINSCOPE_")}
    try:
        bare_h, _ = measure(loop, env, a.seconds, lambda pid: pid)
        env2 = dict(env, TRAINSCOPE_SERVER=f"http://127.0.0.1:{srv.server_address[1]}")
        cmd = [collect, "run", "--run", "bench", "--captures", "--cupti", lib, "--spool", f"{tmp}/spool", "--"] + loop
        od_h, od_c = measure(cmd, env2, a.seconds, child_of)
    finally:
        srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    n = a.seconds * 1000 / a.step_ms
    print(f"# bench/capture_idle.py {a.build} --seconds {a.seconds:g} --step-ms {a.step_ms}: {n:.0f} steps of "
          f"{a.step_ms} ms in the window; {Fake.polls} long poll(s) of the collector")
    print(f"{'':28}{'cpu s':>9}{'cpu ms/s':>10}{'cpu us/step':>13}{'% of step':>11}")
    rows = [("training process, bare", bare_h), ("training process, ondemand", od_h),
            ("  the library's cost", od_h - bare_h), ("collector (--captures)", od_c),
            ("library + collector", od_h - bare_h + od_c)]
    for name, s in rows:
        print(f"{name:28}{s:9.3f}{s * 1000 / a.seconds:10.3f}{s * 1e6 / n:13.1f}"
              f"{100 * s * 1000 / n / a.step_ms:11.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
