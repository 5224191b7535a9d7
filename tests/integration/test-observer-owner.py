#!/usr/bin/env python3
"""The operator observer's build folder in a shared cache (issue 43, 8):
two real users, the real PyTorch (Debian's, with cpp_extension). Alice
(the job's owner) builds and loads the observer (python/gprof_agent/
build_ops.py) with TORCH_EXTENSIONS_DIR in a folder that Mallory (another
local user) can reach. Mallory's "observer" is a real Python extension
module of the observer's name whose import writes a marker file: it is
never imported by Alice, in any case.

usage: test-observer-owner.py PYTHON_DIR

What must hold (each is a case below):
  planted: Mallory made the build folder first (hers, writable by all, her
    library and a stamp that matches in it): Alice's build refuses, exit 1,
    one line naming the folder, its owner and what to do; nothing of
    Alice's is written in it; her load refuses too; never imported;
  unsafe-parent: the cache folder is Mallory's (writable by all, not
    sticky): Alice's build refuses before making anything in it (Mallory
    could move Alice's folder away and put hers in its place), by hand and
    as a window's background build (whose error, the window's note, is
    the refusal);
  left-over: Alice's own folder holding a built library with its stamp,
    and one file of Mallory's among the outputs: Alice's load refuses and
    imports nothing; without Mallory's file the same library is imported
    (the check, not the planted module, is what stopped it);
  sticky: in a sticky cache folder of root's (as /tmp), Alice's build
    folder and the folders above it that the build makes are made 0700.
Runs only as root (it creates the two users with useradd and removes
them); otherwise, or where no python3 has torch, skipped (77).
"""
import grp
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile

PYDIR = sys.argv[1]
PY = "/usr/bin/python3"

EVIL_C = r"""
#include <Python.h>
#include <stdio.h>
static struct PyModuleDef def = { PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL };
PyMODINIT_FUNC PyInit_%(name)s(void)
{
	FILE *f = fopen("%(marker)s", "a");
	if (f) { fprintf(f, "imported by uid %%d\n", (int)getuid()); fclose(f); }
	return PyModule_Create(&def);
}
"""


def torch_python():
    for cand in (PY, sys.executable):
        if os.path.exists(cand) and subprocess.run(
                [cand, "-c", "import torch.utils.cpp_extension"],
                capture_output=True).returncode == 0:
            return cand
    return None


class User:
    """A local user made for the test (its own private group), removed at
    the end."""

    def __init__(self, base, tag):
        self.name = "gpo%s%s" % (tag, secrets.token_hex(3))
        subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/bin/sh",
                        self.name], check=True, capture_output=True)
        pw = pwd.getpwnam(self.name)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.home = os.path.join(base, "home-" + tag)
        os.mkdir(self.home, 0o700)
        os.chown(self.home, self.uid, self.gid)

    def run(self, args, env=None, **kw):
        def drop():
            os.setgroups([])
            os.setgid(self.gid)
            os.setuid(self.uid)
            os.umask(0o022)
        e = {"HOME": self.home, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
             "PYTHONPATH": PYDIR, "LC_ALL": "C.UTF-8"}
        e.update(env or {})
        return subprocess.run(args, env=e, preexec_fn=drop, capture_output=True, text=True,
                              timeout=600, **kw)

    def remove(self):
        subprocess.run(["userdel", self.name], capture_output=True)
        try:
            grp.getgrnam(self.name)
            subprocess.run(["groupdel", self.name], capture_output=True)
        except KeyError:
            pass


def facts(py):
    """The observer's module name and the stamp a matching build has, as
    build_ops computes them for this torch."""
    r = subprocess.run([py, "-c", "import torch, gprof_agent.build_ops as b; "
                        "print(b.name(torch)); print(b._stamp(torch))"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=PYDIR))
    assert r.returncode == 0, r.stderr
    name, stamp = r.stdout.split()
    return name, stamp


def plant(folder, name, stamp, marker, owner, mode):
    """Mallory's observer: a module of the observer's name that leaves a
    marker when imported, and a stamp that matches, in folder."""
    os.makedirs(folder, exist_ok=True)
    src = os.path.join(folder, "evil.c")
    with open(src, "w") as f:
        f.write(EVIL_C % {"name": name, "marker": marker})
    so = os.path.join(folder, name + ".so")
    subprocess.run(["cc", "-shared", "-fPIC", "-I" + sysconfig.get_paths()["include"], src,
                    "-o", so], check=True)
    os.remove(src)
    with open(os.path.join(folder, "gprof_ops_observer.stamp"), "w") as f:
        f.write(stamp + "\n")
    for p in [folder] + [os.path.join(folder, n) for n in os.listdir(folder)]:
        os.chown(p, owner.uid, owner.gid)
        os.chmod(p, mode if os.path.isdir(p) else 0o755)
    return so


LOAD = ("import sys, torch, gprof_agent.build_ops as b\n"
        "try:\n"
        "    m = b.load_built(torch)\n"
        "    print('loaded' if m is not None else 'none')\n"
        "except PermissionError as e:\n"
        "    print('refused', e)\n")


def snapshot(folder):
    return sorted((n, os.stat(os.path.join(folder, n)).st_mtime_ns, os.stat(os.path.join(
        folder, n)).st_uid) for n in os.listdir(folder))


