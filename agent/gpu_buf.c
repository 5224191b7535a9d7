/*
 * gpu_buf.c: the burst's activity buffers and what is copied out of them,
 * the floor of the GPU parts that knows CUPTI's buffers but not its life
 * cycle (gpu.c) or the trace (gpu_events.c).
 *
 * Buffers: CUPTI asks for them on application threads (gpu_buf_request:
 * from a pool pre-faulted on the agent thread before the window, then
 * calloc, bounded by the burst's byte limit; past it CUPTI drops records
 * and counts them) and returns them from its own threads
 * (gpu_buf_complete: appended to `done` under buf_lock). Runtime calls
 * recorded by the agent's own callback (gpu_api.c) join `done` the same
 * way (gpu_buf_add_own), marked `own`, and are walked like CUPTI's.
 * Buffers that arrive after the harvest (finalize's own flush: empty, the
 * kinds being off) are freed unread at gpu_buf_reset.
 *
 * Before the window opens (an iteration burst armed until its boundary, a
 * start time not reached) CUPTI is already on, so that its costly first
 * enable stays out of the captured steps, and what it records then is not
 * the window's. The agent thread sheds it (gpu_buf_shed, capture.c calls
 * it while the window is not open): every buffer that came back while the
 * window was still closed holds only records completed before it opened,
 * and is freed at once, its bytes given back to the burst's budget; only
 * the highest correlation id of its API calls is kept (gpu_buf_pre_corr),
 * the bound gpu_events.c needs for work launched before the window.
 * Without it a burst armed for long (a far start step, a slow step) filled
 * its budget before the window opened, and the window's own GPU records
 * were dropped: a stand-in stress run under load delivered a trace of 618
 * launches and no kernel (CI, 2026-11-29).
 *
 * The harvest (gpu_buf_harvest, gpu.c calls it while CUPTI is still held)
 * indexes every record, copies kernel names into the agent's own arena
 * (rewriting the record's pointer, the buffer being ours), clears the
 * pointers it does not copy and caches the callback names: from then on
 * the tail (gpu_tail.c) and the writer (gpu_events.c) read only the
 * agent's memory.
 *
 * Called by gpu.c (life cycle), gpu_api.c (own records), gpu_tail.c and
 * gpu_events.c (the records); the three CUPTI calls it makes are given by
 * gpu.c when it loads libcupti (gpu_buf_init), so it calls nothing above.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "gpu_buf.h"
#include "state.h"

static struct gpu_buf_cupti cupti; /* gpu_buf_init */

#define BUF_SIZE (4u << 20)

/* A finished buffer: CUPTI's (owner == buf), or a chunk of the agent's
 * own API records (gpu_api.c; own, owner the chunk). */
struct done_buf { uint8_t *buf; size_t valid; void *owner; size_t charged; bool own; };
static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct done_buf *done;
static size_t n_done, cap_done;
static atomic_uint_fast64_t buf_bytes, n_dropped;
static atomic_uint_fast64_t handed, returned; /* buffers given to CUPTI, given back: this burst */
/* when a charge last failed (agent_now_ns; 0: none this burst): the burst
 * is cut only if that was after its window opened */
static atomic_uint_fast64_t cut_ns;
/* shed before the window opened: the highest API correlation id, and what
 * was freed (gpu_buf_shed) */
static atomic_uint_fast32_t pre_corr;
static uint64_t shed_bufs, shed_recs, shed_dropped;
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

/* Buffers made ready (allocated, zeroed and touched) on the agent thread
 * before the window opens, so CUPTI's requests during the capture take no
 * page faults on application threads; freed with the rest at gpu_buf_reset,
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

void CUPTIAPI gpu_buf_request(uint8_t **buffer, size_t *size, size_t *max_records)
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
	if (!gpu_buf_charge(BUF_SIZE))
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

void CUPTIAPI gpu_buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                               size_t valid)
{
	size_t dropped = 0;

	(void)size;
	if (cupti.num_dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
		atomic_fetch_add(&n_dropped, dropped);
	if (buffer == NULL)
		return;
	atomic_fetch_add(&returned, 1);
	add_done((struct done_buf){ buffer, valid, buffer, BUF_SIZE, false });
}

/* Walks a chunk of own records (gpu_api.c: GPU_BUF_OWN_REC apart) as
 * cuptiActivityGetNextRecord walks a buffer. */
static bool own_next(const uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	const uint8_t *next = *rec == NULL ? buf : (const uint8_t *)*rec + GPU_BUF_OWN_REC;

	if (next + GPU_BUF_OWN_REC > buf + valid)
		return false;
	*rec = (CUpti_Activity *)next;
	return true;
}

/* The next record of a finished buffer, CUPTI's or ours. */
static bool next_record(const struct done_buf *d, CUpti_Activity **rec)
{
	if (d->own)
		return own_next(d->buf, d->valid, rec);
	return cupti.next_record(d->buf, d->valid, rec) == CUPTI_SUCCESS;
}

bool gpu_buf_charge(size_t bytes)
{
	if (atomic_fetch_add(&buf_bytes, bytes) + bytes > max_bytes) {
		uint64_t now = agent_now_ns(), was = atomic_load(&cut_ns);

		atomic_fetch_sub(&buf_bytes, bytes);
		while (was < now && !atomic_compare_exchange_weak(&cut_ns, &was, now))
			;
		return false;
	}
	return true;
}

