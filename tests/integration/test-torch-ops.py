#!/usr/bin/env python3
"""PyTorch operators on the agent path (issue 27), with no torch: a real
gprofd and gprofctl, and a real python process that loads the agent (as
CUDA's injection would), the stand-in CUPTI (tests/integration/fake_cupti.c) and the
stand-in torch (tests/fixtures/torch_ops: a Kineto-shaped CPU profiler,
operators that launch kernels through the stand-in CUPTI, backward on
autograd's own thread), with GPROF_TORCH_STEPS=1 and python/ on its path
as `gprofctl launch` sets them. It steps freely before, during and after
a 3-iteration window.

usage: test-torch-ops.py GPROFD GPROFCTL AGENT FAKE_CUPTI VALIDATE_TRACE PYTHON_DIR TORCH_DIR

What must hold:
  operators: the trace validates; it holds exactly the window's operators
    (16 per step, 3 steps: nothing from before or after), with their args
    as torch wrote them (Input Dims, Sequence number, Fwd thread id) and
    their fwdbwd flows; every cudaLaunchKernel lies inside an operator on
    the same thread (pid, tid), innermost aten::addmm/aten::mm/..., and
    the all-reduce's cuLaunchKernelEx (a driver-API launch, as NCCL's)
    inside record_param_comms; every kernel keeps its launch and flow, so
    HTA's rule (tests/tools/hta_rule.py) keeps every kernel;
  old-format: the same from a file with absolute microseconds and no
    baseTimeNanoseconds (torch before 2.0);
  modules: with modules asked, nn.Module: <Class>_<n> scopes around the
    modules' operators; request-options: the same asked by gprofctl trace's
    flags rather than the environment;
  hostile: a symlink, a FIFO, garbage, a cut file, a file over its cap, a
    failing export, malformed events: the trace is still delivered and
    valid, the note says why, the job carries on, and nothing is left in
    the trace directory;
  not-asked: a plain request from a job that set nothing takes them from
    the observer only, which the stand-in cannot have: none, no profiler
    started, the note says how; --operators alone asks for them;
  off: GPROF_TORCH_OPS=off records no operators and says nothing;
  old-torch: a torch before 2.0 (no global optimizer step hooks; the
    stand-in with FAKE_TORCH_OLD=1): the helper says so once on stderr
    (what is missing, what works, gprof_agent.step()); a job that marks its
    steps with gprof_agent.step() registers and is traced by iterations,
    operators (--record-shapes) recorded as with a newer torch (kineto-cpu here, the note
    naming why not the observer); one with no GPU that does not mark them
    is told the same, once;
  old-helper: a helper that does not declare it knows default windows is
    offered none (a plain request: no operators, no note), asked ones as
    before;
  exit-mid-window: a job that exits inside a plain window leaves no
    operator directory, with or without the helper;
  memory: --profile-memory alone: Kineto's [memory] events from the
    stand-in's allocator history (tests/fixtures/torch_ops/torch/cuda),
    only inside the window, on the stepping thread, 8 a step with the
    stand-in's known sizes (blocks of 512 B), their Bytes summing to 0
    and their running totals from the window's start (38912 B of weights
    allocated, 2 MiB reserved, 4 MiB more while the optimizer's buffer
    lives); no note that --profile-memory is left out; gprofctl report
    shows the memory section with the peak; a torch without CUDA says so
    in the note and records none; a window that did not ask records none;
    a history the job records itself is used, filtered to the window, and
    left on.
The mechanism here is kineto-cpu (the stand-in is torch.profiler's shape);
the default, the observer, is tested with the real torch in
test-torch-observer.py, and falls back here, saying so.
"""
import glob
import gzip
import json
import os
import subprocess
import sys

GPROFD, GPROFCTL, AGENT, FAKE, VALIDATOR, PYDIR, TORCHDIR = sys.argv[1:8]
sys.path.insert(0, os.path.dirname(VALIDATOR))
from validate_trace import validate  # noqa: E402
import daemonlog  # noqa: E402
import hta_rule  # noqa: E402
import runner  # noqa: E402

