#!/usr/bin/env python3
"""bench-metrics: what always-on sampling costs (issue 6's target: under
0.05 % of one core at a 1 s interval with host and GPU metrics).

Starts gprofd (sampling every --interval, /metrics on a free loopback
port, no other client), lets it run --seconds, and reads its own exported
figures at the start and the end: gprofd_daemon_cpu_seconds_total (all the
daemon's CPU: loop, pool, HTTP thread) for the share of a core, and
gprofd_sample_cpu_seconds / gprofd_sample_duration_seconds (one cycle's
CPU and wall time, of the last cycle). Only two scrapes, at the ends. Also
RSS. Prints one JSON object.

usage: bench-metrics.py GPROFD [--seconds 60] [--interval 1000] [--nvml LIB] [--history 300s]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("gprofd")
ap.add_argument("--seconds", type=float, default=60)
ap.add_argument("--interval", type=int, default=1000)
ap.add_argument("--nvml", default="libnvidia-ml.so.1")
ap.add_argument("--history", default="300s",
                help="sampling.history (the default 300s; a shorter one reaches the steady state, "
                     "where the ring's oldest sample lends its buffers to the next, sooner)")
a = ap.parse_args()

d = tempfile.mkdtemp(prefix="bench-metrics-")
cfg = os.path.join(d, "g.yaml")
open(cfg, "w").write("metrics: 127.0.0.1:0\nsampling:\n  interval: %dms\n  nvml_library: %s\n"
                     "  history: %s\n" % (a.interval, a.nvml, a.history))
p = subprocess.Popen([a.gprofd, "--config", cfg, "--socket", os.path.join(d, "s"), "--tcp", "off",
                      "--state-dir", os.path.join(d, "st")], stderr=subprocess.PIPE, text=True)
port = None
for line in p.stderr:
    m = re.search(r"metrics on http://[^:]+:(\d+)/metrics", line)
    if m:
        port = int(m.group(1))
    if " running: " in line:
        break


def scrape():
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                text = r.read().decode()
            return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1])
                    for l in text.splitlines() if l and not l.startswith("#")}
        except Exception:
            time.sleep(0.1)  # before the first sample: 503


def threads():
    """Each thread's CPU time (ns, from schedstat) and wake-ups, by name."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % p.pid):
        try:
            name = open("/proc/%d/task/%s/comm" % (p.pid, tid)).read().strip()
            run, _, slices = open("/proc/%d/task/%s/schedstat" % (p.pid, tid)).read().split()
        except OSError:
            continue
        r, n = out.get(name, (0, 0))
        out[name] = (r + int(run), n + int(slices))
    return out


m0, t0 = scrape(), time.monotonic()
th0 = threads()
cyc_cpu, cyc_wall = [], []
# Scrape only at the ends (as a Prometheus every 15 s or more would, the
# scrapes are a small part); each scrape reports the cycle before it.
time.sleep(a.seconds)
th1 = threads()
m1, t1 = scrape(), time.monotonic()
cyc_cpu.append(m1["gprofd_sample_cpu_seconds"])
cyc_wall.append(m1["gprofd_sample_duration_seconds"])
p.terminate()
p.wait()
cpu = m1["gprofd_daemon_cpu_seconds_total"] - m0["gprofd_daemon_cpu_seconds_total"]
print(json.dumps({
    "seconds": round(t1 - t0, 1),
    "interval_ms": a.interval,
    "nvml_up": m1.get("gprofd_nvml_up"),
    "gpus": m1.get("gprofd_gpus", 0),
    "series": len(m1),
    "daemon_cpu_seconds": round(cpu, 4),
    "daemon_core_share_percent": round(100 * cpu / (t1 - t0), 4),
    "cycle_cpu_ms_median": round(statistics.median(cyc_cpu) * 1e3, 3),
    "cycle_wall_ms_median": round(statistics.median(cyc_wall) * 1e3, 3),
    "rss_mb": round(m1["gprofd_daemon_resident_memory_bytes"] / 1e6, 2),
    "threads_ms_per_s": {k: round((v[0] - th0.get(k, (0, 0))[0]) / 1e6 / (t1 - t0), 3)
                         for k, v in th1.items()},
    "threads_wakeups_per_s": {k: round((v[1] - th0.get(k, (0, 0))[1]) / (t1 - t0), 2)
                              for k, v in th1.items()},
    "note": "the 2 scrapes are included in the daemon's CPU; the cycle figures are the last cycle's",
}, indent=1))
