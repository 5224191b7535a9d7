/*
 * gpu.c: CUPTI activity tracing for one burst at a time (shared/CUPTI_NOTES.md
 * has the facts this relies on); gpu_events.c turns its records into the
 * trace's events.
 *
 * CUPTI's state in this process is one atomic, `cs`, moved along named
 * transitions:
 *
 *   UNLOADED --load--> FREE --subscribe--> HELD --enable--> TRACING
 *   TRACING --drain (disable, flush, harvest)--> HELD
 *   HELD --release (GPROF_CUPTI_RELEASE=unsubscribe)--> FREE
 *   HELD --release (teardown, the default; see release_by_finalize)-->
 *             RELEASING
 *   RELEASING --an application thread's next runtime-API exit-->
 *             FINALIZING (it calls cuptiFinalize there) --> FREE
 *   RELEASING --reclaim (a new burst before that call came)--> HELD
 *
 * The agent thread makes every transition except the two an application
 * thread makes inside on_callback. The rule that keeps the host program
 * alive: once a burst is released the agent thread makes no CUPTI call and
 * reads nothing CUPTI owns, until the next gpu_start. A CUPTI call
 * concurrent with cuptiFinalize can crash (pytorch/kineto#686), any call
 * after it re-initializes CUPTI while the application launches work, and
 * finalize frees the kernel-name strings that kernel records point to.
 * So `drain` harvests the burst while CUPTI is still held: it indexes
 * every record, copies kernel names into the agent's own arena (rewriting
 * the record's pointer, the buffer being ours), clears the pointers it
 * does not copy, resolves callback names and caches the versions; the
 * writer then reads only the agent's memory.
 *
 * Buffers: CUPTI asks for them on application threads (buf_request: from a
 * pool pre-faulted on the agent thread before the window, then calloc,
 * bounded by the burst's byte limit; past it CUPTI drops records and
 * counts them) and returns them from its own threads (buf_complete:
 * appended to `done` under buf_lock). Runtime calls are recorded by our
 * own callback (gpu_api.c, cheaper than CUPTI's RUNTIME kind): its chunks
 * join `done` the same way, marked `own`, and are walked by next_record
 * like CUPTI's. Buffers that arrive after the harvest (finalize's own
 * flush: empty, the kinds being off) are freed unread at gpu_reset.
 *
 * The header's devices and versions are gpu_meta.c's, read at the harvest.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cupti.h>

#include "agent.h"
#include "gpu_int.h"

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
CUPTI_FN(cuptiEnableCallback);
CUPTI_FN(cuptiGetTimestamp);
CUPTI_FN(cuptiActivityEnableRuntimeApi);
CUPTI_FN(cuptiFinalize);

enum cupti_state { CS_UNLOADED, CS_FREE, CS_HELD, CS_TRACING, CS_RELEASING, CS_FINALIZING };
static const char *const cs_names[] = { "unloaded", "free", "held", "tracing", "releasing",
                                        "finalizing" };
static atomic_int cs = CS_UNLOADED;
static bool forked;
static void *cupti_lib;
static CUpti_SubscriberHandle sub;
static int64_t enabled_kinds[16];
static size_t n_enabled;
static atomic_uint_fast64_t finalizes, reclaims; /* for the log and the tests */

/* A finished buffer: CUPTI's (owner == buf), or a chunk of the agent's
 * own API records (gpu_api.c; own, owner the chunk). */
struct done_buf { uint8_t *buf; size_t valid; void *owner; bool own; };
static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct done_buf *done;
static size_t n_done, cap_done;
static atomic_uint_fast64_t buf_bytes, n_dropped;
static atomic_uint_fast64_t handed, returned; /* buffers given to CUPTI, given back: this burst */
static atomic_bool cut;
static uint64_t max_bytes = AGENT_DEFAULT_MAX_BYTES;
static uint64_t incomplete;

/* The harvest: every record of the burst, in order, and the kernel names
 * they point to, copied (a name's pointer is the key: CUPTI shares one
 * string per kernel within a session). Reset with the buffers. */
static CUpti_Activity **recs;
static size_t n_recs, cap_recs;
struct iname { const char *key; const char *copy; };
static struct iname *inames;
static size_t inames_mask, n_inames;
struct arena_blk { struct arena_blk *next; size_t used, cap; char data[]; };
static struct arena_blk *arena;

