#!/usr/bin/env python3
"""TLS on gprofd's tls.listen and gprofctl --tls (issue 15), with real
certificates this test makes with the openssl tool: a CA, the daemon's
certificate (127.0.0.1 and localhost), one for another name, a second CA,
client certificates from each.

- a trace taken and downloaded through a relay that records the bytes: the
  file arrives whole, and neither the job id nor any 64 bytes of the trace
  cross the wire in clear (the same relay in front of the plain port sees
  the job id: the check can fail);
- refusals say why: an unknown CA, a certificate for another name, a plain
  client on the TLS port, a TLS client on the plain port, bytes that are
  no TLS, a handshake never finished (limits.hello_timeout); the daemon
  stays up through all of them;
- mutual TLS (tls.client_ca): no certificate, or one from another CA, is
  refused in the handshake; the right one is let in;
- the token still decides over TLS (loopback_identity: false);
- SIGHUP re-reads the certificate (rotation); a broken one keeps the old;
- bad settings fail --check-config with what to do (a key others can
  read among them).

usage: test-tls.py GPROFD GPROFCTL AGENT_APP LIBGPROF_AGENT
"""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading

GPROFD, GPROFCTL, APP, AGENT = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import daemonlog  # noqa: E402
import runner  # noqa: E402

TIMEOUT = 30


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key",
            "-out", name + ".crt", "-days", "2", "-subj", "/CN=" + name, cwd=d)


