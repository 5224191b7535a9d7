/*
 * fake_cupti.c: a stand-in for libcupti, for the writer benchmark and the
 * agent's CI checks only (never shipped). The agent loads it through its
 * normal path (GPROF_CUPTI_PATH), so gpu.c and writer.c run as on a GPU.
 *
 * Two ways to drive it:
 *  - fake_cupti_emit() plays CUPTI and the GPU in one call: it asks the
 *    agent for buffers, fills them with CUDA 13-shaped records (a runtime
 *    API call and the kernel, copy or set it launched, with matching
 *    correlation ids) and hands them back (bench-writer, agent-writer.sh).
 *  - fake_cupti_record() writes one record of a sequence a test builds
 *    (a runtime call or a kernel, with the correlation id, thread, stream
 *    and times it chooses; tests/integration/projection-app.c), handed
 *    back at the agent's next flush, or held back until a later one (a
 *    GPU still running it, in flushes rather than time).
 *  - fake_cuda_call() is one CUDA runtime call made by an application
 *    thread (tests/integration/stress-app.c): it runs the subscriber's API
 *    callbacks when their domain is enabled, and writes the API record and
 *    the kernel record when those kinds are enabled, into buffers asked
 *    for on that thread, as CUPTI does.
 *
 * It also holds the agent to the rules real CUPTI needs, and aborts the
 * process (a test failure) when one is broken:
 *  - no CUPTI call from another thread while cuptiFinalize runs (it lasts
 *    2 ms here, as real CUPTI waits for the device); other threads' CUDA
 *    calls go on meanwhile, as PyTorch's autograd thread's did on an H100
 *    under the teardown the agent uses (docs/AGENT.md, 2026-11-25);
 *  - cuptiFinalize only inside a runtime-API exit callback (from a
 *    driver-API callback, nested in a runtime call, it killed both GPU
 *    programs at their first burst, H100 2026-11-25), and only once the
 *    subscriber has left (cuptiUnsubscribe first, as Kineto does:
 *    finalizing under a live subscriber corrupted PyTorch's heap within
 *    3-71 bursts, H200 2026-11-23);
 *  - after a finalize, no call but the start of a session
 *    (cuptiSetThreadIdType, cuptiSubscribe_v2, cuptiGetResultString):
 *    anything else would re-initialize CUPTI behind the application;
 *  - no cuptiFinalize once a CUDA graph was launched while CUPTI was up
 *    (fake_cuda_graph_launch): a PyTorch job replaying CUDA graphs died
 *    with "unspecified launch failure" after the first finalize (H200,
 *    2026-11-28, tests/gpu/graphs_check.py), and lived without it;
 *  - kernel names belong to the session: finalize poisons and frees them,
 *    so a writer that reads them afterwards shows garbage (and ASan a
 *    use-after-free).
 * fake_cupti_stats() says how many sessions, finalizes and records there
 * were.
 *
 * FAKE_CUPTI_HELD=NAME makes cuptiSubscribe_v2 fail as when NAME (another
 * tool) holds CUPTI.
 *
 * FAKE_CUPTI_STUCK_IDS=1 gives every call one correlation id from the
 * first unsubscribe on (until a finalize), as the toolkit's libcupti 13.0
 * did on an H100.
 *
 * FAKE_CUPTI_GPU_LAG_US=N plays a GPU that runs N us behind the CPU: a
 * kernel launched while the kernel kind is on gets its record only when it
 * "completes", N us later (at the next call or flush after that), even if
 * the kind was turned off meanwhile, as CUPTI writes the records of work
 * queued inside a window after the window. An agent that stops waiting
 * for them at once loses the window's last kernels.
 *
 * Records are laid out back to back at 8-byte alignment, and
 * cuptiActivityGetNextRecord walks them by their kind's struct size, which
 * is all the agent relies on.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

static CUpti_BuffersCallbackRequestFunc req_cb;
static CUpti_BuffersCallbackCompleteFunc done_cb;
static CUpti_CallbackFunc sub_cb;
static void *sub_ud;
static int subscribed;

/* the session, for fake_cuda_call */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int finalizer_tid;        /* a thread inside cuptiFinalize */
/* the API callback this thread is inside: 0 none, else the site + 1 */
static _Thread_local int in_callback;
#define DRIVER_CALLBACK 100 /* in_callback inside a driver-API callback */
static atomic_bool initialized;
static bool kind_on[64];
/* runtime-API callbacks enabled one by one (cuptiEnableCallback), for the
 * two calls fake_cuda_call makes; cuptiEnableDomain sets both */
