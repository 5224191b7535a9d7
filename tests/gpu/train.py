#!/usr/bin/env python3
"""A small PyTorch training loop for the GPU checks: an MLP on random data,
optimizer.step() every iteration (Kineto counts iterations from that hook).
Runs for --seconds, printing one line per 100 steps with the median step time.
"""
import argparse
import statistics
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--width", type=int, default=2048)
ap.add_argument("--import-profiler", action="store_true",
                help="import torch.profiler, which registers the optimizer-step hook "
                     "that Kineto's daemon mode counts iterations with")
ap.add_argument("--forward-only", action="store_true",
                help="inference: no backward, no optimizer.step(), so no step is ever reported")
args = ap.parse_args()
if args.import_profiler:
    import torch.profiler  # noqa: F401

torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
    torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
    torch.nn.Linear(args.width, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, args.width, device=dev)
y = torch.randint(0, 10, (256,), device=dev)
end = time.time() + args.seconds
step, times = 0, []
print("training started at %.3f" % time.time(), flush=True)
while time.time() < end:
    t0 = time.perf_counter()
    if args.forward_only:
        with torch.no_grad():
            model(x)
    else:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
    step += 1
    if step % 100 == 0:
        print("step %d median %.3f ms" % (step, statistics.median(times[-100:]) * 1e3), flush=True)
print("training done after %d steps" % step, flush=True)
