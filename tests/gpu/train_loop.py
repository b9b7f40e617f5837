#!/usr/bin/env python3
"""The training loop that tests/gpu/device.sh times with and without
libtrainscope-cupti.so and beside PyTorch's own profiler: record.py's model
and AdamW, one NVTX range "step N" per step (the library's step pattern), a
synchronize at each step's end so each step's wall time is its own.

  python3 tests/gpu/train_loop.py [--steps N] [--warmup N] [--torch-profiler TRACE]
                                  [--batch B] [--d D] [--layers L] [--seq S]

Prints one JSON line: the median, mean and p90 step time in ms over the timed
steps. With --torch-profiler, torch.profiler (CPU and CUDA, no shapes, memory
or stacks) records the timed steps, prof.step() once per step, and its trace is
written to TRACE.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from record import Model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--torch-profiler", metavar="TRACE")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8192)
    a = ap.parse_args()
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    model = Model(a.vocab, a.d, a.layers, max(1, a.d // 64)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        torch.cuda.nvtx.range_push(f"step {i}")
        x = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
        y = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
        loss = F.cross_entropy(model(x).view(-1, a.vocab), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()

    for i in range(a.warmup):
        step(i)
    times = []
    prof = None
    if a.torch_profiler:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.start()
    for i in range(a.warmup, a.warmup + a.steps):
        t0 = time.perf_counter()
        step(i)
        times.append((time.perf_counter() - t0) * 1000)
        if prof:
            prof.step()
    if prof:
        prof.stop()
        prof.export_chrome_trace(a.torch_profiler)
    times.sort()
    print(json.dumps({"steps": a.steps, "median_ms": round(statistics.median(times), 4),
                      "mean_ms": round(statistics.fmean(times), 4),
                      "p90_ms": round(times[int(0.9 * (len(times) - 1))], 4),
                      "profiler": "torch" if prof else "none",
                      "cupti_lib": bool(os.environ.get("CUDA_INJECTION64_PATH"))}), flush=True)


if __name__ == "__main__":
    main()
