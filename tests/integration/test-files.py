#!/usr/bin/env python3
"""Files in shared places against a second local user (issue 43, cases 1, 4, 7).

usage: test-files.py GPROFD GPROFCTL AGENT_APP LIBGPROF_AGENT PYTHON_HELPER_DIR FAKETORCH_DIR

Runs as root (CI does) and makes a second user, gprofd-test-sq, with
useradd; exits 77 (skip) otherwise.

- case 1: the squatter cannot keep root's gprofd from starting: the state
  directory and the lock are private (0700, 0600), so the squatter cannot
  even open the lock; a lock an older gprofd left readable (0755/0644), held
  by the squatter, is replaced and gprofd starts; a lock file the squatter
  planted, or a state directory of hers, is refused with what to do.
- case 4: the squatter makes every name of the old scheme first (a file, a
  link, a FIFO for each rank's trace and snapshot) in the shared directory
  the jobs use as TMPDIR: both ranks' parts are still delivered, and her
  files are left as they were; the same for a memory snapshot (a Python
  job over tests/fixtures/faketorch).
- case 7: a job killed by SIGTERM while it uploads (held there by a relay
  between it and the daemon, which stops forwarding at upload_begin) leaves
  nothing in its TMPDIR; a job whose daemon goes away mid-upload keeps its
  trace under a name with a random part, mode 0600, and says where.
Synchronisation is by events: daemon log lines, the relay's frames,
`gprofctl list` polled.
"""
import errno
import fcntl
import glob
import gzip
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

GPROFD, GPROFCTL, APP, AGENT, HELPER, FAKETORCH = [os.path.abspath(a) for a in sys.argv[1:7]]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import daemonlog  # noqa: E402
import runner  # noqa: E402

TIMEOUT = 30
SQ = "gprofd-test-sq"
# a python the second user may run (root's own may sit under /root)
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

# the squatter: holds a flock on each path it is given (read-only opens,
# as any user may where the modes allow), says what it got, and waits
HOLD = r'''
import fcntl, os, sys
held = []
for p in sys.argv[1:]:
    try:
        fd = os.open(p, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(fd)
        print("held", p, flush=True)
    except OSError as e:
        print("refused", p, e.errno, flush=True)
print("pid", os.getpid(), flush=True)
sys.stdin.read()
'''


def squatter():
    try:
        pw = pwd.getpwnam(SQ)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", SQ], check=True, capture_output=True)
        pw = pwd.getpwnam(SQ)
    return pw.pw_uid, pw.pw_gid


def as_sq(argv, **kw):
    uid, gid = squatter()
    return subprocess.Popen(argv, user=uid, group=gid, extra_groups=[], **kw)


def hold(*paths):
    """The squatter holding flocks on paths: (process, {path: True/errno}, pid)."""
    p = as_sq([PY, "-c", HOLD] + list(paths), stdin=subprocess.PIPE,
              stdout=subprocess.PIPE, text=True)
    got = {}
    for _ in paths:
        w = p.stdout.readline().split()
        got[w[1]] = True if w[0] == "held" else int(w[2])
    pid = int(p.stdout.readline().split()[1])
    return p, got, pid


def gprofd_once(d, state, sock=None):
    """gprofd on state, expected to refuse: (exit code, stderr)."""
    r = subprocess.run([GPROFD, "--socket", sock or os.path.join(d, "x.sock"), "--tcp", "off",
                        "--metrics", "off", "--state-dir", state],
                       capture_output=True, text=True, timeout=TIMEOUT,
                       input="")
    return r.returncode, r.stderr


def mode(p):
    return stat.S_IMODE(os.lstat(p).st_mode)


# ---- case 1: the state directory's lock ----

