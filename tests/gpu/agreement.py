#!/usr/bin/env python3
"""How far Trainscope's trace-inferred memory categories are from PyTorch's own.

Uploads the trace and PyTorch's export_memory_timeline of the same run (as
tests/gpu/make_fixtures.py writes them) to two runs of a live server, reads
both timelines with points=0, and integrates over the time both cover:
agreement = the share of PyTorch's byte-time that the trace timeline puts in
the same category (sum over time and categories of min(ours, theirs) dt, over
sum of theirs dt). Per category, the same share says which rules miss.

  python3 tests/gpu/agreement.py [--server URL] [--min 0.9] [--param-bytes N]
                                 [--trace NAME] [--export NAME] DIR
Exits 1 when agreement is under --min. Only the standard library.
--param-bytes PATCHes the trace run's metadata with the model's parameter
bytes, as a user would, so that memory allocated before the trace began is
split into parameters and optimizer state.
"""
import argparse
import json
import os
import sys
import time
import urllib.request

CATS = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"]


def call(server, method, path, body=None):
    req = urllib.request.Request(server + path, data=body, method=method)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def timeline(server, run):
    m = call(server, "GET", f"/api/v1/runs/{run}/memory?device=cuda:0&points=0")
    return m["t_ns"], [[m["categories"][c][i] for c in CATS] for i in range(len(m["t_ns"]))], m["source"]


def value_at(ts, rows, t):
    """the step function's value at t: the last point at or before t"""
    lo, hi = 0, len(ts)
    while lo < hi:
        mid = (lo + hi) // 2
        if ts[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return rows[lo - 1] if lo else [0] * len(CATS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default=os.environ.get("TRAINSCOPE_SERVER", "http://127.0.0.1:8470"))
    ap.add_argument("--min", type=float, default=0.9)
    ap.add_argument("--param-bytes", type=int)
    ap.add_argument("--trace", default="train.pt.trace.json.gz")
    ap.add_argument("--export", default="train.memory.raw.json.gz")
    ap.add_argument("dir")
    a = ap.parse_args()
    tag = str(int(time.time()))
    runs = {}
    for kind, name in (("trace", a.trace), ("pytorch", a.export)):
        run = f"agree-{kind}-{tag}"
        with open(os.path.join(a.dir, name), "rb") as f:
            call(a.server, "POST", f"/api/v1/runs/{run}/artifacts?name={os.path.basename(name)}&device=cuda:0",
                 f.read())
        if kind == "trace" and a.param_bytes:
            call(a.server, "PATCH", f"/api/v1/runs/{run}", json.dumps({"metadata": {"param_bytes": a.param_bytes}}).encode())
        runs[kind] = timeline(a.server, run)
    (ot, orows, osrc), (pt, prows, psrc) = runs["trace"], runs["pytorch"]
    assert osrc == "trace" and psrc == "pytorch", (osrc, psrc)
    start, end = max(ot[0], pt[0]), min(ot[-1], pt[-1])
    if end <= start:
        raise SystemExit(f"the two timelines do not overlap: trace {ot[0]}..{ot[-1]}, export {pt[0]}..{pt[-1]}")
    edges = sorted({t for t in ot + pt if start <= t <= end})
    same = [0.0] * len(CATS)
    theirs = [0.0] * len(CATS)
    ours = [0.0] * len(CATS)
    for t0, t1 in zip(edges, edges[1:]):
        o, p, dt = value_at(ot, orows, t0), value_at(pt, prows, t0), t1 - t0
        for c in range(len(CATS)):
            same[c] += min(o[c], p[c]) * dt
            theirs[c] += p[c] * dt
            ours[c] += o[c] * dt
    total = sum(theirs)
    agreement = sum(same) / total if total else 0.0
    print(f"window {(end - start) / 1e6:.1f} ms, {len(edges)} time points")
    print(f"{'category':<16} {'PyTorch GB*s':>13} {'ours GB*s':>10} {'same':>7}")
    for c, name in enumerate(CATS):
        share = same[c] / theirs[c] if theirs[c] else float("nan")
        print(f"{name:<16} {theirs[c] / 1e18:>13.4f} {ours[c] / 1e18:>10.4f} {share:>7.1%}")
    print(f"agreement: {agreement:.1%} of PyTorch's byte-time in the same category")
    sys.exit(0 if agreement >= a.min else 1)


if __name__ == "__main__":
    main()
