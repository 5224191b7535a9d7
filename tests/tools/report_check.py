"""report_check: what the report tests share (issue 37).

ranges_reference(events): each CPU range name's GPU work computed here,
the plain way, from a trace's events, to hold gprofctl report's ranges to:
a GPU record (kernel, copy, set) belongs to a range when the CUDA runtime
or driver call its correlation id names started inside that range on the
range's thread (pid, tid); each record counts once per name; the span is,
per instance not inside another of its name on its thread, the first
start to the last end of its records. A correlation id on two calls is
one launch only when the later call lies inside the earlier on its thread
(a driver call under its runtime call); otherwise its records count
nowhere.

validate(text): the JSON of `gprofctl --json report`, parsed with its
number literals kept apart (an integer literal is an int, any other a
Decimal), checked against docs/report.schema.json with "integer" meaning an
integer literal (so 1e+15 or 3.0 where the schema says integer fails), and
returned. When jsonschema cannot be imported it only parses, and
SCHEMA_MISSING tells the test to end with 77 (SKIP) rather than pass.
"""
import decimal
import json
import os

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                      "report.schema.json")
try:
    import jsonschema
    SCHEMA_MISSING = False
except ImportError:
    jsonschema = None
    SCHEMA_MISSING = True
validated = 0

GPU = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")
CALLS = ("cuda_runtime", "cuda_driver", "Runtime", "Driver")


def is_range(e):
    if e.get("ph") != "X":
        return False
    if e.get("cat") == "user_annotation":
        return not e["name"].startswith("ProfilerStep#")
    return e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")


def ranges_reference(events):
    """{name: (gpu_us, ops, span_us)} for every CPU range name."""
    calls = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in CALLS and "correlation" in e.get("args", {}):
            calls.setdefault(e["args"]["correlation"], []).append(e)
    launch = {}  # correlation -> the one call that launched it
    for corr, cs in calls.items():
        cs.sort(key=lambda c: c["ts"])
        first = cs[0]
        if all(c["pid"] == first["pid"] and c["tid"] == first["tid"] and
               c["ts"] <= first["ts"] + first["dur"] for c in cs[1:]):
            launch[corr] = first
    recs = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU]
    by_call = {}
    for i, g in enumerate(recs):
        c = launch.get(g.get("args", {}).get("correlation"))
        if c is not None:
            by_call.setdefault(id(c), []).append(i)
    ranges = [e for e in events if is_range(e)]
    out = {}
    for r in ranges:
        a, b = r["ts"], r["ts"] + r["dur"]
        mine = set()
        for c in launch.values():
            if c["pid"] == r["pid"] and c["tid"] == r["tid"] and a <= c["ts"] < b:
                mine.update(by_call.get(id(c), []))
        outer = not any(o is not r and o["name"] == r["name"] and o["pid"] == r["pid"] and
                        o["tid"] == r["tid"] and o["ts"] <= a and b <= o["ts"] + o["dur"] and
                        (o["ts"], -o["dur"]) < (a, -r["dur"]) for o in ranges)
        ent = out.setdefault(r["name"], [set(), 0.0])
        ent[0] |= mine
        if outer and mine:
            ent[1] += max(recs[i]["ts"] + recs[i]["dur"] for i in mine) - \
                min(recs[i]["ts"] for i in mine)
    return {n: (sum(recs[i]["dur"] for i in s), len(s), span) for n, (s, span) in out.items()}


def _load_schema():
    with open(SCHEMA) as f:
        return json.load(f)


def validate(text):
    """The report's JSON, checked against the schema when it can be."""
    global validated
    doc = json.loads(text, parse_float=decimal.Decimal)
    if jsonschema is None:
        return doc
    checker = jsonschema.Draft7Validator.TYPE_CHECKER.redefine_many({
        "integer": lambda _, x: isinstance(x, int) and not isinstance(x, bool),
        "number": lambda _, x: isinstance(x, (int, decimal.Decimal)) and
        not isinstance(x, bool),
    })
    cls = jsonschema.validators.extend(jsonschema.Draft7Validator, type_checker=checker)
    cls(_load_schema()).validate(doc)
    validated += 1
    return doc


def plain(doc):
    """doc with its Decimals as floats, for arithmetic in the tests."""
    if isinstance(doc, dict):
        return {k: plain(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [plain(v) for v in doc]
    if isinstance(doc, decimal.Decimal):
        return float(doc)
    return doc
