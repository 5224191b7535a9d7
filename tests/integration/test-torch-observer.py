#!/usr/bin/env python3
"""The operator observer (python/gprof_agent/_ops_observer.cpp, issue 27)
with the real PyTorch on the CPU: a small training loop (Linear/GELU,
AdamW, one CPU thread) whose windows are opened and closed by a stand-in
for the agent's four calls (gprof_window_flags, gprof_ops_path,
gprof_ops_done; the flags as agent/ops.c gives them), driving
gprof_agent.ops.Poller exactly as gprof_agent's step hook does, one poll
after each step. The extension is built by the helper itself, in a fresh
TORCH_EXTENSIONS_DIR. Skipped (77) only where no python3 has torch; .ci/deps
installs python3-torch so CI runs it.

usage: test-torch-observer.py PYTHON_DIR [GPROFD GPROFCTL AGENT FAKE_CUPTI VALIDATE_TRACE]

What must hold:
  fallback: the first window finds no observer built: it is recorded with
    kineto-cpu, the note says a build runs in the background, and the build
    ends (well within a minute) without the loop ever waiting for it;
  windows: in windows 2, 3 and 4 (plain, shapes, shapes + modules) every
    operator and scope torch's own profiler sees in one step (the legacy
    autograd profiler, run on a step outside any window) appears K times
    for K steps, by name, on the main thread's OS tid; nothing before or
    after the window (times within it; a marker scope run between windows
    never appears); every backward op's Sequence number names a forward op
    of the window and a fwdbwd flow links them; Input Dims and Input type
    as torch writes them with shapes asked, none without; module scopes
    "nn.Module: Linear_1" as user_annotation around their aten::linear;
  threads: a second thread's operators are recorded under its own OS tid,
    and a scope it holds open across the window's end is left out without
    harm;
  budget: with GPROF_TORCH_OPS_MB=1 and a long window, operators are
    dropped, counted in the note, the file still well-formed; the next
    window records everything again;
  unharmed: the losses of the whole run equal those of the same loop run
    again with nothing recorded;
  agent (with the programs given): the real path, a real gprofd and
    gprofctl and a python that loads the agent (the stand-in CUPTI) and
    gprof_agent, traced three times with --operators and nothing else set
    (on a torch before 2.0, as Debian 12's 1.13, the job marks its steps with
    gprof_agent.step() and the helper says once on stderr why it must):
    each trace validates, holds no note, and has the same operators in
    each of its 3 ProfilerSteps, on the stepping thread's row, with their
    fwdbwd flows (agent/ops.c took the observer's file as it is).
"""
import ctypes
import json
import os
import subprocess
import sys
import time


def torch_python():
    for cand in (sys.executable, "/usr/bin/python3"):
        if cand and os.path.exists(cand) and subprocess.run(
                [cand, "-c", "import torch"], capture_output=True).returncode == 0:
            return cand
    return None


