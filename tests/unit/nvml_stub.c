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

/* GPM on GPU 1 only: SM activity 50 %, tensor 25 %, PCIe 100 MiB/s out
 * and 200 in, NVLink 300 MiB/s out and 400 in; anything else unsupported. */
typedef struct { unsigned int version, isSupportedDevice; } gpm_support_t;
typedef struct {
	unsigned int metricId;
	nvmlReturn_t nvmlReturn;
	double value;
	struct { char *shortName, *longName, *unit; } info;
} gpm_metric_t;
typedef struct {
	unsigned int version, numMetrics;
	void *sample1, *sample2;
	gpm_metric_t metrics[];
} gpm_get_t;
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, gpm_support_t *s)
{
	s->isSupportedDevice = idx(d) == 1;
	return 0;
}
nvmlReturn_t nvmlGpmSampleAlloc(void **s)
{
	*s = malloc(16);
	return *s ? 0 : 2;
}
nvmlReturn_t nvmlGpmSampleFree(void *s)
{
	free(s);
	return 0;
}
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, void *s)
{
	(void)d;
	(void)s;
	return 0;
}
nvmlReturn_t nvmlGpmMetricsGet(gpm_get_t *g)
{
	unsigned k;

	for (k = 0; k < g->numMetrics; k++) {
		unsigned id = g->metrics[k].metricId;

		g->metrics[k].nvmlReturn = 0;
		g->metrics[k].value = id == 2 ? 50 : id == 5 ? 25 : id == 20 ? 100 : id == 21 ? 200 :
		                      id == 61 ? 300 : id == 60 ? 400 : -1;
		if (g->metrics[k].value < 0)
			g->metrics[k].nvmlReturn = 3; /* NVML_ERROR_NOT_SUPPORTED */
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