/* Callback names by domain and id, copied once for the process. */
#define CBID_MAX 4096
static char *cb_names[2][CBID_MAX];

static uint32_t cupti_version;

/* Buffers made ready (allocated, zeroed and touched) on the agent thread
 * before the window opens, so CUPTI's requests during the capture take no
 * page faults on application threads; freed with the rest at gpu_reset,
 * so an idle agent holds none. */
#define POOL_MAX 4
static uint8_t *pool[POOL_MAX];
static int n_pool;

static void pool_fill(void)
{
	/* at most half the burst's budget: the rest stays for the buffers
	 * and API-record chunks charged as they come (a pool that took it all
	 * cut a small burst that did not need the pool at all) */
	while (n_pool < POOL_MAX && atomic_load(&buf_bytes) + BUF_SIZE <= max_bytes / 2) {
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
	*max_records = 0;
	*buffer = NULL;
	*size = 0;
	pthread_mutex_lock(&buf_lock);
	if (n_pool > 0)
		*buffer = pool[--n_pool];
	pthread_mutex_unlock(&buf_lock);
	if (*buffer != NULL) {
		*size = BUF_SIZE;
		atomic_fetch_add(&handed, 1);
		return;
	}
	if (!gpu_charge(BUF_SIZE))
		return; /* CUPTI drops and counts what follows */
	/* 8-byte alignment is what CUPTI asks for; calloc's memory is zeroed,
	 * as ZEROED_OUT_ACTIVITY_BUFFER promises CUPTI. */
	if ((*buffer = calloc(1, BUF_SIZE)) == NULL) {
		atomic_fetch_sub(&buf_bytes, BUF_SIZE);
		return;
	}
	*size = BUF_SIZE;
	atomic_fetch_add(&handed, 1);
}

/* Appends a finished buffer (any thread); freed unread without memory. */
static void add_done(struct done_buf d)
{
	pthread_mutex_lock(&buf_lock);
	if (n_done == cap_done) {
		size_t cap = cap_done ? cap_done * 2 : 64;
		struct done_buf *p = realloc(done, cap * sizeof(*p));

		if (p == NULL) {
			pthread_mutex_unlock(&buf_lock);
			free(d.owner);
			return;
		}
		done = p;
		cap_done = cap;
	}
	done[n_done++] = d;
	pthread_mutex_unlock(&buf_lock);
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
	atomic_fetch_add(&returned, 1);
	add_done((struct done_buf){ buffer, valid, buffer, false });
}

/* The next record of a finished buffer, CUPTI's or ours. */
static bool next_record(const struct done_buf *d, CUpti_Activity **rec)
{
	if (d->own)
		return gpu_api_next(d->buf, d->valid, rec);
	return p_cuptiActivityGetNextRecord(d->buf, d->valid, rec) == CUPTI_SUCCESS;
}

bool gpu_charge(size_t bytes)
{
	if (atomic_fetch_add(&buf_bytes, bytes) + bytes > max_bytes) {
		atomic_fetch_sub(&buf_bytes, bytes);
		atomic_store(&cut, true);
		return false;
	}
	return true;
}

void gpu_uncharge(size_t bytes)
{
	atomic_fetch_sub(&buf_bytes, bytes);
}

void gpu_add_own(void *owner, uint8_t *buf, size_t valid)
{
	add_done((struct done_buf){ buf, valid, owner, true });
}

/* CUPTI's clock, as its records have it (ours where a libcupti lacks
 * cuptiGetTimestamp: the same CLOCK_REALTIME). */
static uint64_t api_now(void)
{
	uint64_t t = 0;

	if (p_cuptiGetTimestamp == NULL || p_cuptiGetTimestamp(&t) != CUPTI_SUCCESS)
		return agent_now_ns();
	return t;
}

/*
 * API calls, while a burst records them by callback (the default), come
 * through on_callback too and go to gpu_api.c.
 *
 * Giving CUPTI back after a burst (release_by_finalize says how): by
 * default the subscriber leaves and CUPTI is finalized, which alone
 * removes the launch hooks the kinds leave behind (a CUDA C loop stayed
 * 1.17-1.61x slower after a burst without it, 0.92-1.01x with it:
 * bench/after_burst.py, H100 2026-11-25). cuptiFinalize must run inside a
 * runtime-API exit callback, so `release` enables the runtime-API domain
 * and the application's next CUDA call does it, here: unsubscribe first,
 * then finalize, Kineto's order. Finalizing under a live subscriber
 * corrupted PyTorch's heap within 3-71 bursts (H200, 2026-11-23), and
 * from a driver-API callback nested in a runtime call it killed both GPU
 * programs at their first burst (2026-11-25); the stand-in CUPTI aborts
 * on either.
 */
static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
	const CUpti_CallbackData *cb = data;
	int releasing = CS_RELEASING;

	(void)ud;
	if (d != CUPTI_CB_DOMAIN_RUNTIME_API || cb == NULL)
		return;
	if (gpu_api_armed()) { /* a burst records this call (gpu_api.c) */
		gpu_api_record(id, cb, api_now());
		return;
	}
	if (cb->callbackSite != CUPTI_API_EXIT)
		return;
	/* never on the agent thread: it makes no CUDA call, but if it ever
	 * did, finalizing there would race its own harvest */
	if ((int)syscall(SYS_gettid) == A.agent_tid)
		return;
	if (atomic_compare_exchange_strong(&cs, &releasing, CS_FINALIZING)) {
		/* the subscriber leaves first, then CUPTI goes: the order
		 * Kineto's teardown uses (CUDA 12.6 and newer) */
		p_cuptiUnsubscribe(sub);
		p_cuptiFinalize();
		atomic_fetch_add(&finalizes, 1);
		atomic_store(&cs, CS_FREE);
	}
}

