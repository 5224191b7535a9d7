#!/usr/bin/env python3
"""add_driver_launches.py: copy rank traces recorded before driver-API
launches were recorded (tests/fixtures/traces/ddp/) and give each NCCL
kernel with no launch the record the agent now writes (issue 27): a
`cuda_driver` `cuLaunchKernelEx` event with the kernel's correlation, on the
thread and inside the NCCL range (`ncclAllReduce` user_annotation, else the
ProfilerStep) where NCCL enqueued it, with its `ac2g` flow pair.
Evidence for tests/gpu/hta_check.py: HTA keeps such kernels.

usage: add_driver_launches.py OUT_DIR TRACE...   (writes OUT_DIR/<same name>)
Only kernels whose name starts with "nccl" get a launch; others are left as
they are (--all: every GPU kernel with no launch gets one).
"""
import argparse
import gzip
import json
import os
import sys

CBID_cuLaunchKernelEx = 652  # CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def launch_slot(ranges, ev_by_tid, k_ts):
    """(pid, tid, ts) for a launch in the last range that starts before k_ts."""
    before = [r for r in ranges if r["ts"] < k_ts] or ranges[:1]
    r = before[-1]
    # after the last call already recorded inside the range, on its thread
    inner = [e for e in ev_by_tid.get((r["pid"], r["tid"]), [])
             if r["ts"] <= e["ts"] < r["ts"] + r["dur"] and e is not r]
    t = max([e["ts"] + e.get("dur", 0) for e in inner] + [r["ts"]]) + 0.5
    end = r["ts"] + r["dur"]
    if t + 1.0 > end:  # no room after: take the range's middle
        t = r["ts"] + r["dur"] / 2.0
    return r["pid"], r["tid"], round(t, 3), round(min(1.0, max(0.001, end - t - 0.001)), 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for path in a.traces:
        op = gzip.open if path.endswith(".gz") else open
        with op(path, "rt") as f:
            doc = json.load(f)
        ev = doc["traceEvents"]
        steps = sorted((e for e in ev if e.get("ph") == "X" and
                        str(e.get("name", "")).startswith("ProfilerStep#")),
                       key=lambda e: e["ts"])
        nccl_ranges = sorted((e for e in ev if e.get("ph") == "X" and
                              e.get("cat") == "user_annotation" and
                              str(e.get("name", "")).startswith("nccl")),
                             key=lambda e: e["ts"])
        have = {(e.get("args") or {}).get("correlation") for e in ev
                if e.get("cat") in ("cuda_runtime", "cuda_driver")}
        ev_by_tid = {}
        for e in ev:
            if e.get("ph") == "X":
                ev_by_tid.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        todo = sorted((e for e in ev if e.get("cat") == "kernel" and
                       (a.all or e["name"].startswith("nccl")) and
                       e["args"].get("correlation") not in have),
                      key=lambda e: e["ts"])
        nccl_todo = [e for e in todo if e["name"].startswith("nccl")]
        added = []
        for k in todo:
            c = k["args"]["correlation"]
            if k["name"].startswith("nccl") and len(nccl_ranges) == len(nccl_todo):
                r = nccl_ranges[nccl_todo.index(k)]  # i-th collective, i-th kernel
                pid, tid, ts, dur = launch_slot([r], ev_by_tid, float("inf"))
            else:
                pid, tid, ts, dur = launch_slot(steps, ev_by_tid, k["ts"])
            added.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx",
                          "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                          "args": {"cbid": CBID_cuLaunchKernelEx, "correlation": c}})
            added.append({"ph": "s", "id": c, "pid": pid, "tid": tid, "ts": ts,
                          "cat": "ac2g", "name": "ac2g"})
            added.append({"ph": "f", "id": c, "pid": k["pid"], "tid": k["tid"],
                          "ts": k["ts"], "cat": "ac2g", "name": "ac2g", "bp": "e"})
        tail = [e for e in ev if e.get("ph") == "i" and e.get("name") == "Record Window End"]
        body = [e for e in ev if not (e.get("ph") == "i" and e.get("name") == "Record Window End")]
        doc["traceEvents"] = body + added + tail
        out = os.path.join(a.out, os.path.basename(path))
        # json's default separators keep '"rank": R' (HTA's rank regex needs the space)
        with (gzip.open(out, "wt") if out.endswith(".gz") else open(out, "w")) as f:
            json.dump(doc, f)
        print("%s: %d launches added (%d NCCL kernels)" % (out, len(added) // 3, len(nccl_todo)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
