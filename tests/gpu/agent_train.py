#!/usr/bin/env python3
"""The agent's PyTorch check (run by tests/gpu/run.sh with libgprof_agent
injected and python/ on PYTHONPATH): an MLP training loop whose steps
become iterations through `import gprof_agent`, in phases that run.sh
drives with flag files in --ctl:

  idle        300 timed steps, agent loaded and idle
  wait go1    steps until run.sh has taken its traces (5 iterations, ...)
  after       300 timed steps: what a burst left behind
  wait go2    steps (each logged with its wall-clock end) while run.sh
              takes a 200-iteration capture
  torch       torch.profiler, CUDA activities only, 200 active steps,
              timed, exported to --out/torch_cuda.json
  after_torch 300 timed steps

With --only-idle it runs warm-up + idle and exits (the no-agent baseline).
Writes --out/steps-<tag>.json.
"""
import argparse
import json
import os
import statistics
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--ctl", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--tag", default="agent")
ap.add_argument("--width", type=int, default=2048)
ap.add_argument("--only-idle", action="store_true")
a = ap.parse_args()

import gprof_agent  # noqa: E402  (after torch: registers the optimizer hook)

torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(a.width, a.width), torch.nn.ReLU(),
    torch.nn.Linear(a.width, a.width), torch.nn.ReLU(),
    torch.nn.Linear(a.width, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, a.width, device=dev)
y = torch.randint(0, 10, (256,), device=dev)


def step():
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def timed(n):
    return [step() for _ in range(n)]


def wait_for(flag, log=None):
    ready = os.path.join(a.ctl, "ready-" + flag)
    open(ready, "w").close()
    while not os.path.exists(os.path.join(a.ctl, flag)):
        d = step()
        if log is not None:
            log.append((time.time_ns(), d))


res = {"agent_loaded": gprof_agent.loaded()}
timed(50)
res["idle"] = timed(300)
if not a.only_idle:
    wait_for("go1")
    res["after"] = timed(300)
    log = []
    wait_for("go2", log)
    res["capture_log"] = log
    sched = torch.profiler.schedule(wait=1, warmup=1, active=200)
    tt = []
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CUDA], schedule=sched,
            on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(a.out, "torch_cuda.json"))
    ) as prof:
        for i in range(202):
            tt.append(step())
            prof.step()
    res["torch"] = tt[2:]
    res["after_torch"] = timed(300)
res["steps"] = gprof_agent.steps()
for k in ("idle", "after", "torch", "after_torch"):
    if k in res:
        print("%s: median %.3f ms over %d steps" % (k, statistics.median(res[k]) * 1e3, len(res[k])))
json.dump(res, open(os.path.join(a.out, "steps-%s.json" % a.tag), "w"))
print("agent_train done", flush=True)
