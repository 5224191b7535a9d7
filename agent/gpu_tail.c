/*
 * gpu_tail.c: the end of a burst, while the GPU still runs the window's
 * work (see below). gpu.c calls gpu_tail_drain from gpu_stop, CUPTI held,
 * and hands it the two CUPTI controls it needs (turning a kind off, a
 * flush of complete buffers: gpu_tail_ctl); the records of buffers that
 * came back and the count of buffers CUPTI still holds are gpu_buf.c's,
 * whether a call after the window was seen gpu_api.c's. It calls nothing
 * above it. Everything here lives for one call: the sets it builds are
 * freed before it returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "gpu_api.h"
#include "gpu_buf.h"
#include "gpu_tail.h"
#include "state.h"

/*
 * The tail: a rank that waits on a collective, or any loop whose CPU runs
 * ahead of its GPU, ends the window with work still queued, and that work
 * belongs to the trace. Its records are written as it completes, after
 * the kinds are off: CUPTI keeps a buffer holding a record not yet
 * complete (its API records too), or writes them into buffers it has not
 * even asked for yet; a forced flush gives up on them (seen on H200s: the
 * waiting rank of a DDP job kept 13 of its 335 kernels; on one GPU 118 of
 * 120, or 2 records left incomplete).
 * torch.profiler synchronises the device at its end; the agent may not
 * stall the application, so its own thread waits instead: the kinds go
 * off at the window's end (nothing new is recorded), then it flushes
 * without forcing (complete buffers only) and reads what came, until CUPTI
 * holds no buffer of the burst and every launch recorded in the window (a
 * runtime or driver call that puts a kernel, copy or set on the GPU, by
 * name: ids differ between CUDA versions) has its complete GPU record. It
 * gives up after GPROF_GPU_TAIL_MS (default 2000), or after 300 ms with
 * nothing new and no buffer outstanding (a launch that makes no record); a
 * burst without API records ends when nothing came for 20 ms. Where CUPTI
 * numbered no launch (most launches share an id, gpu_ids_broken), an id
 * proves nothing: the burst ends when there are as many GPU records as
 * launches, both counted as the writer keeps them then (launches made in
 * the window, GPU work started from its start on: work of the previous
 * burst's that completes in this one's buffers, or launched before the
 * window, must not stand in for the window's own; issue 29), or after
 * 100 ms without a new one. Then it forces out the rest.
 */
/* A set of correlation ids: open addressing, at most half full. */
struct idset { uint32_t *v; size_t mask, n; };

struct tail {
	uint32_t *want;      /* correlation ids of launches awaiting GPU records */
	const char **what;   /* their API names, for the log */
	size_t nwant, capwant;
	struct idset have;   /* GPU records' correlation ids */
	struct idset seen;   /* launches' correlation ids: repeats mean CUPTI numbered nothing */
	size_t nlaunch, repeats, ngpu; /* launches, repeated ids, complete GPU records */
	/* what the writer keeps by time where CUPTI numbered nothing
	 * (gpu_events.c): launches made in the window, GPU records that
	 * started from its start on */
	size_t nlaunch_win, ngpu_win;
	bool kernels, copies, sets; /* GPU kinds of the burst */
	bool after_end;      /* an API call recorded that began after the window */
	uint64_t t_start;    /* the window's start (0: not known) */
	uint64_t t_end;      /* the window's end: later launches are not waited for */
};

static bool idset_has(const struct idset *s, uint32_t id)
{
	size_t i;

	if (s->v == NULL)
		return false;
	for (i = (id * 2654435761u) & s->mask; s->v[i]; i = (i + 1) & s->mask)
		if (s->v[i] == id)
			return true;
	return false;
}

static bool idset_add(struct idset *s, uint32_t id);

/* Doubles the set (4096 slots at first), keeping it at most half full. */
static void idset_grow(struct idset *s)
{
	struct idset old = *s;
	size_t k;

	s->mask = s->mask ? s->mask * 2 + 1 : 4095;
	s->v = calloc(s->mask + 1, sizeof(*s->v));
	if (s->v == NULL) {
		*s = old;
		return;
	}
	s->n = 0;
	for (k = 0; old.v != NULL && k <= old.mask; k++)
		if (old.v[k])
			idset_add(s, old.v[k]);
	free(old.v);
}

/* Adds id; false when it was there already (or out of memory: the wait
 * then ends by its time limits). */
