/*
 * report_ranges: the GPU time of CPU-side ranges (NVTX, record_function
 * and user annotations, nn.Module scopes), by correlation (issue 37).
 *
 * A range's GPU work is what was launched inside it: a GPU record (kernel,
 * copy, set) whose correlation id names a CUDA runtime or driver call that
 * started inside the range, on the range's own thread (pid, tid). This is
 * the link the operator table uses (report_ops.c) and Kineto's own
 * gpu_user_annotation projection, but it needs neither operators nor
 * projections, so agent, Kineto and torch.profiler traces get the same
 * figures. During report.c's pass, report_ranges_range keeps each range
 * (name index in st->ranges, thread, span), report_ranges_launch each call
 * with a correlation id, report_ranges_gpu each GPU record (correlation id,
 * start, end). After it, report_ranges_finish fills st->range_gpu:
 *   - gpu: the GPU records' durations, each record counted once per range
 *     name (a range nested in one of its own name adds nothing more);
 *   - ops: how many GPU records that is;
 *   - span: per outermost instance, first start to last end of its GPU
 *     work (Kineto's gpu_user_annotation length), summed.
 * Invariants: one GPU record is attributed to at most one call (a
 * correlation id claimed by two calls counts once, for the earlier); a
 * record whose id names no call is counted in st->gpu_unlinked; when the
 * trace has GPU records and none is linked to a call (no correlation ids),
 * range_gpu stays NULL and the outputs show no GPU figure for ranges
 * rather than a wrong 0.
 *
 * Ownership: st->rr belongs to the rstats until report_ranges_finish
 * frees it; st->range_gpu until report_ranges_free.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "report.h"

struct rr_range { double a, b; int64_t pid, tid; uint32_t name; };
struct rr_launch { double ts; int64_t pid, tid; uint32_t corr; float dur; };
struct rr_gpu { double a, dur; uint32_t corr; }; /* dur as written: b - a near 2^42 us is off */

/* A linked launch after the finish's first steps: its GPU work. */
struct rr_work {
	double ts; int64_t pid, tid; double sum, first, last; uint64_t n;
	size_t call;               /* its launch, in rr->l */
	bool ambiguous;            /* its id named another call too */
};

struct rranges {
	struct rr_range *r;
	struct rr_launch *l;
	struct rr_gpu *g;
	size_t nr, capr, nl, capl, ng, capg;
};

static struct rranges *get(struct rstats *st)
{
	if (st->rr == NULL)
		st->rr = calloc(1, sizeof(*st->rr));
	return st->rr;
}

bool report_ranges_range(struct rstats *st, uint32_t name, int64_t pid, int64_t tid, double a,
                         double b)
{
	struct rranges *rr = get(st);

	if (rr == NULL || !grow((void **)&rr->r, &rr->capr, rr->nr + 1, sizeof(*rr->r)))
		return false;
	rr->r[rr->nr++] = (struct rr_range){ a, b, pid, tid, name };
	return true;
}

bool report_ranges_launch(struct rstats *st, int64_t corr, int64_t pid, int64_t tid, double ts,
                          double dur)
{
	struct rranges *rr;

	if (corr < 0 || corr > UINT32_MAX)
		return true; /* links nothing */
	if ((rr = get(st)) == NULL || !grow((void **)&rr->l, &rr->capl, rr->nl + 1, sizeof(*rr->l)))
		return false;
	rr->l[rr->nl++] = (struct rr_launch){ ts, pid, tid, (uint32_t)corr, (float)dur };
	return true;
}

bool report_ranges_gpu(struct rstats *st, int64_t corr, double a, double dur)
{
	struct rranges *rr = get(st);

	if (rr == NULL)
		return false;
	st->gpu_records++;
	if (corr < 0 || corr > UINT32_MAX) {
		st->gpu_unlinked++;
		return true;
	}
	if (!grow((void **)&rr->g, &rr->capg, rr->ng + 1, sizeof(*rr->g)))
		return false;
	rr->g[rr->ng++] = (struct rr_gpu){ a, dur, (uint32_t)corr };
	return true;
}

static int gpu_by_corr(const void *x, const void *y)
{
	const struct rr_gpu *a = x, *b = y;

	return a->corr < b->corr ? -1 : a->corr > b->corr;
}

