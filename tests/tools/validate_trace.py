#!/usr/bin/env python3
"""validate_trace.py: checks a trace file against shared/TRACE_FORMAT.md's
rules (the ones HTA, Perfetto, TensorBoard and chrome://tracing depend
on) and prints a JSON summary. Exit 0 when every rule holds, 1 with one
line per broken rule otherwise, 2 when the file cannot be read at all.

usage: validate_trace.py FILE [--steps N] [--rank R] [--world W]
                              [--min-kernels N] [--expect-range NAME]...

Used by the agent's CI test (tests/integration/test-agent.py) and by the
GPU checks (tests/gpu/run.sh); importable (validate(path) -> (summary,
errors)) for scripts that compare traces.
"""
import argparse
import collections
import gzip
import json
import re
import sys

HEAD_KEYS = ["schemaVersion", "deviceProperties"]
TAIL_KEYS = ["displayTimeUnit", "baseTimeNanoseconds", "traceEvents", "traceName"]
DEVICE_PROPS = ["id", "name", "totalGlobalMem", "computeMajor", "computeMinor",
                "maxThreadsPerBlock", "maxThreadsPerMultiprocessor", "regsPerBlock",
                "warpSize", "sharedMemPerBlock", "numSms", "regsPerMultiprocessor",
                "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor"]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
NAME_RE = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$")
TS_RE = re.compile(rb'"(ts|dur)":\s*(-?[0-9.eE+-]+)')


def read(path):
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        d = __import__("zlib").decompressobj(16 + 15)
        text = d.decompress(raw)
        members = 1
        if d.unused_data:
            members += 1
        return text, members
    return raw, 1


def check_external_ids(ev):
    """What ties events to NVTX ranges by External id must agree with the
    ranges themselves (a wrong tie puts GPU time in the wrong range, and
    report sums it twice): an API call's External id, where it names a
    user_annotation range, names one around the call's start on its thread; a
    gpu_user_annotation names a range of the same name; where one GPU span
    holds another on a stream, the outer's range holds the inner's on the
    CPU (same thread); GPU work with an External id lies inside that
    range's span on its stream, where the span is written."""
    err = []
    ranges = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and \
                "External id" in e.get("args", {}):
            ranges[e["args"]["External id"]] = e
    eps = 1e-3

    def inside(a, b):  # a within b
        return b["ts"] - eps <= a["ts"] and a["ts"] + a["dur"] <= b["ts"] + b["dur"] + eps

    spans = collections.defaultdict(list)
    for e in ev:
        if e.get("ph") != "X":
            continue
        x = e.get("args", {}).get("External id")
        cat = e.get("cat")
        if cat in ("cuda_runtime", "cuda_driver") and x in ranges:
            r = ranges[x]
            # by its start, as the agent ties it (the call's end may pass a
            # start/end range ended on another thread, or CUPTI's clock)
            if r["tid"] != e["tid"] or not r["ts"] - eps <= e["ts"] <= r["ts"] + r["dur"] + eps:
                err.append("%s %s at %.3f: External id %s names range %r [%.3f, %.3f] on tid %s, "
                           "not around it" % (cat, e["name"], e["ts"], x, r["name"], r["ts"],
                                              r["ts"] + r["dur"], r["tid"]))
        elif cat == "gpu_user_annotation":
            if x not in ranges or ranges[x]["name"] != e["name"]:
                err.append("gpu_user_annotation %r: External id %s names no range of that name" %
                           (e["name"], x))
            else:
                spans[(e["pid"], e["tid"])].append(e)
    for key, xs in spans.items():
        xs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in xs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + eps:
                stack.pop()
            if stack and inside(e, stack[-1]):
                outer, inner = ranges[stack[-1]["args"]["External id"]], \
                    ranges[e["args"]["External id"]]
                if outer["tid"] != inner["tid"] or not inside(inner, outer):
                    err.append("on pid %s tid %s, GPU span %r holds %r, whose range is not "
                               "inside its own" % (key[0], key[1], stack[-1]["name"], e["name"]))
            stack.append(e)
    by_x = {(s["pid"], s["tid"], s["args"]["External id"]): s for v in spans.values() for s in v}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            s = by_x.get((e["pid"], e["tid"], e.get("args", {}).get("External id")))
            if s is not None and not inside(e, s):
                err.append("%s %s at %.3f: outside the GPU span of its range %r" % (
                    e["cat"], e["name"], e["ts"], s["name"]))
    return err[:5]


