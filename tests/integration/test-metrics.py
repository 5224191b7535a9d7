#!/usr/bin/env python3
"""The metrics export end to end, on known inputs: gprofd sampling the
fixture /proc tree (tests/fixtures/host-a) and the NVML stand-in
(tests/unit/nvml_stub.c), with an agent-loaded program for the process
metrics. Checks the /metrics text (exact values), `promtool check
metrics`, the JSON lines file and its rotation, `gprofctl metrics`, and a
real Prometheus server scraping gprofd and answering a query.

usage: test-metrics.py GPROFD GPROFCTL AGENT_APP LIBGPROF_AGENT NVML_STUB FIXTURES
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
import urllib.parse
import urllib.request

GPROFD, GPROFCTL, APP, AGENT, NVML_STUB, FIXTURES = sys.argv[1:7]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from daemonlog import DaemonLog  # noqa: E402
import runner  # noqa: E402
TIMEOUT = 60


def until(what, fn, timeout=TIMEOUT, every=0.1):
    """Polls fn (an HTTP endpoint's state) until it returns a true value;
    a readiness probe bounded by timeout, not a timing assumption."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(every)


class Daemon:
    def __init__(self, d, extra_yaml="", proc_root=None, history="300s"):
        self.sock = os.path.join(d, "gprofd.sock")
        self.jsonl = os.path.join(d, "metrics.jsonl")
        cfg = os.path.join(d, "gprofd.yaml")
        with open(cfg, "w") as f:
            f.write("metrics: 127.0.0.1:0\nheartbeat_interval: 200ms\n"
                    "sampling:\n  interval: 200ms\n  proc_root: %s\n  nvml_library: %s\n"
                    "  history: %s\n"
                    "export:\n  jsonl: %s\n  jsonl_max_bytes: 16KiB\n%s"
                    % (proc_root or os.path.join(FIXTURES, "host-a"), NVML_STUB, history,
                       self.jsonl, extra_yaml))
        # $GPROFD_WRAPPER: words put before the daemon (tests/valgrind.sh)
        self.p = subprocess.Popen(os.environ.get("GPROFD_WRAPPER", "").split() + [
                                   GPROFD, "--config", cfg, "--socket", self.sock, "--tcp", "off",
                                   "--state-dir", os.path.join(d, "state"), "-v"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        self.logs = DaemonLog(self.p.stderr, TIMEOUT)
        line = self.wait("metrics on http://")
        self.port = int(re.search(r":(\d+)/metrics", line).group(1))
        self.wait(" running: ")

    def wait(self, needle):
        line = self.logs.wait(needle)
        if line is None:
            raise AssertionError("gprofd never logged %r:\n%s" % (needle, self.logs.text()))
        return line

    def get(self, path="/metrics"):
        try:
            # (the timeout is a hang guard: a scrape is judged by its answer)
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                        timeout=TIMEOUT) as r:
                return r.status, r.headers.get("Content-Type"), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, None, e.read().decode()

    def stop(self):
        self.p.terminate()
        assert self.p.wait(TIMEOUT) == 0, "gprofd exited with %s" % self.p.returncode


def metric_lines(text):
    return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1])
            for l in text.splitlines() if l and not l.startswith("#")}