TIMEOUT = 30
# 2 x (linear, t, addmm), relu, clamp_min; 2 x 3 backward, record_param_comms; 2 x add_
OPS_PER_STEP = 17
# 2 addmm, clamp_min, 2 mm, 2 add_ (cudaLaunchKernel); the all-reduce (cuLaunchKernelEx)
LAUNCHES_PER_STEP = 8

PROGRAM = r"""
import ctypes, os, select, sys
ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()  # as cuInit does
import torch, torch.nn as nn
m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(m.parameters())
print("ready", flush=True)
n = 0
while not select.select([sys.stdin], [], [], 0)[0]:
    m([32, 64]); nn.backward(); opt.step(); n += 1
print("steps", n, flush=True)
"""


# a torch before 2.0: the steps marked by hand, as the helper's message says
PROGRAM_BY_HAND = PROGRAM.replace("opt.step(); n += 1", "opt.step(); gprof_agent.step(); n += 1") \
    .replace("import torch, torch.nn as nn", "import torch, torch.nn as nn, gprof_agent")
# ... and a job with no GPU (nothing loads the agent) that does not mark them
PROGRAM_CPU = PROGRAM.replace(
    'ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()  # as cuInit does\n',
    "")
assert PROGRAM != PROGRAM_BY_HAND and PROGRAM != PROGRAM_CPU