def validate(path, steps=None, rank=None, world=None, min_kernels=0, ranges=()):
    err = []
    text, members = read(path)
    if members != 1:
        err.append("gzip: more than one member")
    try:
        doc = json.loads(text, object_pairs_hook=collections.OrderedDict)
    except ValueError as e:
        return None, ["not JSON: %s" % e]
    if not isinstance(doc, dict):
        return None, ["the top level is not an object"]
    keys = list(doc.keys())
    if keys[:2] != HEAD_KEYS:
        err.append("the file must start with %s, not %s" % (HEAD_KEYS, keys[:2]))
    if keys[-4:] != TAIL_KEYS:
        err.append("the file must end with %s, not %s" % (TAIL_KEYS, keys[-4:]))
    if doc.get("schemaVersion") != 1:
        err.append("schemaVersion is not 1")
    for d in doc.get("deviceProperties", []):
        missing = [k for k in DEVICE_PROPS if k not in d]
        if missing:
            err.append("deviceProperties[%s] lacks %s" % (d.get("id"), missing))
    head = text[:text.find(b'"traceEvents"')]
    m = re.search(rb'"rank":\s+(\d+)', head)
    if "distributedInfo" in doc:
        if not m:
            err.append('distributedInfo: HTA needs "rank": with a space after the colon')
        elif rank is not None and int(m.group(1)) != rank:
            err.append("rank is %s, expected %d" % (m.group(1).decode(), rank))
        if world is not None and doc["distributedInfo"].get("world_size") != world:
            err.append("world_size is %s, expected %d" % (
                doc["distributedInfo"].get("world_size"), world))
    elif rank is not None:
        err.append("no distributedInfo")
    base = doc.get("baseTimeNanoseconds")
    if not isinstance(base, int) or base % (7889238 * 10**9) != 0:
        err.append("baseTimeNanoseconds %r is not a multiple of 7,889,238 s" % base)
    tn = str(doc.get("traceName", "")).rsplit("/", 1)[-1]
    if not NAME_RE.match(tn):
        err.append("traceName %r does not match TensorBoard's <name>[.<n>].pt.trace.json[.gz]" % tn)
    for mt in TS_RE.finditer(text):
        v = mt.group(2)
        if not re.fullmatch(rb"\d+\.\d{3}", v) and v != b"0":
            err.append("%s %s is not microseconds with exactly 3 decimals" % (
                mt.group(1).decode(), v.decode()))
            break

    ev = doc.get("traceEvents", [])
    cats = collections.Counter()
    rows = collections.defaultdict(list)
    flows = collections.defaultdict(dict)
    names = collections.Counter()
    step_names = []
    kernels = collections.Counter()
    for i, e in enumerate(ev):
        if "name" not in e:
            err.append("event %d has no name" % i)
            continue
        ph = e.get("ph")
        if ph != "M" and "ts" not in e:
            err.append("event %d (%s) has no ts" % (i, e["name"]))
        cat = e.get("cat", "")
        cats[cat] += 1
        if ph == "X":
            if "dur" not in e:
                err.append("X event %d (%s) has no dur" % (i, e["name"]))
                continue
            if e["ts"] < 0 or e["dur"] < 0:
                err.append("event %s has a negative time" % e["name"])
            rows[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
            names[(cat, e["name"])] += 1
            if str(e["name"]).startswith("ProfilerStep#"):
                step_names.append(e["name"])
            if cat in GPU_CATS:
                a = e.get("args", {})
                if a.get("device") != e["pid"]:
                    err.append("%s %s: args.device != pid" % (cat, e["name"]))
                if not isinstance(a.get("stream"), int) or a["stream"] < 0:
                    err.append("%s %s: args.stream must be >= 0" % (cat, e["name"]))
                if "correlation" not in a:
                    err.append("%s %s: no args.correlation" % (cat, e["name"]))
                if e["dur"] <= 0 and cat == "kernel":
                    err.append("kernel %s has zero duration" % e["name"])
                if cat == "kernel":
                    kernels[e["name"]] += 1
            if cat == "cuda_runtime" and "stream" in e.get("args", {}):
                err.append("cuda_runtime %s carries a stream arg" % e["name"])
        elif ph in ("s", "f"):
            # a flow's two ends share cat, name and id (Perfetto pairs them so)
            flows[(e.get("cat"), e.get("id"))][ph] = e
    # nesting: X events on one (pid, tid) must nest (Perfetto drops overlaps)
    for key, xs in rows.items():
        xs.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for s, t, n in xs:
            while stack and stack[-1][1] <= s + 1e-3:
                stack.pop()
            if stack and t > stack[-1][1] + 1e-3:
                err.append("on pid %s tid %s, %r [%.3f, %.3f] overlaps %r [%.3f, %.3f]" % (
                    key[0], key[1], n, s, t, stack[-1][2], stack[-1][0], stack[-1][1]))
                break
            stack.append((s, t, n))
    err += check_external_ids(ev)
    unpaired = [i for i, f in flows.items() if set(f) != {"s", "f"} or
                f["s"].get("name") != f["f"].get("name")]
    if unpaired:
        err.append("%d flows lack a start or an end (e.g. id %s)" % (len(unpaired), unpaired[0]))
    if steps is not None and len(step_names) != steps:
        err.append("%d ProfilerStep# events, expected %d" % (len(step_names), steps))
    if len(set(step_names)) != len(step_names):
        err.append("ProfilerStep# names repeat")
    if sum(kernels.values()) < min_kernels:
        err.append("%d kernels, expected at least %d" % (sum(kernels.values()), min_kernels))
    for r in ranges:
        if names[("user_annotation", r)] == 0:
            err.append("no user_annotation range named %r" % r)
    last = ev[-1] if ev else {}
    if last.get("name") != "Record Window End":
        err.append('the last event is not "Record Window End"')
    summary = collections.OrderedDict([
        ("file", path),
        ("trace_id", doc.get("trace_id")),
        ("rank", int(m.group(1)) if m else None),
        ("events", len(ev)),
        ("categories", dict(cats.most_common())),
        ("profiler_steps", step_names),
        ("kernels", sum(kernels.values())),
        ("kernel_names", dict(kernels.most_common())),
        ("flows", len(flows)),
        ("dropped", doc.get("gprof_dropped_records")),
        ("cut", doc.get("gprof_trace_cut")),
    ])
    return summary, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--min-kernels", type=int, default=0)
    ap.add_argument("--expect-range", action="append", default=[])
    ap.add_argument("--quiet", action="store_true", help="print only the errors")
    a = ap.parse_args()
    try:
        summary, err = validate(a.file, a.steps, a.rank, a.world, a.min_kernels, a.expect_range)
    except OSError as e:
        print("validate_trace: %s" % e, file=sys.stderr)
        return 2
    if summary is not None and not a.quiet:
        print(json.dumps(summary, indent=1))
    for e in err:
        print("INVALID: %s" % e, file=sys.stderr)
    return 1 if err else 0


if __name__ == "__main__":
    sys.exit(main())