static bool cb_launch, cb_sync, cb_graph;
/* a CUDA graph launched while CUPTI was up: a finalize would kill the job */
static bool graphs_under_cupti;
#define GRAPH_BIT 0x100 /* in cuda_call's k: the kernel is a graph's node */
/* the driver-API callback of cuLaunchKernelEx (fake_cuda_driver_launch) */
static bool cb_drv_launch;
static uint8_t *cur;                    /* the buffer being filled */
static size_t cur_size, cur_off;
static char *names[5];                  /* this session's kernel names */
static uint32_t next_corr = 1;
/* launched kernels the lagging GPU has not completed: a FIFO */
struct inflight { uint32_t corr; int k; uint64_t due; };
static struct inflight queued[4096];
static size_t q_head, q_len;
static long lag_ns = -1;
static void complete_due(void);
static void release_lates(void);
static uint64_t now_ns(void);
static atomic_ulong n_sessions, n_finalizes, n_records;

static void die(const char *what)
{
	fprintf(stderr, "fake CUPTI: rule broken: %s\n", what);
	abort();
}

static int tid(void)
{
	return (int)syscall(SYS_gettid);
}

/* Every entry point: never beside a finalize; after one, only a new
 * session's first calls. */
static void enter(const char *fn, bool starts_session)
{
	int f = atomic_load(&finalizer_tid);

	if (f != 0 && f != tid()) {
		char m[160];

		snprintf(m, sizeof(m), "%s called while another thread is in cuptiFinalize", fn);
		die(m);
	}
	if (f == 0 && !initialized) {
		char m[160];

		if (!starts_session) {
			snprintf(m, sizeof(m), "%s re-initializes CUPTI after a finalize, outside the "
			         "start of a session", fn);
			die(m);
		}
		initialized = true;
		atomic_fetch_add(&n_sessions, 1);
	}
}