static bool idset_add(struct idset *s, uint32_t id)
{
	size_t i;

	if (id == 0)
		return true;
	if ((s->n + 1) * 2 > s->mask + 1)
		idset_grow(s);
	if (s->v == NULL || (s->n + 1) * 2 > s->mask + 1)
		return false;
	for (i = (id * 2654435761u) & s->mask; s->v[i]; i = (i + 1) & s->mask)
		if (s->v[i] == id)
			return false;
	s->v[i] = id;
	s->n++;
	return true;
}

/* Does this API call put work on the GPU that a kind of the burst records?
 * Its name (without the _vNNNN), when it does; else NULL. */
static const char *launches(const struct tail *t, CUpti_ActivityKind kind, uint32_t cbid)
{
	size_t len;
	const char *name = gpu_buf_api_name(kind, cbid, &len), *n = name;

	n += strncmp(n, "cuda", 4) == 0 ? 4 : strncmp(n, "cu", 2) == 0 ? 2 : 0;
	return (t->kernels && (strncmp(n, "Launch", 6) == 0 || strncmp(n, "GraphLaunch", 11) == 0)) ||
	       (t->copies && strncmp(n, "Memcpy", 6) == 0) ||
	       (t->sets && strncmp(n, "Memset", 6) == 0) ? name : NULL;
}

static void want_add(struct tail *t, uint32_t id, const char *what)
{
	if (t->nwant == t->capwant) {
		size_t cap = t->capwant ? t->capwant * 2 : 1024;
		uint32_t *v = realloc(t->want, cap * sizeof(*v));
		const char **w;

		if (v == NULL)
			return;
		t->want = v;
		w = realloc(t->what, cap * sizeof(*w));
		if (w == NULL)
			return;
		t->what = w;
		t->capwant = cap;
	}
	t->what[t->nwant] = what;
	t->want[t->nwant++] = id;
}

static void gpu_have(struct tail *t, uint32_t id, uint64_t start)
{
	t->ngpu++;
	t->ngpu_win += start >= t->t_start;
	idset_add(&t->have, id);
}

/* One record of the burst (gpu_buf_each_new). */
static void tail_record(struct tw *w, CUpti_Activity *rec, void *ud)
{
	struct tail *t = ud;

	(void)w;
	switch (rec->kind) {
	/* only complete records count */
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL: {
		CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)rec;

		if (k->start != 0 && k->end >= k->start)
			gpu_have(t, k->correlationId, k->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)rec;

		if (m->start != 0 && m->end >= m->start)
			gpu_have(t, m->correlationId, m->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)rec;

		if (m->start != 0 && m->end >= m->start)
			gpu_have(t, m->correlationId, m->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)rec;
		const char *name;

		if (t->t_end != 0 && a->start > t->t_end)
			t->after_end = true;
		if (a->returnValue == 0 && (t->t_end == 0 || a->start <= t->t_end) &&
		    (name = launches(t, rec->kind, a->cbid)) != NULL) {
			t->nlaunch++;
			t->nlaunch_win += a->start >= t->t_start;
			if (!idset_add(&t->seen, a->correlationId))
				t->repeats++;
			want_add(t, a->correlationId, name);
		}
		break;
	}
	default:
		break;
	}
}

static bool is_gpu_kind(int64_t k)
{
	return k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || k == CUPTI_ACTIVITY_KIND_KERNEL ||
	       k == CUPTI_ACTIVITY_KIND_MEMCPY || k == CUPTI_ACTIVITY_KIND_MEMSET;
}

/* Launches still without their GPU record (the list is pruned). */
static size_t tail_missing(struct tail *t)
{
	size_t i, n = 0;

	for (i = 0; i < t->nwant; i++)
		if (!idset_has(&t->have, t->want[i])) {
			t->what[n] = t->what[i];
			t->want[n++] = t->want[i];
		}
	t->nwant = n;
	return n;
}

static uint64_t tail_limit_ms(void)
{
	const char *env = getenv("GPROF_GPU_TAIL_MS");
	char *end;
	unsigned long long v;

	if (env == NULL || !*env)
		return 2000;
	v = strtoull(env, &end, 10);
	return *end == '\0' && v <= 60000 ? v : 2000;
}

/*
 * Before the API kinds go off, one call made after the window's end is
 * recorded, if the program makes one within 20 ms: GPU work launched by an
 * API not traced is kept by its correlation id, below the first traced
 * call after the window (gpu_events.c), and without such a call it would
 * have no upper bound: the kernels launched between the API kinds going
 * off and the GPU kinds going off would be kept as the window's, without
 * their launches (the stand-in's stress under ASan, 2026-11-23: 4 in a
 * duration window, the agent thread having closed the window itself and
 * turned the API kinds off at once). Own records say so at once
 * (gpu_api.c); CUPTI's are read as its buffers come back, into the tail.
 */