/* Threads seen calling CUDA in the bursts' API records: the first, whether
 * another ever did (then finalizing could race it), and how many API
 * records were seen in all. */
static uint32_t cuda_tid;
static bool cuda_threads;
static uint64_t api_records;

/* Evidence enough that the program calls CUDA from one thread: this many
 * API records, all from one thread. A burst cancelled at once, or one that
 * caught no API call, proves nothing (a stress run with 3 CUDA threads
 * finalized after such a first burst and the stand-in caught the race). */
#define ONE_THREAD_EVIDENCE 32

/*
 * How CUPTI is given back (GPROF_CUPTI_RELEASE):
 *   teardown (default)  always, at the next runtime-API exit of any
 *                   application thread, unsubscribing first (what Kineto
 *                   does after each profile on CUDA 12.6 and newer).
 *                   On an H100 (2026-11-25) 941 back-to-back requests to a
 *                   PyTorch loop (autograd's threads call CUDA too) and a
 *                   CUDA C loop at once ended with both alive, and the
 *                   launch cost a burst left behind was gone.
 *   unsubscribe     never finalize: the launch hooks stay (launches
 *                   1.17-1.61x slower for the rest of the process), and
 *                   the toolkit's libcupti 13.0 then numbers no record of
 *                   a later burst (gpu_events.c keeps them by time).
 *   finalize        teardown, but only once the bursts' API records (32
 *                   at least) all came from one thread (the rule before
 *                   the teardown order was found).
 */
static bool release_by_finalize(void)
{
	const char *p = getenv("GPROF_CUPTI_RELEASE");

	if (p == NULL || *p == '\0' || strcmp(p, "teardown") == 0)
		return true;
	return strcmp(p, "finalize") == 0 && !cuda_threads && api_records >= ONE_THREAD_EVIDENCE;
}

