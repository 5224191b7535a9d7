#!/usr/bin/env python3
"""Memory snapshots on demand, end to end in CI (no GPU, no torch): a real
Python job with the agent (CUDA_INJECTION64_PATH, GPROF_TORCH_STEPS=1)
over tests/fixtures/faketorch, a stand-in for PyTorch whose allocator
history and snapshot have the real ones' shape.

usage: test-memsnap.py GPROFD GPROFCTL LIBGPROF_AGENT AGENT_APP PYTHON_HELPER_DIR FAKETORCH_DIR

- `gprofctl trace --job J --iterations 3 --memory-snapshot` exits 0 with one
  file, <host>_<pid>_rank3.<ns>.memory.pickle, that Python's pickle loads as
  a snapshot (segments, device_traces with the window's allocations and
  their Python frames, the per-step notes), and `gprofctl report` on it
  gives the peak, fragmentation and growth that a replay of the same file
  in Python gives, the largest live allocations at the peak with the
  functions that made them (known from the job), 3 allocations and 1 MiB of
  growth per iteration (the job leaks 1 MiB a step);
- a process without the Python hook (a C program with the agent) asked for
  one fails at once at the window's end, with the reason;
- a plain trace of the same job afterwards is a trace again.
Synchronisation is by events (the job's output, the daemon's log, and
`gprofctl list` polled); the job paces its own steps (5 ms each) so the
fake allocator's block lists stay short.
"""
import glob
import json
import os
import pickle
import subprocess
import sys
import time

GPROFD, GPROFCTL, AGENT, APP, HELPER, FAKETORCH = [os.path.abspath(a) for a in sys.argv[1:7]]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import daemonlog  # noqa: E402
import runner  # noqa: E402

TIMEOUT = 30
MiB = 1 << 20

JOB = r'''
import os, select, sys
import torch
from torch.optim import Optimizer
from torch.cuda import _fake_malloc as malloc, _fake_free as free
weights = malloc(16 << 20)
leaks = []
def forward():
    return malloc(4 << 20)
def backward():
    return malloc(8 << 20)
def leaky():
    leaks.append(malloc(1 << 20))
opt = Optimizer()
print("ready", os.getpid(), flush=True)
while not select.select([sys.stdin], [], [], 0.005)[0]:
    a = forward()
    b = backward()
    leaky()
    free(b)
    free(a)
    opt.step()
print("exit", flush=True)
'''


def ctl(sock, *args):
    return subprocess.run([GPROFCTL, "--socket", sock] + list(args), capture_output=True,
                          text=True, timeout=TIMEOUT + 15)


def until(what, fn):
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
    raise AssertionError("never happened: " + what)


def replay(snap):
    """The oracle: peak allocated and reserved over the window, by replaying
    the history back from the end state (what gprofctl report must say)."""
    end_alloc = sum(b["size"] for s in snap["segments"] for b in s["blocks"]
                    if b["state"].startswith("active"))
    end_res = sum(s["total_size"] for s in snap["segments"])
    ev = snap["device_traces"][0]
    net_a = sum(e["size"] if e["action"] == "alloc" else -e["size"]
                for e in ev if e["action"] in ("alloc", "free_completed"))
    net_r = sum(e["size"] if e["action"] == "segment_alloc" else -e["size"]
                for e in ev if e["action"] in ("segment_alloc", "segment_free"))
    a, r = end_alloc - net_a, end_res - net_r
    peak, res_at_peak, peak_res = a, r, r
    for e in ev:
        if e["action"] == "alloc":
            a += e["size"]
        elif e["action"] == "free_completed":
            a -= e["size"]
        elif e["action"] == "segment_alloc":
            r += e["size"]
        elif e["action"] == "segment_free":
            r -= e["size"]
        peak_res = max(peak_res, r)
        if a > peak:
            peak, res_at_peak = a, r
    return peak, res_at_peak, peak_res


