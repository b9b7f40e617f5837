#!/usr/bin/env python3
"""Small hostile inputs against what they cost the server (issue 50), one fresh server each.

Builds each input in memory (snapshots whose entries are copies, memory
timelines with a long first row or many points, and for every other format
the under-1 MB body that costs the most found so far), starts a fresh
trainscope-server under its default caps (SQLite in a temporary folder),
uploads the input once, then reads the routes of that format, and prints:
the status, the bytes sent, the server's peak memory (VmHWM, upload and
reads), its CPU in the upload, the database's bytes (with its WAL), the
upload answer's bytes and the largest read's bytes. The goal of the issue:
no upload under 1 MB takes the server past 256 MiB.

A gzip body is made by gzr(): the text sync-flushed every 11,000 bytes, so
that its ratio stays near 230:1 all along, under the server's --max-ratio
of 250 (a body of 1 MB inflates to about 230 MB).

Usage: bench/hostile_inputs.py [SERVER [LABEL-WORD]]  (only the inputs whose label holds the word)
Stdlib only; bench/results/hostile_inputs-DATE.txt keeps runs.
"""
import gzip
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chunks_bench as cb  # noqa: E402


def snapshot(traces):
    return pickle.dumps({"segments": [], "device_traces": traces}, protocol=4)


