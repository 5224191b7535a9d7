#!/usr/bin/env python3
"""GPU checks of the metrics export (run by tests/gpu/run.sh, section
metrics), against the gprofd that run.sh started (/metrics on PORT):

1. idle: each GPU's values against `nvidia-smi --query-gpu` read at the
   same moment (memory total exact; memory used, temperature, clocks and
   power within stated tolerances);
2. a busy matmul loop: GPU utilisation and power rise;
3. an agent-loaded PyTorch loop: gprofd's median step time for it against
   the loop's own measured median.

usage: metrics_check.py PORT GPROF_SOCKET AGENT_LIB PYTHON_HELPER_DIR
Prints what it measured; one PASS or FAIL line per check.
"""
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

PORT, SOCK, AGENT, HELPER = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
fails = 0


def scrape():
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % PORT, timeout=5) as r:
        text = r.read().decode()
    return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1])
            for l in text.splitlines() if l and not l.startswith("#")}


def smi():
    q = "index,uuid,memory.total,memory.used,temperature.gpu,power.draw,clocks.sm,clocks.mem,utilization.gpu"
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + q, "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.strip().splitlines():
        f = [x.strip() for x in line.split(",")]
        rows.append(dict(index=f[0], uuid=f[1], mem_total=float(f[2]) * 2**20,
                         mem_used=float(f[3]) * 2**20, temp=float(f[4]), power=float(f[5]),
                         sm=float(f[6]) * 1e6, mem_clock=float(f[7]) * 1e6, util=float(f[8]) / 100))
    return rows


def g(m, name, r):
    return m.get('%s{gpu="%s",uuid="%s"}' % (name, r["index"], r["uuid"]))


def check(ok, what):
    global fails
    print(("PASS: " if ok else "FAIL: ") + what, flush=True)
    fails += not ok


# GPM values need two GPM samples (every 3rd cycle): wait for them, and for
# a window that began after the previous section's GPU work
for _ in range(100):
    if any(k.startswith("gprofd_gpu_sm_active_ratio") for k in scrape()):
        break
    time.sleep(0.1)
time.sleep(3.5)
m, s = scrape(), smi()
print("  gprofd: nvml_up %s, %s GPUs, sample cycle %.3f ms (cpu %.3f ms)" % (
    m.get("gprofd_nvml_up"), m.get("gprofd_gpus"), m["gprofd_sample_duration_seconds"] * 1e3,
    m["gprofd_sample_cpu_seconds"] * 1e3))
ok = m.get("gprofd_nvml_up") == 1 and m.get("gprofd_gpus") == len(s)
for r in s:
    row = {k: g(m, n, r) for k, n in [("mem_total", "gprofd_gpu_memory_total_bytes"),
                                      ("mem_used", "gprofd_gpu_memory_used_bytes"),
                                      ("temp", "gprofd_gpu_temperature_celsius"),
                                      ("power", "gprofd_gpu_power_watts"),
                                      ("sm", "gprofd_gpu_sm_clock_hertz"),
                                      ("mem_clock", "gprofd_gpu_memory_clock_hertz"),
                                      ("util", "gprofd_gpu_utilization_ratio")]}
    print("  GPU %s gprofd %s" % (r["index"], json.dumps(row)))
    print("  GPU %s nvidia-smi %s" % (r["index"], json.dumps({k: r[k] for k in row})))
    ok &= None not in row.values()
    if None in row.values():
        continue
    ok &= row["mem_total"] == r["mem_total"] or abs(row["mem_total"] - r["mem_total"]) < 2**20
    ok &= abs(row["mem_used"] - r["mem_used"]) <= max(0.02 * r["mem_used"], 64 * 2**20)
    ok &= abs(row["temp"] - r["temp"]) <= 3
    ok &= abs(row["power"] - r["power"]) <= max(0.15 * r["power"], 15)
    ok &= abs(row["mem_clock"] - r["mem_clock"]) <= 0.05 * r["mem_clock"]
check(ok, "idle values agree with nvidia-smi (memory total exact to 1 MiB, used 2 %% or 64 MiB, "
      "temperature 3 C, power 15 %% or 15 W, memory clock 5 %%)")

# 2. a busy matmul loop on GPU 0
idle = m
busy = subprocess.Popen([sys.executable, "-c",
                         "import torch,time\n"
                         "a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16)\n"
                         "b=a@a; torch.cuda.synchronize(); print('busy', flush=True)\n"
                         "t=time.time()\n"
                         "while time.time()-t<20:\n"
                         "    b=a@a\n"
                         "    torch.cuda.synchronize()\n"], stdout=subprocess.PIPE, text=True)
busy.stdout.readline()  # the loop runs from here
time.sleep(7)           # a whole GPM window (3 cycles) inside it, and NVML's utilisation period
m = scrape()
s0 = smi()[0]
time.sleep(9)           # per-process memory is read every 10th cycle
m10 = scrape()
apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                       "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
busy.wait()
r0 = s[0]
u, p0, p1 = g(m, "gprofd_gpu_utilization_ratio", r0), g(idle, "gprofd_gpu_power_watts", r0), \
    g(m, "gprofd_gpu_power_watts", r0)
print("  busy: gprofd util %.2f (nvidia-smi %.2f), power %.0f W (idle %.0f W, nvidia-smi %.0f W), "
      "SM clock %.0f MHz" % (u, s0["util"], p1, p0, s0["power"],
                              g(m, "gprofd_gpu_sm_clock_hertz", r0) / 1e6))
