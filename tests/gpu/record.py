#!/usr/bin/env python3
"""Records the GPU fixtures (tests/fixtures/gpu/) on a machine with a CUDA GPU
and PyTorch: real training runs under torch.profiler, each in its own folder.

  python3 tests/gpu/record.py --out DIR SCENARIO [SCENARIO ...]
  python3 tests/gpu/record.py --out DIR --list

The model is a small transformer (embedding, encoder layers, vocabulary head)
trained with AdamW on random tokens. Scenarios:

  train       the QLoRA guide's continuous cycle: schedule(wait=7, warmup=2,
              active=1, repeat=0) over 100 steps, record_shapes, profile_memory,
              with_stack, written by tensorboard_trace_handler (one file per
              cycle); beside each cycle prof.key_averages() as JSON; PyTorch's
              export_memory_timeline (raw) of the first cycle; a memory snapshot
              (_record_memory_history with Python stacks, _dump_snapshot)
  healthy, healthy_b   the same model and batch, no symptom (two runs: a
              compare of the two must say "no change")
  half_batch  batch size halved (the rlhf-canary notebook's deliberate change)
  dataloader  a DataLoader with num_workers=0 and a slow transform (1 ms a sample)
  sync        loss.item() and a .cpu() copy every step
  tiny        batch 1, a one-layer model of width 64: many tiny kernels
  growth      every step's logits kept in a list: memory grows
  ckpt_on, ckpt_off   activation checkpointing of each encoder layer, on and off
  compiled    torch.compile(model)
  cudagraphs  torch.compile(model, mode="reduce-overhead") (CUDA graph trees)
  dist        2 processes on the one GPU, DDP over gloo, rank 1 delayed 30 ms a step

Every scenario but train uses schedule(wait=W, warmup=2, active=5, repeat=1)
with profile_memory and without stacks, so each run is one small trace file.
Each folder gets key_averages JSON beside its traces and a meta.json (the
scenario's settings, torch and device versions).
"""
import argparse
import gzip
import json
import os
import socket
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
import torch.utils.data
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


class Model(nn.Module):
    def __init__(self, vocab=8192, d=512, layers=4, heads=8, ckpt=False):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.ckpt = ckpt

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            if self.ckpt and self.training:
                h = torch.utils.checkpoint.checkpoint(layer, h, use_reentrant=False)
            else:
                h = layer(h)
        return self.head(self.norm(h))


SCENARIOS = {
    # name: settings over the defaults below
    "train": dict(steps=100, wait=7, warmup=2, active=1, repeat=0, stack=True, shapes=True, snapshot=True),
    "healthy": dict(),
    "healthy_b": dict(),
    "half_batch": dict(batch=16),
    "dataloader": dict(loader_ms=1.0),
    "sync": dict(sync=True),
    "tiny": dict(batch=1, d=64, layers=1, heads=2, seq=16, vocab=256),
    "growth": dict(keep=True),
    "ckpt_on": dict(ckpt=True),
    "ckpt_off": dict(ckpt=False),
    "compiled": dict(compile="default", wait=4),
    "cudagraphs": dict(compile="reduce-overhead", wait=6),
    "dist": dict(world=2, delay_ms=30.0),
}
DEFAULTS = dict(steps=None, wait=2, warmup=2, active=5, repeat=1, stack=False, shapes=False, snapshot=False,
                batch=32, seq=256, vocab=8192, d=512, layers=4, heads=8, ckpt=False, loader_ms=0.0,
                sync=False, keep=False, compile=None, world=1, delay_ms=0.0)


def key_averages(prof):
    rows = []
    for e in prof.key_averages():
        dev_total = getattr(e, "device_time_total", None)
        dev_self = getattr(e, "self_device_time_total", None)
        rows.append({
            "name": e.key,
            "calls": e.count,
            "cpu_total_us": e.cpu_time_total,
            "self_cpu_us": e.self_cpu_time_total,
            "device_total_us": dev_total if dev_total is not None else getattr(e, "cuda_time_total", 0),
            "self_device_us": dev_self if dev_self is not None else getattr(e, "self_cuda_time_total", 0),
            "device_type": str(getattr(e, "device_type", "")),
        })
    return rows


class Batches(torch.utils.data.Dataset):
    """random token rows; each sample costs loader_ms of host time (a slow transform)"""

    def __init__(self, n, seq, vocab, loader_ms):
        self.n, self.seq, self.vocab, self.ms = n, seq, vocab, loader_ms

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        t = time.perf_counter() + self.ms / 1000.0
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, self.vocab, (self.seq + 1,), generator=g)
        while time.perf_counter() < t:
            pass
        return x[:-1], x[1:]


