#!/usr/bin/env python3
"""The README's first minute, as written (issue 37): the commands are read
from README.md itself, so this test breaks when the README drifts.

usage: test-readme.py SOURCE_ROOT GPROFD GPROFCTL AGENT VALIDATE_TRACE

What must hold:
  quick-start: the first quick-start command installs only what running
    needs (`.ci/deps --runtime`: no PyTorch, libtorch, Prometheus,
    valgrind, cmocka, all of which the second command's `.ci/deps`
    installs), builds with the README's options, in which no test and no
    benchmark is a target (meson setup of a scratch folder with those
    options, meson introspect), and installs gprofd, gprofctl, the agent
    and the demo job, then runs gprofd; the second command is what
    .ci/run runs;
  first-trace: the first command's last step (gprofd, in the background
    here) and then the "First trace" block, run as it is by bash -e as a
    fresh local user (made with useradd, as root; else skipped, 77) in a
    private network namespace (the daemon's default ports and Kineto's
    abstract socket are then its own), with gprofd and gprofctl on PATH
    as `meson install` puts them (links to this build's, which find this
    build's agent and python/ as an installed one finds the installed):
    every command succeeds; the demo says it is registered; the trace of
    1 of 1 process is delivered into traces/ and holds 5 ProfilerSteps and
    the ranges (tests/tools/validate_trace.py); the report shows the 5
    iterations and each range 5 times.
"""
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile

SRC, GPROFD, GPROFCTL, AGENT, VALIDATOR = sys.argv[1:6]
sys.path.insert(0, os.path.dirname(VALIDATOR))
from validate_trace import validate  # noqa: E402
import runner  # noqa: E402

TEST_ONLY = {"valgrind", "prometheus", "python3-torch", "libtorch-dev", "libcmocka-dev"}


def block(readme, marker):
    """The lines of the first ```sh block after the line holding marker."""
    lines = readme.splitlines()
    at = [i for i, ln in enumerate(lines) if marker in ln]
    assert len(at) == 1, "README.md: %d lines with %r" % (len(at), marker)
    i = at[0] + 1
    while not lines[i].startswith("```"):
        i += 1
    assert lines[i] == "```sh", lines[i]
    out = []
    for ln in lines[i + 1:]:
        if ln.startswith("```"):
            return out
        out.append(ln)
    raise AssertionError("README.md: the block after %r never ends" % marker)