def make_cert(d, name, ca, san, client=False):
    """name.crt/name.key signed by ca, for the subjectAltName san."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out",
            name + ".csr", "-subj", "/CN=" + name, cwd=d)
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=%s\n" %
                (san, "clientAuth" if client else "serverAuth"))
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext",
            cwd=d)
    os.chmod(os.path.join(d, name + ".key"), 0o600)


def pki(d):
    k = os.path.join(d, "pki")
    os.makedirs(k)
    make_ca(k, "ca")
    make_ca(k, "other-ca")
    make_cert(k, "server", "ca", "IP:127.0.0.1,DNS:localhost")
    make_cert(k, "server-elsewhere", "ca", "DNS:elsewhere.example")
    make_cert(k, "server2", "other-ca", "IP:127.0.0.1,DNS:localhost")
    make_cert(k, "client", "ca", "DNS:client", client=True)
    make_cert(k, "rogue", "other-ca", "DNS:client", client=True)
    return lambda name: os.path.join(k, name)


def tls_yaml(p, cert="server", extra=""):
    return ("tls:\n  listen: 127.0.0.1:0\n  cert: %s\n  key: %s\n%s" %
            (p(cert + ".crt"), p(cert + ".key"), extra))


def start(d, yaml, name="d", tcp="127.0.0.1:0"):
    sub = os.path.join(d, name)
    os.makedirs(sub)
    dm = daemonlog.Daemon(GPROFD, sub, TIMEOUT, yaml=yaml, tcp=tcp)
    line = dm.wait(" running: ")
    dm.tls_port = int(line.split("tls port ")[1].split(",")[0]) if "tls port " in line else 0
    assert dm.tls_port > 0, line
    return dm


def ctl(port, *args, tls=True, ca=None, opts=()):
    argv = [GPROFCTL, "--host", "127.0.0.1:%d" % port, "--timeout", "20"] + list(opts)
    if tls:
        argv += ["--tls"] + (["--tls-ca", ca] if ca else [])
    return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=TIMEOUT)


def status_ok(port, ca, opts=()):
    r = ctl(port, "--json", "status", ca=ca, opts=opts)
    return r.returncode == 0 and json.loads(r.stdout)["hosts"][0]["version"] != "", r


class Relay:
    """127.0.0.1:port -> target, recording every byte either way."""

    def __init__(self, target):
        self.target = target
        self.seen = bytearray()
        self.lock = threading.Lock()
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                a, _ = self.srv.accept()
            except OSError:
                return
            b = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()
            threading.Thread(target=self._pump, args=(b, a), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                buf = src.recv(65536)
                if not buf:
                    break
                with self.lock:
                    self.seen += buf
                dst.sendall(buf)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.srv.close()


def trace_through(dm, d, port, tls, job, ca):
    """A trace of job (agent-app) requested and downloaded over port; the
    downloaded file's bytes."""
    env = dict(os.environ, GPROF_SOCKET=dm.sock, NVTX_INJECTION64_PATH=AGENT, GPROF_JOB_ID=job,
               GPROF_AGENT_LOG=os.path.join(d, job + ".log"), GPROF_AGENT_TRACE_DIR=d)
    app = subprocess.Popen([APP, "0"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    try:
        assert dm.wait("registered pid %d" % app.pid), dm.log()
        out = os.path.join(d, "out-" + job)
        r = ctl(port, "--json", "trace", "--job", job, "--duration-ms", "300", "--output-dir",
                out, tls=tls, ca=ca)
        assert r.returncode == 0, (r.stdout, r.stderr, dm.log())
    finally:
        app.communicate(b"", timeout=TIMEOUT)
    files = glob.glob(os.path.join(out, "**", "*.pt.trace.json.gz"), recursive=True)
    assert len(files) == 1, files
    with open(files[0], "rb") as f:
        return f.read(), json.loads(r.stdout)["trace_id"]


def test_trace_crosses_encrypted(d):
    p = pki(d)
    dm = start(d, tls_yaml(p))
    try:
        relay = Relay(dm.tls_port)
        job = "tls-job-7f3a9c"
        data, tid = trace_through(dm, d, relay.port, True, job, p("ca.crt"))
        # the same trace fetched over the Unix socket: the same bytes
        local = os.path.join(d, "local")
        r = subprocess.run([GPROFCTL, "--socket", dm.sock, "fetch", tid, "--output-dir", local],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, (r.stdout, r.stderr)
        again = glob.glob(os.path.join(local, "**", "*.pt.trace.json.gz"), recursive=True)
        with open(again[0], "rb") as f:
            assert f.read() == data
        assert len(data) > 256, len(data)
        with relay.lock:
            wire = bytes(relay.seen)
        assert len(wire) > len(data), (len(wire), len(data))
        assert job.encode() not in wire
        for off in range(0, len(data) - 64, max(1, (len(data) - 64) // 16)):
            assert data[off:off + 64] not in wire, off
        relay.close()
        # the control: in front of the plain port the job id is on the wire
        plain = Relay(dm.port)
        trace_through(dm, d, plain.port, False, job + "-plain", None)
        with plain.lock:
            assert (job + "-plain").encode() in bytes(plain.seen)
        plain.close()
        assert dm.p.poll() is None
    finally:
        dm.stop()


def test_refusals_say_why(d):
    p = pki(d)
    dm = start(d, tls_yaml(p, extra="limits:\n  hello_timeout: 1s\n"))
    try:
        ok, r = status_ok(dm.tls_port, p("ca.crt"))
        assert ok, r
        # a CA that did not sign the daemon's certificate
        r = ctl(dm.tls_port, "status", ca=p("other-ca.crt"))
        assert r.returncode == 3, r
        assert "daemon's certificate was refused" in r.stdout + r.stderr, r
        assert "--tls-ca" in r.stdout + r.stderr, r
        # gprofctl without --tls on the TLS port
        mark = dm.mark()
        r = ctl(dm.tls_port, "status", tls=False)
        assert r.returncode == 3 and "this port speaks TLS" in r.stdout + r.stderr, r
        assert dm.wait("does not speak TLS", mark), dm.log()
        # gprofctl --tls on the plain port
        mark = dm.mark()
        r = ctl(dm.port, "status", ca=p("ca.crt"))
        assert r.returncode == 3 and "does not speak TLS" in r.stdout + r.stderr, r
        assert dm.wait("a TLS handshake on the plain tcp port", mark), dm.log()
        # bytes that are no TLS; a handshake begun and never finished
        mark = dm.mark()
        s = socket.create_connection(("127.0.0.1", dm.tls_port))
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert dm.wait("the client does not speak TLS", mark), dm.log()
        s.close()
        mark = dm.mark()
        s = socket.create_connection(("127.0.0.1", dm.tls_port))
        s.sendall(bytes([22, 3, 1, 0, 200]))  # a record header, then nothing
        assert dm.wait("no hello within 1 s", mark), dm.log()
        s.settimeout(TIMEOUT)
        assert s.recv(100) == b""  # closed by the daemon
        s.close()
        ok, r = status_ok(dm.tls_port, p("ca.crt"))
        assert ok, r
    finally:
        dm.stop()
    # a certificate for another name
    dm = start(d, tls_yaml(p, cert="server-elsewhere"), name="e")
    try:
        r = ctl(dm.tls_port, "status", ca=p("ca.crt"))
        assert r.returncode == 3, r
        assert "certificate was refused" in r.stdout and "mismatch" in r.stdout, r
    finally:
        dm.stop()


def test_mutual_tls(d):
    p = pki(d)
    dm = start(d, tls_yaml(p, extra="  client_ca: %s\n" % p("ca.crt")))
    try:
        mark = dm.mark()
        r = ctl(dm.tls_port, "status", ca=p("ca.crt"))
        assert r.returncode == 3 and "asks for a client certificate" in r.stdout, r
        assert dm.wait("the client sent no certificate", mark), dm.log()
        mark = dm.mark()
        r = ctl(dm.tls_port, "status", ca=p("ca.crt"),
                opts=["--tls-cert", p("rogue.crt"), "--tls-key", p("rogue.key")])
        assert r.returncode == 3, r
        assert dm.wait("the client's certificate was refused", mark), dm.log()
        ok, r = status_ok(dm.tls_port, p("ca.crt"),
                          opts=["--tls-cert", p("client.crt"), "--tls-key", p("client.key")])
        assert ok, r
        # usage errors
        r = ctl(dm.tls_port, "status", ca=p("ca.crt"), opts=["--tls-cert", p("client.crt")])
        assert r.returncode == 3 and "--tls-cert and --tls-key go together" in r.stderr, r
        r = subprocess.run([GPROFCTL, "--host", "127.0.0.1:%d" % dm.tls_port, "--tls-ca",
                            p("ca.crt"), "status"], capture_output=True, text=True)
        assert r.returncode == 3 and "go with --tls" in r.stderr, r
        r = ctl(dm.tls_port, "status", ca=os.path.join(d, "missing.crt"))
        assert r.returncode == 3 and "missing.crt" in r.stderr, r
        assert dm.p.poll() is None
    finally:
        dm.stop()


def test_token_still_decides(d):
    p = pki(d)
    token = os.path.join(d, "token")
    with open(token, "w") as f:
        f.write("a-token-of-more-than-sixteen-bytes\n")
    os.chmod(token, 0o600)
    dm = start(d, tls_yaml(p) + "auth_token_file: %s\nloopback_identity: false\n" % token)
    try:
        r = ctl(dm.tls_port, "--json", "list", ca=p("ca.crt"))
        assert r.returncode != 0 and "token" in (r.stdout + r.stderr).lower(), r
        r = ctl(dm.tls_port, "--json", "list", ca=p("ca.crt"), opts=["--token-file", token])
        assert r.returncode in (0, 2), r  # authenticated; no process to list
        assert "auth" not in r.stderr.lower(), r
    finally:
        dm.stop()


def test_sighup_rotates_certificate(d):
    p = pki(d)
    live = os.path.join(d, "live")
    os.makedirs(live)
    for ext in ("crt", "key"):
        with open(p("server." + ext), "rb") as s, open(os.path.join(live, "tls." + ext), "wb") as t:
            t.write(s.read())
    os.chmod(os.path.join(live, "tls.key"), 0o600)
    yaml = "tls:\n  listen: 127.0.0.1:0\n  cert: %s/tls.crt\n  key: %s/tls.key\n" % (live, live)
    dm = start(d, yaml)
    try:
        assert status_ok(dm.tls_port, p("ca.crt"))[0]
        for ext in ("crt", "key"):
            with open(p("server2." + ext), "rb") as s, \
                    open(os.path.join(live, "tls." + ext), "wb") as t:
                t.write(s.read())
        mark = dm.mark()
        dm.p.send_signal(signal.SIGHUP)
        assert dm.wait("configuration reloaded", mark), dm.log()
        assert status_ok(dm.tls_port, p("other-ca.crt"))[0], dm.log()
        r = ctl(dm.tls_port, "status", ca=p("ca.crt"))
        assert r.returncode == 3 and "certificate was refused" in r.stdout, r
        # a broken certificate: the reload fails, the last good one serves
        with open(os.path.join(live, "tls.crt"), "w") as t:
            t.write("not a certificate\n")
        mark = dm.mark()
        dm.p.send_signal(signal.SIGHUP)
        line = dm.wait("reload failed, keeping the old configuration", mark)
        assert line and "tls.crt" in line, dm.log()
        assert status_ok(dm.tls_port, p("other-ca.crt"))[0], dm.log()
    finally:
        dm.stop()


def check(d, yaml):
    path = os.path.join(d, "c.yaml")
    with open(path, "w") as f:
        f.write(yaml)
    r = subprocess.run([GPROFD, "--config", path, "--check-config", "--socket",
                        os.path.join(d, "s.sock"), "--state-dir", d],
                       capture_output=True, text=True, timeout=TIMEOUT)
    return r.returncode, r.stdout + r.stderr


def test_bad_settings(d):
    p = pki(d)
    rc, out = check(d, "tls:\n  listen: 127.0.0.1:1779\n")
    assert rc != 0 and "needs tls.cert and tls.key" in out, out
    rc, out = check(d, "tls:\n  listen: 0.0.0.0:1779\n  cert: %s\n  key: %s\n" %
                    (p("server.crt"), p("server.key")))
    assert rc != 0 and "auth_token_file must be set" in out, out
    rc, out = check(d, "tls:\n  listen: 127.0.0.1:1779\n  cert: %s\n  key: %s\n" %
                    (p("server.crt"), p("client.key")))
    assert rc != 0 and "does not belong to certificate" in out, out
    rc, out = check(d, "tls:\n  listen: 127.0.0.1:1779\n  cert: %s\n  key: %s\n" %
                    (os.path.join(d, "nope.crt"), p("server.key")))
    assert rc != 0 and "nope.crt" in out, out
    rc, out = check(d, "tls:\n  listen: 127.0.0.1:1779\n  cert: %s\n  key: %s\n"
                    "  client_ca: %s\n" % (p("server.crt"), p("server.key"), p("server.key")))
    assert rc != 0 and "tls.client_ca" in out, out
    os.chmod(p("server.key"), 0o644)
    rc, out = check(d, tls_yaml(p))
    assert rc != 0 and "readable by other users" in out, out
    os.chmod(p("server.key"), 0o640)
    rc, out = check(d, tls_yaml(p))
    assert rc == 0 and "configuration OK" in out, out


if __name__ == "__main__":
    sys.exit(runner.run([test_trace_crosses_encrypted, test_refusals_say_why, test_mutual_tls,
                         test_token_still_decides, test_sighup_rotates_certificate,
                         test_bad_settings], "gprof-tls-"))
