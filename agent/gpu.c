/*
 * gpu.c: CUPTI activity tracing for one burst at a time, and its events in
 * the trace (shared/CUPTI_NOTES.md has the facts this relies on).
 *
 * Life cycle: nothing is loaded, subscribed or enabled while idle.
 * gpu_start (agent thread) loads libcupti (a copy already in the process
 * first, so PyTorch's wheel copy is reused), subscribes (failing with the
 * holder's name when another tool owns CUPTI), and enables the requested
 * kinds. CUPTI asks for buffers on application threads (buf_request:
 * calloc, bounded by the burst's byte limit; past it CUPTI drops records
 * and counts them) and returns them from its own threads (buf_complete:
 * appends to `done` under a mutex and reads the dropped count). gpu_stop
 * waits until flushes bring no more completed records (GPU work launched
 * inside the window finishing), disables every kind, forces the last
 * flush and unsubscribes, so torch.profiler can take CUPTI after us.
 * gpu_write walks the buffers three times: API calls by correlation id,
 * then GPU records (kept when launched inside the window), then the API
 * calls with their flow arrows. gpu_reset frees the buffers.
 *
 * libcuda's handful of calls (device properties) are resolved from the
 * copy the process already has; no CUDA library is linked.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

#include <cupti.h>

#include "agent.h"
#include "writer.h"

#define BUF_SIZE (4u << 20)

#define CUPTI_FN(f) static __typeof__(f) *p_##f
CUPTI_FN(cuptiActivityEnable);
CUPTI_FN(cuptiActivityDisable);
CUPTI_FN(cuptiActivityRegisterCallbacks);
CUPTI_FN(cuptiActivityFlushAll);
CUPTI_FN(cuptiActivityGetNextRecord);
CUPTI_FN(cuptiActivityGetNumDroppedRecords);
CUPTI_FN(cuptiActivitySetAttribute);
CUPTI_FN(cuptiSubscribe_v2);
CUPTI_FN(cuptiUnsubscribe);
CUPTI_FN(cuptiSetThreadIdType);
CUPTI_FN(cuptiGetVersion);
CUPTI_FN(cuptiGetResultString);
CUPTI_FN(cuptiGetCallbackName);
CUPTI_FN(cuptiEnableDomain);
CUPTI_FN(cuptiActivityEnableRuntimeApi);
CUPTI_FN(cuptiFinalize);
CUPTI_FN(cuDeviceGetCount);
CUPTI_FN(cuDeviceGetName);
CUPTI_FN(cuDeviceTotalMem_v2);
CUPTI_FN(cuDeviceGetAttribute);
CUPTI_FN(cuDriverGetVersion);

struct done_buf { uint8_t *buf; size_t valid; };

static void *cupti_lib;
static bool loaded, callbacks_set, forked;
static CUpti_SubscriberHandle sub;
static int64_t enabled_kinds[16];
static size_t n_enabled;
static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct done_buf *done;
static size_t n_done, cap_done;
static atomic_uint_fast64_t buf_bytes, n_dropped;
static atomic_bool cut;
static uint64_t max_bytes = AGENT_DEFAULT_MAX_BYTES;
static uint64_t incomplete;

/* per device: what the kernel args need */
#define DEV_MAX 64
static int n_dev = -1, dev_sms[DEV_MAX];

/* Buffers made ready (allocated, zeroed and touched) on the agent thread
 * before the window opens, so CUPTI's requests during the capture take no
 * page faults on application threads; freed with the rest at gpu_reset,
 * so an idle agent holds none. */
#define POOL_MAX 4
static uint8_t *pool[POOL_MAX];
static int n_pool;

static void pool_fill(void)
{
	while (n_pool < POOL_MAX && atomic_load(&buf_bytes) + BUF_SIZE <= max_bytes) {
		uint8_t *b = malloc(BUF_SIZE);

		if (b == NULL)
			break;
		memset(b, 0, BUF_SIZE);
		atomic_fetch_add(&buf_bytes, BUF_SIZE);
		pthread_mutex_lock(&buf_lock);
		pool[n_pool++] = b;
		pthread_mutex_unlock(&buf_lock);
	}
}

static void CUPTIAPI buf_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint64_t used;

	*max_records = 0;
	*buffer = NULL;
	*size = 0;
	pthread_mutex_lock(&buf_lock);
	if (n_pool > 0)
		*buffer = pool[--n_pool];
	pthread_mutex_unlock(&buf_lock);
	if (*buffer != NULL) {
		*size = BUF_SIZE;
		return;
	}
	used = atomic_fetch_add(&buf_bytes, BUF_SIZE) + BUF_SIZE;
	if (used > max_bytes) {
		atomic_fetch_sub(&buf_bytes, BUF_SIZE);
		atomic_store(&cut, true); /* CUPTI drops and counts what follows */
		return;
	}
	/* 8-byte alignment is what CUPTI asks for; calloc's memory is zeroed,
	 * as ZEROED_OUT_ACTIVITY_BUFFER promises CUPTI. */
	if ((*buffer = calloc(1, BUF_SIZE)) == NULL) {
		atomic_fetch_sub(&buf_bytes, BUF_SIZE);
		return;
	}
	*size = BUF_SIZE;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                  size_t valid)
{
	size_t dropped = 0;

	(void)size;
	if (p_cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&n_dropped, dropped);
	if (buffer == NULL)
		return;
	pthread_mutex_lock(&buf_lock);
	if (n_done == cap_done) {
		size_t cap = cap_done ? cap_done * 2 : 64;
		struct done_buf *p = realloc(done, cap * sizeof(*p));

		if (p == NULL) {
			pthread_mutex_unlock(&buf_lock);
			free(buffer);
			return;
		}
		done = p;
		cap_done = cap;
	}
	done[n_done].buf = buffer;
	done[n_done].valid = valid;
	n_done++;
	pthread_mutex_unlock(&buf_lock);
}

