#!/usr/bin/env python3
"""Every GET answer of a server on a fixed set of uploads, one file each: the
guard of refactors that must not change a byte (capture before, diff after),
and of a second store engine that must answer as the first.

  scripts/answers.py OUTDIR [--server build/trainscope-server] [--db postgresql://...]
  diff -r BEFORE AFTER

The upgrade check: an older server fills a kept database, a newer one
migrates it and answers from it without uploading anything:

  scripts/answers.py BEFORE --server OLD --db /tmp/u.db
  scripts/answers.py AFTER --server NEW --db /tmp/u.db --no-upload

Uploads traces (one whole, one cut in three chunks, a 2-rank pair), a memory
timeline export and a snapshot, the other profilers' files, then GETs every
read endpoint with its query variants (rank, format=csv, limit, sort, points);
and pairs of runs for their compares alone (the H200 recordings ckpt_off and
ckpt_on, healthy and dataloader; HTA's compare pair).
The answers are kept as served, byte for byte, but for the upload times
(created_ns), zeroed. Stdlib only.
"""
import argparse
import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FX = os.environ.get("FIXTURES_DIR") or os.path.join(os.path.dirname(ROOT), "shared", "fixtures")
GPU = os.path.join(ROOT, "tests", "fixtures", "gpu")

UPLOADS = [  # run, rank, fixture
    ("whole", 0, "traces/hta_v100_train_memory.json.gz"),
    ("pair", 0, "traces/hta_sampled_rank0.json.gz"),
    ("pair", 1, "traces/hta_sampled_rank1.json.gz"),
    ("resnet", 0, "traces/kineto_resnet50_workers0.json.gz"),
    ("mem", 0, "memory/cs336_memory_snapshot.pickle"),
    ("fmt", 0, "formats/lightning_simple_pl1.2_hannah.txt"),
    ("fmt", 0, "formats/nvidia_smi_noheader_plato.csv"),
    ("fmt", 0, "formats/export_stacks_gpt2_profile.txt"),
    ("adv", 0, "formats/lightning_advanced_pl1.4_doc_robustness.txt"),
    ("adv", 0, "formats/key_averages_cuda_kernelheim.txt"),
    ("adv", 0, "formats/canary_metrics_example_SYNTHETIC.json"),
    ("adv", 1, "formats/nvidia_smi_repeated_header_slowfast.csv"),
    ("export", 0, "memory/hta_memory_timeline.raw.json.gz"),
    ("export", 0, "traces/hta_v100_train_memory.json.gz"),
]
# runs uploaded for their compares alone (no PER_RUN reads): run, path under FX or GPU (a folder: its traces,
# train's ten profiling cycles the parts of one analysis)
COMPARED = [("train", GPU, "train"), ("ckpt_off", GPU, "ckpt_off"), ("ckpt_on", GPU, "ckpt_on"), ("healthy", GPU, "healthy"),
            ("dataloader", GPU, "dataloader"), ("hta_base", FX, "traces/hta_compare_base.json.gz"),
            ("hta_test", FX, "traces/hta_compare_test.json.gz")]
COMPARES = ["/api/v1/compare?base=ckpt_off&target=ckpt_on", "/api/v1/compare?base=ckpt_on&target=ckpt_off",
            "/api/v1/compare?base=healthy&target=dataloader",
            "/api/v1/compare?base=healthy&target=dataloader&limit=5&threshold_pct=1",
            "/api/v1/compare?base=hta_base&target=hta_test", "/api/v1/compare?base=healthy&target=healthy",
            "/api/v1/compare?base=pair&target=whole", "/api/v1/compare?base=pair&target=pair&rank=1",
            "/api/v1/compare?base=whole&target=resnet", "/api/v1/compare?base=healthy&target=train"]
# the memory reads' variants: windows, devices, a run whose parameters are said (param_bytes)
EXTRA = ["/api/v1/runs/whole/memory?start_ns=1669783687000000000&end_ns=1669783688000000000&points=40",
         "/api/v1/runs/whole/memory?start_ns=1669783687000000000&end_ns=1669783688000000000&points=0",
         "/api/v1/runs/whole/memory?device=cpu&points=30", "/api/v1/runs/whole/memory/peak?device=cpu",
         "/api/v1/runs/whole/memory?device=cuda:7", "/api/v1/runs/export/memory?points=3",
         "/api/v1/runs/export/memory?points=2", "/api/v1/runs/export/memory?points=1",
         "/api/v1/runs/mem/memory/segments?device=cuda:0&artifact=5", "/api/v1/runs/adv/gpu?rank=1",
         "/api/v1/runs/adv/canary?rank=0", "/api/v1/runs/adv/gpu?rank=1&utc_offset_min=60",
         "/api/v1/runs/param/memory?points=25", "/api/v1/runs/param/memory/peak",
         "/api/v1/runs/param/memory?points=0", "/api/v1/compare?base=whole&target=export"]
