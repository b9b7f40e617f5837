#!/usr/bin/env python3
"""Writes the agreement fixtures on a machine with a CUDA GPU and PyTorch:

  train.pt.trace.json.gz   the Chrome trace of a few steps (record_shapes, profile_memory, with_stack)
  train.memory.raw.json.gz PyTorch's own export_memory_timeline (raw form) of the same profiled steps
  train.snapshot.pickle    torch.cuda.memory._dump_snapshot of the whole run

The model is a small transformer trained with AdamW, so every memory category
shows: parameters, optimizer state (created at the first step), inputs copied
from pinned host memory, activations, gradients, temporaries.

  python3 tests/gpu/make_fixtures.py [--out DIR] [--steps N]
then
  python3 tests/gpu/agreement.py --server http://127.0.0.1:8470 DIR
"""
import argparse
import gzip
import os
import shutil

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule


class Model(nn.Module):
    def __init__(self, vocab=4096, d=256, layers=4, heads=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/gpu")
    ap.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("make_fixtures.py needs a CUDA GPU")
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device("cuda:0")
    torch.manual_seed(0)

    torch.cuda.memory._record_memory_history(max_entries=200000)
    model = Model().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = model.emb.num_embeddings
    trace = os.path.join(args.out, "train.pt.trace.json")
    export = os.path.join(args.out, "train.memory.raw.json.gz")

    def ready(prof):
        prof.export_chrome_trace(trace)
        # the raw form ([t_ns, action, bytes, category] rows) when the name ends in raw.json.gz
        prof.export_memory_timeline(export, device="cuda:0")

    sched = schedule(wait=1, warmup=1, active=args.steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched,
                 record_shapes=True, profile_memory=True, with_stack=True, on_trace_ready=ready) as prof:
        for _ in range(2 + args.steps):
            x = torch.randint(0, vocab, (args.batch, args.seq)).pin_memory().to(dev, non_blocking=True)
            y = torch.randint(0, vocab, (args.batch, args.seq)).pin_memory().to(dev, non_blocking=True)
            loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(os.path.join(args.out, "train.snapshot.pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)

    with open(trace, "rb") as src, gzip.open(trace + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(trace)
    for name in sorted(os.listdir(args.out)):
        print(f"{os.path.getsize(os.path.join(args.out, name)):>10}  {os.path.join(args.out, name)}")


if __name__ == "__main__":
    main()