static int launch_by_ts(const void *x, const void *y)
{
	const struct rr_launch *a = x, *b = y;

	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* By thread, then start. */
static int work_by_thread(const void *x, const void *y)
{
	const struct rr_work *a = x, *b = y;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
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

/* The first work item at or after (pid, tid, ts) in w[0..n), sorted. */
static size_t lower(const struct rr_work *w, size_t n, int64_t pid, int64_t tid, double ts)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct rr_work *m = &w[mid];

		if (m->pid < pid || (m->pid == pid && (m->tid < tid || (m->tid == tid && m->ts < ts))))
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
static bool link_work(struct rstats *st, struct rranges *rr, struct rr_work **out, size_t *n)
{
	struct rr_work *w = malloc((rr->nl ? rr->nl : 1) * sizeof(*w));
	size_t *owner = malloc((rr->ng ? rr->ng : 1) * sizeof(*owner)); /* per group: its item */
	size_t i, j, k = 0;

	if (w == NULL || owner == NULL) {
		free(w);
		free(owner);
		return false;
	}
	if (rr->ng)
		qsort(rr->g, rr->ng, sizeof(*rr->g), gpu_by_corr);
	if (rr->nl)
		qsort(rr->l, rr->nl, sizeof(*rr->l), launch_by_ts);
	for (j = 0; j < rr->ng; j++)
		owner[j] = SIZE_MAX;
	for (i = 0; i < rr->nl; i++) {
		const struct rr_launch *l = &rr->l[i], *c;
		struct rr_gpu key = { .corr = l->corr }, *g;

		if (rr->ng == 0 ||
		    (g = bsearch(&key, rr->g, rr->ng, sizeof(*rr->g), gpu_by_corr)) == NULL)
			continue;
		for (j = (size_t)(g - rr->g); j > 0 && rr->g[j - 1].corr == key.corr; j--)
			;
		if (owner[j] != SIZE_MAX) {
			c = &rr->l[w[owner[j]].call];
			if (c->pid != l->pid || c->tid != l->tid || l->ts > c->ts + c->dur)
				w[owner[j]].ambiguous = true;
			continue;
		}
		owner[j] = k;
		w[k] = (struct rr_work){ l->ts, l->pid, l->tid, 0, rr->g[j].a,
		                         rr->g[j].a + rr->g[j].dur, 0, i, false };
		for (; j < rr->ng && rr->g[j].corr == key.corr; j++) {
			w[k].sum += rr->g[j].dur;
			w[k].n++;
			if (rr->g[j].a < w[k].first)
				w[k].first = rr->g[j].a;
			if (rr->g[j].a + rr->g[j].dur > w[k].last)
				w[k].last = rr->g[j].a + rr->g[j].dur;
		}
		k++;
	}
	free(owner);
	/* the records no call (or no one call) launched */
	st->gpu_unlinked += rr->ng;
	for (i = j = 0; i < k; i++)
		if (!w[i].ambiguous) {
			st->gpu_unlinked -= w[i].n;
			w[j++] = w[i];
		}
	k = j;
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
static bool attribute(struct rstats *st, struct rranges *rr, const struct rr_work *w, size_t n)
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
		double lo, hi;

		if (i > 0 && (r->pid != rr->r[i - 1].pid || r->tid != rr->r[i - 1].tid))
			while (depth > 0)
				open[rr->r[stack[--depth]].name]--;
		while (depth > 0 && rr->r[stack[depth - 1]].b <= r->a)
			open[rr->r[stack[--depth]].name]--;
		stack[depth++] = i;
		if (open[r->name]++ > 0)
			continue;
		a = lower(w, n, r->pid, r->tid, r->a);
		b = lower(w, n, r->pid, r->tid, r->b);
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

bool report_ranges_finish(struct rstats *st)
{
	struct rranges *rr = st->rr;
	struct rr_work *w = NULL;
	size_t n = 0;
	bool ok = true;

	st->range_gpu = calloc(st->ranges.n ? st->ranges.n : 1, sizeof(*st->range_gpu));
	if (st->range_gpu == NULL)
		ok = false;
	else if (rr != NULL) {
		ok = link_work(st, rr, &w, &n) && attribute(st, rr, w, n);
		/* GPU work and not one link: what ran inside the ranges is unknown */
		if (ok && n == 0 && st->gpu_records > 0) {
			free(st->range_gpu);
			st->range_gpu = NULL;
		}
	}
	free(w);
	report_ranges_free_pass(st);
	return ok;
}

void report_ranges_free_pass(struct rstats *st)
{
	if (st->rr == NULL)
		return;
	free(st->rr->r);
	free(st->rr->l);
	free(st->rr->g);
	free(st->rr);
	st->rr = NULL;
}
