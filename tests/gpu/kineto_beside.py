#!/usr/bin/env python3
"""kineto_beside.py: does torch.profiler with activities=[CPU], started
while the agent's burst holds CUPTI, take CUPTI from the agent? (issue 27:
the candidate mechanism for operators on the agent path.)

The loop asks gprofd for a WINDOW-iteration capture of itself at step
ASK; STEPS_IN steps later (the burst is running by then) it starts
torch.profiler CPU-only for KSTEPS steps, stops it and exports its trace.
Judged: the agent's trace has the same number of cuda_runtime calls in
every ProfilerStep inside and outside the profiler's steps (nothing
taken), and the profiler's export has its cpu_op events.
  kineto_beside.py GPROFCTL SOCKET OUTDIR"""
import glob
import gzip
import json
import statistics
import subprocess
import sys
import time

import torch
import gprof_agent

ctl, sock, outdir = sys.argv[1:4]
ASK, STEPS_IN, KSTEPS, WINDOW = 300, 100, 60, 300
torch.manual_seed(0)
dev = torch.device("cuda")
layers = []
for _ in range(4):
    layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(128, 1024, device=dev)
ask = prof = None
kstart = kstop = None
for s in range(ASK + WINDOW + 300):
    opt.zero_grad(set_to_none=True)
    model(x).sum().backward()
    opt.step()
    torch.cuda.synchronize()
    if s == ASK:
        ask = subprocess.Popen([ctl, "--socket", sock, "trace", "--pid", str(__import__("os").getpid()),
                                "--iterations", str(WINDOW), "--output-dir", outdir, "--timeout", "120"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if s == ASK + STEPS_IN:
        sys.stderr.write("mode kcpu start\n")
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.start()
        kstart = gprof_agent.steps()
    if s == ASK + STEPS_IN + KSTEPS:
        prof.stop()
        kstop = gprof_agent.steps()
        sys.stderr.write("mode kcpu stop\n")
out = ask.communicate()[0]
print("gprofctl exit %d: %s" % (ask.returncode, out.strip().splitlines()[-1:] if out else ""))
prof.export_chrome_trace(outdir + "/kineto-cpu.json")
ev = json.load(open(outdir + "/kineto-cpu.json"))["traceEvents"]
print("torch.profiler CPU-only export: %d cpu_op, %d cuda_runtime, %d kernel" % (
    sum(e.get("cat") == "cpu_op" for e in ev), sum(e.get("cat") == "cuda_runtime" for e in ev),
    sum(e.get("cat") == "kernel" for e in ev)))
files = glob.glob(outdir + "/**/*.pt.trace.json.gz", recursive=True)
if not files:
    print("FAIL: no agent trace")
    sys.exit(1)
tr = json.load(gzip.open(files[0]))["traceEvents"]
steps = [e for e in tr if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
         and e.get("cat") not in ("gpu_user_annotation",)]
rt = sorted(e["ts"] for e in tr if e.get("cat") == "cuda_runtime")
kern = sum(e.get("cat") == "kernel" for e in tr)
inside, outside = [], []
import bisect
for st in steps:
    n = int(st["name"].split("#")[1])
    c = bisect.bisect_right(rt, st["ts"] + st["dur"]) - bisect.bisect_left(rt, st["ts"])
    (inside if kstart is not None and kstart <= n < kstop else outside).append(c)
print("agent trace: %d steps, %d kernels, %d cuda_runtime; profiler steps %s..%s" % (
    len(steps), kern, len(rt), kstart, kstop))
print("runtime calls per step: inside the profiler's steps %s (n=%d), outside %s (n=%d)" % (
    statistics.median(inside) if inside else None, len(inside),
    statistics.median(outside) if outside else None, len(outside)))
# a step at the profiler's start or stop may hold its start/stop calls:
# the medians must agree (a taken CUPTI leaves steps with none at all)
mo = statistics.median(outside) if outside else -1
ok = bool(inside) and kern > 0 and statistics.median(inside) == mo and min(inside) > 0
print("PASS" if ok else "FAIL: the agent lost records beside torch.profiler CPU-only")
# and the job's own torch.profiler afterwards: does it still get the GPU?
sys.stderr.write("mode tp-after start\n")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA]) as p2:
    for _ in range(10):
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()
        torch.cuda.synchronize()
sys.stderr.write("mode tp-after stop\n")
p2.export_chrome_trace(outdir + "/tp-after.json")
ev = json.load(open(outdir + "/tp-after.json"))["traceEvents"]
print("the job's own torch.profiler CPU+CUDA afterwards: %d cpu_op, %d cuda_runtime, %d kernel" % (
    sum(e.get("cat") == "cpu_op" for e in ev), sum(e.get("cat") == "cuda_runtime" for e in ev),
    sum(e.get("cat") == "kernel" for e in ev)))
