#!/usr/bin/env python3
"""The GPU projection of NVTX ranges (gpu_user_annotation), and what a burst
keeps at its edges, under record sequences built to break them (issue 29),
deterministic: projection-app
drives the agent's real gpu.c, gpu_events.c and writer.c with the stand-in
libcupti and writes one trace per scenario (see projection-app.c).

usage: test-projection.py PROJECTION_APP VALIDATE_TRACE

What must hold, per trace: it validates (validate_trace.py: X events nest
on every row; an API call's External id names a range around it; a GPU
span's nesting mirrors its ranges'), and
  shared-ids, stuck-id: CUPTI gave one id to calls in several ranges, so
    no kernel is tied to a range or a launch (no External id, no flow, no
    gpu_user_annotation), every kernel is still there, each API call
    carries its own range's External id, and the trace (a gprof_note) and
    the agent log say why;
  two-threads: the spans of "a" and "b" (two threads, one stream,
    interleaved) are left out, saying so; "outer" and "inner" keep theirs;
  window-edge: GPU work with no traced launch and no traced call after the
    window to bound it is left out, saying so: every kernel has its launch;
  window-start: so is the previous burst's, with no call recorded before
    the window;
  stuck-tail: where CUPTI numbered nothing, the end of the burst waits for
    the window's own GPU work, not the previous burst's, to count it.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

APP, VALIDATOR = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(VALIDATOR))
from validate_trace import validate  # noqa: E402
import runner  # noqa: E402


def burst(d):
    env = dict(os.environ, GPROF_AGENT_LOG=os.path.join(d, "agent.log"),
               GPROF_SOCKET=os.path.join(d, "none.sock"))
    p = subprocess.run([APP, d], env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.stdout, p.stderr)
    log = open(os.path.join(d, "agent.log")).read()
    return log


def load(d, name):
    path = os.path.join(d, name + ".pt.trace.json.gz")
    summary, errs = validate(path)
    assert not errs, "%s: %s" % (name, errs)
    return json.load(gzip.open(path, "rt"))["traceEvents"]


def notes(ev):
    return [e["args"]["note"] for e in ev if e.get("ph") == "M" and e["name"] == "gprof_note"]


def check_shared(ev, name):
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert len(kernels) == 4, (name, len(kernels))
    assert not [k for k in kernels if "External id" in k["args"]], (name, kernels)
    assert not [e for e in ev if e.get("ph") in ("s", "f")], name + ": flows on a shared id"
    assert not [e for e in ev if e.get("cat") == "gpu_user_annotation"], \
        name + ": a GPU span from launches CUPTI did not tie to one range"
    ranges = {e["args"]["External id"]: e for e in ev if e.get("cat") == "user_annotation"}
    calls = [e for e in ev if e.get("cat") == "cuda_runtime"]
    assert len(calls) == 4 and len(ranges) == 4, (name, len(calls), len(ranges))
    assert sorted(c["args"]["External id"] for c in calls) == sorted(ranges), \
        name + ": API calls not each in their own range"
    assert [n for n in notes(ev) if "4 GPU records not tied" in n], (name, notes(ev))


def test_shared_ids(d):
    """Launch ids N, M, N, M in four ranges: no crossing spans (today's code
    gave two 'it' spans crossing on stream 7), nothing tied, said why."""
    log = burst(d)
    check_shared(load(d, "shared-ids"), "shared-ids")
    assert "trace shared-ids: 4 GPU records not tied to a launch" in log, log[-2000:]


def test_stuck_id(d):
    """Every launch numbered N: the first range no longer takes every kernel
    and every API call."""
    log = burst(d)
    check_shared(load(d, "stuck-id"), "stuck-id")
    assert "trace stuck-id: 4 GPU records not tied to a launch" in log, log[-2000:]


def test_two_threads(d):
    """Sound ids, two threads' ranges interleaved on one stream: their spans
    are left out (saying so), the nested pair on the other stream kept."""
    log = burst(d)
    ev = load(d, "two-threads")
    spans = sorted((e["name"], e["tid"]) for e in ev if e.get("cat") == "gpu_user_annotation")
    assert spans == [("inner", 8), ("outer", 8)], spans
    assert len([e for e in ev if e.get("ph") == "f"]) == 6, "a launch lost its flow"
    assert [n for n in notes(ev) if "GPU spans of 2 NVTX ranges left out on 1 stream(s)" in n], \
        notes(ev)
    assert "trace two-threads: GPU spans of 2 NVTX ranges left out" in log, log[-2000:]


def test_window_edge(d):
    """Two kernels launched while the kinds went off, no call recorded after
    the window to bound them: left out (they were kept as the window's,
    kernels 6 for 4 launches), saying so."""
    log = burst(d)
    ev = load(d, "window-edge")
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    calls = [e for e in ev if e.get("cat") == "cuda_runtime"]
    flows = [e for e in ev if e.get("ph") == "f"]
    assert len(kernels) == len(calls) == len(flows) == 4, (len(kernels), len(calls), len(flows))
    assert "trace window-edge: 2 GPU records without a traced launch left out" in log, log[-2000:]


def test_window_start(d):
    """No call recorded before the window (it opened at once), two kernels
    of the previous burst's in the buffers: left out (they were kept as the
    window's, 6 kernels for 4 launches), saying so."""
    log = burst(d)
    ev = load(d, "window-start")
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    calls = [e for e in ev if e.get("cat") == "cuda_runtime"]
    assert len(kernels) == len(calls) == 4, (len(kernels), len(calls))
    assert "trace window-start: 2 GPU records without a traced launch left out" in log, \
        log[-2000:]


def test_stuck_tail(d):
    """CUPTI numbering nothing (records counted, not matched), the previous
    burst's kernels in the buffers and the window's last still running: the
    end waits for the window's own (it stopped at once, as many GPU records
    as launches, and the trace held 15 kernels for 20 launches)."""
    log = burst(d)
    ev = load(d, "stuck-tail")
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    calls = [e for e in ev if e.get("cat") == "cuda_runtime"]
    assert len(calls) == 20 and len(kernels) == 20, (len(calls), len(kernels))
    assert "trace stuck-tail: 19 of 20 API records repeat a correlation id" in log, log[-2000:]


def main():
    return runner.run([test_shared_ids, test_stuck_id, test_two_threads, test_window_edge,
                       test_window_start, test_stuck_tail], "gprof-projection-")


if __name__ == "__main__":
    sys.exit(main())
