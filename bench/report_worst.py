#!/usr/bin/env python3
"""gprofctl report on the worst inputs we can build (issue 43): time and
peak memory per input byte, every round printed.

usage: report_worst.py GPROFCTL [--mb 1,2,4,8] [--rounds 3]
                       [--cases devices,pickle_lists,...] [--timeout 120]

The inputs are tests/tools/hostile_traces.py's (many devices, streams,
threads, names, GPU ranges on many devices, gaps on many devices, live
allocations among many operators, deep nesting, a long name; pickles of
one value per byte, of lists shared through the memo, of a large shared
dict), each built to every size in --mb (megabytes of input). Each round
runs `gprofctl report FILE` with GPROFCTL_REPORT_COUNTS set, under GNU
time (/usr/bin/time), and prints: the wall seconds and microseconds per KB
of input, gprofctl's peak RSS and RSS per input byte, and what gprofctl
counted (work: hash lookups + probes + where-lookups + bytes rescanned +
snapshot steps, per input byte; heap or snapshot bytes per input byte), then the exit status and the first words
of any error. A linear reader keeps us/KB and work/byte flat as n grows;
the stated bounds are in docs/REPORT.md (Limits), the latest figures in
docs/BENCHMARKS.md. A round past --timeout is printed as such and the
larger sizes of that case are skipped.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tools"))
import hostile_traces  # noqa: E402

ALL = dict(hostile_traces.TRACES, **hostile_traces.PICKLES)

ap = argparse.ArgumentParser()
ap.add_argument("gprofctl")
ap.add_argument("--mb", default="1,2,4,8")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--cases", default=",".join(ALL))
ap.add_argument("--timeout", type=float, default=120)
a = ap.parse_args()


def counts_of(err):
    counts, msg = {}, ""
    for line in err.splitlines():
        if "counts:" in line:
            counts = {k: int(v) for k, v in (kv.split("=") for kv in line.split("counts:")[1].split())}
        elif not msg:
            msg = line.split(": ", 2)[-1][:60]
    return counts, msg


def run(path, errfile):
    """(seconds, gprofctl's peak RSS in KB, its counts, exit status, the
    first words of an error). The RSS is GNU time's %M: ru_maxrss read by
    wait4 here would include this Python's pages, copied by the fork
    before exec."""
    with open(errfile, "w+b") as ef:
        t = time.monotonic()
        p = subprocess.Popen(["/usr/bin/time", "-f", "rss_kb=%M", a.gprofctl, "report", path],
                             stdout=subprocess.DEVNULL, stderr=ef,
                             env=dict(os.environ, GPROFCTL_REPORT_COUNTS="1"))
        try:
            p.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return None, None, {}, None, "timed out"
        dt = time.monotonic() - t
        ef.seek(0)
        err = ef.read().decode(errors="replace")
    rss = int(err.rsplit("rss_kb=", 1)[1].split()[0])
    lines = [l for l in err.splitlines() if not l.startswith("rss_kb=") and
             not l.startswith("Command exited")]
    c, msg = counts_of("\n".join(lines))
    return dt, rss, c, p.returncode, msg


print("%-16s %7s %10s %5s %8s %9s %9s %8s %9s %9s %4s %s" % (
    "case", "n", "bytes", "round", "s", "us/KB", "RSS KB", "RSS/B", "work/B", "mem/B", "rc",
    "error"))
with tempfile.TemporaryDirectory(prefix="report-worst-") as d:
    for case in a.cases.split(","):
        build = ALL[case]
        ext = ".pickle" if case in hostile_traces.PICKLES else ".json"
        per_n = len(build(1000)) / 1000
        for mb in (float(x) for x in a.mb.split(",")):
            n = max(1, int(mb * (1 << 20) / per_n))
            data = build(n)
            path = os.path.join(d, case + ext)
            with open(path, "wb") as f:
                f.write(data)
            slow = False
            for k in range(a.rounds):
                dt, rss, c, rc, msg = run(path, os.path.join(d, "stderr"))
                if dt is None:
                    print("%-16s %7d %10d %5d  timed out after %.0f s" % (case, n, len(data), k,
                                                                          a.timeout), flush=True)
                    slow = True
                    break
                work = (c.get("lookups", 0) + c.get("probes", 0) + c.get("wheres", 0) +
                        c.get("rescanned", 0) + c.get("snapshot_steps", 0))
                mem = c.get("snapshot_peak_bytes", 0) if ext == ".pickle" else c.get("heap_bytes", 0)
                print("%-16s %7d %10d %5d %8.3f %9.2f %9d %8.2f %9s %9s %4d %s" % (
                    case, n, len(data), k, dt, dt * 1e6 / (len(data) / 1024), rss,
                    rss * 1024 / len(data), "%.3f" % (work / len(data)) if c else "-",
                    "%.2f" % (mem / len(data)) if c else "-", rc, msg), flush=True)
            os.unlink(path)
            if slow:
                break
