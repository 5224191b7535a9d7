"""gprof_agent: iteration boundaries for PyTorch jobs traced by gprofd.

    import gprof_agent          # every optimizer.step() ends one iteration

With libgprof_agent named by the environment (CUDA_INJECTION64_PATH,
NVTX_INJECTION64_PATH or GPROF_AGENT, as `gprofctl launch` sets them),
every optimizer step calls gprof_step(), so `gprofctl trace --iterations N`
captures exactly N training steps and the trace shows them as
ProfilerStep#<n>; during a capture window it also records the job's
PyTorch operators (ops.py: the operator observer, built once per torch
version by python3 -m gprof_agent.build_ops; a window that did not ask for
them records them only from a built observer; GPROF_TORCH_OPS=off turns
that off). Without the agent it does nothing.

A PyTorch before 2.0 has no global optimizer step hooks: the job calls
gprof_agent.step() after each optimizer.step() (the same step in every
respect: it loads the agent, and takes a window's operators), and the
helper says so once on stderr in a process that names the agent.

The same without touching the code: put this folder's parent on PYTHONPATH
and set GPROF_TORCH_STEPS=1 (python/sitecustomize.py calls install()).

Two rules keep it harmless in every process of a job (torchrun's
launcher, data-loader workers, helpers):
- nothing is imported or loaded at interpreter start: the step hook is
  registered when the program itself imports torch.optim, and
- the agent library is loaded at the first optimizer step (the CUDA
  driver may have loaded it already: dlopen of the same path returns that
  instance), so a process that never steps never registers with gprofd
  through this module.
"""
import ctypes
import importlib.abc
import os
import sys
import threading

__all__ = ["step", "steps", "range_push", "range_pop", "loaded", "install"]

_lib = None
_mem = None   # memsnap.Poller, when the agent takes memory snapshots
_tried = False
_lock = threading.Lock()
_HOOKED = "torch.optim.optimizer"
_AGENT_VARS = ("GPROF_AGENT", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")


_HELPER_UNASKED = 1  # GPROF_HELPER_UNASKED in agent/gprof_agent.h


def _declare(lib):
    """Tells the agent this helper knows a window that did not ask for
    operators (ops.py: the observer only if built, never torch.profiler);
    the agent offers such windows only to a helper that says so."""
    caps = getattr(lib, "gprof_helper_caps", None)  # an older agent has none
    if caps is not None:
        caps.restype = None
        caps.argtypes = [ctypes.c_uint32]
        caps(_HELPER_UNASKED)


def _open(path):
    lib = ctypes.CDLL(path)
    lib.gprof_step.restype = None
    lib.gprof_steps.restype = ctypes.c_uint64
    lib.gprof_range_push.argtypes = [ctypes.c_char_p]
    _declare(lib)
    return lib


def _memory_poller(lib):
    """memsnap's poller for an agent that has gprof_step_memory (an older
    one has not: no snapshots, nothing else changes)."""
    global _mem
    try:
        from . import memsnap
        _mem = memsnap.Poller(lib)
    except (AttributeError, ImportError):
        _mem = None


def _load():
    """The agent instance already in the process, or the one the
    environment names, loaded once; None without one."""
    global _lib, _tried
    if _tried:
        return _lib
    with _lock:
        if _tried:
            return _lib
        for var in _AGENT_VARS:
            path = os.environ.get(var)
            if path and os.path.exists(path):
                try:
                    _lib = _open(path)
                    break
                except (OSError, AttributeError):
                    continue
        if _lib is None:
            try:  # linked into the program or LD_PRELOADed
                _lib = _open(None)
            except (OSError, AttributeError):
                _lib = None
        if _lib is not None:
            _memory_poller(_lib)
        _tried = True
    return _lib


def loaded():
    """Is the agent in this process? (Loads it when the environment names
    one and it is not loaded yet.)"""
    return _load() is not None


def step():
    """Ends one iteration: what the optimizer hook calls after each step,
    and what a job calls by hand where there is no hook (a torch before
    2.0, a loop without torch.optim). Either way the same follows: memory
    snapshots at their steps, and a window's PyTorch operators (ops.py)."""
    lib = _lib if _tried else _load()
    if lib is None:
        return 0
    if _mem is None:
        lib.gprof_step()
        return 0
    # the step and the poll in one call: a snapshot's start and end are at
    # steps, and the answer says when a window takes operators (ops.py)
    r = _mem.step()
    what = r & 0xff
    if what or _mem.recording:
        try:
            _mem.handle(what)
        except Exception:  # never break the job over profiling
            pass
    _operators(r)
    return r


def steps():
    lib = _load()
    return lib.gprof_steps() if lib is not None else 0


def range_push(name):
    lib = _load()
    if lib is not None:
        lib.gprof_range_push(name.encode())


def range_pop():
    lib = _load()
    if lib is not None:
        lib.gprof_range_pop()


_poll = None
_poll_tried = False
_STEP_OPS = 0x100  # GPROF_STEP_OPS in agent/gprof_agent.h


def _operators(r):
    """After a step: what a window that takes PyTorch operators wants
    (ops.py), only while one is open or the operators' profiler runs; r is
    the step's answer (GPROF_STEP_OPS)."""
    global _poll, _poll_tried
    try:
        if _poll is not None:
            if (r & _STEP_OPS) or _poll.active():
                _poll()
        elif not _poll_tried and (r & _STEP_OPS) and _lib is not None:
            _poll_tried = True
            from . import ops
            _poll = ops.poller(_lib)
            if _poll is not None:
                _poll()
    except Exception:  # never break the job over profiling
        pass


def _hook(optimizer, args, kwargs):
    """The optimizer's global post-step hook: one iteration."""
    step()


_registered = False
_warned = False


def _unsupported(why):
    """Says once, on stderr, that optimizer steps cannot be hooked here,
    what still works and how to mark steps by hand."""
    global _warned
    if _warned or not any(os.environ.get(v) for v in _AGENT_VARS):
        return  # said already, or no agent to trace with: nothing to say
    _warned = True
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None) or "(version unknown)"
    sys.stderr.write(
        "gprof_agent: torch %s has no global optimizer step hooks (%s; PyTorch 2.0 added "
        "them), so optimizer steps are not iterations by themselves and a process without "
        "a GPU registers with gprofd only when it marks a step. Mark each training step: "
        "call gprof_agent.step() right after optimizer.step(); then gprofctl trace "
        "--iterations N (with --operators) works as with a newer "
        "torch, and --duration-ms once the job is registered.\n" % (version, why))
    sys.stderr.flush()


def _register(module):
    global _registered
    if _registered:
        return
    hook = getattr(module, "register_optimizer_step_post_hook", None)
    if hook is None:  # a PyTorch before 2.0: step() by hand
        _unsupported("torch.optim.optimizer.register_optimizer_step_post_hook is missing")
        return
    hook(_hook)
    _registered = True


class _Finder(importlib.abc.MetaPathFinder):
    """Registers the step hook right after the program imports
    torch.optim.optimizer, whoever imports it, and never imports torch
    itself."""

    def find_spec(self, name, path=None, target=None):
        if name != _HOOKED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and \
                    hasattr(spec.loader, "exec_module"):
                spec.loader = _Loader(spec.loader)
                return spec
            if spec is not None:
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            _register(module)
        except Exception:  # never break the job over profiling
            pass

    def __getattr__(self, name):
        return getattr(self._inner, name)


def install():
    """Counts every optimizer step as an iteration: at once when torch.optim
    is imported already, else as soon as the program imports it."""
    mod = sys.modules.get(_HOOKED)
    if mod is not None:
        _register(mod)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
