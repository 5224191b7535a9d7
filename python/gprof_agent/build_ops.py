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
writes only the stamp.
"""
import hashlib
import os
import re
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


def _mine(path):
    """Raises PermissionError unless path is this user's and writable by
    no one else: the library is loaded into the job (a window loads it
    without being asked), so a cache another user can write to (a shared
    TORCH_EXTENSIONS_DIR) must not hand it one."""
    st = os.stat(path)
    # group-writable only for the user's own group (umask 002 with a
    # private group per user, as Ubuntu's logins have)
    if st.st_uid != os.geteuid() or st.st_mode & 0o002 or \
            (st.st_mode & 0o020 and st.st_gid != os.getegid()):
        raise PermissionError("%s is owned by uid %d, gid %d, mode %o: not this user's alone, "
                              "not loaded (rebuild it in a cache of your own)" %
                              (path, st.st_uid, st.st_gid, st.st_mode & 0o7777))


def library(torch):
    """The built library's path when it is built from this source for this
    torch, else None. Raises PermissionError when the library, its stamp or
    its folder is not this user's alone."""
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
    for path in (d, os.path.join(d, STAMP), so):
        _mine(path)
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
    os.makedirs(d, exist_ok=True)
    # NDEBUG as torch had it: RecordFunction's layout depends on it
    flags = ["-O2", "-fvisibility=hidden"] + ([] if torch.version.debug else ["-DNDEBUG"])
    mod = cpp_extension.load(name=name(torch), sources=[SOURCE], build_directory=d,
                             extra_cflags=flags, verbose=verbose,
                             is_python_module=True)
    if not os.path.isfile(os.path.join(d, name(torch) + ".so")):
        # cpp_extension skips the build of a module this process loaded
        # already (from another folder): a fresh process builds
        raise RuntimeError("%s not built in %s (build it in a fresh process)" % (name(torch), d))
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
        t = threading.Thread(target=self._run, name="gprof-build-ops", daemon=True)
        t.start()

    def _run(self):
        try:
            p = subprocess.run(self._cmd, env=self._env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
            if p.returncode != 0:
                tail = p.stdout.decode(errors="replace").strip().splitlines()[-3:]
                self.error = "build failed (exit %d): %s" % (p.returncode, " | ".join(tail)[-300:])
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
    build(torch, verbose="--verbose" in argv)
    if not quiet:
        print("gprof_agent.build_ops: built %s for torch %s in %.1f s: %s" % (
            name(torch), torch.__version__, time.monotonic() - t0, library(torch)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
