#!/usr/bin/env python3
"""Back-to-back trace requests to every rank of a running multi-GPU job
at once (tests/gpu/run.sh's ddp section, DDP_STRESS=N; issue 28).

usage: ddp_stress.py GPROFCTL SOCKET JOB [--requests N] [--ranks R]
                     [--seed S] [--budget-s S] [--out FILE.jsonl]

Each request goes to the whole job (`gprofctl trace --job JOB`), drawn at
random, with no gap a quarter of the time and 0-50 ms otherwise:
  iterations  --iterations 1..10 --iteration-roundup 1..3   (60 %)
  duration    --duration-ms 5..80                            (15 %)
  together    two iteration requests at once: they queue per process (15 %)
  cancel      an endless request cancelled 20-200 ms after it is sent (10 %)
What must hold, and is counted: every request is delivered by every rank
(one file per rank, a Kineto trace whose distributedInfo names that rank;
for iterations, the same ProfilerStep# numbers on every rank)
or, for cancel, ends "cancelled" (or delivered, when the cancel came too
late to matter it cannot: the request is endless). Anything else is a
failure, printed with gprofctl's output. The job's own exit status is the
caller's to read (run.sh waits for it). Stops at --budget-s.
Prints a line per 50 requests, then the outcomes; exit 1 on a failure.
"""
import argparse
import collections
import glob
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("gprofctl")
ap.add_argument("socket")
ap.add_argument("job")
ap.add_argument("--requests", type=int, default=500)
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--seed", type=int, default=None)
ap.add_argument("--budget-s", type=float, default=150)
ap.add_argument("--out", default=None)
a = ap.parse_args()
seed = a.seed if a.seed is not None else int(time.time())
rng = random.Random(seed)
work = tempfile.mkdtemp(prefix="ddp-stress-")
outcomes = collections.Counter()
bad = []
n = 0
log = open(a.out, "w") if a.out else None


def start(args, tid):
    return subprocess.Popen([a.gprofctl, "--socket", a.socket, "--json", "trace", "--job", a.job,
                             "--trace-id", tid, "--output-dir", work, "--timeout", "60"] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def judge(kind, tid, p, t0):
    out, err = p.communicate(timeout=90)
    ms = round((time.time() - t0) * 1000)
    rec = {"kind": kind, "tid": tid, "rc": p.returncode, "ms": ms}
    try:
        r = json.loads(out)
    except ValueError:
        r = {}
    rec.update(delivered=r.get("delivered"), matched=r.get("matched"))
    why = ""
    if kind == "cancel":
        ok = p.returncode == 5 and "cancelled" in out + err  # exit 5: cancelled
        why = "" if ok else "not cancelled"
    else:
        files = sorted(glob.glob(os.path.join(work, tid, "*.pt.trace.json.gz")))
        ranks, nums = [], []
        for f in files:
            try:
                with gzip.open(f, "rt") as fh:
                    doc = json.load(fh)
                ranks.append(doc.get("distributedInfo", {}).get("rank"))
                nums.append(sorted(int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                                   if e.get("ph") == "X" and e.get("cat") != "gpu_user_annotation"
                                   and str(e.get("name", "")).startswith("ProfilerStep#")))
                if "_rank%s." % ranks[-1] not in os.path.basename(f):
                    why = "rank %s not in the name %s" % (ranks[-1], os.path.basename(f))
            except (OSError, ValueError) as e:
                why = "%s unreadable: %s" % (os.path.basename(f), e)
        rec["ranks"] = ranks
        if p.returncode != 0:
            why = why or "exit %d" % p.returncode
        elif sorted(ranks, key=str) != list(range(a.ranks)):
            why = why or "ranks %s delivered, want 0..%d" % (ranks, a.ranks - 1)
        elif kind != "duration" and any(x != nums[0] for x in nums):
            why = why or "ranks on different iterations: %s" % dict(zip(ranks, nums))
        ok = not why
        for f in files:  # keep the disk small: judged, then gone
            os.unlink(f)
    outcomes[kind + (" ok" if ok else " FAILED")] += 1
    if not ok:
        rec["why"] = why
        bad.append("%s %s: %s; stdout %s; stderr %s" % (kind, tid, why, out[-500:], err[-300:]))
    if log:
        log.write(json.dumps(rec) + "\n")


def iters():
    return ["--iterations", str(rng.randint(1, 10)), "--iteration-roundup", str(rng.randint(1, 3))]


t_start = time.time()
stopped = ""
while n < a.requests:
    if time.time() - t_start > a.budget_s:
        stopped = " (stopped at the %.0f s budget)" % a.budget_s
        break
    x = rng.random()
    n += 1
    tid = "ds%d-%d" % (seed % 10000, n)
    t0 = time.time()
    if x < 0.60:
        judge("iterations", tid, start(iters(), tid), t0)
    elif x < 0.75:
        judge("duration", tid, start(["--duration-ms", str(rng.randint(5, 80))], tid), t0)
    elif x < 0.90:
        tid2 = tid + "b"
        p1, p2 = start(iters(), tid), start(iters(), tid2)
        judge("together", tid, p1, t0)
        judge("together", tid2, p2, t0)
        n += 1
    else:
        p = start(["--iterations", "1000000", "--iteration-roundup", "1"], tid)
        time.sleep(rng.uniform(0.02, 0.2))
        c = None
        for _ in range(50):  # the daemon may not have it yet: try again
            c = subprocess.run([a.gprofctl, "--socket", a.socket, "cancel", tid],
                               capture_output=True, text=True, timeout=30)
            if c.returncode == 0 or p.poll() is not None:
                break
            time.sleep(0.02)
        judge("cancel", tid, p, t0)
    if n % 50 == 0:
        print("  ... %d requests, %.0f s: %s" % (n, time.time() - t_start, dict(sorted(outcomes.items()))),
              flush=True)
    if rng.random() >= 0.25:
        time.sleep(rng.uniform(0, 0.05))
print("ddp_stress seed %d: %d requests in %.0f s%s: %s" % (
    seed, n, time.time() - t_start, stopped, dict(sorted(outcomes.items()))))
for b in bad[:10]:
    print("FAIL", b[:900])
sys.exit(1 if bad else 0)
