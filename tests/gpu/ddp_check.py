#!/usr/bin/env python3
"""Judges one multi-rank trace directory of tests/gpu/run.sh's ddp section.

usage: ddp_check.py TRACE_DIR --ranks 2 --steps 5 [--slow-rank R] [--label L]

Every rank's file must be there, exactly once (distributedInfo rank 0..N-1,
world_size N, backend nccl, the rank in the file name), hold --steps
ProfilerStep# events with the same numbers on every rank, and NCCL kernels
(name containing "nccl") on their streams. With --slow-rank R the straggler
must be visible: rank R's NCCL kernels are shorter per step than every
other rank's, which wait in them. Every rank runs the same model, so every
rank's trace must hold the same number of kernels (a rank whose GPU lags
its CPU, waiting on the straggler, still has work queued when the window
closes: that work belongs to the trace): checked with --same-kernels (the
agent), reported otherwise (stock Kineto stops without waiting for it). Prints one JSON line of figures; exit 1
with the reasons when a check fails.
"""
import argparse
import glob
import gzip
import json
import os
import statistics
import sys


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--label", default="ddp")
    ap.add_argument("--same-kernels", action="store_true",
                    help="every rank's trace holds as many kernels (else only reported)")
    a = ap.parse_args()
    errs, out = [], {"label": a.label}
    files = sorted(glob.glob(os.path.join(a.dir, "**", "*.pt.trace.json*"), recursive=True))
    byrank = {}
    for f in files:
        doc = load(f)
        di = doc.get("distributedInfo", {})
        r = di.get("rank")
        if r in byrank:
            errs.append("two files claim rank %s: %s %s" % (r, byrank[r][0], f))
        byrank[r] = (f, doc)
        if di.get("world_size") != a.ranks or di.get("backend") != "nccl":
            errs.append("%s: distributedInfo %s" % (f, di))
        if "_rank%s." % r not in os.path.basename(f):
            errs.append("%s: rank %s not in the file name" % (f, r))
    if sorted(byrank) != list(range(a.ranks)):
        errs.append("ranks %s in %d files, want 0..%d" % (sorted(byrank, key=str), len(files),
                                                          a.ranks - 1))
    steps, nccl_per_step, step_ms, kernels = {}, {}, {}, {}
    for r, (f, doc) in sorted(byrank.items(), key=lambda kv: str(kv[0])):
        ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        ps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")),
                    key=lambda e: e["ts"])
        steps[r] = [int(e["name"].split("#")[1]) for e in ps]
        k = [e for e in ev if e.get("cat") == "kernel"]
        nc = [e for e in k if "nccl" in e["name"].lower()]
        kernels[r] = {"kernels": len(k), "nccl": len(nc),
                      "nccl_streams": sorted({e["tid"] for e in nc})}
        if len(steps[r]) != a.steps:
            errs.append("rank %s: %d ProfilerStep#, want %d" % (r, len(steps[r]), a.steps))
        if not nc:
            errs.append("rank %s: no NCCL kernel among %d kernels" % (r, len(k)))
        if ps:
            step_ms[r] = round(statistics.median(e["dur"] for e in ps) / 1000, 3)
            nccl_per_step[r] = round(sum(e["dur"] for e in nc) / len(ps) / 1000, 3)
    # the same model and steps on every rank: the same kernels, unless the
    # trace lost the GPU work still queued when the window closed
    counts = {r: v["kernels"] for r, v in kernels.items()}
    if len(set(counts.values())) > 1 and a.same_kernels:
        errs.append("kernel counts differ across ranks (GPU work queued at the window's end "
                    "lost?): %s" % counts)
    nums = list(steps.values())
    if nums and any(n != nums[0] for n in nums):
        errs.append("ProfilerStep# numbers differ across ranks: %s" % steps)
    if a.slow_rank >= 0 and len(nccl_per_step) == a.ranks:
        mine = nccl_per_step.get(a.slow_rank)
        others = [v for r, v in nccl_per_step.items() if r != a.slow_rank]
        if mine is None or not all(mine < o for o in others):
            errs.append("straggler not visible: NCCL ms per step by rank %s (slow rank %d)" %
                        (nccl_per_step, a.slow_rank))
    out.update(same_kernels=len(set(counts.values())) <= 1, files=len(files), steps=steps, step_ms=step_ms, nccl_ms_per_step=nccl_per_step,
               kernels=kernels, ok=not errs)
    print(json.dumps(out))
    for e in errs:
        print("FAIL %s: %s" % (a.label, e))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
