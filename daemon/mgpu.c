/*
 * mgpu.c: GPU metrics through NVML, loaded with dlopen so that the daemon
 * runs (and says so) on hosts with no GPU or driver. The toolkit ships no
 * nvml.h: the few types and calls used are declared here from NVML's
 * documented API. Every symbol is optional except nvmlInit_v2,
 * nvmlDeviceGetCount_v2 and nvmlDeviceGetHandleByIndex_v2; a call that is
 * missing or fails leaves its metric out of the sample.
 *
 * Data flow: mgpu_sample reads, per GPU, the groups of calls due this cycle
 * (the `when` table) into that GPU's struct gstate, then exports every value
 * from there; so each value appears every cycle, refreshed at its group's
 * period.
 *
 * Threading: every NVML call happens in mgpu_sample, which metrics.c runs
 * on its sampler thread, one sample at a time, or on the XID thread, which
 * waits on an NVML event set (XID_WAIT_MS at a time) and counts XID errors
 * under xid_lock; never on the loop thread. Ownership: the caller owns the
 * mgpu until mgpu_close, which hands it to the XID thread when there is one
 * (it frees it after its last wait).
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mgpu.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
/* v2 splits out memory the driver reserves, as nvidia-smi reports it */
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* per-process memory (ComputeRunningProcesses_v3) */
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } nvmlProcessInfo_t;
/* GPM (Hopper and newer): two samples make a metric */
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct {
	unsigned int metricId;
	nvmlReturn_t nvmlReturn;
	double value;
	struct { char *shortName, *longName, *unit; } info;
} nvmlGpmMetric_t;
#define GPM_N 11
typedef struct {
	unsigned int version, numMetrics;
	nvmlGpmSample_t sample1, sample2;
	nvmlGpmMetric_t metrics[GPM_N];
} nvmlGpmMetricsGet_t;
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;
/* NVML's nvmlGpmMetricId_t values for what is exported, with its family.
 * Ratios come as percentages; the byte rates (MiB/s over the two samples'
 * span) are summed into byte counters, bytes = rate x span: NVML's own
 * PCIe byte counters are 32 bits and wrap in under 0.1 s at full speed
 * (seen on the H100), and its throughput call blocks 20 ms. */
#define GPM_RATE 4 /* the last GPM_RATE entries are byte rates */
static const struct { unsigned id; int fam; } gpm_metrics[GPM_N] = {
	{ 2, MF_GPM_SM_ACTIVE }, { 3, MF_GPM_SM_OCCUPANCY }, { 5, MF_GPM_TENSOR },
	{ 10, MF_GPM_DRAM }, { 13, MF_GPM_FP16 }, { 12, MF_GPM_FP32 }, { 11, MF_GPM_FP64 },
	{ 20, MF_GPU_PCIE_TX }, { 21, MF_GPU_PCIE_RX }, { 61, MF_GPU_NVLINK_TX },
	{ 60, MF_GPU_NVLINK_RX },
};

typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType, eventData;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
#define NVML_EVENT_XID 0x8ull
#define XID_SLOTS 32
/* An event ends the wait at once; the timeout only bounds how late a
 * closed mgpu is released, so it is long: each wake-up costs CPU (at 200 ms
 * the waits were most of the GPU sampling cost, docs/BENCHMARKS.md). */
#define XID_WAIT_MS 10000

#define NVML_SUCCESS 0
#define NVML_INIT_FLAG_NO_GPUS 1u
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define GPUS_MAX 64

/* One GPU's last values (ok: the last read succeeded). */
struct gstate {
	bool util_ok, power_ok, mem_ok, temp_ok, clock_ok[2], events_ok, energy_ok, ecc_ok[2],
	     remap_ok;
	double util[2], power_w, mem[2], energy_j;
	unsigned temp, clock[2], remap[3];
	unsigned long long events, ecc[2];
	unsigned nprocs;
	struct { unsigned pid; unsigned long long used; } procs[64];
	int gpm_state;                /* 0 unknown, 1 supported, -1 not */
	nvmlGpmSample_t sample[2];    /* previous and current */
	double sample_t[2];           /* when each was taken (CLOCK_MONOTONIC, s) */
	bool have_prev;
	double gpm[GPM_N];            /* ratios; for the byte rates, bytes summed */
	bool gpm_ok[GPM_N];
};