/*
 * Giving CUPTI back after a burst (measured on an H100, docs/gpu-validation.md):
 * disabling the kinds and unsubscribing leaves CUPTI's instrumentation in
 * place (steps stayed slower) and, with the toolkit's libcupti, stopped
 * correlation ids from advancing in the next burst (every record carried
 * the same id). So by default the agent finalizes CUPTI, which tears all
 * of it down; cuptiFinalize must run inside an API exit callback, so the
 * agent enables the runtime-API domain and lets the application's next
 * CUDA call do it. GPROF_CUPTI_RELEASE=unsubscribe keeps the old policy.
 */
enum { FIN_NONE, FIN_PENDING, FIN_RUNNING, FIN_DONE };
static atomic_int fin_state;

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
	const CUpti_CallbackData *cb = data;
	int pending = FIN_PENDING;

	(void)ud;
	(void)id;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cb && cb->callbackSite == CUPTI_API_EXIT &&
	    atomic_compare_exchange_strong(&fin_state, &pending, FIN_RUNNING)) {
		p_cuptiFinalize();
		atomic_store(&fin_state, FIN_DONE);
	}
}

static bool release_by_finalize(void)
{
	const char *p = getenv("GPROF_CUPTI_RELEASE");

	return p == NULL || strcmp(p, "unsubscribe") != 0;
}

static const char *cupti_err(CUptiResult r)
{
	const char *s = NULL;

	if (p_cuptiGetResultString == NULL || p_cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "CUPTI error";
	return s;
}

static void *cuda_sym(const char *name)
{
	static void *libcuda;

	if (libcuda == NULL)
		libcuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
	return libcuda ? dlsym(libcuda, name) : NULL;
}

bool gpu_usable(char *why, size_t n)
{
	if (forked) {
		snprintf(why, n, "a forked child does not trace CUDA");
		return false;
	}
	if (!A.cuda_injected && dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY) == NULL) {
		snprintf(why, n, "no CUDA in this process");
		return false;
	}
	return true;
}

#define LOAD(lib, f) ((p_##f = (__typeof__(p_##f))dlsym((lib), #f)) != NULL)

static int load(char *why, size_t n)
{
	static const char *const paths[] = { "libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
	                                     "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", NULL };
	const char *env = getenv("GPROF_CUPTI_PATH");
	uint32_t version = 0;
	size_t i;

	if (loaded)
		return 0;
	/* A copy already in the process (PyTorch's wheel) must be the one used:
	 * two copies of libcupti in one process break both. */
	cupti_lib = dlopen("libcupti.so.13", RTLD_NOLOAD | RTLD_NOW);
	if (cupti_lib == NULL && env && *env)
		cupti_lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	for (i = 0; cupti_lib == NULL && paths[i]; i++)
		cupti_lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
	if (cupti_lib == NULL) {
		snprintf(why, n, "libcupti.so.13 not found (set GPROF_CUPTI_PATH)");
		return -ENOENT;
	}
	if (!LOAD(cupti_lib, cuptiActivityEnable) || !LOAD(cupti_lib, cuptiActivityDisable) ||
	    !LOAD(cupti_lib, cuptiActivityRegisterCallbacks) ||
	    !LOAD(cupti_lib, cuptiActivityFlushAll) || !LOAD(cupti_lib, cuptiActivityGetNextRecord) ||
	    !LOAD(cupti_lib, cuptiActivityGetNumDroppedRecords) ||
	    !LOAD(cupti_lib, cuptiActivitySetAttribute) || !LOAD(cupti_lib, cuptiSubscribe_v2) ||
	    !LOAD(cupti_lib, cuptiUnsubscribe) || !LOAD(cupti_lib, cuptiSetThreadIdType) ||
	    !LOAD(cupti_lib, cuptiGetVersion) || !LOAD(cupti_lib, cuptiGetResultString) ||
	    !LOAD(cupti_lib, cuptiGetCallbackName) || !LOAD(cupti_lib, cuptiEnableDomain) ||
	    !LOAD(cupti_lib, cuptiFinalize) || !LOAD(cupti_lib, cuptiActivityEnableRuntimeApi)) {
		snprintf(why, n, "the libcupti found lacks CUDA 13 functions (set GPROF_CUPTI_PATH)");
		return -ENOSYS;
	}
	if (p_cuptiGetVersion(&version) != CUPTI_SUCCESS || version < 130000) {
		snprintf(why, n, "libcupti API version %u is older than CUDA 13's", version);
		return -ENOSYS;
	}
	p_cuDeviceGetCount = cuda_sym("cuDeviceGetCount");
	p_cuDeviceGetName = cuda_sym("cuDeviceGetName");
	p_cuDeviceTotalMem_v2 = cuda_sym("cuDeviceTotalMem_v2");
	p_cuDeviceGetAttribute = cuda_sym("cuDeviceGetAttribute");
	p_cuDriverGetVersion = cuda_sym("cuDriverGetVersion");
	loaded = true;
	return 0;
}

