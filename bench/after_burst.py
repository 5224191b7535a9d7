#!/usr/bin/env python3
"""after_burst.py: does a job get its speed back after a burst? (issue 24)

One process per round and configuration, each its own reference: BEFORE
timed steps, then (in "burst" processes) a capture of WINDOW iterations
asked for while the loop runs on; once gprofctl has the trace (or at once,
in "none" processes) the driver tells the loop, which runs AFTER more
steps. The figure is median(the AFTER steps) / median(the last BEFORE
steps before the request). Rounds run the configurations interleaved
(order rotated), so a host's drift falls on both alike; every round is
printed and written as JSON lines to --out. Loops:
  torchN   6 x (Linear(N) + GELU), AdamW, batch 256, each step
           synchronised
  cuda     bench/after_burst.cu: 20 empty-kernel launches a step with
           PyTorch's per-op calls around each (>= 10,000 launches/s)
Configurations: "none", "burst", and "burst:K=V[,K=V]" (environment for the
agent in that process, e.g. burst:GPROF_CUPTI_RELEASE=teardown).

  after_burst.py --gprofctl G --socket S --agent LIB [--cuda-bin B]
                 [--loops torch2048,torch256,cuda] [--configs none,burst]
                 [--rounds 4] [--before 2000] [--after 2000] [--out F]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--gprofctl", required=True)
ap.add_argument("--socket", required=True)
ap.add_argument("--agent", required=True)
ap.add_argument("--cuda-bin")
ap.add_argument("--python-dir", default=os.path.join(os.path.dirname(__file__), "..", "python"))
ap.add_argument("--loops", default="torch2048,torch256,cuda")
ap.add_argument("--configs", default="none,burst")
ap.add_argument("--rounds", type=int, default=4)
ap.add_argument("--before", type=int, default=2000)
ap.add_argument("--after", type=int, default=2000)
ap.add_argument("--warm", type=int, default=300, help="steps before the BEFORE steps, not timed")
ap.add_argument("--window", type=int, default=50)
ap.add_argument("--out")
ap.add_argument("--child", help=argparse.SUPPRESS)
a = ap.parse_args()


def torch_child(width):
    """The PyTorch loop, in the child process."""
    import torch
    import gprof_agent  # noqa: F401  (steps counted by its optimizer hook)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(256, width, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()

    over = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), over.set()), daemon=True).start()
    for _ in range(a.warm):
        step()
    print("ready", flush=True)
    dur, s, over_at = [], 0, -1
    while over_at < 0 or s < over_at + a.after:
        t0 = time.perf_counter_ns()
        if s == a.before:
            print("trigger", flush=True)
        if s > a.before and over_at < 0 and over.is_set():
            over_at = s
        step()
        dur.append(time.perf_counter_ns() - t0)
        s += 1
    print(json.dumps({"over_at": over_at, "steps_ns": dur}), flush=True)


if a.child:
    torch_child(int(a.child))
    sys.exit(0)


def run_one(loop, config, rnd):
    env = dict(os.environ)
    job = "ab-%s-%s-%d-%d" % (loop, config.split(":")[0], rnd, os.getpid())
    env.update(CUDA_INJECTION64_PATH=a.agent, NVTX_INJECTION64_PATH=a.agent,
               GPROF_SOCKET=a.socket, GPROF_JOB_ID=job, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.path.abspath(a.python_dir))
    if ":" in config:
        for kv in config.split(":", 1)[1].split(","):
            k, v = kv.split("=", 1)
            env[k] = v
    if loop == "cuda":
        cmd = [a.cuda_bin, str(a.before), str(a.after)]
    else:
        cmd = [sys.executable, __file__, "--child", loop[len("torch"):],
               "--before", str(a.before), "--after", str(a.after), "--warm", str(a.warm),
               "--gprofctl", a.gprofctl, "--socket", a.socket, "--agent", a.agent]
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    ctl = None
    ctl_res = {}
    result = None
    for line in p.stdout:
        line = line.strip()
        if line == "trigger" and config.startswith("burst"):
            # the loop goes on while gprofctl asks, captures and collects;
            # once it has the trace, the loop is told and times its AFTER steps
            def ask():
                r = subprocess.run([a.gprofctl, "--socket", a.socket, "trace", "--job", job,
                                    "--iterations", str(a.window), "--output-dir",
                                    "/tmp/after-burst-traces", "--timeout", "60"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                ctl_res.update(rc=r.returncode, out=r.stdout)
                p.stdin.write("over\n")
                p.stdin.flush()
            ctl = threading.Thread(target=ask)
            ctl.start()
        elif line == "trigger":
            p.stdin.write("over\n")
            p.stdin.flush()
        elif line.startswith("{"):
            result = json.loads(line)
            p.stdin.close()
    err = p.stderr.read()
    rc = p.wait()
    ctl_out, ctl_rc = "", None
    if ctl is not None:
        ctl.join()
        ctl_out, ctl_rc = ctl_res.get("out", ""), ctl_res.get("rc")
    if rc != 0 or result is None:
        return {"loop": loop, "config": config, "round": rnd, "rc": rc, "error": err[-2000:]}
    d, k = result["steps_ns"], result["over_at"]
    before = statistics.median(d[:a.before])
    after = statistics.median(d[k:])
    return {"loop": loop, "config": config, "round": rnd, "rc": rc, "ctl_rc": ctl_rc,
            "burst_steps": k - a.before, "before_us": before / 1e3, "after_us": after / 1e3,
            "ratio": after / before,
            "ctl": ctl_out[-300:] if ctl_rc else ""}


def main():
    loops = a.loops.split(",")
    configs = a.configs.split(",")
    rows = []
    out = open(a.out, "a") if a.out else None
    for rnd in range(a.rounds):
        for loop in loops:
            order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
            for config in order:
                r = run_one(loop, config, rnd)
                rows.append(r)
                if out:
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                if "ratio" in r:
                    print("round %d %-9s %-40s before %8.1f us after %8.1f us ratio %.4f%s" % (
                        rnd, loop, config, r["before_us"], r["after_us"], r["ratio"],
                        "" if not r["ctl_rc"] else "  (gprofctl exit %s)" % r["ctl_rc"]),
                        flush=True)
                else:
                    print("round %d %-9s %-40s FAILED rc %s: %s" % (rnd, loop, config, r["rc"],
                                                                    r["error"][-500:]), flush=True)
    print("\nmedians of after/before over rounds (every round above):")
    for loop in loops:
        for config in configs:
            v = [r["ratio"] for r in rows if r["loop"] == loop and r["config"] == config
                 and "ratio" in r]
            if v:
                print("  %-9s %-40s %.4f  (%s)" % (loop, config, statistics.median(v),
                                                   " ".join("%.4f" % x for x in v)))
    return 0 if all("ratio" in r for r in rows) else 1


sys.exit(main())
