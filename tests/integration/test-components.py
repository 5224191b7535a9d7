#!/usr/bin/env python3
"""Degraded modes are visible (issue 26, item 4): the real gprofd, with one
of its parts taken from it by a process of this test, and the real
gprofctl. Kineto's abstract name bound first, or the metrics port busy:
gprofctl status names the part DOWN (with the name's holder) and exits 4,
--json says the same, and /metrics (or gprofctl metrics, when the HTTP port
is the part that is down) says gprofd_component_up 0 and
gprofd_component_degraded 1. No NVIDIA driver on this host is NVML absent,
not a fault (exit 0), unless sampling.gpu_required asks for GPU metrics.
Everything up: exit 0, and the trace and store figures follow a real trace.
The state directory removed under the daemon: store down, exit 4.
promtool checks every exposition.

usage: test-components.py GPROFD GPROFCTL AGENT_APP LIBGPROF_AGENT NVML_STUB
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

GPROFD, GPROFCTL, APP, AGENT, NVML_STUB = sys.argv[1:6]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from daemonlog import DaemonLog  # noqa: E402
import runner  # noqa: E402
TIMEOUT = 60
NAMES = iter(range(1000))


def until(what, fn, timeout=TIMEOUT, every=0.1):
    """Polls fn until it returns a true value: a readiness probe bounded by
    timeout (the sampler publishes every 200 ms), not a timing assumption."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(every)


def kineto_name():
    """A name of this test's own: the machine's @dynolog may be anyone's."""
    return "gprofd-comp-%d-%d" % (os.getpid(), next(NAMES))


class Daemon:
    def __init__(self, d, kineto, metrics="127.0.0.1:0", tcp="127.0.0.1:0", nvml=None,
                 extra=""):
        self.sock = os.path.join(d, "gprofd.sock")
        cfg = os.path.join(d, "gprofd.yaml")
        with open(cfg, "w") as f:
            f.write("kineto:\n  socket_name: %s\nsampling:\n  interval: 200ms\n%s%s"
                    % (kineto, "  nvml_library: %s\n" % nvml if nvml else "", extra))
        self.p = subprocess.Popen(os.environ.get("GPROFD_WRAPPER", "").split() + [
                                   GPROFD, "--config", cfg, "--socket", self.sock, "--tcp", tcp,
                                   "--metrics", metrics, "--state-dir", os.path.join(d, "state"),
                                   "-v"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        self.logs = DaemonLog(self.p.stderr, TIMEOUT)
        line = self.logs.wait(" running: ")
        assert line, "gprofd did not start:\n" + self.logs.text()
        m = re.search(r"metrics on http://[^:]+:(\d+)/metrics", self.logs.text())
        self.port = int(m.group(1)) if m else 0

    def ctl(self, *args):
        return subprocess.run([GPROFCTL, "--socket", self.sock] + list(args),
                              capture_output=True, text=True, timeout=TIMEOUT)

    def status(self):
        """gprofctl status as text and as JSON: (exit, stdout, stderr, host)."""
        t = self.ctl("status")
        j = self.ctl("status", "--json")
        assert j.returncode == t.returncode, (t, j)
        doc = json.loads(j.stdout)
        assert doc["exit"] == j.returncode, doc
        return t.returncode, t.stdout, t.stderr, doc["hosts"][0]

    def scrape(self):
        """The newest /metrics text once a sample is taken."""
        def get():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                            timeout=TIMEOUT) as r:
                    return r.read().decode()
            except urllib.error.HTTPError as e:
                assert e.code == 503, e  # the first sample not yet taken
                return None
        return until("a first sample", get)

    def ctl_metrics(self):
        """The newest sample's values through gprofctl metrics --json."""
        def get():
            r = self.ctl("metrics", "--json")
            if r.returncode != 0:
                return None
            s = json.loads(r.stdout)["hosts"][0].get("samples")
            return s[-1]["values"] if s else None
        return until("a sample in gprofctl metrics", get)

    def stop(self):
        self.p.terminate()
        assert self.p.wait(TIMEOUT) == 0, "gprofd exited with %s:\n%s" % (
            self.p.returncode, self.logs.text())


def values(text):
    return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1])
            for l in text.splitlines() if l and not l.startswith("#")}