/* API kinds first: a GPU record then always has the record of the call
 * that launched it (one launched before the API kinds were on would look
 * like an unattributed kernel inside the window). */
static const CUpti_ActivityKind *kinds_for(int64_t act, size_t *n)
{
	static CUpti_ActivityKind k[16];

	*n = 0;
	if (act & MSG_ACT_RUNTIME)
		k[(*n)++] = CUPTI_ACTIVITY_KIND_RUNTIME;
	if (act & MSG_ACT_DRIVER)
		k[(*n)++] = CUPTI_ACTIVITY_KIND_DRIVER;
	if (act & MSG_ACT_KERNEL)
		k[(*n)++] = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL; /* never KERNEL: it serialises */
	if (act & MSG_ACT_MEMCPY) {
		k[(*n)++] = CUPTI_ACTIVITY_KIND_MEMCPY;
		k[(*n)++] = CUPTI_ACTIVITY_KIND_MEMCPY2;
	}
	if (act & MSG_ACT_MEMSET)
		k[(*n)++] = CUPTI_ACTIVITY_KIND_MEMSET;
	if (act & MSG_ACT_SYNC)
		k[(*n)++] = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	if (act & MSG_ACT_OVERHEAD)
		k[(*n)++] = CUPTI_ACTIVITY_KIND_OVERHEAD;
	if (act & MSG_ACT_MEMORY)
		k[(*n)++] = CUPTI_ACTIVITY_KIND_MEMORY2;
	return k;
}

/*
 * Runtime calls not recorded: cheap queries a framework makes hundreds of
 * times a step (PyTorch: ~240 cudaGetDevice per MLP step, against 24
 * launches, measured on an H100), which cost CUPTI a record each and tell
 * nothing about the GPU. torch.profiler leaves them out too.
 * GPROF_CUPTI_ALL_RUNTIME=1 records them.
 */
static const CUpti_CallbackId quiet_calls[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaDriverGetVersion_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaRuntimeGetVersion_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v10010,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v12030,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetFuncBySymbol_v11000,
	CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
};

int gpu_start(int64_t activities, uint64_t limit, char *why, size_t n)
{
	CUpti_SubscriberParams params;
	char holder[128] = "";
	const CUpti_ActivityKind *k;
	size_t nk, i, one = 1, sz = sizeof(one);
	CUptiResult r;
	int err;

	if ((err = load(why, n)) < 0)
		return err;
	if (atomic_load(&fin_state) == FIN_PENDING) {
		int pending = FIN_PENDING;

		/* the application made no CUDA call since the last burst */
		if (atomic_compare_exchange_strong(&fin_state, &pending, FIN_NONE)) {
			p_cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
			p_cuptiUnsubscribe(sub);
		}
	}
	while (atomic_load(&fin_state) == FIN_RUNNING)
		sched_yield();
	atomic_store(&fin_state, FIN_NONE);
	/* Thread ids as gettid() gives them, so API calls sit on the same rows
	 * as NVTX ranges; set before any kind is enabled (again after a
	 * finalize, which forgets it). */
	p_cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	memset(&params, 0, sizeof(params));
	params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
	params.subscriberName = "gprofd agent";
	params.oldSubscriberName = holder;
	params.oldSubscriberSize = sizeof(holder);
	r = p_cuptiSubscribe_v2(&sub, (CUpti_CallbackFunc)on_callback, NULL, &params);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		holder[sizeof(holder) - 1] = '\0';
		/* PyTorch's Kineto subscribes without a name and keeps CUPTI for the
		 * life of the process once torch.profiler has run (seen on an H100) */
		snprintf(why, n, "CUPTI is held by another tool (%s): stop it (Nsight, "
		         "compute-sanitizer) or trace this process with it; PyTorch keeps CUPTI once "
		         "torch.profiler has run in a process, so such a process cannot be traced by "
		         "the agent (KINETO_USE_DAEMON=1 traces it through Kineto instead)",
		         strstr(holder, "<not provided>") || !holder[0] ?
		         "one that gives no name, as PyTorch's profiler" : holder);
		return -EBUSY;
	}
	if (r != CUPTI_SUCCESS) {
		snprintf(why, n, "cuptiSubscribe failed: %s", cupti_err(r));
		return -EIO;
	}
	max_bytes = limit;
	atomic_store(&buf_bytes, 0);
	atomic_store(&cut, false);
	incomplete = 0;
	/* Activity callbacks are per process and replaced by whoever registers
	 * last (torch.profiler after us): register them for every burst. */
	p_cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
	r = p_cuptiActivityRegisterCallbacks(buf_request, buf_complete);
	if (r != CUPTI_SUCCESS) {
		p_cuptiUnsubscribe(sub);
		snprintf(why, n, "cuptiActivityRegisterCallbacks failed: %s", cupti_err(r));
		return -EIO;
	}
	callbacks_set = true;
	/* Count only what this burst drops. */
	p_cuptiActivityFlushAll(0);
	gpu_reset();
	atomic_store(&n_dropped, 0);
	pool_fill();
	k = kinds_for(activities, &nk);
	n_enabled = 0;
	for (i = 0; i < nk; i++) {
		r = p_cuptiActivityEnable(k[i]);
		if (r == CUPTI_SUCCESS)
			enabled_kinds[n_enabled++] = k[i];
		else
			agent_log("cuptiActivityEnable(%d): %s", (int)k[i], cupti_err(r));
		if (r == CUPTI_SUCCESS && k[i] == CUPTI_ACTIVITY_KIND_RUNTIME &&
		    getenv("GPROF_CUPTI_ALL_RUNTIME") == NULL) {
			size_t q;

			for (q = 0; q < sizeof(quiet_calls) / sizeof(quiet_calls[0]); q++)
				p_cuptiActivityEnableRuntimeApi(quiet_calls[q], 0);
		}
	}
	if (n_enabled == 0) {
		p_cuptiUnsubscribe(sub);
		snprintf(why, n, "CUPTI enabled no activity kind (see GPROF_AGENT_LOG)");
		return -EIO;
	}
	return 0;
}