def test_lock_not_takeable(d):
    """gprofd makes its state directory 0700 and the lock 0600: the squatter
    cannot open the lock, so gprofd starts whatever she does. Before: the
    directory was 0755 and the lock 0644; she held it and gprofd said
    another gprofd was using the directory, and exited."""
    os.chmod(d, 0o755)  # she may reach the state directory, as /var/lib
    state = os.path.join(d, "state")
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    dm.stop()
    sq, got, _ = hold(os.path.join(state, "gprofd.lock"), state)
    try:
        dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)  # asserts it started
        dm.stop()
        assert got[os.path.join(state, "gprofd.lock")] == errno.EACCES, got
        assert mode(state) == 0o700, oct(mode(state))
        assert mode(os.path.join(state, "gprofd.lock")) == 0o600
    finally:
        sq.communicate("")


def test_old_loose_lock_replaced(d):
    """A state directory an older gprofd made (0755, lock 0644): the
    squatter opened the lock while it could and holds it. gprofd tightens
    the directory, replaces the lock with a private one (saying so) and
    starts; a second gprofd is still refused, naming the first."""
    os.chmod(d, 0o755)
    state = os.path.join(d, "state")
    os.mkdir(state, 0o755)
    os.chmod(state, 0o755)
    lock = os.path.join(state, "gprofd.lock")
    with open(lock, "w") as f:
        f.write("1\n")
    os.chmod(lock, 0o644)
    old = os.stat(lock).st_ino
    sq, got, sqpid = hold(lock)
    try:
        assert got[lock] is True, got  # the attack, as it was
        dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
        try:
            assert dm.wait("replaced by a private one"), dm.log()
            assert mode(state) == 0o700 and mode(lock) == 0o600
            assert os.stat(lock).st_ino != old
            code, err = gprofd_once(d, state)
            assert code != 0 and "another gprofd (pid %d)" % dm.p.pid in err, err
        finally:
            dm.stop()
    finally:
        sq.communicate("")


def test_old_loose_dir_held_too(d):
    """The squatter also holds the old 0755 directory itself (opened while
    it was open to all), which serialises the replacement: gprofd refuses,
    naming her process and what to do, and changes nothing else."""
    os.chmod(d, 0o755)
    state = os.path.join(d, "state")
    os.mkdir(state, 0o755)
    os.chmod(state, 0o755)
    lock = os.path.join(state, "gprofd.lock")
    with open(lock, "w") as f:
        f.write("1\n")
    os.chmod(lock, 0o644)
    sq, got, sqpid = hold(lock, state)
    try:
        assert got[lock] is True and got[state] is True, got
        code, err = gprofd_once(d, state)
        assert code != 0 and "pid %d" % sqpid in err, err
        assert "uid %d" % squatter()[0] in err and "stop that process" in err, err
        assert mode(state) == 0o700, oct(mode(state))
    finally:
        sq.communicate("")
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)  # she let go: it starts
    dm.stop()


def test_planted_lock_and_foreign_dir(d):
    """A lock file of the squatter's (she could write the directory once,
    0777) and a state directory of hers: each refused with the owner and
    what to do; the loose directory is tightened on the way."""
    uid, gid = squatter()
    os.chmod(d, 0o755)
    state = os.path.join(d, "state")
    os.mkdir(state)
    os.chmod(state, 0o777)
    p = as_sq(["sh", "-c", "echo 1 > %s/gprofd.lock" % state])
    assert p.wait() == 0
    code, err = gprofd_once(d, state)
    assert code != 0 and "is not gprofd's lock file" in err and "uid %d" % uid in err, err
    assert mode(state) == 0o700, oct(mode(state))
    theirs = os.path.join(d, "theirs")
    os.mkdir(theirs, 0o700)
    os.chown(theirs, uid, gid)
    code, err = gprofd_once(d, theirs)
    assert code != 0 and "belongs to uid %d" % uid in err, err


