"""gprof_agent: iteration boundaries for PyTorch jobs traced by gprofd.

    import gprof_agent          # every optimizer.step() ends one iteration

With libgprof_agent loaded (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH,
LD_PRELOAD or GPROF_AGENT naming it), importing this module registers a
global optimizer step post-hook that calls gprof_step(), so
`gprofctl trace --iterations N` captures exactly N training steps and the
trace shows them as ProfilerStep#<n>. Without the agent it does nothing.

The same without touching the code: put this folder's parent on PYTHONPATH
and set GPROF_TORCH_STEPS=1 (python/sitecustomize.py imports this module).
"""
import ctypes
import os

__all__ = ["step", "steps", "range_push", "range_pop", "loaded"]

_lib = None


def _load():
    """The agent instance already in the process, or the one the
    environment names (dlopen of the same path returns the same instance
    the CUDA driver or NVTX loads)."""
    for var in ("GPROF_AGENT", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"):
        path = os.environ.get(var)
        if path and os.path.exists(path):
            try:
                lib = ctypes.CDLL(path)
                lib.gprof_step.restype = None
                lib.gprof_steps.restype = ctypes.c_uint64
                lib.gprof_range_push.argtypes = [ctypes.c_char_p]
                return lib
            except (OSError, AttributeError):
                continue
    try:
        lib = ctypes.CDLL(None)
        lib.gprof_step.restype = None
        lib.gprof_steps.restype = ctypes.c_uint64
        return lib
    except AttributeError:
        return None


def loaded():
    return _lib is not None


def step():
    """Ends one iteration (what the optimizer hook calls)."""
    if _lib is not None:
        _lib.gprof_step()


def steps():
    return _lib.gprof_steps() if _lib is not None else 0


def range_push(name):
    if _lib is not None:
        _lib.gprof_range_push(name.encode())


def range_pop():
    if _lib is not None:
        _lib.gprof_range_pop()


def _hook(optimizer, args, kwargs):
    _lib.gprof_step()


_lib = _load()
if _lib is not None:
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
        register_optimizer_step_post_hook(_hook)
    except ImportError:
        pass  # no PyTorch: step() is still there for other loops
