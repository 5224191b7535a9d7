#!/usr/bin/env python3
"""The PyTorch loop of the agent's GPU stress test (test-stress.py
--program): a small MLP trained with AdamW, each step inside an NVTX range
"it", steps counted by the gprof_agent helper's optimizer hook. Prints
"ready", trains until stdin closes, then prints
"done STEPS max_stall_us US loss L" and exits 0 (1 if the loss is not
finite: a capture must never change the job's results)."""
import math
import sys
import threading
import time

import torch

import gprof_agent  # noqa: F401  (registers the optimizer-step hook)

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
torch.manual_seed(0)
dev = torch.device("cuda")
w = 1024
model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(w, w), torch.nn.GELU())],
                            torch.nn.Linear(w, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(128, w, device=dev)
y = torch.randint(0, 10, (128,), device=dev)
n, prev, stall, loss = 0, 0.0, 0.0, None


def train_step():
    global loss
    torch.cuda.nvtx.range_push("it")
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()  # so a step's time is its own (the stall figure)


for _ in range(30):  # cuBLAS handles, allocator, first kernels: not stalls
    train_step()
print("ready", flush=True)
while not stop.is_set():
    t = time.perf_counter()
    if prev:
        stall = max(stall, t - prev)
    prev = t
    train_step()
    n += 1
v = loss.item()
print("done %d max_stall_us %.0f loss %.4f" % (n, stall * 1e6, v), flush=True)
sys.exit(0 if math.isfinite(v) else 1)
