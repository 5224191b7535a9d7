/*
 * report_out.c: what report.c summed up, for people (text), programs
 * (JSON) and the findings both share; report_html.c draws the same as a
 * page. Everything here reads finished struct rstats and owns nothing
 * beyond a call: arrays from report_ranked are freed before returning.
 * Calls report_figures.c for the shared figures and report_ops_out.c for
 * the operator table; neither calls back here.
 */
#include <stdlib.h>
#include <string.h>

#include "jsonint.h"
#include "report.h"
#include "report_int.h"

static uint64_t kernel_count(const struct rstats *st)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < st->kernels.n; i++)
		n += st->kernels.v[i].count;
	return n;
}

/* The synchronising call made most (by CPU time). */
static const char *main_sync(const struct rstats *st)
{
	const struct kstat *best = NULL;
	size_t i;

	for (i = 0; i < st->syncs.n; i++)
		if (best == NULL || st->syncs.v[i].total > best->total)
			best = &st->syncs.v[i];
	return best ? best->name : "a synchronising call";
}

/* The ranks with the longest and the shortest median step; false when
 * some rank has no iterations. */
static bool slowest(struct rstats *const *st, size_t n, size_t *slow, size_t *fast)
{
	size_t i;

	*slow = *fast = 0;
	for (i = 0; i < n; i++) {
		if (st[i]->steps.n == 0)
			return false;
		if (report_median(&st[i]->steps) > report_median(&st[*slow]->steps))
			*slow = i;
		if (report_median(&st[i]->steps) < report_median(&st[*fast]->steps))
			*fast = i;
	}
	return n > 1 && report_median(&st[*fast]->steps) > 0;
}

static int by_weight(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;

	return x->weight > y->weight ? -1 : x->weight < y->weight;
}

/* A finding about s (its text last), and the figures it rests on. */
#define ADD(kind, wt, ...) do { \
		f = report_finding(&out[k++], s, (kind), (wt)); \
		snprintf(f->text, sizeof(f->text), __VA_ARGS__); \
	} while (0)
#define EV(name, v) report_evidence(f, (name), (v), false)
#define EVI(name, v) report_evidence(f, (name), (double)(v), true)

