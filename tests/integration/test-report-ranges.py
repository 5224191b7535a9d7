#!/usr/bin/env python3
"""The GPU time of ranges, by correlation (issue 37): gprofctl report gave
every range of an agent trace with PyTorch operators (nn.Module: GPT_0,
Optimizer.step#AdamW.step) a GPU time of 0.000, since it took it from
Kineto's gpu_user_annotation projections, which the agent does not write
for its scopes.

usage: test-report-ranges.py GPROFCTL FIXTURES

  constructed: an agent-shaped trace (user_annotation scopes, no
    projections) and torch.profiler's python_function module scopes, whose
    every answer is known by construction (the docstring of
    test_constructed has the arithmetic); also held to report_check's
    ranges_reference, computed here from the file;
  real: the H200 traces in tests/fixtures/traces (torch.profiler's,
    Kineto's, the agent's DDP ranks): every range equals ranges_reference,
    its span equals Kineto's own projections where the trace has them, and
    Optimizer.step#SGD.step's GPU time equals torch's key_averages
    cuda_total for it (tests/fixtures/traces/ops/h200-torch211-key-averages);
  agent-operators: a real agent's trace with module scopes (the agent,
    the stand-in CUPTI and torch, tests/fixtures/traces/agent-ops);
  unknown: GPU records with no correlation id at all: no figure (null,
    "-"), never 0.
Every --json output is validated against docs/report.schema.json.
"""
import gzip
import json
import os
import subprocess
import sys

GPROFCTL, FIXTURES = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import runner  # noqa: E402
import report_check  # noqa: E402


def report(*args):
    r = subprocess.run([GPROFCTL] + list(args), capture_output=True, text=True, timeout=60)
    doc = None
    if "--json" in args and r.returncode in (0, 1) and r.stdout:
        doc = report_check.plain(report_check.validate(r.stdout))
    return r.returncode, r.stdout, r.stderr, doc


def call(ts, corr, tid=10, dur=5, cat="cuda_runtime", name="cudaLaunchKernel"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 10, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def gpu(ts, dur, corr, stream=7, cat="kernel", name="k"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream}}


def scope(name, ts, dur, cat="user_annotation", tid=10):
    return {"ph": "X", "cat": cat, "name": name, "pid": 10, "tid": tid, "ts": ts, "dur": dur}


def constructed():
    return [
        scope("ProfilerStep#1", 0, 2000),
        scope("nn.Module: GPT_0", 0, 1000),
        scope("nn.Module: Block_0", 100, 400, cat="python_function"),
        scope("block", 100, 300),
        scope("block", 150, 150),
        scope("Optimizer.step#AdamW.step", 1200, 300),
        call(110, 1), gpu(1000, 100, 1),
        call(160, 2), gpu(1100, 30, 2), gpu(1050, 20, 2, stream=8),
        call(600, 3, dur=20), call(605, 3, cat="cuda_driver", name="cuLaunchKernel"),
        gpu(1200, 40, 3),
        call(1300, 4, name="cudaMemcpyAsync"),
        dict(gpu(1400, 50, 4, cat="gpu_memcpy", name="Memcpy HtoD (Pinned -> Device)"),
             args={"correlation": 4, "stream": 7, "bytes": 10 ** 15}),
        call(1600, 5), gpu(1700, 10, 5),
        call(200, 6, tid=20), gpu(1500, 100, 6),
        gpu(1800, 5, 99),
        call(700, 7), call(710, 7, tid=20), gpu(1900, 10, 7),
    ]


def write(d, name, events):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
    return path


def check_reference(doc, events, label):
    """Every range of the report equals what report_check computes."""
    want = report_check.ranges_reference(events)
    r = doc["ranks"][0]
    assert {x["name"] for x in r["ranges"]} == set(want), (label, r["ranges"], want)
    for x in r["ranges"]:
        gpu_us, ops, span = want[x["name"]]
        assert x["gpu_ops"] == ops, (label, x, want[x["name"]])
        # (5 ns: times near 2^42 us are exact to 1 ns, and sums differ by order)
        assert abs(x["gpu_us"] - gpu_us) < 5e-3 and abs(x["gpu_span_us"] - span) < 5e-3, \
            (label, x, want[x["name"]])


def test_constructed(d):
    """nn.Module: GPT_0 [0, 1000) holds launch 1 (a 100 us kernel), 2 (a
    graph: 30 + 20 us on two streams) and 3 (a runtime call with a driver
    call of the same id inside: one 40 us kernel, counted once): 190 us, 4
    operations, span 1000..1240 = 240 us. Launch 6 runs meanwhile on
    another thread: not GPT_0's. Launch 7's id is on two threads' calls:
    nobody's. Block_0 (python_function, torch.profiler's) and the "block"
    holding another "block" hold launches 1 and 2: 150 us, 3 ops, span
    1000..1130 = 130 (the inner block adds nothing). AdamW.step holds the
    50 us copy of launch 4. Of 9 GPU records, 2 have no one call: id 99
    (none) and id 7."""
    events = constructed()
    path = write(d, "agent.pt.trace.json", events)
    code, out, err, doc = report("--json", "report", path)
    assert code == 0, (code, err)
    r = doc["ranks"][0]
    got = {x["name"]: (x["gpu_us"], x["gpu_ops"], x["gpu_span_us"], x["count"])
           for x in r["ranges"]}
    assert got == {"nn.Module: GPT_0": (100 + 30 + 20 + 40, 4, 1240 - 1000, 1),
                   "nn.Module: Block_0": (100 + 30 + 20, 3, 1130 - 1000, 1),
                   "block": (100 + 30 + 20, 3, 1130 - 1000, 2),
                   "Optimizer.step#AdamW.step": (50, 1, 50, 1)}, got
    assert (r["gpu_events"], r["gpu_records_unlinked"]) == (9, 2), r
    check_reference(doc, events, "constructed")
    # integers as integer literals, past 2^31 and cJSON's 15 digits too
    # (cJSON wrote 1e+15)
    assert '"bytes":\t1000000000000000' in out and r["copies"][0]["bytes"] == 10 ** 15, \
        r["copies"]
    code, text, err, _ = report("report", path)
    assert code == 0, err
    assert "     0.190      0.240       4       1 nn.Module: GPT_0" in text, text
    assert "2 of the trace's 9 GPU records name no call" in text, text


