#!/usr/bin/env python3
"""How long an application thread waits on the agent while 16 threads record
NVTX ranges as fast as they can under a capture window (issue 23 item 6),
against the target the CI once asserted and no longer does (issue 37: a
wall-time figure holds only on a quiet machine).

usage: bench/agent_flood.py BUILD_DIR [--rounds 5] [--target-ms 250]

Runs tests/integration/test-agent.py's test_memory_bound (the burst, its
byte budget, the cut trace, the dropped events: those it asserts) ROUNDS
times and reads what it prints: "longest blocked" is the longest time an
application thread spent neither on a CPU nor waiting for one (schedstat's
run_delay subtracted from wall minus CPU time), which is time spent waiting
on the agent (a lock, the kernel's map lock); "longest gap" is the longest
time between two iterations of a thread, CPU waits included. Prints each
round and the worst, and exits 1 when the worst blocked time is past the
target. Run it on a quiet machine (docs/BENCHMARKS.md: 0.1-0.3 ms with a
trace, 44-60 us without, 636 ms before the fix).
"""
import argparse
import os
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--target-ms", type=float, default=250.0)
a = ap.parse_args()
src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
b = os.path.abspath(a.build)
cmd = [sys.executable, os.path.join(src, "tests/integration/test-agent.py"),
       os.path.join(b, "daemon/gprofd"), os.path.join(b, "ctl/gprofctl"),
       os.path.join(b, "tests/integration/agent-app"), os.path.join(b, "agent/libgprof_agent.so"),
       os.path.join(src, "tests/tools/validate_trace.py")]
env = dict(os.environ, GPROF_TEST="test_memory_bound",
           PYTHON_HELPER_DIR=os.path.join(src, "python"))
worst_blocked = worst_gap = 0.0
for r in range(a.rounds):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(r"longest gap (\d+) ms, longest blocked ([\d.]+) ms", p.stdout)
    if p.returncode != 0 or m is None:
        print(p.stdout[-3000:] + p.stderr[-2000:])
        sys.exit("bench/agent_flood.py: round %d failed (exit %d)" % (r + 1, p.returncode))
    gap, blocked = float(m.group(1)), float(m.group(2))
    worst_gap, worst_blocked = max(worst_gap, gap), max(worst_blocked, blocked)
    print("round %d: longest blocked %.1f ms, longest gap %.0f ms" % (r + 1, blocked, gap))
print("worst of %d: blocked %.1f ms (target < %.0f ms), gap %.0f ms (printed only)"
      % (a.rounds, worst_blocked, a.target_ms, worst_gap))
sys.exit(0 if worst_blocked < a.target_ms else 1)
