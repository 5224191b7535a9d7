#!/usr/bin/env python3
"""Socket activation and readiness, the way systemd does them (issue 15):
sockets bound before gprofd runs are handed over as fds 3.. with
LISTEN_FDS/LISTEN_PID, and gprofd says READY=1 (and RELOADING=1 on SIGHUP)
on $NOTIFY_SOCKET. A socket bound early belongs to gprofd before any user
can squat on its name. Kineto's datagram socket is taken when it is bound
to the configured address; one bound elsewhere (systemd's
ListenDatagram=@name leaves out the trailing NUL Kineto's abstract names
carry) is closed with a warning and gprofd binds the address itself.

usage: test-activation.py GPROFD GPROFCTL KINETO_CLIENT
"""
import os
import socket
import subprocess
import sys

GPROFD, GPROFCTL, KCLIENT = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from daemonlog import Daemon  # noqa: E402
import runner  # noqa: E402

TIMEOUT = 20

# What systemd does between fork and exec: the sockets to fds 3.., then
# LISTEN_FDS and LISTEN_PID (this pid: exec keeps it).
LAUNCH = r'''
import os, sys
n = int(sys.argv[1])
fds = [int(x) for x in sys.argv[2:2 + n]]
tmp = [os.dup(f) for f in fds]          # out of the way of 3..
for i, f in enumerate(tmp):
    if f != 3 + i:
        os.dup2(f, 3 + i)
    os.set_inheritable(3 + i, True)     # dup2 onto itself would keep CLOEXEC
os.environ["LISTEN_FDS"] = str(n)
os.environ["LISTEN_PID"] = str(os.getpid())
os.execvp(sys.argv[2 + n], sys.argv[2 + n:])  # a wrapper may be a bare name
'''


def launcher(socks):
    return [sys.executable, "-c", LAUNCH, str(len(socks))] + [str(s.fileno()) for s in socks]


def notify_socket(d):
    """A datagram socket standing in for systemd's notification socket."""
    n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    n.bind(os.path.join(d, "notify"))
    n.settimeout(TIMEOUT)
    return n


def held_inodes(pid):
    """The socket inodes process pid has open."""
    out = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if t.startswith("socket:["):
            out.add(int(t[8:-1]))
    return out


def start(d, socks, yaml):
    env = dict(os.environ, NOTIFY_SOCKET=os.path.join(d, "notify"))
    return Daemon(GPROFD, d, TIMEOUT, yaml=yaml, launcher=launcher(socks),
                  pass_fds=[s.fileno() for s in socks], env=env)


def test_stream_and_kineto_passed(d):
    """A Unix listener and Kineto's socket file, both passed: gprofd binds
    neither itself, serves a client on each, says READY=1, and leaves both
    files in place when it stops (systemd owns them)."""
    note = notify_socket(d)
    passed_path = os.path.join(d, "passed.sock")
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(passed_path)
    lst.listen(16)
    kdir = os.path.join(d, "kineto")
    os.makedirs(kdir)
    kin = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    kin.bind(os.path.join(kdir, "dynolog"))
    dm = start(d, [lst, kin], "kineto:\n  socket_dir: %s\n" % kdir)
    try:
        assert dm.wait("using 2 sockets passed by systemd"), dm.log()
        assert dm.wait("(the socket systemd passed)"), dm.log()
        assert not os.path.exists(dm.sock), "gprofd bound --socket although one was passed"
        assert note.recv(4096) == b"READY=1"
        held = held_inodes(dm.p.pid)
        assert os.fstat(lst.fileno()).st_ino in held and os.fstat(kin.fileno()).st_ino in held
        # a client on the passed listener
        st = subprocess.run([GPROFCTL, "--socket", passed_path, "status"], capture_output=True,
                            text=True, timeout=TIMEOUT)
        assert st.returncode == 0 and "UPTIME" in st.stdout, st.stdout + st.stderr
        # a Kineto client on the passed datagram socket gets its reply
        kc = subprocess.Popen([sys.executable, KCLIENT, kdir], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
        try:
            line = kc.stdout.readline()
            assert line.startswith("ready "), line
        finally:
            kc.stdin.close()
            kc.wait(TIMEOUT)
        # SIGHUP: RELOADING=1, then READY=1
        dm.p.send_signal(1)
        assert note.recv(4096) == b"RELOADING=1"
        assert note.recv(4096) == b"READY=1"
    finally:
        dm.stop()
    assert note.recv(4096) == b"STOPPING=1"
    assert dm.p.returncode == 0, dm.log()
    assert os.path.exists(passed_path) and os.path.exists(os.path.join(kdir, "dynolog"))


def abstract_passed(d, yaml="", trailing_nul=True):
    """A datagram socket bound to an abstract name of this test's, with
    Kineto's trailing NUL or without (as ListenDatagram=@name binds it),
    handed to a gprofd configured for that name: (name, socket, daemon)."""
    notify_socket(d)
    name = "gprofd-act-%d" % os.getpid()
    kin = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    kin.bind("\0%s%s" % (name, "\0" if trailing_nul else ""))
    return name, kin, start(d, [kin], "kineto:\n%s  socket_name: %s\n" % (yaml, name))


def test_abstract_name_passed(d):
    """The exact abstract address Kineto's clients send to, bound early and
    passed: gprofd uses that very socket."""
    name, kin, dm = abstract_passed(d)
    try:
        assert dm.wait("serving Kineto clients (KINETO_USE_DAEMON=1) on @%s (the socket systemd "
                       "passed)" % name), dm.log()
        assert os.fstat(kin.fileno()).st_ino in held_inodes(dm.p.pid)
        assert "cannot bind" not in dm.log(), dm.log()
    finally:
        dm.stop()


def test_wrong_name_passed(d):
    """A socket bound to @name without the trailing NUL (what
    ListenDatagram=@name makes): refused with the reason; gprofd binds the
    right address itself and serves it."""
    name, kin, dm = abstract_passed(d, trailing_nul=False)
    try:
        assert dm.wait("is not bound to the configured Kineto address @%s" % name), dm.log()
        assert dm.wait("serving Kineto clients (KINETO_USE_DAEMON=1) on @%s" % name), dm.log()
        assert "the socket systemd passed" not in dm.log(), dm.log()
        assert os.fstat(kin.fileno()).st_ino not in held_inodes(dm.p.pid)
        # gprofd holds the real name: binding it now fails
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            probe.bind("\0%s\0" % name)
            raise AssertionError("the Kineto address is free while gprofd runs")
        except OSError:
            pass
        finally:
            probe.close()
    finally:
        dm.stop()


def test_kineto_disabled_closes_passed(d):
    """Kineto off: the passed datagram socket is closed, not kept open."""
    _, kin, dm = abstract_passed(d, yaml="  enabled: false\n")
    try:
        assert dm.wait("closing the Unix datagram socket systemd passed"), dm.log()
        assert os.fstat(kin.fileno()).st_ino not in held_inodes(dm.p.pid)
    finally:
        dm.stop()


if __name__ == "__main__":
    sys.exit(runner.run([test_stream_and_kineto_passed, test_abstract_name_passed,
                         test_wrong_name_passed, test_kineto_disabled_closes_passed],
                        "gprof-act-"))