static size_t count_done(void)
{
	size_t n;

	pthread_mutex_lock(&buf_lock);
	n = n_done;
	pthread_mutex_unlock(&buf_lock);
	return n;
}

void gpu_stop(void)
{
	struct timespec ten_ms = { 0, 10 * 1000 * 1000 };
	size_t before, quiet = 0, i;

	/* No new records from here on; GPU work launched inside the window may
	 * still be running: flush (without forcing) until two rounds in a row
	 * bring nothing, at most 0.5 s, then force out the rest. */
	for (i = 0; i < n_enabled; i++)
		p_cuptiActivityDisable((CUpti_ActivityKind)enabled_kinds[i]);
	n_enabled = 0;
	for (i = 0; i < 50 && quiet < 2; i++) {
		before = count_done();
		p_cuptiActivityFlushAll(0);
		quiet = count_done() == before ? quiet + 1 : 0;
		if (quiet < 2)
			nanosleep(&ten_ms, NULL);
	}
	p_cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (!release_by_finalize()) {
		p_cuptiUnsubscribe(sub);
		return;
	}
	/* The application's next CUDA runtime call finalizes CUPTI; wait for
	 * it a little (a training loop makes one within microseconds), then
	 * let it happen whenever it comes. */
	atomic_store(&fin_state, FIN_PENDING);
	if (p_cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS) {
		atomic_store(&fin_state, FIN_NONE);
		p_cuptiUnsubscribe(sub);
		return;
	}
	for (i = 0; i < 200 && atomic_load(&fin_state) != FIN_DONE; i++) {
		struct timespec one_ms = { 0, 1000 * 1000 };

		nanosleep(&one_ms, NULL);
	}
	agent_log("CUPTI %s", atomic_load(&fin_state) == FIN_DONE ? "finalized after the burst"
	                                                          : "finalize pending (no CUDA call)");
}

uint64_t gpu_dropped(void)
{
	return atomic_load(&n_dropped) + incomplete;
}

bool gpu_cut(void)
{
	return atomic_load(&cut);
}

void gpu_reset(void)
{
	size_t i;

	pthread_mutex_lock(&buf_lock);
	for (i = 0; i < n_done; i++) {
		CUpti_Activity *rec = NULL;

		/* overhead records own a malloc'ed overheadData */
		while (p_cuptiActivityGetNextRecord(done[i].buf, done[i].valid, &rec) == CUPTI_SUCCESS)
			if (rec->kind == CUPTI_ACTIVITY_KIND_OVERHEAD)
				free(((CUpti_ActivityOverhead3 *)rec)->overheadData);
		free(done[i].buf);
	}
	n_done = 0;
	while (n_pool > 0)
		free(pool[--n_pool]);
	pthread_mutex_unlock(&buf_lock);
	atomic_store(&buf_bytes, 0);
}

void gpu_atfork_child(void)
{
	forked = true; /* never flush or finalize CUPTI in a child */
	n_done = 0;
	done = NULL;
	cap_done = 0;
}

/* ---- metadata ---- */

static int dev_attr(CUdevice d, CUdevice_attribute a)
{
	int v = 0;

	if (p_cuDeviceGetAttribute)
		p_cuDeviceGetAttribute(&v, a, d);
	return v;
}

