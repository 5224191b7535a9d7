#!/usr/bin/env python3
"""Summarises a Kineto-format trace (.json or .json.gz): event counts by
category, ProfilerStep# iterations, kernel names and counts, flows, the
trace_id, and whether every X event has ts and dur. Prints one JSON object.
"""
import collections
import gzip
import json
import sys

path = sys.argv[1]
opener = gzip.open if path.endswith(".gz") else open
with opener(path, "rt") as f:
    doc = json.load(f)
ev = doc.get("traceEvents", [])
cats = collections.Counter(e.get("cat", "") for e in ev)
steps = sorted({e["name"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")})
kernels = collections.Counter(e["name"] for e in ev if e.get("cat") == "kernel")
flows = sum(1 for e in ev if e.get("ph") in ("s", "f"))
bad = sum(1 for e in ev if e.get("ph") == "X" and ("ts" not in e or "dur" not in e))
zero_dur_kernels = sum(1 for e in ev if e.get("cat") == "kernel" and not e.get("dur"))
print(json.dumps({
    "file": path,
    "trace_id": doc.get("trace_id"),
    "events": len(ev),
    "categories": dict(cats.most_common(12)),
    "profiler_steps": steps,
    "kernels": sum(kernels.values()),
    "distinct_kernels": len(kernels),
    "top_kernels": kernels.most_common(6),
    "flow_events": flows,
    "x_events_missing_ts_or_dur": bad,
    "kernels_with_zero_duration": zero_dur_kernels,
}, indent=1))