/* One rank's findings into out[k...]; the new k. At most 7 per rank. */
static size_t rank_findings(const struct rstats *s, bool several, struct finding *out, size_t k)
{
	const struct gpu *g = report_busiest(s);
	double w = report_window(s), busy = g ? g->busy : 0, it = report_iterations_or_1(s);
	double kernels = (double)kernel_count(s);
	char who[32] = "", where[160], where2[160];
	struct finding *f;
	size_t j;

	if (several && s->rank >= 0)
		snprintf(who, sizeof(who), "rank %lld: ", (long long)s->rank);
	else if (several) {
		const char *base = strrchr(s->path, '/');

		snprintf(who, sizeof(who), "%.28s: ", base ? base + 1 : s->path);
	}
	if (g && w > 0 && busy / w < 0.7) {
		const struct gap *x = &g->top_gaps[0], *y = &g->top_gaps[1];

		report_where(s, g->dev, (x->a + x->b) / 2, true, where, sizeof(where));
		report_where(s, g->dev, (y->a + y->b) / 2, true, where2, sizeof(where2));
		ADD("gpu_idle", 1 - busy / w,
		    "%sthe GPU is idle %.0f%% of the window; the longest gaps: %.2f ms at "
		    "+%.2f ms (the CPU %s), %.2f ms at +%.2f ms (%s); look at what the CPU does in "
		    "them", who, 100 * (1 - busy / w), (x->b - x->a) / 1000, (x->a - s->t0) / 1000, where,
		    (y->b - y->a) / 1000, (y->a - s->t0) / 1000, where2);
		EVI("device", g->dev);
		EV("window_us", w);
		EV("busy_us", busy);
		EV("idle_share", 1 - busy / w);
		EV("longest_gap_us", x->b - x->a);
		EV("longest_gap_at_us", x->a - s->t0);
		EV("second_gap_us", y->b - y->a);
		EV("second_gap_at_us", y->a - s->t0);
	}
	if (w > 0 && s->data_cpu > 0.1 * w && s->data_idle > 0.5 * s->data_cpu) {
		ADD("data_loading", s->data_idle / w + 0.05,
		    "%sdata loading stalls the GPU: %.2f ms per iteration in "
		    "data-loading ranges (%.0f%% of the window, %llu calls), the GPU idle %.0f%% of that "
		    "time; load ahead: DataLoader(num_workers=N, pin_memory=True, "
		    "persistent_workers=True), or move the preprocessing onto the GPU", who,
		    s->data_cpu / it / 1000, 100 * s->data_cpu / w, (unsigned long long)s->data_calls,
		    100 * s->data_idle / s->data_cpu);
		EV("data_loading_cpu_us", s->data_cpu);
		EV("data_loading_gpu_idle_us", s->data_idle);
		EVI("data_loading_calls", s->data_calls);
		EVI("iterations", s->steps.n);
		EV("window_us", w);
	}
	if (w > 0 && s->nstretches > 0 && s->stretch_idle > 0.05 * w) {
		const struct stretch *x = &s->stretches[0];

		report_where(s, x->dev, x->a, false, where, sizeof(where));
		ADD("launch_bound", s->stretch_idle / w + 0.05,
		    "%sthe loop is launch-bound: the GPU waits on kernel "
		    "launches %.2f ms (%.0f%% of the window) in runs of short kernels (%.0f%% of all "
		    "kernels are shorter than 10 us); the worst: %u operations in %.2f ms at +%.2f ms, "
		    "GPU busy %.0f%%, %s; fuse them (torch.compile), or replay them as a CUDA graph",
		    who, s->stretch_idle / 1000, 100 * s->stretch_idle / w,
		    kernels > 0 ? 100 * (double)s->short_kernels / kernels : 0, (unsigned)x->ops,
		    (x->b - x->a) / 1000, (x->a - s->t0) / 1000, 100 * x->busy / (x->b - x->a), where);
		EV("launch_bound_idle_us", s->stretch_idle);
		EV("window_us", w);
		EVI("short_kernels", s->short_kernels);
		EVI("kernels", kernels);
		EVI("worst_operations", x->ops);
		EV("worst_length_us", x->b - x->a);
		EV("worst_at_us", x->a - s->t0);
		EV("worst_busy_us", x->busy);
	} else if (kernels >= 20 && (double)s->short_kernels / kernels > 0.5) {
		ADD("short_kernels", 0.5 * (double)s->short_kernels / kernels, "%s%.0f%% of kernels "
		    "run shorter than 10 us: launch overhead weighs on them; fuse them (torch.compile), "
		    "or replay them as a CUDA graph", who, 100 * (double)s->short_kernels / kernels);
		EVI("short_kernels", s->short_kernels);
		EVI("kernels", kernels);
	}
	for (j = 0; j < s->copies.n; j++)
		if (strstr(s->copies.v[j].name, "Pageable") != NULL) {
			ADD("pageable_copies", 0.4,
			    "%s%llu copies from or to pageable host memory (%s, %.1f GB/s): pin the "
			    "host buffers (pin_memory=True, or tensor.pin_memory()) and copy with "
			    "non_blocking=True", who, (unsigned long long)s->copies.v[j].count,
			    s->copies.v[j].name, s->copies.v[j].total > 0 ?
			    (double)s->copies.v[j].bytes / s->copies.v[j].total / 1000 : 0);
			EVI("copies", s->copies.v[j].count);
			EV("copy_us", s->copies.v[j].total);
			EVI("bytes", s->copies.v[j].bytes);
			break;
		}
	k = report_ops_findings(s, who, out, k, k + 2);
	if (g && w > 0 && (g->idle_after_sync > 0.05 * w || s->sync_total > 0.1 * w)) {
		ADD("synchronisation", (g->idle_after_sync + s->sync_total) / w,
		    "%ssynchronisation: the GPU sits idle "
		    "%.2f ms (%.0f%% of the window) in %u gaps that open when a synchronising call "
		    "returns, and the CPU spends %.0f%% of the window waiting in them (mostly %s); each "
		    ".item(), .cpu(), .tolist() or print of a GPU tensor waits for the GPU and then "
		    "leaves it idle until the next launch: keep such values on the GPU, read them "
		    "every N steps, or copy them with non_blocking=True", who,
		    g->idle_after_sync / 1000, 100 * g->idle_after_sync / w, (unsigned)g->sync_gaps,
		    100 * s->sync_total / w, main_sync(s));
		EV("idle_after_sync_us", g->idle_after_sync);
		EVI("sync_gaps", g->sync_gaps);
		EV("sync_us", s->sync_total);
		EV("window_us", w);
	}
	return k;
}