static void devices_probe(void)
{
	int i;

	if (n_dev >= 0)
		return;
	n_dev = 0;
	if (p_cuDeviceGetCount == NULL || p_cuDeviceGetCount(&n_dev) != CUDA_SUCCESS)
		n_dev = 0;
	if (n_dev > DEV_MAX)
		n_dev = DEV_MAX;
	for (i = 0; i < n_dev; i++)
		dev_sms[i] = dev_attr(i, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
}

static void prop(struct tw *w, const char *key, int64_t v)
{
	tw_lit(w, ", \"");
	tw_raw(w, key, strlen(key));
	tw_lit(w, "\": ");
	tw_int(w, v);
}

void gpu_write_devices(struct tw *w)
{
	char name[256];
	size_t mem = 0;
	int i;

	if (!loaded)
		return;
	devices_probe();
	for (i = 0; i < n_dev; i++) {
		name[0] = '\0';
		if (p_cuDeviceGetName)
			p_cuDeviceGetName(name, sizeof(name), i);
		if (p_cuDeviceTotalMem_v2)
			p_cuDeviceTotalMem_v2(&mem, i);
		if (i > 0)
			tw_lit(w, ",");
		tw_lit(w, "\n    {");
		tw_lit(w, "\"id\": ");
		tw_int(w, i);
		tw_lit(w, ", \"name\": ");
		tw_str(w, name, (size_t)-1);
		prop(w, "totalGlobalMem", (int64_t)mem);
		prop(w, "computeMajor", dev_attr(i, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
		prop(w, "computeMinor", dev_attr(i, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
		prop(w, "maxThreadsPerBlock", dev_attr(i, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
		prop(w, "maxThreadsPerMultiprocessor",
		     dev_attr(i, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR));
		prop(w, "regsPerBlock", dev_attr(i, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK));
		prop(w, "warpSize", dev_attr(i, CU_DEVICE_ATTRIBUTE_WARP_SIZE));
		prop(w, "sharedMemPerBlock", dev_attr(i, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
		prop(w, "numSms", dev_sms[i]);
		prop(w, "regsPerMultiprocessor",
		     dev_attr(i, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR));
		prop(w, "sharedMemPerBlockOptin",
		     dev_attr(i, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
		prop(w, "sharedMemPerMultiprocessor",
		     dev_attr(i, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
		tw_lit(w, "}");
	}
}

void gpu_write_meta(struct tw *w)
{
	uint32_t v = 0;
	int d = 0;
	int (*rt_version)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");

	if (!loaded)
		return;
	if (p_cuptiGetVersion(&v) == CUPTI_SUCCESS) {
		tw_lit(w, ",\n  \"cupti_version\": ");
		tw_int(w, v);
	}
	if (rt_version && rt_version(&d) == 0) {
		tw_lit(w, ",\n  \"cuda_runtime_version\": ");
		tw_int(w, d);
	}
	if (p_cuDriverGetVersion && p_cuDriverGetVersion(&d) == CUDA_SUCCESS) {
		tw_lit(w, ",\n  \"cuda_driver_version\": ");
		tw_int(w, d);
	}
}

/* ---- events ---- */

/* API calls by correlation id: open addressing, sized once per write. */
struct corr { uint32_t id; int32_t range; int tid; uint64_t start, end; uint8_t kept, gpu; };
struct cmap { struct corr *v; size_t mask; };

static struct corr *cmap_get(struct cmap *m, uint32_t id, bool add)
{
	size_t i;

	if (m->v == NULL || id == 0)
		return NULL;
	for (i = (id * 2654435761u) & m->mask;; i = (i + 1) & m->mask) {
		if (m->v[i].id == id)
			return &m->v[i];
		if (m->v[i].id == 0) {
			if (!add)
				return NULL;
			m->v[i].id = id;
			m->v[i].range = -1;
			return &m->v[i];
		}
	}
}

static const char *api_name(CUpti_ActivityKind kind, uint32_t cbid, size_t *len)
{
	const char *s = NULL;

	if (p_cuptiGetCallbackName(kind == CUPTI_ACTIVITY_KIND_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API
	                                                               : CUPTI_CB_DOMAIN_RUNTIME_API,
	                           cbid, &s) != CUPTI_SUCCESS || s == NULL)
		s = "unknown";
	*len = strlen(s);
	/* cudaLaunchKernel_v7000 -> cudaLaunchKernel */
	{
		const char *v = strstr(s, "_v");

		if (v && v[2] >= '0' && v[2] <= '9')
			*len = (size_t)(v - s);
	}
	return s;
}

typedef void (*rec_fn)(struct tw *w, CUpti_Activity *r, void *ud);

static void each_record(struct tw *w, rec_fn fn, void *ud)
{
	size_t i;

	for (i = 0; i < n_done; i++) {
		CUpti_Activity *rec = NULL;

		while (p_cuptiActivityGetNextRecord(done[i].buf, done[i].valid, &rec) == CUPTI_SUCCESS)
			fn(w, rec, ud);
	}
}

struct pass { struct cmap m; uint64_t t0, t1, napi, kept_api, kept_gpu, dup_api, written; size_t nbuf; };

static void count_api(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;

	(void)w;
	if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER)
		p->napi++;
}

static void index_api(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;
	CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
	struct corr *c;

	if (r->kind != CUPTI_ACTIVITY_KIND_RUNTIME && r->kind != CUPTI_ACTIVITY_KIND_DRIVER)
		return;
	if ((c = cmap_get(&p->m, a->correlationId, true)) == NULL)
		return;
	if (c->kept || c->start != 0) {
		p->dup_api++; /* correlation ids are unique: keep the first */
		return;
	}
	c->kept = a->start >= p->t0 && a->start <= p->t1 && a->start != 0 && a->end >= a->start;
	c->tid = (int)a->threadId;
	c->start = a->start;
	c->end = a->end;
	if (c->kept) {
		c->range = tw_range_at(w, (int)a->threadId, a->start);
		p->kept_api++;
	}
}

/* Whether a GPU record belongs: launched in the window, or (launched by
 * an API not traced, e.g. the driver API) started in it. */
static struct corr *gpu_keep(struct pass *p, uint32_t corr, uint64_t start, uint64_t end,
                             bool *keep, bool flow)
{
	struct corr *c = cmap_get(&p->m, corr, false);

	if (start == 0 || end < start) {
		*keep = false;
		incomplete++;
		return NULL;
	}
	*keep = c ? c->kept : start >= p->t0 && start <= p->t1;
	if (c && *keep && flow)
		c->gpu = 1; /* the launch gets a flow arrow to this GPU event */
	if (*keep)
		p->kept_gpu++;
	return c;
}

static void gpu_common(struct tw *w, struct corr *c, uint32_t dev, uint32_t ctx, uint32_t stream,
                       uint32_t corr, uint64_t start, uint64_t end)
{
	tw_lit(w, ",\"args\":{\"device\":");
	tw_int(w, dev);
	tw_lit(w, ",\"context\":");
	tw_int(w, ctx);
	tw_lit(w, ",\"stream\":");
	tw_int(w, stream);
	tw_lit(w, ",\"correlation\":");
	tw_int(w, corr);
	if (c && c->range >= 0) {
		tw_lit(w, ",\"External id\":");
		tw_int(w, (int64_t)tw_range_id(w, c->range));
		tw_range_gpu(w, c->range, (int)dev, stream, start, end);
	}
	tw_stream(w, (int)dev, stream);
}

static void write_flow_end(struct tw *w, struct corr *c, uint32_t dev, uint32_t stream,
                           uint32_t corr, uint64_t start)
{
	if (c != NULL)
		tw_flow(w, 'f', corr, dev, stream, start);
}

static const char *const copy_kinds[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                          "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };
static const char *const mem_kinds[] = { "Unknown", "Pageable", "Pinned", "Device", "Array",
                                         "Managed", "Device Static", "Managed Static" };
#define NAME_OF(tab, i) ((size_t)(i) < sizeof(tab) / sizeof(tab[0]) ? tab[i] : "Unknown")

static void bandwidth(struct tw *w, uint64_t bytes, uint64_t start, uint64_t end)
{
	tw_lit(w, ",\"bytes\":");
	tw_int(w, (int64_t)bytes);
	tw_lit(w, ",\"memory bandwidth (GB/s)\":");
	tw_fix2(w, end > start ? (double)bytes / (double)(end - start) : 0.0);
}

/* Kernel names as people read them: demangled with the C++ runtime's
 * __cxa_demangle when the process has one (every CUDA C++ program and
 * PyTorch does), else as CUPTI gives them. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn demangle;
static char *dm_buf;
static size_t dm_cap;

static const char *kernel_name(const char *name)
{
	static bool looked;
	char *out;
	int st = -1;

	if (name == NULL)
		return "unknown";
	if (!looked) {
		void *cxx = dlopen("libstdc++.so.6", RTLD_NOLOAD | RTLD_LAZY);

		looked = true;
		/* PyTorch loads libstdc++ privately: look in it by name too */
		demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (demangle == NULL && cxx != NULL)
			demangle = (demangle_fn)dlsym(cxx, "__cxa_demangle");
	}
	if (demangle == NULL || name[0] != '_' || name[1] != 'Z')
		return name;
	out = demangle(name, dm_buf, &dm_cap, &st);
	if (st != 0 || out == NULL)
		return name;
	dm_buf = out; /* __cxa_demangle may have realloc'ed it */
	return out;
}

static void write_kernel(struct tw *w, struct pass *p, CUpti_ActivityKernel10 *k)
{
	bool keep;
	struct corr *c = gpu_keep(p, k->correlationId, k->start, k->end, &keep, true);
	int64_t blocks = (int64_t)k->gridX * k->gridY * k->gridZ;
	int64_t threads = (int64_t)k->blockX * k->blockY * k->blockZ;
	int sms = k->deviceId < DEV_MAX && (int)k->deviceId < n_dev ? dev_sms[k->deviceId] : 0;
	double bps = sms > 0 ? (double)blocks / sms : 0;

	if (!keep)
		return;
	tw_x(w, "kernel", kernel_name(k->name), (size_t)-1, k->deviceId, k->streamId,
	     k->start, k->end);
	gpu_common(w, c, k->deviceId, k->contextId, k->streamId, k->correlationId, k->start, k->end);
	tw_lit(w, ",\"queued\":");
	tw_int(w, k->queued > k->start ? 0 : (int64_t)k->queued);
	tw_lit(w, ",\"registers per thread\":");
	tw_int(w, k->registersPerThread);
	tw_lit(w, ",\"shared memory\":");
	tw_int(w, (int64_t)k->staticSharedMemory + k->dynamicSharedMemory);
	tw_lit(w, ",\"blocks per SM\":");
	tw_fix2(w, bps);
	tw_lit(w, ",\"warps per SM\":");
	tw_fix2(w, bps * (double)((threads + 31) / 32));
	tw_lit(w, ",\"grid\":[");
	tw_int(w, k->gridX);
	tw_lit(w, ",");
	tw_int(w, k->gridY);
	tw_lit(w, ",");
	tw_int(w, k->gridZ);
	tw_lit(w, "],\"block\":[");
	tw_int(w, k->blockX);
	tw_lit(w, ",");
	tw_int(w, k->blockY);
	tw_lit(w, ",");
	tw_int(w, k->blockZ);
	tw_lit(w, "]}}");
	write_flow_end(w, c, k->deviceId, k->streamId, k->correlationId, k->start);
}

/* A copy, from either record kind (MEMCPY, or MEMCPY2 between devices,
 * which also names both devices). */
struct copy {
	uint8_t kind, src, dst;
	uint64_t bytes, start, end;
	uint32_t dev, ctx, stream, corr;
	int64_t src_dev, dst_dev; /* -1: not a peer copy */
};

static void write_copy(struct tw *w, struct pass *p, const struct copy *m)
{
	char name[96];
	bool keep;
	struct corr *c = gpu_keep(p, m->corr, m->start, m->end, &keep, true);
	int n;

	if (!keep)
		return;
	n = snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", NAME_OF(copy_kinds, m->kind),
	             NAME_OF(mem_kinds, m->src), NAME_OF(mem_kinds, m->dst));
	tw_x(w, "gpu_memcpy", name, (size_t)n, m->dev, m->stream, m->start, m->end);
	gpu_common(w, c, m->dev, m->ctx, m->stream, m->corr, m->start, m->end);
	bandwidth(w, m->bytes, m->start, m->end);
	if (m->src_dev >= 0) {
		tw_lit(w, ",\"src device\":");
		tw_int(w, m->src_dev);
		tw_lit(w, ",\"dst device\":");
		tw_int(w, m->dst_dev);
	}
	tw_lit(w, "}}");
	write_flow_end(w, c, m->dev, m->stream, m->corr, m->start);
}

static void write_gpu(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;
	char name[96];
	bool keep;
	struct corr *c;

	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL:
		write_kernel(w, p, (CUpti_ActivityKernel10 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
		struct copy cp = { m->copyKind, m->srcKind, m->dstKind, m->bytes, m->start, m->end,
		                   m->deviceId, m->contextId, m->streamId, m->correlationId, -1, -1 };

		write_copy(w, p, &cp);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		CUpti_ActivityMemcpyPtoP4 *m = (CUpti_ActivityMemcpyPtoP4 *)r;
		struct copy cp = { m->copyKind, m->srcKind, m->dstKind, m->bytes, m->start, m->end,
		                   m->deviceId, m->contextId, m->streamId, m->correlationId,
		                   m->srcDeviceId, m->dstDeviceId };

		write_copy(w, p, &cp);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)r;
		int n;

		c = gpu_keep(p, m->correlationId, m->start, m->end, &keep, true);
		if (!keep)
			return;
		n = snprintf(name, sizeof(name), "Memset (%s)", NAME_OF(mem_kinds, m->memoryKind));
		tw_x(w, "gpu_memset", name, (size_t)n, m->deviceId, m->streamId, m->start, m->end);
		gpu_common(w, c, m->deviceId, m->contextId, m->streamId, m->correlationId, m->start,
		           m->end);
		bandwidth(w, m->bytes, m->start, m->end);
		tw_lit(w, "}}");
		write_flow_end(w, c, m->deviceId, m->streamId, m->correlationId, m->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		static const char *const names[] = { "Unknown Sync", "Event Sync", "Stream Wait Event",
		                                     "Stream Sync", "Context Sync" };
		CUpti_ActivitySynchronization2 *s = (CUpti_ActivitySynchronization2 *)r;
		int64_t stream = s->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : (int64_t)s->streamId;
		const char *nm = NAME_OF(names, s->type);

		c = gpu_keep(p, s->correlationId, s->start, s->end, &keep, false);
		if (!keep)
			return;
		if (c != NULL && s->type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) {
			/* A host-side wait: on the thread that waited, inside its API
			 * call (on the stream's row it would overlap the GPU work it
			 * waits for, which breaks nesting). */
			uint64_t b = s->start < c->start ? c->start : s->start;
			uint64_t e = s->end > c->end ? c->end : s->end;

			tw_x(w, "cuda_sync", nm, (size_t)-1, A.pid, c->tid, b, e < b ? b : e);
		} else {
			tw_x(w, "cuda_sync", nm, (size_t)-1, 0, stream, s->start, s->end);
		}
		tw_lit(w, ",\"args\":{\"cuda_sync_kind\":");
		tw_str(w, nm, (size_t)-1);
		tw_lit(w, ",\"stream\":");
		tw_int(w, stream);
		tw_lit(w, ",\"correlation\":");
		tw_int(w, s->correlationId);
		tw_lit(w, ",\"device\":0,\"context\":");
		tw_int(w, s->contextId);
		if (s->cudaEventId != CUPTI_SYNCHRONIZATION_INVALID_VALUE) {
			tw_lit(w, ",\"cuda event\":");
			tw_int(w, s->cudaEventId);
		}
		tw_lit(w, "}}");
		break;
	}
	case CUPTI_ACTIVITY_KIND_OVERHEAD: {
		CUpti_ActivityOverhead3 *o = (CUpti_ActivityOverhead3 *)r;
		const char *nm;

		if (o->start < p->t0 || o->start > p->t1 || o->end < o->start)
			return;
		switch (o->overheadKind) {
		case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: nm = "Buffer Flush"; break;
		case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: nm = "Instrumentation"; break;
		case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: nm = "Resource"; break;
		case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: nm = "Driver Compiler"; break;
		case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: nm = "Lazy Function Loading"; break;
		case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: nm = "Activity Buffer Request"; break;
		default: nm = "Unknown"; break;
		}
		tw_x(w, "overhead", nm, (size_t)-1, -1, 0, o->start, o->end);
		tw_lit(w, "}");
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY2: {
		CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)r;

		if (m->timestamp < p->t0 || m->timestamp > p->t1)
			return;
		tw_event(w);
		tw_lit(w, "\"ph\":\"i\",\"s\":\"t\",\"cat\":\"gpu_memory\",\"name\":");
		tw_str(w, m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
		              ? "Memory Release" : "Memory Allocation", (size_t)-1);
		tw_lit(w, ",\"pid\":");
		tw_int(w, m->deviceId);
		tw_lit(w, ",\"tid\":0,\"ts\":");
		tw_ts(w, m->timestamp);
		tw_lit(w, ",\"args\":{\"bytes\":");
		tw_int(w, (int64_t)m->bytes);
		tw_lit(w, ",\"address\":");
		tw_int(w, (int64_t)(m->address & 0x1fffffffffffffull));
		tw_lit(w, ",\"memory kind\":");
		tw_str(w, NAME_OF(mem_kinds, m->memoryKind), (size_t)-1);
		tw_lit(w, ",\"correlation\":");
		tw_int(w, m->correlationId);
		tw_lit(w, "}}");
		break;
	}
	default:
		break;
	}
}

static void write_api(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;
	CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
	struct corr *c;
	const char *nm;
	size_t len;

	if (r->kind != CUPTI_ACTIVITY_KIND_RUNTIME && r->kind != CUPTI_ACTIVITY_KIND_DRIVER)
		return;
	c = cmap_get(&p->m, a->correlationId, false);
	if (c == NULL || !c->kept)
		return;
	nm = api_name(r->kind, a->cbid, &len);
	tw_x(w, r->kind == CUPTI_ACTIVITY_KIND_DRIVER ? "cuda_driver" : "cuda_runtime", nm, len,
	     A.pid, a->threadId, a->start, a->end);
	tw_lit(w, ",\"args\":{\"cbid\":");
	tw_int(w, a->cbid);
	tw_lit(w, ",\"correlation\":");
	tw_int(w, a->correlationId);
	if (c->range >= 0) {
		tw_lit(w, ",\"External id\":");
		tw_int(w, (int64_t)tw_range_id(w, c->range));
	}
	tw_lit(w, "}}");
	tw_thread(w, (int)a->threadId);
	if (c->gpu)
		tw_flow(w, 's', a->correlationId, A.pid, a->threadId, a->start);
}

uint64_t gpu_write(struct tw *w, uint64_t t0, uint64_t t1)
{
	struct pass p = { .t0 = t0, .t1 = t1 };
	size_t size = 16;

	if (!loaded)
		return 0;
	devices_probe();
	pthread_mutex_lock(&buf_lock);
	p.nbuf = n_done;
	each_record(w, count_api, &p);
	while (size < p.napi * 2)
		size *= 2;
	p.m.v = calloc(size, sizeof(*p.m.v));
	p.m.mask = size - 1;
	if (p.m.v != NULL) {
		each_record(w, index_api, &p);
		each_record(w, write_gpu, &p);
		each_record(w, write_api, &p);
	}
	pthread_mutex_unlock(&buf_lock);
	free(p.m.v);
	agent_log("trace %s: %zu CUPTI buffers, %llu API records (%llu in the window, %llu with a "
	          "repeated id), %llu GPU records kept, %llu incomplete, %llu dropped",
	          A.win.trace_id, p.nbuf, (unsigned long long)p.napi, (unsigned long long)p.kept_api,
	          (unsigned long long)p.dup_api,
	          (unsigned long long)p.kept_gpu, (unsigned long long)incomplete,
	          (unsigned long long)atomic_load(&n_dropped));
	return p.written;
}
