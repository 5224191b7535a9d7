#!/usr/bin/env python3
"""Faults injected into real processes (issue 15): the traced program
(agent-app, the agent injected) killed with SIGKILL while idle, while a
capture runs, and at random moments around a short window's end (where it
writes and uploads its trace); gprofctl killed with SIGKILL while it
downloads. After each: gprofd is alive and answers, the trace ended with a
reason (or delivered), the program's exit is read by waitpid, gprofd holds
no more sockets or store files open than before, and no partial file is
left in its store or in gprofctl's output directory.

usage: test-faults.py GPROFD GPROFCTL AGENT_APP LIBGPROF_AGENT

Synchronisation is by events (the daemon's log, the app's output); the
random delays only choose when a fault strikes.
"""
import glob
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time

GPROFD, GPROFCTL, APP, AGENT = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import daemonlog  # noqa: E402
import runner  # noqa: E402

TIMEOUT = 30
SEED = int(os.environ.get("FAULTS_SEED", time.time_ns() % 1000000))
rng = random.Random(SEED)


def app(d, sock, job):
    env = dict(os.environ, GPROF_SOCKET=sock, NVTX_INJECTION64_PATH=AGENT, GPROF_JOB_ID=job,
               GPROF_AGENT_LOG=os.path.join(d, "agent.log"), GPROF_AGENT_TRACE_DIR=d)
    p = subprocess.Popen([APP, "0"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    return p


def ctl(dm, *args):
    return subprocess.Popen([GPROFCTL, "--socket", dm.sock, "--json"] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def fd_list(pid):
    out = []
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            out.append(os.readlink("/proc/%d/fd/%s" % (pid, f)))
        except OSError:
            pass
    return sorted(out)


def fds(dm):
    """What a dead client could leak in gprofd: sockets (its connections)
    and files of the trace store (uploads). The rest (the metrics
    sampler's /proc files, libuv's thread pool) is opened once, lazily."""
    store = os.path.join(dm.dir, "state")
    return [x for x in fd_list(dm.p.pid) if x.startswith("socket:") or x.startswith(store)]


def settled(dm, base):
    """True once gprofd holds no more of fds() than base. A leak stays; what
    settles is no leak: the last gprofctl's connection, whose close the
    daemon reads a moment after gprofctl exits, and a manifest the store's
    writer is still fsyncing on the thread pool (tens of ms). So: looked at
    every 50 ms until it settles, TIMEOUT being a hang guard (a leak waits
    it out, then fails)."""
    deadline = time.monotonic() + TIMEOUT
    while len(fds(dm)) > len(base) and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(fds(dm)) <= len(base)


def partials(*dirs):
    """Files that are not finished traces: temporaries of the store or of
    gprofctl (hidden .part files, .tmp files)."""
    out = []
    for top in dirs:
        for root, _, files in os.walk(top):
            out += [os.path.join(root, f) for f in files if f.endswith((".tmp", ".part"))]
    return out


def alive(dm):
    r = subprocess.run([GPROFCTL, "--socket", dm.sock, "--json", "status"], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and dm.p.poll() is None, (r.returncode, r.stdout, r.stderr)


def killed(p, may_finish=False):
    """SIGKILL, then the exit status by waitpid (a zombie would still
    answer kill -0). True if the kill struck (it had not exited)."""
    p.kill()
    p.communicate(timeout=TIMEOUT)
    assert p.returncode == -signal.SIGKILL or (may_finish and p.returncode == 0), p.returncode
    return p.returncode == -signal.SIGKILL


def download_fd(pid, top):
    """The file position of the file gprofctl writes under top (its unnamed
    O_TMPFILE, /proc shows it as top/.../#N (deleted); or the .part), or
    None while it has none."""
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith(top + "/"):
                with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                    return int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def kill_mid_download(p, top):
    """SIGKILL to gprofctl part-way through the download: once its file
    under top is open (the data arrives in 1 MiB chunks, so a smaller trace
    is all in flight until then), after a random 0-0.3 ms more, it is
    stopped (SIGSTOP) and, if the file is still open (data still coming,
    or all there and being named: a kill there once left a .part), killed.
    True if the kill struck mid-download; False if it finished first (then
    it must have exited 0). Its exit status is read by waitpid."""
    pos = None
    while p.poll() is None:
        pos = download_fd(p.pid, top)
        if pos is not None:
            break
    if pos is not None:
        time.sleep(rng.uniform(0, 0.0003))
        try:
            os.kill(p.pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
        pos = download_fd(p.pid, top)
    struck = pos is not None
    if struck:
        p.kill()
    elif p.poll() is None:
        os.kill(p.pid, signal.SIGCONT)
    p.communicate(timeout=TIMEOUT)
    assert p.returncode == (-signal.SIGKILL if struck else 0), (p.returncode, pos)
    return struck


def test_agent_killed(d):
    """SIGKILL to the traced program: idle, mid-capture, and at random
    moments around the end of short windows."""
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    store = os.path.join(d, "state")
    out = os.path.join(d, "out")
    try:
        base = fds(dm)
        # idle: registered, no capture
        p = app(d, dm.sock, "idle")
        assert dm.wait("registered pid %d" % p.pid), dm.log()
        killed(p)
        assert dm.wait("unregistered pid %d" % p.pid), dm.log()
        alive(dm)
        # mid-capture: an hour's window, the program killed inside it.
        # gprofctl learns at once (the agent's connection closed), not at the
        # window's end: its answer comes while the window is still open (the
        # wait for it is a hang guard, an hour short of the window's end)
        p = app(d, dm.sock, "mid")
        assert dm.wait("registered pid %d" % p.pid), dm.log()
        mark = dm.mark()
        t = ctl(dm, "trace", "--job", "mid", "--duration-ms", "3600000", "--output-dir", out,
                "--timeout", "4000")
        assert dm.wait("started by", start=mark), dm.log()
        assert p.stdout.readline().startswith(b"step"), "the program stopped"
        killed(p)
        try:
            res, err = t.communicate(timeout=TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            t.kill()
            raise AssertionError("gprofctl still waits for a window whose program was killed")
        doc = json.loads(res)
        proc = doc["hosts"][0]["processes"][0]
        assert t.returncode == 1 and proc["state"] == "failed" and \
            "agent disconnected" in proc["reason"], doc
        alive(dm)
        # around a window's end: short windows, the program killed after a
        # random 0-40 ms after the trace started (a 20 ms window), so some die
        # capturing, some writing or uploading, some after delivering
        outcomes = {}
        for i in range(12):
            p = app(d, dm.sock, "end%d" % i)
            assert dm.wait("registered pid %d" % p.pid), dm.log()
            mark = dm.mark()
            t = ctl(dm, "trace", "--job", "end%d" % i, "--duration-ms", "20", "--output-dir", out,
                    "--timeout", str(TIMEOUT))
            assert dm.wait("started by", start=mark), dm.log()
            time.sleep(rng.uniform(0, 0.04))
            killed(p)
            res, err = t.communicate(timeout=TIMEOUT + 10)
            proc = json.loads(res)["hosts"][0]["processes"][0]
            outcomes[proc["state"]] = outcomes.get(proc["state"], 0) + 1
            assert proc["state"] in ("delivered", "failed"), proc
            assert proc["state"] == "delivered" or proc["reason"], proc
            assert (t.returncode == 0) == (proc["state"] == "delivered"), (t.returncode, proc)
            alive(dm)
        print("  seed %d: around the window's end: %s" % (SEED, outcomes))
        assert not partials(store, out), partials(store, out)
        # every connection of the dead programs closed: back to the baseline
        assert settled(dm, base), (fds(dm), base, dm.log()[-3000:])
        delivered = glob.glob(os.path.join(out, "*", "*.pt.trace.json.gz"))
        assert len(delivered) == outcomes.get("delivered", 0), (delivered, outcomes)
    finally:
        dm.stop()
    assert dm.p.returncode == 0, dm.log()


def test_gprofctl_killed_downloading(d):
    """SIGKILL to gprofctl part-way through downloading a long trace:
    no file under the trace's name, no temporary left anywhere; a later
    fetch gets it whole."""
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    out = os.path.join(d, "out")
    try:
        p = app(d, dm.sock, "big")
        assert dm.wait("registered pid %d" % p.pid), dm.log()
        t = ctl(dm, "trace", "--job", "big", "--duration-ms", "3000", "--output-dir",
                os.path.join(out, "first"), "--timeout", str(TIMEOUT))
        res, err = t.communicate(timeout=TIMEOUT + 10)
        assert t.returncode == 0, (res, err)
        tid = json.loads(res)["trace_id"]
        p.communicate(b"", timeout=TIMEOUT)
        size = sum(os.path.getsize(x) for x in glob.glob(os.path.join(out, "first", "**", "*.gz"),
                                                         recursive=True))
        base = fds(dm)
        struck = i = 0
        # until three kills struck mid-way (a download can finish first)
        while struck < 3 and i < 100:
            i += 1
            f = ctl(dm, "fetch", tid, "--output-dir", os.path.join(out, str(i)))
            struck += kill_mid_download(f, os.path.join(out, str(i)))
            # the trace's file is there whole, or not at all; no temporary
            got = glob.glob(os.path.join(out, str(i), "**", "*"), recursive=True)
            files = [x for x in got if not os.path.isdir(x)]
            assert all(x.endswith(".pt.trace.json.gz") and os.path.getsize(x) == size
                       for x in files), (files, size)
            assert not partials(out), partials(out)
            alive(dm)
        print("  seed %d: %d of %d downloads of %d bytes killed" % (SEED, struck, i, size))
        assert struck == 3, (struck, i)
        f = ctl(dm, "fetch", tid, "--output-dir", os.path.join(out, "whole"))
        res, err = f.communicate(timeout=TIMEOUT)
        assert f.returncode == 0, (res, err)
        whole = glob.glob(os.path.join(out, "whole", "**", "*.pt.trace.json.gz"), recursive=True)
        assert len(whole) == 1 and os.path.getsize(whole[0]) > 0, whole
        assert settled(dm, base), (fds(dm), base)
    finally:
        dm.stop()


def test_agent_disk_full(d):
    """The disk the agent writes its trace to fills up (a 64 KiB tmpfs in
    the program's own mount namespace, filled by this test through
    /proc/PID/root): the trace fails with the reason, the partial file is
    removed, the program runs on, and the traces delivered before and after
    (once there is room again) are whole. Needs root (mount): the root group."""
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    out = os.path.join(d, "out")
    disk = os.path.join(d, "agentdisk")
    os.makedirs(disk)
    env = dict(os.environ, GPROF_SOCKET=dm.sock, NVTX_INJECTION64_PATH=AGENT, GPROF_JOB_ID="full",
               GPROF_AGENT_LOG=os.path.join(d, "agent.log"), GPROF_AGENT_TRACE_DIR=disk)
    p = subprocess.Popen(["unshare", "-m", "sh", "-c",
                          'mount -t tmpfs -o size=64k gprof-agent-disk "$0" && exec "$@"',
                          disk, APP, "0"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    seen = os.path.join("/proc/%d/root" % p.pid, disk.lstrip("/"))  # the program's view

    other = app(d, dm.sock, "other")  # a program whose disk has room

    def trace(name, job="full"):
        t = ctl(dm, "trace", "--job", job, "--duration-ms", "100", "--output-dir",
                os.path.join(out, name), "--timeout", str(TIMEOUT))
        res, err = t.communicate(timeout=TIMEOUT + 10)
        return t.returncode, json.loads(res), err

    try:
        assert dm.wait("registered pid %d" % p.pid), dm.log()
        assert dm.wait("registered pid %d" % other.pid), dm.log()
        # a trace in the store before (from the other program: the traced
        # one removes its file only after gprofctl has it, which would race
        # the filling below)
        rc, before, err = trace("before", "other")
        assert rc == 0, (before, err)
        # fill the program's disk
        fd = os.open(os.path.join(seen, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError as e:
            assert e.errno == 28, e  # ENOSPC
        finally:
            os.close(fd)
        rc, full, err = trace("full")
        proc = full["hosts"][0]["processes"][0]
        assert rc == 1 and proc["state"] == "failed" and \
            "No space left on device" in proc["reason"] and "GPROF_AGENT_TRACE_DIR" in \
            proc["reason"], full
        assert os.listdir(seen) == ["filler"], os.listdir(seen)  # the partial removed
        assert p.stdout.readline().startswith(b"step"), "the program stopped"
        os.unlink(os.path.join(seen, "filler"))
        rc, after, err = trace("after")
        assert rc == 0, (after, err)
        # both delivered traces whole, and the first still in the store
        for name in ("before", "after"):
            got = glob.glob(os.path.join(out, name, "**", "*.pt.trace.json.gz"), recursive=True)
            assert len(got) == 1, got
            with gzip.open(got[0]) as f:
                assert json.load(f)["traceEvents"], got[0]
        f = ctl(dm, "fetch", before["trace_id"], "--output-dir", os.path.join(out, "again"))
        res, err = f.communicate(timeout=TIMEOUT)
        assert f.returncode == 0, (res, err)
        print("  agent disk full: %s" % proc["reason"])
    finally:
        p.communicate(b"", timeout=TIMEOUT)
        other.communicate(b"", timeout=TIMEOUT)
        dm.stop()
    assert p.returncode == 0 and other.returncode == 0, (p.returncode, other.returncode)
    assert dm.p.returncode == 0, dm.log()


if __name__ == "__main__":
    print("FAULTS_SEED=%d" % SEED)
    sys.exit(runner.run([test_agent_killed, test_gprofctl_killed_downloading], "gprof-faults-",
                        root=[test_agent_disk_full]))
