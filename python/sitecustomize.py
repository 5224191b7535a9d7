"""With GPROF_TORCH_STEPS=1, makes a PyTorch job's optimizer steps
iterations for gprofd with no code change (put this folder on PYTHONPATH;
`gprofctl launch` does both). It imports nothing heavy: gprof_agent only
watches for the program's own import of torch.optim (see its docstring).

Being first on PYTHONPATH, this file hides any other sitecustomize (a
distribution's, a virtual environment's): that one is run afterwards, as
Python would have run it."""
import os
import sys

if os.environ.get("GPROF_TORCH_STEPS") == "1":
    try:
        import gprof_agent  # noqa: F401
    except Exception:  # never break the job over profiling
        pass


def _chain():
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        try:
            d = os.path.abspath(entry or os.getcwd())
        except OSError:
            continue
        path = os.path.join(d, "sitecustomize.py")
        if d == here or not os.path.isfile(path):
            continue
        spec = importlib.util.spec_from_file_location("_gprof_next_sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        try:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        except Exception as e:  # as Python reports a failing sitecustomize
            sys.stderr.write("Error in sitecustomize (%s); set PYTHONVERBOSE for "
                             "traceback:\n%s: %s\n" % (path, type(e).__name__, e))
        return


_chain()
