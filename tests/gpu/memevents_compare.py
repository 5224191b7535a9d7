#!/usr/bin/env python3
"""The agent's [memory] events (gprofctl trace --profile-memory) against
torch.profiler(profile_memory=True)'s on the same loop (tests/gpu/memsnap.sh,
step 6; issue 27).

usage: memevents_compare.py AGENT_TRACE TORCH_TRACE

Both traces hold ProfilerStep# ranges of the same training step
(tests/gpu/memsnap_train.py: an MLP and a 1 MiB leak a step) run in two
processes, so absolute totals differ by what each process had allocated
before (its leak list); per step they must not. For each step: the
[memory] events inside it that allocate (Bytes > 0) and free (Bytes < 0),
their bytes, the step's net change of Total Allocated, and its swing (highest less lowest
Total Allocated). Each figure's median over the steps must be equal in the
two traces: counts exactly; the swing within the net change plus 1 % (the
two profilers may begin a step at different points of the loop: torch's at
prof.step(), the agent's at the optimizer's step); bytes within 1 % (the agent rounds requested
sizes to the allocator's 512 B blocks and cannot see the remainder of a
large block the allocator did not split); and the sizes of a step's
events, sorted, the same event for event. Also every agent event carries
the six args Kineto writes, and Total Allocated moves by Bytes from one
event to the next (checked in the agent's: torch.profiler's come from
several threads). CUDA events only (torch.profiler also writes the CPU
allocator's). Prints the table and "ok"/"FAIL" lines; exit 1 on FAIL.
"""
import collections
import gzip
import json
import statistics
import sys

ARGS = ("Total Reserved", "Total Allocated", "Bytes", "Device Id", "Device Type", "Addr")


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)["traceEvents"]


def per_step(ev, label, fails):
    # the CPU's steps: Kineto copies each onto the GPU rows too (gpu_user_annotation)
    steps = sorted((e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
                    and e.get("cat") != "gpu_user_annotation"), key=lambda e: e["ts"])
    # CUDA's only: torch.profiler reports the CPU allocator's too (Device Type 0)
    mem = sorted((e for e in ev if e.get("name") == "[memory]" and
                  e.get("args", {}).get("Device Type", 1) == 1), key=lambda e: e["ts"])
    for e in mem:
        missing = [k for k in ARGS if k not in e.get("args", {})]
        if missing:
            fails.append("%s: a [memory] event without %s: %s" % (label, missing, e))
            break
    prev = None
    for e in mem if label == "agent" else []:  # the running total moves by each event's bytes
        a = e["args"]
        if prev is not None and a["Device Id"] == prev["Device Id"] and \
                a["Total Allocated"] != prev["Total Allocated"] + a["Bytes"]:
            fails.append("%s: Total Allocated %d after %d + Bytes %d" % (
                label, a["Total Allocated"], prev["Total Allocated"], a["Bytes"]))
            break
        prev = a
    rows = []
    for s in steps:
        inside = [e["args"] for e in mem if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        if not inside:
            rows.append(None)
            continue
        start = inside[0]["Total Allocated"] - inside[0]["Bytes"]
        rows.append({
            "allocs": sum(1 for x in inside if x["Bytes"] > 0),
            "frees": sum(1 for x in inside if x["Bytes"] < 0),
            "alloc_bytes": sum(x["Bytes"] for x in inside if x["Bytes"] > 0),
            "free_bytes": -sum(x["Bytes"] for x in inside if x["Bytes"] < 0),
            "net": inside[-1]["Total Allocated"] - start,
            "sizes": tuple(sorted(x["Bytes"] for x in inside)),
            "swing": max(x["Total Allocated"] for x in inside) - min(
                [start] + [x["Total Allocated"] for x in inside]),
        })
    return steps, mem, rows


def main():
    fails = []
    got = {}
    for label, path in (("agent", sys.argv[1]), ("torch", sys.argv[2])):
        steps, mem, rows = per_step(load(path), label, fails)
        print("%s: %d ProfilerStep#, %d [memory] events (%s)" % (label, len(steps), len(mem), path))
        if len(steps) < 3 or any(r is None for r in rows):
            fails.append("%s: %d steps, steps without [memory] events: %d" % (
                label, len(steps), sum(r is None for r in rows)))
            rows = [r for r in rows if r]
        for i, r in enumerate(rows):
            print("  step %d: %s" % (i, {k: v for k, v in r.items() if k != "sizes"}))
        got[label] = rows
    if got.get("agent") and got.get("torch"):
        print("%-18s %14s %14s  %s" % ("per step, median", "agent", "torch.profiler", "difference"))
        net = statistics.median(r["net"] for r in got["torch"])
        for k in ("allocs", "frees", "alloc_bytes", "free_bytes", "net", "swing"):
            x = statistics.median(r[k] for r in got["agent"])
            y = statistics.median(r[k] for r in got["torch"])
            d = abs(x - y) / max(abs(y), 1)
            if k in ("allocs", "frees"):
                ok = x == y
            elif k == "swing":  # where a step's range cuts the cycle moves it by up to the net
                ok = abs(x - y) <= abs(net) + 0.01 * abs(y)
            else:
                ok = d <= 0.01
            print("%-18s %14s %14s  %.3f %%%s" % (k, x, y, d * 100, "" if ok else "  <- FAIL"))
            if not ok:
                fails.append("%s per step: agent %s, torch.profiler %s" % (k, x, y))
    if got.get("agent") and got.get("torch"):
        # event by event: the same sizes allocated and freed in a step (the
        # order differs where the two cut the loop)
        common = [collections.Counter(r["sizes"] for r in got[k]).most_common(1)[0][0]
                  for k in ("agent", "torch")]
        print("sizes of a step's events (sorted): %s, %d events" % (
            "the same" if common[0] == common[1] else "DIFFERENT", len(common[1])))
        if common[0] != common[1]:
            fails.append("a step's event sizes differ: agent %s, torch.profiler %s" % common)
    for f in fails:
        print("FAIL [memory] events:", f)
    if not fails:
        print("ok [memory] events: per step the agent's equal torch.profiler(profile_memory=True)'s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