static size_t rec_size(CUpti_ActivityKind k)
{
	switch (k) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
	default: return 0;
	}
}

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	size_t off = 0;

	enter("cuptiActivityGetNextRecord", false);
	if (*rec != NULL)
		off = (size_t)((uint8_t *)*rec - buf) + ALIGN8(rec_size((*rec)->kind));
	if (off >= valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)(buf + off);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                           CUpti_BuffersCallbackCompleteFunc c)
{
	enter("cuptiActivityRegisterCallbacks", false);
	req_cb = r;
	done_cb = c;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud,
                              CUpti_SubscriberParams *p)
{
	const char *held = getenv("FAKE_CUPTI_HELD"); /* another tool holds CUPTI */

	enter("cuptiSubscribe_v2", true);
	if (subscribed || (held && *held)) {
		if (held && p && p->oldSubscriberName && p->oldSubscriberSize)
			snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s", held);
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	pthread_mutex_lock(&lock);
	subscribed = 1;
	sub_cb = cb;
	sub_ud = ud;
	pthread_mutex_unlock(&lock);
	*s = (CUpti_SubscriberHandle)&subscribed;
	return CUPTI_SUCCESS;
}

/* FAKE_CUPTI_STUCK_IDS: from the first unsubscribe until a finalize, every
 * call gets the same correlation id, as the toolkit's libcupti 13.0 did on
 * an H100 (2026-11-23). */
static bool ids_stuck;

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	const char *stuck = getenv("FAKE_CUPTI_STUCK_IDS");

	(void)s;
	enter("cuptiUnsubscribe", false);
	pthread_mutex_lock(&lock);
	subscribed = 0;
	cb_launch = cb_sync = cb_graph = false;
	if (stuck && *stuck)
		ids_stuck = true;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

/* Hands the buffer being filled back to the agent. Lock held. */
static void hand_back(void)
{
	if (cur != NULL && done_cb != NULL)
		done_cb(NULL, 0, cur, cur_size, cur_off);
	cur = NULL;
	cur_size = cur_off = 0;
}

CUptiResult cuptiFinalize(void)
{
	size_t i;

	if (in_callback == DRIVER_CALLBACK)
		die("cuptiFinalize called in a driver-API callback");
	if (in_callback != CUPTI_API_EXIT + 1)
		die(in_callback ? "cuptiFinalize called in an API entry callback"
		                : "cuptiFinalize called outside an API callback");
	if (subscribed)
		die("cuptiFinalize called with the subscriber still subscribed (unsubscribe first)");
	if (graphs_under_cupti)
		die("cuptiFinalize after CUDA graphs were launched under CUPTI");
	ids_stuck = false;
	atomic_store(&finalizer_tid, tid());
	/* it waits for the device: long enough for another thread's call */
	{
		struct timespec ts = { 0, 2 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&lock);
	if (graphs_under_cupti) /* one launched while it waited */
		die("cuptiFinalize after CUDA graphs were launched under CUPTI");
	/* it synchronises the device: what was queued completes, unread */
	while (q_len > 0) {
		queued[q_head].due = 0;
		complete_due();
	}
	hand_back();
	subscribed = 0;
	cb_launch = cb_sync = false;
	memset(kind_on, 0, sizeof(kind_on));
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i] != NULL)
			memset(names[i], 'X', strlen(names[i])); /* as freed memory would read */
		free(names[i]);
		names[i] = NULL;
	}
	req_cb = NULL;
	done_cb = NULL;
	initialized = false;
	pthread_mutex_unlock(&lock);
	atomic_fetch_add(&n_finalizes, 1);
	atomic_store(&finalizer_tid, 0);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
{
	(void)s;
	enter("cuptiEnableDomain", false);
	if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
		pthread_mutex_lock(&lock);
		cb_drv_launch = enable != 0;
		pthread_mutex_unlock(&lock);
	}
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API) {
		pthread_mutex_lock(&lock);
		cb_launch = cb_sync = cb_graph = enable != 0;
		pthread_mutex_unlock(&lock);
	}
	return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                                CUpti_CallbackId cbid)
{
	(void)s;
	enter("cuptiEnableCallback", false);
	if (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid > 0 && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE) {
		pthread_mutex_lock(&lock);
		if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
			cb_drv_launch = enable != 0;
		pthread_mutex_unlock(&lock);
		return CUPTI_SUCCESS;
	}
	if (d != CUPTI_CB_DOMAIN_RUNTIME_API || cbid == 0 || cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
		cb_launch = enable != 0;
	else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020)
		cb_sync = enable != 0;
	else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000)
		cb_graph = enable != 0;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *t)
{
	enter("cuptiGetTimestamp", false);
	*t = now_ns();
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	/* FAKE_CUPTI_REFUSE_KINDS: a comma list of kind numbers this CUPTI
	 * does not support (a device or driver without them) */
	const char *refuse = getenv("FAKE_CUPTI_REFUSE_KINDS");
	char *end;

	enter("cuptiActivityEnable", false);
	for (; refuse != NULL && *refuse; refuse = *end ? end + 1 : end) {
		if (strtol(refuse, &end, 10) == (long)k)
			return CUPTI_ERROR_NOT_SUPPORTED;
		if (end == refuse)
			break;
	}
	pthread_mutex_lock(&lock);
	if ((unsigned)k < 64)
		kind_on[k] = true;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	enter("cuptiActivityDisable", false);
	pthread_mutex_lock(&lock);
	if ((unsigned)k < 64)
		kind_on[k] = false;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId c, uint8_t e)
{
	(void)c; (void)e;
	enter("cuptiActivityEnableRuntimeApi", false);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t f)
{
	(void)f;
	enter("cuptiActivityFlushAll", false);
	pthread_mutex_lock(&lock);
	complete_due();
	release_lates();
	if (cur_off > 0)
		hand_back();
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
	(void)t;
	enter("cuptiSetThreadIdType", true);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *n, void *v)
{
	(void)a; (void)n; (void)v;
	enter("cuptiActivitySetAttribute", false);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *d)
{
	(void)c; (void)s;
	*d = 0;
	return CUPTI_SUCCESS; /* called by the agent inside our own done_cb */
}

