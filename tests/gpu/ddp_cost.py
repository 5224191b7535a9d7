#!/usr/bin/env python3
"""What one capture costs every rank of a multi-GPU job (issue 28), from
the job's own clock: tests/gpu/ddp_train.py --block-times writes, on each
rank, the wall-clock time at the end of every 20 steps (a synchronised
point). tests/gpu/run.sh's ddpcost section runs the same job traced by the
agent, traced by stock Kineto, and untraced, one after the other.

usage: ddp_cost.py LABEL BLOCKS_GLOB (--trace-dir DIR | --window T0 T1)

The window: from the trace files (every rank's first ProfilerStep# start to
its last end, Unix time, baseTimeNanoseconds + ts), or --window T0 T1 in
Unix seconds (the untraced run: the same place, no request). Per rank, a
block (20 steps) is
  before  ended before the window began (the 40 blocks before it),
  during  lay wholly inside the window,
  after   began 1 s or more after the window ended (the tail and the
          delivery past) and within the 40 blocks after that,
and the figures are the medians of each: during/before (the window's
inflation) and after/before (what is left once it is over). Prints one
line per rank and a JSON line; exit 1 when a rank has no block in a group.
"""
import argparse
import glob
import gzip
import json
import os
import statistics
import sys


def window_of(d):
    lo, hi = None, None
    for f in glob.glob(os.path.join(d, "**", "*.pt.trace.json*"), recursive=True):
        with (gzip.open if f.endswith(".gz") else open)(f, "rt") as fh:
            doc = json.load(fh)
        base = doc.get("baseTimeNanoseconds", 0) / 1e9
        for e in doc["traceEvents"]:
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#") and \
                    e.get("cat") != "gpu_user_annotation":
                a, b = base + e["ts"] / 1e6, base + (e["ts"] + e["dur"]) / 1e6
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
    return lo, hi


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("blocks")
    ap.add_argument("--trace-dir")
    ap.add_argument("--window", nargs=2, type=float)
    a = ap.parse_args()
    t0, t1 = window_of(a.trace_dir) if a.trace_dir else a.window
    if t0 is None:
        print("FAIL %s: no ProfilerStep# in %s" % (a.label, a.trace_dir))
        return 1
    out, bad = {"label": a.label, "window_s": round(t1 - t0, 3), "ranks": {}}, []
    for f in sorted(glob.glob(a.blocks)):
        with open(f) as fh:
            doc = json.load(fh)
        bl = doc["blocks"]
        # (steps, seconds, start, end) of each block of 20 steps
        spans = [(n1 - n0, e1 - e0, e0, e1) for (n0, e0), (n1, e1) in zip(bl, bl[1:])]
        before = [s[1] / s[0] for s in spans if s[3] <= t0][-40:]
        during = [s[1] / s[0] for s in spans if s[2] >= t0 and s[3] <= t1]
        after = [s[1] / s[0] for s in spans if s[2] >= t1 + 1.0][:40]
        r = doc["rank"]
        if not (before and during and after):
            bad.append("rank %s: blocks before %d, during %d, after %d" % (
                r, len(before), len(during), len(after)))
            continue
        mb = statistics.median(before)
        row = {"step_ms_before": round(mb * 1e3, 4), "blocks": [len(before), len(during), len(after)],
               "during": round(statistics.median(during) / mb, 4),
               "after": round(statistics.median(after) / mb, 4)}
        out["ranks"][r] = row
        print("%s rank %s: step %.3f ms before; window x%.4f (%d blocks of 20 steps), after x%.4f" % (
            a.label, r, mb * 1e3, row["during"], len(during), row["after"]))
    print(json.dumps(out))
    for b in bad:
        print("FAIL %s: %s" % (a.label, b))
    return 1 if bad or not out["ranks"] else 0


if __name__ == "__main__":
    sys.exit(main())
