#!/usr/bin/env python3
"""Times each NVML call gprofd's sampler makes (median of 30 calls, and of
5 calls spaced 0.5 s apart the way the sampler makes them, cold): wall time
and the calling thread's CPU time, which is what the daemon's cost target
counts. Prints one line per call."""
import ctypes
import statistics
import sys
import time

n = ctypes.CDLL("libnvidia-ml.so.1")
n.nvmlInit_v2()
h = ctypes.c_void_p()
n.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
buf = (ctypes.c_ubyte * 4096)()
u = ctypes.c_uint()
u2, u3, u4 = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
ull = ctypes.c_ulonglong()


class Field(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint),
                ("timestamp", ctypes.c_longlong), ("latencyUsec", ctypes.c_longlong),
                ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


def fields(ids):
    arr = (Field * len(ids))()
    for i, (fid, scope) in enumerate(ids):
        arr[i].fieldId, arr[i].scopeId = fid, scope
    return arr


ALL = 0xFFFFFFFF
f_pcie = fields([(197, 0), (198, 0)])
f_all = fields([(197, 0), (198, 0), (138, ALL), (139, ALL)])
f_energy = fields([(191, 0)])

# GPM: two samples allocated once, as the daemon does
gpm = [ctypes.c_void_p(), ctypes.c_void_p()]
have_gpm = hasattr(n, "nvmlGpmSampleAlloc") and \
    n.nvmlGpmSampleAlloc(ctypes.byref(gpm[0])) == 0 and n.nvmlGpmSampleAlloc(ctypes.byref(gpm[1])) == 0


class GpmMetric(ctypes.Structure):
    _fields_ = [("metricId", ctypes.c_uint), ("nvmlReturn", ctypes.c_int), ("value", ctypes.c_double),
                ("shortName", ctypes.c_char_p), ("longName", ctypes.c_char_p), ("unit", ctypes.c_char_p)]


class GpmGet(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("numMetrics", ctypes.c_uint),
                ("sample1", ctypes.c_void_p), ("sample2", ctypes.c_void_p), ("metrics", GpmMetric * 7)]


g = GpmGet()
g.version, g.numMetrics = 1, 7
for i, mid in enumerate([2, 3, 5, 10, 13, 12, 11]):
    g.metrics[i].metricId = mid
g.sample1, g.sample2 = gpm[0].value, gpm[1].value
if have_gpm:
    n.nvmlGpmSampleGet(h, gpm[0])
    time.sleep(0.2)
    n.nvmlGpmSampleGet(h, gpm[1])
evset = ctypes.c_void_p()
n.nvmlEventSetCreate(ctypes.byref(evset))
n.nvmlDeviceRegisterEvents(h, ctypes.c_ulonglong(8), evset)
ev = (ctypes.c_ubyte * 64)()
procs = (ctypes.c_ubyte * (24 * 64))()

calls = {
    "utilization": lambda: n.nvmlDeviceGetUtilizationRates(h, buf),
    "memory_v2": lambda: (ctypes.memmove(buf, ctypes.byref(ctypes.c_uint(40 | (2 << 24))), 4),
                          n.nvmlDeviceGetMemoryInfo_v2(h, buf)),
    "power": lambda: n.nvmlDeviceGetPowerUsage(h, ctypes.byref(u)),
    "temperature": lambda: n.nvmlDeviceGetTemperature(h, 0, ctypes.byref(u)),
    "sm_clock": lambda: n.nvmlDeviceGetClockInfo(h, 1, ctypes.byref(u)),
    "mem_clock": lambda: n.nvmlDeviceGetClockInfo(h, 2, ctypes.byref(u)),
    "clock_events": lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h, ctypes.byref(ull)),
    "gpm_sample_get": (lambda: n.nvmlGpmSampleGet(h, gpm[1])) if have_gpm else None,
    "gpm_metrics_get": (lambda: n.nvmlGpmMetricsGet(ctypes.byref(g))) if have_gpm else None,
    "energy": lambda: n.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(ull)),
    "field_energy_191": lambda: n.nvmlDeviceGetFieldValues(h, 1, f_energy),
    "fields_pcie": lambda: n.nvmlDeviceGetFieldValues(h, 2, f_pcie),
    "fields_pcie_nvlink": lambda: n.nvmlDeviceGetFieldValues(h, 4, f_all),
    "ecc_x2": lambda: (n.nvmlDeviceGetTotalEccErrors(h, 0, 1, ctypes.byref(ull)),
                       n.nvmlDeviceGetTotalEccErrors(h, 1, 1, ctypes.byref(ull))),
    "remapped_rows": lambda: n.nvmlDeviceGetRemappedRows(h, ctypes.byref(u), ctypes.byref(u2),
                                                         ctypes.byref(u3), ctypes.byref(u4)),
    "processes_v3": lambda: n.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(ctypes.c_uint(64)), procs),
    "event_wait_200ms": lambda: n.nvmlEventSetWait_v2(evset, ev, 200),
}


def measure(f, reps, gap):
    wall, cpu = [], []
    for _ in range(reps):
        if gap:
            time.sleep(gap)
        w, c = time.perf_counter(), time.thread_time()
        f()
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(wall) * 1e6, statistics.median(cpu) * 1e6


print("  nvml call              hot: wall / CPU us      cold (0.5 s apart): wall / CPU us")
for name, f in calls.items():
    if f is None:
        print("  nvml %-18s not available" % name)
        continue
    reps = 5 if name.startswith("event_wait") else 30
    hw, hc = measure(f, reps, 0)
    cw, cc = measure(f, 5, 0.5)
    print("  nvml %-18s %9.1f / %8.1f      %9.1f / %8.1f" % (name, hw, hc, cw, cc))
print("  field values: pcie tx %s rx %s nvlink tx %s rx %s (return codes %s); energy field %s (rc %d)" % (
    f_all[0].value, f_all[1].value, f_all[2].value, f_all[3].value,
    [f_all[i].nvmlReturn for i in range(4)], f_energy[0].value, f_energy[0].nvmlReturn))
sys.stdout.flush()
