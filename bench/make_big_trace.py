#!/usr/bin/env python3
"""Build a large PyTorch profiler trace for the ingest benchmark.

Repeats every event of a real fixture trace (default: traces/hta_v100_train_memory.json.gz
in $FIXTURES_DIR, else in ../shared/fixtures beside the repository) until the output reaches
about --size-mb MiB of uncompressed JSON.
Copy k has every "ts" shifted by k * (fixture time span + 1000 us), so the
copies follow one another in time, and its ids moved past the copy before's:
"correlation" and flow "id", "External id", "Ev Idx", "Sequence number", and
the N of ProfilerStep#N. So the output reads as one long profiling window, as a
real trace would (with the ids repeated, as before 2026-11-27, every copy's
kernels matched copy 0's launches, and copy 0's steps stretched over the whole
trace; --same-ids still writes that). The fixture's other top-level keys are
kept once; all copies go into a single traceEvents array. Also writes a gzip -1
copy next to it.

Usage: make_big_trace.py [--size-mb N | --copies N] [--out DIR] [--fixture FILE] [--same-ids]
SIZE_MB in the environment sets the default size (1024); --copies N asks for
exactly N copies of the fixture instead of a size.
Prints one line of JSON: paths, sizes, copies and total event count.
Stdlib only. Speed: each fixture event is serialised once into a %-template
with a %d slot for its ts and each id; each copy is then one string-format
operation.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(os.environ.get("FIXTURES_DIR") or os.path.join(HERE, "..", "..", "shared", "fixtures"),
                       "traces", "hta_v100_train_memory.json.gz")
SENTINEL = "@@TS_PLACEHOLDER@@"
STEP_PREFIX = "ProfilerStep#"
# args whose values are ids, moved per copy past the fixture's largest
ID_ARGS = ("correlation", "External id", "Ev Idx", "Sequence number")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int,
                    default=int(os.environ.get("SIZE_MB", "1024")),
                    help="target uncompressed size in MiB (default: $SIZE_MB or 1024)")
    ap.add_argument("--copies", type=int, default=0,
                    help="exactly N copies of the fixture (overrides --size-mb)")
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="work folder")
    ap.add_argument("--fixture", default=FIXTURE)
    ap.add_argument("--same-ids", action="store_true",
                    help="repeat the fixture's ids in every copy (the generator before 2026-11-27)")
    args = ap.parse_args()

    t0 = time.monotonic()
    with gzip.open(args.fixture, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    events = doc.pop("traceEvents")
    assert all(isinstance(e.get("ts"), int) for e in events), "ts must be integer us"
    t_min = min(e["ts"] for e in events)
    t_end = max(e["ts"] + e.get("dur", 0) for e in events)
    shift = (t_end - t_min) + 1000

    # How far each copy moves an id: past the fixture's largest (flows share "correlation"'s).
    span = {k: 0 for k in ID_ARGS + ("step",)}
    step_min = 1 << 62
    for e in events:
        a = e.get("args") or {}
        for k in ID_ARGS:
            if isinstance(a.get(k), int):
                span[k] = max(span[k], a[k] + 1)
        if e.get("cat") == "ac2g" and isinstance(e.get("id"), int):
            span["correlation"] = max(span["correlation"], e["id"] + 1)
        n = e.get("name")
        if isinstance(n, str) and n.startswith(STEP_PREFIX) and n[len(STEP_PREFIX):].isdigit():
            step_min = min(step_min, int(n[len(STEP_PREFIX):]))
            span["step"] = max(span["step"], int(n[len(STEP_PREFIX):]) + 1)
    span["step"] = max(0, span["step"] - step_min)  # steps 2..6, then 7..11, ...
    if args.same_ids:
        span = {k: 0 for k in span}

    # One %-template for all events of one copy: '%' escaped, ts and each id -> %d;
    # slots[i] lists the (base value, move per copy) of event i's %d slots, in text order.
    parts, slots = [], []
    for e in events:
        e = dict(e, ts=SENTINEL)
        subs = [("ts", None)]
        if isinstance(e.get("args"), dict):
            a = dict(e["args"])
            for k in ID_ARGS:
                if isinstance(a.get(k), int) and span[k]:
                    subs.append((k, a[k]))
                    a[k] = "@@ID_%s@@" % k
            e["args"] = a
        if e.get("cat") == "ac2g" and isinstance(e.get("id"), int) and span["correlation"]:
            subs.append(("flow", e["id"]))
            e["id"] = "@@ID_flow@@"
        n = e.get("name")
        step = None
        if (isinstance(n, str) and n.startswith(STEP_PREFIX) and n[len(STEP_PREFIX):].isdigit()
                and span["step"]):
            step = int(n[len(STEP_PREFIX):])
            e["name"] = STEP_PREFIX + "@@STEP@@"
        text = json.dumps(e, separators=(",", ":"), ensure_ascii=False).replace("%", "%%")
        found = []
        assert text.count(SENTINEL) == 1
        found.append((text.index(SENTINEL), None, 0))
        text = text.replace('"%s"' % SENTINEL, "%d")
        for k, v in subs[1:]:
            mark = '"@@ID_%s@@"' % k
            assert text.count(mark) == 1
            found.append((text.index(mark), v, span["correlation" if k == "flow" else k]))
            text = text.replace(mark, "%d")
        if step is not None:
            assert text.count("@@STEP@@") == 1
            found.append((text.index("@@STEP@@"), step, span["step"]))
            text = text.replace("@@STEP@@", "%d")
        found.sort(key=lambda f: f[0])
        parts.append(text)
        slots.append([(None, 0) if v is None else (v, d) for _, v, d in found])
    template = ",\n".join(parts)
    base_ts = [e["ts"] for e in events]
    # Bytes per copy: template, with each 2-char "%d" replaced by a value (ids as copy 0's:
    # later copies' may be a digit longer, which the size target does not need to see).
    copy_bytes = (len(template.encode("utf-8")) + sum(len(str(t)) - 2 for t in base_ts) +
                  sum(len(str(v)) - 2 for sl in slots for v, _ in sl if v is not None))

    target = args.size_mb * 1024 * 1024
    copies = max(1, round(target / copy_bytes))  # nearest whole number of copies
    if args.copies > 0:
        copies = args.copies

    # Header keeps the fixture's other top-level keys, in order, then traceEvents.
    head = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    head = head[:-1] + ("," if doc else "") + '"traceEvents":[\n'

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "big_trace.json")
    with open(path, "w", encoding="utf-8", buffering=16 << 20) as out:
        out.write(head)
        for k in range(copies):
            off = k * shift
            if k:
                out.write(",\n")
            out.write(template % tuple(t + off if v is None else v + k * d
                                       for t, sl in zip(base_ts, slots) for v, d in sl))
        out.write("\n]}\n")
    t_gen = time.monotonic() - t0

    # gzip -1: the gzip binary is faster than Python's gzip module.
    t1 = time.monotonic()
    gz = path + ".gz"
    if shutil.which("gzip"):
        with open(gz, "wb") as g:
            subprocess.run(["gzip", "-1", "-c", path], stdout=g, check=True)
    else:
        with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 16 << 20)
    t_gz = time.monotonic() - t1

    print(json.dumps({
        "json": path, "gz": gz,
        "json_bytes": os.path.getsize(path), "gz_bytes": os.path.getsize(gz),
        "fixture_events": len(events), "copies": copies,
        "events": len(events) * copies, "ts_shift_us": shift,
        "gen_seconds": round(t_gen, 1), "gzip_seconds": round(t_gz, 1),
    }))


if __name__ == "__main__":
    main()