class Job:
    def __init__(self, d, sock, program=PROGRAM, **env):
        e = dict(os.environ, GPROF_SOCKET=sock, GPROF_JOB_ID="opsjob",
                 GPROF_AGENT_LOG=os.path.join(d, "agent.log"), GPROF_AGENT_TRACE_DIR=d,
                 CUDA_INJECTION64_PATH=AGENT, GPROF_CUPTI_PATH=FAKE, FAKE_CUPTI_PATH=FAKE,
                 GPROF_TORCH_STEPS="1", PYTHONPATH=PYDIR + ":" + TORCHDIR)
        e.update(runner.sanitizer_env(AGENT))
        e.update(env)
        self.p = subprocess.Popen([sys.executable, "-c", program], env=e, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        assert self.p.stdout.readline() == "ready\n", self.p.stderr.read()

    def finish(self):
        out, err = self.p.communicate("stop\n", timeout=TIMEOUT)
        return self.p.returncode, out, err


LAST = {}  # the last traced()'s gprofctl trace --json summary


def traced(d, iterations=3, validate_it=True, ctl_args=(), **env):
    """One job traced once: the trace's events, its notes, the job's exit
    (and gprofctl's summary in LAST["summary"])."""
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    job = None
    try:
        job = Job(d, dm.sock, **env)
        assert dm.wait("registered pid %d" % job.p.pid), dm.log()
        out = os.path.join(d, "out")
        r = subprocess.run([GPROFCTL, "--socket", dm.sock, "--json", "trace", "--job", "opsjob",
                            "--iterations", str(iterations), "--output-dir", out,
                            "--timeout", str(TIMEOUT)] + list(ctl_args),
                           capture_output=True, text=True,
                           timeout=TIMEOUT + 10)
        assert r.returncode == 0, (r.stdout, r.stderr, open(os.path.join(d, "agent.log")).read())
        LAST["summary"] = json.loads(r.stdout)
        rc, so, se = job.finish()
        job = None
        assert rc == 0 and se == "", (rc, se)
        assert int(so.split()[1]) > iterations, so  # steps after the window too
    finally:
        if job is not None:
            job.p.kill()
            job.p.wait()
        dm.stop()
    path = glob.glob(os.path.join(out, "*", "*.pt.trace.json.gz"))[0]
    summary, errs = validate(path, steps=iterations)
    if not validate_it:  # only what does not depend on sub-microsecond alignment
        errs = [e for e in errs if " overlaps " not in e]
    assert not errs, "trace invalid:\n  " + "\n  ".join(errs)
    ev = json.load(gzip.open(path, "rt"))["traceEvents"]
    notes = [e["args"]["note"] for e in ev if e.get("ph") == "M" and e["name"] == "gprof_note"]
    assert not glob.glob(os.path.join(d, "gprof-ops-*")), os.listdir(d)
    return ev, notes


def inside(a, b):
    """X event a lies within X event b (the trace's 3-decimal microseconds)."""
    return b["ts"] <= a["ts"] and a["ts"] + a["dur"] <= b["ts"] + b["dur"] + 1e-6


def check_ops(ev, iterations=3):
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    assert len(steps) == iterations, steps
    lo, hi = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    assert len(ops) == OPS_PER_STEP * iterations, (len(ops), sorted(set(o["name"] for o in ops)))
    assert all(lo <= o["ts"] and o["ts"] + o["dur"] <= hi for o in ops), "an op outside the window"
    pid = steps[0]["pid"]
    assert all(o["pid"] == pid for o in ops)
    by_tid = {}
    for o in ops:
        by_tid.setdefault(o["tid"], []).append(o)
    assert len(by_tid) == 2, "forward and autograd threads: %s" % list(by_tid)
    calls = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    assert len(calls) == LAUNCHES_PER_STEP * iterations, len(calls)
    for c in calls:
        around = [o for o in by_tid.get(c["tid"], []) if c["pid"] == o["pid"] and inside(c, o)]
        assert around, "launch %s outside every op of its thread" % c
        inner = min(around, key=lambda o: o["dur"])
        assert inner["name"] in ("aten::addmm", "aten::mm", "aten::clamp_min", "aten::add_",
                                 "record_param_comms"), inner
        assert (c["cat"] == "cuda_driver") == (inner["name"] == "record_param_comms"), (c, inner)
    # every kernel has its launch (a call with its correlation) and its flow
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    corr = {c["args"]["correlation"] for c in calls}
    flows = {(e["ph"], e["id"]) for e in ev if e.get("cat") == "ac2g"}
    assert kernels and all(k["args"]["correlation"] in corr for k in kernels)
    assert all(("s", k["args"]["correlation"]) in flows and ("f", k["args"]["correlation"]) in flows
               for k in kernels)
    # HTA keeps every one of them: each launch lies in a ProfilerStep
    assert not hta_rule.dropped(ev), hta_rule.dropped(ev)
    assert [k for k in kernels if k["name"].startswith("ncclDevKernel")]
    # args as torch wrote them; backward linked to forward
    addmm = [o for o in ops if o["name"] == "aten::addmm"]
    assert addmm[0]["args"]["Input Dims"] == [[128], [32, 64], [64, 128], [], []], addmm[0]
    assert addmm[0]["args"]["Input type"][3] == "Scalar"
    bwd = [o for o in ops if o["name"] == "AddmmBackward0"]
    fwd_seq = {o["args"]["Sequence number"] for o in ops if o["name"] == "aten::linear"}
    assert bwd and {b["args"]["Sequence number"] for b in bwd} <= fwd_seq, (bwd, fwd_seq)
    fwd_tid = {o["tid"] for o in ops if o["name"] == "aten::linear"}
    assert all(b["args"]["Fwd thread id"] in fwd_tid for b in bwd), bwd
    fb = [e for e in ev if e.get("cat") == "fwdbwd"]
    assert fb and {e["id"] for e in fb if e["ph"] == "s"} >= {e["id"] for e in fb
                                                              if e["ph"] == "f"}, fb
    return ops


def test_operators(d):
    # the stand-in torch has no cpp_extension: the kineto-cpu mechanism,
    # named (the default, observer, would fall back to it with a note)
    ev, notes = traced(d, GPROF_TORCH_OPTS="shapes", GPROF_TORCH_OPS="kineto-cpu")
    check_ops(ev)
    assert not notes, notes


def test_old_format(d):
    ev, notes = traced(d, GPROF_TORCH_OPTS="shapes", FAKE_TORCH_FORMAT="old")
    check_ops(ev)


def test_modules(d):
    ev, notes = traced(d, GPROF_TORCH_OPTS="shapes,modules,stack,flops")
    ops = check_ops(ev)
    mods = [e for e in ev if e.get("cat") == "user_annotation" and
            e["name"].startswith("nn.Module: ")]
    assert {m["name"] for m in mods} == {"nn.Module: Sequential_0", "nn.Module: Linear_0",
                                         "nn.Module: Linear_1", "nn.Module: ReLU_0"}, mods
    for o in (o for o in ops if o["name"] == "aten::addmm"):
        assert [m for m in mods if m["name"].startswith("nn.Module: Linear") and inside(o, m)], o
    assert [n for n in notes if "--with-stack, --with-flops asked for, not recorded" in n], notes


def test_request_options(d):
    """The options come with the request (gprofctl trace --record-shapes
    --with-modules --with-stack, as dyno gputrace sends them): shapes and
    module scopes recorded, the stack said not to be."""
    ev, notes = traced(d, ctl_args=("--record-shapes", "--with-modules", "--with-stack"))
    check_ops(ev)
    mods = {e["name"] for e in ev if e.get("cat") == "user_annotation" and
            e["name"].startswith("nn.Module: ")}
    assert "nn.Module: Linear_1" in mods, mods
    assert [n for n in notes if n.startswith("--with-stack asked for, not recorded")], notes


def test_legacy(d):
    """GPROF_TORCH_OPS=legacy: the autograd profiler without Kineto, its
    events converted by the helper: the stepping thread's operators of the
    window (10 a step: the others' OS threads are unknown, said in the
    note), on that thread's row. Its clock is matched to the wall clock
    through a marker scope (a microsecond or two), so launch nesting is not
    asserted here: the validator's other rules are."""
    ev, notes = traced(d, GPROF_TORCH_OPS="legacy", GPROF_TORCH_OPTS="shapes", validate_it=False)
    steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    # 8 forward and 2 add_ a step, and the Optimizer.step scopes that closed in the window
    assert len(ops) == 3 * (8 + 2) + 2, sorted(o["name"] for o in ops)
    assert {o["tid"] for o in ops} == {steps[0]["tid"] & ~0x40000000}, ops
    lo, hi = min(s["ts"] for s in steps), max(s["ts"] + s["dur"] for s in steps)
    assert all(lo <= o["ts"] and o["ts"] + o["dur"] <= hi for o in ops)
    assert [n for n in notes if "operators of other threads left out" in n], notes
    addmm = [o for o in ops if o["name"] == "aten::addmm"]
    assert addmm[0]["args"]["Input Dims"] == [[128], [32, 64], [64, 128], [], []], addmm[0]


HOSTILE = {
    "symlink": "cannot open",
    "fifo": "not a regular file",
    "garbage": "malformed",
    "cut": "malformed",
    "huge": "larger than its cap",
    "raise": "export failed (OSError: stand-in: export failed on purpose)",
}


def test_hostile(d):
    for mode, why in sorted(HOSTILE.items()):
        sub = os.path.join(d, mode)
        os.mkdir(sub)
        # huge: 3 MB against a cap of a quarter of a 8 MB budget
        ev, notes = traced(sub, ctl_args=("--operators",), FAKE_TORCH_EXPORT=mode,
                           **({"GPROF_AGENT_MAX_MB": "8"} if mode == "huge" else {}))
        assert not [e for e in ev if e.get("cat") == "cpu_op"], mode
        assert [n for n in notes if why in n], (mode, notes)
        kernels = [e for e in ev if e.get("cat") == "kernel"]
        assert mode == "huge" or len(kernels) == LAUNCHES_PER_STEP * 3, (mode, len(kernels))
    sub = os.path.join(d, "badevents")
    os.mkdir(sub)
    ev, notes = traced(sub, FAKE_TORCH_EXPORT="badevents", GPROF_TORCH_OPTS="shapes")
    check_ops(ev)
    assert [n for n in notes if "3 events of the PyTorch operator trace left out" in n], notes


def test_unhonoured_in_summary(d):
    """What the agent could not honour is named with why in the process's
    note in gprofctl trace's summary, not only in the trace file: the
    helper's own words (--with-stack, --with-flops: not on the agent path)
    and an activity this CUPTI refuses (sync, kind 38, refused by the
    stand-in as by a device without it)."""
    ev, notes = traced(d, ctl_args=("--record-shapes", "--with-stack", "--with-flops",
                                    "--activities", "kernel,memcpy,cuda_runtime,nvtx,sync"),
                       FAKE_CUPTI_REFUSE_KINDS="38")
    check_ops(ev)
    procs = [p for h in LAST["summary"]["hosts"] for p in h["processes"]]
    assert len(procs) == 1 and procs[0]["state"] == "delivered", LAST["summary"]
    note = procs[0].get("note", "")
    assert "--with-stack, --with-flops asked for, not recorded" in note, note
    assert "sync left out: CUPTI refused it" in note, note
    assert [n for n in notes if "--with-stack, --with-flops asked for" in n], notes


def test_not_asked(d):
    """A plain request from a job that set nothing takes operators by
    default from the observer alone: where it cannot be had (the stand-in
    has no cpp_extension) the window records none and starts no profiler
    (torch.profiler's CPU side would cost about its own price, and the
    job's own torch.profiler would lose the GPU for the rest of the
    process), and the note says how to get them; --operators alone asks for
    them (then through torch.profiler's CPU side)."""
    sub = os.path.join(d, "plain")
    os.mkdir(sub)
    ev, notes = traced(sub)
    assert not [e for e in ev if e.get("cat") == "cpu_op"], "operators recorded unasked"
    assert notes == ["PyTorch operators not recorded: the operator observer is not available "
                     "(this torch has no torch.utils.cpp_extension); gprofctl trace --operators "
                     "records them with torch.profiler's CPU side"], notes
    sub = os.path.join(d, "asked")
    os.mkdir(sub)
    ev, notes = traced(sub, ctl_args=("--operators",))
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    assert len(ops) == 3 * OPS_PER_STEP, (len(ops), notes)
    # the default mechanism, the observer, cannot be built for the stand-in
    assert [n for n in notes if "operator observer not available (this torch has no "
            "torch.utils.cpp_extension): recorded with kineto-cpu" in n], notes
    assert not [o for o in ops if "Input Dims" in o.get("args", {})], "shapes unasked"


def test_off(d):
    ev, notes = traced(d, GPROF_TORCH_OPS="off")
    assert not [e for e in ev if e.get("cat") == "cpu_op"]
    assert not notes, notes


MiB = 1 << 20
WEIGHTS = 4 * 64 * 128 + 512 + 4 * 128 * 10 + 512  # blocks live before the window
# one step's allocator events in order: (Bytes, Total Reserved after it)
STEP_MEMORY = [(16384, 2 * MiB), (1536, 2 * MiB), (-1536, 2 * MiB), (-16384, 2 * MiB),
               (3 * MiB, 6 * MiB), (1024, 6 * MiB), (-1024, 6 * MiB), (-3 * MiB, 6 * MiB)]


def memory_events(ev):
    return [e for e in ev if e.get("name") == "[memory]"]


def test_memory(d):
    """--profile-memory on the agent path (issue 27): the window's [memory]
    events, as torch.profiler(profile_memory=True) writes them."""
    calls = os.path.join(d, "calls.json")
    ev, notes = traced(d, ctl_args=("--profile-memory",), FAKE_TORCH_CALLS=calls)
    assert not [n for n in notes if "--profile-memory" in n or "[memory]" in n], notes
    # the history started without stacks for the window, stopped after it
    with open(calls) as f:
        made = json.load(f)
    assert [(c["enabled"], c["context"], c["clear_history"]) for c in made] == [
        ("all", None, True), (None, "all", False)], made
    assert made[0]["max_entries"] == 100000, made  # the agent's default
    steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    lo, hi = steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"]
    mem = memory_events(ev)
    # the window's 3 steps, in the trace in the allocator's order
    assert [(e["args"]["Bytes"], e["args"]["Total Reserved"]) for e in mem] == STEP_MEMORY * 3, \
        [(e["args"]["Bytes"], e["args"]["Total Reserved"]) for e in mem]
    assert all(lo <= e["ts"] <= hi for e in mem), "a [memory] event outside the window"
    assert all(e["ts"] <= f["ts"] for e, f in zip(mem, mem[1:])), "out of order"
    tid = steps[0]["tid"] & ~0x40000000
    for e in mem:
        assert (e["ph"], e["cat"], e["s"], e["pid"], e["tid"]) == (
            "i", "cpu_instant_event", "t", steps[0]["pid"], tid), e
        assert set(e["args"]) == {"Total Reserved", "Total Allocated", "Bytes", "Device Id",
                                  "Device Type", "Addr"}, e["args"]
        assert (e["args"]["Device Type"], e["args"]["Device Id"]) == (1, 0), e["args"]
        assert all(isinstance(v, int) for v in e["args"].values()), e["args"]
    total = WEIGHTS
    for e in mem:
        total += e["args"]["Bytes"]
        assert e["args"]["Total Allocated"] == total, (e, total)
    assert total == WEIGHTS  # every allocation of the window freed in it
    # an allocation and its free name the same address
    live = {}
    for e in mem:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = a["Bytes"]
        else:
            assert live.pop(a["Addr"]) == -a["Bytes"], a
    path = glob.glob(os.path.join(d, "out", "*", "*.pt.trace.json.gz"))[0]
    r = subprocess.run([GPROFCTL, "--json", "report", path], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    dev = json.loads(r.stdout)["memory"][0]["devices"][0]
    peak = WEIGHTS + 3 * MiB + 1024
    assert (dev["peak_allocated"], dev["reserved_at_peak"]) == (peak, 6 * MiB), dev
    assert (dev["allocations"], dev["frees"]) == (12, 12), dev
    r = subprocess.run([GPROFCTL, "report", path], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0 and "== memory:" in r.stdout, r.stdout
    assert "GPU 0: peak allocated 3.0 MiB, reserved then 6.0 MiB" in r.stdout, r.stdout


def test_memory_max_entries(d):
    """GPROF_MEMORY_MAX_ENTRIES bounds the window's history as it bounds a
    snapshot's: read once, by the agent (gprof_memory_max_entries); a
    value out of its bounds gives the default."""
    for value, want in (("5000", 5000), ("12", 100000)):
        sub = os.path.join(d, value)
        os.mkdir(sub)
        calls = os.path.join(sub, "calls.json")
        ev, notes = traced(sub, ctl_args=("--profile-memory",), FAKE_TORCH_CALLS=calls,
                           GPROF_MEMORY_MAX_ENTRIES=value)
        assert len(memory_events(ev)) == 3 * len(STEP_MEMORY), (value, notes)
        with open(calls) as f:
            made = json.load(f)
        assert made[0]["max_entries"] == want, (value, made)


def test_memory_job_history(d):
    """The job records the allocator's history itself (from its start):
    the helper uses it, filtered to the window (the totals still right),
    says so in the note, and never touches it (no call of its own)."""
    calls = os.path.join(d, "calls.json")
    ev, notes = traced(d, ctl_args=("--profile-memory",), FAKE_TORCH_HISTORY="1",
                       FAKE_TORCH_CALLS=calls)
    mem = memory_events(ev)
    assert [(e["args"]["Bytes"], e["args"]["Total Reserved"]) for e in mem] == STEP_MEMORY * 3, \
        [(e["args"]["Bytes"], e["args"]["Total Reserved"]) for e in mem]
    assert [e["args"]["Total Allocated"] for e in mem[:2]] == [WEIGHTS + 16384,
                                                                WEIGHTS + 16384 + 1536], mem[:2]
    assert [n for n in notes if "[memory] events from the CUDA allocator history already being "
            "recorded (the job's own), left on" in n], notes
    with open(calls) as f:
        made = json.load(f)
    assert made == [{"enabled": "all", "context": "all", "max_entries": 100000,
                     "clear_history": False}], made


def test_memory_not_asked(d):
    """Operators without --profile-memory: no [memory] events, the
    allocator's history never started; a torch without CUDA: none, and
    the note says why."""
    sub = os.path.join(d, "ops")
    os.mkdir(sub)
    ev, notes = traced(sub, ctl_args=("--operators",))
    assert [e for e in ev if e.get("cat") == "cpu_op"], "no operators"
    assert not memory_events(ev), memory_events(ev)[:3]
    sub = os.path.join(d, "nocuda")
    os.mkdir(sub)
    ev, notes = traced(sub, ctl_args=("--profile-memory",), FAKE_TORCH_CUDA="0")
    assert [e for e in ev if e.get("cat") == "cpu_op"], "no operators"
    assert not memory_events(ev), memory_events(ev)[:3]
    assert [n for n in notes if "--profile-memory asked for, not recorded: this torch sees "
            "no CUDA device" in n], notes


def test_old_helper(d):
    """An older helper (one that does not declare GPROF_HELPER_UNASKED)
    is never offered a window that did not ask for operators: it would
    take it for an asked one and start torch.profiler's CPU side. A plain
    request gives it none and no note; --operators works as before."""
    import shutil
    old = os.path.join(d, "oldpy")
    shutil.copytree(PYDIR, old)
    init = os.path.join(old, "gprof_agent", "__init__.py")
    src = open(init).read()
    assert "    _declare(lib)\n" in src
    open(init, "w").write(src.replace("    _declare(lib)\n", ""))
    sub = os.path.join(d, "plain")
    os.mkdir(sub)
    ev, notes = traced(sub, PYTHONPATH=old + ":" + TORCHDIR)
    assert not [e for e in ev if e.get("cat") == "cpu_op"], "an old helper took a default window"
    assert not notes, notes
    sub = os.path.join(d, "asked")
    os.mkdir(sub)
    ev, notes = traced(sub, ctl_args=("--operators",), PYTHONPATH=old + ":" + TORCHDIR)
    assert len([e for e in ev if e.get("cat") == "cpu_op"]) == 3 * OPS_PER_STEP, notes


OLD_TORCH_SAYS = ("gprof_agent: torch 1.13.1 has no global optimizer step hooks "
                  "(torch.optim.optimizer.register_optimizer_step_post_hook is missing; "
                  "PyTorch 2.0 added them)")


def test_old_torch(d):
    """A torch before 2.0 has no global optimizer step hooks: the helper
    says so once, and steps marked with gprof_agent.step() are iterations
    with everything a hooked step has (operators here)."""
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    job = None
    try:
        job = Job(d, dm.sock, program=PROGRAM_BY_HAND, FAKE_TORCH_OLD="1")
        assert dm.wait("registered pid %d" % job.p.pid), dm.log()
        out = os.path.join(d, "out")
        r = subprocess.run([GPROFCTL, "--socket", dm.sock, "--json", "trace", "--job", "opsjob",
                            "--iterations", "3", "--record-shapes", "--output-dir", out,
                            "--timeout", str(TIMEOUT)], capture_output=True, text=True,
                           timeout=TIMEOUT + 10)
        assert r.returncode == 0, (r.stdout, r.stderr, open(os.path.join(d, "agent.log")).read())
        rc, so, se = job.finish()
        job = None
    finally:
        if job is not None:
            job.p.kill()
            job.p.wait()
        dm.stop()
    assert rc == 0, (rc, se)
    path = glob.glob(os.path.join(out, "*", "*.pt.trace.json.gz"))[0]
    summary, errs = validate(path, steps=3)
    assert not errs, errs
    ev = json.load(gzip.open(path, "rt"))["traceEvents"]
    notes = [e["args"]["note"] for e in ev if e.get("ph") == "M" and e["name"] == "gprof_note"]
    check_ops(ev)
    assert [n for n in notes if "operator observer not available (this torch has no "
            "torch.utils.cpp_extension): recorded with kineto-cpu" in n], notes
    lines = se.splitlines()
    assert len(lines) == 1 and lines[0].startswith(OLD_TORCH_SAYS), se
    assert "call gprof_agent.step() right after optimizer.step()" in lines[0], se
    # a job with no GPU that does not mark its steps: told once (nothing
    # loads the agent, so it would never register)
    sub = os.path.join(d, "unmarked")
    os.mkdir(sub)
    dm = daemonlog.Daemon(GPROFD, sub, TIMEOUT)
    try:
        job = Job(sub, dm.sock, program=PROGRAM_CPU, FAKE_TORCH_OLD="1")
        rc, so, se = job.finish()
        job = None
        assert rc == 0, (rc, so, se)
        lines = se.splitlines()
        assert len(lines) == 1 and lines[0].startswith(OLD_TORCH_SAYS), se
    finally:
        if job is not None:
            job.p.kill()
            job.p.wait()
        dm.stop()


def test_exit_mid_window(d):
    """A job that exits inside a plain duration window leaves no operator
    directory: without the helper none is ever made (the default's window
    is claimed only by a helper), with it (it claims the window: the
    stand-in gives it nothing to record) the agent removes it as the
    process exits."""
    for helper in ("", "1"):
        sub = os.path.join(d, "helper" if helper else "plain")
        os.mkdir(sub)
        dm = daemonlog.Daemon(GPROFD, sub, TIMEOUT)
        job = ctl = None
        try:
            job = Job(sub, dm.sock, GPROF_TORCH_STEPS=helper)
            assert dm.wait("registered pid %d" % job.p.pid), dm.log()
            ctl = subprocess.Popen([GPROFCTL, "--socket", dm.sock, "trace", "--job", "opsjob",
                                    "--duration-ms", "20000", "--timeout", str(TIMEOUT),
                                    "--output-dir", os.path.join(sub, "out")],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for line in ctl.stderr:  # state lines, one per change
                if ": capturing" in line:
                    break
            else:
                raise AssertionError("never capturing")
            rc, so, se = job.finish()  # inside the window
            job = None
            assert rc == 0 and se == "", (rc, se)
            ctl.communicate(timeout=TIMEOUT + 10)
            ctl = None
        finally:
            for p in (job.p if job else None, ctl):
                if p is not None:
                    p.kill()
                    p.wait()
            dm.stop()
        assert not glob.glob(os.path.join(sub, "gprof-ops-*")), (helper, os.listdir(sub))


def main():
    tests = [test_operators, test_old_format, test_modules, test_request_options, test_legacy,
             test_hostile, test_unhonoured_in_summary, test_not_asked, test_off, test_memory, test_memory_max_entries,
             test_memory_job_history,
             test_memory_not_asked, test_old_helper, test_old_torch, test_exit_mid_window]
    only = os.environ.get("TEST_ONLY")
    if only:
        tests = [t for t in tests if t.__name__ == only]

    def on_fail(d):
        for log in glob.glob(os.path.join(d, "**", "agent.log"), recursive=True):
            print("---- %s\n%s" % (log, open(log).read()[-3000:]))
    return runner.run(tests, "gprof-torch-ops-", on_fail)


if __name__ == "__main__":
    sys.exit(main())