CUptiResult cuptiGetVersion(uint32_t *v)
{
	enter("cuptiGetVersion", true);
	*v = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	(void)r;
	*s = "fake CUPTI error";
	return CUPTI_SUCCESS;
}

CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
	enter("cuptiGetCallbackName", false);
	if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
		*name = cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ? "cuLaunchKernelEx"
		                                                         : "cuDriverCall";
		return CUPTI_SUCCESS;
	}
	*name = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 ? "cudaLaunchKernel_v7000"
	      : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 ? "cudaMemcpyAsync_v3020"
	      : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020 ?
	        "cudaStreamSynchronize_v3020"
	      : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 ? "cudaGetDevice_v3020"
	      : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ? "cudaGraphLaunch_v10000"
	      : "cudaMemsetAsync_v3020";
	return CUPTI_SUCCESS;
}

/* Room for n more bytes in the current buffer, asking the agent for a new
 * one on this (the application's) thread. Lock held. */
static uint8_t *room(size_t n)
{
	size_t max = 0;

	if (cur != NULL && cur_off + n <= cur_size)
		return cur + cur_off;
	hand_back();
	if (req_cb == NULL)
		return NULL;
	req_cb(&cur, &cur_size, &max);
	cur_off = 0;
	return cur != NULL && n <= cur_size ? cur : NULL; /* NULL: dropped */
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long gpu_lag_ns(void)
{
	if (lag_ns < 0) {
		const char *v = getenv("FAKE_CUPTI_GPU_LAG_US");

		lag_ns = v ? atol(v) * 1000 : 0;
	}
	return lag_ns;
}

static void write_kernel(uint32_t corr, int k, uint64_t start);

/* The lagging GPU completes what is due by now. Lock held. */
static void complete_due(void)
{
	uint64_t now = now_ns();

	while (q_len > 0 && queued[q_head].due <= now) {
		struct inflight *f = &queued[q_head];

		write_kernel(f->corr, f->k, f->due - 2000);
		q_head = (q_head + 1) % (sizeof(queued) / sizeof(queued[0]));
		q_len--;
	}
}

/*
 * One CUDA runtime call on the calling thread: cudaLaunchKernel of kernel
 * k (0-3) when k >= 0, else a call that launches nothing (a stream sync).
 */
static void cuda_call(int k, bool driver);
void fake_cuda_call(int k);
void fake_cuda_call(int k)
{
	cuda_call(k, false);
}

/*
 * One cudaGraphLaunch of a graph whose one node is kernel k (0-3): the
 * runtime callbacks (cbid cudaGraphLaunch), the API record, and the
 * kernel's record with its graphId set, as CUPTI writes a graph node's.
 */
void fake_cuda_graph_launch(int k);
void fake_cuda_graph_launch(int k)
{
	cuda_call((k & 3) | GRAPH_BIT, false);
}

/*
 * One driver-API launch on the calling thread, as NCCL makes them:
 * cuLaunchKernelEx of kernel k (4: an NCCL all-reduce), outside any
 * runtime call: the driver-API callback when enabled, a DRIVER record when
 * that kind is on, and the kernel.
 */
void fake_cuda_driver_launch(int k);
void fake_cuda_driver_launch(int k)
{
	cuda_call(k, true);
}

static void cuda_call(int k, bool driver)
{
	CUpti_CallbackData cb;
	uint64_t slot = 0;
	int ret = 0; /* cudaSuccess */
	CUpti_CallbackFunc fn;
	void *ud;
	bool domain;
	uint64_t t0 = now_ns(), t1;
	uint32_t corr;
	bool graph = k >= 0 && (k & GRAPH_BIT);
	uint32_t cbid = driver ? CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx
	              : graph  ? CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
	              : k >= 0 ? CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
	                       : CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
	CUpti_CallbackDomain dom = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
	CUpti_ActivityKind kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;

	pthread_mutex_lock(&lock);
	corr = ids_stuck ? next_corr : next_corr++;
	if (graph && initialized)
		graphs_under_cupti = true;
	if (graph && atomic_load(&finalizer_tid) != 0)
		die("a CUDA graph launched while cuptiFinalize runs");
	domain = subscribed && (driver ? cb_drv_launch : graph ? cb_graph : k >= 0 ? cb_launch : cb_sync);
	fn = sub_cb;
	ud = sub_ud;
	pthread_mutex_unlock(&lock);
	memset(&cb, 0, sizeof(cb));
	cb.correlationId = corr;
	cb.correlationData = &slot;
	cb.functionName = driver ? "cuLaunchKernelEx" : graph ? "cudaGraphLaunch"
	                : k >= 0 ? "cudaLaunchKernel" : "cudaStreamSynchronize";
	cb.functionReturnValue = &ret;
	if (domain && fn) {
		cb.callbackSite = CUPTI_API_ENTER;
		in_callback = driver ? DRIVER_CALLBACK : CUPTI_API_ENTER + 1;
		fn(ud, dom, cbid, &cb);
		in_callback = 0;
	}
	t1 = now_ns();
	pthread_mutex_lock(&lock);
	if (kind_on[kind]) {
		CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)room(ALIGN8(sizeof(*a)));

		if (a != NULL) {
			memset(a, 0, sizeof(*a));
			a->kind = kind;
			a->cbid = cbid;
			a->start = t0;
			a->end = t1 > t0 ? t1 : t0 + 1;
			a->processId = (uint32_t)getpid();
			a->threadId = (uint32_t)tid();
			a->correlationId = corr;
			cur_off += ALIGN8(sizeof(*a));
			atomic_fetch_add(&n_records, 1);
		}
	}
	complete_due();
	if (k >= 0 && kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) {
		if (gpu_lag_ns() == 0 || q_len == sizeof(queued) / sizeof(queued[0])) {
			write_kernel(corr, k, t1);
		} else {
			struct inflight *f = &queued[(q_head + q_len++) % (sizeof(queued) /
			                                                   sizeof(queued[0]))];

			f->corr = corr;
			f->k = k;
			f->due = t1 + (uint64_t)gpu_lag_ns();
		}
	}
	domain = subscribed && (driver ? cb_drv_launch : graph ? cb_graph : k >= 0 ? cb_launch : cb_sync);
	fn = sub_cb;
	ud = sub_ud;
	pthread_mutex_unlock(&lock);
	if (domain && fn) {
		cb.callbackSite = CUPTI_API_EXIT;
		in_callback = CUPTI_API_EXIT + 1;
		fn(ud, dom, cbid, &cb); /* may finalize */
		in_callback = 0;
	}
}

