/*
 * cupti_cost.cu: what each way of recording with CUPTI costs the thread that
 * launches, per CUDA call, in a CUDA C loop with no Python and no agent in
 * the way (issue 12: "find where the time goes per API record by
 * measurement"). Built here by tests/gpu/prepare.sh; bench/cupti_cost.py
 * runs it on the GPU host, one process per configuration and round.
 *
 * The loop is shaped like PyTorch's per-operator calls: for each kernel,
 * cudaGetDevice, cudaLaunchKernel of an empty kernel, cudaGetLastError;
 * a cudaStreamSynchronize every `batch` kernels. A batch's issue time (the
 * host time from its first call to its last launch, before the
 * synchronize) is what a CPU-bound training step pays. One process
 * measures one configuration in three phases: `before` (CUPTI untouched),
 * `during` (the configuration on) and `after` (turned off again, and
 * unsubscribed where the configuration says so), each the median over
 * `batches` batches, and `late` (one second after `after`), so the
 * spread between processes never enters: a phase is compared with
 * `before` of the same process. Enabling CUPTI
 * leaves some of its cost behind (measured: `after`), which is why the
 * configurations cannot share a process.
 *
 * Data flow and ownership: CUPTI asks for buffers (buf_request, malloc)
 * and gives them back (buf_complete), where the records are counted and
 * the buffer freed at once; the own-callback configuration writes its
 * records into one static array owned by the launching thread (the only
 * thread that calls CUDA here).
 *
 *   cupti_cost CONFIG [batches] [batch]   (defaults 300 100)
 *   cupti_cost --list
 * prints one JSON line: config, before/during/after ns per kernel, records,
 * and the driver-API callbacks seen by id, inside a runtime call or not
 * (which driver call the runtime makes for a launch: the agent cannot
 * enable a driver launch's callback for cuBLAS's and NCCL's direct calls
 * without getting it inside every runtime launch too).
 */
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#define CK(x)                                                                              \
	do {                                                                               \
		cudaError_t e_ = (x);                                                      \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));           \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

__global__ void empty(int *p)
{
	if (p != NULL && threadIdx.x == 1024)
		*p = 1;
}

static size_t buf_size = 4u << 20;
static unsigned long long records, dropped;
/* the correlation ids of the kernel records, to match with own records */
static std::vector<uint32_t> kernel_corr;

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max)
{
	*buf = (uint8_t *)malloc(buf_size);
	*size = buf_size;
	*max = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                  size_t valid)
{
	CUpti_Activity *r = NULL;
	size_t d = 0;

	(void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		records++;
		if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			kernel_corr.push_back(((CUpti_ActivityKernel10 *)r)->correlationId);
	}
	if (cuptiActivityGetNumDroppedRecords(ctx, stream, &d) == CUPTI_SUCCESS)
		dropped += d;
	free(buf);
}

/* The own-callback record: what the trace needs of an API call. */
struct own_rec {
	uint64_t start, end;
	uint32_t cbid, corr;
};
#define OWN_MAX (1u << 22)
static own_rec *own;
static size_t n_own;
static uint64_t own_start; /* the launching thread's call in flight */

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cb_mode; /* 0: no-op, 1: own record, 2: own record but the quiet calls */
/* driver-API callbacks seen (entries), by id, inside a runtime call or not:
 * which launch call the runtime makes for cudaLaunchKernel */
static unsigned rt_depth;
static unsigned long long drv_inside[1024], drv_outside[1024];
static bool cupti_ts;

static inline uint64_t stamp(void)
{
	uint64_t t = 0;

	if (!cupti_ts)
		return now_ns();
	cuptiGetTimestamp(&t);
	return t;
}

