#!/usr/bin/env python3
"""The operator observer (python/gprof_agent/_ops_observer.cpp) against the
GPU host's own torch (its C++ ABI): loads what `python3 -m
gprof_agent.build_ops` built, records a window of 5 training steps of a
small CPU model with input shapes, and checks the file it writes: cpu_op
events with aten::addmm and aten::linear, Input Dims, backward ops linked
to their forward (fwdbwd flows), nothing dropped. Exit 1 on a failure.
"""
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import torch  # noqa: E402
from gprof_agent import build_ops  # noqa: E402

mod = build_ops.load_built(torch)
if mod is None:
    print("FAIL observer: not built for torch %s" % torch.__version__)
    sys.exit(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 64)
path = os.path.join(tempfile.mkdtemp(), "ops.json")
mod.start(True, 16 << 20)
for _ in range(5):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
st = mod.stop(path)
doc = json.load(open(path))
ev = doc["traceEvents"]
ops = [e for e in ev if e.get("cat") == "cpu_op"]
names = collections.Counter(e["name"] for e in ops)
flows = sum(1 for e in ev if e.get("cat") == "fwdbwd")
dims = sum(1 for e in ops if "Input Dims" in e.get("args", {}))
fails = []
for n in ("aten::addmm", "aten::linear"):
    if names[n] != 10:
        fails.append("%s x%d, 10 wanted" % (n, names[n]))
if not dims:
    fails.append("no Input Dims")
if not flows:
    fails.append("no fwdbwd flow")
if st.get("drops"):
    fails.append("%d dropped" % st["drops"])
print(json.dumps({"torch": torch.__version__, "cpu_ops": len(ops), "names": len(names),
                  "with_dims": dims, "flows": flows, "stats": st}))
for f in fails:
    print("FAIL observer: " + f)
print("ok observer: torch %s, %d operators in 5 steps" % (torch.__version__, len(ops))
      if not fails else "")
sys.exit(1 if fails else 0)
