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
