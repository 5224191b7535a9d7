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
 * Floors: gpu.c is the top of the GPU parts and calls only downward: the
 * buffers and the harvest (gpu_buf.c, whose CUPTI calls it hands over at
 * load, and whose request/complete callbacks it registers), runtime calls
 * by our own callback (gpu_api.c, cheaper than CUPTI's RUNTIME kind: on_
 * callback forwards them), the end of a burst (gpu_tail.c, given the two
 * CUPTI controls it needs) and the header's metadata (gpu_meta.c).
 * capture.c calls gpu_start/gpu_stop/gpu_reset; gpu_events.c, above, turns
 * the harvest into the trace's events.
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

#include "gpu.h"
#include "gpu_api.h"
#include "gpu_buf.h"
#include "gpu_meta.h"
#include "gpu_tail.h"
#include "state.h"


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
static char left_out[256]; /* gpu_left_out: the kinds CUPTI refused this burst */
static size_t n_enabled;
static atomic_uint_fast64_t finalizes, reclaims; /* for the log and the tests */
static atomic_uint_fast64_t graph_keeps; /* releases that kept CUPTI for CUDA graphs */

static uint32_t cupti_version;
/* a thread stayed inside the API callback past gpu_api_disarm's wait, this
 * burst: release does not finalize (agent thread only) */
static bool thread_inside;

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
/*
 * CUDA graphs and the teardown. On an H200 (2026-11-28, CUDA 13.0, torch
 * 2.11) a torch.compile(mode="reduce-overhead") loop, whose steps replay
 * CUDA graphs, died with "unspecified launch failure" right after the
 * first burst, 3 runs of 3 (tests/gpu/graphs_check.py, run.sh's compile
 * section), and 1 of 1 with the finalize kept off graph launches' exits;
 * the same job with GPROF_CUPTI_RELEASE=unsubscribe lived through 3
 * bursts, as did the same loop without graphs under the teardown (PyTorch
 * had turned its own teardown off beside graphs for the same reason:
 * pytorch#112507). So once this process is seen using graphs while CUPTI
 * is up (a graph launched, captured, instantiated or uploaded, or a kernel
 * record of a graph's node), CUPTI is never finalized: it is given back by
 * unsubscribing, and the launch hooks stay (the lasting cost docs/AGENT.md
 * gives). The graph calls' callbacks are on for as long as the agent holds
 * CUPTI (graph_cbs_on), whatever the burst records, so a burst of copies
 * only, or the wait for the finalizing call, still sees them. Left open: a
 * thread that starts its first graph launch while another thread is
 * already inside cuptiFinalize (it read graphs_seen just before).
 * GPROF_CUPTI_GRAPHS=teardown finalizes anyway, never at a graph call's
 * own exit: an experiment, not safe.
 */
static atomic_bool graphs_seen, graphs_experiment;

static const CUpti_CallbackId graph_runtime_calls[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphUpload_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGraphUpload_ptsz_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030,
};
static const CUpti_CallbackId graph_driver_calls[] = {
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

static bool in_list(CUpti_CallbackId id, const CUpti_CallbackId *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] == id)
			return true;
	return false;
}

static bool graph_call(CUpti_CallbackDomain d, CUpti_CallbackId id)
{
	if (d == CUPTI_CB_DOMAIN_DRIVER_API)
		return in_list(id, graph_driver_calls,
		               sizeof(graph_driver_calls) / sizeof(graph_driver_calls[0]));
	return in_list(id, graph_runtime_calls,
	               sizeof(graph_runtime_calls) / sizeof(graph_runtime_calls[0]));
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
	const CUpti_CallbackData *cb = data;
	int releasing = CS_RELEASING;
	bool graph;

	(void)ud;
	if (cb == NULL || (d != CUPTI_CB_DOMAIN_RUNTIME_API && d != CUPTI_CB_DOMAIN_DRIVER_API))
		return;
	graph = graph_call(d, id);
	if (graph && !atomic_load_explicit(&graphs_seen, memory_order_relaxed))
		atomic_store(&graphs_seen, true);
	if (gpu_api_armed()) { /* a burst records this call (gpu_api.c) */
		gpu_api_record(d, id, cb, api_now);
		return;
	}
	/* finalize only from a runtime call's exit: never a driver launch's */
	if (d != CUPTI_CB_DOMAIN_RUNTIME_API || cb->callbackSite != CUPTI_API_EXIT)
		return;
	/* never on the agent thread: it makes no CUDA call, but if it ever
	 * did, finalizing there would race its own harvest */
	if ((int)syscall(SYS_gettid) == A.agent_tid)
		return;
	/* the experiment finalizes beside graphs, but never inside a launch */
	if (graph && atomic_load(&graphs_experiment))
		return;
	if (atomic_compare_exchange_strong(&cs, &releasing, CS_FINALIZING)) {
		/* the subscriber leaves first, then CUPTI goes: the order
		 * Kineto's teardown uses (CUDA 12.6 and newer); with CUDA
		 * graphs seen since the release began, it leaves alone */
		p_cuptiUnsubscribe(sub);
		if (!atomic_load(&graphs_seen) || atomic_load(&graphs_experiment)) {
			p_cuptiFinalize();
			atomic_fetch_add(&finalizes, 1);
		} else {
			atomic_fetch_add(&graph_keeps, 1);
		}
		atomic_store(&cs, CS_FREE);
	}
}

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
	uint64_t api_records;
	bool cuda_threads = gpu_buf_api_threads(&api_records);

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
	gpu_buf_init(&(struct gpu_buf_cupti){ p_cuptiActivityGetNextRecord,
	                                      p_cuptiActivityGetNumDroppedRecords,
	                                      p_cuptiGetCallbackName });
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

