#!/usr/bin/env python3
"""CUDA graphs and the agent's bursts (tests/gpu/run.sh's `graphs` section):
does the job survive, and keep its speed, after bursts that saw CUDA graph
replays? PyTorch turned CUPTI's teardown off beside CUDA graphs for years
(pytorch#112507: crashes at re-initialisation after a teardown) and back
on for CUDA 12.6+ (pytorch#146604, kineto#1264).

usage: graphs_check.py BIN_DIR OUT_DIR [--variants a,b,...] [--after N]
(BIN_DIR: gprofd; gprofctl launch's layout in .devlibs/ctl; LD_LIBRARY_PATH
set as tests/gpu/prepare.sh leaves it.)

Each variant is one process of tests/gpu/compile_train.py, all at once on
the visible GPU, under a gprofd of this script's own (its Kineto socket
name too, so it runs beside another gprofd):
  graphs          mode reduce-overhead (Inductor's CUDA graphs), the agent,
                  BURSTS traces of 5 iterations, N steps apart and N after
  graphs-unsub    the same with GPROF_CUPTI_RELEASE=unsubscribe (no teardown)
  graphs-teardown the same with GPROF_CUPTI_GRAPHS=teardown: finalized anyway,
                  at a runtime call's exit other than a graph launch's (an
                  experiment: does the place of the finalize matter?)
  graphs-idle     the agent loaded, no trace (the job's own stability)
  eager           mode default (Triton kernels, no graphs), the agent, bursts
  torch-profiler  mode reduce-overhead, no agent: torch.profiler itself over
                  5 steps BURSTS times (stock PyTorch on the same job)
Every variant must end with exit status 0 (waitpid) and a finite loss.
Prints one line per variant and "ok"/"FAIL" lines; exit 1 on a failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("out")
ap.add_argument("--variants", default="graphs,graphs-unsub,graphs-idle,eager,torch-profiler")
ap.add_argument("--bursts", type=int, default=3)
ap.add_argument("--after", type=int, default=1500, help="steps between bursts and after the last")
a = ap.parse_args()

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCH = os.path.join(ROOT, ".devlibs", "ctl", "gprofctl")
TRAIN = os.path.join(ROOT, "tests", "gpu", "compile_train.py")
os.makedirs(a.out, exist_ok=True)
work = tempfile.mkdtemp(prefix="gprof-graphs-")
sock = os.path.join(work, "gprofd.sock")
with open(os.path.join(work, "gprofd.yaml"), "w") as f:
    f.write("kineto:\n  socket_name: graphs-check-%d\n" % os.getpid())
gp = subprocess.Popen([os.path.join(a.bin, "gprofd"), "--config", os.path.join(work, "gprofd.yaml"),
                       "--socket", sock, "--tcp", "off", "--metrics", "off",
                       "--state-dir", os.path.join(work, "state"), "-v"],
                      stderr=open(os.path.join(a.out, "graphs-gprofd.log"), "w"))


def ctl(*args, timeout=120):
    return subprocess.run([os.path.join(a.bin, "gprofctl"), "--socket", sock] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def steps(job):
    r = ctl("--json", "list", "--job", job)
    try:
        ps = json.loads(r.stdout)["processes"]
    except (ValueError, KeyError):
        return -1
    return max((p["steps"] for p in ps), default=-1)


for _ in range(100):
    if os.path.exists(sock):
        break
    time.sleep(0.1)

results = {}


def run(name):
    job = "graphs-%s" % name
    stop = os.path.join(work, name + ".stop")
    log = open(os.path.join(a.out, "graphs-%s.log" % name), "w")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    mode = "default" if name == "eager" else "reduce-overhead"
    cmd = [sys.executable, TRAIN, "--mode", mode, "--stop", stop, "--max-s", "300"]
    if name == "torch-profiler":
        at = [300 + i * a.after for i in range(a.bursts)]
        cmd += ["--torch-profile-at", ",".join(map(str, at)),
                "--max-steps", str(at[-1] + a.after)]
    else:
        if name == "graphs-unsub":
            env["GPROF_CUPTI_RELEASE"] = "unsubscribe"
        if name == "graphs-teardown":  # the unsafe experiment: finalize beside graphs
            env["GPROF_CUPTI_GRAPHS"] = "teardown"
        cmd = [LAUNCH, "--socket", sock, "launch", "--job", job, "--"] + cmd
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    r = {"variant": name, "traces": []}
    if name != "torch-profiler":
        n = -1
        while p.poll() is None and n < 300:  # compiled and stepping
            n = steps(job)
            time.sleep(0.2)
        for b in range(a.bursts if name != "graphs-idle" else 0):
            if p.poll() is not None:
                break
            t = ctl("trace", "--job", job, "--iterations", "5", "--iteration-roundup", "1",
                    "--timeout", "90", "--output-dir", os.path.join(work, "out-" + name))
            r["traces"].append(t.returncode)
            goal = steps(job) + a.after
            while p.poll() is None and steps(job) < goal:
                time.sleep(0.2)
        if name == "graphs-idle":
            goal = steps(job) + a.after * a.bursts
            while p.poll() is None and steps(job) < goal:
                time.sleep(0.2)
        r["steps_seen"] = steps(job)
        open(stop, "w").close()
    rc = p.wait()
    log.close()
    tail = open(log.name).read().strip().splitlines()
    r.update(rc=rc, seconds=round(time.time() - t0, 1), last=tail[-1][:200] if tail else "")
    results[name] = r


threads = [threading.Thread(target=run, args=(v,)) for v in a.variants.split(",")]
for t in threads:
    t.start()
for t in threads:
    t.join()
gp.terminate()
gp.wait()
fails = 0
for name in a.variants.split(","):
    r = results[name]
    print(json.dumps(r), flush=True)
    ok = r["rc"] == 0 and all(t == 0 for t in r["traces"])
    fails += not ok
    print("%s %s: exit status %d, traces %s, %s" % ("ok" if ok else "FAIL", name, r["rc"],
                                                   r["traces"], r["last"]), flush=True)
sys.exit(1 if fails else 0)
