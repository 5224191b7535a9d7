#!/usr/bin/env python3
"""capture_overhead.py: what a capture costs a training loop, measured inside
one process (run on the GPU host by tests/gpu/run.sh; figures in
docs/BENCHMARKS.md).

One PyTorch loop (DEPTH x Linear(WIDTH) + GELU, AdamW, batch 256; every
step synchronised, so a step's time is its own) runs a series of windows.
Each window is BEFORE timed steps with nothing ("before"), then WINDOW
steps under the capture ("during"), then the rest of the capture's
delivery and 50 more steps ("after"). A window's inflation is
median(during) / median(before): the steps just before it are the
reference, so drift within the process cancels, and processes (whose
step times differ by 5-10 %) are never compared with each other. Step
times on a shared host also jump for seconds at a time, so the windows
are short and repeated: the configs run REPEAT times, interleaved (the
order rotated each time), and each config's figure is the median of its
windows' inflations; torch windows run once, at the end.

Captures (--configs, comma-separated, run in that order):
  none            nothing (the drift a window shows by chance)
  agent           gprofctl trace --iterations WINDOW to this process, the
                  agent's default activities (needs the agent injected)
  agent-ACT       the same with --activities ACT (e.g. agent-kernel)
  agent+K=V[+K=V] the same with the agent's knobs K=V for that burst
                  (docs/AGENT.md: GPROF_CUPTI_API, GPROF_CUPTI_FILTER...)
  torch           torch.profiler, CUDA activities only, over WINDOW steps
  torch-cpu       torch.profiler, CPU and CUDA
  torch-cpu-shapes the same with record_shapes=True
torch.profiler keeps CUPTI once it has run, so torch windows come last,
and the steps of a process stay slower once it has run (1.1-1.3x on an
H100 and an H200): only the first torch window of a process is measured
against untraced steps ("torch_ran": false in its row), later ones against
steps it already slowed. With "none" among the configs, one more window
with nothing follows the torch windows: its "before" steps against those
of the windows before torch.profiler ran give its lasting cost.
Only "during" steps well inside the window count: from the step the
capture reported "capturing" (agent) or started (torch), +10, for
WINDOW - 20 steps.

Prints one line per window and writes them as JSON lines to --out.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--configs", default="none,agent,torch")
ap.add_argument("--width", type=int, default=2048)
ap.add_argument("--depth", type=int, default=6)
ap.add_argument("--window", type=int, default=120)
ap.add_argument("--before", type=int, default=100)
ap.add_argument("--repeat", type=int, default=1)
ap.add_argument("--torch-repeat", type=int, default=1,
                help="torch windows at the end, each after a window with nothing")
ap.add_argument("--gprofctl", default="gprofctl")
ap.add_argument("--job", default=os.environ.get("GPROF_JOB_ID", ""))
ap.add_argument("--tag", default="")
ap.add_argument("--out")
a = ap.parse_args()

import torch  # noqa: E402

try:
    import gprof_agent  # noqa: F401,E402  (the optimizer hook: steps are iterations)
except ImportError:
    gprof_agent = None

torch.manual_seed(0)
dev = torch.device("cuda")
layers = []
for _ in range(a.depth):
    layers += [torch.nn.Linear(a.width, a.width), torch.nn.GELU()]
model = torch.nn.Sequential(*layers).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
x = torch.randn(256, a.width, device=dev)


def step():
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def run(n, times):
    for _ in range(n):
        times.append(step())


class AgentCapture:
    """A gprofctl trace of this process, followed through its status lines."""

    def __init__(self, acts, knobs):
        self.state = "asked"
        self.saved = {k: os.environ.get(k) for k in knobs}
        os.environ.update(knobs)  # read by the agent when the burst starts
        cmd = [a.gprofctl, "trace", "--pid", str(os.getpid()), "--iterations", str(a.window),
               "--iteration-roundup", "1", "--output-dir", "/tmp/capture-overhead",
               "--timeout", "120"]
        if acts:
            cmd += ["--activities", acts]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stderr:
            for s in ("capturing", "writing", "failed", "done"):
                if (": %s" % s) in line:
                    self.state = s

    def started(self):
        return self.state != "asked"

    def finished(self):
        return self.p.poll() is not None

    def close(self):
        out = self.p.communicate()[0]
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return self.p.returncode, out


torch_ran = False  # has torch.profiler run in this process?


def window(cfg):
    global torch_ran
    before, during, after = [], [], []
    run(a.before, before)
    res = {"config": cfg, "tag": a.tag, "width": a.width, "torch_ran": torch_ran}
    if cfg == "none":
        start = 0
        run(a.window, during)
    elif cfg.startswith("torch"):
        acts = [torch.profiler.ProfilerActivity.CUDA]
        if cfg.startswith("torch-cpu"):
            acts.append(torch.profiler.ProfilerActivity.CPU)
        prof = torch.profiler.profile(activities=acts, record_shapes=cfg == "torch-cpu-shapes")
        prof.start()
        torch_ran = True
        start = 0
        run(a.window, during)
        t0 = time.perf_counter()
        prof.stop()
        res["stop_s"] = round(time.perf_counter() - t0, 3)
        res["events"] = len(prof.events())
    else:
        name, *knob = cfg.split("+")
        acts = name[len("agent-"):] if name.startswith("agent-") else ""
        knobs = dict(k.split("=", 1) for k in knob)
        cap = AgentCapture(acts.replace("/", ","), knobs)
        start = None
        while not cap.finished() and len(during) < 60 * a.window:
            if start is None and cap.started():
                start = len(during)
            during.append(step())
        rc, out = cap.close()
        res["gprofctl_exit"] = rc
        if rc != 0 or start is None:
            res["error"] = out.strip().splitlines()[-3:]
            print(json.dumps(res), flush=True)
            return res
    win = during[start + 10:start + a.window - 10]
    run(50, after)
    mb, md, ma = (statistics.median(v) for v in (before, win, after))
    res.update(before_ms=round(mb * 1e3, 4), during_ms=round(md * 1e3, 4),
               after_ms=round(ma * 1e3, 4), inflation=round(md / mb, 4),
               after_ratio=round(ma / mb, 4), steps=len(win))
    print("%-34s before %.3f ms  during %.3f ms  x%.3f  after x%.3f" % (
        cfg, mb * 1e3, md * 1e3, md / mb, ma / mb), flush=True)
    return res


run(200, [])  # warm-up: allocator, cuBLAS handles, clocks
cfgs = a.configs.split(",")
plain = [c for c in cfgs if not c.startswith("torch")]
results = []
for r in range(a.repeat):
    k = r % len(plain) if plain else 0
    for c in plain[k:] + plain[:k]:
        results.append(window(c))
# torch.profiler last (it keeps CUPTI); with --torch-repeat N each of its
# windows follows one with nothing, so drift in that stretch is measured too
for r in range(a.torch_repeat):
    for c in cfgs:
        if c.startswith("torch"):
            if r > 0 and "none" in cfgs:
                results.append(window("none"))
            res = window(c)
            res["torch_round"] = r
            results.append(res)
if torch_ran and "none" in cfgs:
    results.append(window("none"))  # torch.profiler's lasting cost (its "before" steps)
by = {}
for r in results:
    if "inflation" in r:
        by.setdefault(r["config"], []).append(r["inflation"])
for c, v in by.items():
    print("%-34s median x%.3f over %d windows: %s" % (
        c, statistics.median(v), len(v), " ".join("%.3f" % x for x in v)), flush=True)
if a.out:
    with open(a.out, "a") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