def promtool_ok(text):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: install the Debian package prometheus (.ci/deps)"
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, "promtool: " + r.stdout + r.stderr


def parts(host):
    return {c["name"]: c for c in host["components"]}


def line_of(out, name):
    m = re.search(r"^  %s +(\S+) +(.*)$" % name, out, re.M)
    assert m, "no %s line in:\n%s" % (name, out)
    return m.group(1), m.group(2)


def test_kineto_name_taken(d):
    """A process of this test binds Kineto's name first: status exits 4 and
    names kineto down and its holder; the metric says 0 (degraded 1)."""
    name = kineto_name()
    squat = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    squat.bind("\0%s\0" % name)
    dm = Daemon(d, name)
    try:
        rc, out, err, host = dm.status()
        assert rc == 4, (rc, out, err)
        state, detail = line_of(out, "kineto")
        assert state == "DOWN", out
        assert "@%s" % name in detail and "held by pid %d (python3" % os.getpid() in detail, out
        assert "kineto down" in err and host["degraded"] is True, (err, host)
        k = parts(host)["kineto"]
        assert k["state"] == "down" and k["degraded"] is True, k
        assert "pid %d" % os.getpid() in k["detail"] and "uid %d" % os.getuid() in k["detail"], k
        # the rest is up and said so
        assert parts(host)["unix"]["state"] == "up" and parts(host)["metrics"]["state"] == "up"
        assert not any(c["degraded"] for n, c in parts(host).items() if n != "kineto"), host
        text = dm.scrape()
        v = values(text)
        assert v['gprofd_component_up{component="kineto"}'] == 0, text
        assert v['gprofd_component_degraded{component="kineto"}'] == 1, text
        assert v['gprofd_component_up{component="unix"}'] == 1, text
        promtool_ok(text)
    finally:
        dm.stop()
        squat.close()


