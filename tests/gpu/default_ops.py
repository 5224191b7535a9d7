#!/usr/bin/env python3
"""default_ops.py: PyTorch operators by default on the agent path (issue 27),
on a GPU host. Run with the agent injected (CUDA_INJECTION64_PATH,
GPROF_SOCKET) and python/ on PYTHONPATH.

A PyTorch loop (4 x Linear + ReLU, SGD) traces itself with a plain
`gprofctl trace --pid SELF --iterations 10` (no operator option) while it
steps, then runs its own torch.profiler(activities=[CPU, CUDA]) for 5 steps
in the same process. Checks, with --expect built: every ProfilerStep# of
the agent's trace holds the same nonzero number of cpu_op events and no
note; with --expect none (observer not built): no cpu_op, and the note
says how to get them. Both: the job's own torch.profiler afterwards still
records its CUDA kernels (the default never starts torch.profiler beside
the agent's CUPTI) and the job computes what it computes. Prints one JSON
line; exit 1 when a check fails.

  default_ops.py --gprofctl PATH --expect built|none [--out DIR]
"""
import argparse
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--gprofctl", required=True)
ap.add_argument("--expect", choices=("built", "none"), required=True)
ap.add_argument("--out", default=tempfile.mkdtemp(prefix="default-ops-"))
a = ap.parse_args()

import torch  # noqa: E402
import gprof_agent  # noqa: E402,F401  (the optimizer hook: steps are iterations)


def make():
    """The loop's model, optimizer and input, from seed 0."""
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=1e-3), torch.randn(64, 512, device="cuda")


def one_step(model, opt, x):
    opt.zero_grad(set_to_none=True)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss.item()


model, opt, x = make()
losses = []


def step():
    losses.append(one_step(model, opt, x))


for _ in range(20):
    step()
p = subprocess.Popen([a.gprofctl, "trace", "--pid", str(os.getpid()), "--iterations", "10",
                      "--output-dir", a.out, "--timeout", "60"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
n = 0
while p.poll() is None and n < 100000:
    step()
    n += 1
out, err = p.communicate()
res = {"expect": a.expect, "gprofctl_exit": p.returncode, "steps_while_tracing": n}
bad = []
if p.returncode != 0:
    bad.append("gprofctl trace failed: %s" % err.strip()[-300:])
files = glob.glob(os.path.join(a.out, "*", "*.pt.trace.json.gz"))
if files:
    ev = json.load(gzip.open(files[0], "rt"))["traceEvents"]
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    notes = [e["args"]["note"] for e in ev if e.get("ph") == "M" and e["name"] == "gprof_note"]
    per = [sum(1 for o in ops if s["ts"] <= o["ts"] and o["ts"] + o["dur"] <= s["ts"] + s["dur"])
           for s in steps]
    res.update(trace=files[0], steps=len(steps), cpu_op=len(ops), per_step=per, notes=notes,
               kernels=sum(1 for e in ev if e.get("cat") == "kernel"))
    if len(steps) != 10:
        bad.append("%d ProfilerStep# ranges, not 10" % len(steps))
    if a.expect == "built":
        if not per or per[0] == 0 or len(set(per)) != 1:
            bad.append("operators per step %s: not the same nonzero count" % per)
        if notes:
            bad.append("notes %s" % notes)
    else:
        if ops:
            bad.append("%d cpu_op without a built observer" % len(ops))
        if not [t for t in notes if "python3 -m gprof_agent.build_ops" in t]:
            bad.append("no note saying how to get operators: %s" % notes)
else:
    bad.append("no trace in %s" % a.out)
# the job's own torch.profiler afterwards, in the same process
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA]) as prof:
    for _ in range(5):
        step()
cuda = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
res["own_profiler_cuda_events"] = len(cuda)
if not cuda:
    bad.append("the job's own torch.profiler recorded no CUDA event afterwards")
# the same steps untraced (the agent records nothing now): the same losses
ref = make()
same = all(one_step(*ref) == loss for loss in list(losses))
res["losses_same"] = same
if not same:
    bad.append("the traced job's losses differ from an untraced run's")
res["failures"] = bad
print(json.dumps(res))
sys.exit(1 if bad else 0)