static const char *cupti_err(CUptiResult r)
{
	const char *s = NULL;

	if (p_cuptiGetResultString == NULL || p_cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "CUPTI error";
	return s;
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

/* UNLOADED -> FREE */
static int load(char *why, size_t n)
{
	static const char *const paths[] = { "libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
	                                     "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", NULL };
	const char *env = getenv("GPROF_CUPTI_PATH");
	size_t i;

	if (atomic_load(&cs) != CS_UNLOADED)
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
	    !LOAD(cupti_lib, cuptiEnableCallback) ||
	    !LOAD(cupti_lib, cuptiFinalize) || !LOAD(cupti_lib, cuptiActivityEnableRuntimeApi)) {
		snprintf(why, n, "the libcupti found lacks CUDA 13 functions (set GPROF_CUPTI_PATH)");
		return -ENOSYS;
	}
	(void)LOAD(cupti_lib, cuptiGetTimestamp); /* optional: api_now() falls back */
	if (p_cuptiGetVersion(&cupti_version) != CUPTI_SUCCESS || cupti_version < 130000) {
		snprintf(why, n, "libcupti API version %u is older than CUDA 13's", cupti_version);
		return -ENOSYS;
	}
	gpu_meta_load(cupti_version);
	atomic_store(&cs, CS_FREE);
	return 0;
}

/* The kinds of a request, in the order they are turned on: the API kinds
 * first, so GPU work launched before the window by an API not traced is
 * bounded by a traced call before it (gpu_events.c; with the GPU kinds
 * first, a stand-in duration burst kept 1,027 such kernels launched while
 * the API callbacks were being enabled). A launch recorded before the GPU
 * kinds were on is before the window too: the window opens once all are
 * on (rec.c's trigger). The end turns the API kinds off first as well
 * (gpu_tail.c). */
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

static bool quiet(CUpti_CallbackId cbid, bool all)
{
	size_t q;

	if (all)
		return false;
	for (q = 0; q < sizeof(quiet_calls) / sizeof(quiet_calls[0]); q++)
		if (quiet_calls[q] == cbid)
			return true;
	return false;
}

/*
 * How runtime calls are recorded (GPROF_CUPTI_API): by the agent's own
 * callback, enabled call by call for every call but the quiet ones
 * (gpu_api.c; the default), or by CUPTI's RUNTIME activity kind with the
 * quiet calls filtered out ("activity", the way before 2026-11-23). A CUDA
 * C loop on an H100 paid 1,222 ns more per kernel with the activity kind
 * and 934 with our records, against 675 for the kernel record alone
 * (bench/cupti_cost.cu, docs/BENCHMARKS.md).
 */
static bool api_by_activity(void)
{
	const char *v = getenv("GPROF_CUPTI_API");

	return v != NULL && strcmp(v, "activity") == 0;
}

static CUptiResult runtime_on(void)
{
	bool all = getenv("GPROF_CUPTI_ALL_RUNTIME") != NULL;
	CUptiResult r = CUPTI_ERROR_UNKNOWN;
	CUpti_CallbackId cbid;

	if (api_by_activity()) {
		size_t q;

		r = p_cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
		for (q = 0; r == CUPTI_SUCCESS && !all && q < sizeof(quiet_calls) /
		                                                 sizeof(quiet_calls[0]); q++)
			p_cuptiActivityEnableRuntimeApi(quiet_calls[q], 0);
		return r;
	}
	gpu_api_arm();
	for (cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; cbid++) {
		if (quiet(cbid, all))
			continue;
		if (p_cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, cbid) == CUPTI_SUCCESS)
			r = CUPTI_SUCCESS;
	}
	if (r != CUPTI_SUCCESS)
		gpu_api_disarm();
	return r;
}

/* RELEASING -> HELD, or wait out FINALIZING -> FREE. 0, or -EBUSY when an
 * application thread has been finalizing for longer than we wait. */
static int settle(char *why, size_t n)
{
	struct timespec one_ms = { 0, 1000 * 1000 };
	int releasing = CS_RELEASING, i;

	if (atomic_compare_exchange_strong(&cs, &releasing, CS_HELD)) {
		/* the application made no CUDA call since the last burst: keep
		 * the subscription and use it again */
		p_cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		atomic_fetch_add(&reclaims, 1);
		return 0;
	}
	for (i = 0; i < 5000 && atomic_load(&cs) == CS_FINALIZING; i++)
		nanosleep(&one_ms, NULL);
	if (atomic_load(&cs) == CS_FINALIZING) {
		snprintf(why, n, "CUPTI is still being finalized after the last burst (an application "
		         "thread waits on the GPU inside cuptiFinalize); ask again");
		return -EBUSY;
	}
	return 0;
}

/* FREE -> HELD */
static int subscribe(char *why, size_t n)
{
	CUpti_SubscriberParams params;
	char holder[128] = "";
	CUptiResult r;

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
	atomic_store(&cs, CS_HELD);
	return 0;
}

/* HELD -> FREE, by unsubscribing (a failed start, or the unsubscribe policy) */
static void unsubscribe(void)
{
	p_cuptiUnsubscribe(sub);
	atomic_store(&cs, CS_FREE);
}