/* The request's activity a CUPTI kind records (as PROTOCOL.md names it). */
static const char *activity_of(CUpti_ActivityKind k)
{
	switch (k) {
	case CUPTI_ACTIVITY_KIND_RUNTIME: return "cuda_runtime";
	case CUPTI_ACTIVITY_KIND_DRIVER: return "cuda_driver";
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "kernel";
	case CUPTI_ACTIVITY_KIND_MEMCPY: return "memcpy";
	case CUPTI_ACTIVITY_KIND_MEMCPY2: return "memcpy (peer to peer)";
	case CUPTI_ACTIVITY_KIND_MEMSET: return "memset";
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "sync";
	case CUPTI_ACTIVITY_KIND_OVERHEAD: return "overhead";
	case CUPTI_ACTIVITY_KIND_MEMORY2: return "memory";
	default: return "an activity";
	}
}

/* Names a kind CUPTI would not turn on in left_out (gpu_left_out). */
static void note_refused(CUpti_ActivityKind k, CUptiResult r)
{
	size_t len = strlen(left_out);

	if (len + 3 < sizeof(left_out))
		snprintf(left_out + len, sizeof(left_out) - len, "%s%s left out: CUPTI refused it (%s)",
		         len ? "; " : "", activity_of(k), cupti_err(r));
}

void gpu_left_out(char *buf, size_t n)
{
	snprintf(buf, n, "%s", left_out);
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

/*
 * Launches made through the driver API (gpu_api_driver_launches: NCCL's
 * cuLaunchKernelEx, cuBLAS's and Triton's): without them their kernels have
 * no launch, and HTA, which keeps only GPU work launched in a ProfilerStep,
 * drops them (issue 27). Recorded by default (a few per step), but not when
 * the request asks for every driver call (the DRIVER kind has them), nor
 * with GPROF_CUPTI_DRIVER_LAUNCH=off.
 */
static bool driver_kind_asked;

static void driver_launches_on(void)
{
	const char *v = getenv("GPROF_CUPTI_DRIVER_LAUNCH");
	size_t i;

	if (driver_kind_asked || (v != NULL && strcmp(v, "off") == 0))
		return;
	for (i = 0; i < gpu_api_n_driver_launches; i++)
		if (p_cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
		                          gpu_api_driver_launches[i]) != CUPTI_SUCCESS)
			agent_log("driver-API launch callback %u not enabled: its launches go "
			          "unrecorded", (unsigned)gpu_api_driver_launches[i]);
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
	if (r != CUPTI_SUCCESS) {
		(void)gpu_api_disarm();
		return r;
	}
	driver_launches_on();
	return r;
}

/* The graph calls' callbacks, on from the moment CUPTI is held until it is
 * given back (the subscriber's leaving takes them): see graphs_seen. */
static void graph_cbs_on(void)
{
	size_t i;

	for (i = 0; i < sizeof(graph_runtime_calls) / sizeof(graph_runtime_calls[0]); i++)
		p_cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, graph_runtime_calls[i]);
	for (i = 0; i < sizeof(graph_driver_calls) / sizeof(graph_driver_calls[0]); i++)
		p_cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, graph_driver_calls[i]);
}

/* Said once, on the agent thread (at a burst's start or end), whichever
 * thread kept CUPTI for graphs. */