size_t report_findings(struct rstats *const *st, size_t n, struct finding *out, size_t max)
{
	size_t k = 0, i;

	for (i = 0; i < n && k + 7 < max; i++)
		k = rank_findings(st[i], n > 1, out, k);
	/* across files only when they are ranks of one job: two unrelated
	 * traces are not a straggler of each other */
	if (report_one_job(st, n) && k < max) {
		/* the straggler: the rank that waits least in collectives while
		 * another waits much longer */
		const struct rstats *s;
		struct finding *f;
		size_t lo = 0, hi = 0;

		for (i = 1; i < n; i++) {
			if (st[i]->nccl / report_iterations_or_1(st[i]) < st[lo]->nccl / report_iterations_or_1(st[lo]))
				lo = i;
			if (st[i]->nccl / report_iterations_or_1(st[i]) > st[hi]->nccl / report_iterations_or_1(st[hi]))
				hi = i;
		}
		s = st[lo];
		if (st[hi]->nccl / report_iterations_or_1(st[hi]) >
		    2 * st[lo]->nccl / report_iterations_or_1(st[lo]) + 100) {
			ADD("straggler", 0.9, "rank %lld is the straggler: rank %lld waits %.2f ms per iteration in NCCL "
			    "kernels, rank %lld %.2f ms; look at what rank %lld does besides the "
			    "collectives (its data, its share of the work, its GPU)",
			    (long long)st[lo]->rank, (long long)st[hi]->rank,
			    st[hi]->nccl / report_iterations_or_1(st[hi]) / 1000, (long long)st[lo]->rank,
			    st[lo]->nccl / report_iterations_or_1(st[lo]) / 1000, (long long)st[lo]->rank);
			EV("nccl_us_per_iteration", st[lo]->nccl / report_iterations_or_1(st[lo]));
			EVI("waiting_rank", st[hi]->rank);
			EV("waiting_nccl_us_per_iteration",
			   st[hi]->nccl / report_iterations_or_1(st[hi]));
		}
	}
	qsort(out, k, sizeof(*out), by_weight);
	return k;
}

/* ---- text ---- */

static void print_top(FILE *f, const struct kmap *m, size_t top, double total, bool copies)
{
	struct kstat **v = report_ranked(m);
	size_t i;

	if (v == NULL)
		return;
	fprintf(f, "  %6s %10s %7s %9s %9s %9s %s%s\n", "share", "total ms", "count", "mean us",
	        "median us", "max us", copies ? "GB/s  " : "", "name");
	for (i = 0; i < m->n && i < top; i++) {
		const struct kstat *k = v[i];
		char bw[16] = "";

		if (copies)
			snprintf(bw, sizeof(bw), "%6.1f", k->total > 0 ? (double)k->bytes / k->total /
			         1000 : 0);
		fprintf(f, "  %5.1f%% %10.3f %7llu %9.1f %9.1f %9.1f %s%s%.100s\n",
		        total > 0 ? 100 * k->total / total : 0, k->total / 1000,
		        (unsigned long long)k->count, k->total / (double)k->count, k->median,
		        k->max, bw, copies ? " " : "", k->name);
	}
	free(v);
}