def test_metrics_port_busy(d):
    """The metrics port held by a listener of this test: status exits 4 and
    names metrics down with the address; sampling goes on, so gprofctl
    metrics says gprofd_component_up{component="metrics"} 0."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    dm = Daemon(d, kineto_name(), metrics="127.0.0.1:%d" % port)
    try:
        rc, out, err, host = dm.status()
        assert rc == 4, (rc, out, err)
        state, detail = line_of(out, "metrics")
        assert state == "DOWN" and "cannot listen on 127.0.0.1:%d" % port in detail, out
        assert "metrics down" in err, err
        m = parts(host)["metrics"]
        assert m["state"] == "down" and m["degraded"] is True, m
        assert parts(host)["kineto"]["state"] == "up", host
        v = dm.ctl_metrics()
        assert v['gprofd_component_up{component="metrics"}'] == 0, v
        assert v['gprofd_component_degraded{component="metrics"}'] == 1, v
        assert v['gprofd_component_up{component="kineto"}'] == 1, v
    finally:
        dm.stop()
        busy.close()


def test_nvml_absent_is_not_degraded(d):
    """No NVIDIA driver here: NVML is absent, not down, and status exits 0;
    with sampling.gpu_required the same host is degraded (exit 4)."""
    missing = os.path.join(d, "no-such-libnvidia-ml.so.1")  # as on a host with no driver
    os.makedirs(os.path.join(d, "a"))
    dm = Daemon(os.path.join(d, "a"), kineto_name(), nvml=missing)
    try:
        rc, out, err, host = dm.status()
        assert rc == 0, (rc, out, err)
        state, detail = line_of(out, "nvml")
        assert state == "absent" and "NVML not loaded" in detail, out
        n = parts(host)["nvml"]
        assert n["state"] == "absent" and n["degraded"] is False, n
        text = dm.scrape()
        v = values(text)
        assert v['gprofd_component_up{component="nvml"}'] == 0, text
        assert v['gprofd_component_degraded{component="nvml"}'] == 0, text
        promtool_ok(text)
    finally:
        dm.stop()
    os.makedirs(os.path.join(d, "b"))
    dm = Daemon(os.path.join(d, "b"), kineto_name(), nvml=missing,
                extra="  gpu_required: true\n")
    try:
        rc, out, err, host = dm.status()
        assert rc == 4, (rc, out, err)
        state, detail = line_of(out, "nvml")
        assert state == "DOWN" and "sampling.gpu_required" in detail, out
        assert "nvml down" in err, err
    finally:
        dm.stop()


def test_everything_up(d):
    """Every part up (NVML the stand-in, tls off): exit 0, the build named;
    a real trace moves gprofd_traces_total{outcome="done"} and the store's
    figures, in /metrics and in status."""
    dm = Daemon(d, kineto_name(), nvml=NVML_STUB)
    env = dict(os.environ, GPROF_SOCKET=dm.sock, NVTX_INJECTION64_PATH=AGENT,
               GPROF_JOB_ID="compjob", GPROF_AGENT_LOG=os.path.join(d, "agent.log"))
    app = subprocess.Popen([APP, "0"], env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        assert dm.logs.wait("registered pid %d" % app.pid), dm.logs.text()
        rc, out, err, host = dm.status()
        assert rc == 0, (rc, out, err)
        want = {"unix": "up", "tcp": "up", "tls": "off", "metrics": "up", "kineto": "up",
                "nvml": "up", "store": "up"}
        assert {n: c["state"] for n, c in parts(host).items()} == want, host
        assert host["degraded"] is False and host["commit"], host
        assert line_of(out, "nvml") == ("up", "2 GPUs"), out
        assert line_of(out, "store")[1].startswith(os.path.join(d, "state", "traces")), out
        assert host["store_free_bytes"] > 0, host
        assert err == "", err
        r = dm.ctl("trace", "--job", "compjob", "--iterations", "2", "--output-dir",
                   os.path.join(d, "out"), "--timeout", str(TIMEOUT))
        assert r.returncode == 0, (r.stdout, r.stderr)

        def traced():
            v = values(dm.scrape())
            return v if v.get('gprofd_traces_total{outcome="done"}') == 1 else None
        v = until("the trace in gprofd_traces_total", traced)
        assert v["gprofd_store_traces"] == 1 and v["gprofd_store_bytes"] > 0, v
        assert v["gprofd_store_free_bytes"] > 0, v
        assert v['gprofd_traces_total{outcome="failed"}'] == 0, v
        assert all(v['gprofd_component_degraded{component="%s"}' % n] == 0 for n in want), v
        assert all(v['gprofd_component_up{component="%s"}' % n] == (s == "up")
                   for n, s in want.items()), v
        build = [k for k in v if k.startswith("gprofd_build_info{")]
        assert build == ['gprofd_build_info{version="%s",commit="%s"}' % (
            host["version"], host["commit"])], build
        promtool_ok(dm.scrape())
        rc, out, err, host = dm.status()
        assert rc == 0 and host["stored_traces"] == 1, (rc, host)
        assert re.search(r": 1 trace, [0-9.]+ [kM]?B; [0-9.]+ [kMG]?B free$",
                         line_of(out, "store")[1]), out
    finally:
        app.stdin.close()
        app.wait(TIMEOUT)
        dm.stop()


def test_store_gone(d):
    """The state directory removed under a running daemon (traces could no
    longer be stored): store down with the reason, status exits 4."""
    dm = Daemon(d, kineto_name(), metrics="off")
    try:
        rc, out, err, host = dm.status()
        assert rc == 0 and parts(host)["store"]["state"] == "up", (rc, out, err)
        shutil.rmtree(os.path.join(d, "state"))

        # the store's filesystem is read each second, off the loop
        until("the store down in gprofctl status", lambda: dm.ctl("status").returncode == 4)
        rc, out, err, host = dm.status()
        assert rc == 4, (rc, out, err)
        state, detail = line_of(out, "store")
        assert state == "DOWN" and "cannot read its filesystem" in detail, out
        assert "store down" in err and parts(host)["store"]["degraded"] is True, (err, host)
        assert parts(host)["metrics"]["state"] == "off", host  # off is no fault
    finally:
        dm.stop()


if __name__ == "__main__":
    sys.exit(runner.run([test_kineto_name_taken, test_metrics_port_busy,
                         test_nvml_absent_is_not_degraded, test_everything_up, test_store_gone],
                        "gprof-comp-"))
