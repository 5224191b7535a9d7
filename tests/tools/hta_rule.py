#!/usr/bin/env python3
"""hta_rule.py: a stricter form of the rule Holistic Trace Analysis applies
before its kernel and communication breakdowns. HTA (hta/common/trace.py,
its filter of irrelevant GPU kernels, at commit f4d0062, 0.6.1) keeps a GPU
event (kernel, gpu_memcpy, gpu_memset) only when the CPU-side event with
the same correlation (its launch: a cuda_runtime or cuda_driver call)
exists and starts before the last ProfilerStep#<n> begins (the last step
is left out by design; with fewer than 2 steps it filters nothing). This
file asks more, that the launch lies inside a ProfilerStep (ts <= t < ts +
dur): a trace that passes it passes HTA's rule too. GPU work with no
recorded launch vanishes from HTA's analyses (NCCL kernels launched
through the driver API, unrecorded: 0 % communication). HTA itself, run on
a rank directory: tests/gpu/hta_check.py.

usage: hta_rule.py TRACE...   prints each trace's GPU events and those the
rule drops; exit 1 if any trace drops one, 2 if a trace has no ProfilerStep.
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
