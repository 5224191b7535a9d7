/*
 * report_ranges: the GPU time of CPU-side ranges (NVTX, record_function
 * and user annotations, nn.Module scopes), by correlation (issue 37).
 *
 * A range's GPU work is what was launched inside it: a GPU record (kernel,
 * copy, set) whose correlation id names a CUDA runtime or driver call that
 * started inside the range, on the range's own thread (pid, tid). This is
 * the link the operator table uses (report_ops.c), and what Kineto's
 * gpu_user_annotation projection spans, but it needs neither operators
 * nor projections, so agent, Kineto and torch.profiler traces get the
 * same figures. The calls and GPU records are the ones the operator table
 * keeps during report.c's pass (struct rops, report_ops.h): nothing more
 * per event is kept here. report_ranges_range keeps each range (name
 * index in st->ranges, thread, span); after the pass, and before
 * report_ops_finish reorders the calls, report_ranges_finish fills
 * st->range_gpu:
 *   - gpu: the GPU records' durations, each record counted once per range
 *     name (a range nested in one of its own name adds nothing more);
 *   - ops: how many GPU records that is;
 *   - span: per outermost instance, first start to last end of its GPU
 *     work (Kineto's gpu_user_annotation length), summed.
 * Invariants: one GPU record is attributed to at most one call (a
 * correlation id claimed by two calls counts once, for the earlier, when
 * the later lies inside it on its thread, else for neither); a record no
 * one call launched is counted in st->gpu_unlinked; when the trace has
 * GPU records and none is linked to a call (no correlation ids),
 * range_gpu stays NULL and the outputs show no GPU figure for ranges
 * rather than a wrong 0.
 *
 * Ownership: st->rr belongs to the rstats until report_ranges_finish
 * frees it; st->range_gpu until report_free. The calls and records are
 * st->ops's, only read (and the calls sorted) here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "report.h"
#include "report_int.h"
#include "report_ops.h"

struct rr_range { double a, b; int64_t pid, tid; uint32_t name; };

/* A linked launch: its thread (index in the operator table's), start, and
 * the GPU work it launched. */
struct rr_work {
	double ts, sum, first, last;
	uint32_t thr, n;
	uint32_t call;             /* its call, in o->calls */
};

struct rranges {
	struct rr_range *r;
	size_t nr, capr;
};

/* st's ranges, made on first use; NULL when out of memory. */
static struct rranges *get(struct rstats *st)
{
	if (st->rr == NULL)
		st->rr = calloc(1, sizeof(*st->rr));
	return st->rr;
}

/* One CPU range, kept until the finish. */
bool report_ranges_range(struct rstats *st, uint32_t name, int64_t pid, int64_t tid, double a,
                         double b)
{
	struct rranges *rr = get(st);

	if (rr == NULL || !grow((void **)&rr->r, &rr->capr, rr->nr + 1, sizeof(*rr->r)))
		return false;
	rr->r[rr->nr++] = (struct rr_range){ a, b, pid, tid, name };
	return true;
}

/* The GPU records by correlation id, through an index (o's arrays stay
 * as the operator table keeps them). qsort takes no context: the ids are
 * in a file-scope pointer, set just before the sort (gprofctl sums up one
 * file at a time, on one thread). */
static const uint32_t *sort_corr;

static int ix_by_corr(const void *x, const void *y)
{
	uint32_t a = sort_corr[*(const uint32_t *)x], b = sort_corr[*(const uint32_t *)y];

	return a < b ? -1 : a > b;
}