check(u >= 0.8 and p1 > p0 * 1.3, "under a matmul loop GPU utilisation rises (>= 0.8) and power rises (> 1.3x idle)")

gpm_idle = g(idle, "gprofd_gpu_sm_active_ratio", r0)
gpm_busy = {n: g(m, "gprofd_gpu_%s" % n, r0) for n in
            ("sm_active_ratio", "sm_occupancy_ratio", "tensor_active_ratio", "dram_bandwidth_ratio",
             "fp16_active_ratio", "fp32_active_ratio")}
print("  GPM idle sm_active %s; busy %s" % (gpm_idle, json.dumps(gpm_busy)))
check(gpm_idle is not None and gpm_idle < 0.05 and (gpm_busy["sm_active_ratio"] or 0) > 0.5 and
      (gpm_busy["tensor_active_ratio"] or 0) > 0.05,
      "GPM: SM activity ~0 idle, > 0.5 under the bf16 matmul, tensor pipes active")
pm = {k: v for k, v in m10.items() if k.startswith("gprofd_gpu_process_memory_bytes")}
want = {int(l.split(",")[0]): float(l.split(",")[1]) * 2**20 for l in apps.strip().splitlines() if l}
print("  per-process GPU memory: gprofd %s; nvidia-smi %s" % (pm, want))
check(busy.pid in want and any('pid="%d"' % busy.pid in k and abs(v - want[busy.pid]) <= 64 * 2**20
                               for k, v in pm.items()),
      "per-process GPU memory of the matmul process agrees with nvidia-smi (64 MiB)")

# 2b. PCIe byte counters (summed from GPM byte rates every cycle): host-to-
# device copies of a known size show up as bytes the GPU received
def pcie(m, r, d):
    return g(m, "gprofd_gpu_pcie_%s_bytes_total" % d, r)


before = scrape()
copier = subprocess.run([sys.executable, "-c",
                         "import torch,time\n"
                         "h=torch.empty(256*2**20,dtype=torch.uint8).pin_memory()\n"
                         "d=torch.empty_like(h,device='cuda')\n"
                         "n=0; t=time.time()\n"
                         "while time.time()-t<4:\n"
                         "    d.copy_(h); n+=h.numel()\n"
                         "torch.cuda.synchronize(); print(n)\n"], capture_output=True, text=True)
copied = int(copier.stdout.split()[-1]) if copier.stdout.split() else 0
time.sleep(2.5)  # two more cycles
after = scrape()
rx0, rx1 = pcie(before, s[0], "receive"), pcie(after, s[0], "receive")
tx0, tx1 = pcie(before, s[0], "transmit"), pcie(after, s[0], "transmit")
nv = g(after, "gprofd_gpu_nvlink_transmit_bytes_total", s[0])
print("  PCIe: %.2f GB copied host to device; gprofd receive counter +%.2f GB, transmit +%.2f GB; "
      "NVLink transmit counter %s" % (copied / 1e9, ((rx1 or 0) - (rx0 or 0)) / 1e9,
                                     ((tx1 or 0) - (tx0 or 0)) / 1e9, nv))
check(rx0 is not None and rx1 is not None and copied > 0 and
      copied * 0.9 <= rx1 - rx0 <= copied * 1.6 + 2e9,
      "PCIe receive byte counter grows by the bytes copied host to device (0.9x to 1.6x + 2 GB)")

# 3. step-time metrics of an agent-loaded PyTorch loop
loop = ("import gprof_agent, torch, time, statistics, sys\n"
        "m=torch.nn.Sequential(torch.nn.Linear(4096,4096),torch.nn.ReLU(),torch.nn.Linear(4096,10)).cuda()\n"
        "o=torch.optim.SGD(m.parameters(),lr=1e-3); x=torch.randn(512,4096,device='cuda')\n"
        "o.zero_grad(); m(x).sum().backward(); o.step(); torch.cuda.synchronize()\n"
        "print('started', flush=True)\n"
        "ts=[]; t0=time.time(); last=time.perf_counter()\n"
        "while time.time()-t0<12:\n"
        "    o.zero_grad(); m(x).sum().backward(); o.step(); torch.cuda.synchronize()\n"
        "    now=time.perf_counter(); ts.append(now-last); last=now\n"
        "print(statistics.median(ts[-2000:]), len(ts), flush=True)\n")
env = dict(os.environ, CUDA_INJECTION64_PATH=AGENT, GPROF_SOCKET=SOCK, GPROF_JOB_ID="mstep",
           PYTHONPATH=HELPER, RANK="0")
pl = subprocess.Popen([sys.executable, "-c", loop], env=env, stdout=subprocess.PIPE, text=True)
pl.stdout.readline()  # stepping from here
time.sleep(6)         # several heartbeats (1 s) and samples into the loop
m = scrape()
own, n = pl.communicate()[0].split()
own = float(own)
med = [v for k, v in m.items() if k.startswith("gprofd_process_median_step_seconds{job=\"mstep\"")]
steps = [v for k, v in m.items() if k.startswith("gprofd_process_steps_total{job=\"mstep\"")]
print("  loop's own median step %.3f ms (%s steps); gprofd median %s ms, steps %s" % (
    own * 1e3, n, ["%.3f" % (v * 1e3) for v in med], steps))
check(len(med) == 1 and abs(med[0] - own) <= 0.1 * own,
      "gprofd's median step time of an agent-loaded loop is within 10 % of the loop's own")
sys.exit(1 if fails else 0)
