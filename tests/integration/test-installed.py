#!/usr/bin/env python3
"""The installed layout, run as the service would run it (issue 26).

usage: test-installed.py BUILD_DIR AGENT_APP

`meson install --destdir` into a temporary directory; the files a package
holds are there (binaries, units, man pages, the agent, its header, the
Python helper); the units pass `systemd-analyze verify` and agree with the
daemon and its man page on where the configuration, socket and state live.
Then the installed gprofd is started by the unit's own ExecStart line (paths
rewritten into the destdir, a private socket and state directory, and
$CONFIGURATION_DIRECTORY as systemd sets it from ConfigurationDirectory=),
so it reads its default configuration file; an agent-loaded program (the
installed agent) is traced with the installed gprofctl; the unit's
ExecReload changes a limit that a client sees; SIGTERM (systemd's stop)
ends it with exit 0. No running systemd is needed.

Synchronisation is by the daemon's log lines and replies, never by time.
"""
import glob
import json
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys

BUILD, APP = sys.argv[1:3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import daemonlog  # noqa: E402
import runner  # noqa: E402

TIMEOUT = 30


def install(d):
    dest = os.path.join(d, "dest")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", dest, "--no-rebuild",
                        "--quiet"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "meson install failed:\n" + r.stdout + r.stderr
    found = {}
    for root, _, files in os.walk(dest):
        for f in files:
            found.setdefault(f, []).append(os.path.join(root, f))
    return dest, found


def one(found, name, where="/"):
    """The one installed file called name in a folder ending with where."""
    paths = [p for p in found.get(name, []) if os.path.dirname(p).endswith(where.rstrip("/"))]
    assert len(paths) == 1, "installed %s in */%s: %s" % (name, where, found.get(name))
    return paths[0]


def unit_values(path):
    """key -> [values] of a unit file's assignments (comments kept apart)."""
    keys, comments = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                comments.append(line)
            elif "=" in line:
                k, v = line.split("=", 1)
                keys.setdefault(k, []).append(v)
    return keys, "\n".join(comments)


def hello(sock_path):
    """A native connection that said hello and was answered: it holds one
    of the daemon's connection slots until closed."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(TIMEOUT)
    s.connect(sock_path)
    body = json.dumps({"type": "hello", "id": 1, "proto_min": 1, "proto_max": 1,
                       "role": "ctl"}).encode()
    s.sendall(struct.pack("<I", len(body)) + body)
    n = struct.unpack("<I", s.recv(4, socket.MSG_WAITALL))[0]
    reply = json.loads(s.recv(n, socket.MSG_WAITALL))
    assert reply.get("type") == "hello_reply", reply
    return s


def ctl(gprofctl, sock, *args):
    return subprocess.run([gprofctl, "--socket", sock] + list(args), capture_output=True,
                          text=True, timeout=TIMEOUT + 10)


def test_installed_service(d):
    dest, found = install(d)
    # the files a package holds
    gprofd = one(found, "gprofd", "/sbin")
    gprofctl = one(found, "gprofctl", "/bin")
    for exe in (gprofd, gprofctl):
        assert os.access(exe, os.X_OK), exe
    one(found, "gprofctl", "/bash-completion/completions")
    agent = one(found, "libgprof_agent.so", "/gprofd")
    one(found, "gprof_agent.h", "/include")
    service = one(found, "gprofd.service", "/systemd/system")
    sock_unit = one(found, "gprofd.socket", "/systemd/system")
    man8, man1 = one(found, "gprofd.8", "/man8"), one(found, "gprofctl.1", "/man1")
    assert any(p.endswith("/gprof_agent/__init__.py") for p in found.get("__init__.py", [])), \
        "the Python helper is not installed"

    # the units: ExecStart is the installed binary, with no path of its own
    # for the configuration: gprofd reads the unit's ConfigurationDirectory
    svc, _ = unit_values(service)
    sck, sck_comments = unit_values(sock_unit)
    start = shlex.split(svc["ExecStart"][0])
    assert os.path.join(dest, start[0].lstrip("/")) == gprofd, (start, gprofd)
    assert svc["ConfigurationDirectory"] == ["gprofd"], svc.get("ConfigurationDirectory")
    conf_file = "/etc/gprofd/gprofd.yaml"
    # ... and the daemon, its man page and the socket unit say the same
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONFIGURATION_DIRECTORY", "GPROF_SOCKET")}
    r = subprocess.run([gprofd, "--dump-config"], capture_output=True, text=True, env=env,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert conf_file in r.stdout.splitlines()[0], r.stdout.splitlines()[0]
    assert "socket: '%s'" % sck["ListenStream"][0] in r.stdout, sck["ListenStream"]
    assert "state_dir: '/var/lib/%s'" % svc["StateDirectory"][0] in r.stdout
    with open(man8) as f:
        assert conf_file in f.read(), "gprofd(8) does not name " + conf_file
    assert conf_file in sck_comments, "gprofd.socket's comment does not name " + conf_file

    # systemd-analyze verify on the installed units (verify wants ExecStart's
    # binary to exist: point it into the destdir, as a package would put it)
    vdir = os.path.join(d, "verify")
    os.makedirs(vdir)
    with open(service) as f, open(os.path.join(vdir, "gprofd.service"), "w") as o:
        o.write(f.read().replace("ExecStart=" + start[0], "ExecStart=" + gprofd))
    with open(sock_unit) as f, open(os.path.join(vdir, "gprofd.socket"), "w") as o:
        o.write(f.read())
    r = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        os.path.join(vdir, "gprofd.socket"), os.path.join(vdir, "gprofd.service")],
                       capture_output=True, text=True, timeout=TIMEOUT)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "gprofd." not in out, "systemd-analyze verify:\n" + out

    # start it as the unit does: ExecStart rewritten into the destdir, the
    # environment systemd gives it (CONFIGURATION_DIRECTORY), a private
    # socket and state directory; the file there says: one connection
    confdir = os.path.join(dest, "etc", svc["ConfigurationDirectory"][0])
    os.makedirs(confdir)
    conf = os.path.join(confdir, "gprofd.yaml")
    # @dynolog is machine-wide and may be another daemon's: taken, gprofctl
    # status would say kineto down and exit 4
    kineto = "kineto:\n  socket_name: gprofd-installed-%d\n" % os.getpid()
    with open(conf, "w") as f:
        f.write("heartbeat_interval: 200ms\nlimits:\n  connections: 1\n" + kineto)
    sock = os.path.join(d, "gprofd.sock")
    argv = [gprofd] + start[1:] + ["--socket", sock, "--tcp", "off", "--metrics", "off",
                                   "--state-dir", os.path.join(d, "state")]
    p = subprocess.Popen(argv, env=dict(env, CONFIGURATION_DIRECTORY=confdir),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    log = daemonlog.DaemonLog(p.stderr, TIMEOUT)
    app = None
    try:
        assert log.wait("configuration from " + conf), log.text()
        assert log.wait(" running: unix " + sock), log.text()
        # the file's limit is in force: with one connection held, gprofctl is refused
        # (gprofctl may see the refusal as a closed socket before it reads
        # why: the daemon's log line, the journal's, is the proof)
        held = hello(sock)
        mark = log.mark()
        r = ctl(gprofctl, sock, "status")
        assert r.returncode != 0, r
        assert log.wait("its limit (limits.connections)", mark), log.text()
        held.close()

        # reload as the unit does (ExecReload, $MAINPID substituted): the new
        # limit lets a traced job and gprofctl in
        with open(conf + ".new", "w") as f:
            f.write("heartbeat_interval: 200ms\nlimits:\n  connections: 16\n" + kineto)
        os.rename(conf + ".new", conf)
        mark = log.mark()
        reload = shlex.split(svc["ExecReload"][0].replace("$MAINPID", str(p.pid)))
        subprocess.run(reload, check=True, timeout=TIMEOUT)
        assert log.wait("configuration reloaded from " + conf, mark), log.text()
        held = hello(sock)
        r = ctl(gprofctl, sock, "status")
        assert r.returncode == 0, r
        # the file the running configuration came from, gone: refused, kept
        os.rename(conf, conf + ".away")
        mark = log.mark()
        subprocess.run(reload, check=True, timeout=TIMEOUT)
        assert log.wait("reload failed, keeping the old configuration: %s is gone" % conf,
                        mark), log.text()
        r = ctl(gprofctl, sock, "status")
        assert r.returncode == 0, r
        held.close()
        os.rename(conf + ".away", conf)

        # a trace: the installed agent in a program, the installed gprofctl
        app_env = dict(env, GPROF_SOCKET=sock, NVTX_INJECTION64_PATH=agent,
                       LD_LIBRARY_PATH=os.path.dirname(agent), GPROF_JOB_ID="installed",
                       GPROF_AGENT_LOG=os.path.join(d, "agent.log"))
        app = subprocess.Popen([APP, "0"], env=app_env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert log.wait("registered pid %d" % app.pid), log.text()
        with open("/proc/%d/maps" % app.pid) as f:
            assert agent in f.read(), "agent-app did not load the installed agent"
        out = os.path.join(d, "out")
        r = ctl(gprofctl, sock, "--json", "trace", "--job", "installed", "--iterations", "3",
                "--output-dir", out, "--timeout", str(TIMEOUT))
        assert r.returncode == 0, r
        files = glob.glob(os.path.join(out, "*", "*.pt.trace.json.gz"))
        assert len(files) == 1 and os.path.getsize(files[0]) > 0, (files, r.stdout)
    finally:
        if app is not None:
            app.communicate(b"", timeout=TIMEOUT)
        # stop as systemd does: SIGTERM, and a clean exit
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(TIMEOUT)
    assert rc == 0, "exit status %d after SIGTERM:\n%s" % (rc, log.text())
    assert not os.path.exists(sock), "the socket was left behind"


if __name__ == "__main__":
    sys.exit(runner.run([test_installed_service], "gprof-installed-"))
