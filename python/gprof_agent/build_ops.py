"""build_ops.py: builds the operator observer (_ops_observer.cpp) against
the job's own torch, and finds it again without building.

    python3 -m gprof_agent.build_ops      # once per torch (at install time)

Data flow: build() compiles _ops_observer.cpp with
torch.utils.cpp_extension.load() (ninja and the host's C++ compiler) into
the user's torch extensions cache (TORCH_EXTENSIONS_DIR, else
$XDG_CACHE_HOME/torch_extensions or ~/.cache/torch_extensions), in a folder
named after the torch version (the extension's C++ ABI is torch's), then
writes a stamp beside the library: the hash of the source, torch's version
and Python's. load_built() imports that library only when the stamp
matches, and never compiles: ops.py calls it on the application thread at
a window's start. When it is not built, ops.py runs this module in a
background subprocess (build_in_background) and records that window with
torch.profiler instead.

Ownership: the build folder is torch's cache (cpp_extension's own lock
file serialises concurrent builds, e.g. the ranks of one job); this module
writes only the stamp. The library is imported into the job (a window
loads it unasked), so another user must never be able to choose it: in a
shared TORCH_EXTENSIONS_DIR she could plant the folder, or a library and
stamp in it, or swap ours. Before building and before loading, check()
requires the build folder and everything in it to be this user's alone
(not writable by group or others, but for the user's private group), and
every folder above it to be this user's or root's and, when others may
write to it, sticky (as /tmp is: no one renames what is not theirs); the
folders this module makes are made 0700. A folder that fails is refused
with what to do, never built into, never loaded from. Between the check
and the import only this user can write there, so the import at the end
of cpp_extension.load() in the builder is safe too.
"""
import hashlib
import os
import re
import stat
import shutil
import subprocess
import sys
import threading

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ops_observer.cpp")
STAMP = "gprof_ops_observer.stamp"


def name(torch):
    """The extension's module name: one per torch version."""
    return "gprof_ops_observer_" + re.sub(r"[^0-9A-Za-z]", "_", torch.__version__)


def build_dir(torch):
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(cache, "torch_extensions")
    return os.path.join(root, name(torch))


def _stamp(torch):
    h = hashlib.sha256()
    with open(SOURCE, "rb") as f:
        h.update(f.read())
    h.update(("\0%s\0%s" % (torch.__version__, sys.version)).encode())
    return h.hexdigest()