static void CUPTIAPI on_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *p)
{
	const CUpti_CallbackData *cb = (const CUpti_CallbackData *)p;

	(void)ud;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cb->callbackSite == CUPTI_API_ENTER)
		rt_depth++;
	else if (d == CUPTI_CB_DOMAIN_RUNTIME_API && rt_depth > 0)
		rt_depth--;
	if (d == CUPTI_CB_DOMAIN_DRIVER_API && cb->callbackSite == CUPTI_API_ENTER && id < 1024)
		(rt_depth > 0 ? drv_inside : drv_outside)[id]++;
	if (cb_mode == 0 || d != CUPTI_CB_DOMAIN_RUNTIME_API)
		return; /* driver-API launches nested in a runtime call: the agent returns too */
	if (cb_mode == 2 && (id == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 ||
	                     id == CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020))
		return;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		own_start = stamp();
	} else if (n_own < OWN_MAX) {
		own_rec *o = &own[n_own++];

		o->start = own_start;
		o->end = stamp();
		o->cbid = id;
		o->corr = cb->correlationId;
	}
}

enum {
	F_CUPTI = 1,      /* subscribe and register buffers; nothing enabled */
	F_KERNEL = 2,
	F_RUNTIME = 4,    /* RUNTIME kind, every call */
	F_QUIET = 8,      /* ... less cudaGetDevice and cudaGetLastError (the agent's filter) */
	F_DRIVER = 16,
	F_CB_ALL = 32,    /* runtime-API callbacks on every call, doing nothing */
	F_CB_LAUNCH = 64, /* runtime-API callback on cudaLaunchKernel only, own record */
	F_TORCH = 128,    /* memcpy, memset, driver, overhead, external correlation too */
	F_SMALLBUF = 256, /* 1 MB buffers (4 MB otherwise, as the agent) */
	F_BIGBUF = 512,   /* 32 MB buffers */
	F_ZEROED = 1024,  /* CUPTI zeroes buffers (the agent sets it) */
	F_UNSUB = 2048,   /* unsubscribe after (the agent's release) */
	F_CB_OWN = 4096,  /* runtime-API callbacks on every call, own record but the quiet ones */
	F_CUPTI_TS = 8192, /* own records timed by cuptiGetTimestamp, not clock_gettime */
	F_FINALIZE = 16384, /* cuptiFinalize after */
	F_CB_EACH = 32768, /* runtime-API callbacks enabled call by call, all but the quiet ones,
	                      own record (mode 1) */
	F_DRV_LAUNCH = 65536, /* driver-API callbacks on the launch calls (the agent's, for
	                         cuBLAS's, NCCL's and Triton's cuLaunchKernel*) */
	F_DRV_ONE = 131072,   /* driver-API callback on one call this loop never makes */
	F_DRV_ACT = 262144,   /* DRIVER activity kind, the launch calls only */
};

struct config {
	const char *name;
	unsigned flags;
};

#define AGENT (F_CUPTI | F_KERNEL | F_RUNTIME | F_QUIET | F_ZEROED | F_UNSUB)
static const config configs[] = {
	{ "none", 0 },
	{ "subscribed", F_CUPTI | F_UNSUB },
	{ "kernel", F_CUPTI | F_KERNEL | F_ZEROED | F_UNSUB },
	{ "agent", AGENT },
	{ "agent,all-calls", AGENT & ~F_QUIET },
	{ "agent,1MB", AGENT | F_SMALLBUF },
	{ "agent,32MB", AGENT | F_BIGBUF },
	{ "agent,unzeroed", AGENT & ~F_ZEROED },
	{ "agent,kept", AGENT & ~F_UNSUB },
	{ "kernel+driver", F_CUPTI | F_KERNEL | F_DRIVER | F_ZEROED | F_UNSUB },
	{ "kernel+callbacks(no-op)", F_CUPTI | F_KERNEL | F_CB_ALL | F_ZEROED | F_UNSUB },
	{ "kernel+own-launch-records", F_CUPTI | F_KERNEL | F_CB_LAUNCH | F_ZEROED | F_UNSUB },
	{ "kernel+own-launch-records,cupti-ts",
	  F_CUPTI | F_KERNEL | F_CB_LAUNCH | F_CUPTI_TS | F_ZEROED | F_UNSUB },
	{ "kernel+own-records-each", F_CUPTI | F_KERNEL | F_CB_EACH | F_CUPTI_TS | F_ZEROED | F_UNSUB },
	{ "kernel+own-records", F_CUPTI | F_KERNEL | F_CB_OWN | F_ZEROED | F_UNSUB },
	{ "kernel+own-records-each+driver-launch-callbacks",
	  F_CUPTI | F_KERNEL | F_CB_EACH | F_CUPTI_TS | F_ZEROED | F_UNSUB | F_DRV_LAUNCH },
	{ "kernel+own-records-each+driver-unused-callback",
	  F_CUPTI | F_KERNEL | F_CB_EACH | F_CUPTI_TS | F_ZEROED | F_UNSUB | F_DRV_ONE },
	{ "kernel+own-records-each+driver-launch-activity",
	  F_CUPTI | F_KERNEL | F_CB_EACH | F_CUPTI_TS | F_ZEROED | F_UNSUB | F_DRV_ACT },
	{ "kernel,finalize", F_CUPTI | F_KERNEL | F_ZEROED | F_FINALIZE },
	{ "agent,finalize", (AGENT & ~F_UNSUB) | F_FINALIZE },
	{ "torch-like", F_CUPTI | F_KERNEL | F_RUNTIME | F_TORCH },
};
#define N_CONFIGS (sizeof(configs) / sizeof(configs[0]))

