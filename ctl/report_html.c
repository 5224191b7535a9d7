/*
 * report_html.c: the report as one HTML page that needs nothing else (no
 * script, no font, no network): the findings, charts drawn as inline SVG
 * (GPU busy over the window per rank and device, step time per rank,
 * top kernels per rank), and the tables of the text report. Every name
 * from a trace is escaped. Reads finished struct rstats; owns nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "report.h"
#include "report_int.h"

static const char *const colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf" };
#define NCOLORS (sizeof(colors) / sizeof(colors[0]))

/* s escaped, or its first max bytes and "..." where a chart has little
 * room (max 0: whole). */
static void esc_cut(FILE *f, const char *s, size_t max)
{
	char cut[128];

	if (max > 0 && max + 4 <= sizeof(cut) && strlen(s) > max) {
		snprintf(cut, sizeof(cut), "%.*s...", (int)max, s);
		s = cut;
	}
	fmt_html_esc(f, s);
}

/* "rank R", else the file's name (cut as esc_cut does). */
static void rank_label(FILE *f, const struct rstats *s, size_t max)
{
	const char *b = strrchr(s->path, '/');

	if (s->rank >= 0)
		fprintf(f, "rank %lld", (long long)s->rank);
	else
		esc_cut(f, b ? b + 1 : s->path, max);
}

/* GPU busy share over the window: a row of REPORT_BINS bars per device. */
static void timeline(FILE *f, struct rstats *const *st, size_t n)
{
	const int row = 46, left = 150, bw = 2;
	size_t i, j, rows = 0;
	int y = 0, k;

	for (i = 0; i < n; i++)
		for (j = 0; j < st[i]->ngpus; j++)
			rows += st[i]->gpus[j].stream < 0;
	if (rows == 0)
		return;
	fprintf(f, "<h2>GPU busy over the window</h2>\n<p class=note>Each bar is 1/%d of the rank's "
	        "window; its height is the share of that slice the GPU was busy.</p>\n"
	        "<svg width=\"%d\" height=\"%zu\" role=\"img\">\n", REPORT_BINS,
	        left + REPORT_BINS * bw + 10, rows * (size_t)row + 4);
	for (i = 0; i < n; i++)
		for (j = 0; j < st[i]->ngpus; j++) {
			const struct gpu *g = &st[i]->gpus[j];
			double w = report_window(st[i]);
			float bins[REPORT_BINS];

			if (g->stream >= 0)
				continue;
			report_bins(st[i], g, bins);
			fprintf(f, "<text x=\"0\" y=\"%d\">", y + row / 2 + 4);
			rank_label(f, st[i], 10);
			fprintf(f, ", GPU %lld</text>\n<text x=\"0\" y=\"%d\" class=\"small\">%.0f%% busy, "
			        "%.1f ms</text>\n", (long long)g->dev, y + row / 2 + 18,
			        w > 0 ? 100 * g->busy / w : 0, w / 1000);
			fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#eee\"/>\n",
			        left, y + 2, REPORT_BINS * bw, row - 6);
			for (k = 0; k < REPORT_BINS; k++) {
				int h = (int)(bins[k] * (row - 6) + 0.5);

				if (h > 0)
					fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
					        "fill=\"%s\"/>\n", left + k * bw, y + row - 4 - h, bw, h,
					        colors[i % NCOLORS]);
			}
			y += row;
		}
	fprintf(f, "</svg>\n");
}

