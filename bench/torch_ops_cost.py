#!/usr/bin/env python3
"""torch_ops_cost.py: what recording PyTorch operators costs a training
step, by mechanism (issue 27: the agent's operators must cost at most half
of what torch.profiler CPU+CUDA costs the same steps).

One process per round and width. In each, after WARM steps, every mode
runs once: GAP steps with nothing (the reference), then WINDOW steps with
the mode on; its figure is median(window steps) / median(reference steps).
The stop (and export of the trace, timed apart) happens after the window,
outside both medians, and is reported as its own cost. Modes run in a
rotated order each round, except those that take CUPTI (torch.profiler
with CUDA), which run last so they cannot leave hooks behind for the
others. Every round is printed; medians over rounds at the end.
Modes:
  kcpu           torch.profiler, activities=[CPU]
  kcpu_shapes    the same with record_shapes=True
  kcpu_mods      kcpu plus nn.Module scopes from global forward hooks
  kcpu_all       record_shapes plus module scopes
  legacy         torch.autograd.profiler_legacy (no Kineto at all)
  tp, tp_shapes  torch.profiler CPU+CUDA (without / with record_shapes)
  none           nothing (the drift between two stretches of steps)
  obs            the agent's operator observer (python/gprof_agent/
                 _ops_observer.cpp: one RecordFunction callback), built
                 with build_ops before the first step if it is not yet
  obs_shapes     the same with input shapes
  obs_mods       obs plus the module scopes (ops.py's own _Modules hooks)
  obs_all        shapes plus module scopes
The loop: 6 x (Linear(width) + GELU), AdamW, batch 256, each step
synchronised (as bench/after_burst.py); --device cpu runs it on the CPU
(no CUDA: the tp modes then record CPU only). Each mode's line also gives
its cost per recorded operator: (window - reference step) / operators a
step.

  torch_ops_cost.py [--widths 2048,256] [--rounds 3] [--modes ...]
                    [--warm 200] [--gap 150] [--window 100] [--out F]
                    [--device cuda|cpu] [--batch 256]
Child stderr carries "mode X start/stop" markers, so a CUPTI spy
(bench/cupti_spy.c, LD_PRELOAD) shows which mode made which CUPTI call."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--widths", default="2048,256")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--modes", default="kcpu,kcpu_shapes,kcpu_mods,kcpu_all,legacy,tp,tp_shapes")
ap.add_argument("--warm", type=int, default=200)
ap.add_argument("--gap", type=int, default=150)
ap.add_argument("--window", type=int, default=100)
ap.add_argument("--out")
ap.add_argument("--device", default="cuda")
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--child", help=argparse.SUPPRESS)
a = ap.parse_args()
CUPTI_MODES = ("tp", "tp_shapes")


def child(width, modes):
    import torch
    torch.manual_seed(0)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(a.batch, width, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        sync()

    def timed(n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            step()
            out.append(time.perf_counter_ns() - t0)
        return out

    names = {}
    stack = []

    def pre(mod, inp):
        name = names.get(id(mod))
        if name is None:
            name = names[id(mod)] = "nn.Module: %s_%d" % (type(mod).__name__, len(names))
        rf = torch.autograd.profiler.record_function(name)
        rf.__enter__()
        stack.append(rf)

    def post(mod, inp, out):
        if stack:
            stack.pop().__exit__(None, None, None)

    obs = None
    if any(m.startswith("obs") for m in modes):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        from gprof_agent import build_ops, ops as gops
        obs = build_ops.load_built(torch) or build_ops.build(torch)

    class Obs:
        def __init__(self, shapes):
            obs.start(shapes, 256 << 20)

        def stop(self):
            self.path = tempfile.mktemp(suffix=".json")
            self.stats = obs.stop(self.path)

        def export_chrome_trace(self, path):
            os.rename(self.path, path)

    class Mods:
        def __init__(self):
            self.m = gops._Modules(torch, obs)  # the observer's own scopes, as ops.py

        def remove(self):
            self.m.close()

    class Nothing:
        def stop(self):
            pass

    def start(mode):
        P = torch.profiler
        hooks = []
        if mode == "none":
            return Nothing(), hooks
        if mode.startswith("obs"):
            hooks = [Mods()] if mode in ("obs_mods", "obs_all") else []
            return Obs(mode in ("obs_shapes", "obs_all")), hooks
        if mode in ("kcpu_mods", "kcpu_all"):
            hooks = [torch.nn.modules.module.register_module_forward_pre_hook(pre),
                     torch.nn.modules.module.register_module_forward_hook(post)]
        if mode == "legacy":
            prof = torch.autograd.profiler_legacy.profile(record_shapes=False)
            prof.__enter__()
            return prof, hooks
        acts = [P.ProfilerActivity.CPU]
        if mode in CUPTI_MODES and a.device == "cuda":
            acts.append(P.ProfilerActivity.CUDA)
        prof = P.profile(activities=acts,
                         record_shapes=mode in ("kcpu_shapes", "kcpu_all", "tp_shapes"))
        prof.start()
        return prof, hooks

    timed(a.warm)
    res = []
    for mode in modes:
        ref = timed(a.gap)
        sys.stderr.write("mode %s start\n" % mode)
        sys.stderr.flush()
        try:
            prof, hooks = start(mode)
        except Exception as e:
            res.append({"mode": mode, "error": "%s: %s" % (type(e).__name__, e)})
            continue
        win = timed(a.window)
        t0 = time.perf_counter_ns()
        if mode == "legacy":
            prof.__exit__(None, None, None)
        else:
            prof.stop()
        for h in hooks:
            h.remove()
        t1 = time.perf_counter_ns()
        path = tempfile.mktemp(suffix=".json")
        nev = ops = -1
        mods = 0
        try:
            if mode == "none":
                raise StopIteration
            prof.export_chrome_trace(path)
            with open(path) as f:
                tr = json.load(f)
            evs = tr["traceEvents"] if isinstance(tr, dict) else tr
            nev = len(evs)
            # (a torch built without Kineto exports the legacy profiler's
            # events: no cat)
            ops = sum(1 for e in evs if e.get("cat") == "cpu_op" or
                      (e.get("ph") == "X" and "cat" not in e))
            mods = sum(1 for e in evs if str(e.get("name", "")).startswith("nn.Module") and
                       e.get("ph") == "X")
            os.unlink(path)
        except StopIteration:
            pass
        except Exception as e:
            mods = "export failed: %s" % e
        t2 = time.perf_counter_ns()
        sys.stderr.write("mode %s stop\n" % mode)
        sys.stderr.flush()
        res.append({"mode": mode, "ref_ms": statistics.median(ref) / 1e6,
                    "win_ms": statistics.median(win) / 1e6,
                    "ratio": statistics.median(win) / statistics.median(ref),
                    "stop_ms": (t1 - t0) / 1e6, "export_ms": (t2 - t1) / 1e6,
                    "events": nev, "cpu_ops": ops, "modules": mods,
                    "us_per_op": ((statistics.median(win) - statistics.median(ref)) / 1e3 /
                                  (ops / a.window) if ops and ops > 0 else None)})
    print(json.dumps({"torch": torch.__version__, "width": width, "results": res}), flush=True)


if a.child:
    w, m = a.child.split(":")
    child(int(w), m.split(","))
    sys.exit(0)

modes = a.modes.split(",")
plain = [m for m in modes if m not in CUPTI_MODES]
last = [m for m in modes if m in CUPTI_MODES]
allres = {}
perop = {}
out = open(a.out, "w") if a.out else None
for r in range(a.rounds):
    for w in a.widths.split(","):
        k = r % len(plain) if plain else 0
        order = plain[k:] + plain[:k] + last
        p = subprocess.run([sys.executable, __file__, "--child", "%s:%s" % (w, ",".join(order)),
                            "--warm", str(a.warm), "--gap", str(a.gap), "--window", str(a.window),
                            "--device", a.device, "--batch", str(a.batch)],
                           capture_output=True, text=True)
        spy = [l for l in p.stderr.splitlines() if l.startswith(("cupti-spy", "mode "))]
        if p.returncode != 0 or not p.stdout.strip():
            print("round %d width %s: child failed rc=%d\n%s" % (r, w, p.returncode, p.stderr[-3000:]))
            continue
        d = json.loads(p.stdout.strip().splitlines()[-1])
        print("round %d width %s torch %s" % (r, w, d["torch"]))
        for x in d["results"]:
            if "error" in x:
                print("  %-12s ERROR %s" % (x["mode"], x["error"]))
                continue
            print("  %-12s ratio %.3f  ref %.3f ms  win %.3f ms  stop %.1f ms  export %.1f ms  "
                  "events %s cpu_ops %s modules %s  %s us/op" % (
                      x["mode"], x["ratio"], x["ref_ms"], x["win_ms"], x["stop_ms"], x["export_ms"],
                      x["events"], x["cpu_ops"], x["modules"],
                      "%.3f" % x["us_per_op"] if x.get("us_per_op") is not None else "-"))
            if x.get("us_per_op") is not None:
                perop.setdefault((w, x["mode"]), []).append(x["us_per_op"])
            allres.setdefault((w, x["mode"]), []).append(x["ratio"])
        if spy:
            print("  cupti calls by mode:")
            cur, cnt = "before any mode", {}
            for l in spy:
                if l.startswith("mode "):
                    cur = l
                else:
                    cnt.setdefault(cur, []).append(l.split(": ", 1)[1])
            for m, calls in cnt.items():
                print("    %s: %d calls: %s" % (m, len(calls), "; ".join(sorted(set(calls)))[:400]))
        if out:
            out.write(json.dumps({"round": r, **d}) + "\n")
            out.flush()
print("medians over rounds (step inflation during the window):")
for (w, m), v in sorted(allres.items()):
    print("  width %-5s %-12s %.3f  (rounds: %s)" % (w, m, statistics.median(v), " ".join("%.3f" % x for x in v)))
print("medians over rounds (cost per recorded operator, us):")
for (w, m), v in sorted(perop.items()):
    print("  width %-5s %-12s %.3f  (rounds: %s)" % (w, m, statistics.median(v), " ".join("%.3f" % x for x in v)))