/* Experimental knobs, read at each burst (bench/capture_overhead.py times
 * them): where CUPTI keeps the GPU's timestamps for kernels and copies
 * (GPROF_CUPTI_PINNED=1: pinned host memory instead of device memory,
 * which needs no copy back) and how big each device buffer is
 * (GPROF_CUPTI_DEVICE_BUFFER_MB: fewer flushes). CUPTI applies both to
 * buffers it allocates from then on. */
static void buffer_knobs(void)
{
	const char *pin = getenv("GPROF_CUPTI_PINNED"), *mb = getenv("GPROF_CUPTI_DEVICE_BUFFER_MB");
	CUptiResult r;

	if (pin != NULL && *pin) {
		uint8_t v = strcmp(pin, "0") != 0;
		size_t sz = sizeof(v);

		r = p_cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED,
		                                &sz, &v);
		agent_log("GPROF_CUPTI_PINNED=%d: %s", v, cupti_err(r));
	}
	if (mb != NULL && *mb) {
		size_t v = (size_t)strtoull(mb, NULL, 10) << 20, sz = sizeof(v);

		if (v == 0)
			return;
		r = p_cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v);
		agent_log("GPROF_CUPTI_DEVICE_BUFFER_MB=%zu: %s", v >> 20, cupti_err(r));
	}
}

int gpu_start(int64_t activities, uint64_t limit, char *why, size_t n)
{
	const CUpti_ActivityKind *k;
	size_t nk, i, one = 1, sz = sizeof(one);
	CUptiResult r;
	int err;

	if ((err = load(why, n)) < 0 || (err = settle(why, n)) < 0)
		return err;
	if (atomic_load(&cs) == CS_FREE && (err = subscribe(why, n)) < 0)
		return err;
	/* HELD */
	max_bytes = limit;
	atomic_store(&buf_bytes, 0);
	atomic_store(&cut, false);
	incomplete = 0;
	/* Activity callbacks are per process and replaced by whoever registers
	 * last (torch.profiler after us): register them for every burst. */
	p_cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
	buffer_knobs();
	r = p_cuptiActivityRegisterCallbacks(buf_request, buf_complete);
	if (r != CUPTI_SUCCESS) {
		unsubscribe();
		snprintf(why, n, "cuptiActivityRegisterCallbacks failed: %s", cupti_err(r));
		return -EIO;
	}
	/* Count only what this burst drops, and only its buffers. */
	p_cuptiActivityFlushAll(0);
	gpu_reset();
	atomic_store(&n_dropped, 0);
	atomic_store(&handed, 0);
	atomic_store(&returned, 0);
	pool_fill();
	k = kinds_for(activities, &nk);
	n_enabled = 0;
	for (i = 0; i < nk; i++) {
		r = k[i] == CUPTI_ACTIVITY_KIND_RUNTIME ? runtime_on() : p_cuptiActivityEnable(k[i]);
		if (r == CUPTI_SUCCESS)
			enabled_kinds[n_enabled++] = k[i];
		else
			agent_log("cuptiActivityEnable(%d): %s", (int)k[i], cupti_err(r));
	}
	if (n_enabled == 0) {
		unsubscribe();
		snprintf(why, n, "CUPTI enabled no activity kind (see GPROF_AGENT_LOG)");
		return -EIO;
	}
	atomic_store(&cs, CS_TRACING);
	return 0;
}

/* ---- the harvest: what the writer needs, copied out of CUPTI ---- */

static const char *arena_copy(const char *s)
{
	size_t len = strlen(s) + 1;
	struct arena_blk *b = arena;

	if (b == NULL || b->cap - b->used < len) {
		size_t cap = len > 65536 ? len : 65536;

		if ((b = malloc(sizeof(*b) + cap)) == NULL)
			return NULL;
		b->next = arena;
		b->used = 0;
		b->cap = cap;
		arena = b;
	}
	memcpy(b->data + b->used, s, len);
	b->used += len;
	return b->data + b->used - len;
}