def run(name, cfg, out, rank=0):
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    steps = cfg["steps"] or cfg["wait"] + cfg["warmup"] + cfg["active"] + 1
    os.makedirs(out, exist_ok=True)
    if cfg["snapshot"]:
        torch.cuda.memory._record_memory_history(enabled="all", stacks="python", max_entries=40000)
    model = Model(cfg["vocab"], cfg["d"], cfg["layers"], cfg["heads"], cfg["ckpt"]).to(dev)
    if cfg["world"] > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fwd = torch.compile(model, mode=None if cfg["compile"] == "default" else cfg["compile"]) \
        if cfg["compile"] else model
    loader = None
    if cfg["loader_ms"]:
        loader = iter(torch.utils.data.DataLoader(
            Batches(cfg["batch"] * (steps + 1), cfg["seq"], cfg["vocab"], cfg["loader_ms"]),
            batch_size=cfg["batch"], num_workers=0, pin_memory=True))
    worker = f"rank{rank}" if cfg["world"] > 1 else name
    handler = tensorboard_trace_handler(out, worker_name=worker, use_gzip=True)
    cycle = [0]

    def ready(prof):
        before = set(os.listdir(out))
        handler(prof)
        new = sorted(n for n in set(os.listdir(out)) - before if n.startswith(worker + ".") and ".pt.trace." in n)
        stem = new[0].split(".pt.trace")[0] if new else f"{worker}.{cycle[0]}"
        with open(os.path.join(out, stem + ".key_averages.json"), "w") as f:
            json.dump({"step_num": prof.step_num, "trace": new, "rows": key_averages(prof)}, f)
        if cfg["snapshot"] and cycle[0] == 0:
            try:
                prof.export_memory_timeline(os.path.join(out, f"{worker}.memory.raw.json.gz"), device="cuda:0")
            except Exception:
                traceback.print_exc()
        cycle[0] += 1

    kept, step_ms = [], []
    sched = schedule(wait=cfg["wait"], warmup=cfg["warmup"], active=cfg["active"], repeat=cfg["repeat"])
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 record_shapes=cfg["shapes"], profile_memory=True, with_stack=cfg["stack"],
                 on_trace_ready=ready) as prof:
        for step in range(steps):
            t0 = time.perf_counter()
            if loader is not None:
                x, y = next(loader)
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            else:
                x = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), device=dev)
                y = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), device=dev)
            if cfg["delay_ms"] and rank == 1:
                time.sleep(cfg["delay_ms"] / 1000.0)
            logits = fwd(x)
            loss = F.cross_entropy(logits.view(-1, cfg["vocab"]), y.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if cfg["sync"]:
                _ = loss.item()
                _ = logits[:, -1].argmax(-1).cpu()
            if cfg["keep"]:
                kept.append(logits.detach())
            prof.step()
            step_ms.append((time.perf_counter() - t0) * 1000)
    torch.cuda.synchronize()
    if cfg["snapshot"]:
        torch.cuda.memory._dump_snapshot(os.path.join(out, f"{worker}.snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
    meta = dict(scenario=name, rank=rank, settings=cfg, torch=torch.__version__, cuda=torch.version.cuda,
                device=torch.cuda.get_device_name(0), host=socket.gethostname(),
                host_step_ms=[round(v, 3) for v in step_ms])
    with open(os.path.join(out, f"{worker}.meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def dist_main(rank, name, cfg, out, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=cfg["world"])
    try:
        run(name, cfg, out, rank)
    finally:
        torch.distributed.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/gpu")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("scenarios", nargs="*")
    a = ap.parse_args()
    if a.list:
        print(" ".join(SCENARIOS))
        return 0
    if not torch.cuda.is_available():
        print("record.py needs a CUDA GPU", file=sys.stderr)
        return 2
    failed = 0
    for name in a.scenarios or list(SCENARIOS):
        cfg = dict(DEFAULTS, **SCENARIOS[name])
        out = os.path.join(a.out, name)
        t0 = time.time()
        try:
            if cfg["world"] > 1:
                torch.multiprocessing.spawn(dist_main, args=(name, cfg, out, 29500 + os.getpid() % 1000),
                                            nprocs=cfg["world"], join=True)
            else:
                run(name, cfg, out)
            print(f"{name}: {time.time() - t0:.1f} s, {sorted(os.listdir(out))}", flush=True)
        except Exception:
            failed += 1
            print(f"{name}: FAILED after {time.time() - t0:.1f} s", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
