#!/usr/bin/env python3
"""Kineto's fabric is an abstract socket (@dynolog) that any local user can
bind first; PyTorch jobs would then send their requests to that process.
gprofd cannot take the name back, so it says loudly who holds it (pid,
command, uid) and carries on without Kineto; once the name is free it
serves Kineto clients.

usage: test-squat.py GPROFD
"""
import os
import re
import socket
import sys

GPROFD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from daemonlog import Daemon  # noqa: E402
import runner  # noqa: E402


def test_squatter_named(d):
    """A process of this test holds the name: the log names it."""
    name = "gprofd-squat-%d" % os.getpid()
    squat = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    squat.bind("\0%s\0" % name)  # the address Kineto's clients send to
    os.makedirs(os.path.join(d, "a"))
    dm = Daemon(GPROFD, os.path.join(d, "a"), 10, yaml="kineto:\n  socket_name: %s\n" % name)
    try:
        log = dm.log()
        want = r"<3>cannot bind the Kineto socket @%s: Address already in use; held by pid %d " \
               r"\(python3[^,]*, uid %d\)" % (re.escape(name), os.getpid(), os.getuid())
        assert re.search(want, log), log
        assert dm.p.poll() is None and "serving Kineto clients" not in log, log
    finally:
        dm.stop()
        squat.close()
    # the name free again: served
    os.makedirs(os.path.join(d, "b"))
    dm = Daemon(GPROFD, os.path.join(d, "b"), 10, yaml="kineto:\n  socket_name: %s\n" % name)
    try:
        assert "serving Kineto clients (KINETO_USE_DAEMON=1) on @" + name in dm.log(), dm.log()
        assert "cannot bind" not in dm.log(), dm.log()
    finally:
        dm.stop()


if __name__ == "__main__":
    sys.exit(runner.run([test_squatter_named], "gprof-squat-"))
