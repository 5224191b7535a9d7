/*
 * gpu_api.c: CUDA runtime calls recorded by the agent's own CUPTI callback
 * instead of CUPTI's RUNTIME activity kind: the default since a CUDA C
 * loop on an H100 showed the record costing the launching thread about
 * half as much this way (bench/cupti_cost.cu, docs/BENCHMARKS.md). CUPTI
 * hands the callback the same correlation id it gives the kernel, copy or
 * set the call launches, so the trace's flows are unchanged.
 *
 * Data flow: gpu.c enables the callback call by call (the quiet queries
 * never get one, so they cost nothing) and forwards each runtime-API
 * callback here (gpu_api_record, on the application's thread), and the
 * driver API's launch calls (cuLaunchKernelEx: NCCL, Triton) made outside
 * any runtime call, so every kernel has its launch. The entry
 * leaves its timestamp in CUPTI's per-call slot (correlationData); the
 * exit writes a CUpti_ActivityAPI record, shaped as CUPTI's, into the
 * calling thread's chunk (once the window is open: before it, only the
 * call's correlation id is noted, gpu_buf_note_pre). A full chunk, and at the burst's end every
 * chunk, is handed to gpu_buf.c as a finished buffer (gpu_buf_add_own),
 * beside CUPTI's, so the tail, the harvest and the writer read both alike.
 * It calls only downward: gpu_buf.c (the byte limit, the buffer list).
 *
 * Ownership: a chunk belongs to the thread writing it until it is handed
 * over (full, or sealed by gpu_api_disarm once no thread is inside the
 * callback); from then on to gpu_buf.c's list of finished buffers, which
 * frees it at gpu_buf_reset. A thread notices a new burst by its generation and
 * drops its old pointer without touching it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "gpu_api.h"
#include "gpu_buf.h"
#include "state.h"

#define CHUNK_SIZE (64u << 10) /* 1,638 records; a stress burst fills several */
#define API_REC GPU_BUF_OWN_REC /* the stride gpu_buf.c walks own records by */

struct chunk {
	struct chunk *next; /* the burst's chunks not handed over yet */
	unsigned gen;       /* the burst it was made for */
	size_t used;
	uint8_t data[CHUNK_SIZE];
};

static atomic_bool on;          /* record runtime calls */
static atomic_int writers;      /* threads inside gpu_api_record now (past the depth count) */
static atomic_uint gen;         /* bumped per burst: threads drop their chunk */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chunk *open_chunks; /* being written, not handed over */
static atomic_uint_fast64_t n_lost; /* records past the byte limit or memory */
static atomic_bool after_end;   /* a call recorded that began after the window's end */

static _Thread_local struct chunk *my_chunk;
static _Thread_local unsigned my_gen;
static _Thread_local uint32_t my_tid;
static _Thread_local unsigned my_depth, my_depth_gen; /* runtime calls entered */

const CUpti_CallbackId gpu_api_driver_launches[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunch,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};
const size_t gpu_api_n_driver_launches =
	sizeof(gpu_api_driver_launches) / sizeof(gpu_api_driver_launches[0]);

void gpu_api_arm(void)
{
	atomic_fetch_add(&gen, 1);
	atomic_store(&n_lost, 0);
	atomic_store(&after_end, false);
	atomic_store(&on, true);
}

bool gpu_api_armed(void)
{
	return atomic_load(&on);
}

/* Hands every chunk of this burst still open to gpu_buf.c (no thread writes
 * any more); frees an earlier burst's left open by a thread that stayed
 * inside the callback then. */
static void seal(void)
{
	struct chunk *c, *next;
	unsigned g = atomic_load(&gen);

	pthread_mutex_lock(&open_lock);
	c = open_chunks;
	open_chunks = NULL;
	pthread_mutex_unlock(&open_lock);
	for (; c != NULL; c = next) {
		next = c->next;
		if (c->used > 0 && c->gen == g) {
			gpu_buf_add_own(c, c->data, c->used, sizeof(*c));
		} else {
			if (c->gen == g)
				gpu_buf_uncharge(sizeof(*c));
			free(c);
		}
	}
}

bool gpu_api_disarm(void)
{
	struct timespec tick = { 0, 20 * 1000 };
	int i;

	atomic_store(&on, false);
	/* A thread that entered before `on` went false finishes its record
	 * (a store of some 100 bytes); one that enters later sees it false.
	 * The wait is bounded: a thread descheduled inside for longer leaves
	 * its chunk open, and it is freed, not read, at the next seal. */
	for (i = 0; i < 50000 && atomic_load(&writers) > 0; i++)
		nanosleep(&tick, NULL);
	if (atomic_load(&writers) > 0) {
		agent_log("a thread stayed inside the API callback for 1 s: the burst's API records "
		          "not handed over yet are left out");
		atomic_fetch_add(&gen, 1); /* its chunk is freed at the next seal */
		return false;
	}
	seal();
	return true;
}

bool gpu_api_after_end(void)
{
	return atomic_load(&after_end);
}

uint64_t gpu_api_lost(void)
{
	return atomic_load(&n_lost);
}

