#!/usr/bin/env python3
"""Ingest of a run uploaded as many chunks vs the same events as one file.

Builds a trace of --size-mb MiB (bench/make_big_trace.py: copies of the V100
fixture, one after another in time), cuts its traceEvents into chunks of about
--chunk-mb MiB at event boundaries (each chunk keeps the file's other keys, as
the collector's chunks do), starts a fresh trainscope-server, uploads the
whole file as one run and the chunks, one after another, as another run
(rank 0 both), then two at a time as a third (a backlog shipped over two
connections: one 1 MiB body's work does not keep both cores busy), and
reports MiB/s of uncompressed trace for each, the time of the first and
last chunks, the first read after the last chunk (it derives the rank from
every chunk once: server/pipeline/runrank.h), the same uploads with a
page open on the run (a reader of /steps every --poll-s seconds, as the live
page did), the same with reads that do not wait (?wait=0, as the page follows a run
now) and how long after the last chunk the background derivation caught up, and
whether /steps, /ops and /kernels of the runs are the same bytes.

--order time cuts the chunks as windows of time instead (bench/live_cost.py's cut: each chunk the
events that began in it, as the collector writes one a second), so that the rank's derivations
cut parts and go on from them as the run grows (server/pipeline/runrank.c).

With --gzip every body (the whole file's and each chunk's) is gzipped (level 1, before the clock
starts) and sent with Content-Encoding: gzip, as trainscope-collect ships files: the server inflates
it and keeps it as sent, so its writer gzips nothing.

With --pairs N --client kept, each side's requests go one after another on one connection kept
open (http.client), as a client that keeps its connection sends them; with --client curl, by one
curl process on one connection (`--next`), timed by curl's own times of its transfers: what a
script that ships files with curl pays; with --client collect, by `trainscope-collect upload`
(--collect-exe), two files at a time, gzip'd on the way. The default, urllib, opens a connection a
request.

With --collector PATH (repeatable), the chunks are also written as files to a
folder and shipped by that trainscope-collect, `watch --once` (which gzips
each on the way, two in flight) and `upload FILE...` (two in flight since
2026-11-27), each as another run.

With --pairs N, only the whole file against the chunks, each timed to the answer of its first
/steps read, on a fresh server per pair in alternating order, with each order's median ratio and
their geometric mean: the side that goes first is the slower, whether or not the server took a
chunk of another run first (the second reuses the memory the first freed).

Usage: bench/chunks_bench.py [--size-mb 64] [--chunk-mb 1] [--order file|time] [--poll-s 1] [--gzip]
                             [--pairs N [--client python|kept|curl|collect]] [--server build/trainscope-server]
                             [--collector build/trainscope-collect]...
Writes its report to stdout; bench/results/chunks_bench-DATE.txt keeps runs.
Stdlib only.
"""
import argparse
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import queue
import resource
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def events_split(text):
    """(head, [event texts], tail) of a trace's traceEvents array."""
    at = text.index('"traceEvents"')
    start = text.index("[", at) + 1
    dec = json.JSONDecoder()
    evs, i = [], start
    while True:
        while text[i] in " \n\r\t,":
            i += 1
        if text[i] == "]":
            break
        _, j = dec.raw_decode(text, i)
        evs.append(text[i:j])
        i = j
    return text[:start], evs, text[i:]


def chunk_bodies(text, chunk_bytes):
    """The trace text cut into traceEvents chunks of about chunk_bytes at event boundaries,
    each keeping the file's other keys (as the collector's chunks do): their bodies."""
    head, evs, tail = events_split(text)
    chunks, cur, size = [], [], 0
    for e in evs:
        cur.append(e)
        size += len(e) + 1
        if size >= chunk_bytes:
            chunks.append(cur)
            cur, size = [], 0
    if cur:
        chunks.append(cur)
    return [(head + ",".join(c) + tail).encode() for c in chunks]


def make_trace(size_mb):
    """bench/make_big_trace.py's trace of size_mb MiB (copies of the V100 fixture), as text."""
    work = tempfile.mkdtemp(prefix="chunks-bench-trace-")
    try:
        made = json.loads(subprocess.check_output(
            [sys.executable, os.path.join(HERE, "make_big_trace.py"), "--size-mb", str(size_mb), "--out", work]))
        with open(made["json"]) as f:
            return f.read()
    finally:
        shutil.rmtree(work)


