"""daemonlog: a daemon's stderr, read line by line by a thread, so the
Python integration tests wait on what gprofd logs (events), never on time.
Timeouts are only safety nets."""
import threading


class DaemonLog:
    def __init__(self, stream, timeout):
        self.lines = []
        self.timeout = timeout
        self.cv = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            with self.cv:
                self.lines.append(line.decode(errors="replace"))
                self.cv.notify_all()
        with self.cv:
            self.lines.append(None)  # the daemon closed its stderr: exited
            self.cv.notify_all()

    def wait(self, needle, start=0, timeout=None):
        """The first line from index start holding needle, or None once the
        daemon has exited (or the timeout passed) without logging it."""
        def found():
            return any(l is None or needle in l for l in self.lines[start:])
        with self.cv:
            self.cv.wait_for(found, timeout or self.timeout)
            return next((l for l in self.lines[start:] if l is not None and needle in l), None)

    def mark(self):
        """An index for wait(start=...): only lines logged from now on."""
        with self.cv:
            return len(self.lines)

    def text(self):
        with self.cv:
            return "".join(l for l in self.lines if l)


class Daemon:
    """gprofd on a private socket in directory d, logging to a DaemonLog;
    yaml (text) becomes its --config; tcp is --tcp's value ("off", or
    "127.0.0.1:0" for a loopback port, read back into self.port)."""

    def __init__(self, gprofd, d, timeout, yaml=None, tcp="off", launcher=(), pass_fds=(),
                 env=None):
        """launcher: argv put before gprofd's (e.g. one that hands it sockets the
        way systemd does); pass_fds and env go to Popen."""
        import os
        import subprocess
        self.dir = d
        self.sock = os.path.join(d, "gprofd.sock")
        extra = []
        # Kineto's @dynolog is machine-wide and may be another daemon's,
        # which gprofctl status reports as degraded (exit 4): a test that
        # does not name its own gets a private one
        if "kineto:" not in (yaml or ""):
            Daemon.started = getattr(Daemon, "started", 0) + 1
            yaml = (yaml or "") + "kineto:\n  socket_name: gprofd-test-%d-%d\n" % (
                os.getpid(), Daemon.started)
        if yaml:
            with open(os.path.join(d, "gprofd.yaml"), "w") as f:
                f.write(yaml)
            extra = ["--config", os.path.join(d, "gprofd.yaml")]
        # $GPROFD_WRAPPER: words put before the daemon (tests/valgrind.sh)
        wrapper = os.environ.get("GPROFD_WRAPPER", "").split()
        self.p = subprocess.Popen(
            list(launcher) + wrapper + [gprofd] + extra + [
                "--socket", self.sock, "--tcp", tcp, "--metrics", "off",
                "--state-dir", os.path.join(d, "state"), "-v"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=pass_fds, env=env)
        self.timeout = timeout
        self.logs = DaemonLog(self.p.stderr, timeout)
        self.wait, self.mark, self.log = self.logs.wait, self.logs.mark, self.logs.text
        line = self.wait(" running: ")
        assert line, "gprofd did not start:\n" + self.log()
        self.port = int(line.split("tcp port ")[1].split(",")[0]) if "tcp port " in line else 0

    def stop(self, sig=15):
        import os
        if self.p.poll() is None:
            self.p.send_signal(sig)
        self.p.wait(self.timeout)
        # under valgrind (tests/valgrind.sh), its verdict fails the test
        assert not (os.environ.get("GPROFD_WRAPPER") and self.p.returncode == 99), \
            "valgrind found errors in gprofd:\n" + self.log()