def _user(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return "?"


def _private_group(gid):
    """Is gid this user's own group (its effective group, named as the
    user, no other member: a user private group, as Debian's adduser and
    Ubuntu's logins make, where umask 002 is usual)?"""
    if gid != os.getegid():
        return False
    try:
        import grp
        g = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    me = _user(os.geteuid())
    return g.gr_name == me and set(g.gr_mem) <= {me}


def _others_write(st):
    """Can a user other than this one write to what st describes?"""
    return bool(st.st_mode & 0o002) or \
        bool(st.st_mode & 0o020 and not _private_group(st.st_gid))


def _describe(path, st):
    return "%s is owned by uid %d (%s), gid %d, mode %o" % (
        path, st.st_uid, _user(st.st_uid), st.st_gid, st.st_mode & 0o7777)


def _refuse(path, st, why):
    raise PermissionError(
        "%s: %s; another user could hand this job a library of hers, so it is neither "
        "built into nor loaded from (use a folder of your own: unset TORCH_EXTENSIONS_DIR "
        "for ~/.cache/torch_extensions, or point it at a folder only you can write to)" %
        (_describe(path, st), why))


def _mine(path, st=None):
    """Raises PermissionError unless path (not followed) is this user's and
    writable by no one else."""
    st = st or os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        _refuse(path, st, "a symbolic link, not this user's alone")
    if st.st_uid != os.geteuid() or _others_write(st):
        _refuse(path, st, "not this user's alone")


def _above(path):
    """Raises PermissionError unless the folder path, above a build folder,
    can be changed by no user but this one and root, except a sticky folder
    (as /tmp), where no one renames or removes what is not theirs."""
    st = os.stat(path)
    if st.st_uid not in (os.geteuid(), 0):
        _refuse(path, st, "a folder above the build folder, owned by another user, "
                          "who could move the build folder and put another in its place")
    if _others_write(st) and not st.st_mode & stat.S_ISVTX:
        _refuse(path, st, "a folder above the build folder that other users may write to "
                          "(and not sticky), so they could move the build folder and put "
                          "another in its place")


def _above_all(path):
    """_above() for the folder path and every folder above it."""
    while True:
        _above(path)
        if path == "/":
            return
        path = os.path.dirname(path)


def check(d):
    """Raises PermissionError unless the build folder d, every file and
    folder in it, and every folder above it are safe (the top comment),
    FileNotFoundError when d is missing."""
    real = os.path.realpath(d)
    # each symbolic link on the way as named is this user's or root's
    p = "/"
    for part in os.path.abspath(d).split(os.sep)[1:]:
        p = os.path.join(p, part)
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in (os.geteuid(), 0):
            _refuse(p, st, "a symbolic link of another user on the way to the build folder")
    _above_all(os.path.dirname(real))
    _mine(real)
    for root, dirs, files in os.walk(real):
        for n in dirs + files:
            _mine(os.path.join(root, n))


def make(d):
    """Makes the build folder d and the missing folders above it, 0700
    (whatever the umask), once the folders that exist above them are
    found safe; then check()s it."""
    missing = []
    p = os.path.abspath(d)
    while not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    if missing:  # nothing made where another user could move it
        _above_all(os.path.realpath(p))
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
            os.chmod(p, 0o700)  # the umask took bits: ours, none for others
        except FileExistsError:
            pass  # made meanwhile (another rank): check() says whose
    check(d)


def library(torch):
    """The built library's path when it is built from this source for this
    torch, else None. Raises PermissionError when its folder, anything in
    it or a folder above it is not safe (check())."""
    if not getattr(torch, "__version__", None):
        return None  # not a torch an extension could be built for
    d = build_dir(torch)
    so = os.path.join(d, name(torch) + ".so")
    try:
        with open(os.path.join(d, STAMP)) as f:
            ok = f.read().strip() == _stamp(torch)
    except OSError:
        return None
    if not ok or not os.path.isfile(so):
        return None
    check(d)
    return so


def load_built(torch):
    """The observer module, or None when it is not built (never builds)."""
    so = library(torch)
    if so is None:
        return None
    mod = sys.modules.get(name(torch))
    if mod is not None:
        return mod
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.ExtensionFileLoader(name(torch), so)
    spec = importlib.util.spec_from_file_location(name(torch), so, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[name(torch)] = mod
    return mod


def missing_tools(torch):
    """Why a build cannot run here (a torch without cpp_extension, no
    compiler, no ninja), or None. Imports nothing heavy (cpp_extension
    pulls in setuptools: only the build's subprocess imports it)."""
    import importlib.util
    try:
        if not getattr(torch, "__version__", None) or \
                importlib.util.find_spec("torch.utils.cpp_extension") is None:
            raise ImportError
    except ImportError:
        return "this torch has no torch.utils.cpp_extension"
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        return "no C++ compiler (%s) on PATH" % cxx
    if shutil.which("ninja") is None:
        try:
            import ninja  # noqa: F401  (the pip package puts it beside python)
        except ImportError:
            return "no ninja on PATH (torch.utils.cpp_extension needs it)"
    return None


def build(torch, verbose=False):
    """Compiles and imports the observer; returns the module. Raises on
    failure."""
    from torch.utils import cpp_extension
    d = build_dir(torch)
    make(d)  # checked: only this user can write there from now on
    # NDEBUG as torch had it: RecordFunction's layout depends on it
    flags = ["-O2", "-fvisibility=hidden"] + ([] if torch.version.debug else ["-DNDEBUG"])
    mod = cpp_extension.load(name=name(torch), sources=[SOURCE], build_directory=d,
                             extra_cflags=flags, verbose=verbose,
                             is_python_module=True)
    if not os.path.isfile(os.path.join(d, name(torch) + ".so")):
        # cpp_extension skips the build of a module this process loaded
        # already (from another folder): a fresh process builds
        raise RuntimeError("%s not built in %s (build it in a fresh process)" % (name(torch), d))
    check(d)  # the outputs too, before they are vouched for
    tmp = os.path.join(d, STAMP + ".%d" % os.getpid())
    with open(tmp, "w") as f:
        f.write(_stamp(torch) + "\n")
    os.replace(tmp, os.path.join(d, STAMP))
    return mod


class Background:
    """One build in a subprocess (the application thread never waits on it;
    its waiting thread holds no GIL while the compiler runs)."""

    def __init__(self):
        self.error = None
        self.done = False
        env = {k: v for k, v in os.environ.items()
               if k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "GPROF_AGENT",
                            "GPROF_TORCH_STEPS", "LD_PRELOAD")}
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._cmd = [sys.executable, "-m", "gprof_agent.build_ops", "--quiet"]
        self._env = env
        self.thread = threading.Thread(target=self._run, name="gprof-build-ops", daemon=True)
        self.thread.start()

    def _run(self):
        try:
            p = subprocess.run(self._cmd, env=self._env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
            if p.returncode != 0:
                lines = p.stdout.decode(errors="replace").strip().splitlines()
                # our own refusal (check()) whole, else the compiler's last lines
                said = [ln for ln in lines if ln.startswith("gprof_agent.build_ops: ")]
                why = said[-1][:800] if said else " | ".join(lines[-3:])[-300:]
                self.error = "build failed (exit %d): %s" % (p.returncode, why)
        except Exception as e:
            self.error = "build failed: %s: %s" % (type(e).__name__, str(e)[:200])
        self.done = True


def main(argv):
    import time
    quiet = "--quiet" in argv
    import torch
    why = missing_tools(torch)
    if why:
        print("gprof_agent.build_ops: cannot build: %s" % why, file=sys.stderr)
        return 1
    t0 = time.monotonic()
    try:
        build(torch, verbose="--verbose" in argv)
    except PermissionError as e:
        print("gprof_agent.build_ops: cannot build: %s" % e, file=sys.stderr)
        return 1
    if not quiet:
        print("gprof_agent.build_ops: built %s for torch %s in %.1f s: %s" % (
            name(torch), torch.__version__, time.monotonic() - t0, library(torch)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
