/*
 * report_figures: the figures the report's outputs share, read from a
 * finished struct rstats (report_finish has run): the window, the
 * iterations, the busiest device, busy time between two moments (binary
 * search over a device's merged intervals and their prefix sums) and the
 * timeline made of it, medians, kernels ranked by time, whether the files
 * are one job's ranks, a range's GPU work, and report_where, which names
 * what ran at a moment.
 *
 * Invariants: calls no other report file (report.c, report_finish.c and
 * every output call it, so the calls go one way); changes nothing in an
 * rstats but st->wheres (report_where's count); owns nothing beyond a call
 * except report_ranked's array, which its caller frees.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "report.h"
#include "report_int.h"

/* The middle of d, sorted (the mean of the two middle ones when even). */
double report_median(const struct durs *d)
{
	if (d->n == 0)
		return 0;
	return d->n % 2 ? d->v[d->n / 2] : (d->v[d->n / 2 - 1] + d->v[d->n / 2]) / 2;
}

/* qsort order: the largest total first. */
static int by_total(const void *a, const void *b)
{
	const struct kstat *x = *(struct kstat *const *)a, *y = *(struct kstat *const *)b;

	return x->total > y->total ? -1 : x->total < y->total;
}

/* m's entries by total, largest first, in an array the caller frees. */
struct kstat **report_ranked(const struct kmap *m)
{
	struct kstat **v = malloc((m->n ? m->n : 1) * sizeof(*v));
	size_t i;

	if (v == NULL)
		return NULL;
	for (i = 0; i < m->n; i++)
		v[i] = &m->v[i];
	if (m->n > 0)
		qsort(v, m->n, sizeof(*v), by_total);
	return v;
}

/* From the first start to the last end; 0 when nothing was timed. */
double report_window(const struct rstats *st)
{
	return st->t1 > st->t0 ? st->t1 - st->t0 : 0;
}

/* What per-iteration figures divide by. */
double report_iterations_or_1(const struct rstats *st)
{
	return st->steps.n ? (double)st->steps.n : 1;
}

/* The device (never a stream) with the most busy time. */
const struct gpu *report_busiest(const struct rstats *st)
{
	const struct gpu *g = NULL;
	size_t i;

	for (i = 0; i < st->ngpus; i++)
		if (st->gpus[i].stream < 0 && (g == NULL || st->gpus[i].busy > g->busy))
			g = &st->gpus[i];
	return g;
}

/* Whether the files are ranks of one job (report_int.h says when). */
bool report_one_job(struct rstats *const *st, size_t n)
{
	size_t i, k;

	if (n < 2)
		return false;
	for (i = 0; i < n; i++) {
		if (st[i]->rank < 0 || st[i]->world != st[0]->world ||
		    (st[i]->world > 0 && st[i]->rank >= st[i]->world))
			return false;
		for (k = 0; k < i; k++)
			if (st[k]->rank == st[i]->rank)
				return false;
	}
	return true;
}

/* A launch-bound stretch in one line, with where it happened. */
void report_stretch_text(const struct rstats *s, const struct stretch *x, char *out, size_t n)
{
	char where[160];

	report_where(s, x->dev, x->a, false, where, sizeof(where));
	snprintf(out, n, "%u operations in %.3f ms at +%.3f ms, GPU busy %.0f%%, %s", (unsigned)x->ops,
	         (x->b - x->a) / 1000, (x->a - s->t0) / 1000, 100 * x->busy / (x->b - x->a), where);
}

/* k's GPU work; NULL when no GPU record was linked to any range. */
const struct range_gpu *report_range_gpu(const struct rstats *s, const struct kstat *k)
{
	return s->range_gpu != NULL ? &s->range_gpu[k - s->ranges.v] : NULL;
}

/* Two binary searches and the prefix sums: the busy time in [a, b]. */
double report_busy_between(const struct gpu *g, double a, double b)
{
	const double *v = g->iv.v;
	size_t n = g->iv.n / 2, lo = 0, hi = n, first, last;
	double sum;

	if (n == 0 || b <= a || g->prefix == NULL)
		return 0;
	while (lo < hi) { /* the first interval ending after a */
		size_t mid = (lo + hi) / 2;

		if (v[2 * mid + 1] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	first = lo;
	hi = n;
	while (lo < hi) { /* the first interval starting at or after b */
		size_t mid = (lo + hi) / 2;

		if (v[2 * mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo <= first)
		return 0;
	last = lo - 1;
	sum = g->prefix[last] + (v[2 * last + 1] - v[2 * last]) - g->prefix[first];
	if (a > v[2 * first])
		sum -= a - v[2 * first];
	if (v[2 * last + 1] > b)
		sum -= v[2 * last + 1] - b;
	return sum > 0 ? sum : 0;
}

/* The timeline: each slice's busy share. */
void report_bins(const struct rstats *st, const struct gpu *g, float *out)
{
	double w = report_window(st);
	size_t k;

	for (k = 0; k < REPORT_BINS; k++) {
		double a = st->t0 + w * (double)k / REPORT_BINS;

		out[k] = w > 0 ? (float)(report_busy_between(g, a, a + w / REPORT_BINS) / (w / REPORT_BINS)) : 0;
	}
}

/* The innermost span of sp holding t (on dev, or any when dev < 0). */
static const struct span *innermost(const struct spans *sp, int64_t dev, double t)
{
	const struct span *best = NULL;
	size_t i;

	for (i = 0; i < sp->n; i++)
		if (sp->v[i].a <= t && t <= sp->v[i].b && (dev < 0 || sp->v[i].dev == dev) &&
		    (best == NULL || sp->v[i].b - sp->v[i].a < best->b - best->a))
			best = &sp->v[i];
	return best;
}

/* What ran at t, as text (report_int.h); the one writer of st->wheres. */
void report_where(const struct rstats *st, int64_t dev, double t, bool cpu_first, char *out,
                  size_t n)
{
	const struct span *g, *c, *step = NULL;
	const char *name = NULL;
	size_t i;

	/* the outputs hold st const; the count is the only thing changed, and
	 * every rstats is the caller's heap object, never a const one */
	if (st->wheres >= REPORT_WHERE_MAX) {
		snprintf(out, n, "(not looked up: more than %d places asked in this file)",
		         REPORT_WHERE_MAX);
		return;
	}
	((struct rstats *)st)->wheres++;
	g = innermost(&st->gpu_spans, dev, t);
	c = innermost(&st->cpu_spans, -1, t);
	if (c && (cpu_first || g == NULL))
		name = st->ranges.v[c->name].name;
	else if (g)
		name = st->granges.v[g->name].name;
	/* the GPU runs behind the CPU: the last iteration begun by then */
	for (i = 0; i < st->step_spans.n; i++)
		if (st->step_spans.v[i].a <= t && (step == NULL || st->step_spans.v[i].a > step->a))
			step = &st->step_spans.v[i];
	if (name && step)
		snprintf(out, n, "in '%.80s', ProfilerStep#%u", name, (unsigned)step->name);
	else if (name)
		snprintf(out, n, "in '%.80s'", name);
	else if (step)
		snprintf(out, n, "in ProfilerStep#%u, outside any range", (unsigned)step->name);
	else
		snprintf(out, n, "outside any range");
}

/* A case-blind substring test (needle in lowercase). */
bool report_has_ci(const char *s, const char *needle)
{
	size_t n = strlen(needle);

	for (; *s; s++)
		if (tolower((unsigned char)*s) == needle[0] && strncasecmp(s, needle, n) == 0)
			return true;
	return false;
}