struct mgpu {
	void *lib;
	nvmlReturn_t (*init_flags)(unsigned int);
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
	nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*mem2)(nvmlDevice_t, nvmlMemory_v2_t *);
	nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*temp)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*events)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*ecc)(nvmlDevice_t, int, int, unsigned long long *);
	nvmlReturn_t (*remapped)(nvmlDevice_t, unsigned *, unsigned *, unsigned *, unsigned *);
	nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);
	nvmlReturn_t (*gpm_support)(nvmlDevice_t, nvmlGpmSupport_t *);
	nvmlReturn_t (*gpm_alloc)(nvmlGpmSample_t *);
	nvmlReturn_t (*gpm_free)(nvmlGpmSample_t);
	nvmlReturn_t (*gpm_get)(nvmlDevice_t, nvmlGpmSample_t);
	nvmlReturn_t (*gpm_metrics)(nvmlGpmMetricsGet_t *);
	nvmlReturn_t (*ev_create)(nvmlEventSet_t *);
	nvmlReturn_t (*ev_register)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
	nvmlReturn_t (*ev_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
	nvmlReturn_t (*ev_free)(nvmlEventSet_t);
	nvmlEventSet_t evset;
	pthread_t xid_thread;
	bool xid_running;
	atomic_bool xid_stop;
	pthread_mutex_t xid_lock;
	struct { unsigned gpu; unsigned long long xid, n; } xids[XID_SLOTS];
	unsigned nxids;
	nvmlDevice_t handles[GPUS_MAX];   /* the XID thread's */
	unsigned nhandles;
	unsigned ngpus;                   /* the sampler's, refreshed with G_DEVICES */
	nvmlDevice_t devs[GPUS_MAX];
	bool dev_ok[GPUS_MAX];
	char names[GPUS_MAX][96];
	char uuids[GPUS_MAX][96];
	char labels[GPUS_MAX][256];       /* gpu="i",uuid="..." */
	struct gstate state[GPUS_MAX];
	unsigned cycle;
};

/*
 * What is read when. An NVML query costs 35-260 us of CPU when it really
 * asks the driver (it answers repeats within milliseconds from a cache at
 * 1-12 us: tests/gpu/nvml_timing.py), so at a 1 s interval reading
 * everything every cycle cost 0.07 % of a core on the H100 host alone.
 * Each group is read on the first cycle and then on the cycles where
 * cycle % every == offset (offsets spread the groups out); every value is
 * exported every cycle from its last read.
 */
enum { G_DEVICES, G_UTIL, G_MEMORY, G_GPM, G_THERMAL, G_ERRORS, G_PROCS, G_ENERGY, G_N };
static const struct { unsigned every, offset; } when[G_N] = {
	[G_DEVICES] = { 60, 0 },   /* count, handles: fixed while the driver is loaded */
	[G_UTIL] = { 1, 0 },       /* utilization and power */
	[G_MEMORY] = { 2, 1 },
	[G_GPM] = { 3, 0 },        /* so a pair of GPM samples spans three intervals */
	[G_THERMAL] = { 5, 2 },    /* temperature, clocks, clock-event reasons */
	[G_ERRORS] = { 10, 3 },    /* ECC, remapped rows */
	[G_PROCS] = { 10, 7 },     /* per-process memory */
	[G_ENERGY] = { 300, 61 },  /* 3-5 ms of CPU a call on an H100: every 5 min */
};

#define SYM(m, f, n) (*(void **)&(m)->f = dlsym((m)->lib, n))

static void release(struct mgpu *m);

/* The XID thread: counts each critical error by GPU and XID number. */
static void *xid_main(void *arg)
{
	struct mgpu *m = arg;

	pthread_setname_np(pthread_self(), "gprofd-xid");
	while (!atomic_load(&m->xid_stop)) {
		nvmlEventData_t e;
		unsigned i, k;

		memset(&e, 0, sizeof(e));
		if (m->ev_wait(m->evset, &e, XID_WAIT_MS) != NVML_SUCCESS ||
		    !(e.eventType & NVML_EVENT_XID))
			continue; /* timeout, mostly */
		for (i = 0; i < m->nhandles && m->handles[i] != e.device; i++)
			;
		pthread_mutex_lock(&m->xid_lock);
		for (k = 0; k < m->nxids; k++)
			if (m->xids[k].gpu == i && m->xids[k].xid == e.eventData)
				break;
		if (k == m->nxids && m->nxids < XID_SLOTS) {
			m->xids[k].gpu = i;
			m->xids[k].xid = e.eventData;
			m->xids[k].n = 0;
			m->nxids++;
		}
		if (k < m->nxids)
			m->xids[k].n++;
		pthread_mutex_unlock(&m->xid_lock);
	}
	release(m); /* mgpu_close handed m over */
	return NULL;
}