/* Step time per iteration, one line per rank. */
static void steps_chart(FILE *f, struct rstats *const *st, size_t n)
{
	const int wd = 800, ht = 240, left = 60, bottom = 30;
	size_t i, j, most = 0;
	double top = 0;

	for (i = 0; i < n; i++) {
		if (st[i]->step_spans.n > most)
			most = st[i]->step_spans.n;
		for (j = 0; j < st[i]->step_spans.n; j++)
			if (st[i]->step_spans.v[j].b - st[i]->step_spans.v[j].a > top)
				top = st[i]->step_spans.v[j].b - st[i]->step_spans.v[j].a;
	}
	if (most == 0 || top <= 0)
		return;
	top *= 1.1;
	fprintf(f, "<h2>Step time per rank</h2>\n<svg width=\"%d\" height=\"%d\" role=\"img\">\n"
	        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n"
	        "<line x1=\"%d\" y1=\"0\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n"
	        "<text x=\"0\" y=\"12\" class=\"small\">%.2f ms</text>\n"
	        "<text x=\"0\" y=\"%d\" class=\"small\">0</text>\n"
	        "<text x=\"%d\" y=\"%d\" class=\"small\">iteration (in the order captured)</text>\n",
	        wd + left + 10, ht + bottom, left, ht, left + wd, ht, left, left, ht, top / 1000,
	        ht, left, ht + 20);
	for (i = 0; i < n; i++) {
		const struct spans *sp = &st[i]->step_spans;

		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
		        colors[i % NCOLORS]);
		for (j = 0; j < sp->n; j++)
			fprintf(f, "%.1f,%.1f ", left + (most > 1 ? (double)wd * j / (most - 1) : wd / 2.0),
			        ht - (sp->v[j].b - sp->v[j].a) / top * ht);
		fprintf(f, "\"/>\n<text x=\"%d\" y=\"%zu\" fill=\"%s\">", left + wd - 120,
		        16 + 16 * i, colors[i % NCOLORS]);
		rank_label(f, st[i], 16);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
}