/* The agent's copy of a kernel name CUPTI owns (NULL if out of memory). */
static const char *intern(const char *name)
{
	size_t i;

	if (n_inames * 2 >= inames_mask) {
		size_t cap = inames_mask ? (inames_mask + 1) * 2 : 1024, j;
		struct iname *v = calloc(cap, sizeof(*v));

		if (v == NULL)
			return NULL;
		for (j = 0; inames && j <= inames_mask; j++) {
			if (inames[j].key == NULL)
				continue;
			for (i = ((uintptr_t)inames[j].key >> 3) & (cap - 1); v[i].key;
			     i = (i + 1) & (cap - 1))
				;
			v[i] = inames[j];
		}
		free(inames);
		inames = v;
		inames_mask = cap - 1;
	}
	for (i = ((uintptr_t)name >> 3) & inames_mask; inames[i].key; i = (i + 1) & inames_mask)
		if (inames[i].key == name)
			return inames[i].copy;
	if ((inames[i].copy = arena_copy(name)) != NULL) {
		inames[i].key = name;
		n_inames++;
	}
	return inames[i].copy;
}

static void cache_cb_name(CUpti_ActivityKind kind, uint32_t cbid)
{
	int d = kind == CUPTI_ACTIVITY_KIND_DRIVER;
	const char *s = NULL;

	if (cbid >= CBID_MAX || cb_names[d][cbid] != NULL)
		return;
	if (p_cuptiGetCallbackName(d ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
	                           cbid, &s) != CUPTI_SUCCESS || s == NULL)
		s = "unknown";
	cb_names[d][cbid] = strdup(s);
}

/* Indexes every record of the burst and copies out what points into
 * CUPTI. Lock held; CUPTI still held. */
static void harvest(void)
{
	size_t i;

	n_recs = 0;
	for (i = 0; i < n_done; i++) {
		CUpti_Activity *rec = NULL;

		while (next_record(&done[i], &rec)) {
			if (n_recs == cap_recs) {
				size_t cap = cap_recs ? cap_recs * 2 : 4096;
				CUpti_Activity **v = realloc(recs, cap * sizeof(*v));

				if (v == NULL)
					return; /* the trace holds what was indexed */
				recs = v;
				cap_recs = cap;
			}
			recs[n_recs++] = rec;
			switch (rec->kind) {
			case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
			case CUPTI_ACTIVITY_KIND_KERNEL: {
				CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)rec;

				k->name = k->name ? intern(k->name) : NULL;
				break;
			}
			case CUPTI_ACTIVITY_KIND_MEMORY2: {
				CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)rec;

				m->name = NULL; /* not written; CUPTI's */
				m->source = NULL;
				break;
			}
			case CUPTI_ACTIVITY_KIND_RUNTIME:
			case CUPTI_ACTIVITY_KIND_DRIVER: {
				const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;

				cache_cb_name(rec->kind, a->cbid);
				api_records++;
				if (cuda_tid == 0)
					cuda_tid = a->threadId;
				else if (a->threadId != cuda_tid && !cuda_threads) {
					cuda_threads = true;
					agent_log("threads %u and %u call CUDA: CUPTI is given back by "
					          "unsubscribing, never finalized (a finalize beside "
					          "another thread's CUDA call can corrupt the process)",
					          (unsigned)cuda_tid, (unsigned)a->threadId);
				}
				break;
			}
			default:
				break;
			}
		}
	}
}

/* HELD -> RELEASING (finalize) or FREE (unsubscribe) */
static void release(void)
{
	if (!release_by_finalize()) {
		unsubscribe();
		return;
	}
	atomic_store(&cs, CS_RELEASING);
	if (p_cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS) {
		int releasing = CS_RELEASING;

		/* no callback will come: give it back the plain way */
		if (atomic_compare_exchange_strong(&cs, &releasing, CS_HELD))
			unsubscribe();
	}
}

/* TRACING -> HELD (drain and harvest) -> release */
void gpu_stop(void)
{
	if (atomic_load(&cs) != CS_TRACING)
		return;
	/* the kinds go off; the window's GPU work still queued is waited for */
	gpu_tail_drain(enabled_kinds, n_enabled);
	n_enabled = 0;
	p_cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	atomic_store(&cs, CS_HELD);
	pthread_mutex_lock(&buf_lock);
	harvest();
	pthread_mutex_unlock(&buf_lock);
	/* read once, while nothing of ours can finalize under them */
	gpu_meta_probe();
	if (gpu_api_lost() > 0)
		agent_log("%llu API records left out: the burst reached its byte limit",
		          (unsigned long long)gpu_api_lost());
	release();
	agent_log("CUPTI %s after the burst (%llu finalized, %llu reclaimed so far)",
	          cs_names[atomic_load(&cs)], (unsigned long long)atomic_load(&finalizes),
	          (unsigned long long)atomic_load(&reclaims));
}