/* A fresh chunk for this thread, charged to the burst's byte limit. */
static struct chunk *new_chunk(void)
{
	struct chunk *c;

	if (!gpu_buf_charge(sizeof(*c)))
		return NULL;
	if ((c = malloc(sizeof(*c))) == NULL) {
		gpu_buf_uncharge(sizeof(*c));
		return NULL;
	}
	c->used = 0;
	c->gen = atomic_load(&gen);
	pthread_mutex_lock(&open_lock);
	c->next = open_chunks;
	open_chunks = c;
	pthread_mutex_unlock(&open_lock);
	my_chunk = c;
	my_gen = c->gen;
	return c;
}

/* Moves a full chunk from the open list to gpu_buf.c's finished buffers. */
static void hand_over(struct chunk *c)
{
	struct chunk **p;

	my_chunk = NULL;
	pthread_mutex_lock(&open_lock);
	/* an earlier burst's (this thread was held inside past its end):
	 * left open, freed at the next seal */
	if (c->gen != atomic_load(&gen)) {
		pthread_mutex_unlock(&open_lock);
		return;
	}
	for (p = &open_chunks; *p != NULL && *p != c; p = &(*p)->next)
		;
	if (*p == c)
		*p = c->next;
	pthread_mutex_unlock(&open_lock);
	gpu_buf_add_own(c, c->data, c->used, sizeof(*c));
}

void gpu_api_record(CUpti_CallbackDomain d, CUpti_CallbackId id, const CUpti_CallbackData *cb,
                    uint64_t (*clock)(void))
{
	bool driver = d == CUPTI_CB_DOMAIN_DRIVER_API;
	bool enter = cb->callbackSite == CUPTI_API_ENTER;
	uint64_t now;
	unsigned g = atomic_load_explicit(&gen, memory_order_relaxed);
	struct chunk *c;
	CUpti_ActivityAPI *a;
	uint64_t te;

	/* runtime calls this thread is inside, this burst: a driver launch
	 * inside one is the runtime's own doing, and the runtime call is
	 * the launch its GPU work names */
	if (my_depth_gen != g) {
		my_depth_gen = g;
		my_depth = 0;
	}
	if (driver && my_depth > 0)
		return;
	if (enter)
		my_depth += !driver;
	else if (!driver && my_depth > 0)
		my_depth--;
	atomic_fetch_add(&writers, 1);
	/* After `writers`: gpu_api_disarm clears `on` before it reads them,
	 * and CUPTI is given back (finalized, perhaps from another thread's
	 * callback) only once they are 0. So CUPTI's clock is read only
	 * here, past that check: read before it (as an argument, until
	 * 2026-11-29), it could run inside another thread's cuptiFinalize,
	 * which the stand-in caught in CI. */
	if (!atomic_load(&on))
		goto out;
	now = clock();
	if (enter) {
		*cb->correlationData = now;
		goto out;
	}
	/* A call entered before the callback was on has no entry time (the
	 * slot is 0, or not ours): not recorded. */
	if (*cb->correlationData == 0 || *cb->correlationData > now)
		goto out;
	/* The window not open yet (CUPTI is on ahead of an iteration boundary
	 * or a start time): the call ended before it, and is not the trace's.
	 * Only its id is kept, the bound on what was launched before the
	 * window (gpu_buf.c): no record to write, and none to shed. */
	if (atomic_load_explicit(&A.t_start, memory_order_acquire) == 0) {
		gpu_buf_note_pre(cb->correlationId);
		goto out;
	}
	c = my_chunk;
	if (c != NULL && my_gen != atomic_load(&gen))
		c = NULL; /* an earlier burst's: gpu_buf.c owns or freed it */
	if (c != NULL && c->used + API_REC > CHUNK_SIZE) {
		hand_over(c);
		c = NULL;
	}
	if (c == NULL && (c = new_chunk()) == NULL) {
		atomic_fetch_add(&n_lost, 1);
		goto out;
	}
	if (my_tid == 0)
		my_tid = (uint32_t)syscall(SYS_gettid);
	a = (CUpti_ActivityAPI *)(c->data + c->used);
	memset(a, 0, sizeof(*a));
	a->kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
	a->cbid = id;
	a->start = *cb->correlationData;
	a->end = now > a->start ? now : a->start + 1;
	a->processId = (uint32_t)A.pid;
	a->threadId = my_tid;
	a->correlationId = cb->correlationId;
	a->returnValue = cb->functionReturnValue ? *(const uint32_t *)cb->functionReturnValue : 0;
	c->used += API_REC;
	te = atomic_load_explicit(&A.t_end, memory_order_relaxed);
	if (te != 0 && a->start > te && !atomic_load_explicit(&after_end, memory_order_relaxed))
		atomic_store(&after_end, true);
out:
	atomic_fetch_sub(&writers, 1);
}

void gpu_api_atfork_child(void)
{
	my_chunk = NULL;
	my_tid = 0;
	open_chunks = NULL;
	atomic_store(&on, false);
	atomic_store(&writers, 0);
}
