#!/usr/bin/env python3
"""A build without OpenSSL: asking gprofd or gprofctl for TLS fails at once
and says how to get it (test-tls.py tests TLS where it is built).

usage: test-tls-absent.py GPROFD GPROFCTL
"""
import os
import subprocess
import sys

GPROFD, GPROFCTL = sys.argv[1:3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import runner  # noqa: E402


def test_says_how(d):
    path = os.path.join(d, "c.yaml")
    with open(path, "w") as f:
        f.write("tls:\n  listen: 127.0.0.1:1779\n  cert: /x.crt\n  key: /x.key\n")
    r = subprocess.run([GPROFD, "--config", path, "--check-config", "--state-dir", d],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "install libssl-dev" in r.stderr, r
    r = subprocess.run([GPROFCTL, "--host", "127.0.0.1:1", "--tls", "status"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and "install libssl-dev" in r.stderr, r


if __name__ == "__main__":
    sys.exit(runner.run([test_says_how], "gprof-tls-absent-"))
