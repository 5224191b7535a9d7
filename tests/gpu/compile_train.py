#!/usr/bin/env python3
"""A torch.compile'd training loop for tests/gpu/run.sh's compile section
(issue 27: a torch.compile'd model through both paths): 4 x (Linear +
GELU) + Linear, AdamW, compiled with Inductor (its Triton kernels, launched
through the driver API); with --mode reduce-overhead Inductor also records
the step's kernels into CUDA graphs and replays them (cudaGraphLaunch). No
profiling code: the agent (gprofctl launch) or Kineto (KINETO_USE_DAEMON=1)
finds the steps by the optimizer hook.

With --torch-profile-at, torch.profiler itself profiles 5 steps from
each step named (the same job under stock PyTorch's profiler, for
tests/gpu/graphs_check.py). Runs until the file --stop exists, --max-s
seconds or --max-steps steps; prints "compiled"
once the compiled step ran three times, and at the end one JSON line:
steps, the loss (finite), the mode.
"""
import argparse
import json
import math
import os
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="default", choices=["default", "reduce-overhead"])
ap.add_argument("--width", type=int, default=1024)
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--stop", required=True)
ap.add_argument("--max-s", type=float, default=240)
ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
ap.add_argument("--torch-profile-at", default="",
                help="comma list of steps: torch.profiler (CPU+CUDA) over the 5 steps from each, in "
                     "this process (what stock PyTorch does to the same job)")
a = ap.parse_args()
prof_at = {int(s) for s in a.torch_profile_at.split(",") if s}

torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(*[m for _ in range(4) for m in
                              (torch.nn.Linear(a.width, a.width), torch.nn.GELU())],
                            torch.nn.Linear(a.width, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(a.batch, a.width, device=dev)
y = torch.randint(0, 10, (a.batch,), device=dev)
cmodel = torch.compile(model, mode=a.mode)


def step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(cmodel(x), y)
    loss.backward()
    opt.step()
    return loss


t0 = time.time()
n = 0
loss = None
prof = None
while time.time() - t0 < a.max_s and (not a.max_steps or n < a.max_steps):
    if n in prof_at:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.start()
    loss = step()
    n += 1
    if prof is not None and n - 5 in prof_at:
        torch.cuda.synchronize()
        prof.stop()
        print("torch.profiler window ending at step %d: %d events" % (n, len(prof.events())),
              flush=True)
        prof = None
    if n == 3:
        torch.cuda.synchronize()
        print("compiled", flush=True)
    if n % 20 == 0 and os.path.exists(a.stop):
        break
torch.cuda.synchronize()
v = float(loss.item())
print(json.dumps({"steps": n, "loss": v, "mode": a.mode}), flush=True)
raise SystemExit(0 if math.isfinite(v) else 1)