/* The ranges table, or a line saying why its GPU columns are empty. */
static void print_ranges(FILE *f, const struct rstats *s, size_t top)
{
	struct kstat **v = report_ranked(&s->ranges);
	size_t i;

	fprintf(f, "ranges (NVTX, record_function, nn.Module) by CPU time; GPU ms: the GPU time of the "
	        "work launched inside them, by correlation (GPU span: first start to last end; ops: "
	        "kernels, copies and sets launched):\n"
	        "  %10s %10s %10s %7s %7s %s\n", "CPU ms", "GPU ms", "GPU span", "ops", "count",
	        "name");
	for (i = 0; v != NULL && i < s->ranges.n && i < top; i++) {
		const struct range_gpu *g = report_range_gpu(s, v[i]);

		if (g != NULL)
			fprintf(f, "  %10.3f %10.3f %10.3f %7llu %7llu %.100s\n", v[i]->total / 1000,
			        g->gpu / 1000, g->span / 1000, (unsigned long long)g->ops,
			        (unsigned long long)v[i]->count, v[i]->name);
		else
			fprintf(f, "  %10.3f %10s %10s %7s %7llu %.100s\n", v[i]->total / 1000, "-", "-",
			        "-", (unsigned long long)v[i]->count, v[i]->name);
	}
	free(v);
	if (s->range_gpu == NULL)
		fprintf(f, "  (no GPU time: none of the trace's %llu GPU records names the call that "
		        "launched it (no correlation ids), so what ran inside the ranges is unknown)\n",
		        (unsigned long long)s->gpu_events);
	else if (s->gpu_unlinked)
		fprintf(f, "  (%llu of the trace's %llu GPU records name no call in it, so no range: "
		        "their launches fell outside the trace or were dropped)\n",
		        (unsigned long long)s->gpu_unlinked, (unsigned long long)s->gpu_events);
}

static void print_where(FILE *f, const struct rstats *s, const struct gpu *g)
{
	char where[320];
	size_t i;

	if (g && g->top_gaps[0].b > g->top_gaps[0].a) {
		fprintf(f, "longest GPU idle gaps (what the CPU was in):\n");
		for (i = 0; i < REPORT_TOP_GAPS && g->top_gaps[i].b > g->top_gaps[i].a; i++) {
			const struct gap *x = &g->top_gaps[i];

			report_where(s, g->dev, (x->a + x->b) / 2, true, where, sizeof(where));
			fprintf(f, "  %8.3f ms at +%.3f ms, %s\n", (x->b - x->a) / 1000,
			        (x->a - s->t0) / 1000, where);
		}
	}
	if (g && g->sync_gaps)
		fprintf(f, "GPU idle after synchronising calls: %.3f ms in %u gaps\n",
		        g->idle_after_sync / 1000, (unsigned)g->sync_gaps);
	if (s->nstretches) {
		fprintf(f, "launch-bound stretches (GPU idle %.3f ms in all), the worst:\n",
		        s->stretch_idle / 1000);
		for (i = 0; i < s->nstretches; i++) {
			const struct stretch *x = &s->stretches[i];

			report_stretch_text(s, x, where, sizeof(where));
			fprintf(f, "  %s\n", where);
		}
	}
	if (s->data_calls)
		fprintf(f, "data loading: %.3f ms in %llu calls, GPU idle %.3f ms of it\n",
		        s->data_cpu / 1000, (unsigned long long)s->data_calls, s->data_idle / 1000);
}