/* The top kernels of a rank as horizontal bars of their share. */
static void kernel_bars(FILE *f, const struct rstats *s, size_t top)
{
	struct kstat **v = report_ranked(&s->kernels);
	size_t i, rows = s->kernels.n < top ? s->kernels.n : top;

	if (v == NULL || rows == 0) {
		free(v);
		return;
	}
	fprintf(f, "<h3>Top kernels by GPU time</h3>\n<svg width=\"980\" height=\"%zu\" "
	        "role=\"img\">\n", rows * 20 + 4);
	for (i = 0; i < rows; i++) {
		double share = s->kernel_total > 0 ? v[i]->total / s->kernel_total : 0;

		fprintf(f, "<rect x=\"0\" y=\"%zu\" width=\"%.1f\" height=\"15\" fill=\"%s\"/>\n"
		        "<text x=\"%.1f\" y=\"%zu\" class=\"small\">%.1f%% %.3f ms x%llu ", 20 * i,
		        300 * share, v[i]->nccl ? "#d62728" : "#1f77b4", 300 * share + 4, 20 * i + 12,
		        100 * share, v[i]->total / 1000, (unsigned long long)v[i]->count);
		esc_cut(f, v[i]->name, 87);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
	free(v);
}

static void table_head(FILE *f, const char *const *cols, size_t n)
{
	size_t i;

	fprintf(f, "<table><tr>");
	for (i = 0; i < n; i++)
		fprintf(f, "<th>%s</th>", cols[i]);
	fprintf(f, "</tr>\n");
}

static void kstat_table(FILE *f, const struct kmap *m, size_t top, double total, bool copies)
{
	static const char *const cols[] = { "share", "total ms", "count", "mean us", "median us",
	                                    "max us", "GB/s", "name" };
	struct kstat **v = report_ranked(m);
	size_t i;

	if (v == NULL)
		return;
	table_head(f, cols, 8);
	for (i = 0; i < m->n && i < top; i++) {
		fprintf(f, "<tr><td>%.1f%%</td><td>%.3f</td><td>%llu</td><td>%.1f</td><td>%.1f</td>"
		        "<td>%.1f</td><td>", total > 0 ? 100 * v[i]->total / total : 0,
		        v[i]->total / 1000, (unsigned long long)v[i]->count,
		        v[i]->total / (double)v[i]->count, v[i]->median, v[i]->max);
		if (copies && v[i]->total > 0)
			fprintf(f, "%.1f", (double)v[i]->bytes / v[i]->total / 1000);
		fprintf(f, "</td><td class=name>");
		fmt_html_esc(f, v[i]->name);
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table>\n");
	free(v);
}

static void rank_section(FILE *f, const struct rstats *s, size_t top)
{
	double w = report_window(s);
	char where[320];
	size_t i, j;

	fprintf(f, "<h2>");
	rank_label(f, s, 0);
	fprintf(f, "</h2>\n<p class=note>");
	fmt_html_esc(f, s->path);
	fprintf(f, ": window %.3f ms, %llu events, %llu on the GPU", w / 1000,
	        (unsigned long long)s->events, (unsigned long long)s->gpu_events);
	if (s->steps.n)
		fprintf(f, "; %zu iterations, median %.3f ms (min %.3f, max %.3f)", s->steps.n,
		        report_median(&s->steps) / 1000, s->steps.v[0] / 1000.0,
		        s->steps.v[s->steps.n - 1] / 1000.0);
	fprintf(f, "; CUDA API %.3f ms (%.3f ms synchronising); kernels %.3f ms, NCCL %.3f ms</p>\n",
	        s->runtime_total / 1000, s->sync_total / 1000, s->kernel_total / 1000, s->nccl / 1000);
	if (s->error[0]) {
		fprintf(f, "<p class=warn>");
		fmt_html_esc(f, s->error);
		fprintf(f, "</p>\n");
	}
	for (i = 0; i < s->ngpus; i++) {
		const struct gpu *g = &s->gpus[i];

		if (g->stream >= 0)
			continue;
		fprintf(f, "<p>GPU %lld: busy %.3f ms (%.1f%%); idle gaps &lt;10us %.3f, 10-100us %.3f, "
		        "0.1-1ms %.3f, 1-10ms %.3f, &ge;10ms %.3f ms; idle after synchronising calls "
		        "%.3f ms in %u gaps", (long long)g->dev, g->busy / 1000,
		        w > 0 ? 100 * g->busy / w : 0, g->idle_bucket[0] / 1000, g->idle_bucket[1] / 1000,
		        g->idle_bucket[2] / 1000, g->idle_bucket[3] / 1000, g->idle_bucket[4] / 1000,
		        g->idle_after_sync / 1000, (unsigned)g->sync_gaps);
		for (j = i + 1; j < s->ngpus && s->gpus[j].dev == g->dev; j++) /* its streams */
			fprintf(f, "; stream %lld %.1f%%", (long long)s->gpus[j].stream,
			        w > 0 ? 100 * s->gpus[j].busy / w : 0);
		fprintf(f, "</p>\n<p>Longest idle gaps:</p><ul>\n");
		for (j = 0; j < REPORT_TOP_GAPS && g->top_gaps[j].b > g->top_gaps[j].a; j++) {
			report_where(s, g->dev, (g->top_gaps[j].a + g->top_gaps[j].b) / 2, true, where,
			             sizeof(where));
			fprintf(f, "<li>%.3f ms at +%.3f ms, the CPU ", (g->top_gaps[j].b - g->top_gaps[j].a) /
			        1000, (g->top_gaps[j].a - s->t0) / 1000);
			fmt_html_esc(f, where);
			fprintf(f, "</li>\n");
		}
		fprintf(f, "</ul>\n");
	}
	if (s->nstretches) {
		fprintf(f, "<p>Launch-bound stretches (GPU idle %.3f ms in all):</p><ul>\n",
		        s->stretch_idle / 1000);
		for (j = 0; j < s->nstretches; j++) {
			report_stretch_text(s, &s->stretches[j], where, sizeof(where));
			fprintf(f, "<li>");
			fmt_html_esc(f, where);
			fprintf(f, "</li>\n");
		}
		fprintf(f, "</ul>\n");
	}
	kernel_bars(f, s, top);
	report_ops_html(f, s, top);
	if (s->kernels.n) {
		fprintf(f, "<h3>Kernels</h3>\n");
		kstat_table(f, &s->kernels, top, s->kernel_total, false);
	}
	if (s->copies.n) {
		fprintf(f, "<h3>Copies and sets</h3>\n");
		kstat_table(f, &s->copies, top, 0, true);
	}
	if (s->ranges.n) {
		static const char *const cols[] = { "CPU ms", "GPU ms", "GPU span ms", "GPU ops",
		                                    "count", "name" };
		struct kstat **v = report_ranked(&s->ranges);

		fprintf(f, "<h3>Ranges (NVTX, record_function, nn.Module): GPU work launched inside "
		        "them</h3>\n");
		table_head(f, cols, 6);
		for (j = 0; v != NULL && j < s->ranges.n && j < top; j++) {
			const struct range_gpu *g = report_range_gpu(s, v[j]);

			fprintf(f, "<tr><td>%.3f</td>", v[j]->total / 1000);
			if (g != NULL)
				fprintf(f, "<td>%.3f</td><td>%.3f</td><td>%llu</td>", g->gpu / 1000,
				        g->span / 1000, (unsigned long long)g->ops);
			else
				fprintf(f, "<td>-</td><td>-</td><td>-</td>");
			fprintf(f, "<td>%llu</td><td class=name>", (unsigned long long)v[j]->count);
			fmt_html_esc(f, v[j]->name);
			fprintf(f, "</td></tr>\n");
		}
		fprintf(f, "</table>\n");
		free(v);
	}
}

void report_html(FILE *f, struct rstats *const *st, size_t n, size_t top)
{
	struct finding fs[64];
	size_t i, k = report_findings(st, n, fs, sizeof(fs) / sizeof(fs[0]));

	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	        "<title>gprofctl report</title>\n<style>\n"
	        "body{font-family:sans-serif;margin:1.5em;max-width:1100px;color:#222}\n"
	        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;"
	        "padding:2px 6px;text-align:right;font-size:13px}td.name{text-align:left;"
	        "font-family:monospace;max-width:600px;overflow-wrap:anywhere}\n"
	        "svg text{font-size:12px}svg text.small{font-size:11px;fill:#555}\n"
	        ".note{color:#555;font-size:13px}.warn{color:#b00}\n"
	        "ol.findings li{margin:.4em 0}\n</style></head><body>\n"
	        "<h1>gprofctl report</h1>\n<p class=note>%zu trace file%s</p>\n<h2>Findings</h2>\n",
	        n, n == 1 ? "" : "s");
	if (k == 0)
		fprintf(f, "<p>Nothing stands out.</p>\n");
	fprintf(f, "<ol class=findings>\n");
	for (i = 0; i < k; i++) {
		fprintf(f, "<li>");
		fmt_html_esc(f, fs[i].text);
		fprintf(f, "</li>\n");
	}
	fprintf(f, "</ol>\n");
	timeline(f, st, n);
	steps_chart(f, st, n);
	if (report_one_job(st, n)) {
		static const char *const cols[] = { "rank", "step ms (median)", "GPU busy %",
		                                    "NCCL ms / iteration", "kernel ms" };

		fprintf(f, "<h2>Across ranks</h2>\n");
		table_head(f, cols, 5);
		for (i = 0; i < n; i++) {
			const struct gpu *g = report_busiest(st[i]);
			double w = report_window(st[i]);

			fprintf(f, "<tr><td>%lld</td><td>%.3f</td><td>%.1f</td><td>%.3f</td><td>%.3f</td>"
			        "</tr>\n", (long long)st[i]->rank, report_median(&st[i]->steps) / 1000,
			        w > 0 && g ? 100 * g->busy / w : 0,
			        st[i]->nccl / report_iterations_or_1(st[i]) / 1000, st[i]->kernel_total / 1000);
		}
		fprintf(f, "</table>\n");
	}
	for (i = 0; i < n; i++)
		rank_section(f, st[i], top);
	fprintf(f, "<p class=note>Written by gprofctl report; figures as in <code>gprofctl report "
	        "--json</code>.</p>\n</body></html>\n");
}
