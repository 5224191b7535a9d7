/*
 * mgpu.c: GPU metrics through NVML, loaded with dlopen so that the daemon
 * runs (and says so) on hosts with no GPU or driver. The toolkit ships no
 * nvml.h: the few types and calls used are declared here from NVML's
 * documented API. Every symbol is optional except nvmlInit_v2,
 * nvmlDeviceGetCount_v2 and nvmlDeviceGetHandleByIndex_v2; a call that is
 * missing or fails leaves its metric out of the sample.
 *
 * Threading: every NVML call happens in mgpu_sample, which metrics.c runs
 * on a worker thread, one sample at a time, or on the XID thread, which
 * waits on an NVML event set (200 ms at a time, so closing is prompt) and
 * counts XID errors under xid_lock; never on the loop thread. Ownership: the
 * caller owns the mgpu until mgpu_close, which hands it to the XID thread
 * when there is one (it frees it after its last wait).
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
	nvmlDevice_t handles[GPUS_MAX];
	unsigned nhandles;
	int gpm_state[GPUS_MAX];          /* 0 unknown, 1 supported, -1 not */
	nvmlGpmSample_t gpm[GPUS_MAX][2]; /* previous and current */
	double gpm_t[GPUS_MAX][2];        /* when each was taken (CLOCK_MONOTONIC, s) */
	bool gpm_have_prev[GPUS_MAX];
	double bytes[GPUS_MAX][GPM_RATE]; /* summed from the GPM byte rates */
	bool bytes_ok[GPUS_MAX][GPM_RATE];
	char names[GPUS_MAX][96];
	char uuids[GPUS_MAX][96];
	/* Slow reads: nvmlDeviceGetTotalEnergyConsumption takes 2.4 ms a call
	 * on an H100 (most calls used here: 2-12 us warm, ~50 us cold),
	 * ECC, remapped rows and the process list more than the rest
	 * together. Each group is read on the first cycle and then on its own
	 * cycles (slow_when), so that no cycle pays for all; the last values
	 * are exported every cycle. */
	struct slow {
		bool energy_ok, ecc_ok[2], remap_ok;
		double energy_j;
		unsigned long long ecc[2];
		unsigned remap[3];
		unsigned nprocs;
		struct { unsigned pid; unsigned long long used; } procs[64];
	} slow[GPUS_MAX];
	unsigned cycle;
};
/* group: read on the first cycle, then when cycle % every == offset */
static const struct { unsigned every, offset; } slow_when[] = {
	{ 60, 30 }, /* energy: 3 ms of CPU a call on an H100 */
	{ 10, 3 },  /* ECC and remapped rows */
	{ 10, 7 },  /* the process list */
};
enum { SLOW_ENERGY, SLOW_ERRORS, SLOW_PROCS };

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
	struct mgpu *m = calloc(1, sizeof(*m));
	nvmlReturn_t r;

	if (m == NULL) {
		snprintf(why, n, "out of memory");
		return NULL;
	}
	m->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (m->lib == NULL) {
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
			if (m->gpm[i][k] && m->gpm_free)
				m->gpm_free(m->gpm[i][k]);
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

static bool due(const struct mgpu *m, int group)
{
	return m->cycle == 0 || m->cycle % slow_when[group].every == slow_when[group].offset;
}

static void slow_read(struct mgpu *m, unsigned i, nvmlDevice_t d)
{
	struct slow *w = &m->slow[i];
	unsigned f, n = 64, k;

	if (due(m, SLOW_ENERGY) && m->energy) {
		unsigned long long e;

		w->energy_ok = m->energy(d, &e) == NVML_SUCCESS;
		w->energy_j = (double)e / 1000.0;
	}
	if (due(m, SLOW_ERRORS)) {
		for (k = 0; k < 2; k++)
			w->ecc_ok[k] = m->ecc && m->ecc(d, (int)k, 1, &w->ecc[k]) == NVML_SUCCESS;
		w->remap_ok = m->remapped && m->remapped(d, &w->remap[0], &w->remap[1],
		                                         &w->remap[2], &f) == NVML_SUCCESS;
	}
	if (due(m, SLOW_PROCS)) {
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

/* ... and exported every cycle, from the last read. */
static void slow_export(struct mgpu *m, unsigned i, struct mset *s, const char *lbl)
{
	static const char *const ecc[2] = { "corrected", "uncorrected" };
	static const char *const cause[3] = { "correctable", "uncorrectable", "pending" };
	const struct slow *w = &m->slow[i];
	unsigned k;

	if (w->energy_ok)
		mset_add_labels(s, MF_GPU_ENERGY, w->energy_j, lbl);
	for (k = 0; k < 2; k++)
		if (w->ecc_ok[k])
			mset_add(s, MF_GPU_ECC, (double)w->ecc[k], "%s,type=\"%s\"", lbl, ecc[k]);
	for (k = 0; w->remap_ok && k < 3; k++)
		mset_add(s, MF_GPU_REMAPPED, w->remap[k], "%s,cause=\"%s\"", lbl, cause[k]);
	for (k = 0; k < w->nprocs; k++)
		mset_add(s, MF_GPU_PROC_MEM, (double)w->procs[k].used, "%s,pid=\"%u\"", lbl,
		         w->procs[k].pid);
}

static double mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* GPM: a sample per GPU per cycle; each pair (>= 100 ms apart at any
 * sampling interval allowed) gives the metrics over their span. */
static void gpm(struct mgpu *m, unsigned i, nvmlDevice_t d, struct mset *s, const char *lbl)
{
	nvmlGpmMetricsGet_t g;
	nvmlGpmSample_t tmp;
	unsigned k;

	if (m->gpm_state[i] == 0) {
		nvmlGpmSupport_t sup = { 1, 0 };

		m->gpm_state[i] = m->gpm_support && m->gpm_alloc && m->gpm_get && m->gpm_metrics &&
		                  m->gpm_support(d, &sup) == NVML_SUCCESS && sup.isSupportedDevice &&
		                  m->gpm_alloc(&m->gpm[i][0]) == NVML_SUCCESS &&
		                  m->gpm_alloc(&m->gpm[i][1]) == NVML_SUCCESS ? 1 : -1;
	}
	if (m->gpm_state[i] != 1)
		return;
	if (m->gpm_get(d, m->gpm[i][1]) == NVML_SUCCESS) {
		m->gpm_t[i][1] = mono_s();
		if (m->gpm_have_prev[i]) {
			double span = m->gpm_t[i][1] - m->gpm_t[i][0];

			memset(&g, 0, sizeof(g));
			g.version = 1;
			g.numMetrics = GPM_N;
			g.sample1 = m->gpm[i][0];
			g.sample2 = m->gpm[i][1];
			for (k = 0; k < GPM_N; k++)
				g.metrics[k].metricId = gpm_metrics[k].id;
			if (m->gpm_metrics(&g) == NVML_SUCCESS)
				for (k = 0; k < GPM_N; k++) {
					if (g.metrics[k].nvmlReturn != NVML_SUCCESS ||
					    !isfinite(g.metrics[k].value))
						continue;
					if (k < GPM_N - GPM_RATE) {
						mset_add_labels(s, gpm_metrics[k].fam,
						                g.metrics[k].value / 100.0, lbl);
					} else {
						unsigned r = k - (GPM_N - GPM_RATE);

						m->bytes[i][r] += g.metrics[k].value * 1048576.0 * span;
						m->bytes_ok[i][r] = true;
					}
				}
		}
		tmp = m->gpm[i][0]; /* current becomes previous */
		m->gpm[i][0] = m->gpm[i][1];
		m->gpm[i][1] = tmp;
		m->gpm_t[i][0] = m->gpm_t[i][1];
		m->gpm_have_prev[i] = true;
	}
	for (k = 0; k < GPM_RATE; k++)
		if (m->bytes_ok[i][k])
			mset_add_labels(s, gpm_metrics[GPM_N - GPM_RATE + k].fam, m->bytes[i][k], lbl);
}

int mgpu_sample(struct mgpu *m, struct mset *s)
{
	unsigned int count = 0, i, u;
	char lbl[256];

	if (m == NULL) {
		mset_add(s, MF_NVML_UP, 0, NULL);
		return 0;
	}
	if (m->count(&count) != NVML_SUCCESS) {
		mset_add(s, MF_NVML_UP, 0, NULL);
		return -1;
	}
	mset_add(s, MF_NVML_UP, 1, NULL);
	mset_add(s, MF_GPUS, count, NULL);
	for (i = 0; i < count && i < GPUS_MAX; i++) {
		nvmlDevice_t d;
		nvmlUtilization_t ut;
		nvmlMemory_t mem;
		nvmlMemory_v2_t mem2;
		unsigned long long e;
		char esc[200], escn[200];
		size_t k;

		if (m->handle(i, &d) != NVML_SUCCESS)
			continue;
		if (m->uuids[i][0] == '\0') { /* names and UUIDs do not change */
			if (!m->uuid || m->uuid(d, m->uuids[i], sizeof(m->uuids[i])) != NVML_SUCCESS)
				snprintf(m->uuids[i], sizeof(m->uuids[i]), "unknown");
			if (!m->name || m->name(d, m->names[i], sizeof(m->names[i])) != NVML_SUCCESS)
				snprintf(m->names[i], sizeof(m->names[i]), "unknown");
			m->uuids[i][sizeof(m->uuids[i]) - 1] = m->names[i][sizeof(m->names[i]) - 1] = 0;
		}
		snprintf(lbl, sizeof(lbl), "gpu=\"%u\",uuid=\"%s\"", i,
		         mset_label(esc, sizeof(esc), m->uuids[i]));
		mset_add(s, MF_GPU_INFO, 1, "%s,name=\"%s\"", lbl,
		         mset_label(escn, sizeof(escn), m->names[i]));
		if (m->util && m->util(d, &ut) == NVML_SUCCESS) {
			mset_add(s, MF_GPU_UTIL, ut.gpu / 100.0, "%s", lbl);
			mset_add(s, MF_GPU_MEM_UTIL, ut.memory / 100.0, "%s", lbl);
		}
		if (m->mem2 && (mem2.version = NVML_MEMORY_V2, m->mem2(d, &mem2) == NVML_SUCCESS)) {
			mset_add(s, MF_GPU_MEM_USED, (double)mem2.used, "%s", lbl);
			mset_add(s, MF_GPU_MEM_TOTAL, (double)mem2.total, "%s", lbl);
		} else if (m->mem && m->mem(d, &mem) == NVML_SUCCESS) {
			mset_add(s, MF_GPU_MEM_USED, (double)mem.used, "%s", lbl);
			mset_add(s, MF_GPU_MEM_TOTAL, (double)mem.total, "%s", lbl);
		}
		if (m->power && m->power(d, &u) == NVML_SUCCESS)
			mset_add(s, MF_GPU_POWER, u / 1000.0, "%s", lbl);
		if (m->temp && m->temp(d, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS)
			mset_add(s, MF_GPU_TEMP, u, "%s", lbl);
		if (m->clock && m->clock(d, NVML_CLOCK_SM, &u) == NVML_SUCCESS)
			mset_add(s, MF_GPU_SM_CLOCK, u * 1e6, "%s", lbl);
		if (m->clock && m->clock(d, NVML_CLOCK_MEM, &u) == NVML_SUCCESS)
			mset_add(s, MF_GPU_MEM_CLOCK, u * 1e6, "%s", lbl);
		slow_read(m, i, d);
		slow_export(m, i, s, lbl);
		gpm(m, i, d, s, lbl);
		if (m->events && m->events(d, &e) == NVML_SUCCESS)
			for (k = 0; k < sizeof(reasons) / sizeof(reasons[0]); k++)
				mset_add(s, MF_GPU_CLOCK_EVENTS, (e & reasons[k].bit) ? 1 : 0,
				         "%s,reason=\"%s\"", lbl, reasons[k].name);
	}
	pthread_mutex_lock(&m->xid_lock);
	for (i = 0; i < m->nxids; i++)
		if (m->xids[i].gpu < count && m->xids[i].gpu < GPUS_MAX)
			mset_add(s, MF_GPU_XID, (double)m->xids[i].n, "gpu=\"%u\",uuid=\"%s\",xid=\"%llu\"",
			         m->xids[i].gpu, m->uuids[m->xids[i].gpu], m->xids[i].xid);
	pthread_mutex_unlock(&m->xid_lock);
	m->cycle++;
	return 0;
}
