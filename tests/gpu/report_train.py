#!/usr/bin/env python3
"""A small training loop with the usual bottlenecks, for `gprofctl report`'s
real-trace fixtures (tests/gpu/run.sh, section `report`):

  data loading  a DataLoader (no workers) whose dataset does CPU work per
                sample: the GPU waits while the next batch is built
  copies        each batch goes to the GPU from pageable memory
  launch-bound  a "postprocess" range of 60 tiny elementwise ops
  sync          loss.item() every step
  ranges        record_function "forward", "backward", "optimizer"

--mode torch: torch.profiler (CPU + CUDA) over --active steps after 2 wait
and 2 warm-up steps, exported as Chrome trace to --out (gzip when it ends in
.gz). --mode agent: runs --steps steps with `import gprof_agent` (the agent
injected), printing "training started" once stepping, so run.sh can trace
it with gprofctl.
"""
import argparse
import gzip
import os
import shutil
import tempfile
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["torch", "agent"], required=True)
ap.add_argument("--out")
ap.add_argument("--active", type=int, default=3)
ap.add_argument("--steps", type=int, default=3000)
a = ap.parse_args()

if a.mode == "agent":
    import gprof_agent  # noqa: F401  (registers the optimizer hook)

torch.manual_seed(0)
dev = torch.device("cuda")
W = 1024


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(W, generator=g)
        for _ in range(3):  # some CPU work per sample
            x = torch.tanh(x * 1.01)
        return x, int(i % 10)


loader = iter(torch.utils.data.DataLoader(Slow(), batch_size=64, num_workers=0))
model = torch.nn.Sequential(torch.nn.Linear(W, W), torch.nn.GELU(),
                            torch.nn.Linear(W, W), torch.nn.GELU(),
                            torch.nn.Linear(W, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def step():
    x, y = next(loader)
    x, y = x.to(dev), y.to(dev)  # pageable host memory
    with torch.profiler.record_function("forward"):
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
    with torch.profiler.record_function("backward"):
        loss.backward()
    with torch.profiler.record_function("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    with torch.profiler.record_function("postprocess"):
        z = out.detach()
        for _ in range(60):  # many tiny kernels: launch-bound
            z = z * 0.999 + 0.001
    return loss.item()  # a synchronisation every step


for _ in range(5):
    step()
if a.mode == "torch":
    sched = torch.profiler.schedule(wait=2, warmup=2, active=a.active)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA],
                                schedule=sched) as prof:
        for _ in range(4 + a.active):
            step()
            prof.step()
    tmp = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(tmp)
    if a.out.endswith(".gz"):
        with open(tmp, "rb") as src, gzip.open(a.out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.unlink(tmp)
    else:
        shutil.move(tmp, a.out)
    print("torch.profiler trace:", a.out, os.path.getsize(a.out), "bytes")
else:
    print("training started", flush=True)
    t = time.perf_counter()
    for i in range(a.steps):
        step()
    print("done: %d steps, %.2f ms each" % (a.steps, 1000 * (time.perf_counter() - t) / a.steps))