static void print_one(FILE *f, const struct rstats *s, size_t top)
{
	static const char *const bucket[5] = { "<10us", "10-100us", "0.1-1ms", "1-10ms", ">=10ms" };
	double w = report_window(s);
	size_t i, b;

	fprintf(f, "== %s", s->path);
	if (s->rank >= 0 && s->world > 0)
		fprintf(f, " (rank %lld of %lld)", (long long)s->rank, (long long)s->world);
	else if (s->rank >= 0)
		fprintf(f, " (rank %lld)", (long long)s->rank);
	fprintf(f, "\nwindow %.3f ms, %llu events, %llu on the GPU\n", w / 1000,
	        (unsigned long long)s->events, (unsigned long long)s->gpu_events);
	if (s->error[0])
		fprintf(f, "warning: %s\n", s->error);
	for (i = 0; i < s->ngpus; i++) {
		const struct gpu *g = &s->gpus[i];

		if (g->stream >= 0)
			continue;
		fprintf(f, "GPU %lld: busy %.3f ms (%.1f%% of the window), idle %.3f ms; idle gaps:",
		        (long long)g->dev, g->busy / 1000, w > 0 ? 100 * g->busy / w : 0,
		        (w - g->busy) / 1000);
		for (b = 0; b < 5; b++)
			fprintf(f, " %s %.3f ms%s", bucket[b], g->idle_bucket[b] / 1000, b < 4 ? "," : "\n");
		for (b = i + 1; b < s->ngpus && s->gpus[b].dev == g->dev; b++) /* its streams */
			fprintf(f, "  stream %lld: busy %.3f ms (%.1f%%)\n",
			        (long long)s->gpus[b].stream, s->gpus[b].busy / 1000,
			        w > 0 ? 100 * s->gpus[b].busy / w : 0);
	}
	if (s->steps.n)
		fprintf(f, "iterations: %zu, median %.3f ms, min %.3f, max %.3f (max/min %.2f)\n",
		        s->steps.n, report_median(&s->steps) / 1000, s->steps.v[0] / 1000.0,
		        s->steps.v[s->steps.n - 1] / 1000.0,
		        s->steps.v[0] > 0 ? s->steps.v[s->steps.n - 1] / s->steps.v[0] : 0);
	fprintf(f, "CPU: %.3f ms in CUDA API calls (%.3f ms synchronising); GPU kernels %.3f ms, "
	        "NCCL %.3f ms (%.1f%% of kernel time)\n", s->runtime_total / 1000,
	        s->sync_total / 1000, s->kernel_total / 1000, s->nccl / 1000,
	        s->kernel_total > 0 ? 100 * s->nccl / s->kernel_total : 0);
	print_where(f, s, report_busiest(s));
	report_ops_print(f, s, top);
	if (s->kernels.n) {
		fprintf(f, "top kernels by GPU time:\n");
		print_top(f, &s->kernels, top, s->kernel_total, false);
	}
	if (s->copies.n) {
		fprintf(f, "copies and sets:\n");
		print_top(f, &s->copies, top, 0, true);
	}
	if (s->ranges.n)
		print_ranges(f, s, top);
}

