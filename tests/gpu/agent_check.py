#!/usr/bin/env python3
"""Checks and figures for the agent's GPU run (tests/gpu/run.sh).

  agent_check.py workload TRACE          the CUDA C program's known events
  agent_check.py compare TRACE TORCH     kernels per iteration vs torch.profiler
  agent_check.py overhead OUT TRACE200   step-time medians and ratios
  agent_check.py latency TRACE REQ_NS DONE_NS

Each prints what it measured and ends with "PASS: ..." or "FAIL: ...".
"""
import collections
import gzip
import json
import statistics
import sys
import os

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from validate_trace import validate  # noqa: E402


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)


def verdict(errors, what):
    for e in errors:
        print("  problem: %s" % e)
    print(("FAIL: " if errors else "PASS: ") + what)
    return 1 if errors else 0


OWN_IDS = 1 << 30  # ids the agent gives events of a burst CUPTI did not number


def untied(ev):
    """A burst CUPTI did not number: the agent kept its records by time and
    gave every event an id of its own (from 2^30), so nothing joins."""
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return bool(gpu) and all(e["args"]["correlation"] >= OWN_IDS for e in gpu) and \
        not any(e.get("ph") in ("s", "f") for e in ev)


def by_launch(doc):
    """GPU events grouped by the ProfilerStep# their launch falls in (in an
    untied burst: the step their own start falls in, the launch unknown)."""
    ev = doc["traceEvents"]
    steps = sorted((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    launch = {e["args"]["correlation"]: e for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    by_time = untied(ev)
    groups = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        l = e if by_time else launch.get(e["args"]["correlation"])
        if l is None:
            continue
        for i, s in enumerate(steps):
            if s["ts"] <= l["ts"] <= s["ts"] + s["dur"]:
                groups[i].append((e, None if by_time else l))
    return steps, groups, ev


def workload(path):
    errors = []
    summary, err = validate(path, steps=5, min_kernels=15)
    errors += err
    doc = load(path)
    steps, groups, ev = by_launch(doc)
    flows = collections.defaultdict(dict)
    for e in ev:
        if e.get("ph") in ("s", "f"):
            flows[e["id"]][e["ph"]] = e
    expect = collections.Counter({
        ("kernel", "scale"): 2, ("kernel", "add_one"): 1,
        ("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)"): 1,
        ("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)"): 1,
        ("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)"): 1,
        ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)"): 1,
        ("gpu_memset", "Memset (Device)"): 1})
    for i in range(len(steps)):
        got = collections.Counter()
        streams = collections.defaultdict(set)
        for e, l in groups[i]:
            name = e["name"].split("(")[0] if e["cat"] == "kernel" else e["name"]
            name = name.replace("void ", "").strip()
            got[(e["cat"], name)] += 1
            streams[name].add(e["args"]["stream"])
            if e["dur"] <= 0:
                errors.append("step %d: %s has no duration" % (i, e["name"]))
            if e["cat"] != "kernel" and e["args"].get("bytes") != (1 << 20) * 4:
                errors.append("step %d: %s moved %s bytes" % (i, e["name"], e["args"].get("bytes")))
            f = flows.get(e["args"]["correlation"], {})
            if l is not None and (set(f) != {"s", "f"} or f["f"]["tid"] != e["tid"] or
                                  f["s"]["tid"] != l["tid"]):
                errors.append("step %d: %s has no matching flow" % (i, e["name"]))
        if got != expect:
            errors.append("step %d: got %s, expected %s" % (i, dict(got), dict(expect)))
        if i == 0:
            print("  per iteration: %s" % dict(got))
            print("  streams: %s" % {k: sorted(v) for k, v in streams.items()})
        if streams.get("scale") and streams.get("add_one") and streams["scale"] == streams["add_one"]:
            errors.append("step %d: both streams' kernels on one stream" % i)
    if untied(ev):
        print("  untied: CUPTI did not number this burst; GPU work placed by its own start")
    print("  trace: %d events, %d kernels, %d flows, dropped %s" % (
        summary["events"] if summary else 0, summary["kernels"] if summary else 0,
        len(flows), summary["dropped"] if summary else "?"))
    return verdict(errors, "CUDA C workload: exact events per iteration in 5 iterations")


def kernel_counts(doc):
    return collections.Counter(e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel")


def compare(ours, torch_trace):
    errors = []
    summary, err = validate(ours, steps=5)
    errors += err
    a = load(ours)
    b = load(torch_trace)
    ka, kb = kernel_counts(a), kernel_counts(b)
    nb = 200
    per_a = {k: v / 5 for k, v in ka.items()}
    per_b = {k: v / nb for k, v in kb.items()}
    print("  agent: %d kernels in 5 iterations (%d names); torch.profiler: %d in %d (%d names)" % (
        sum(ka.values()), len(ka), sum(kb.values()), nb, len(kb)))
    for k in sorted(set(per_a) | set(per_b)):
        if abs(per_a.get(k, 0) - per_b.get(k, 0)) > 1e-9:
            errors.append("%s: %.2f per iteration here, %.2f with torch.profiler" % (
                k[:90], per_a.get(k, 0), per_b.get(k, 0)))
    print("  per iteration: %s" % {k[:60]: v for k, v in sorted(per_a.items())})
    if summary and summary["dropped"]:
        errors.append("%s CUPTI records dropped" % summary["dropped"])
    return verdict(errors, "PyTorch: kernel names and counts per iteration equal torch.profiler's")


def overhead(out, trace200, tag="agent"):
    agent = json.load(open(os.path.join(out, "steps-%s.json" % tag)))
    print("  run %s" % tag)
    base = [json.load(open(os.path.join(out, f)))["idle"]
            for f in sorted(os.listdir(out)) if f.startswith("steps-noagent")]
    idle = [json.load(open(os.path.join(out, f)))["idle"]
            for f in sorted(os.listdir(out)) if f.startswith("steps-idle")]
    med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    doc = load(trace200)
    st = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    t0 = doc["baseTimeNanoseconds"] + min(e["ts"] for e in st) * 1e3
    t1 = doc["baseTimeNanoseconds"] + max(e["ts"] + e["dur"] for e in st) * 1e3
    during = [d for t, d in agent["capture_log"] if t0 < t <= t1]
    r = collections.OrderedDict()
    noagent = [x for run in base for x in run]
    idles = [x for run in idle for x in run]
    r["no agent (median of %d steps, %d runs)" % (len(noagent), len(base))] = med(noagent)
    r["agent idle (median of %d steps, %d runs)" % (len(idles), len(idle))] = med(idles)
    r["run-to-run spread of no-agent medians"] = max(med(x) for x in base) - min(med(x) for x in base)
    r["agent idle, before any burst"] = med(agent["idle"])
    r["during agent capture (%d steps)" % len(during)] = med(during) if during else float("nan")
    r["during torch.profiler CUDA-only (%d steps)" % len(agent["torch"])] = med(agent["torch"])
    r["after the agent's bursts"] = med(agent["after"])
    r["after torch.profiler"] = med(agent["after_torch"])
    for k, v in r.items():
        print("  %-50s %.4f ms" % (k, v))
    idle_ratio = med(idles) / med(noagent)
    cap_ratio = (med(during) / med(agent["idle"])) if during else float("nan")
    torch_ratio = med(agent["torch"]) / med(agent["idle"])
    after_ratio = med(agent["after"]) / med(agent["idle"])
    print("  ratio idle/no-agent %.4f; capture/idle %.4f; torch.profiler/idle %.4f; "
          "after-burst/idle %.4f" % (idle_ratio, cap_ratio, torch_ratio, after_ratio))
    errors = []
    if not during:
        errors.append("no step of the capture log fell inside the 200-iteration window")
    return verdict(errors, "overhead figures measured")


def latency(trace, req_ns, done_ns):
    doc = load(trace)
    base = doc["baseTimeNanoseconds"]
    k = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    end = [e for e in doc["traceEvents"] if e.get("name") == "Record Window End"]
    first = base + min(e["ts"] for e in k) * 1e3 if k else None
    wend = base + end[0]["ts"] * 1e3 if end else None
    req_ns, done_ns = int(req_ns), int(done_ns)
    errors = []
    if first is None or wend is None:
        errors.append("no kernel or no window end in the trace")
    else:
        print("  request -> first captured kernel: %.1f ms" % ((first - req_ns) / 1e6))
        print("  window end -> trace downloaded by gprofctl: %.1f ms" % ((done_ns - wend) / 1e6))
    return verdict(errors, "latency measured")


if __name__ == "__main__":
    cmd = sys.argv[1]
    sys.exit({"workload": workload, "compare": compare, "overhead": overhead,
              "latency": latency}[cmd](*sys.argv[2:]))