def start_server(server, work, extra=(), quiet=False):
    """A fresh server on a free port with its database in work: (process, base URL), once it answers.
    quiet: its output (the "listening" line, warnings) is dropped rather than let through."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out = subprocess.DEVNULL if quiet else None
    srv = subprocess.Popen([server, "--listen", f"127.0.0.1:{port}", "--db", os.path.join(work, "t.db"),
                            "--log-level", "warn", *extra], stdout=out, stderr=out)
    for _ in range(300):
        try:
            get(base, "/healthz")
            break
        except OSError:
            time.sleep(0.1)
    return srv, base


GZIP = False	# --gzip: bodies are gzip, sent with Content-Encoding: gzip


def post(base, path, body):
    req = urllib.request.Request(base + path, data=body, method="POST",
                                 headers={"Content-Encoding": "gzip"} if GZIP else {})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.loads(r.read())


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=600) as r:
        return r.read()


def proc_stat(pid):
    """(minor page faults, CPU seconds: user + system, all threads) of process pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read().rsplit(")", 1)[1].split()
    return int(st[7]), (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(srv):
    """The server's CPU seconds so far (user + system, all its threads)."""
    return proc_stat(srv.pid)[1]


def uploads_watched(base, bodies, run, read, poll_s):
    """The chunks uploaded as run, one after another, with a reader of run's read every
    poll_s seconds from the first on: the uploads' time and each read's."""
    stop = threading.Event()
    reads = []

    def reader():
        while not stop.is_set():
            r0 = time.monotonic()
            try:
                get(base, f"/api/v1/runs/{run}{read}")
            except OSError:
                pass
            reads.append(time.monotonic() - r0)
            stop.wait(poll_s)
    th = threading.Thread(target=reader)
    t0 = time.monotonic()
    for i, b in enumerate(bodies):
        post(base, f"/api/v1/runs/{run}/artifacts?rank=0&name=part{i}.json", b)
        if i == 0:
            th.start()
    took = time.monotonic() - t0
    stop.set()
    th.join()
    return took, reads


def uploads_in_flight(base, bodies, run, k):
    """The chunks uploaded as run over k connections at once, each taking the next chunk: the time."""
    q = queue.Queue()
    for i, b in enumerate(bodies):
        q.put((i, b))
    fails = []

    def worker():
        while True:
            try:
                i, b = q.get_nowait()
            except queue.Empty:
                return
            try:
                post(base, f"/api/v1/runs/{run}/artifacts?rank=0&name=part{i}.json", b)
            except OSError as e:
                fails.append(e)
    t0 = time.monotonic()
    th = [threading.Thread(target=worker) for _ in range(k)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if fails:
        raise fails[0]
    return time.monotonic() - t0


def timed_run(srv, base, run, bodies):
    """Upload bodies as run one after another, then its first read of /steps: (wall s, server CPU s)."""
    c0, t0 = server_cpu(srv), time.monotonic()
    for i, b in enumerate(bodies):
        post(base, f"/api/v1/runs/{run}/artifacts?rank=0&name=part{i}.json", b)
    get(base, f"/api/v1/runs/{run}/steps")
    return time.monotonic() - t0, server_cpu(srv) - c0


def timed_run_kept(srv, base, run, bodies):
    """timed_run() on one connection kept open (http.client), as a client that keeps it does."""
    import http.client
    conn = http.client.HTTPConnection(base.split("//")[1], timeout=3600)
    c0, t0 = server_cpu(srv), time.monotonic()
    for i, b in enumerate(bodies):
        conn.request("POST", f"/api/v1/runs/{run}/artifacts?rank=0&name=part{i}.json", body=b)
        r = conn.getresponse()
        r.read()
        if r.status >= 300:
            raise OSError(f"upload {i}: HTTP {r.status}")
    conn.request("GET", f"/api/v1/runs/{run}/steps")
    r = conn.getresponse()
    r.read()
    t = time.monotonic() - t0
    conn.close()
    return t, server_cpu(srv) - c0


def timed_run_curl(srv, base, run, files):
    """timed_run() by one curl, its uploads one after another on one connection (--next), as a
    script ships files: (s, server CPU s), the s the sum of curl's own times of its transfers
    (curl's start, 5-10 ms, is no part of either side)."""
    args = ["curl"]
    w = ["-sS", "--fail", "-o", "/dev/null", "-w", "%{time_total}\\n"]
    for i, f in enumerate(files):
        args += w + ["-H", "Expect:", "-H", "Content-Type: application/json", "-X", "POST", "-T", f,
                     f"{base}/api/v1/runs/{run}/artifacts?rank=0&name=part{i}.json", "--next"]
    args += w + [f"{base}/api/v1/runs/{run}/steps"]
    c0 = server_cpu(srv)
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return sum(float(x) for x in out.split()), server_cpu(srv) - c0


def timed_run_collect(srv, base, run, files, exe):
    """timed_run() by `trainscope-collect upload` (two files at a time, gzip'd on the way), then the
    read: (wall s, server CPU s), the collector's start included on both sides."""
    c0, t0 = server_cpu(srv), time.monotonic()
    subprocess.run([exe, "upload", "--server", base, "--run", run, "--rank", "0", "--force-rank", *files],
                   check=True, stdout=subprocess.DEVNULL)
    get(base, f"/api/v1/runs/{run}/steps")
    return time.monotonic() - t0, server_cpu(srv) - c0


def pairs(args, work, whole, bodies, mib):
    """--pairs N: the whole file and the chunks, each with its first read, on a fresh server per
    pair, the order alternating; prints every pair and the medians."""
    ws, cs, wc, cc = [], [], [], []
    print(f"trace: {mib:.1f} MiB; {len(bodies)} chunks of about {args.chunk_mb} MiB in {args.order} order; "
          f"each side timed from its first upload to the answer of its first /steps read"
          + {"curl": "; uploads by one curl on one connection", "kept": "; uploads on one connection kept open",
             "collect": f"; uploads by {args.collect_exe} upload", "python": ""}[args.client])
    files = {}
    if args.client in ("curl", "collect"):
        for run, bs in (("whole", [whole]), ("chunks", bodies)):
            files[run] = []
            for i, b in enumerate(bs):
                files[run].append(os.path.join(work, f"{run}{i}.json"))
                with open(files[run][-1], "wb") as f:
                    f.write(b)
    for n in range(args.pairs):
        d = os.path.join(work, f"pair{n}")
        os.mkdir(d)
        srv, base = start_server(args.server, d)
        try:
            order = [("whole", [whole]), ("chunks", bodies)]
            got = {}
            for run, bs in (order if n % 2 == 0 else order[::-1]):
                got[run] = (timed_run_collect(srv, base, run, files[run], args.collect_exe)
                            if args.client == "collect"
                            else timed_run_curl(srv, base, run, files[run]) if files
                            else timed_run_kept(srv, base, run, bs) if args.client == "kept"
                            else timed_run(srv, base, run, bs))
            same = all(get(base, f"/api/v1/runs/whole/{p}") == get(base, f"/api/v1/runs/chunks/{p}")
                       for p in ("steps", "ops?limit=100000", "kernels?limit=100000"))
        finally:
            srv.terminate()
            srv.wait()
        shutil.rmtree(d, ignore_errors=True)
        (tw, cw), (tc, ccpu) = got["whole"], got["chunks"]
        ws.append(tw), cs.append(tc), wc.append(cw), cc.append(ccpu)
        print(f"pair {n + 1}: whole {tw:.3f} s (CPU {cw:.2f} s), chunks {tc:.3f} s (CPU {ccpu:.2f} s), "
              f"ratio {tc / tw:.2f}, same answers: {same}")
        if not same:
            sys.exit("chunks_bench: the chunks' answers differ from the whole file's")
    med = lambda v: sorted(v)[len(v) // 2]
    ratios = [c / w for c, w in zip(cs, ws)]
    print(f"medians: whole {med(ws):.3f} s (CPU {med(wc):.2f} s), chunks {med(cs):.3f} s (CPU {med(cc):.2f} s), "
          f"ratio of medians {med(cs) / med(ws):.2f}, median of ratios {med(ratios):.2f}")
    # A fresh server's first upload pays its first page faults (50-70 ms here), so a pair's ratio
    # depends on which side went first, and with an odd count one order has a pair more: the
    # median of ratios is then that order's. Each order's median, and their geometric mean:
    wf, cf = ratios[0::2], ratios[1::2]
    if wf and cf:
        print(f"by order: whole first {med(wf):.2f} ({len(wf)} pairs), chunks first {med(cf):.2f} "
              f"({len(cf)} pairs), their geometric mean {(med(wf) * med(cf)) ** 0.5:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=64)
    ap.add_argument("--chunk-mb", type=float, default=1.0)
    ap.add_argument("--order", choices=("file", "time"), default="file")
    ap.add_argument("--server", default=os.path.join(ROOT, "build", "trainscope-server"))
    ap.add_argument("--poll-s", type=float, default=1.0)
    ap.add_argument("--no-follow", action="store_true", help="skip the ?wait=0 phase (a server before it)")
    ap.add_argument("--gzip", action="store_true",
                    help="gzip every body (level 1) and send it with Content-Encoding: gzip, as the collector does")
    ap.add_argument("--pairs", type=int, default=0,
                    help="only the whole file against the chunks one after another, each followed by its "
                         "first read of /steps, N times on fresh servers in alternating order: the medians")
    ap.add_argument("--client", choices=("python", "kept", "curl", "collect"), default="python",
                    help="--pairs: upload with urllib, a connection a request (the default), with http.client "
                         "on one connection kept open, with one curl process on one connection, as a "
                         "script of `curl --next` does, or with `trainscope-collect upload` (--collect-exe)")
    ap.add_argument("--collect-exe", default=os.path.join(ROOT, "build", "trainscope-collect"),
                    help="--client collect: the trainscope-collect to ship with")
    ap.add_argument("--collector", action="append", default=[],
                    help="also ship the chunks, as files in a folder, with this trainscope-collect "
                         "(watch --once; repeat to compare builds)")
    args = ap.parse_args()
    if args.gzip and args.collector:
        ap.error("--gzip with --collector: the collector gzips the chunks' files itself")
    if args.client != "python" and (not args.pairs or args.gzip):
        ap.error("--client: with --pairs, without --gzip")
    work = tempfile.mkdtemp(prefix="chunks-bench-")
    srv = None
    try:
        made = json.loads(subprocess.check_output(
            [sys.executable, os.path.join(HERE, "make_big_trace.py"), "--size-mb", str(args.size_mb), "--out", work]))
        path = made["json"]
        with open(path) as f:
            text = f.read()
        if args.order == "time":
            import live_cost  # noqa: E402 (it imports this module: not at the top)
            bodies = live_cost.time_bodies(text, int(args.chunk_mb * 1048576))
        else:
            bodies = chunk_bodies(text, int(args.chunk_mb * 1048576))
        whole = text.encode()
        del text
        mib = len(whole) / 1048576
        if args.gzip:
            global GZIP
            GZIP = True
            whole = gzip.compress(whole, 1)
            bodies = [gzip.compress(b, 1) for b in bodies]

        if args.pairs:
            pairs(args, work, whole, bodies, mib)
            return
        srv, base = start_server(args.server, work)

        c0 = server_cpu(srv)
        t0 = time.monotonic()
        post(base, "/api/v1/runs/whole/artifacts?rank=0&name=whole.json", whole)
        t_whole = time.monotonic() - t0
        c1 = server_cpu(srv)
        times = []
        t0 = time.monotonic()
        for i, b in enumerate(bodies):
            t1 = time.monotonic()
            post(base, f"/api/v1/runs/chunks/artifacts?rank=0&name=part{i}.json", b)
            times.append(time.monotonic() - t1)
        t_chunks = time.monotonic() - t0
        c2 = server_cpu(srv)
        t1 = time.monotonic()
        get(base, "/api/v1/runs/chunks/steps")
        t_read = time.monotonic() - t1
        c3 = server_cpu(srv)
        t_two = uploads_in_flight(base, bodies, "two", 2)
        get(base, "/api/v1/runs/two/steps")
        # again, with a page open on the run: a reader every poll_s seconds while the chunks land
        t_live, reads = uploads_watched(base, bodies, "live", "/steps", args.poll_s)
        t1 = time.monotonic()
        get(base, "/api/v1/runs/live/steps")
        t_live_read = time.monotonic() - t1
        # and as the run page follows a run now: reads that do not wait (?wait=0), the rank derived
        # in the background, then how long after the last chunk the analysis caught up
        if not args.no_follow:
            t_follow, freads = uploads_watched(base, bodies, "follow", "/steps?wait=0", args.poll_s)
            t1 = time.monotonic()
            while json.loads(get(base, "/api/v1/runs/follow"))["run"]["analysis_pending"]:
                get(base, "/api/v1/runs/follow/ranks?wait=0")
                time.sleep(0.05)
            t_caught = time.monotonic() - t1
        # the chunks as the collector ships them: files in a folder, watch --once (it gzips each on the way)
        t_collect, cpu_collect, t_upload = [], [], []
        if args.collector:
            spool = os.path.join(work, "spool")
            os.mkdir(spool)
            old = time.time() - 60	# settled: watch waits for files modified in the last second
            for i, b in enumerate(bodies):
                f = os.path.join(spool, f"part{i:05d}.json")
                with open(f, "wb") as out:
                    out.write(b)
                os.utime(f, (old, old))
        for n, exe in enumerate(args.collector):
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            t1 = time.monotonic()
            subprocess.run([exe, "watch", "--once", "--server", base, "--run", f"collect{n}",
                            "--state", os.path.join(work, f"state{n}"), spool],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t_collect.append(time.monotonic() - t1)
            ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)	# the collector's: the server is not waited for yet
            cpu_collect.append(ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime)
            get(base, f"/api/v1/runs/collect{n}/steps")
            t1 = time.monotonic()
            subprocess.run([exe, "upload", "--server", base, "--run", f"upload{n}"] +
                           [os.path.join(spool, f) for f in sorted(os.listdir(spool)) if f.endswith(".json")],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t_upload.append(time.monotonic() - t1)
            get(base, f"/api/v1/runs/upload{n}/steps")
        runs = (["whole", "chunks", "two", "live"] + ([] if args.no_follow else ["follow"]) +
                [f"collect{n}" for n in range(len(args.collector))] +
                [f"upload{n}" for n in range(len(args.collector))])
        same = all(len({get(base, f"/api/v1/runs/{r}/{p}") for r in runs}) == 1
                   for p in ("steps", "ops?limit=100000", "kernels?limit=100000"))
        k = min(5, len(times))
        print(f"trace: {mib:.1f} MiB, {made.get('events', '?')} events; "
              f"{len(bodies)} chunks of about {args.chunk_mb} MiB in {args.order} order"
              + (f"; gzipped: {len(whole) / 1048576:.1f} MiB, sent with Content-Encoding: gzip" if args.gzip else ""))
        print(f"whole file: {t_whole:.2f} s, {mib / t_whole:.1f} MiB/s")
        print(f"chunks, one after another: {t_chunks:.2f} s, {mib / t_chunks:.1f} MiB/s "
              f"({t_chunks / t_whole:.1f}x the whole file's time)")
        print(f"chunks, two at a time: {t_two:.2f} s, {mib / t_two:.1f} MiB/s "
              f"({t_two / t_whole:.2f}x the whole file's time)")
        print(f"first {k} chunks: {sum(times[:k]) / k * 1000:.0f} ms each; last {k}: {sum(times[-k:]) / k * 1000:.0f} ms each")
        print(f"server CPU: the whole file {c1 - c0:.2f} s; the chunks one after another {c2 - c1:.2f} s "
              f"({(c2 - c1) / (c1 - c0):.2f}x), then the first read's derivation {c3 - c2:.2f} s")
        print(f"first read after the last chunk (derives the rank): {t_read:.2f} s; "
              f"uploads + that read: {t_chunks + t_read:.2f} s, {mib / (t_chunks + t_read):.1f} MiB/s "
              f"({(t_chunks + t_read) / t_whole:.1f}x the whole file's time)")
        print(f"with a reader every {args.poll_s:g} s: uploads {t_live:.2f} s, then a read {t_live_read:.2f} s; "
              f"{len(reads)} reads, slowest {max(reads, default=0):.2f} s, median "
              f"{sorted(reads)[len(reads) // 2] if reads else 0:.2f} s")
        if not args.no_follow:
            print(f"with a reader every {args.poll_s:g} s that does not wait (?wait=0): uploads {t_follow:.2f} s; "
                  f"{len(freads)} reads, slowest {max(freads, default=0):.3f} s, median "
                  f"{sorted(freads)[len(freads) // 2] if freads else 0:.3f} s; analysed {t_caught:.2f} s after the last chunk")
        for exe, t, cpu in zip(args.collector, t_collect, cpu_collect):
            print(f"{exe} watch --once on the chunks' folder: {t:.2f} s, {mib / t:.1f} MiB/s "
                  f"({t / t_whole:.2f}x the whole file's time; the collector's CPU {cpu:.2f} s, on the same cores)")
        for exe, t in zip(args.collector, t_upload):
            print(f"{exe} upload of the chunks' files: {t:.2f} s, {mib / t:.1f} MiB/s "
                  f"({t / t_whole:.2f}x the whole file's time)")
        print(f"steps, ops, kernels of the {len(runs)} runs the same bytes: {same}")
    finally:
        if srv:
            srv.terminate()
            srv.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