uint64_t gpu_dropped(void)
{
	/* with our own API records lost past the byte limit */
	return atomic_load(&n_dropped) + incomplete + gpu_api_lost();
}

bool gpu_cut(void)
{
	return atomic_load(&cut);
}

/* Frees the burst's buffers, index and name copies; touches no CUPTI. */
void gpu_reset(void)
{
	size_t i;

	pthread_mutex_lock(&buf_lock);
	/* overhead records own a malloc'ed overheadData */
	for (i = 0; i < n_recs; i++)
		if (recs[i]->kind == CUPTI_ACTIVITY_KIND_OVERHEAD)
			free(((CUpti_ActivityOverhead3 *)recs[i])->overheadData);
	n_recs = 0;
	for (i = 0; i < n_done; i++)
		free(done[i].owner);
	n_done = 0;
	while (n_pool > 0)
		free(pool[--n_pool]);
	pthread_mutex_unlock(&buf_lock);
	while (arena != NULL) {
		struct arena_blk *b = arena;

		arena = b->next;
		free(b);
	}
	free(inames);
	inames = NULL;
	inames_mask = n_inames = 0;
	atomic_store(&buf_bytes, 0);
}

void gpu_atfork_child(void)
{
	forked = true; /* never flush or finalize CUPTI in a child */
	gpu_api_atfork_child();
	n_done = 0;
	done = NULL;
	cap_done = 0;
	n_recs = 0;
	recs = NULL;
	cap_recs = 0;
}

/* ---- what gpu_tail.c and gpu_events.c use (gpu_int.h) ---- */

void gpu_kind_off(int64_t kind)
{
	if (kind == CUPTI_ACTIVITY_KIND_RUNTIME && gpu_api_armed()) {
		p_cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		gpu_api_disarm();
		return;
	}
	p_cuptiActivityDisable((CUpti_ActivityKind)kind);
}

void gpu_flush_complete(void)
{
	p_cuptiActivityFlushAll(0);
}

int64_t gpu_buffers_out(void)
{
	return (int64_t)atomic_load(&handed) - (int64_t)atomic_load(&returned);
}

size_t gpu_each_new_record(size_t *scanned, gpu_rec_fn fn, void *ud)
{
	size_t n;

	pthread_mutex_lock(&buf_lock);
	for (; *scanned < n_done; (*scanned)++) {
		CUpti_Activity *rec = NULL;

		while (next_record(&done[*scanned], &rec)) {
			if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
			    rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
				cache_cb_name(rec->kind, ((CUpti_ActivityAPI *)rec)->cbid);
			fn(NULL, rec, ud);
		}
	}
	n = n_done;
	pthread_mutex_unlock(&buf_lock);
	return n;
}

void gpu_records_lock(void)
{
	pthread_mutex_lock(&buf_lock);
}

void gpu_records_unlock(void)
{
	pthread_mutex_unlock(&buf_lock);
}

size_t gpu_each_record(struct tw *w, gpu_rec_fn fn, void *ud)
{
	size_t i;

	for (i = 0; i < n_recs; i++)
		fn(w, recs[i], ud);
	return n_done;
}

const char *gpu_api_name(CUpti_ActivityKind kind, uint32_t cbid, size_t *len)
{
	const char *s = cbid < CBID_MAX ? cb_names[kind == CUPTI_ACTIVITY_KIND_DRIVER][cbid] : NULL;
	const char *v;

	if (s == NULL)
		s = "unknown";
	*len = strlen(s);
	/* cudaLaunchKernel_v7000 -> cudaLaunchKernel */
	v = strstr(s, "_v");
	if (v && v[2] >= '0' && v[2] <= '9')
		*len = (size_t)(v - s);
	return s;
}

bool gpu_loaded(void)
{
	return atomic_load(&cs) != CS_UNLOADED && gpu_meta_probed();
}

void gpu_count_incomplete(void)
{
	incomplete++;
}