if __name__ == "__main__" and os.environ.get("GPROF_OBS_CHILD") != "1":
    py = torch_python()
    if py is None:
        print("no python3 with torch: skipped (.ci/deps installs python3-torch)")
        sys.exit(77)
    env = dict(os.environ, GPROF_OBS_CHILD="1")
    sys.exit(subprocess.run([py, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode)

# ---- from here on, in a python with torch ----
PYDIR = sys.argv[1]
PROGS = sys.argv[2:7]
sys.path.insert(0, PYDIR)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tools"))
import runner  # noqa: E402

OPEN, OPS, SHAPES, MODULES, UNASKED = 1, 2, 4, 8, 128
STEPS = 3  # a window's steps
HANG = 120  # s: how long a wait for an event may last, a hang guard (never a speed bound)


class Agent:
    """The stand-in for libgprof_agent's window calls (agent/ops.c)."""

    def __init__(self, d):
        self.d = d
        self.gen = 0
        self.flags = 0
        self.done = {}
        self.path = None
        agent = self

        def gprof_window_flags():
            return (agent.gen << 32) | agent.flags

        def gprof_ops_path(buf, n):
            if not agent.flags & OPEN or agent.path is not None:
                return 0
            agent.path = os.path.join(agent.d, "ops-%d.json" % agent.gen)
            ctypes.memmove(buf, agent.path.encode() + b"\0", len(agent.path) + 1)
            return agent.gen

        def gprof_ops_done(gen, note):
            agent.done[gen] = note.decode() if note else ""

        self.gprof_window_flags = gprof_window_flags
        self.gprof_ops_path = gprof_ops_path
        self.gprof_ops_done = gprof_ops_done

    def open(self, opts=0):
        self.gen += 1
        self.path = None
        self.flags = OPEN | OPS | opts

    def close(self):
        self.flags = 0


class Loop:
    def __init__(self, torch):
        self.torch = torch
        torch.manual_seed(0)
        layers = []
        for _ in range(2):
            layers += [torch.nn.Linear(16, 16), torch.nn.GELU()]
        self.model = torch.nn.Sequential(*layers)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.x = torch.randn(4, 16)
        self.losses = []

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.model(self.x).square().mean()
        loss.backward()
        self.opt.step()
        self.losses.append(loss.item())


def names_per_step(torch, loop):
    """What torch's own profiler sees in one step: name -> count."""
    from collections import Counter
    with torch.autograd.profiler.profile(use_kineto=False) as p:
        loop.step()
    return Counter(e.name for e in p.function_events
                   if not e.name.startswith("profiler::_record_function"))


def read(path):
    with open(path) as f:
        doc = json.load(f)
    base = doc["baseTimeNanoseconds"]
    ev = doc["traceEvents"]
    for e in ev:
        e["t0"] = base + int(round(e["ts"] * 1000))
        e["t1"] = e["t0"] + int(round(e.get("dur", 0) * 1000))
    return ev


def window(agent, poll, loop, opts=0, steps=STEPS, during=None, parse=True, file=True):
    """One window of `steps` steps; returns (events, note, t_begin, t_end).
    file=False: the helper must write no operator file."""
    agent.open(opts)
    t0 = time.time_ns()
    poll()
    for i in range(steps):
        loop.step()
        if during:
            during(i)
        poll()
    agent.close()
    poll()
    t1 = time.time_ns()
    note = agent.done.get(agent.gen)
    assert note is not None, "gprof_ops_done not called for window %d" % agent.gen
    if not file:
        assert not os.path.exists(agent.path), (agent.path, note)
        return None, note, t0, t1
    assert os.path.exists(agent.path), (agent.path, note)
    return read(agent.path) if parse else None, note, t0, t1


def check_window(ev, ref, steps, tid, t0, t1, shapes, modules):
    from collections import Counter
    xs = [e for e in ev if e["ph"] == "X"]
    mine = [e for e in xs if e["tid"] == tid]
    # torch's legacy profiler leaves out an op that starts right inside one
    # of the same name (a redispatch: aten::mean in aten::mean), but not
    # always (its rule looks at the record before, whoever's): such names
    # must come between once and twice a step's count, every other exactly
    byt = sorted((e for e in mine if not e["name"].startswith("nn.Module: ")),
                 key=lambda e: e["t0"])
    got = Counter(e["name"] for e in byt)
    redispatched = {e["name"] for i, e in enumerate(byt)
                    if i and byt[i - 1]["name"] == e["name"] and e["t1"] <= byt[i - 1]["t1"]}
    want = Counter({k: v * steps for k, v in ref.items()})
    assert set(got) == set(want), "operators: missing %s, extra %s" % (
        set(want) - set(got), set(got) - set(want))
    for k in got:
        if k in redispatched:
            assert want[k] <= got[k] <= 2 * want[k] and got[k] % steps == 0, (k, got[k], want[k])
        else:
            assert got[k] == want[k], (k, got[k], want[k])
    assert all(t0 <= e["t0"] and e["t1"] <= t1 for e in ev), "an event outside the window"
    assert not [e for e in xs if e["name"] == "gprof-test-outside"]
    assert all(e["cat"] in ("cpu_op", "user_annotation") for e in xs)
    assert all(e["cat"] == "user_annotation" for e in xs if e["name"].startswith(("Optimizer.",
                                                                                   "nn.Module")))
    assert all(e["pid"] == os.getpid() for e in ev)
    # backward to forward: Sequence number, Fwd thread id and the fwdbwd flows
    fwd = {e["args"]["Sequence number"]: e for e in xs
           if "Sequence number" in e["args"] and e["args"]["Fwd thread id"] == 0}
    bwd = [e for e in xs if e["name"].endswith("Backward0") and not e["name"].startswith("autograd::")]
    assert len(bwd) >= 4 * steps, [e["name"] for e in bwd]
    for b in bwd:
        assert b["args"]["Fwd thread id"] > 0, b
        assert b["args"]["Sequence number"] in fwd, b
    s = {e["id"]: e for e in ev if e["ph"] == "s"}
    f = [e for e in ev if e["ph"] == "f"]
    assert len(f) >= len(bwd), (len(f), len(bwd))
    assert all(e["cat"] == "fwdbwd" and e["name"] == "fwdbwd" for e in list(s.values()) + f)
    for e in f:
        start = s[e["id"]]
        ops_at = [x for x in xs if x["t0"] == start["t0"] and x["tid"] == start["tid"]]
        back = [x for x in xs if x["t0"] == e["t0"] and x["tid"] == e["tid"]]
        assert ops_at and back, e
        assert back[0]["args"]["Sequence number"] == ops_at[0]["args"]["Sequence number"], e
        assert e["t0"] > start["t0"] and e.get("bp") == "e"
    addmm = [e for e in mine if e["name"] == "aten::addmm"]
    if shapes:
        assert addmm[0]["args"]["Input Dims"] == [[16], [4, 16], [16, 16], [], []], addmm[0]
        assert addmm[0]["args"]["Input type"] == ["float", "float", "float", "Scalar", "Scalar"], \
            addmm[0]
    else:
        assert not [e for e in xs if "Input Dims" in e["args"]]
    mods = [e for e in xs if e["name"].startswith("nn.Module: ")]
    if modules:
        names = Counter(e["name"] for e in mods)
        assert names == Counter({"nn.Module: Sequential_0": steps, "nn.Module: Linear_0": steps,
                                 "nn.Module: Linear_1": steps, "nn.Module: GELU_0": steps,
                                 "nn.Module: GELU_1": steps}), names
        assert all(e["cat"] == "user_annotation" for e in mods)
        for lin in (e for e in mine if e["name"] == "aten::linear"):
            assert [m for m in mods if m["name"].startswith("nn.Module: Linear_") and
                    m["t0"] <= lin["t0"] and lin["t1"] <= m["t1"]], lin
    else:
        assert not mods


def test_observer(d):
    import threading
    import torch
    from gprof_agent import build_ops, ops
    torch.set_num_threads(1)
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(d, "ext")
    os.environ.pop("GPROF_TORCH_OPS", None)
    os.environ.pop("GPROF_TORCH_OPS_MB", None)
    agent = Agent(d)
    poll = ops.poller(agent)
    loop = Loop(torch)
    for _ in range(3):  # AdamW's state, the allocator
        loop.step()
    ref = names_per_step(torch, loop)
    assert ref["aten::addmm"] == 2 and ref["AddmmBackward0"] == 2, ref
    tid = threading.get_native_id()

    # 0: not built yet, a window that did not ask for operators (the
    # agent's default): none, no torch.profiler, no build; the note says how
    assert build_ops.load_built(torch) is None
    ev, note, t0, t1 = window(agent, poll, loop, UNASKED, file=False)
    assert note == ("PyTorch operators not recorded: the operator observer is not built for "
                    "torch %s (python3 -m gprof_agent.build_ops builds it, once per torch "
                    "version; or ask with gprofctl trace --operators)" % torch.__version__), note
    assert ops._build is None and build_ops.load_built(torch) is None
    assert not torch.autograd._profiler_enabled()

    # 1: not built yet, asked: kineto-cpu for this window, a build in the background
    ev, note, t0, t1 = window(agent, poll, loop, parse=False)  # torch.profiler's file
    assert "building it in the background" in note, note
    while not ops._build.done:  # (a build that never ends: meson's timeout)
        loop.step()  # the job runs on while it builds
        time.sleep(0.05)
    assert ops._build.error is None, ops._build.error
    assert build_ops.load_built(torch) is not None

    # 2-4: the observer, plain, with shapes, with shapes and modules; then
    # by default (not asked), now that it is built
    for opts in (0, SHAPES, SHAPES | MODULES, UNASKED):
        with torch.autograd.profiler.record_function("gprof-test-outside"):
            loop.step()
        ev, note, t0, t1 = window(agent, poll, loop, opts)
        assert note == "", note
        check_window(ev, ref, STEPS, tid, t0, t1, bool(opts & SHAPES), bool(opts & MODULES))

    # 5: another thread, and a scope of its open across the window's end:
    # the thread holds it until the window has ended (events, not sleeps;
    # the waits' limit is a hang guard)
    go, ran, stop, held, ended = (threading.Event() for _ in range(5))
    seen = {}

    def worker():
        seen["tid"] = threading.get_native_id()
        a = torch.ones(8, 8)
        go.wait(HANG)  # inside the window
        while not stop.is_set():
            torch.mm(a, a)
            ran.set()
            time.sleep(0.001)  # a pace, not a synchronisation: fewer events
        with torch.autograd.profiler.record_function("gprof-test-held"):
            held.set()
            ended.wait(HANG)

    th = threading.Thread(target=worker)
    th.start()

    def during(i):
        go.set()
        if i == STEPS - 1:
            assert ran.wait(HANG), "the other thread never ran an operator in the window"
            stop.set()
            assert held.wait(HANG), "the other thread never opened its scope"

    try:
        ev, note, t0, t1 = window(agent, poll, loop, 0, during=during)
    finally:
        ended.set()
        th.join()
    other = [e for e in ev if e["ph"] == "X" and e["tid"] == seen["tid"]]
    assert seen["tid"] != tid and [e for e in other if e["name"] == "aten::mm"], other
    assert not [e for e in other if e["name"] in ("aten::addmm", "AddmmBackward0")], other
    assert not [e for e in ev if e.get("name") == "gprof-test-held"]
    # left out, counted (no note: every window's stop runs inside an open scope)
    assert poll.last_stats["open"] >= 1 and "gprof-test-held" not in note, poll.last_stats
    check_window([e for e in ev if e["tid"] == tid or e["ph"] != "X"], ref, STEPS, tid, t0, t1,
                 False, False)

    # 6: a budget too small: drops counted, the file sound; 7: all again
    os.environ["GPROF_TORCH_OPS_MB"] = "1"
    ev, note, t0, t1 = window(agent, poll, loop, SHAPES, steps=60)
    del os.environ["GPROF_TORCH_OPS_MB"]
    n = len([e for e in ev if e["ph"] == "X"])
    assert "operators dropped: the observer's memory (GPROF_TORCH_OPS_MB=1) was full" in note, note
    assert 0 < n < 60 * sum(ref.values()), n
    ev, note, t0, t1 = window(agent, poll, loop, SHAPES)
    assert note == "", note
    check_window(ev, ref, STEPS, tid, t0, t1, True, False)

    # the job computed what it computes with nothing recorded
    again = Loop(torch)
    for _ in range(len(loop.losses)):
        again.step()
    assert again.losses == loop.losses, "losses differ"


def test_start_stop(d):
    """The module's own contract: stop(None) writes nothing, a stopped
    observer records nothing, a second start and a stop without start are
    refused (RuntimeError, which ops.py turns into the note)."""
    import torch
    from gprof_agent import build_ops
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(d, "ext")
    r = subprocess.run([sys.executable, "-m", "gprof_agent.build_ops"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=PYDIR))
    assert r.returncode == 0, r.stderr
    mod = build_ops.load_built(torch)
    mod.start(False, 1 << 20)
    loop = Loop(torch)
    loop.step()
    st = mod.stop(None)
    assert st["events"] == 0 and st["drops"] == 0, st  # no path: nothing written
    p1, p2 = os.path.join(d, "one.json"), os.path.join(d, "two.json")
    mod.start(False, 1 << 20)
    loop.step()
    assert mod.stop(p1)["events"] > 0 and read(p1)
    loop.step()  # between windows: recorded nowhere
    mod.start(False, 1 << 20)
    st = mod.stop(p2)
    assert st["events"] == 0 and read(p2) == [], read(p2)
    try:
        mod.stop(p1)
        raise AssertionError("stop without start accepted")
    except RuntimeError:
        pass
    mod.start(False, 1 << 20)
    try:
        mod.start(False, 1 << 20)
        raise AssertionError("a second start accepted")
    except RuntimeError:
        pass
    mod.stop(None)
    # a file already at the path (planted where the agent's directory was)
    # is never written through: refused, left as it was
    p3 = os.path.join(d, "planted.json")
    with open(p3, "w") as f:
        f.write("theirs")
    mod.start(False, 1 << 20)
    loop.step()
    try:
        mod.stop(p3)
        raise AssertionError("stop wrote over an existing file")
    except FileExistsError:
        pass
    assert open(p3).read() == "theirs"
    # a library another user could have written is not loaded
    so = build_ops.library(torch)
    mode = os.stat(so).st_mode
    os.chmod(so, mode | 0o002)
    try:
        build_ops.library(torch)
        raise AssertionError("a world-writable observer library accepted")
    except PermissionError as e:
        assert "not this user's alone" in str(e), e
    finally:
        os.chmod(so, mode)
    assert build_ops.library(torch) == so


def test_library_of_another_user(d):
    """(The root group: CI runs as root.) An observer library owned by
    another user (nobody) is refused before anything loads it. The checks
    come before the load, so a file at the built library's path, with its
    stamp, stands in for a build."""
    import torch
    from gprof_agent import build_ops
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(d, "ext")
    bd = build_ops.build_dir(torch)
    os.makedirs(bd, mode=0o700)
    with open(os.path.join(bd, build_ops.STAMP), "w") as f:
        f.write(build_ops._stamp(torch))
    so = os.path.join(bd, build_ops.name(torch) + ".so")
    open(so, "w").close()
    assert build_ops.library(torch) == so  # this user's: accepted
    os.chown(so, 65534, -1)
    try:
        build_ops.library(torch)
        raise AssertionError("another user's observer library accepted")
    except PermissionError as e:
        assert "owned by uid 65534" in str(e), e


JOB = r"""
import ctypes, os, select, sys
ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()  # as cuInit does
import torch
import gprof_agent
torch.set_num_threads(1)
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
opt = torch.optim.AdamW(m.parameters())
x = torch.randn(4, 16)
OLD = not hasattr(sys.modules["torch.optim.optimizer"], "register_optimizer_step_post_hook")
print("ready", OLD, flush=True)
n = 0
while not select.select([sys.stdin], [], [], 0)[0]:
    opt.zero_grad()
    m(x).square().mean().backward()
    opt.step()
    if OLD:  # torch < 2.0: no global optimizer hooks, steps marked by hand
        gprof_agent.step()
    n += 1
print("steps", n, flush=True)
"""


def test_agent(d):
    """Three traces of one job through gprofd, operators from the observer
    (the second by default: its request asks for nothing)."""
    import collections
    import glob
    import gzip
    import torch
    from gprof_agent import build_ops
    gprofd, gprofctl, agent, fake, validator = PROGS
    sys.path.insert(0, os.path.dirname(validator))
    import daemonlog
    from validate_trace import validate
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(d, "ext")
    r = subprocess.run([sys.executable, "-m", "gprof_agent.build_ops"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=PYDIR))  # as at install
    assert r.returncode == 0 and "gprof_agent.build_ops: built" in r.stdout, (r.stdout, r.stderr)
    assert build_ops.library(torch), os.listdir(os.environ["TORCH_EXTENSIONS_DIR"])
    # the folders the build made are the user's alone (issue 43, 8)
    for p in (os.environ["TORCH_EXTENSIONS_DIR"], build_ops.build_dir(torch)):
        assert os.stat(p).st_mode & 0o777 == 0o700, (p, oct(os.stat(p).st_mode))
    dm = daemonlog.Daemon(gprofd, d, 60)
    env = dict(os.environ, GPROF_SOCKET=dm.sock, GPROF_JOB_ID="obsjob",
               GPROF_AGENT_LOG=os.path.join(d, "agent.log"), GPROF_AGENT_TRACE_DIR=d,
               CUDA_INJECTION64_PATH=agent, GPROF_CUPTI_PATH=fake, FAKE_CUPTI_PATH=fake,
               GPROF_TORCH_STEPS="1", PYTHONPATH=PYDIR)
    env.update(runner.sanitizer_env(agent))
    for k in ("GPROF_TORCH_OPS", "GPROF_TORCH_OPTS", "GPROF_TORCH_OPS_MB"):
        env.pop(k, None)
    job = subprocess.Popen([sys.executable, "-c", JOB], env=env, text=True, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = job.stdout.readline().split()
        assert ready and ready[0] == "ready", job.stderr.read()
        old_torch = ready[1] == "True"
        assert dm.wait("registered pid %d" % job.pid), dm.log()
        counts = []
        for i in range(3):
            out = os.path.join(d, "out%d" % i)
            # the second asks for nothing: operators by default (the observer is built)
            r = subprocess.run([gprofctl, "--socket", dm.sock, "--json", "trace", "--job", "obsjob",
                                "--iterations", "3"] + (["--operators"] if i != 1 else []) +
                               ["--output-dir", out, "--timeout", "60"],
                               capture_output=True, text=True, timeout=90)
            assert r.returncode == 0, (r.stdout, r.stderr, open(env["GPROF_AGENT_LOG"]).read())
            path = glob.glob(os.path.join(out, "*", "*.pt.trace.json.gz"))[0]
            summary, errs = validate(path, steps=3)
            assert not errs, errs
            ev = json.load(gzip.open(path, "rt"))["traceEvents"]
            notes = [e["args"]["note"] for e in ev if e.get("ph") == "M" and
                     e["name"] == "gprof_note"]
            assert not notes, notes
            steps = sorted((e for e in ev if e["name"].startswith("ProfilerStep#")),
                           key=lambda e: e["ts"])
            ops = [e for e in ev if e.get("cat") == "cpu_op"]
            per = [collections.Counter(o["name"] for o in ops if s["ts"] <= o["ts"] and
                                       o["ts"] + o["dur"] <= s["ts"] + s["dur"]) for s in steps]
            assert len(steps) == 3 and per[0]["aten::addmm"] == 2 and per[0] == per[1] == per[2], per
            assert {o["tid"] for o in ops} == {steps[0]["tid"] & ~0x40000000}, \
                ({o["tid"] for o in ops}, steps[0]["tid"])
            assert all(o["pid"] == job.pid for o in ops)
            fb = [e for e in ev if e.get("cat") == "fwdbwd"]
            assert len([e for e in fb if e["ph"] == "f"]) >= 3 * 4, fb
            counts.append(sum(per[0].values()))
        out, err = job.communicate("stop\n", timeout=60)
        assert job.returncode == 0 and "Traceback" not in err, (job.returncode, err)
        # a torch before 2.0 (Debian 12's 1.13): said once, and hand-marked
        # steps took the operators above as the hook's would
        said = [ln for ln in err.splitlines() if "has no global optimizer step hooks" in ln]
        assert len(said) == (1 if old_torch else 0), err
        assert not old_torch or "gprof_agent.step()" in said[0], said
        assert int(out.split()[1]) > 9, out
        job = None
    finally:
        if job is not None:
            job.kill()
            job.wait()
        dm.stop()
    assert not glob.glob(os.path.join(d, "gprof-ops-*")), os.listdir(d)


def main():
    tests = [test_observer, test_start_stop]
    if len(PROGS) == 5:
        tests.append(test_agent)

    def on_fail(d):
        log = os.path.join(d, "agent.log")
        if os.path.exists(log):
            print("---- agent.log\n" + open(log).read()[-3000:])
    return runner.run(tests, "gprof-torch-observer-", on_fail, root=[test_library_of_another_user])


if __name__ == "__main__":
    sys.exit(main())