def test_exposition(d):
    """/metrics: exact values from the fixtures, HELP/TYPE for every family,
    the right content type, 404 elsewhere; promtool accepts it."""
    dm = Daemon(d)
    try:
        status, ctype, text = until("a first sample",
                                    lambda: (lambda r: r if r[0] == 200 else None)(dm.get()))
        assert ctype.startswith("text/plain; version=0.0.4"), ctype
        m = metric_lines(text)
        want = {
            "gprofd_memory_total_bytes": 16777216000,
            "gprofd_memory_used_bytes": 8388608000,
            'gprofd_cpu_seconds_total{cpu="all",mode="user"}': 10,
            'gprofd_network_receive_bytes_total{device="eth0"}': 9876543210,
            'gprofd_disk_read_bytes_total{device="sda"}': 10240000,
            "gprofd_load5": 1.25,
            "gprofd_nvml_up": 1,
            "gprofd_gpus": 2,
            'gprofd_gpu_utilization_ratio{gpu="0",uuid="GPU-stub-0"}': 0.5,
            'gprofd_gpu_power_watts{gpu="1",uuid="GPU-stub-1"}': 301,
            'gprofd_gpu_energy_joules_total{gpu="0",uuid="GPU-stub-0"}': 1000,
        }
        for k, v in want.items():
            assert m.get(k) == v, "%s = %r, expected %r" % (k, m.get(k), v)
        assert m["gprofd_sample_duration_seconds"] > 0
        families = {l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ")}
        helped = {l.split()[2] for l in text.splitlines() if l.startswith("# HELP ")}
        names = {re.match(r"[a-z_0-9]+", k).group(0) for k in m}
        assert names == families == helped, (names ^ families, names ^ helped)
        assert all(n.startswith("gprofd_") for n in names)
        counters = [l.split()[2] for l in text.splitlines()
                    if l.startswith("# TYPE ") and l.endswith(" counter")]
        assert counters and all(c.endswith("_total") for c in counters), counters
        assert dm.get("/nothing")[0] == 404
        promtool = shutil.which("promtool")
        assert promtool, "promtool is missing: install the Debian package prometheus (.ci/deps)"
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, "promtool: " + r.stdout + r.stderr
    finally:
        dm.stop()


def test_jsonl_and_ctl(d):
    """JSON lines (one object a sample, rotated past the size limit),
    gprofctl metrics as a table and as JSON, and an agent's step metrics."""
    dm = Daemon(d)
    app = subprocess.Popen([APP, "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           env=dict(os.environ, GPROF_SOCKET=dm.sock, GPROF_JOB_ID="mjob",
                                    RANK="2", NVTX_INJECTION64_PATH=AGENT))
    try:
        dm.wait("registered pid %d" % app.pid)
        until("the JSON lines file to rotate", lambda: os.path.exists(dm.jsonl + ".1"))
        for path in (dm.jsonl + ".1",):
            lines = open(path).read().splitlines()
            assert lines, path
            for l in lines:
                o = json.loads(l)
                assert o["host"] and o["ts_us"] > 0
                assert o["metrics"]["gprofd_memory_total_bytes"] == 16777216000
        assert os.path.getsize(dm.jsonl + ".1") >= 16 * 1024

        def steps():
            r = subprocess.run([GPROFCTL, "--socket", dm.sock, "metrics", "--json"],
                               capture_output=True, text=True, timeout=TIMEOUT)
            assert r.returncode == 0, r.stderr
            h = json.loads(r.stdout)["hosts"][0]
            v = h["samples"][-1]["values"]
            key = 'gprofd_process_steps_total{job="mjob",rank="2",pid="%d",host="%s"}' % (
                app.pid, socket.gethostname())
            return v if v.get(key, 0) > 0 and any(
                k.startswith("gprofd_process_median_step_seconds") for k in v) else None
        v = until("the agent's steps in gprofctl metrics", steps)
        assert v['gprofd_gpu_memory_total_bytes{gpu="1",uuid="GPU-stub-1"}'] == 80000000000
        r = subprocess.run([GPROFCTL, "--socket", dm.sock, "metrics"], capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert "CPU      -  memory 7.8/15.6 GiB" in out, out  # fixture counters stand still
        assert re.search(r"\n  0 +50% +- +0\.9/ 74\.5 GiB +300 W +60 C +1980 MHz\n", out), out
        assert re.search(r"\n  mjob +2 +%d +\d+ " % app.pid, out), out
    finally:
        app.stdin.close()
        app.wait(TIMEOUT)
        dm.stop()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_prometheus_scrapes(d):
    """A real Prometheus server scrapes gprofd and answers a query."""
    prom = shutil.which("prometheus")
    assert prom, "prometheus is missing: install the Debian package prometheus (.ci/deps)"
    dm = Daemon(d)
    port = free_port()
    cfg = os.path.join(d, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gprofd\n"
                "    static_configs:\n      - targets: ['127.0.0.1:%d']\n" % dm.port)
    p = subprocess.Popen([prom, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
                          "--web.listen-address=127.0.0.1:%d" % port],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "prom.log"), "w"))
    try:
        def query():
            url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (
                port, urllib.parse.quote('gprofd_gpu_power_watts{gpu="1"}'))
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    res = json.loads(r.read())["data"]["result"]
                    return res if res else None
            except (urllib.error.URLError, ConnectionError, KeyError):
                return None
        res = until("Prometheus to answer a query for a gprofd series", query, timeout=90,
                    every=0.5)
        assert float(res[0]["value"][1]) == 301, res
        assert res[0]["metric"]["uuid"] == "GPU-stub-1", res
    except AssertionError:
        print(open(os.path.join(d, "prom.log")).read()[-3000:])
        raise
    finally:
        p.terminate()
        p.wait(TIMEOUT)
        dm.stop()


