"""Imports gprof_agent at interpreter start when GPROF_TORCH_STEPS=1, so a
PyTorch job's optimizer steps become iterations with no code change
(put this folder on PYTHONPATH; `gprofctl launch` does both)."""
import os

if os.environ.get("GPROF_TORCH_STEPS") == "1":
    try:
        import gprof_agent  # noqa: F401
    except Exception:  # never break the job over profiling
        pass