void report_print(FILE *f, struct rstats *const *st, size_t n, size_t top)
{
	struct finding fs[64];
	size_t i, k;

	for (i = 0; i < n; i++) {
		print_one(f, st[i], top);
		fprintf(f, "\n");
	}
	if (n > 1 && !report_one_job(st, n))
		fprintf(f, "== not compared across files: they are not the ranks of one job (each "
		        "needs its own rank in distributedInfo, one world size)\n\n");
	if (report_one_job(st, n)) {
		size_t slow, fast;

		fprintf(f, "== across ranks\n  %5s %12s %12s %14s %8s %10s\n", "rank", "step ms",
		        "GPU busy %", "NCCL ms/step", "NCCL %", "kernels");
		for (i = 0; i < n; i++) {
			const struct gpu *g = report_busiest(st[i]);
			double w = report_window(st[i]);

			fprintf(f, "  %5lld %12.3f %12.1f %14.3f %8.1f %10llu\n", (long long)st[i]->rank,
			        report_median(&st[i]->steps) / 1000, w > 0 && g ? 100 * g->busy / w : 0,
			        st[i]->nccl / report_iterations_or_1(st[i]) / 1000,
			        st[i]->kernel_total > 0 ? 100 * st[i]->nccl / st[i]->kernel_total : 0,
			        (unsigned long long)kernel_count(st[i]));
		}
		if (slowest(st, n, &slow, &fast))
			fprintf(f, "slowest: rank %lld, median step %.3f ms, %.1f%% over the fastest (rank "
			        "%lld, %.3f ms)\n", (long long)st[slow]->rank,
			        report_median(&st[slow]->steps) / 1000,
			        100 * (report_median(&st[slow]->steps) / report_median(&st[fast]->steps) - 1),
			        (long long)st[fast]->rank, report_median(&st[fast]->steps) / 1000);
		fprintf(f, "\n");
	}
	k = report_findings(st, n, fs, sizeof(fs) / sizeof(fs[0]));
	fprintf(f, "== findings\n");
	if (k == 0)
		fprintf(f, "  nothing stands out\n");
	for (i = 0; i < k; i++)
		fprintf(f, "  %zu. %s\n", i + 1, fs[i].text);
}

/* ---- JSON ---- */

static cJSON *top_json(const struct kmap *m, size_t top, double total)
{
	cJSON *a = cJSON_CreateArray();
	struct kstat **v = report_ranked(m);
	size_t i;

	for (i = 0; v != NULL && i < m->n && i < top; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "name", v[i]->name);
		jsonint_add(o, "count", v[i]->count);
		cJSON_AddNumberToObject(o, "total_us", v[i]->total);
		cJSON_AddNumberToObject(o, "mean_us", v[i]->total / (double)v[i]->count);
		cJSON_AddNumberToObject(o, "median_us", v[i]->median);
		cJSON_AddNumberToObject(o, "max_us", v[i]->max);
		if (total > 0)
			cJSON_AddNumberToObject(o, "share", v[i]->total / total);
		if (v[i]->bytes)
			jsonint_add(o, "bytes", v[i]->bytes);
		cJSON_AddItemToArray(a, o);
	}
	free(v);
	return a;
}

static cJSON *gpu_json(const struct rstats *s, const struct gpu *g)
{
	cJSON *o = cJSON_CreateObject(), *gaps;
	char where[160];
	size_t i;

	jsonint_add(o, "device", g->dev);
	if (g->stream >= 0)
		jsonint_add(o, "stream", g->stream);
	cJSON_AddNumberToObject(o, "busy_us", g->busy);
	if (g->stream >= 0)
		return o;
	cJSON_AddNumberToObject(o, "idle_us", report_window(s) - g->busy);
	cJSON_AddItemToObject(o, "idle_gaps_us", cJSON_CreateDoubleArray(g->idle_bucket, 5));
	cJSON_AddNumberToObject(o, "idle_after_sync_us", g->idle_after_sync);
	jsonint_add(o, "sync_gaps", g->sync_gaps);
	gaps = cJSON_AddArrayToObject(o, "longest_gaps");
	for (i = 0; i < REPORT_TOP_GAPS && g->top_gaps[i].b > g->top_gaps[i].a; i++) {
		cJSON *x = cJSON_CreateObject();

		report_where(s, g->dev, (g->top_gaps[i].a + g->top_gaps[i].b) / 2, true, where,
		             sizeof(where));
		cJSON_AddNumberToObject(x, "at_us", g->top_gaps[i].a - s->t0);
		cJSON_AddNumberToObject(x, "length_us", g->top_gaps[i].b - g->top_gaps[i].a);
		cJSON_AddStringToObject(x, "where", where);
		cJSON_AddItemToArray(gaps, x);
	}
	return o;
}

