#!/usr/bin/env python3
"""Judges the traces of tests/gpu/run.sh's compile section (issue 27: a
torch.compile'd model through both paths).

usage: compile_check.py LABEL STEPS TRACE [--graphs] [--same-as TRACE2]

What must hold: ProfilerStep#N ranges, STEPS of them, numbered one after
the other; Inductor's Triton kernels there (names starting "triton_");
every GPU record (kernel, memcpy, memset) with its launch, a CPU-side
cuda_runtime or cuda_driver event of the same correlation (HTA keeps
nothing else: tests/tools/hta_rule.py; with --kineto, stock Kineto's
trace, only reported); with --graphs, kernels launched by
cudaGraphLaunch (their launch is the graph's). With --same-as, the other
trace (the same loop on the other path) has the same Triton kernel names.
Prints one JSON line and "ok"/"FAIL" lines; exit 1 on a failure.
"""
import argparse
import collections
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import hta_rule  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("label")
ap.add_argument("steps", type=int)
ap.add_argument("trace")
ap.add_argument("--graphs", action="store_true")
ap.add_argument("--same-as")
ap.add_argument("--kineto", action="store_true",
                help="stock Kineto's trace: launches and HTA's rule reported, not judged")
a = ap.parse_args()

GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    return json.load(op(path, "rt"))["traceEvents"]


def triton_names(ev):
    return sorted({e["name"] for e in ev if e.get("cat") == "kernel" and
                   e["name"].startswith("triton_")})


ev = load(a.trace)
fails = []
steps = sorted(int(e["name"].split("#")[1]) for e in ev
               if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
if not steps or len(steps) != a.steps or steps != list(range(steps[0], steps[0] + a.steps)):
    fails.append("ProfilerStep# numbers %s, %d consecutive wanted" % (steps, a.steps))
launch = {}
for e in ev:
    if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
        launch[e["args"]["correlation"]] = e["name"]
gpu = [e for e in ev if e.get("cat") in GPU]
orphans = [e["name"][:50] for e in gpu if e.get("args", {}).get("correlation") not in launch]
notes = []
if orphans:
    (notes if a.kineto else fails).append("%d GPU records without their launch: %s" % (
        len(orphans), collections.Counter(orphans).most_common(4)))
tri = triton_names(ev)
if not tri:
    fails.append("no Triton kernel (triton_*) in the trace")
by = collections.Counter(launch.get(e.get("args", {}).get("correlation"), "-")
                         for e in gpu if e.get("cat") == "kernel")
if a.graphs and not any(n.startswith("cudaGraphLaunch") for n in by):
    fails.append("no kernel launched by cudaGraphLaunch (launches: %s)" % dict(by))
gone = hta_rule.dropped(ev)
if gone:
    (notes if a.kineto else fails).append("HTA's rule drops %d GPU records" % len(gone))
same = None
if a.same_as:
    other = triton_names(load(a.same_as))
    same = other == tri
    if not same:
        fails.append("Triton kernels differ from %s: only here %s, only there %s" % (
            os.path.basename(a.same_as), sorted(set(tri) - set(other))[:4],
            sorted(set(other) - set(tri))[:4]))
print(json.dumps({"label": a.label, "steps": steps, "kernels": sum(1 for e in gpu if
                  e.get("cat") == "kernel"), "triton_kernels": len(tri),
                  "launched_by": dict(by.most_common(6)), "hta_dropped": len(gone),
                  "same_triton_kernels": same, "ok": not fails}))
for f in fails:
    print("FAIL %s: %s" % (a.label, f))
for n in notes:
    print("note %s: %s" % (a.label, n))
if not fails:
    print("ok %s: %d ProfilerSteps, %d Triton kernel names, every GPU record with its launch%s" % (
        a.label, len(steps), len(tri), ", graph replays" if a.graphs else ""))
sys.exit(1 if fails else 0)
