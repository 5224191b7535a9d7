#!/usr/bin/env python3
"""Times each NVML call gprofd's sampler makes (median of 50), to find
what a sample cycle costs on a real GPU. Prints one line per call."""
import ctypes, statistics, time
n = ctypes.CDLL("libnvidia-ml.so.1")
n.nvmlInit_v2()
h = ctypes.c_void_p()
n.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
buf = (ctypes.c_ubyte * 128)()
u = ctypes.c_uint()
ull = ctypes.c_ulonglong()
calls = {
    "count": lambda: n.nvmlDeviceGetCount_v2(ctypes.byref(u)),
    "handle": lambda: n.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)),
    "utilization": lambda: n.nvmlDeviceGetUtilizationRates(h, buf),
    "memory_v2": lambda: (ctypes.memmove(buf, ctypes.byref(ctypes.c_uint(40 | (2 << 24))), 4),
                          n.nvmlDeviceGetMemoryInfo_v2(h, buf)),
    "power": lambda: n.nvmlDeviceGetPowerUsage(h, ctypes.byref(u)),
    "energy": lambda: n.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(ull)),
    "temperature": lambda: n.nvmlDeviceGetTemperature(h, 0, ctypes.byref(u)),
    "sm_clock": lambda: n.nvmlDeviceGetClockInfo(h, 1, ctypes.byref(u)),
    "mem_clock": lambda: n.nvmlDeviceGetClockInfo(h, 2, ctypes.byref(u)),
    "clock_events": lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h, ctypes.byref(ull)),
}
for name, f in calls.items():
    ts = []
    for _ in range(50):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    print("  nvml %-14s median %8.1f us" % (name, statistics.median(ts) * 1e6))
