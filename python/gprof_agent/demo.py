"""gprof_agent.demo: a small job to take a first trace of, on any machine
(no GPU, no PyTorch needed: README.md, "First trace").

    gprofctl launch --job demo -- python3 -m gprof_agent.demo [--seconds N]

Each step runs three ranges, "data", "forward" and "backward" (a few
milliseconds of arithmetic each, marked with gprof_agent.range_push/pop),
and ends with gprof_agent.step(): `gprofctl trace --job demo --iterations 5`
then captures five steps with their ranges, and `gprofctl report` reads
them.

The command returns once the job is registered with gprofd, so the next
command can trace it at once; the job steps on in the background for N
seconds (60), its output closed. When no gprofd answers within 30 s it
says so and exits 1; run outside `gprofctl launch` (no agent named), it
says how to run it and exits 2.

How it knows: the job is a child process, made before the agent is loaded
(the agent does not follow a fork). It names a pipe as the agent's log
(GPROF_AGENT_LOG=/proc/self/fd/N), loads the agent and reads the pipe
until the agent's "registered with the daemon" line, then tells the
parent, which prints the job's pid and exits. A log the user named gets
every line too. Nothing here is used by a traced program.
"""
import os
import select
import sys
import threading
import time

REGISTERED = b"registered with the daemon"
WAIT_S = 30
RANGES = (("data", 20000), ("forward", 60000), ("backward", 90000))


def _work(n):
    """Some arithmetic: the stand-in for a range's work."""
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def _forward(data, user_log):
    """The agent's log lines, to the log the user named (if any)."""
    if user_log is not None:
        try:
            os.write(user_log, data)
        except OSError:
            pass


def _drain(r, user_log):
    """Reads the agent's log for the life of the job (a full pipe would
    stall the agent's thread)."""
    while True:
        try:
            data = os.read(r, 4096)
        except OSError:
            return
        if not data:
            return
        _forward(data, user_log)


def _registered(r, user_log):
    """Waits for the agent's registration line: True, or False after
    WAIT_S seconds without it."""
    deadline = time.monotonic() + WAIT_S
    seen = b""
    while REGISTERED not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            return False
        data = os.read(r, 4096)
        if not data:
            return False
        _forward(data, user_log)
        seen = seen[-len(REGISTERED):] + data
    return True


def _child(seconds, tell):
    """The job: loads the agent, says when it is registered, then steps."""
    r, w = os.pipe()
    user_log = None
    if os.environ.get("GPROF_AGENT_LOG"):
        try:
            user_log = os.open(os.environ["GPROF_AGENT_LOG"],
                               os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        except OSError:
            user_log = None
    os.environ["GPROF_AGENT_LOG"] = "/proc/self/fd/%d" % w
    import gprof_agent
    if not gprof_agent.loaded():
        os.write(tell, b"2 no agent in this process: run it as gprofctl launch --job demo -- "
                       b"python3 -m gprof_agent.demo (which loads libgprof_agent)\n")
        return 2
    if not _registered(r, user_log):
        sock = os.environ.get("GPROF_SOCKET") or "/run/gprofd/gprofd.sock (or the user's own)"
        os.write(tell, ("1 no gprofd answered within %d s at %s: is gprofd running? (gprofd "
                        "in another terminal, or gprofd &)\n" % (WAIT_S, sock)).encode())
        return 1
    threading.Thread(target=_drain, args=(r, user_log), daemon=True).start()
    os.write(tell, b"0\n")
    os.close(tell)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the shell's output ends with the parent
        os.dup2(null, fd)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, n in RANGES:
            gprof_agent.range_push(name)
            _work(n)
            gprof_agent.range_pop()
        gprof_agent.step()
    return 0


def main(argv):
    seconds = 60.0
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--seconds" and args:
            try:
                seconds = float(args.pop(0))
            except ValueError:
                seconds = -1
            if not 0 < seconds <= 86400:
                print("gprof_agent.demo: --seconds takes a number of seconds (0 to 86400)",
                      file=sys.stderr)
                return 2
        else:
            print("usage: gprofctl launch --job demo -- python3 -m gprof_agent.demo "
                  "[--seconds N]", file=sys.stderr)
            return 0 if a in ("-h", "--help") else 2
    if not any(os.environ.get(v) for v in ("GPROF_AGENT", "CUDA_INJECTION64_PATH",
                                            "NVTX_INJECTION64_PATH")):
        print("gprof_agent.demo: no agent named in the environment: run it as gprofctl launch "
              "--job demo -- python3 -m gprof_agent.demo", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setsid()  # not the terminal's: Ctrl-C on the next command leaves it
        code = 1
        try:
            code = _child(seconds, w)
        finally:
            os._exit(code)
    os.close(w)
    answer = b""
    while True:
        data = os.read(r, 4096)
        if not data:
            break
        answer += data
    code, _, why = answer.decode(errors="replace").partition(" ")
    if code.strip() == "0":
        print("gprof_agent.demo: job %s, pid %d, registered with gprofd; it steps for %g s "
              "(three ranges a step), in the background" %
              (os.environ.get("GPROF_JOB_ID", "?"), pid, seconds))
        return 0
    os.waitpid(pid, 0)
    print("gprof_agent.demo: %s" % (why.strip() or "the job ended before registering"),
          file=sys.stderr)
    return int(code) if code.strip().isdigit() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