/* A kernel's record, as the GPU completes it. Lock held. */
static void write_kernel(uint32_t corr, int k, uint64_t start)
{
	static const char *const kname[5] = { "_Z5scalePff", "_Z7add_onePf", "gemm_128x64",
	                                       "elementwise",
	                                       "ncclDevKernel_AllReduce_Sum_f32_RING_LL" };
	static uint64_t stream_end[3]; /* a stream runs one kernel at a time */
	bool graph = (k & GRAPH_BIT) != 0;
	CUpti_ActivityKernel10 *r = (CUpti_ActivityKernel10 *)room(ALIGN8(sizeof(*r)));
	uint32_t stream;

	k &= ~GRAPH_BIT;
	stream = k == 3 || k == 4 ? 9 : 7 + (uint32_t)(k & 1);
	if (r == NULL)
		return;
	if (start < stream_end[stream - 7])
		start = stream_end[stream - 7];
	stream_end[stream - 7] = start + 2000;
	k = k == 4 ? 4 : k & 3;
	if (names[k] == NULL)
		names[k] = strdup(kname[k]);
	memset(r, 0, sizeof(*r));
	r->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	r->start = start;
	r->end = start + 2000;
	r->streamId = stream;
	r->correlationId = corr;
	r->gridX = r->gridY = r->gridZ = 1;
	r->blockX = 256; r->blockY = r->blockZ = 1;
	r->name = names[k];
	r->graphId = graph ? 1 : 0;
	r->graphNodeId = graph ? (uint64_t)k + 1 : 0;
	cur_off += ALIGN8(sizeof(*r));
	atomic_fetch_add(&n_records, 1);
}