static void xid_start(struct mgpu *m)
{
	unsigned n = 0, i, reg = 0;

	pthread_mutex_init(&m->xid_lock, NULL);
	if (!m->ev_create || !m->ev_register || !m->ev_wait || m->count(&n) != NVML_SUCCESS ||
	    m->ev_create(&m->evset) != NVML_SUCCESS)
		return;
	for (i = 0; i < n && i < GPUS_MAX; i++)
		if (m->handle(i, &m->handles[i]) == NVML_SUCCESS &&
		    m->ev_register(m->handles[i], NVML_EVENT_XID, m->evset) == NVML_SUCCESS)
			reg++;
	m->nhandles = i;
	if (reg > 0 && pthread_create(&m->xid_thread, NULL, xid_main, m) == 0)
		m->xid_running = true;
}

struct mgpu *mgpu_open(const char *library, char *why, size_t n)
{
	bool absent;

	return mgpu_load(library, &absent, why, n);
}

int mgpu_count(const struct mgpu *m)
{
	return m != NULL ? (int)m->ngpus : 0;
}

struct mgpu *mgpu_load(const char *library, bool *absent, char *why, size_t n)
{
	struct mgpu *m = calloc(1, sizeof(*m));
	nvmlReturn_t r;

	*absent = false;
	if (m == NULL) {
		snprintf(why, n, "out of memory");
		return NULL;
	}
	m->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (m->lib == NULL) {
		*absent = true; /* no driver installed: a host without GPUs */
		snprintf(why, n, "NVML not loaded (%s): no NVIDIA driver on this host; GPU metrics off",
		         library);
		free(m);
		return NULL;
	}
	SYM(m, init_flags, "nvmlInitWithFlags");
	SYM(m, init, "nvmlInit_v2");
	SYM(m, shutdown, "nvmlShutdown");
	SYM(m, count, "nvmlDeviceGetCount_v2");
	SYM(m, handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(m, name, "nvmlDeviceGetName");
	SYM(m, uuid, "nvmlDeviceGetUUID");
	SYM(m, util, "nvmlDeviceGetUtilizationRates");
	SYM(m, mem, "nvmlDeviceGetMemoryInfo");
	SYM(m, mem2, "nvmlDeviceGetMemoryInfo_v2");
	SYM(m, power, "nvmlDeviceGetPowerUsage");
	SYM(m, energy, "nvmlDeviceGetTotalEnergyConsumption");
	SYM(m, temp, "nvmlDeviceGetTemperature");
	SYM(m, clock, "nvmlDeviceGetClockInfo");
	SYM(m, ecc, "nvmlDeviceGetTotalEccErrors");
	SYM(m, remapped, "nvmlDeviceGetRemappedRows");
	SYM(m, procs, "nvmlDeviceGetComputeRunningProcesses_v3");
	SYM(m, ev_create, "nvmlEventSetCreate");
	SYM(m, ev_register, "nvmlDeviceRegisterEvents");
	SYM(m, ev_wait, "nvmlEventSetWait_v2");
	SYM(m, ev_free, "nvmlEventSetFree");
	SYM(m, gpm_support, "nvmlGpmQueryDeviceSupport");
	SYM(m, gpm_alloc, "nvmlGpmSampleAlloc");
	SYM(m, gpm_free, "nvmlGpmSampleFree");
	SYM(m, gpm_get, "nvmlGpmSampleGet");
	SYM(m, gpm_metrics, "nvmlGpmMetricsGet");
	if (!SYM(m, events, "nvmlDeviceGetCurrentClocksEventReasons"))
		SYM(m, events, "nvmlDeviceGetCurrentClocksThrottleReasons");
	if ((m->init == NULL && m->init_flags == NULL) || m->count == NULL || m->handle == NULL) {
		snprintf(why, n, "%s lacks nvmlInit_v2/nvmlDeviceGetCount_v2: GPU metrics off", library);
		goto fail;
	}
	/* NO_GPUS: a driver with no GPU attached still initialises */
	r = m->init_flags ? m->init_flags(NVML_INIT_FLAG_NO_GPUS) : m->init();
	if (r != NVML_SUCCESS) {
		snprintf(why, n, "nvmlInit failed (NVML error %d): GPU metrics off", r);
		goto fail;
	}
	xid_start(m);
	return m;
fail:
	dlclose(m->lib);
	free(m);
	return NULL;
}

/* Everything NVML: after the last sample, and with no XID thread. */
static void release(struct mgpu *m)
{
	int i, k;

	if (m->evset && m->ev_free)
		m->ev_free(m->evset);
	pthread_mutex_destroy(&m->xid_lock);
	for (i = 0; i < GPUS_MAX; i++)
		for (k = 0; k < 2; k++)
			if (m->state[i].sample[k] && m->gpm_free)
				m->gpm_free(m->state[i].sample[k]);
	if (m->shutdown)
		m->shutdown();
	dlclose(m->lib);
	free(m);
}

void mgpu_close(struct mgpu *m)
{
	if (m == NULL)
		return;
	if (m->xid_running) {
		/* the XID thread may be waiting for up to XID_WAIT_MS: it releases
		 * everything itself when it wakes (or the process ends first) */
		pthread_detach(m->xid_thread);
		atomic_store(&m->xid_stop, true);
		return;
	}
	release(m);
}

/* NVML's clock event (throttle) reason bits, as documented. */
static const struct { unsigned long long bit; const char *name; } reasons[] = {
	{ 0x1ull, "gpu_idle" }, { 0x2ull, "applications_clocks_setting" },
	{ 0x4ull, "sw_power_cap" }, { 0x8ull, "hw_slowdown" }, { 0x10ull, "sync_boost" },
	{ 0x20ull, "sw_thermal_slowdown" }, { 0x40ull, "hw_thermal_slowdown" },
	{ 0x80ull, "hw_power_brake_slowdown" }, { 0x100ull, "display_clock_setting" },
};

static double mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* GPM: a sample per GPU every G_GPM cycles; each pair (>= 300 ms apart at
 * any sampling interval allowed) gives the metrics over its span. */
static void gpm(struct mgpu *m, nvmlDevice_t d, struct gstate *w)
{
	nvmlGpmMetricsGet_t g;
	nvmlGpmSample_t tmp;
	double span;
	unsigned k;

	if (w->gpm_state == 0) {
		nvmlGpmSupport_t sup = { 1, 0 };

		w->gpm_state = m->gpm_support && m->gpm_alloc && m->gpm_get && m->gpm_metrics &&
		               m->gpm_support(d, &sup) == NVML_SUCCESS && sup.isSupportedDevice &&
		               m->gpm_alloc(&w->sample[0]) == NVML_SUCCESS &&
		               m->gpm_alloc(&w->sample[1]) == NVML_SUCCESS ? 1 : -1;
	}
	if (w->gpm_state != 1 || m->gpm_get(d, w->sample[1]) != NVML_SUCCESS)
		return;
	w->sample_t[1] = mono_s();
	span = w->sample_t[1] - w->sample_t[0];
	if (w->have_prev) {
		memset(&g, 0, sizeof(g));
		g.version = 1;
		g.numMetrics = GPM_N;
		g.sample1 = w->sample[0];
		g.sample2 = w->sample[1];
		for (k = 0; k < GPM_N; k++)
			g.metrics[k].metricId = gpm_metrics[k].id;
		if (m->gpm_metrics(&g) == NVML_SUCCESS)
			for (k = 0; k < GPM_N; k++) {
				double v = g.metrics[k].value;

				if (g.metrics[k].nvmlReturn != NVML_SUCCESS || !isfinite(v))
					continue;
				if (k < GPM_N - GPM_RATE)
					w->gpm[k] = v / 100.0;
				else
					w->gpm[k] += v * 1048576.0 * span; /* MiB/s over the span */
				w->gpm_ok[k] = true;
			}
	}
	tmp = w->sample[0]; /* current becomes previous */
	w->sample[0] = w->sample[1];
	w->sample[1] = tmp;
	w->sample_t[0] = w->sample_t[1];
	w->have_prev = true;
}

static bool due(const struct mgpu *m, int group)
{
	return m->cycle == 0 || m->cycle % when[group].every == when[group].offset;
}

/* The calls of the groups due this cycle, into w. */
static void read_due(struct mgpu *m, nvmlDevice_t d, struct gstate *w)
{
	unsigned f, n = 64, k;

	if (due(m, G_UTIL)) {
		nvmlUtilization_t ut;

		w->util_ok = m->util && m->util(d, &ut) == NVML_SUCCESS;
		w->util[0] = w->util_ok ? ut.gpu / 100.0 : 0;
		w->util[1] = w->util_ok ? ut.memory / 100.0 : 0;
		w->power_ok = m->power && m->power(d, &f) == NVML_SUCCESS;
		w->power_w = w->power_ok ? f / 1000.0 : 0;
	}
	if (due(m, G_MEMORY)) {
		nvmlMemory_v2_t mem2 = { .version = NVML_MEMORY_V2 };
		nvmlMemory_t mem;

		if (m->mem2 && m->mem2(d, &mem2) == NVML_SUCCESS) {
			w->mem_ok = true;
			w->mem[0] = (double)mem2.used;
			w->mem[1] = (double)mem2.total;
		} else if (m->mem && m->mem(d, &mem) == NVML_SUCCESS) {
			w->mem_ok = true;
			w->mem[0] = (double)mem.used;
			w->mem[1] = (double)mem.total;
		} else
			w->mem_ok = false;
	}
	if (due(m, G_THERMAL)) {
		w->temp_ok = m->temp && m->temp(d, NVML_TEMPERATURE_GPU, &w->temp) == NVML_SUCCESS;
		w->clock_ok[0] = m->clock && m->clock(d, NVML_CLOCK_SM, &w->clock[0]) == NVML_SUCCESS;
		w->clock_ok[1] = m->clock && m->clock(d, NVML_CLOCK_MEM, &w->clock[1]) == NVML_SUCCESS;
		w->events_ok = m->events && m->events(d, &w->events) == NVML_SUCCESS;
	}
	if (due(m, G_GPM))
		gpm(m, d, w);
	if (due(m, G_ENERGY) && m->energy) {
		unsigned long long e;

		w->energy_ok = m->energy(d, &e) == NVML_SUCCESS;
		w->energy_j = (double)e / 1000.0;
	}
	if (due(m, G_ERRORS)) {
		for (k = 0; k < 2; k++)
			w->ecc_ok[k] = m->ecc && m->ecc(d, (int)k, 1, &w->ecc[k]) == NVML_SUCCESS;
		w->remap_ok = m->remapped && m->remapped(d, &w->remap[0], &w->remap[1],
		                                         &w->remap[2], &f) == NVML_SUCCESS;
	}
	if (due(m, G_PROCS)) {
		nvmlProcessInfo_t pi[64];

		w->nprocs = 0;
		if (m->procs && m->procs(d, &n, pi) == NVML_SUCCESS)
			for (k = 0; k < n && k < 64; k++) {
				w->procs[k].pid = pi[k].pid;
				w->procs[k].used = pi[k].used;
				w->nprocs = k + 1;
			}
	}
}

/* Every value of one GPU, from the last reads. */
static void export(const struct gstate *w, struct mset *s, const char *lbl)
{
	static const char *const ecc[2] = { "corrected", "uncorrected" };
	static const char *const cause[3] = { "correctable", "uncorrectable", "pending" };
	unsigned k;

	if (w->util_ok) {
		mset_add_labels(s, MF_GPU_UTIL, w->util[0], lbl);
		mset_add_labels(s, MF_GPU_MEM_UTIL, w->util[1], lbl);
	}
	if (w->mem_ok) {
		mset_add_labels(s, MF_GPU_MEM_USED, w->mem[0], lbl);
		mset_add_labels(s, MF_GPU_MEM_TOTAL, w->mem[1], lbl);
	}
	if (w->power_ok)
		mset_add_labels(s, MF_GPU_POWER, w->power_w, lbl);
	if (w->energy_ok)
		mset_add_labels(s, MF_GPU_ENERGY, w->energy_j, lbl);
	if (w->temp_ok)
		mset_add_labels(s, MF_GPU_TEMP, w->temp, lbl);
	if (w->clock_ok[0])
		mset_add_labels(s, MF_GPU_SM_CLOCK, w->clock[0] * 1e6, lbl);
	if (w->clock_ok[1])
		mset_add_labels(s, MF_GPU_MEM_CLOCK, w->clock[1] * 1e6, lbl);
	for (k = 0; w->events_ok && k < sizeof(reasons) / sizeof(reasons[0]); k++)
		mset_add(s, MF_GPU_CLOCK_EVENTS, (w->events & reasons[k].bit) ? 1 : 0,
		         "%s,reason=\"%s\"", lbl, reasons[k].name);
	for (k = 0; k < GPM_N; k++)
		if (w->gpm_ok[k])
			mset_add_labels(s, gpm_metrics[k].fam, w->gpm[k], lbl);
	for (k = 0; k < 2; k++)
		if (w->ecc_ok[k])
			mset_add(s, MF_GPU_ECC, (double)w->ecc[k], "%s,type=\"%s\"", lbl, ecc[k]);
	for (k = 0; w->remap_ok && k < 3; k++)
		mset_add(s, MF_GPU_REMAPPED, w->remap[k], "%s,cause=\"%s\"", lbl, cause[k]);
	for (k = 0; k < w->nprocs; k++)
		mset_add(s, MF_GPU_PROC_MEM, (double)w->procs[k].used, "%s,pid=\"%u\"", lbl,
		         w->procs[k].pid);
}

int mgpu_sample(struct mgpu *m, struct mset *s)
{
	unsigned int i;

	if (m == NULL) {
		mset_add(s, MF_NVML_UP, 0, NULL);
		return 0;
	}
	/* the GPUs and their handles do not change while the driver is loaded */
	if (due(m, G_DEVICES)) {
		unsigned int count = 0;

		if (m->count(&count) != NVML_SUCCESS) {
			m->ngpus = 0;
			mset_add(s, MF_NVML_UP, 0, NULL);
			m->cycle++;
			return -1;
		}
		m->ngpus = count < GPUS_MAX ? count : GPUS_MAX;
		for (i = 0; i < m->ngpus; i++) {
			char esc[200];

			m->dev_ok[i] = m->handle(i, &m->devs[i]) == NVML_SUCCESS;
			if (!m->dev_ok[i] || m->uuids[i][0])
				continue;
			if (!m->uuid || m->uuid(m->devs[i], m->uuids[i], sizeof(m->uuids[i])) != NVML_SUCCESS)
				snprintf(m->uuids[i], sizeof(m->uuids[i]), "unknown");
			if (!m->name || m->name(m->devs[i], m->names[i], sizeof(m->names[i])) != NVML_SUCCESS)
				snprintf(m->names[i], sizeof(m->names[i]), "unknown");
			m->uuids[i][sizeof(m->uuids[i]) - 1] = m->names[i][sizeof(m->names[i]) - 1] = 0;
			snprintf(m->labels[i], sizeof(m->labels[i]), "gpu=\"%u\",uuid=\"%s\"", i,
			         mset_label(esc, sizeof(esc), m->uuids[i]));
		}
	}
	mset_add(s, MF_NVML_UP, 1, NULL);
	mset_add(s, MF_GPUS, m->ngpus, NULL);
	for (i = 0; i < m->ngpus; i++) {
		char escn[200];

		if (!m->dev_ok[i])
			continue;
		mset_add(s, MF_GPU_INFO, 1, "%s,name=\"%s\"", m->labels[i],
		         mset_label(escn, sizeof(escn), m->names[i]));
		read_due(m, m->devs[i], &m->state[i]);
		export(&m->state[i], s, m->labels[i]);
	}
	pthread_mutex_lock(&m->xid_lock);
	for (i = 0; i < m->nxids; i++)
		if (m->xids[i].gpu < m->ngpus)
			mset_add(s, MF_GPU_XID, (double)m->xids[i].n, "gpu=\"%u\",uuid=\"%s\",xid=\"%llu\"",
			         m->xids[i].gpu, m->uuids[m->xids[i].gpu], m->xids[i].xid);
	pthread_mutex_unlock(&m->xid_lock);
	m->cycle++;
	return 0;
}
