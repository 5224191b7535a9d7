/*
 * nvml_stub.c: an NVML stand-in for tests (never shipped), loaded by the
 * daemon through the same dlopen path as the real libnvidia-ml.so.1
 * (sampling.nvml_library). Two GPUs with fixed, known values. Built twice:
 * in full, and with NVML_STUB_MINIMAL (only init, count, handle, memory),
 * so tests see optional calls missing. NVML_STUB=fail makes nvmlInit
 * fail; NVML_STUB=count-fails makes the device count fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

static int mode(const char *m)
{
	const char *e = getenv("NVML_STUB");

	return e && strcmp(e, m) == 0;
}

static unsigned idx(nvmlDevice_t d)
{
	return (unsigned)(unsigned long)d - 1;
}

nvmlReturn_t nvmlInit_v2(void) { return mode("fail") ? 999 : 0; }
nvmlReturn_t nvmlShutdown(void) { return 0; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
	if (mode("count-fails"))
		return 3;
	*n = 2;
	return 0;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	*d = (nvmlDevice_t)(unsigned long)(i + 1);
	return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	m->total = 80000000000ull;
	m->used = 1000000000ull * (idx(d) + 1);
	m->free = m->total - m->used;
	return 0;
}

#ifndef NVML_STUB_MINIMAL
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *b, unsigned int n)
{
	(void)d;
	snprintf(b, n, "Stub H100");
	return 0;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *b, unsigned int n)
{
	snprintf(b, n, "GPU-stub-%u", idx(d));
	return 0;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	u->gpu = 50 + 10 * idx(d);
	u->memory = 20;
	return 0;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	*mw = 300000 + 1000 * idx(d);
	return 0;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj)
{
	*mj = 1000000ull * (idx(d) + 1);
	return 0;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
	(void)sensor;
	*t = 60 + idx(d);
	return 0;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	(void)d;
	*mhz = type == 1 ? 1980 : 2619;
	return 0;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
	*r = idx(d) ? 0x44ull : 0x1ull; /* gpu 1: sw power cap + hw thermal */
	return 0;
}
/* One compute process on GPU 0. */
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_t;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, proc_t *p)
{
	if (idx(d) != 0) {
		*n = 0;
		return 0;
	}
	if (*n < 1) {
		*n = 1;
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	}
	*n = 1;
	p[0].pid = 4242;
	p[0].used = 123456789ull;
	return 0;
}

/* Field values: the PCIe byte counters on both GPUs (one as an unsigned
 * long long, one as a double, as NVML may type them), NVLink data counters
 * (KiB, all links) on GPU 1 only; anything else is not supported. */
typedef struct {
	unsigned int fieldId, scopeId;
	long long timestamp, latencyUsec;
	int valueType;
	nvmlReturn_t nvmlReturn;
	union { double d; unsigned long long ull; } value;
} field_t;
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, field_t *f)
{
	int k;

	for (k = 0; k < n; k++) {
		f[k].nvmlReturn = 0;
		f[k].valueType = 3;
		if (f[k].fieldId == 197)
			f[k].value.ull = 5000000ull * (idx(d) + 1);
		else if (f[k].fieldId == 198) {
			f[k].valueType = 0;
			f[k].value.d = 7000000.0 * (idx(d) + 1);
		} else if ((f[k].fieldId == 138 || f[k].fieldId == 139) && idx(d) == 1 &&
		           f[k].scopeId == 0xffffffffu)
			f[k].value.ull = f[k].fieldId == 138 ? 3000 : 4000;
		else
			f[k].nvmlReturn = 3; /* NVML_ERROR_NOT_SUPPORTED */
	}
	return 0;
}

/* Events: with NVML_STUB=xid, one XID 79 on GPU 1, then timeouts. */
typedef struct { nvmlDevice_t device; unsigned long long type, data; unsigned gi, ci; } ev_t;
static int ev_sent;
nvmlReturn_t nvmlEventSetCreate(void **set) { *set = (void *)1; return 0; }
nvmlReturn_t nvmlEventSetFree(void *set) { (void)set; return 0; }
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long t, void *set)
{
	(void)d; (void)t; (void)set;
	return 0;
}
nvmlReturn_t nvmlEventSetWait_v2(void *set, ev_t *e, unsigned int ms)
{
	(void)set;
	if (mode("xid") && !ev_sent) {
		ev_sent = 1;
		e->device = (nvmlDevice_t)2ul; /* GPU 1 */
		e->type = 0x8;
		e->data = 79;
		return 0;
	}
	usleep(ms * 1000);
	return 10; /* NVML_ERROR_TIMEOUT */
}
#endif