void gpu_buf_uncharge(size_t bytes)
{
	atomic_fetch_sub(&buf_bytes, bytes);
}

void gpu_buf_add_own(void *owner, uint8_t *buf, size_t valid, size_t charged)
{
	add_done((struct done_buf){ buf, valid, owner, charged, true });
}

void gpu_buf_note_pre(uint32_t corr)
{
	uint_fast32_t was = atomic_load_explicit(&pre_corr, memory_order_relaxed);

	while (was < corr && !atomic_compare_exchange_weak(&pre_corr, &was, corr))
		;
}

uint32_t gpu_buf_pre_corr(void)
{
	return (uint32_t)atomic_load(&pre_corr);
}

size_t gpu_buf_shed(void)
{
	struct done_buf *list;
	size_t i, n;
	uint64_t dropped;

	pthread_mutex_lock(&buf_lock);
	/* read under the lock, after every buffer now listed was added: if
	 * the window is not open now, it was not when they came back */
	if (n_done == 0 || atomic_load(&A.t_start) != 0) {
		pthread_mutex_unlock(&buf_lock);
		return 0;
	}
	list = done;
	n = n_done;
	done = NULL;
	n_done = cap_done = 0;
	/* CUPTI counts the records it dropped as a buffer comes back: these
	 * were dropped before the window too */
	dropped = atomic_exchange(&n_dropped, 0);
	pthread_mutex_unlock(&buf_lock);
	/* ours now: read and freed without the lock (application threads
	 * take it to hand over their records) */
	for (i = 0; i < n; i++) {
		CUpti_Activity *rec = NULL;

		while (next_record(&list[i], &rec)) {
			shed_recs++;
			if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
			    rec->kind == CUPTI_ACTIVITY_KIND_DRIVER)
				gpu_buf_note_pre(((CUpti_ActivityAPI *)rec)->correlationId);
		}
		free(list[i].owner);
		gpu_buf_uncharge(list[i].charged);
	}
	free(list);
	shed_bufs += n;
	shed_dropped += dropped;
	/* the next buffers CUPTI asks for during the window come ready */
	pool_fill();
	return n;
}

void gpu_buf_shed_stats(uint64_t *bufs, uint64_t *nrecs, uint64_t *dropped)
{
	*bufs = shed_bufs;
	*nrecs = shed_recs;
	*dropped = shed_dropped;
}


/* Threads seen calling CUDA in the bursts' API records: the first, whether
 * another ever did (then finalizing could race it), and how many API
 * records were seen in all. */
static uint32_t cuda_tid;
static bool cuda_threads;
static bool graph_kernels; /* a kernel record of a CUDA graph's node, ever */
static uint64_t api_records;

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
	if (cupti.callback_name(d ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
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
				if (k->graphId != 0)
					graph_kernels = true;
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
					agent_log("threads %u and %u call CUDA: under "
					          "GPROF_CUPTI_RELEASE=finalize CUPTI is given back by "
					          "unsubscribing, never finalized (the default teardown "
					          "finalizes from a runtime call's exit, safe beside them, "
					          "except with CUDA graphs)",
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


void gpu_buf_init(const struct gpu_buf_cupti *c)
{
	cupti = *c;
}

void gpu_buf_limit(uint64_t limit)
{
	max_bytes = limit;
	atomic_store(&buf_bytes, 0);
	atomic_store(&cut_ns, 0);
	atomic_store(&pre_corr, 0);
	shed_bufs = shed_recs = shed_dropped = 0;
	incomplete = 0;
}

void gpu_buf_begin(void)
{
	atomic_store(&n_dropped, 0);
	atomic_store(&handed, 0);
	atomic_store(&returned, 0);
	pool_fill();
}

void gpu_buf_harvest(void)
{
	pthread_mutex_lock(&buf_lock);
	harvest();
	pthread_mutex_unlock(&buf_lock);
}

bool gpu_buf_graph_kernels(void)
{
	return graph_kernels;
}

bool gpu_buf_api_threads(uint64_t *records)
{
	*records = api_records;
	return cuda_threads;
}

uint64_t gpu_buf_dropped(void)
{
	return atomic_load(&n_dropped) + incomplete;
}

bool gpu_buf_cut(void)
{
	uint64_t c = atomic_load(&cut_ns);

	/* a window that never opened (cancelled while armed) counts whole */
	return c != 0 && c >= atomic_load(&A.t_start);
}

void gpu_buf_reset(void)
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

void gpu_buf_atfork_child(void)
{
	n_done = 0;
	done = NULL;
	cap_done = 0;
	n_recs = 0;
	recs = NULL;
	cap_recs = 0;
}

int64_t gpu_buf_out(void)
{
	return (int64_t)atomic_load(&handed) - (int64_t)atomic_load(&returned);
}

size_t gpu_buf_each_new(size_t *scanned, gpu_rec_fn fn, void *ud)
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

void gpu_buf_lock(void)
{
	pthread_mutex_lock(&buf_lock);
}

void gpu_buf_unlock(void)
{
	pthread_mutex_unlock(&buf_lock);
}

size_t gpu_buf_each(struct tw *w, gpu_rec_fn fn, void *ud)
{
	size_t i;

	for (i = 0; i < n_recs; i++)
		fn(w, recs[i], ud);
	return n_done;
}

const char *gpu_buf_api_name(CUpti_ActivityKind kind, uint32_t cbid, size_t *len)
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

void gpu_buf_incomplete(void)
{
	incomplete++;
}
