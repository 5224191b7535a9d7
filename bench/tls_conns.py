#!/usr/bin/env python3
"""What a TLS connection costs gprofd: N clients each make a TLS connection
to tls.listen (handshake, then a native hello and its reply) and stay
connected; reported: the time per connection (median of ROUNDS), and the
daemon's resident memory per open connection, against the same on the
plain tcp port. Certificates are made with the openssl tool in a
temporary directory.

usage: bench/tls_conns.py GPROFD [N=1000] [ROUNDS=3]
"""
import json
import os
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time

GPROFD = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tools"))
import daemonlog  # noqa: E402


def openssl(d, *args):
    subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)


def pki(d):
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl(d, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
            "-subj", "/CN=bench-ca")
    openssl(d, "req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=bench")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    openssl(d, "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", "ext")
    os.chmod(os.path.join(d, "server.key"), 0o600)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


HELLO = json.dumps({"type": "hello", "id": 1, "proto_min": 1, "proto_max": 1, "role": "ctl",
                    "software": "bench"}).encode()
FRAME = struct.pack("<I", len(HELLO)) + HELLO


def connect(port, ctx):
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1") if ctx else raw
    s.sendall(FRAME)
    hdr = s.recv(4)
    assert len(hdr) == 4, "no hello_reply"
    return s


def round_(dm, port, ctx):
    before = rss_kb(dm.p.pid)
    t0 = time.perf_counter()
    conns = [connect(port, ctx) for _ in range(N)]
    per = (time.perf_counter() - t0) / N
    after = rss_kb(dm.p.pid)
    for s in conns:
        s.close()
    return per, (after - before) / N


def main():
    with tempfile.TemporaryDirectory(prefix="gprof-tls-bench-") as d:
        pki(d)
        yaml = ("tls:\n  listen: 127.0.0.1:0\n  cert: %s/server.crt\n  key: %s/server.key\n"
                "limits:\n  hello_timeout: 1h\nkineto:\n  enabled: false\n" % (d, d))
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        # a fresh daemon per kind: its first round's growth is the memory per
        # connection (later rounds reuse the heap the first one freed)
        for kind in ("plain", "tls"):
            os.makedirs(os.path.join(d, kind))
            dm = daemonlog.Daemon(GPROFD, os.path.join(d, kind), 30, yaml=yaml,
                                  tcp="127.0.0.1:0")
            line = dm.wait(" running: ")
            port = int(line.split("tls port ")[1].split(",")[0]) if kind == "tls" else dm.port
            try:
                v = [round_(dm, port, ctx if kind == "tls" else None) for _ in range(ROUNDS)]
            finally:
                dm.stop()
            print("%-5s %d connections: %.3f ms per connection (handshake + hello; rounds: %s); "
                  "daemon RSS %.1f kB per open connection" % (
                      kind, N, statistics.median(x[0] for x in v) * 1e3,
                      " ".join("%.3f" % (x[0] * 1e3) for x in v), v[0][1]), flush=True)


if __name__ == "__main__":
    main()