static CUpti_SubscriberHandle sub;

#define CU(x)                                                                              \
	do {                                                                               \
		CUptiResult r_ = (x);                                                      \
		if (r_ != CUPTI_SUCCESS) {                                                 \
			const char *s_ = "?";                                              \
			cuptiGetResultString(r_, &s_);                                     \
			fprintf(stderr, "%s: %s\n", #x, s_);                               \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

/* the driver's launch calls (agent/gpu_api.c's list, in short) */
static const CUpti_CallbackId drv_launches[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};

static const CUpti_ActivityKind torch_extra[] = {
	CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_DRIVER,
	CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

static void apply(unsigned f, bool on)
{
	size_t i;

	if (!(f & F_CUPTI))
		return;
	if (on) {
		uint8_t z = (f & F_ZEROED) ? 1 : 0;
		size_t sz = sizeof(z);

		buf_size = (f & F_SMALLBUF) ? (1u << 20) : (f & F_BIGBUF) ? (32u << 20) : (4u << 20);
		CU(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &z));
		CU(cuptiActivityRegisterCallbacks(buf_request, buf_complete));
		CU(cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_cb, NULL));
	}
	if (f & F_KERNEL)
		CU(on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
		      : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	if (f & F_RUNTIME) {
		CU(on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME)
		      : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME));
		if (on && (f & F_QUIET)) {
			CU(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 0));
			CU(cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
			                                 0));
		}
	}
	if (f & F_DRIVER)
		CU(on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER)
		      : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER));
	if (f & F_TORCH)
		for (i = 0; i < sizeof(torch_extra) / sizeof(torch_extra[0]); i++)
			CU(on ? cuptiActivityEnable(torch_extra[i]) : cuptiActivityDisable(torch_extra[i]));
	if (f & F_CB_ALL) {
		cb_mode = 0;
		CU(cuptiEnableDomain(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
	}
	if (f & F_CB_EACH) {
		uint32_t id;

		cb_mode = 1;
		for (id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; id++)
			if (id != CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 &&
			    id != CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020)
				CU(cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id));
	}
	for (i = 0; (f & F_DRV_LAUNCH) && i < sizeof(drv_launches) / sizeof(drv_launches[0]); i++)
		CU(cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_DRIVER_API, drv_launches[i]));
	if (f & F_DRV_ONE)
		CU(cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_DRIVER_API,
		                       CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice));
	if (f & F_DRV_ACT) {
		CUpti_CallbackId id;

		CU(on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER)
		      : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER));
		for (id = 1; on && id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++)
			cuptiActivityEnableDriverApi(id, 0);
		for (i = 0; on && i < sizeof(drv_launches) / sizeof(drv_launches[0]); i++)
			CU(cuptiActivityEnableDriverApi(drv_launches[i], 1));
	}
	if (f & F_CB_OWN) {
		cb_mode = 2;
		CU(cuptiEnableDomain(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
	}
	cupti_ts = (f & F_CUPTI_TS) != 0;
	if (f & F_CB_LAUNCH) {
		cb_mode = 1;
		CU(cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
		                       CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
	}
	if (!on) {
		CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
		if (f & (F_UNSUB | F_FINALIZE))
			CU(cuptiUnsubscribe(sub));
		if (f & F_FINALIZE)
			CU(cuptiFinalize());
	}
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2]
	                                     : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/* One batch: issue time and total, in ns. */
static void batch(cudaStream_t s, int n, double *issue, double *total)
{
	uint64_t t0 = now_ns(), t1;
	int dev, i;

	for (i = 0; i < n; i++) {
		cudaGetDevice(&dev);
		empty<<<1, 32, 0, s>>>(NULL);
		cudaGetLastError();
	}
	t1 = now_ns();
	CK(cudaStreamSynchronize(s));
	*issue = (double)(t1 - t0);
	*total = (double)(now_ns() - t0);
}

/* One phase: the median issue time per kernel over n batches of bsz. */
static double phase(cudaStream_t s, int n, int bsz)
{
	std::vector<double> is;
	int b;

	for (b = 0; b < n; b++) {
		double x, y;

		batch(s, bsz, &x, &y);
		is.push_back(x / bsz);
	}
	return median(is);
}

int main(int argc, char **argv)
{
	int batches = argc > 2 ? atoi(argv[2]) : 300, bsz = argc > 3 ? atoi(argv[3]) : 100;
	const config *cf = NULL;
	double before, during, after, late;
	size_t matched = 0;
	unsigned long long rec;
	cudaDeviceProp prop;
	cudaStream_t s;
	size_t c;

	if (argc > 1 && strcmp(argv[1], "--list") == 0) {
		for (c = 0; c < N_CONFIGS; c++)
			printf("%s\n", configs[c].name);
		return 0;
	}
	for (c = 0; argc > 1 && c < N_CONFIGS; c++)
		if (strcmp(argv[1], configs[c].name) == 0)
			cf = &configs[c];
	if (cf == NULL || batches < 10 || bsz < 1) {
		fprintf(stderr, "usage: cupti_cost CONFIG [batches >= 10] [batch >= 1] "
		                "(cupti_cost --list names the configurations)\n");
		return 2;
	}
	own = (own_rec *)calloc(OWN_MAX, sizeof(*own));
	CK(cudaSetDevice(0));
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	phase(s, 50, bsz); /* warm the GPU and the runtime */
	before = phase(s, batches, bsz);
	apply(cf->flags, true);
	phase(s, 10, bsz); /* the first batches fill the first buffers */
	during = phase(s, batches, bsz);
	apply(cf->flags, false);
	rec = records;
	after = phase(s, batches, bsz);
	usleep(1000 * 1000); /* whether what stays after goes away */
	late = phase(s, batches, bsz);
	/* every kernel should carry the id of the launch recorded for it */
	if (n_own > 0) {
		std::vector<uint32_t> ids;

		for (c = 0; c < n_own; c++)
			ids.push_back(own[c].corr);
		std::sort(ids.begin(), ids.end());
		for (c = 0; c < kernel_corr.size(); c++)
			matched += std::binary_search(ids.begin(), ids.end(), kernel_corr[c]);
	}
	printf("{\"config\": \"%s\", \"gpu\": \"%s\", \"before\": %.1f, \"during\": %.1f, "
	       "\"after\": %.1f, \"late\": %.1f, \"records\": %llu, \"own_records\": %zu, "
	       "\"dropped\": %llu, "
	       "\"kernels\": %zu, \"kernels_matched\": %zu, \"driver_callbacks\": \"",
	       cf->name, prop.name, before, during, after, late, rec, n_own, dropped,
	       kernel_corr.size(), matched);
	for (c = 0; c < 1024; c++)
		if (drv_inside[c] + drv_outside[c] > 0)
			printf("%zu: %llu inside a runtime call, %llu outside; ", c, drv_inside[c],
			       drv_outside[c]);
	printf("\"}\n");
	return 0;
}