/* Records of fake_cupti_record held back until a later flush: work the
 * GPU has not finished, counted in flushes rather than time, so a test
 * that uses them does not depend on the machine's pace. */
struct late { int kernel; uint32_t corr; int tid; uint32_t stream; uint64_t start, end;
              int flushes; };
static struct late lates[64];
static size_t n_late;

static int put_record(int kernel, uint32_t corr, int tid, uint32_t stream, uint64_t start,
                      uint64_t end);

/* Writes the held-back records whose flush has come. Lock held. */
static void release_lates(void)
{
	size_t i, k = 0;

	for (i = 0; i < n_late; i++) {
		struct late *l = &lates[i];

		if (--l->flushes <= 0)
			put_record(l->kernel, l->corr, l->tid, l->stream, l->start, l->end);
		else
			lates[k++] = *l;
	}
	n_late = k;
}

/*
 * One record of a sequence the caller builds: a cudaLaunchKernel runtime
 * record (kernel 0) on thread tid, or (kernel 1) a kernel record on
 * stream, each with correlation id corr and times [start, end]. Written
 * into the buffer being filled, handed back at the next flush; with late
 * > 0, written only at the late-th flush from now (a forced one too: the
 * GPU has not run it yet). 0, or -1 when the agent gave no buffer.
 */
int fake_cupti_record(int kernel, uint32_t corr, int tid, uint32_t stream, uint64_t start,
                      uint64_t end, int late);
int fake_cupti_record(int kernel, uint32_t corr, int tid, uint32_t stream, uint64_t start,
                      uint64_t end, int late)
{
	int r = -1;

	pthread_mutex_lock(&lock);
	if (late > 0 && n_late < sizeof(lates) / sizeof(lates[0])) {
		lates[n_late++] = (struct late){ kernel, corr, tid, stream, start, end, late };
		r = 0;
	} else if (late <= 0) {
		r = put_record(kernel, corr, tid, stream, start, end);
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* Lock held. */
static int put_record(int kernel, uint32_t corr, int tid, uint32_t stream, uint64_t start,
                      uint64_t end)
{
	int r = -1;

	if (!kernel) {
		CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)room(ALIGN8(sizeof(*a)));

		if (a != NULL) {
			memset(a, 0, sizeof(*a));
			a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
			a->cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
			a->start = start;
			a->end = end;
			a->processId = (uint32_t)getpid();
			a->threadId = (uint32_t)tid;
			a->correlationId = corr;
			cur_off += ALIGN8(sizeof(*a));
			r = 0;
		}
	} else {
		CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)room(ALIGN8(sizeof(*k)));

		if (k != NULL) {
			if (names[0] == NULL)
				names[0] = strdup("_Z5scalePff");
			memset(k, 0, sizeof(*k));
			k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
			k->start = start;
			k->end = end;
			k->streamId = stream;
			k->correlationId = corr;
			k->gridX = k->gridY = k->gridZ = 1;
			k->blockX = 256; k->blockY = k->blockZ = 1;
			k->name = names[0];
			cur_off += ALIGN8(sizeof(*k));
			r = 0;
		}
	}
	return r;
}