PER_RUN = ["", "/steps", "/steps?format=csv", "/ops", "/ops?device=gpu", "/ops?sort=calls&limit=5",
           "/ops?format=csv", "/kernels", "/kernels?kind=memcpy", "/kernels?format=csv", "/ranks",
           "/ranks?format=csv", "/diagnosis", "/distributed", "/critical_path", "/timeline", "/memory",
           "/memory?points=50", "/memory?points=0", "/memory/peak", "/memory/segments", "/actions",
           "/stacks?top=20", "/gpu", "/canary", "/metrics", "/steps?rank=1", "/ops?rank=1"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, body=None):
    req = urllib.request.Request(base + path, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def chunks(path, k):
    """The trace's traceEvents cut in k pieces at event boundaries, each with the file's other keys."""
    text = gzip.open(path, "rt").read()
    d = json.loads(text)
    ev = d.pop("traceEvents")
    n = len(ev)
    out = []
    for i in range(k):
        part = dict(d)
        part["traceEvents"] = ev[i * n // k:(i + 1) * n // k]
        out.append(json.dumps(part).encode())
    return out


def scrub(b):
    """The bytes as served, upload times zeroed."""
    return re.sub(rb'"created_ns": ?-?[0-9]+', b'"created_ns":0', b)


def upload(base):
    for run, rank, f in UPLOADS:
        st, b = call(base, "POST", f"/api/v1/runs/{run}/artifacts?rank={rank}&name={os.path.basename(f)}",
                     open(os.path.join(FX, f), "rb").read())
        assert st in (200, 201), (f, st, b)
    for i, c in enumerate(chunks(os.path.join(FX, "traces/hta_v100_train_memory.json.gz"), 3)[::-1]):
        st, b = call(base, "POST", f"/api/v1/runs/chunked/artifacts?rank=0&name=part{i}.json", c)
        assert st in (200, 201), (st, b)
    st, b = call(base, "POST", "/api/v1/runs/param/artifacts?rank=0&name=t.json.gz",
                 open(os.path.join(FX, "traces/kineto_resnet50_workers0.json.gz"), "rb").read())
    assert st in (200, 201), (st, b)
    st, b = call(base, "PATCH", "/api/v1/runs/param", b'{"metadata": {"param_bytes": 40000000}}')
    assert st == 200, (st, b)
    for run, top, f in COMPARED:
        path = os.path.join(top, f)
        files = [os.path.join(path, x) for x in sorted(os.listdir(path)) if x.endswith(".pt.trace.json.gz")] \
            if os.path.isdir(path) else [path]
        for p in files:
            st, b = call(base, "POST", f"/api/v1/runs/{run}/artifacts?rank=0&name={os.path.basename(p)}",
                         open(p, "rb").read())
            assert st in (200, 201), (p, st, b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--server", default=os.path.join(ROOT, "build", "trainscope-server"))
    ap.add_argument("--db", help="the server's --db (default: a new SQLite file); a PostgreSQL URI must name an empty database")
    ap.add_argument("--no-upload", action="store_true",
                    help="answer from --db as an earlier run of this script left it (the upgrade check)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="answers-")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen([a.server, "--listen", f"127.0.0.1:{port}", "--db", a.db or os.path.join(work, "t.db"),
                            "--log-level", "warn"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                call(base, "GET", "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        if not a.no_upload:
            upload(base)
        os.makedirs(a.out, exist_ok=True)
        runs = [r for r, _, _ in UPLOADS] + ["chunked", "param"]
        paths = ["/api/v1/runs", "/api/v1/runs/nope", "/api/v1/compare?base=whole&target=chunked",
                 "/api/v1/compare?base=fmt&target=adv", "/api/v1/runs/whole/artifacts/1"]
        paths += [f"/api/v1/runs/{r}{p}" for r in dict.fromkeys(runs) for p in PER_RUN] + EXTRA + COMPARES
        for p in paths:
            st, b = call(base, "GET", p)
            name = re.sub(r"[^A-Za-z0-9._=-]+", "_", p.strip("/"))
            with open(os.path.join(a.out, name), "wb") as f:
                f.write(f"{st}\n".encode() + scrub(b))
        print(f"{len(paths)} answers in {a.out}")
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