def later_sample(dm, text):
    """The values of a sample taken after the scrape that returned text (its
    exposition was rendered after that one: gprofd_metrics_http_renders_total
    counts renders as of each sample), polled for: the endpoint's own counts
    of what it holds then."""
    seen = metric_lines(text)["gprofd_metrics_http_renders_total"]

    def newer():
        st, _, t = dm.get()
        m = metric_lines(t) if st == 200 else {}
        return m if m.get("gprofd_metrics_http_renders_total", -1) > seen else None
    return until("a sample after the scrape", newer)


def raw_http(port, data, read=True, source="127.0.0.1"):
    """Sends bytes (from the loopback address source), returns what comes
    back before the server closes (or TIMEOUT passes: a hang guard)."""
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT, source_address=(source, 0))
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # the server answered and closed before the whole of an
            # oversized request was sent (a close is an answer): what it
            # sent before closing is read below
            if not read:
                s.close()
                raise
        if not read:
            return s
        got = b""
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            got += b
        return got
    finally:
        if read:
            s.close()


def test_hostile_http(d):
    """The metrics endpoint (issue 15): malformed requests, an oversized
    header, a 1 MB body, and 30 slow clients holding connections open with
    half a request, then 200 more from the same address: each bad request
    gets an error status or a close, the endpoint keeps serving /metrics
    meanwhile (test_slow_clients: from the same address too), and what the
    endpoint counts it holds stays bounded: at most 128 connections (each
    with at most 32 KiB of request) and the exposition once or twice."""
    dm = Daemon(d)
    try:
        until("a first sample", lambda: dm.get()[0] == 200)
        for req in (b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"\x00\x01\x02\xff" * 64 + b"\r\n\r\n",
                    b"GET /metrics HTTP/9.9\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n",
                    b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" +
                    b"b" * (1 << 20)):
            got = raw_http(dm.port, req)
            assert got == b"" or got.startswith(b"HTTP/1.1 4") or got.startswith(b"HTTP/1.0 4") \
                or got.startswith(b"HTTP/1.1 5"), (req[:40], got[:200])
        slow = [raw_http(dm.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n", read=False)
                for _ in range(30)]
        try:
            for _ in range(3):
                status, _, text = dm.get()
                assert status == 200 and "gprofd_" in text, status
            # more slow clients than the endpoint keeps (128): a scraper at
            # another address is served at once all the same
            for _ in range(200):
                try:
                    slow.append(raw_http(dm.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n",
                                         read=False))
                except OSError:
                    pass  # refused past the limit: what is asked for
            got = raw_http(dm.port, b"GET /metrics HTTP/1.0\r\n\r\n", source="127.0.0.2")
            assert got.split(b"\r\n", 1)[0].endswith(b" 200 OK") and b"gprofd_" in got, got[:200]
            # with the slow clients still there
            text = got.split(b"\r\n\r\n", 1)[1].decode()
            m = later_sample(dm, text)
            assert m["gprofd_metrics_http_connections"] <= 128, m
            assert m["gprofd_metrics_http_response_bytes"] <= 2 * len(text) + 65536, m
        finally:
            for s in slow:
                s.close()
        assert dm.p.poll() is None
    finally:
        dm.stop()


# What a hostile local user runs (as nobody): registers one process per
# (job id, host) pair it is given, straight over the native protocol, and
# keeps them registered until its stdin closes. One fork per pair, since
# the daemon takes one registration per process.
REGISTRANT = r"""
import json, os, socket, struct, sys
def call(s, o):
    b = json.dumps(o).encode()
    s.sendall(struct.pack("<I", len(b)) + b)
    n = struct.unpack("<I", s.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(s.recv(n, socket.MSG_WAITALL))
kids = []
for i, (job, host) in enumerate(json.loads(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        assert call(s, {"type": "hello", "id": 1, "proto_min": 1, "proto_max": 1,
                        "role": "agent", "software": "hostile"})["type"] == "hello_reply"
        r = call(s, {"type": "register", "id": 2, "pid": os.getpid(), "job_id": job,
                     "host": host})
        assert r["type"] == "register_reply", r
        os.write(1, b"registered %d %d\n" % (i, os.getpid()))  # one write: whole lines
        sys.stdin.read()
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
"""


def system_python():
    """A python another user may run (sys.executable may sit under /root)."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(p, os.X_OK):
            return p
    raise AssertionError("no /usr/bin/python3 for the test's second user")


def as_nobody():
    import pwd
    pw = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


def label_values(line):
    """The label values of one exposition line, unescaped; raises on a
    label list the text format does not allow (what promtool rejects)."""
    m = re.match(r'^[a-z_0-9]+\{(.*)\} \S+$', line)
    assert m, line
    body, vals, i = m.group(1), {}, 0
    while i < len(body):
        k = re.match(r'([a-z_]+)="', body[i:])
        assert k, (line, body[i:])
        i += k.end()
        v = ""
        while body[i] != '"':
            if body[i] == "\\":
                assert body[i + 1] in 'n"\\', line
                v += {"n": "\n", '"': '"', "\\": "\\"}[body[i + 1]]
                i += 2
            else:
                v += body[i]
                i += 1
        vals[k.group(1)] = v
        i += 1
        if i < len(body):
            assert body[i] == ",", line
            i += 1
    return vals


def test_hostile_labels(d):
    """Issue 23, item 10: a job id of 59 x a followed by \"x (and others
    that put a backslash, a quote or a multi-byte character at
    the length limit, in the job id and in the host name) registered by an
    ordinary user (nobody) once broke the whole exposition: the escaped
    value was cut after its backslash. Each value must now be escaped in
    full, cut only at a whole character of the raw value: promtool accepts
    the scrape, and every such process has its series, its labels a prefix
    of what it registered."""
    os.chmod(d, 0o755)  # nobody reaches the socket in it
    dm = Daemon(d)
    pairs = [("a" * 59 + '"x', "h")]
    for k in (55, 56, 57, 58):
        for tail in ('"x', "\\y", "\u00e9", "\U0001F600"):  # the schema refuses a newline
            pairs.append(("a" * k + tail, "h"))
    pairs += [("j", "b" * 57 + "\\\\"), ("j", "c" * 56 + '"' * 5), ("\\" * 128, '"' * 255)]
    p = subprocess.Popen([system_python(), "-c", REGISTRANT, dm.sock, json.dumps(pairs)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=as_nobody)
    try:
        pids = [0] * len(pairs)
        for _ in pairs:
            w = p.stdout.readline().split()
            pids[int(w[1])] = int(w[2])

        def scraped():
            status, _, text = dm.get()
            lines = [l for l in text.splitlines() if l.startswith("gprofd_process_steps_total")]
            return text if status == 200 and len(lines) == len(pairs) else None
        text = until("every hostile process in /metrics", scraped)
        promtool = shutil.which("promtool")
        assert promtool, "promtool is missing: install the Debian package prometheus (.ci/deps)"
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, "promtool: " + r.stdout + r.stderr + text
        seen = {}
        for l in text.splitlines():
            if l.startswith("gprofd_process_steps_total"):
                v = label_values(l)
                seen[int(v["pid"])] = (v["job"], v["host"])
        assert sorted(seen) == sorted(pids), (seen, pids)
        for pid, (job, host) in zip(pids, pairs):
            got = seen[pid]
            assert job.startswith(got[0]) and host.startswith(got[1]), (job, host, got)
            # cut only where the whole escaped value would not fit 58 bytes
            for raw, cut in ((job, got[0]), (host, got[1])):
                esc = lambda x: x.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                assert len(esc(cut).encode()) <= 58, cut
                if cut != raw:
                    assert len(esc(raw[:len(cut) + 1]).encode()) > 58, (raw, cut)
        # gprofctl metrics (root) lists the same series
        r = subprocess.run([GPROFCTL, "--socket", dm.sock, "metrics", "--json"],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        v = json.loads(r.stdout)["hosts"][0]["samples"][-1]["values"]
        assert len([k for k in v if k.startswith("gprofd_process_steps_total")]) == len(pairs), v
    finally:
        p.stdin.close()
        p.wait(TIMEOUT)
        dm.stop()


class Dribblers:
    """Slow HTTP clients, as an ordinary local user can open them: each sends
    the start of a request and then one more header byte every `every`
    seconds (a byte every 3 s in the report; faster here, so libmicrohttpd's
    10 s idle timeout could never be what ends them), never finishing."""
    def __init__(self, port, every=0.5):
        import threading
        self.port, self.every, self.socks, self.lock = port, every, [], threading.Lock()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def open(self, n):
        opened = []
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                opened.append((s, time.monotonic()))
            except OSError:
                pass  # refused: counted by the caller
        with self.lock:
            self.socks += opened
        return [s for s, _ in opened]

    def _run(self):
        while not self.stop.wait(self.every):
            with self.lock:
                socks = [s for s, _ in self.socks]
            for s in socks:
                try:
                    s.send(b"a")
                except OSError:
                    pass  # closed by the server

    def closed(self, s, within=TIMEOUT):
        """True when the server has closed s (EOF or reset) within `within` s
        (a hang guard where a close is expected)."""
        s.settimeout(within)
        try:
            while True:
                b = s.recv(4096)
                if not b:
                    return True
        except socket.timeout:
            return False
        except OSError:
            return True

    def close(self):
        self.stop.set()
        self.t.join()
        for s, _ in self.socks:
            s.close()


def test_slow_clients(d):
    """Issue 23, item 11: 70 slow clients from 127.0.0.1 (the address every
    local user shares) once held every connection the endpoint allowed that
    address, for as long as they dribbled, and every local scrape was
    refused. Scrapes from 127.0.0.1 must be answered while 70 dribble, and
    still while 370 do (past libmicrohttpd's 256: the oldest are closed to
    make room), and a dribbler is closed once its request is 10 s old.
    What is asserted is what happens (answered, closed, kept, counted),
    never how fast: the waits are hang guards."""
    dm = Daemon(d)
    dr = Dribblers(dm.port)
    try:
        until("a first sample", lambda: dm.get()[0] == 200)
        first = dr.open(70)
        assert len(first) == 70
        for _ in range(3):
            try:
                status, _, text = dm.get()
            except (ConnectionError, urllib.error.URLError, OSError) as e:
                raise AssertionError("a scrape from 127.0.0.1 failed while 70 slow "
                                     "clients dribbled: %r" % e)
            assert status == 200 and "gprofd_load1 " in text, status
        flood = dr.open(300)
        status, _, text = dm.get()
        assert status == 200 and "gprofd_load1 " in text, status
        # the endpoint keeps at most 128: the oldest (all of `first`) went
        assert all(dr.closed(s) for s in first), "the oldest slow clients are still open"
        import select
        gone, _, _ = select.select(flood[-100:], [], [], 0.5)  # readable: EOF or reset
        assert len(gone) <= 10, len(gone)  # the newest are kept
        # counted (exported by the sampler: a sample after the flood shows it)
        until("370 - 128 closes counted", lambda: metric_lines(dm.get()[2])[
            "gprofd_metrics_http_evicted_total"] >= 370 - 128)
        # the deadline: a dribbler whose request began 10 s ago is closed at
        # the next connection (a scrape), however steadily it dribbles. The
        # flood is let go first (closed by this side), so that no other rule
        # can close it: the 128 kept make room for a newcomer only after 127
        # more connections, and it waits here for at most 60 scrapes.
        for s in flood:
            s.close()
        late = dr.open(1)[0]
        assert dm.get()[0] == 200
        assert not dr.closed(late, within=0.2), "a young request was closed"
        before = metric_lines(dm.get()[2])["gprofd_metrics_http_evicted_total"]
        scrapes, gone = 0, False
        while scrapes < 60 and not gone:
            assert dm.get()[0] == 200
            scrapes += 1
            gone = dr.closed(late, within=1)
        assert gone, "a request older than 10 s was not closed (%d scrapes, one a second)" % scrapes
        # closed by the daemon's rule, and counted (the next sample shows it)
        until("the close counted", lambda: metric_lines(dm.get()[2])[
            "gprofd_metrics_http_evicted_total"] > before)
        assert dm.p.poll() is None
    finally:
        dr.close()
        dm.stop()


def test_silent_and_greedy_clients(d):
    """Issue 23, beyond item 11: the other ways one local user could hold
    the endpoint's connections: 100 clients that connect and send nothing,
    100 that send a whole request and never read the answer (a tiny receive
    buffer), and one that pipelines a thousand requests. Scrapes from
    127.0.0.1 are answered meanwhile (before: refused once 32 were open
    from that address). Oversized requests get their 4xx at once: a 100 KB
    URL 414, 20,000 headers 431, an endless chunked POST its 405 and a close."""
    dm = Daemon(d)
    held = []
    try:
        until("a first sample", lambda: dm.get()[0] == 200)
        for _ in range(100):
            held.append(socket.create_connection(("127.0.0.1", dm.port), timeout=TIMEOUT))
        for _ in range(100):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.connect(("127.0.0.1", dm.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 3)
            held.append(s)
        s = socket.create_connection(("127.0.0.1", dm.port), timeout=TIMEOUT)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 1000)
        held.append(s)
        for _ in range(3):
            try:
                status, _, text = dm.get()
            except (ConnectionError, urllib.error.URLError, OSError) as e:
                raise AssertionError("a scrape from 127.0.0.1 failed while 201 "
                                     "connections were held: %r" % e)
            assert status == 200 and "gprofd_load1 " in text, status
        got = raw_http(dm.port, b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 414"), got[:80]
        got = raw_http(dm.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 20000
                       + b"\r\n")
        assert got.startswith(b"HTTP/1.1 431"), got[:80]
        # an endless chunked body: closed once its 405 is sent, so what gets
        # through is what the socket buffers hold (a few MB), not 256 MB
        s = socket.create_connection(("127.0.0.1", dm.port), timeout=TIMEOUT)
        s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk, sent = b"1000\r\n" + b"z" * 4096 + b"\r\n", 0
        try:
            while sent < 256 << 20:
                s.sendall(chunk)
                sent += len(chunk)
            raise AssertionError("an endless chunked body was still read after 256 MB")
        except socket.timeout:
            raise AssertionError("an endless chunked body neither read nor closed (%d bytes sent)"
                                 % sent)
        except OSError:
            pass  # closed by the server: what is asked for
        finally:
            s.close()
        assert dm.p.poll() is None
    finally:
        for s in held:
            s.close()
        dm.stop()


def test_greedy_clients_big_exposition(d):
    """Issue 23, beyond item 11: on a host with 4,096 CPUs (a fixture /proc:
    a 1.7 MB exposition), 100 clients each send one request and never read.
    Each request once cost a render of the whole exposition, on the one HTTP
    thread and under the lock the daemon's loop also takes, and pinned its
    own copy: a scrape behind them waited 5 s, and memory grew by a copy per
    client (173 MB). Now a sample is rendered once and every scrape of it
    shares the response: by the endpoint's own counts, no more renders than
    samples, and no more exposition bytes held than one per sample taken
    while the clients were there."""
    root = os.path.join(d, "host-big")
    shutil.copytree(os.path.join(FIXTURES, "host-a"), root)
    with open(os.path.join(root, "proc", "stat"), "w") as f:
        f.write("cpu  1000 20 300 5000 40 5 6 7 0 0\n")
        f.writelines("cpu%d 600 10 200 2000 30 3 4 5 0 0\n" % i for i in range(4096))
        f.write("intr 123456 0 0\n")
    dm = Daemon(d, proc_root=root, history="0s")  # no history ring: memory stands still
    held = []
    try:
        until("a first sample", lambda: dm.get()[0] == 200)
        t0 = time.monotonic()
        assert len(dm.get()[2]) > 1500000
        alone = time.monotonic() - t0  # one scrape, rendered, with nobody else
        before = metric_lines(dm.get()[2])
        for _ in range(100):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.connect(("127.0.0.1", dm.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            held.append(s)
        t0 = time.monotonic()
        status, _, text = dm.get()
        took = time.monotonic() - t0
        assert status == 200 and "gprofd_load1 " in text, status
        m = later_sample(dm, text)  # the clients still hold their answers
        samples = m["gprofd_samples_total"] - before["gprofd_samples_total"]
        renders = m["gprofd_metrics_http_renders_total"] - \
            before["gprofd_metrics_http_renders_total"]
        kept = m["gprofd_metrics_http_response_bytes"]
        print("  a scrape alone: %.0f ms; behind 100 greedy clients: %.0f ms; %d renders in "
              "%d samples; %.1f MB of expositions held" % (alone * 1000, took * 1000, renders,
                                                         samples, kept / 1e6))
        # The counts tell the two apart (before: a render per request, 100
        # expositions of 1.7 MB held by the clients). The wait is printed,
        # not asserted: on a busy 2-core machine it was 4.6-4.8 s before and
        # 0.5-1.4 s after (mostly the kernel taking the 100 answers into its
        # buffers), too close to hold a bound on every CI machine.
        assert m["gprofd_metrics_http_renders_total"] <= m["gprofd_samples_total"], m
        assert kept <= (samples + 1) * len(text) * 1.1, (kept, samples, len(text))
    finally:
        for s in held:
            s.close()
        dm.stop()


def main():
    tests = [test_exposition, test_jsonl_and_ctl, test_prometheus_scrapes, test_hostile_http,
             test_hostile_labels, test_slow_clients, test_silent_and_greedy_clients,
             test_greedy_clients_big_exposition]
    only = os.environ.get("GPROF_TEST")  # one test by name, when debugging
    return runner.run([t for t in tests if not only or t.__name__ == only], "gprof-metrics-")


if __name__ == "__main__":
    sys.exit(main())