/* Sessions begun, finalizes done, records written by fake_cuda_call. */
void fake_cupti_stats(unsigned long *sessions, unsigned long *finalizes, unsigned long *records);
void fake_cupti_stats(unsigned long *sessions, unsigned long *finalizes, unsigned long *records)
{
	*sessions = atomic_load(&n_sessions);
	*finalizes = atomic_load(&n_finalizes);
	*records = atomic_load(&n_records);
}

/*
 * Emits n launches on thread tid from time t0 on, one every step_ns: per
 * launch a runtime API record and its GPU record (8 kernels to 1 copy and
 * 1 set). Returns the number of records.
 */
uint64_t fake_cupti_emit(uint64_t n, uint64_t t0, uint64_t step_ns, int tid);
uint64_t fake_cupti_emit(uint64_t n, uint64_t t0, uint64_t step_ns, int tid)
{
	uint8_t *buf = NULL;
	size_t size = 0, max = 0, off = 0;
	uint64_t i, recs = 0;
	static uint32_t corr = 1;

	for (i = 0; i < n; i++) {
		uint64_t t = t0 + i * step_ns;
		CUpti_ActivityAPI *a;
		int what = i % 10;

		if (buf == NULL || off + 2048 > size) {
			if (buf != NULL)
				done_cb(NULL, 0, buf, size, off);
			req_cb(&buf, &size, &max);
			off = 0;
			if (buf == NULL)
				return recs; /* the agent's byte limit: CUPTI would drop */
		}
		a = (CUpti_ActivityAPI *)(buf + off);
		memset(a, 0, sizeof(*a));
		a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
		a->cbid = what < 8 ? CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
		        : what == 8 ? CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020
		        : CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020;
		a->start = t;
		a->end = t + step_ns / 4;
		a->processId = 1;
		a->threadId = (uint32_t)tid;
		a->correlationId = corr;
		off += ALIGN8(sizeof(*a));
		if (what < 8) {
			CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(buf + off);

			memset(k, 0, sizeof(*k));
			k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
			k->start = t + step_ns / 2;
			k->end = t + step_ns / 2 + 1000 + what * 100;
			k->streamId = 7 + (what & 1);
			k->correlationId = corr;
			k->gridX = 1024; k->gridY = 1; k->gridZ = 1;
			k->blockX = 256; k->blockY = 1; k->blockZ = 1;
			k->registersPerThread = 32;
			k->name = what & 1 ? "ampere_sgemm_128x64_tn" : "vectorized_elementwise_kernel";
			off += ALIGN8(sizeof(*k));
		} else if (what == 8) {
			CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)(buf + off);

			memset(m, 0, sizeof(*m));
			m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
			m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
			m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
			m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
			m->bytes = 1 << 20;
			m->start = t + step_ns / 2;
			m->end = t + step_ns / 2 + 50000;
			m->streamId = 7;
			m->correlationId = corr;
			off += ALIGN8(sizeof(*m));
		} else {
			CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)(buf + off);

			memset(m, 0, sizeof(*m));
			m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
			m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
			m->bytes = 1 << 20;
			m->start = t + step_ns / 2;
			m->end = t + step_ns / 2 + 2000;
			m->streamId = 8;
			m->correlationId = corr;
			off += ALIGN8(sizeof(*m));
		}
		corr++;
		recs += 2;
	}
	if (buf != NULL)
		done_cb(NULL, 0, buf, size, off);
	return recs;
}