static void rank_json(cJSON *r, const struct rstats *s, size_t top)
{
	cJSON *gpus = cJSON_AddArrayToObject(r, "gpus"), *steps, *a;
	char where[160];
	size_t j;

	for (j = 0; j < s->ngpus; j++)
		cJSON_AddItemToArray(gpus, gpu_json(s, &s->gpus[j]));
	steps = cJSON_AddObjectToObject(r, "iterations");
	jsonint_add(steps, "count", s->steps.n);
	cJSON_AddNumberToObject(steps, "median_us", report_median(&s->steps));
	cJSON_AddNumberToObject(steps, "min_us", s->steps.n ? s->steps.v[0] : 0);
	cJSON_AddNumberToObject(steps, "max_us", s->steps.n ? s->steps.v[s->steps.n - 1] : 0);
	a = cJSON_AddArrayToObject(steps, "in_order_us");
	for (j = 0; j < s->step_spans.n; j++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(s->step_spans.v[j].b - s->step_spans.v[j].a));
	cJSON_AddNumberToObject(r, "kernel_us", s->kernel_total);
	cJSON_AddNumberToObject(r, "nccl_us", s->nccl);
	cJSON_AddNumberToObject(r, "nccl_us_per_iteration", s->nccl / report_iterations_or_1(s));
	cJSON_AddNumberToObject(r, "cuda_api_us", s->runtime_total);
	cJSON_AddNumberToObject(r, "sync_us", s->sync_total);
	jsonint_add(r, "short_kernels", s->short_kernels);
	cJSON_AddNumberToObject(r, "data_loading_cpu_us", s->data_cpu);
	cJSON_AddNumberToObject(r, "data_loading_gpu_idle_us", s->data_idle);
	jsonint_add(r, "data_loading_calls", s->data_calls);
	cJSON_AddNumberToObject(r, "launch_bound_idle_us", s->stretch_idle);
	a = cJSON_AddArrayToObject(r, "launch_bound_stretches");
	for (j = 0; j < s->nstretches; j++) {
		const struct stretch *x = &s->stretches[j];
		cJSON *o = cJSON_CreateObject();

		report_where(s, x->dev, x->a, false, where, sizeof(where));
		jsonint_add(o, "device", x->dev);
		cJSON_AddNumberToObject(o, "at_us", x->a - s->t0);
		cJSON_AddNumberToObject(o, "length_us", x->b - x->a);
		cJSON_AddNumberToObject(o, "busy_us", x->busy);
		jsonint_add(o, "operations", x->ops);
		cJSON_AddStringToObject(o, "where", where);
		cJSON_AddItemToArray(a, o);
	}
	report_ops_json(r, s, top);
	cJSON_AddItemToObject(r, "top_kernels", top_json(&s->kernels, top, s->kernel_total));
	cJSON_AddItemToObject(r, "copies", top_json(&s->copies, top, 0));
	cJSON_AddItemToObject(r, "syncs", top_json(&s->syncs, top, 0));
	a = cJSON_AddArrayToObject(r, "ranges");
	{
		struct kstat **v = report_ranked(&s->ranges);

		for (j = 0; v != NULL && j < s->ranges.n && j < top; j++) {
			const struct range_gpu *g = report_range_gpu(s, v[j]);
			cJSON *o = cJSON_CreateObject();

			cJSON_AddStringToObject(o, "name", v[j]->name);
			jsonint_add(o, "count", v[j]->count);
			cJSON_AddNumberToObject(o, "cpu_us", v[j]->total);
			/* unknown (no GPU record linked to a call): null */
			if (g != NULL) {
				cJSON_AddNumberToObject(o, "gpu_us", g->gpu);
				cJSON_AddNumberToObject(o, "gpu_span_us", g->span);
				jsonint_add(o, "gpu_ops", g->ops);
			} else {
				cJSON_AddNullToObject(o, "gpu_us");
				cJSON_AddNullToObject(o, "gpu_span_us");
				cJSON_AddNullToObject(o, "gpu_ops");
			}
			cJSON_AddItemToArray(a, o);
		}
		free(v);
	}
	if (s->ranges.n) /* worked out for the ranges only */
		jsonint_add(r, "gpu_records_unlinked", s->gpu_unlinked);
	else
		cJSON_AddNullToObject(r, "gpu_records_unlinked");
}

