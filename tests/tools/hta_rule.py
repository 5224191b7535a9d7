#!/usr/bin/env python3
"""hta_rule.py: the rule Holistic Trace Analysis applies before its kernel
and communication breakdowns (hta/common/trace.py, TraceAnalysis.
_filter_irrelevant_gpu_kernels and add_iteration, read 2026-11-25): a GPU
event (kernel, gpu_memcpy, gpu_memset) is kept only when a CPU-side event
with the same correlation (here: its launch, a cuda_runtime or cuda_driver
call) lies inside a ProfilerStep#<n> (ts <= t < ts + dur). GPU work that
fails it vanishes from HTA's analyses (NCCL kernels launched through the
driver API with no recorded launch: 0 % communication).

usage: hta_rule.py TRACE...   prints each trace's GPU events and those HTA
drops; exit 1 if any trace drops one, 2 if a trace has no ProfilerStep.
Importable: dropped(events) -> list of dropped GPU events.
"""
import gzip
import json
import sys

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def dropped(ev):
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev
             if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
    launched = set()
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            if any(a <= e["ts"] < b for a, b in steps):
                launched.add(e["args"]["correlation"])
    return [e for e in ev if e.get("cat") in GPU_CATS and
            e.get("args", {}).get("correlation") not in launched]


def main():
    rc = 0
    for path in sys.argv[1:]:
        op = gzip.open if path.endswith(".gz") else open
        ev = json.load(op(path, "rt"))["traceEvents"]
        if not any(e.get("name", "").startswith("ProfilerStep#") for e in ev):
            print("%s: no ProfilerStep" % path)
            rc = max(rc, 2)
            continue
        gone = dropped(ev)
        gpu = sum(1 for e in ev if e.get("cat") in GPU_CATS)
        names = sorted({e["name"][:60] for e in gone})
        print("%s: %d GPU events, %d dropped by HTA's rule%s" % (
            path, gpu, len(gone), (": " + ", ".join(names[:8])) if gone else ""))
        rc = max(rc, 1 if gone else 0)
    return rc


if __name__ == "__main__":
    sys.exit(main())