def test_real(d):
    """The H200 traces: every range as computed here; spans as Kineto
    projected them; SGD.step's GPU time as torch's key_averages has it."""
    files = [os.path.join(FIXTURES, "bottlenecks", "h200-torch-profiler.pt.trace.json.gz"),
             os.path.join(FIXTURES, "ops", "h200-torch211-keyavg.pt.trace.json.gz")] + \
        sorted(os.path.join(FIXTURES, "ddp", f) for f in os.listdir(os.path.join(FIXTURES, "ddp")))
    for path in files:
        events = json.load(gzip.open(path, "rt"))["traceEvents"]
        code, out, err, doc = report("--json", "report", "--top", "1000", path)
        assert code == 0, (path, code, err)
        r = doc["ranks"][0]
        assert r["ranges"] and any(x["gpu_ops"] > 0 for x in r["ranges"]), (path, r["ranges"])
        check_reference(doc, events, path)
        for x in r["ranges"]:
            proj = [e for e in events if e.get("cat") == "gpu_user_annotation" and
                    e["name"] == x["name"]]
            if proj:  # Kineto's and the agent's own projections: one per instance
                assert abs(sum(e["dur"] for e in proj) - x["gpu_span_us"]) < 0.01 * len(proj), \
                    (path, x, sum(e["dur"] for e in proj))
    keyavg = json.load(gzip.open(os.path.join(FIXTURES, "ops",
                                              "h200-torch211-key-averages.json.gz"), "rt"))
    torch_total = [x["cuda_total"] for x in keyavg["by_name"]
                   if x["name"] == "Optimizer.step#SGD.step" and x["cpu_total"] > 0][0]
    code, out, err, doc = report("--json", "report", files[1])
    sgd = [x for x in doc["ranks"][0]["ranges"] if x["name"] == "Optimizer.step#SGD.step"][0]
    assert abs(sgd["gpu_us"] - torch_total) < 1e-3 and torch_total > 70, (sgd, torch_total)


def test_agent_operators(d):
    """The issue's case on a real agent's trace: libgprof_agent with the
    stand-in CUPTI and the stand-in torch (test-torch-ops.py's modules
    run, tests/fixtures/traces/agent-ops): module scopes as the agent
    writes them (user_annotation, no projections), where gprofctl gave
    every range 0. The stand-in launches one 2 us kernel per Linear and
    ReLU forward, three steps: 6 us and 3 operations each; Sequential_0
    holds all 9; the optimizer step of the two steps it shows, 4
    kernels, 8 us."""
    path = os.path.join(FIXTURES, "agent-ops", "agent-fake-cupti-ops.pt.trace.json.gz")
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    assert not [e for e in events if e.get("cat") == "gpu_user_annotation"]
    code, out, err, doc = report("--json", "report", path)
    assert code == 0, err
    got = {x["name"]: (x["gpu_us"], x["gpu_ops"]) for x in doc["ranks"][0]["ranges"]}
    assert got == {"nn.Module: Sequential_0": (18, 9), "nn.Module: Linear_0": (6, 3),
                   "nn.Module: ReLU_0": (6, 3), "nn.Module: Linear_1": (6, 3),
                   "Optimizer.step#SGD.step": (8, 4)}, got
    check_reference(doc, events, path)


def test_unknown(d):
    """GPU records none of which names a call: the ranges' GPU time is not
    known, so it is null and "-", with the reason; never 0."""
    events = [scope("forward", 0, 100), call(10, 1),
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 50}]
    path = write(d, "old.json", events)
    code, out, err, doc = report("--json", "report", path)
    assert code == 0, err
    assert doc["ranks"][0]["ranges"] == [{"name": "forward", "count": 1, "cpu_us": 100,
                                          "gpu_us": None, "gpu_span_us": None,
                                          "gpu_ops": None}], doc
    code, text, err, _ = report("report", path)
    assert "     0.100          -          -       -       1 forward" in text, text
    assert "no GPU time: none of the trace's 1 GPU records names the call" in text, text


if __name__ == "__main__":
    code = runner.run([test_constructed, test_real, test_agent_operators, test_unknown],
                      "gprof-report-ranges-")
    if code == 0 and report_check.SCHEMA_MISSING:
        print("SKIP: python3 jsonschema is missing, so the JSON was not validated "
              "(apt-get install python3-jsonschema)")
        code = 77
    sys.exit(code)