/* Calls by start, so the earliest with an id claims its records. */
static int call_by_ts(const void *x, const void *y)
{
	const struct rcall *a = x, *b = y;

	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* By thread, then start. */
static int work_by_thread(const void *x, const void *y)
{
	const struct rr_work *a = x, *b = y;

	if (a->thr != b->thr)
		return a->thr < b->thr ? -1 : 1;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* By thread, then start, the longer first (an enclosing range before what
 * it encloses). */
static int range_by_thread(const void *x, const void *y)
{
	const struct rr_range *a = x, *b = y;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	return a->b > b->b ? -1 : a->b < b->b;
}

/* The first work item at or after (thr, ts) in w[0..n), sorted. */
static size_t lower(const struct rr_work *w, size_t n, uint32_t thr, double ts)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct rr_work *m = &w[mid];

		if (m->thr < thr || (m->thr == thr && m->ts < ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The GPU work of each launch: GPU records grouped by correlation id (a
 * graph launch has several), each group claimed by the earliest call with
 * its id. A later call with the same id inside that one on its thread is
 * the same launch (a driver call under its runtime call); any other makes
 * the id ambiguous (the agent notes CUPTI reusing ids), and its records
 * go to no range. Calls that launched nothing are dropped. The rest,
 * sorted by thread and start, in *out (n items); false when out of memory.
 */
static bool link_work(struct rstats *st, struct rops *o, struct rr_work **out, size_t *n)
{
	struct rr_work *w = NULL;
	uint32_t *ix = malloc((o->ng ? o->ng : 1) * sizeof(*ix));
	uint32_t *owner = malloc((o->ng ? o->ng : 1) * sizeof(*owner)); /* per group: its call */
	bool *ambiguous = calloc(o->ng ? o->ng : 1, sizeof(*ambiguous));
	size_t i, j, k = 0;
	bool ok = ix != NULL && owner != NULL && ambiguous != NULL;

	for (i = 0; ok && i < o->ng; i++) {
		ix[i] = (uint32_t)i;
		owner[i] = NONE;
	}
	sort_corr = o->gcorr;
	if (ok && o->ng)
		qsort(ix, o->ng, sizeof(*ix), ix_by_corr);
	if (ok && o->ncalls)
		qsort(o->calls, o->ncalls, sizeof(*o->calls), call_by_ts);
	/* each group's call, or ambiguous */
	for (i = 0; ok && i < o->ncalls; i++) {
		const struct rcall *l = &o->calls[i], *c;
		size_t lo = 0, hi = o->ng;

		if (l->corr == NONE || l->thr == NONE)
			continue;
		while (lo < hi) { /* the first record with this id */
			size_t mid = (lo + hi) / 2;

			if (o->gcorr[ix[mid]] < l->corr)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == o->ng || o->gcorr[ix[lo]] != l->corr)
			continue;
		if (owner[lo] == NONE) {
			owner[lo] = (uint32_t)i;
			k++;
			continue;
		}
		c = &o->calls[owner[lo]];
		if (c->thr != l->thr || l->ts > c->ts + c->dur)
			ambiguous[lo] = true;
	}
	/* the work of each group with one call; the records of the others,
	 * and those whose id names no call, are no range's */
	if (ok && (w = malloc((k ? k : 1) * sizeof(*w))) == NULL)
		ok = false;
	st->gpu_unlinked = st->gpu_events;
	for (i = 0, k = 0; ok && i < o->ng; i = j) {
		struct rr_work *x = &w[k];

		for (j = i + 1; j < o->ng && o->gcorr[ix[j]] == o->gcorr[ix[i]]; j++)
			;
		if (owner[i] == NONE || ambiguous[i])
			continue;
		*x = (struct rr_work){ o->calls[owner[i]].ts, 0, HUGE_VAL, -HUGE_VAL,
		                       o->calls[owner[i]].thr, 0, owner[i] };
		for (; i < j; i++) {
			double a = o->gts[ix[i]], d = o->gdur[ix[i]];

			x->sum += d;
			x->n++;
			if (a < x->first)
				x->first = a;
			if (a + d > x->last)
				x->last = a + d;
		}
		st->gpu_unlinked -= x->n;
		k++;
	}
	free(ix);
	free(owner);
	free(ambiguous);
	if (!ok) {
		free(w);
		return false;
	}
	if (k)
		qsort(w, k, sizeof(*w), work_by_thread);
	*out = w;
	*n = k;
	return true;
}

/*
 * A segment tree over the work items' first starts and last ends, so that
 * a range finds the extent of its GPU work in O(log n) whatever how its
 * launches interleave across streams. Leaves at [m, 2m).
 */
struct extent { double *lo, *hi; size_t m; };

/* The tree over w[0..n); false when out of memory. */
static bool extent_init(struct extent *x, const struct rr_work *w, size_t n)
{
	size_t i;

	for (x->m = 1; x->m < n; x->m *= 2)
		;
	x->lo = malloc(2 * x->m * sizeof(double));
	x->hi = malloc(2 * x->m * sizeof(double));
	if (x->lo == NULL || x->hi == NULL)
		return false;
	for (i = 0; i < x->m; i++) {
		x->lo[x->m + i] = i < n ? w[i].first : HUGE_VAL;
		x->hi[x->m + i] = i < n ? w[i].last : -HUGE_VAL;
	}
	for (i = x->m; i-- > 1;) {
		x->lo[i] = x->lo[2 * i] < x->lo[2 * i + 1] ? x->lo[2 * i] : x->lo[2 * i + 1];
		x->hi[i] = x->hi[2 * i] > x->hi[2 * i + 1] ? x->hi[2 * i] : x->hi[2 * i + 1];
	}
	return true;
}

/* The earliest start and latest end among items [i, j). */
static void extent_query(const struct extent *x, size_t i, size_t j, double *lo, double *hi)
{
	*lo = HUGE_VAL;
	*hi = -HUGE_VAL;
	for (i += x->m, j += x->m; i < j; i /= 2, j /= 2) {
		if (i & 1) {
			*lo = x->lo[i] < *lo ? x->lo[i] : *lo;
			*hi = x->hi[i] > *hi ? x->hi[i] : *hi;
			i++;
		}
		if (j & 1) {
			j--;
			*lo = x->lo[j] < *lo ? x->lo[j] : *lo;
			*hi = x->hi[j] > *hi ? x->hi[j] : *hi;
		}
	}
}

/*
 * Each range's GPU work, from prefix sums over its thread's launches: only
 * outermost instances of a name count (a range inside an open range of
 * its own name on its thread adds what its enclosing one already has).
 * The ranges on a thread come sorted by start, the enclosing first; a
 * stack of the open ones tells which names are open.
 */
static bool attribute(struct rstats *st, const struct rops *o, struct rranges *rr,
                      const struct rr_work *w, size_t n)
{
	double *sum = malloc((n + 1) * sizeof(*sum));
	uint64_t *cnt = malloc((n + 1) * sizeof(*cnt));
	uint32_t *open = calloc(st->ranges.n ? st->ranges.n : 1, sizeof(*open));
	size_t *stack = malloc((rr->nr ? rr->nr : 1) * sizeof(*stack));
	struct extent x = { 0 };
	size_t i, depth = 0;
	bool ok = sum && cnt && open && stack && extent_init(&x, w, n);

	if (ok) {
		sum[0] = 0;
		cnt[0] = 0;
	}
	for (i = 0; ok && i < n; i++) {
		sum[i + 1] = sum[i] + w[i].sum;
		cnt[i + 1] = cnt[i] + w[i].n;
	}
	if (ok && rr->nr)
		qsort(rr->r, rr->nr, sizeof(*rr->r), range_by_thread);
	for (i = 0; ok && i < rr->nr; i++) {
		const struct rr_range *r = &rr->r[i];
		struct range_gpu *out = &st->range_gpu[r->name];
		size_t a, b;
		uint32_t thr;
		double lo, hi;

		if (i > 0 && (r->pid != rr->r[i - 1].pid || r->tid != rr->r[i - 1].tid))
			while (depth > 0)
				open[rr->r[stack[--depth]].name]--;
		while (depth > 0 && rr->r[stack[depth - 1]].b <= r->a)
			open[rr->r[stack[--depth]].name]--;
		stack[depth++] = i;
		if (open[r->name]++ > 0)
			continue;
		if ((thr = report_ops_thread(o, r->pid, r->tid)) == NONE)
			continue;
		a = lower(w, n, thr, r->a);
		b = lower(w, n, thr, r->b);
		if (b <= a)
			continue;
		out->gpu += sum[b] - sum[a];
		out->ops += cnt[b] - cnt[a];
		extent_query(&x, a, b, &lo, &hi);
		out->span += hi - lo;
	}
	free(sum);
	free(cnt);
	free(open);
	free(stack);
	free(x.lo);
	free(x.hi);
	return ok;
}

/* See report.h. */
bool report_ranges_finish(struct rstats *st)
{
	struct rranges *rr = st->rr;
	struct rr_work *w = NULL;
	size_t n = 0;
	bool ok = true;

	/* no range, nothing to work out (a trace of a million kernels and no
	 * range costs no sort) */
	st->gpu_unlinked = st->gpu_events;
	if (st->ranges.n == 0 || rr == NULL) {
		report_ranges_free_pass(st);
		return true;
	}
	st->range_gpu = calloc(st->ranges.n, sizeof(*st->range_gpu));
	if (st->range_gpu == NULL)
		ok = false;
	else if (st->ops != NULL)
		ok = link_work(st, st->ops, &w, &n) && attribute(st, st->ops, rr, w, n);
	/* GPU work and not one link: what ran inside the ranges is unknown */
	if (ok && n == 0 && st->gpu_events > 0) {
		free(st->range_gpu);
		st->range_gpu = NULL;
	}
	free(w);
	report_ranges_free_pass(st);
	return ok;
}

/* The ranges the pass kept, freed. */
void report_ranges_free_pass(struct rstats *st)
{
	if (st->rr == NULL)
		return;
	free(st->rr->r);
	free(st->rr);
	st->rr = NULL;
}