def deps(*args):
    r = subprocess.run([os.path.join(SRC, ".ci", "deps")] + list(args) + ["--list"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_quick_start(d):
    readme = open(os.path.join(SRC, "README.md")).read()
    first = block(readme, "<!-- quick-start-run")
    assert len(first) == 1, first
    steps = [s.strip() for s in first[0].split("&&")]
    assert steps[0] == "./.ci/deps --runtime", steps
    assert steps[1].startswith("./.ci/build build "), steps
    assert steps[2] == "meson install -C build", steps
    assert steps[3] == "gprofd", steps  # the daemon on its embedded defaults, in the foreground
    runtime, full = deps("--runtime"), deps()
    assert runtime < full, (runtime, full)
    assert not runtime & TEST_ONLY and TEST_ONLY <= full, (runtime & TEST_ONLY, TEST_ONLY - full)
    # the second command is CI's
    second = block(readme, "<!-- quick-start-test")
    assert second == ["./.ci/deps && ./.ci/test"], second
    assert second[0] in open(os.path.join(SRC, ".ci", "run")).read().splitlines()
    # the first command's build: its options, in a scratch folder
    options = steps[1].split()[2:]
    assert options and all(o.startswith("-D") for o in options), options
    b = os.path.join(d, "build")
    r = subprocess.run(["meson", "setup", b, SRC, "--prefix=/usr/local"] + options,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    import json
    r = subprocess.run(["meson", "introspect", b, "--targets", "--installed", "--tests"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    intro = json.loads(r.stdout)
    where = {os.path.relpath(t["defined_in"], SRC).split(os.sep)[0] for t in intro["targets"]}
    assert not where & {"tests", "bench"}, sorted(where)
    assert intro["tests"] == [], [t["name"] for t in intro["tests"]][:5]
    names = {t["name"] for t in intro["targets"]}
    assert {"gprofd", "gprofctl", "gprof_agent"} <= names, sorted(names)
    installed = set(intro["installed"].values())
    for want in ("/usr/local/sbin/gprofd", "/usr/local/bin/gprofctl",
                 "/usr/local/share/gprofd/python"):  # the folder, with the demo job
        assert want in installed, (want, sorted(installed))
    assert os.path.isfile(os.path.join(SRC, "python", "gprof_agent", "demo.py"))
    assert [p for p in installed if p.endswith("/gprofd/libgprof_agent.so")], sorted(installed)


LO_UP_THEN_RUN = r"""
import fcntl, os, socket, struct, sys
uid, gid, script = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", b"lo", 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS: lo up
s.close()
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
os.execv("/bin/bash", ["bash", "-e", "-c", script])
"""


class User:
    def __init__(self, base):
        self.name = "gprm" + secrets.token_hex(3)
        subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh",
                        self.name], check=True, capture_output=True)
        pw = pwd.getpwnam(self.name)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.home = os.path.join(base, "home")
        for p in (self.home, os.path.join(base, "run")):
            os.mkdir(p, 0o700)
            os.chown(p, self.uid, self.gid)

    def remove(self):
        subprocess.run(["userdel", self.name], capture_output=True)
        subprocess.run(["groupdel", self.name], capture_output=True)


def test_first_trace(d):
    if os.geteuid() != 0:
        raise Skip("not root: cannot make the user and the network namespace")
    readme = open(os.path.join(SRC, "README.md")).read()
    lines = block(readme, "<!-- first-trace")
    assert not [l for l in lines if l.split()[:1] == ["gprofd"]], lines  # the first command's
    # the first command's last step (the daemon, in the foreground there: in
    # the background here, its log kept), then the block as it is
    daemon = block(readme, "<!-- quick-start-run")[0].split("&&")[-1].strip()
    script = "%s 2>gprofd.log &\n" % daemon + "\n".join(lines) + "\n"
    assert "gprofctl trace" in script and "gprofctl report" in script
    base = tempfile.mkdtemp(prefix="gprof-readme-")
    os.chmod(base, 0o755)
    user = User(base)
    bash = demo = None
    try:
        bindir = os.path.join(base, "bin")
        os.mkdir(bindir)
        os.symlink(os.path.abspath(GPROFD), os.path.join(bindir, "gprofd"))
        os.symlink(os.path.abspath(GPROFCTL), os.path.join(bindir, "gprofctl"))
        work = user.home
        env = {"PATH": bindir + ":/usr/bin:/bin", "HOME": user.home,
               "XDG_RUNTIME_DIR": os.path.join(base, "run"), "LANG": "C.UTF-8",
               "USER": user.name, "LOGNAME": user.name}
        env.update(runner.sanitizer_env(AGENT))
        # files, not pipes: gprofd, started with &, keeps the block's stdout
        with open(os.path.join(base, "out"), "w+") as fo, open(os.path.join(base, "err"), "w+") as fe:
            bash = subprocess.Popen(["unshare", "--net", "--", sys.executable, "-c",
                                     LO_UP_THEN_RUN, str(user.uid), str(user.gid), script],
                                    cwd=work, env=env, stdout=fo, stderr=fe,
                                    start_new_session=True)
            bash.wait(timeout=180)
            fo.seek(0)
            fe.seek(0)
            out, err = fo.read(), fe.read()
        m = re.search(r"gprof_agent\.demo: job demo, pid (\d+), registered with gprofd", out)
        demo = int(m.group(1)) if m else None
        log = os.path.join(work, "gprofd.log")
        assert bash.returncode == 0, (bash.returncode, out, err,
                                      open(log).read()[-3000:] if os.path.exists(log) else "")
        assert m, out
        assert re.search(r"trace \S+: 1 of 1 matched process delivered to traces/", out), out
        traces = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(work, "traces"))
                  for f in fs if f.endswith(".pt.trace.json.gz")]
        assert len(traces) == 1, traces
        assert os.stat(traces[0]).st_uid == user.uid
        summary, errs = validate(traces[0], steps=5)
        assert not errs, errs
        assert re.search(r"^iterations: 5, median ", out, re.M), out
        for name in ("data", "forward", "backward"):
            assert re.search(r"^ +[0-9.]+ +0\.000 +0\.000 +0 +5 %s$" % name, out, re.M), (name, out)
        assert "registered pid %d" % demo in open(log).read()
    finally:
        if bash is not None and bash.returncode is None:
            bash.kill()
            bash.wait()
        # the demo (a session of its own) and gprofd (started with & in the
        # block's process group), by their ids; the user goes once they are gone
        left = ([demo] if demo else []) + (group(bash.pid) if bash else [])
        end(left)
        user.remove()
        shutil.rmtree(base, ignore_errors=True)


def group(pgid):
    """The pids of process group pgid."""
    out = []
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError, ValueError):
            continue
        if p.isdigit() and int(fields[2]) == pgid:
            out.append(int(p))
    return out


def end(pids):
    """SIGTERM to each pid, then waits for each to be gone (its pidfd
    readable), 30 s at most each, then SIGKILL."""
    import select
    fds = []
    for pid in pids:
        try:
            fds.append((pid, os.pidfd_open(pid)))
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid, fd in fds:
        if not select.select([fd], [], [], 30)[0]:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            select.select([fd], [], [], 30)
        os.close(fd)


class Skip(Exception):
    pass


def main():
    code = runner.run([test_quick_start], "gprof-readme-")
    try:
        test_first_trace(None)
        print("ok - test_first_trace")
    except Skip as e:
        print("SKIP - test_first_trace: %s" % e)
        return code or 77
    except Exception:
        import traceback
        print("FAIL - test_first_trace")
        traceback.print_exc()
        return 1
    return code


if __name__ == "__main__":
    # meson's timeout sends SIGTERM: the users made here are still removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("SIGTERM: stopped"))
    sys.exit(main())
