/*
 * report_finish: what report.c's pass over the events leaves (intervals,
 * spans, step times, raw per-device busy lists) turned into the figures
 * the outputs read: merged busy time and gaps by device and stream, the
 * longest gaps and the idle after synchronising calls, launch-bound
 * stretches, GPU idle during data loading, medians (the ranges' GPU
 * time is report_ranges.c's). Runs once per file, after the whole pass;
 * owns nothing beyond the rstats it fills. Calls report_figures.c (the
 * busiest device, busy time between two moments), never the outputs.
 */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "report.h"
#include "report_int.h"

static int cmp_double_pairs(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/* Devices by number, each followed by its streams (-1, the device, first). */
static int by_dev_stream(const void *a, const void *b)
{
	const struct gpu *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->stream < y->stream ? -1 : x->stream > y->stream;
}

static int by_end(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->b < y->b ? -1 : x->b > y->b;
}

static void bucket(struct gpu *g, double len)
{
	static const double edges[4] = { 10, 100, 1000, 10000 }; /* us */
	size_t b;

	if (len <= 0)
		return;
	for (b = 0; b < 4 && len >= edges[b]; b++)
		;
	g->idle_bucket[b] += len;
}

/* The longest gaps, longest first. */
static void keep_gap(struct gpu *g, double a, double b)
{
	size_t i = REPORT_TOP_GAPS;

	while (i > 0 && g->top_gaps[i - 1].b - g->top_gaps[i - 1].a < b - a) {
		if (i < REPORT_TOP_GAPS)
			g->top_gaps[i] = g->top_gaps[i - 1];
		i--;
	}
	if (i < REPORT_TOP_GAPS)
		g->top_gaps[i] = (struct gap){ a, b };
}

/* Launch-bound stretches (docs/REPORT.md): at least 32 GPU operations in a
 * row, each shorter than 20 us, none more than 100 us after the previous
 * one ended, with the GPU busy less than 60 % of the stretch. The
 * device's operations, sorted by start. */
#define LB_SHORT 20.0
#define LB_GAP 100.0
#define LB_OPS 32
#define LB_BUSY 0.6

static void keep_stretch(struct rstats *st, struct stretch s)
{
	double idle = s.b - s.a - s.busy;
	size_t k = st->nstretches < 3 ? st->nstretches++ : 3;

	while (k > 0 && st->stretches[k - 1].b - st->stretches[k - 1].a - st->stretches[k - 1].busy <
	                idle) {
		if (k < 3)
			st->stretches[k] = st->stretches[k - 1];
		k--;
	}
	if (k < 3)
		st->stretches[k] = s;
}

static void stretches(struct rstats *st, const struct gpu *g)
{
	const double *v = g->iv.v;
	size_t n = g->iv.n / 2, i = 0, j;

	while (i < n) {
		double end, busy;

		if (v[2 * i + 1] - v[2 * i] >= LB_SHORT) {
			i++;
			continue;
		}
		end = v[2 * i + 1];
		busy = end - v[2 * i];
		for (j = i + 1; j < n && v[2 * j + 1] - v[2 * j] < LB_SHORT && v[2 * j] - end < LB_GAP;
		     j++)
			if (v[2 * j + 1] > end) {
				busy += v[2 * j + 1] - (v[2 * j] > end ? v[2 * j] : end);
				end = v[2 * j + 1];
			}
		if (j - i >= LB_OPS && busy < LB_BUSY * (end - v[2 * i])) {
			st->stretch_idle += end - v[2 * i] - busy;
			keep_stretch(st, (struct stretch){ v[2 * i], end, busy, (uint32_t)(j - i), g->dev });
		}
		i = j;
	}
}

/* Merges a device's or stream's operations (sorted by start) into
 * disjoint busy intervals, in place, with their prefix sums: busy time;
 * idle gaps from the window's start t0 to its end t1 by length; for a
 * device, the longest gaps and those a synchronising call opened (the
 * call was waiting when the GPU went idle and returned inside the gap:
 * the idle that follows a .item() or a stream sync). syncs: by end. */
static bool merge(struct gpu *g, const struct spans *syncs, double t0, double t1)
{
	double end = t0, busy = 0, *v = g->iv.v;
	size_t i, m = 0, p = 0, q;
	bool device = g->stream < 0;

	for (i = 0; i < g->iv.n; i += 2) {
		double a = v[i], z = v[i + 1];

		if (i > 0 && a <= end) { /* overlaps the merged interval */
			if (z > end) {
				busy += z - end;
				end = z;
				v[2 * m - 1] = z;
			}
			continue;
		}
		if (a > end) {
			bucket(g, a - end);
			if (device) {
				keep_gap(g, end, a);
				while (p < syncs->n && syncs->v[p].b < end - 5)
					p++;
				for (q = p; q < syncs->n && syncs->v[q].b <= a; q++)
					if (syncs->v[q].a <= end + 5) {
						g->idle_after_sync += a - end;
						g->sync_gaps++;
						break;
					}
			}
		}
		v[2 * m] = a; /* a new merged interval */
		v[2 * m + 1] = z;
		m++;
		busy += z - a;
		end = z;
	}
	if (t1 > end) {
		bucket(g, t1 - end);
		if (device && m)
			keep_gap(g, end, t1);
	}
	g->iv.n = 2 * m;
	g->busy = busy;
	g->span = m ? end - v[0] : 0;
	if ((g->prefix = malloc((m ? m : 1) * sizeof(*g->prefix))) == NULL)
		return false;
	for (i = 0, busy = 0; i < m; i++) {
		g->prefix[i] = busy;
		busy += v[2 * i + 1] - v[2 * i];
	}
	return true;
}

static bool data_range(const char *name)
{
	return report_has_ci(name, "dataloader") || report_has_ci(name, "data_load") || report_has_ci(name, "data load");
}

/* The k-th smallest of v[0..n) (k < n), moving the others around it:
 * Hoare's selection, in linear time on average, where a sort would cost
 * n log n (a million kernels' durations). */
static float select_kth(float *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;

	while (lo < hi) {
		float pivot = v[lo + (hi - lo) / 2];
		size_t i = lo, j = hi;

		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				float t = v[i];

				v[i] = v[j];
				v[j] = t;
				i++;
				if (j == 0)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

static double median_of(struct durs *d)
{
	float hi, lo;
	size_t i;

	if (d->n == 0)
		return 0;
	hi = select_kth(d->v, d->n, d->n / 2);
	if (d->n % 2)
		return hi;
	/* even: the largest of the lower half, which selection left below */
	for (i = 1, lo = d->v[0]; i < d->n / 2; i++)
		if (d->v[i] > lo)
			lo = d->v[i];
	return ((double)lo + hi) / 2;
}

static bool sorted_pairs(const double *v, size_t n)
{
	size_t i;

	for (i = 2; i < n; i += 2)
		if (v[i] < v[i - 2])
			return false;
	return true;
}

bool report_finish(struct rstats *st)
{
	const struct gpu *busiest;
	size_t i;

	/* the pass's index goes: from here on devices are found by bsearch,
	 * and a device's streams follow it */
	htab_deinit(&st->gpu_idx);
	if (st->ngpus > 0)
		qsort(st->gpus, st->ngpus, sizeof(*st->gpus), by_dev_stream);
	if (st->sync_spans.n > 0)
		qsort(st->sync_spans.v, st->sync_spans.n, sizeof(struct span), by_end);
	for (i = 0; i < st->ngpus; i++) {
		struct gpu *g = &st->gpus[i];

		if (!sorted_pairs(g->iv.v, g->iv.n)) /* usually they come in order */
			qsort(g->iv.v, g->iv.n / 2, 2 * sizeof(double), cmp_double_pairs);
		if (g->stream < 0)
			stretches(st, g);
		if (!merge(g, &st->sync_spans, st->t0, st->t1))
			return false;
	}
	/* each range's GPU work, by correlation */
	if (!report_ranges_finish(st))
		return false;
	/* data loading: CPU time in its ranges, and how idle the busiest GPU
	 * was meanwhile (one device: a range per device would cost ranges
	 * times devices) */
	busiest = report_busiest(st);
	for (i = 0; i < st->cpu_spans.n; i++) {
		const struct span *sp = &st->cpu_spans.v[i];

		if (!data_range(st->ranges.v[sp->name].name))
			continue;
		st->data_calls++;
		st->data_cpu += sp->b - sp->a;
		st->data_idle += sp->b - sp->a - (busiest ? report_busy_between(busiest, sp->a, sp->b) : 0);
	}
	for (i = 0; i < st->kernels.n; i++)
		st->kernels.v[i].median = median_of(&st->kernels.v[i].d);
	for (i = 0; i < st->copies.n; i++)
		st->copies.v[i].median = median_of(&st->copies.v[i].d);
	if (st->steps.n > 0) /* qsort's base may not be NULL, even for nothing */
		qsort(st->steps.v, st->steps.n, sizeof(float), cmp_float);
	return report_ops_finish(st);
}