static void say_graphs(void)
{
	static bool said;

	if (said || !atomic_load(&graphs_seen) || atomic_load(&graphs_experiment))
		return;
	said = true;
	agent_log("CUDA graphs in this process: CUPTI is given back by unsubscribing, never "
	          "finalized (a teardown after graph replays killed a PyTorch job, H200 "
	          "2026-11-28); CUDA calls keep CUPTI's hooks until the process exits");
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
	say_graphs();
	graph_cbs_on();
	gpu_buf_limit(limit);
	/* Activity callbacks are per process and replaced by whoever registers
	 * last (torch.profiler after us): register them for every burst. */
	p_cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
	buffer_knobs();
	r = p_cuptiActivityRegisterCallbacks(gpu_buf_request, gpu_buf_complete);
	if (r != CUPTI_SUCCESS) {
		unsubscribe();
		snprintf(why, n, "cuptiActivityRegisterCallbacks failed: %s", cupti_err(r));
		return -EIO;
	}
	/* Count only what this burst drops, and only its buffers. */
	p_cuptiActivityFlushAll(0);
	gpu_reset();
	gpu_buf_begin();
	k = kinds_for(activities, &nk);
	driver_kind_asked = (activities & MSG_ACT_DRIVER) != 0;
	n_enabled = 0;
	left_out[0] = '\0';
	for (i = 0; i < nk; i++) {
		r = k[i] == CUPTI_ACTIVITY_KIND_RUNTIME ? runtime_on() : p_cuptiActivityEnable(k[i]);
		if (r == CUPTI_SUCCESS) {
			enabled_kinds[n_enabled++] = k[i];
			continue;
		}
		agent_log("cuptiActivityEnable(%d): %s", (int)k[i], cupti_err(r));
		note_refused(k[i], r);
	}
	if (n_enabled == 0) {
		unsubscribe();
		snprintf(why, n, "CUPTI enabled no activity kind (see GPROF_AGENT_LOG)");
		return -EIO;
	}
	atomic_store(&cs, CS_TRACING);
	return 0;
}
/* For gpu_tail.c (gpu_tail_ctl), on the agent thread while CUPTI is held. */
static void kind_off(int64_t kind)
{
	if (kind == CUPTI_ACTIVITY_KIND_RUNTIME && gpu_api_armed()) {
		p_cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API);
		p_cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		if (!gpu_api_disarm())
			thread_inside = true;
		graph_cbs_on(); /* still held: graphs must not go unseen */
		return;
	}
	p_cuptiActivityDisable((CUpti_ActivityKind)kind);
}

static void flush_complete(void)
{
	p_cuptiActivityFlushAll(0);
}


/* HELD -> RELEASING (finalize) or FREE (unsubscribe) */
static void release(void)
{
	const char *exp = getenv("GPROF_CUPTI_GRAPHS"); /* read here, on the agent thread */

	atomic_store(&graphs_experiment, exp != NULL && strcmp(exp, "teardown") == 0);
	if (gpu_buf_graph_kernels() && !atomic_load(&graphs_seen))
		atomic_store(&graphs_seen, true);
	if (atomic_load(&graphs_seen) && release_by_finalize() && !atomic_load(&graphs_experiment)) {
		atomic_fetch_add(&graph_keeps, 1);
		unsubscribe();
		return;
	}
	if (!release_by_finalize()) {
		unsubscribe();
		return;
	}
	if (thread_inside) {
		/* a thread is still inside our callback (gpu_api_disarm waited
		 * 1 s): finalizing could run under its CUPTI call */
		thread_inside = false;
		agent_log("CUPTI given back by unsubscribing, not finalized: a thread was still "
		          "inside the agent's callback");
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
	gpu_tail_drain(&(struct gpu_tail_ctl){ kind_off, flush_complete }, enabled_kinds, n_enabled);
	n_enabled = 0;
	p_cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	atomic_store(&cs, CS_HELD);
	gpu_buf_harvest();
	/* read once, while nothing of ours can finalize under them */
	gpu_meta_probe();
	if (gpu_api_lost() > 0)
		agent_log("%llu API records left out: the burst reached its byte limit",
		          (unsigned long long)gpu_api_lost());
	release();
	say_graphs();
	agent_log("CUPTI %s after the burst (%llu finalized, %llu reclaimed, %llu kept for CUDA "
	          "graphs so far)", cs_names[atomic_load(&cs)],
	          (unsigned long long)atomic_load(&finalizes),
	          (unsigned long long)atomic_load(&reclaims),
	          (unsigned long long)atomic_load(&graph_keeps));
}

void gpu_shed(void)
{
	if (atomic_load(&cs) == CS_TRACING)
		gpu_buf_shed();
}

uint64_t gpu_dropped(void)
{
	/* with our own API records lost past the byte limit */
	return gpu_buf_dropped() + gpu_api_lost();
}

bool gpu_cut(void)
{
	return gpu_buf_cut();
}

void gpu_reset(void)
{
	gpu_buf_reset();
}

void gpu_atfork_child(void)
{
	forked = true; /* never flush or finalize CUPTI in a child */
	gpu_api_atfork_child();
	gpu_buf_atfork_child();
}

bool gpu_loaded(void)
{
	return atomic_load(&cs) != CS_UNLOADED && gpu_meta_probed();
}