/* A finding as an object (docs/REPORT.md): what, how bad, whom, the
 * figures it rests on, the sentence. Unknown rank, host or file: null. */
static cJSON *finding_json(const struct finding *f, size_t place)
{
	cJSON *o = cJSON_CreateObject(), *ev;
	size_t i;

	cJSON_AddStringToObject(o, "kind", f->kind);
	cJSON_AddStringToObject(o, "severity", report_severity(f->weight));
	cJSON_AddNumberToObject(o, "weight", f->weight);
	jsonint_add(o, "place", (int64_t)place);
	if (f->rank >= 0)
		jsonint_add(o, "rank", f->rank);
	else
		cJSON_AddNullToObject(o, "rank");
	if (f->host != NULL && f->host[0])
		cJSON_AddStringToObject(o, "host", f->host);
	else
		cJSON_AddNullToObject(o, "host");
	if (f->file != NULL)
		cJSON_AddStringToObject(o, "file", f->file);
	else
		cJSON_AddNullToObject(o, "file");
	ev = cJSON_AddObjectToObject(o, "evidence");
	for (i = 0; i < f->nev; i++)
		if (f->ev[i].integer)
			jsonint_add(ev, f->ev[i].name, (int64_t)f->ev[i].v);
		else
			cJSON_AddNumberToObject(ev, f->ev[i].name, f->ev[i].v);
	cJSON_AddStringToObject(o, "text", f->text);
	return o;
}

cJSON *report_json(struct rstats *const *st, size_t n, size_t top)
{
	cJSON *root = cJSON_CreateObject(), *ranks = cJSON_AddArrayToObject(root, "ranks"), *fa;
	struct finding fs[64];
	size_t i, k;

	for (i = 0; i < n; i++) {
		const struct rstats *s = st[i];
		cJSON *r = cJSON_CreateObject();

		cJSON_AddStringToObject(r, "file", s->path);
		if (s->host[0])
			cJSON_AddStringToObject(r, "host", s->host);
		else
			cJSON_AddNullToObject(r, "host");
		/* unknown: null, never -1 */
		if (s->rank >= 0)
			jsonint_add(r, "rank", s->rank);
		else
			cJSON_AddNullToObject(r, "rank");
		if (s->world > 0)
			jsonint_add(r, "world_size", s->world);
		else
			cJSON_AddNullToObject(r, "world_size");
		if (s->error[0])
			cJSON_AddStringToObject(r, "error", s->error);
		cJSON_AddNumberToObject(r, "window_us", report_window(s));
		jsonint_add(r, "events", s->events);
		jsonint_add(r, "gpu_events", s->gpu_events);
		rank_json(r, s, top);
		cJSON_AddItemToArray(ranks, r);
	}
	{
		size_t slow, fast;

		cJSON_AddBoolToObject(root, "compared", report_one_job(st, n));
		if (report_one_job(st, n) && slowest(st, n, &slow, &fast)) {
			cJSON *o = cJSON_AddObjectToObject(root, "slowest");

			jsonint_add(o, "rank", st[slow]->rank);
			cJSON_AddNumberToObject(o, "step_us", report_median(&st[slow]->steps));
			jsonint_add(o, "fastest_rank", st[fast]->rank);
			cJSON_AddNumberToObject(o, "fastest_step_us", report_median(&st[fast]->steps));
		}
	}
	k = report_findings(st, n, fs, sizeof(fs) / sizeof(fs[0]));
	fa = cJSON_AddArrayToObject(root, "findings");
	for (i = 0; i < k; i++)
		cJSON_AddItemToArray(fa, finding_json(&fs[i], i + 1));
	return root;
}