def start_job(d, dm):
    script = os.path.join(d, "job.py")
    with open(script, "w") as f:
        f.write(JOB)
    env = dict(os.environ, GPROF_SOCKET=dm.sock, GPROF_JOB_ID="memjob", RANK="3",
               WORLD_SIZE="4", CUDA_INJECTION64_PATH=AGENT,
               PYTHONPATH=HELPER + ":" + FAKETORCH, GPROF_TORCH_STEPS="1",
               GPROF_AGENT_LOG=os.path.join(d, "agent.log"), GPROF_AGENT_TRACE_DIR=d)
    env.update(runner.sanitizer_env(AGENT))
    job = subprocess.Popen([sys.executable, script], env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    line = job.stdout.readline().split()
    assert line[0] == "ready", line
    pid = int(line[1])
    assert dm.wait("registered pid %d " % pid), dm.log()

    def stepped():
        r = ctl(dm.sock, "--json", "list", "--job", "memjob")
        ps = [p for p in json.loads(r.stdout)["processes"] if p["pid"] == pid]
        return ps and ps[0]["steps"] >= 12
    until("the job stepping", stepped)
    return job, pid


def test_memory_snapshot(d):
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    job, pid = start_job(d, dm)
    # a C process with the agent but no Python hook, in the same job
    capp = subprocess.Popen([APP, "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=dict(os.environ, GPROF_SOCKET=dm.sock, GPROF_JOB_ID="capp"))
    try:
        assert dm.wait("registered pid %d " % capp.pid), dm.log()
        out = os.path.join(d, "out")
        r = ctl(dm.sock, "--json", "trace", "--pid", str(capp.pid), "--duration-ms", "50",
                "--memory-snapshot", "--output-dir", out, "--timeout", str(TIMEOUT))
        res = json.loads(r.stdout)
        procs = {p["pid"]: p for h in res["hosts"] for p in h["processes"]}
        assert r.returncode == 1 and res["delivered"] == 0, (r.stdout, r.stderr)
        assert "no PyTorch memory hook" in procs[capp.pid]["reason"], procs

        r = ctl(dm.sock, "--json", "trace", "--job", "memjob", "--iterations", "3",
                "--memory-snapshot", "--output-dir", out, "--timeout", str(TIMEOUT))
        res = json.loads(r.stdout)
        assert r.returncode == 0 and res["delivered"] == 1, (r.stdout, r.stderr)
        files = glob.glob(os.path.join(out, res["trace_id"], "*"))
        assert len(files) == 1, files
        name = os.path.basename(files[0])
        assert "_%d_rank3." % pid in name and name.endswith(".memory.pickle"), name
        with open(files[0], "rb") as f:
            snap = pickle.load(f)
        assert sorted(k for k in snap if k != "gprof_steps") == ["device_traces", "segments"]
        ev = snap["device_traces"][0]
        names = {e["frames"][0]["name"] for e in ev if e["action"] == "alloc"}
        assert names == {"forward", "backward", "leaky"}, names
        notes = snap["gprof_steps"]
        assert len(notes) == 4, notes  # the window's start, then each of its 3 steps
        assert [b["allocations"] - a["allocations"] for a, b in zip(notes, notes[1:])] == [3] * 3
        peak, res_at_peak, peak_res = replay(snap)

        r = ctl(dm.sock, "--json", "report", files[0])
        assert r.returncode == 0, (r.stdout, r.stderr)
        m = json.loads(r.stdout)["memory"][0]
        assert m["source"] == "snapshot" and m["rank"] == 3, m
        dev = m["devices"][0]
        assert dev["peak_allocated"] == peak and dev["reserved_at_peak"] == res_at_peak and \
            dev["peak_reserved"] == peak_res, (dev, peak, res_at_peak, peak_res)
        assert dev["fragmentation"] == res_at_peak - peak, dev
        top = dev["top"]
        assert [t["bytes"] for t in top[:3]] == [16 * MiB, 8 * MiB, 4 * MiB], top
        assert "backward" in top[1]["where"] and "forward" in top[2]["where"], top
        its = dev["iterations"]
        assert len(its) == 3 and all(i["allocations"] == 3 and i["growth"] == MiB
                                     for i in its), its
        assert dev["growth_per_iteration"] == MiB, dev
        r = ctl(dm.sock, "report", files[0])
        assert r.returncode == 0 and "peak allocated" in r.stdout and \
            "grows by 1.0 MiB per iteration" in r.stdout, r.stdout

        # --report after the summary: the snapshot's report
        r = ctl(dm.sock, "trace", "--pid", str(pid), "--iterations", "2", "--memory-snapshot",
                "--report", "--output-dir", out, "--timeout", str(TIMEOUT))
        assert r.returncode == 0 and "1 of 1 matched process delivered" in r.stdout and \
            "== memory:" in r.stdout and "(rank 3), from a snapshot" in r.stdout, r.stdout

        # the same job traced as usual afterwards: a trace again
        r = ctl(dm.sock, "--json", "trace", "--pid", str(pid), "--iterations", "2",
                "--output-dir", out, "--timeout", str(TIMEOUT))
        assert r.returncode == 0, (r.stdout, r.stderr)
        res = json.loads(r.stdout)
        files = glob.glob(os.path.join(out, res["trace_id"], "*"))
        assert len(files) == 1 and files[0].endswith(".pt.trace.json.gz"), files
        job.stdin.close()
        assert job.stdout.readline() == "exit\n"
        assert job.wait(TIMEOUT) == 0
    finally:
        for p in (job, capp):
            if p.poll() is None:
                p.kill()
        dm.stop()


FIX = os.path.join(os.path.dirname(FAKETORCH), "memory")


def report_json(*paths):
    r = subprocess.run([GPROFCTL, "--json", "report"] + list(paths), capture_output=True,
                       text=True, timeout=TIMEOUT)
    return r, (json.loads(r.stdout) if r.stdout else None)


def test_snapshot_fixtures(d):
    """tests/fixtures/memory/snap*.pickle (protocols 4 and 2): the answers
    known by construction (README.md there)."""
    for name in ("snap.pickle", "snap-p2.pickle"):
        r, doc = report_json(os.path.join(FIX, name))
        assert r.returncode == 0, (name, r.stderr)
        dev = doc["memory"][0]["devices"][0]
        want = dict(peak_allocated=22 * MiB, reserved_at_peak=40 * MiB,
                    fragmentation=18 * MiB, peak_reserved=40 * MiB, start_allocated=6 * MiB,
                    end_allocated=16 * MiB, start_reserved=20 * MiB, end_reserved=40 * MiB,
                    allocations=3, frees=2, growth_per_iteration=5 * MiB)
        assert {k: dev[k] for k in want} == want, (name, dev)
        assert [(t["bytes"], t["where"]) for t in dev["top"]] == [
            (12 * MiB, "step (train.py:30)"), (6 * MiB, "(allocated before the window)"),
            (4 * MiB, "forward (model.py:10)")], dev["top"]
        assert [(i["allocations"], i["growth"]) for i in dev["iterations"]] == [
            (2, 6 * MiB), (1, 4 * MiB)], dev["iterations"]


def test_real_pytorch_files(d):
    """Files from PyTorch 2.11 on an H100 (tests/fixtures/memory/README.md):
    the snapshot gprofctl trace --memory-snapshot delivered there, and a
    torch.profiler trace with profile_memory=True; the figures the GPU host
    checked independently (a replay in Python, max_memory_allocated)."""
    r, doc = report_json(os.path.join(FIX, "h100-torch2.11_rank0.memory.pickle"))
    assert r.returncode == 0, r.stderr
    m = doc["memory"][0]
    dev = m["devices"][0]
    assert m["rank"] == 0 and dev["peak_allocated"] == 326732288 and \
        dev["reserved_at_peak"] == 354418688 and dev["peak_reserved"] == 354418688, dev
    assert dev["allocations"] == 110 and dev["frees"] == 105, dev
    assert [(i["allocations"], i["growth"]) for i in dev["iterations"]] == [(22, MiB)] * 5
    where = [t["where"] for t in dev["top"]]
    assert any(w.startswith("leaky (memsnap_train.py:39)") for w in where), where
    assert any(w.startswith("at::meta::structured_mm::meta") for w in where), where
    r, doc = report_json(os.path.join(FIX, "h100-torch2.11-profile-memory.pt.trace.json.gz"))
    assert r.returncode == 0, r.stderr
    dev = doc["memory"][0]["devices"][0]
    assert dev["peak_allocated"] == 112822784 and dev["reserved_at_peak"] == 119537664, dev
    assert [(i["allocations"], i["growth"]) for i in dev["iterations"]] == [(22, MiB)] * 5
    assert any(t["where"] == "aten::empty" and t["bytes"] == MiB for t in dev["top"]), dev["top"]


def test_trace_memory_events(d):
    """A Kineto trace with [memory] events (profile_memory): the peak from
    the totals, the live allocations there with their operators, per
    iteration by ProfilerStep#; the CPU's allocation left out; alongside
    the trace's own report (JSON root unchanged, "memory" added), and in a
    directory next to a snapshot."""
    r, doc = report_json(os.path.join(FIX, "memory.pt.trace.json"))
    assert r.returncode == 0, r.stderr
    assert doc["ranks"][0]["rank"] == 1 and len(doc["memory"]) == 1, doc.keys()
    m = doc["memory"][0]
    assert m["source"] == "trace" and m["rank"] == 1 and len(m["devices"]) == 1, m
    dev = m["devices"][0]
    want = dict(peak_allocated=8000, reserved_at_peak=10000, fragmentation=2000,
                peak_reserved=12000, start_allocated=4000, end_allocated=7000,
                allocations=3, frees=1, growth_per_iteration=1500)
    assert {k: dev[k] for k in want} == want, dev
    assert [(t["bytes"], t["where"]) for t in dev["top"]] == [
        (3000, "aten::mm"), (1000, "aten::empty")], dev["top"]
    assert [(i["allocations"], i["growth"]) for i in dev["iterations"]] == [
        (2, 1000), (1, 2000)], dev["iterations"]
    both = os.path.join(d, "both")
    os.makedirs(both)
    for f in ("memory.pt.trace.json", "snap.pickle"):
        with open(os.path.join(FIX, f), "rb") as a, open(os.path.join(both, f), "wb") as b:
            b.write(a.read())
    r, doc = report_json(both)
    assert r.returncode == 0 and [m["source"] for m in doc["memory"]] == ["trace", "snapshot"]
    r = subprocess.run([GPROFCTL, "report", both], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0 and r.stdout.count("== memory:") == 2, r.stdout


def test_bad_snapshots(d):
    """Bad input gets a clear error and exit 1, nothing run: cut short, a
    pickle that is not a snapshot, a hostile one (GLOBAL + REDUCE calling
    os.system), a length of 2^62 bytes; a good file given with them is
    still reported."""
    cases = {"truncated.pickle": "cut short",
             "notsnap.pickle": "a pickle, but not a PyTorch memory snapshot",
             "hostile.pickle": "opcode GLOBAL (0x63) would import or call Python code",
             "huge.pickle": "4611686018427387904 bytes follow but only 4 remain"}
    for name, why in cases.items():
        r = subprocess.run([GPROFCTL, "report", os.path.join(FIX, name),
                            os.path.join(FIX, "snap.pickle")], capture_output=True, text=True,
                           timeout=TIMEOUT, cwd=d)
        assert r.returncode == 1 and why in r.stderr, (name, r.stderr)
        assert "peak allocated 22.0 MiB" in r.stdout, (name, r.stdout)
        assert "pwned" not in r.stdout + r.stderr
    r = subprocess.run([GPROFCTL, "report", "--html", os.path.join(d, "x.html"),
                        os.path.join(FIX, "snap.pickle")], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 1 and "no HTML page" in r.stderr, r.stderr


def test_old_agent_refused(d):
    """An agent too old to know memory_snapshot ignores it and would send a
    trace: the daemon refuses that upload (format absent), and the process
    fails with the reason, rather than a trace stored under a .pickle name.
    The old agent is this test, speaking the native protocol."""
    import socket
    import struct
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(TIMEOUT)
    buf = b""

    def send(obj):
        t = json.dumps(obj).encode()
        s.sendall(struct.pack("<I", len(t)) + t)

    def recv(want):
        nonlocal buf
        while True:
            while len(buf) >= 4:
                n = struct.unpack("<I", buf[:4])[0]
                if len(buf) < 4 + n:
                    break
                m, buf = json.loads(buf[4:4 + n]), buf[4 + n:]
                if m["type"] == want:
                    return m
            chunk = s.recv(65536)
            assert chunk, "the daemon closed the connection"
            buf += chunk
    try:
        s.connect(dm.sock)
        send({"type": "hello", "id": 1, "proto_min": 1, "proto_max": 1, "role": "agent"})
        recv("hello_reply")
        send({"type": "register", "id": 2, "pid": os.getpid(), "job_id": "old"})
        recv("register_reply")
        p = subprocess.Popen([GPROFCTL, "--socket", dm.sock, "--json", "trace", "--pid",
                              str(os.getpid()), "--duration-ms", "50", "--memory-snapshot",
                              "--output-dir", os.path.join(d, "out"), "--timeout",
                              str(TIMEOUT)], stdout=subprocess.PIPE, text=True)
        cs = recv("capture_start")
        assert cs.get("memory_snapshot") is True, cs
        send({"type": "upload_begin", "trace_id": cs["trace_id"], "transfer": 1})
        err = recv("error")
        assert "too old for --memory-snapshot" in err["message"], err
        out, _ = p.communicate(timeout=TIMEOUT)
        res = json.loads(out)
        proc = res["hosts"][0]["processes"][0]
        assert p.returncode == 1 and proc["state"] == "failed" and \
            "too old" in proc["reason"], res
        assert not glob.glob(os.path.join(d, "out", "*", "*")), "a file was stored"
    finally:
        s.close()
        dm.stop()


def test_bad_window(d):
    """--memory-snapshot counts iterations by steps: with --iteration-range
    it is refused before anything is asked of a daemon."""
    r = subprocess.run([GPROFCTL, "--socket", os.path.join(d, "none.sock"), "trace", "--job",
                        "x", "--iterations", "2", "--iteration-range", "fwd",
                        "--memory-snapshot", "--output-dir", d], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 3 and "leave out iteration_range" in r.stderr, r.stderr


if __name__ == "__main__":
    sys.exit(runner.run([test_memory_snapshot, test_snapshot_fixtures, test_real_pytorch_files,
                         test_trace_memory_events,
                         test_bad_snapshots, test_old_agent_refused, test_bad_window], "gprof-memsnap-"))
