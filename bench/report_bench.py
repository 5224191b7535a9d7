#!/usr/bin/env python3
"""gprofctl report's speed and memory on a generated trace (issue 14's
targets: at least 1,000,000 events/s, under 200 MB peak RSS).

usage: report_bench.py GPROFCTL [--events N] [--rounds R] [--plain]

Writes a Kineto-shaped trace of N events (default 1,000,000: per
iteration a ProfilerStep#, runtime calls, kernels on 4 streams of 8 names,
copies, NCCL; 3-decimal timestamps, as the agent writes them), gzip unless
--plain, then runs `gprofctl --json report` on it R times (default 5) and
prints each run's seconds, events/s and peak RSS (ru_maxrss of the child),
then the medians.
"""
import argparse
import gzip
import os
import resource
import statistics
import subprocess
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("gprofctl")
ap.add_argument("--events", type=int, default=1000000)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--plain", action="store_true")
a = ap.parse_args()

NAMES = ["void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
         "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "ncclDevKernel_AllReduce",
         "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>", "reduce_kernel",
         "softmax_warp_forward", "multi_tensor_apply_kernel", "layer_norm_kernel"]


def generate(path):
    op = open if a.plain else (lambda p, m: gzip.open(p, m, compresslevel=1))
    n, t, it = 0, 1000.0, 0
    with op(path, "wt") as f:
        f.write('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, '
                '"world_size": 1}, "baseTimeNanoseconds": 1790857026000000000, '
                '"traceEvents": [\n')
        first = True
        while n < a.events:
            lines = ['{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 7, '
                     '"tid": 7, "ts": %.3f, "dur": 900.000}' % (it, t)]
            for k in range(48):
                ts = t + k * 18.5
                lines.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                             '"pid": 7, "tid": 7, "ts": %.3f, "dur": 4.125, "args": {"cbid": 211, '
                             '"correlation": %d}}' % (ts, n + k))
                lines.append('{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %d, '
                             '"ts": %.3f, "dur": %.3f, "args": {"device": 0, "stream": %d, '
                             '"correlation": %d, "grid": [128, 1, 1], "block": [256, 1, 1]}}'
                             % (NAMES[k % 8], 7 + k % 4, ts + 5, 3 + k % 13, 7 + k % 4, n + k))
            lines.append('{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", '
                         '"pid": 0, "tid": 7, "ts": %.3f, "dur": 20.000, "args": {"bytes": 1048576}}'
                         % (t + 890))
            f.write(("" if first else ",\n") + ",\n".join(lines))
            first = False
            n += len(lines)
            t += 1000
            it += 1
        f.write('\n], "traceName": "bench"}\n')
    return n


with tempfile.TemporaryDirectory(prefix="gprof-report-bench-") as d:
    d = os.environ.get("REPORT_BENCH_DIR") or d  # keep the file there
    path = os.path.join(d, "bench.pt.trace.json" + ("" if a.plain else ".gz"))
    n = generate(path)
    size = os.path.getsize(path)
    secs, rates, rss = [], [], []
    for r in range(a.rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.monotonic()
        p = subprocess.run([a.gprofctl, "--json", "report", path], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        dt = time.monotonic() - t0
        assert p.returncode == 0, p.stderr
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, max over children
        secs.append(dt)
        rates.append(n / dt)
        rss.append(peak / 1024)
        print("round %d: %d events (%.1f MB %s) in %.3f s: %.0f events/s, peak RSS <= %.1f MB"
              % (r + 1, n, size / 1e6, "plain" if a.plain else "gzip", dt, n / dt, peak / 1024))
    print("median: %.3f s, %.0f events/s; peak RSS %.1f MB (max over rounds)"
          % (statistics.median(secs), statistics.median(rates), max(rss)))