static void api_past_end(const struct gpu_tail_ctl *ctl, struct tail *t, size_t *scanned)
{
	struct timespec one_ms = { 0, 1000 * 1000 };
	int i;

	for (i = 0; t->t_end != 0; i++) {
		if (gpu_api_armed()) {
			t->after_end = gpu_api_after_end();
		} else {
			ctl->flush();
			gpu_buf_each_new(scanned, tail_record, t);
		}
		if (t->after_end || i == 20)
			break;
		nanosleep(&one_ms, NULL);
	}
}

void gpu_tail_drain(const struct gpu_tail_ctl *ctl, const int64_t *kinds, size_t nkinds)
{
	struct timespec five_ms = { 0, 5 * 1000 * 1000 };
	uint64_t limit = tail_limit_ms() * 1000000ull, t0 = agent_now_ns(), now = t0;
	uint64_t progress = t0;
	struct tail t = { 0 };
	size_t i, missing = 0, last_missing = (size_t)-1, scanned = 0, last_scanned = 0, rounds = 0;
	bool api = false, broken = false;
	int64_t out;

	t.t_start = atomic_load(&A.t_start);
	t.t_end = atomic_load(&A.t_end);
	for (i = 0; i < nkinds; i++) {
		int64_t k = kinds[i];

		t.kernels |= k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || k == CUPTI_ACTIVITY_KIND_KERNEL;
		t.copies |= k == CUPTI_ACTIVITY_KIND_MEMCPY;
		t.sets |= k == CUPTI_ACTIVITY_KIND_MEMSET;
		api |= k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER;
	}
	if (api)
		api_past_end(ctl, &t, &scanned);
	/* API kinds first: a launch recorded after its GPU kind went off would
	 * be waited for in vain (those after the window are not waited for) */
	for (i = 0; i < nkinds; i++)
		if (!is_gpu_kind(kinds[i]))
			ctl->kind_off(kinds[i]);
	for (i = 0; i < nkinds; i++)
		if (is_gpu_kind(kinds[i]))
			ctl->kind_off(kinds[i]);
	for (;;) {
		ctl->flush();
		rounds++;
		gpu_buf_each_new(&scanned, tail_record, &t);
		/* CUPTI numbered nothing (one id for every launch, gpu_events.c):
		 * an id tells nothing, so the GPU records are counted instead */
		broken = gpu_ids_broken(t.nlaunch, t.repeats);
		missing = !broken ? tail_missing(&t) :
		          t.nlaunch_win > t.ngpu_win ? t.nlaunch_win - t.ngpu_win : 0;
		now = agent_now_ns();
		if (missing < last_missing || scanned != last_scanned)
			progress = now;
		last_missing = missing;
		last_scanned = scanned;
		out = gpu_buf_out();
		/* Done when CUPTI holds no buffer of the burst (one with a record
		 * still incomplete is not handed back) and every launch has its
		 * GPU record (they can come later, in buffers not asked for yet);
		 * without launch records (kernel-only bursts), when nothing came
		 * for 20 ms either. Where CUPTI numbered nothing, as many GPU
		 * records as launches, or 100 ms without a new one: the libcupti
		 * that lost the ids also gave fewer GPU records than launches
		 * (H100, 2026-11-23: 1,637 for about 2,300), so the count alone
		 * would hold every such burst for the 300 ms below. */
		if (out <= 0 && (!api ? now - progress >= 20000000ull :
		                 missing == 0 || (broken && now - progress >= 100000000ull)))
			break;
		if (now - t0 >= limit || (out <= 0 && now - progress >= 300000000ull))
			break;
		nanosleep(&five_ms, NULL);
	}
	agent_log("tail: %zu flushes in %.1f ms for the window's GPU work; %zu launches without "
	          "their GPU record%s%s%s%s", rounds, (double)(now - t0) / 1e6, missing,
	          !broken ? "" : missing ? " (counted, CUPTI numbered no launch: ended after 100 ms "
	          "without a new one)" : " (counted, CUPTI numbered no launch)",
	          missing && !broken ? " (gave up waiting; the first: " : "",
	          missing && !broken ? (t.what[0] ? t.what[0] : "?") : "",
	          missing && !broken ? ")" : "");
	free(t.want);
	free(t.what);
	free(t.have.v);
	free(t.seen.v);
}