def distinct(n):
    return [{"action": "alloc" if i % 2 == 0 else "free_completed", "addr": 4096 * (i // 2), "size": 512}
            for i in range(n)]


def peak_ratio(body):
    """The largest inflated:sent ratio over the body's prefixes past 16 MiB inflated (the server's check)."""
    d, out, worst = zlib.decompressobj(31), 0, 0
    for i in range(0, len(body), 4096):
        out += len(d.decompress(body[i:i + 4096]))
        if out > 16 << 20:
            worst = max(worst, out / (i + 4096))
    return worst


def gzr(make, body_max=1_000_000, every=11000, most=None):
    """gzip of make(n), sync-flushed every `every` bytes or fewer, so that the inflated:sent ratio stays
    under 245:1 all along (the server's --max-ratio is 250), n as large as fits in body_max."""
    def deflate(raw):
        co = zlib.compressobj(9, zlib.DEFLATED, 31)
        out = [co.compress(raw[i:i + every]) + co.flush(zlib.Z_SYNC_FLUSH) for i in range(0, len(raw), every)]
        return b"".join(out) + co.flush()
    base, one = len(deflate(make(0))), make(20000)
    n = int((body_max * 0.98 - base) / ((len(deflate(one)) - base) / 20000))
    n = min(n, most or n)
    while True:
        body = deflate(make(n))
        if len(body) > body_max:
            n = int(n * 0.97)
        elif peak_ratio(body) > 245:
            every = every * 3 // 4
        else:
            return body


KA_SEP = b"-" * 25 + b"  " + b"  ".join([b"-" * 12] * 4) + b"  \n"
KA_HDR = b"%25s  %12s  %12s  %12s  %12s  \n" % (b"Name", b"Self CPU %", b"Self CPU", b"CPU total", b"# of Calls")
KA_ROW = b"%25s  %12s  %12s  %12s  %12s  \n" % (b"aten::mm", b"1.00%", b"1.0us", b"1.0us", b"1")
LI_HDR = (b"Action  |  Mean duration (s)  |Num calls  |  Total time (s)  |  Percentage %  |\n" + b"-" * 80 + b"\n"
          b"Total  |  -  |_  |  29.42  |  100 %  |\n" + b"-" * 80 + b"\n")
SMI_COLS = 255


def inputs():
    one = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0}
    gz = lambda b: gzip.compress(b, 9, mtime=0)  # noqa: E731
    yield "one entry x 498,000, list x 64 (pickle, gzip)", lambda: gz(snapshot([[one] * 498000] * 64)), "gzip"
    yield "one entry x 498,000, list x 64 (pickle)", lambda: snapshot([[one] * 498000] * 64), None
    yield "400,000 entries, list x 64 (pickle, gzip)", lambda: gz(snapshot([distinct(400000)] * 64)), "gzip"
    yield "74,000 entries, list x 64 (pickle, gzip)", lambda: gz(snapshot([distinct(74000)] * 64)), "gzip"
    yield "50,000 entries, list x 64 (pickle, gzip)", lambda: gz(snapshot([distinct(50000)] * 64)), "gzip"
    yield "one entry x 3.3 M, one device (pickle, gzip)", lambda: gz(snapshot([[one] * 3300000])), "gzip"
    row = b"[[0,1,2,3,4,5,6,7,8]]"
    yield "timeline: 32 M zero times, 1 row (64 MB)", lambda: b"[[" + b"0," * 31999999 + b"0]," + row + b"]", None
    yield "timeline: 8 M zero times, 1 row (gzip)", lambda: gz(b"[[" + b"0," * 7999999 + b"0]," + row + b"]"), "gzip"
    # a point for each row: t alternates, so each row is a new point (80 bytes held each)
    yield "timeline: raw rows, t 0,1,0,1... (gzip)", lambda: gzr(
        lambda n: b"[" + b"[0,0,512,0],[1,0,-512,0]," * n + b"[0,0,0,0]]"), "gzip"
    yield "timeline: raw rows in time order (gzip)", lambda: gzr(
        lambda n: b"[" + b"".join(b"[%d,0,512,2],[%d,0,-512,2]," % (2 * i, 2 * i + 1) for i in range(n)) + b"[0,0,0,0]]"),\
        "gzip"
    yield "timeline: [times, sizes], zeros (gzip)", lambda: gzr(
        lambda n: b"[[" + b"0," * n + b"0],[" + b"[0,0,0,0,0,0,0,0,0]," * n + b"[0,0,0,0,0,0,0,0,0]]]"), "gzip"
    # nvidia-smi: a cell a row and column, each a database row
    smi_hdr = b"timestamp, " + b", ".join(b"c%d [%%]" % k for k in range(SMI_COLS)) + b"\n"
    yield "nvidia-smi: 255 columns of 0 (gzip)", lambda: gzr(
        lambda n: smi_hdr + (b"2026/01/01 00:00:00.000, " + b",".join([b"0"] * SMI_COLS) + b"\n") * (n + 1)), "gzip"
    yield "nvidia-smi: 1 column, 4 M rows (gzip)", lambda: gzr(
        lambda n: b"utilization.gpu [%]\n" + b"0 %\n" * (n + 1), most=4000000), "gzip"
    yield "nvidia-smi: 1 column, 1.5 M rows (gzip)", lambda: gzr(
        lambda n: b"utilization.gpu [%]\n" + b"0 %\n" * (n + 1), most=1500000), "gzip"
    yield "key_averages: one row again and again (gzip)", lambda: gzr(
        lambda n: KA_SEP + KA_HDR + KA_SEP + KA_ROW * (n + 1) + KA_SEP), "gzip"
    yield "lightning: one action again and again (gzip)", lambda: gzr(
        lambda n: LI_HDR + b"a  |  0.5  |1  |  0.5  |  1  |\n" * (n + 1)), "gzip"
    # the most rows that still pass (201), then their reads
    yield "key_averages: 250,000 rows (gzip)", lambda: gzr(
        lambda n: KA_SEP + KA_HDR + KA_SEP + KA_ROW * n + KA_SEP, most=250000), "gzip"
    yield "lightning: 1 M actions (gzip)", lambda: gzr(
        lambda n: LI_HDR + b"a  |  0.5  |1  |  0.5  |  1  |\n" * n, most=1000000), "gzip"
    yield "stacks: lines of 16,000 frames a (gzip)", lambda: gzr(
        lambda n: (b"a;" * 16000 + b"a 1\n") * (n + 1)), "gzip"
    yield "stacks: 300,000 distinct frames (gzip)", lambda: gz(b"".join(b"f%d;g%d 1\n" % (i, i) for i in range(150000))), \
        "gzip"
    kernel = (b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,'
              b'"args":{"correlation":1,"stream":7,"device":0}},')
    yield "trace: kernels at one instant (gzip)", lambda: gzr(
        lambda n: b'{"traceEvents":[' + kernel * n + kernel[:-1] + b"]}"), "gzip"
    op = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":1},'
    yield "trace: operators at one instant (gzip)", lambda: gzr(
        lambda n: b'{"traceEvents":[' + op * n + op[:-1] + b"]}"), "gzip"


READS = ("steps", "ops", "kernels", "memory", "memory/peak", "memory/segments", "gpu", "stacks", "actions",
         "canary", "diagnosis", "timeline", "trace", "metrics", "critical_path", "distributed")


def largest_read(base):
    """The most bytes one read of run h answers, and its route."""
    best = (0, "")
    for route in READS:
        try:
            with urllib.request.urlopen(f"{base}/api/v1/runs/h/{route}", timeout=600) as r:
                n = len(r.read())
        except urllib.error.HTTPError as e:
            n = len(e.read())
        best = max(best, (n, route))
    return best


def error_code(status, answer):
    """" (code)" of a 4xx answer's JSON body, else ""."""
    try:
        return f" ({json.loads(answer)['error']['code']})" if status >= 400 else ""
    except (ValueError, KeyError, TypeError):
        return ""


def vmhwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def one(server, label, body, encoding, limit_s=240):
    work = tempfile.mkdtemp(prefix="hostile_inputs.")
    srv, base = cb.start_server(server, work)
    try:
        cpu0 = cb.server_cpu(srv)
        req = urllib.request.Request(base + "/api/v1/runs/h/artifacts?name=input", data=body, method="POST")
        if encoding:
            req.add_header("Content-Encoding", encoding)
        t0 = time.time()
        try:
            with urllib.request.urlopen(req, timeout=limit_s) as r:
                status, answer = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, answer = e.code, e.read()
        except OSError:
            status, answer = 0, b""	# no answer within limit_s
        wall = time.time() - t0
        cpu = cb.server_cpu(srv) - cpu0
        hwm = vmhwm(srv.pid)
        read, route = largest_read(base) if status else (0, "")
        read_hwm = vmhwm(srv.pid)
        db = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work) if f.startswith("t.db"))
        print(f"{status:4} {len(body):>10} {hwm / 1024:8.0f} {read_hwm / 1024:6.0f} {cpu:6.2f} {wall:6.2f} {db:>11} {len(answer):>7}"
              f" {read:>9} {route:15} {label}{error_code(status, answer)}", flush=True)
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    server = sys.argv[1] if len(sys.argv) > 1 else "build/trainscope-server"
    word = sys.argv[2] if len(sys.argv) > 2 else ""
    print("# status (0: none in 240 s), bytes sent, VmHWM MiB after the upload and after the reads, server CPU s, wall s, database bytes, answer bytes,")
    print("# largest read's bytes and route, input")
    for label, body, enc in inputs():  # body: a function, so that the inputs left out are not built
        if word in label:
            one(server, label, body(), enc)


if __name__ == "__main__":
    main()