def main():
    if os.geteuid() != 0:
        print("not root: cannot make the two users; skipped")
        return 77
    py = torch_python()
    if py is None:
        print("no python3 with torch.utils.cpp_extension: skipped (.ci/deps installs it)")
        return 77
    base = tempfile.mkdtemp(prefix="gprof-observer-owner-")
    os.chmod(base, 0o755)
    users = []
    failed = 0
    try:
        global PYDIR
        # the helper where both users can read it
        shutil.copytree(PYDIR, os.path.join(base, "python"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        PYDIR = os.path.join(base, "python")
        users.append(User(base, "a"))
        users.append(User(base, "m"))
        alice, mallory = users
        name, stamp = facts(py)
        marker = os.path.join(base, "imported")
        marker_dir = os.path.dirname(marker)
        assert os.path.isdir(marker_dir)
        open(marker, "w").close()
        os.chmod(marker, 0o666)  # whoever imports the module can say so

        def imported():
            return open(marker).read()

        cases = []

        def case(f):
            cases.append(f)
            return f

        @case
        def planted():
            shared = os.path.join(base, "planted")
            os.mkdir(shared)
            os.chmod(shared, 0o1777)
            folder = os.path.join(shared, name)
            plant(folder, name, stamp, marker, mallory, 0o777)
            before = snapshot(folder)
            env = {"TORCH_EXTENSIONS_DIR": shared}
            r = alice.run([py, "-m", "gprof_agent.build_ops"], env)
            assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
            # (torch may add "No CUDA runtime is found" of its own)
            err = [ln for ln in r.stderr.splitlines() if ln.startswith("gprof_agent")]
            assert len(err) == 1 and err[0].startswith(
                "gprof_agent.build_ops: cannot build: %s is owned by uid %d (%s)"
                % (folder, mallory.uid, mallory.name)), r.stderr
            assert "use a folder of your own" in err[0], err
            assert snapshot(folder) == before, (before, snapshot(folder))
            r = alice.run([py, "-c", LOAD], env)
            assert r.stdout.startswith("refused %s is owned by uid %d" % (folder, mallory.uid)), \
                (r.stdout, r.stderr)
            assert imported() == "", imported()

        @case
        def unsafe_parent():
            shared = os.path.join(base, "team-cache")
            os.mkdir(shared)
            os.chown(shared, mallory.uid, mallory.gid)
            os.chmod(shared, 0o777)
            env = {"TORCH_EXTENSIONS_DIR": shared}
            r = alice.run([py, "-m", "gprof_agent.build_ops"], env)
            assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
            assert ("cannot build: %s is owned by uid %d (%s), gid %d, mode 777: a folder "
                    "above the build folder, owned by another user" %
                    (shared, mallory.uid, mallory.name, mallory.gid)) in r.stderr, r.stderr
            assert os.listdir(shared) == [], os.listdir(shared)
            # the build a window starts in the background: its error (the
            # window's note) is the refusal, whole
            r = alice.run([py, "-c", "import gprof_agent.build_ops as b\n"
                           "g = b.Background()\ng.thread.join()\nprint(g.error)"], env)
            assert r.stdout.startswith(
                "build failed (exit 1): gprof_agent.build_ops: cannot build: %s is owned by "
                "uid %d (%s)" % (shared, mallory.uid, mallory.name)), (r.stdout, r.stderr)
            assert os.listdir(shared) == [], os.listdir(shared)
            assert imported() == "", imported()

        @case
        def left_over():
            cache = os.path.join(base, "alice-cache")
            os.mkdir(cache, 0o700)
            os.chown(cache, alice.uid, alice.gid)
            folder = os.path.join(cache, name)
            plant(folder, name, stamp, marker, alice, 0o700)
            theirs = os.path.join(folder, "build.ninja")
            with open(theirs, "w") as f:
                f.write("# Mallory's\n")
            os.chown(theirs, mallory.uid, mallory.gid)
            os.chmod(theirs, 0o644)
            env = {"TORCH_EXTENSIONS_DIR": cache}
            r = alice.run([py, "-c", LOAD], env)
            assert r.stdout.startswith("refused %s is owned by uid %d (%s)" %
                                       (theirs, mallory.uid, mallory.name)), (r.stdout, r.stderr)
            assert imported() == "", imported()
            # the control: the same folder without Mallory's file is loaded
            os.remove(theirs)
            r = alice.run([py, "-c", LOAD], env)
            assert r.stdout == "loaded\n", (r.stdout, r.stderr)
            assert imported() == "imported by uid %d\n" % alice.uid, imported()
            open(marker, "w").close()

        @case
        def sticky():
            shared = os.path.join(base, "tmp")
            os.mkdir(shared)
            os.chmod(shared, 0o1777)
            root = os.path.join(shared, "alice", "ext")
            env = {"TORCH_EXTENSIONS_DIR": root}
            # make() alone (the compile itself is test-torch-observer's)
            r = alice.run([py, "-c", "import torch, gprof_agent.build_ops as b; "
                           "b.make(b.build_dir(torch))"], env)
            assert r.returncode == 0, r.stderr
            for p in (os.path.join(shared, "alice"), root, os.path.join(root, name)):
                st = os.stat(p)
                assert st.st_uid == alice.uid and stat.S_IMODE(st.st_mode) == 0o700, \
                    (p, st.st_uid, oct(st.st_mode))

        for c in cases:
            try:
                c()
                print("ok - %s" % c.__name__)
            except Exception:
                import traceback
                failed += 1
                print("FAIL - %s" % c.__name__)
                traceback.print_exc()
        print("%d passed, %d failed" % (len(cases) - failed, failed))
    finally:
        for u in users:
            u.remove()
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    # meson's timeout sends SIGTERM: the users made here are still removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("SIGTERM: stopped"))
    sys.exit(main())
