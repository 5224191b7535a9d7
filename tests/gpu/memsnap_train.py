#!/usr/bin/env python3
"""The GPU check's job for memory snapshots (tests/gpu/memsnap.sh): an MLP
training loop that leaks one 1 MiB tensor per step on purpose (kept in a
list), so a snapshot's report must show 1 MiB of growth per iteration and
name leaky() as what holds it.

  --seconds S        run this long (default 120), stepping as fast as it can
  --profile-memory   instead: torch.profiler with profile_memory=True over 5
                     steps (after 20 warm-up), trace to --out; prints
                     "peak <bytes>", torch.cuda.max_memory_allocated over the
                     window, for gprofctl report's [memory] figures to match
"""
import argparse
import os
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=120)
ap.add_argument("--width", type=int, default=1024)
ap.add_argument("--profile-memory", action="store_true")
ap.add_argument("--out", default="memory.pt.trace.json")
args = ap.parse_args()

torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
    torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
    torch.nn.Linear(args.width, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(128, args.width, device=dev)
y = torch.randint(0, 10, (128,), device=dev)
leaks = []


def leaky():
    leaks.append(torch.empty(1 << 18, dtype=torch.float32, device=dev))  # 1 MiB


def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    leaky()
    opt.step()


if args.profile_memory:
    from torch.profiler import ProfilerActivity, profile, schedule
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True,
                 schedule=schedule(wait=0, warmup=1, active=5, repeat=1)) as prof:
        step()
        prof.step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(5):
            step()
            prof.step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    prof.export_chrome_trace(args.out)
    print("peak", peak, flush=True)
else:
    print("ready", os.getpid(), flush=True)
    end = time.monotonic() + args.seconds
    n = 0
    while time.monotonic() < end:
        step()
        n += 1
        if n % 50 == 25:
            # bounded: the leak is per step, not forever; at step 25 of every
            # 50, never inside a window that memsnap.sh begins on a multiple
            # of 50 (--iteration-roundup 50) for 5 steps
            del leaks[:-200]
            torch.cuda.synchronize()
    print("steps", n, flush=True)