def test_socket_dir_writable(d):
    """A socket directory other users may write (0777, not sticky): any of
    them could put a socket of her own in gprofd's place; gprofd refuses to
    start there, and says why. Before: it ran."""
    sd = os.path.join(d, "run")
    os.mkdir(sd)
    os.chmod(sd, 0o777)
    code, err = gprofd_once(d, os.path.join(d, "state"), os.path.join(sd, "gprofd.sock"))
    assert code != 0 and "writable by users other than gprofd's" in err, err
    assert not os.path.exists(os.path.join(sd, "gprofd.sock"))


# ---- cases 4 and 7: the agent's files ----

def shared_dir():
    """A shared, sticky directory like /tmp, for the jobs' TMPDIR."""
    s = tempfile.mkdtemp(prefix="gprof-shared-")
    os.chmod(s, 0o1777)
    return s


class App:
    def __init__(self, d, sock, tmp, rank):
        e = dict(os.environ)
        for k in ("GPROF_AGENT_TRACE_DIR",):
            e.pop(k, None)
        e.update({"GPROF_SOCKET": sock, "NVTX_INJECTION64_PATH": AGENT, "TMPDIR": tmp,
                  "GPROF_JOB_ID": "sqjob", "RANK": str(rank), "WORLD_SIZE": "2",
                  "GPROF_AGENT_LOG": os.path.join(d, "agent%d.log" % rank)})
        self.p = subprocess.Popen([APP, "0"], env=e, stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def end(self):
        if self.p.poll() is None:
            self.p.communicate(b"", timeout=TIMEOUT)


def ctl(sock, *args):
    return subprocess.run([GPROFCTL, "--socket", sock] + list(args), capture_output=True,
                          text=True, timeout=TIMEOUT + 15)


def registered(sock, n):
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end:
        r = ctl(sock, "--json", "list", "--job", "sqjob")
        if r.returncode == 0 and len(json.loads(r.stdout)["processes"]) >= n:
            return
    raise AssertionError("the jobs never registered")


def test_squatted_names(d):
    """Two ranks in a shared TMPDIR; the squatter makes every name the
    agent used to make there first (gprof-<pid>-<trace-id>.pt.trace.json.gz
    and .memory.pickle: a file, a link, a FIFO). Both ranks' parts are
    delivered, and her files are as she left them. Before: 'cannot create
    the trace file ... File exists' for each rank."""
    tmp = shared_dir()
    try:
        dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
        apps = [App(d, dm.sock, tmp, r) for r in (0, 1)]
        try:
            registered(dm.sock, 2)
            tid = "squatted-trace"
            made = []
            for i, a in enumerate(apps):
                for suffix in (".pt.trace.json.gz", ".memory.pickle"):
                    made.append(os.path.join(tmp, "gprof-%d-%s%s" % (a.p.pid, tid, suffix)))
            script = ("import os, sys\n"
                      "for i, p in enumerate(sys.argv[1:]):\n"
                      "    k = i % 3\n"
                      "    if k == 0: open(p, 'w').write('hers')\n"
                      "    elif k == 1: os.symlink('/etc/hostname', p)\n"
                      "    else: os.mkfifo(p)\n")
            assert as_sq([PY, "-c", script] + made).wait() == 0
            before = {p: os.lstat(p) for p in made}
            out = os.path.join(d, "out")
            r = ctl(dm.sock, "--json", "trace", "--job", "sqjob", "--trace-id", tid,
                    "--duration-ms", "200", "--output-dir", out, "--timeout", str(TIMEOUT))
            res = json.loads(r.stdout) if r.stdout else {}
            assert r.returncode == 0 and res.get("delivered") == 2, (r.stdout, r.stderr)
            files = glob.glob(os.path.join(out, tid, "*.pt.trace.json.gz"))
            assert len(files) == 2, files
            for f in files:
                json.load(gzip.open(f, "rt"))
            for p, st in before.items():
                now = os.lstat(p)
                assert (now.st_ino, now.st_uid, now.st_mode, now.st_size) == \
                    (st.st_ino, st.st_uid, st.st_mode, st.st_size), p
            # nothing of the jobs' stays in the shared directory
            assert sorted(os.listdir(tmp)) == sorted(os.path.basename(p) for p in made)
        finally:
            for a in apps:
                a.end()
            dm.stop()
    finally:
        shutil.rmtree(tmp)


# a Python job over faketorch stepping its optimizer every 5 ms
JOB = r'''
import os, select, sys
import torch
from torch.optim import Optimizer
from torch.cuda import _fake_malloc as malloc, _fake_free as free
opt = Optimizer()
print("ready", os.getpid(), flush=True)
while not select.select([sys.stdin], [], [], 0.005)[0]:
    free(malloc(4 << 20))
    opt.step()
'''


def test_squatted_snapshot_name(d):
    """A memory snapshot in a shared TMPDIR whose old name
    (gprof-<pid>-<trace-id>.memory.pickle) the squatter made first, as a
    FIFO: delivered, her FIFO untouched, nothing of the job's left. Before:
    'cannot create the memory snapshot file ... File exists'."""
    tmp = shared_dir()
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    script = os.path.join(d, "job.py")
    with open(script, "w") as f:
        f.write(JOB)
    env = dict(os.environ, GPROF_SOCKET=dm.sock, GPROF_JOB_ID="memjob", TMPDIR=tmp,
               CUDA_INJECTION64_PATH=AGENT, PYTHONPATH=HELPER + ":" + FAKETORCH,
               GPROF_TORCH_STEPS="1", GPROF_AGENT_LOG=os.path.join(d, "agent.log"))
    env.pop("GPROF_AGENT_TRACE_DIR", None)
    env.update(runner.sanitizer_env(AGENT))
    job = subprocess.Popen([sys.executable, script], env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        line = job.stdout.readline().split()
        assert line[0] == "ready", line
        pid = int(line[1])
        assert dm.wait("registered pid %d " % pid), dm.log()
        tid = "squatted-snapshot"
        fifo = os.path.join(tmp, "gprof-%d-%s.memory.pickle" % (pid, tid))
        assert as_sq([PY, "-c", "import os, sys; os.mkfifo(sys.argv[1])", fifo]).wait() == 0
        out = os.path.join(d, "out")
        r = ctl(dm.sock, "--json", "trace", "--job", "memjob", "--trace-id", tid,
                "--iterations", "3", "--memory-snapshot", "--output-dir", out,
                "--timeout", str(TIMEOUT))
        res = json.loads(r.stdout) if r.stdout else {}
        assert r.returncode == 0 and res.get("delivered") == 1, (r.stdout, r.stderr)
        files = glob.glob(os.path.join(out, tid, "*.memory.pickle"))
        assert len(files) == 1 and os.path.getsize(files[0]) > 0, files
        st = os.lstat(fifo)
        assert stat.S_ISFIFO(st.st_mode) and st.st_uid == squatter()[0]
        assert os.listdir(tmp) == [os.path.basename(fifo)], os.listdir(tmp)
    finally:
        job.communicate("", timeout=TIMEOUT)
        dm.stop()
        shutil.rmtree(tmp)


class Relay:
    """Between the agent and the daemon: forwards both ways, reading the
    agent's frames; at its upload_begin stops forwarding and sets
    self.uploading (then cut() closes the agent's side)."""

    def __init__(self, d, daemon_sock):
        self.path = os.path.join(d, "relay.sock")
        self.lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lst.bind(self.path)
        self.lst.listen(4)
        self.daemon_sock = daemon_sock
        self.uploading = threading.Event()
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                a, _ = self.lst.accept()
            except OSError:
                return
            b = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            b.connect(self.daemon_sock)
            self.conns += [a, b]
            threading.Thread(target=self.down, args=(b, a), daemon=True).start()
            threading.Thread(target=self.up, args=(a, b), daemon=True).start()

    def down(self, b, a):
        try:
            while True:
                x = b.recv(65536)
                if not x:
                    break
                a.sendall(x)
        except OSError:
            pass

    def up(self, a, b):
        buf = b""
        try:
            while True:
                x = a.recv(65536)
                if not x:
                    return
                buf += x
                while len(buf) >= 4:
                    h = struct.unpack("<I", buf[:4])[0]
                    n = h & 0x7fffffff
                    if len(buf) < 4 + n:
                        break
                    frame, buf = buf[:4 + n], buf[4 + n:]
                    if not h & 0x80000000 and \
                            json.loads(frame[4:]).get("type") == "upload_begin":
                        self.uploading.set()
                        return  # hold the agent here: nothing more goes through
                    b.sendall(frame)
        except OSError:
            pass

    def cut(self):
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.cut()
        self.lst.close()


def test_sigterm_mid_upload(d):
    """A job gets SIGTERM while it uploads its trace: nothing of it stays in
    its TMPDIR. Before: its trace file (gprof-<pid>-<id>.pt.trace.json.gz)
    stayed there for good."""
    tmp = shared_dir()
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    relay = Relay(d, dm.sock)
    app = App(d, relay.path, tmp, 0)
    try:
        registered(dm.sock, 1)
        t = subprocess.Popen([GPROFCTL, "--socket", dm.sock, "trace", "--job", "sqjob",
                              "--duration-ms", "300", "--output-dir", os.path.join(d, "out"),
                              "--timeout", "10"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        assert relay.uploading.wait(TIMEOUT), "no upload began"
        app.p.send_signal(signal.SIGTERM)
        assert app.p.wait(TIMEOUT) == -signal.SIGTERM
        left = os.listdir(tmp)
        assert left == [], "left in TMPDIR after SIGTERM: %s" % left
        relay.cut()
        t.wait(TIMEOUT + 15)
    finally:
        app.end()
        relay.close()
        dm.stop()
        shutil.rmtree(tmp)


def test_kept_when_daemon_gone(d):
    """The daemon goes away mid-upload: the agent keeps the trace under a
    name with a random part (mode 0600, the job's own) and says where in
    its log; the file is the whole trace."""
    tmp = shared_dir()
    dm = daemonlog.Daemon(GPROFD, d, TIMEOUT)
    relay = Relay(d, dm.sock)
    app = App(d, relay.path, tmp, 0)
    try:
        registered(dm.sock, 1)
        t = subprocess.Popen([GPROFCTL, "--socket", dm.sock, "trace", "--job", "sqjob",
                              "--trace-id", "kept-trace", "--duration-ms", "300",
                              "--output-dir", os.path.join(d, "out"), "--timeout", "10"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert relay.uploading.wait(TIMEOUT), "no upload began"
        relay.cut()
        log = os.path.join(d, "agent0.log")
        end = time.monotonic() + TIMEOUT
        kept = []
        while not kept and time.monotonic() < end:
            kept = [l for l in open(log).read().splitlines() if "kept at" in l] \
                if os.path.exists(log) else []
        assert kept, "the agent never said where it kept the trace"
        path = kept[0].split("kept at ")[1].split(":")[0]
        name = os.path.basename(path)
        assert os.path.dirname(path) == tmp, path
        assert name.startswith("gprof-%d-kept-trace-" % app.p.pid), name
        assert name != "gprof-%d-kept-trace.pt.trace.json.gz" % app.p.pid, name
        st = os.lstat(path)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert "traceEvents" in json.load(gzip.open(path, "rt"))
        t.wait(TIMEOUT + 15)
    finally:
        app.end()
        relay.close()
        dm.stop()
        shutil.rmtree(tmp)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: needs root, to make a second user (CI runs as root)")
        sys.exit(77)
    squatter()
    sys.exit(runner.run([test_lock_not_takeable, test_old_loose_lock_replaced,
                         test_old_loose_dir_held_too, test_planted_lock_and_foreign_dir,
                         test_socket_dir_writable,
                         test_squatted_names, test_squatted_snapshot_name,
                         test_sigterm_mid_upload,
                         test_kept_when_daemon_gone], "gprof-files-"))
