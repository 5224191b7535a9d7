/*
 * report_ops_out: the operator table's rows (report_ops.c computed every
 * operator's and call's figures) and their outputs: text, JSON, HTML and
 * the findings. Rows are sorted by self CUDA time, then self CPU time,
 * then name; the calls' rows (no GPU time) thus come below the operators
 * that launched work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "jsonint.h"
#include "report.h"
#include "report_int.h"
#include "report_ops.h"

/* ---- the table ---- */

struct okey { uint32_t name, shape, module; bool bwd; size_t i; };

static int by_key(const void *x, const void *y)
{
	const struct okey *a = x, *b = y;

	if (a->name != b->name)
		return a->name < b->name ? -1 : 1;
	if (a->shape != b->shape)
		return a->shape < b->shape ? -1 : 1;
	if (a->module != b->module)
		return a->module < b->module ? -1 : 1;
	if (a->bwd != b->bwd)
		return a->bwd ? 1 : -1;
	return 0;
}

static const struct rops *ops_of(const struct rstats *st)
{
	return st->ops != NULL && st->ops->cpu_ops > 0 ? st->ops : NULL;
}

static const char *const *g_names; /* by_row's tie-break: set around its qsort */

/* Self CUDA time, largest first; then self CPU; then the name. */
static int by_row(const void *x, const void *y)
{
	const struct orow *a = x, *b = y;

	if (a->gpu_self != b->gpu_self)
		return a->gpu_self > b->gpu_self ? -1 : 1;
	if (a->cpu_self != b->cpu_self)
		return a->cpu_self > b->cpu_self ? -1 : 1;
	return strcmp(g_names[a->name], g_names[b->name]);
}

/*
 * The rows, sorted; *n their count. by_shape: one row per name and input
 * shapes (the table's --group-by-shape); modules: one per name, module
 * and pass (forward or backward), the findings'. NULL when out of memory.
 */
static struct orow *rows(const struct rops *o, bool by_shape, bool modules, size_t *n)
{
	size_t cap = o->nops + o->ncrows;
	struct okey *k = malloc((o->nops ? o->nops : 1) * sizeof(*k));
	struct orow *r = malloc((cap ? cap : 1) * sizeof(*r));
	size_t i, j, nk = 0, m = 0;
	uint32_t *row = NULL;

	*n = 0;
	if (k == NULL || r == NULL) {
		free(k);
		free(r);
		return NULL;
	}
	for (i = 0; i < o->nops; i++)
		if (!o->ops[i].dead)
			k[nk++] = (struct okey){ o->ops[i].name, by_shape ? o->ops[i].shape : NONE,
			                         modules ? o->ops[i].module : NONE,
			                         modules && o->ops[i].bwd, i };
	if (nk)
		qsort(k, nk, sizeof(*k), by_key);
	for (i = 0; i < nk; i++) {
		const struct rop *p = &o->ops[k[i].i];

		if (i == 0 || by_key(&k[i], &k[i - 1]) != 0)
			r[m++] = (struct orow){ k[i].name, k[i].shape, k[i].module, k[i].bwd,
			                        0, 0, 0, 0, 0 };
		r[m - 1].count++;
		r[m - 1].cpu_total += p->dur;
		r[m - 1].cpu_self += p->dur - p->child_cpu;
		r[m - 1].gpu_total += p->gtotal;
		r[m - 1].gpu_self += p->gself;
	}
	free(k);
	/* the calls' rows (no shapes, no module, no kernels of their own: none
	 * in the findings'), into an operator's of the same name if any */
	if (!modules && o->ncrows) {
		/* the operator row of each name without shapes, by name: a scan
		 * per call row would cost call names times operator names */
		if ((row = malloc((o->names.n ? o->names.n : 1) * sizeof(*row))) == NULL) {
			free(r);
			return NULL;
		}
		for (j = 0; j < o->names.n; j++)
			row[j] = NONE;
		for (j = 0; j < m; j++)
			if (r[j].shape == NONE)
				row[r[j].name] = (uint32_t)j;
	}
	for (i = 0; i < o->ncrows && !modules; i++) {
		const struct orow *c = &o->crows[i];

		j = row[c->name] != NONE ? row[c->name] : m;
		if (j == m) {
			r[m++] = *c;
		} else {
			r[j].count += c->count;
			r[j].cpu_total += c->cpu_total;
			r[j].cpu_self += c->cpu_self;
			r[j].gpu_total += c->gpu_total;
		}
	}
	free(row);
	g_names = (const char *const *)o->names.v;
	if (m)
		qsort(r, m, sizeof(*r), by_row);
	*n = m;
	return r;
}

static double share(double part, double whole)
{
	return whole > 0 ? part / whole : 0;
}

void report_ops_print(FILE *f, const struct rstats *st, size_t top)
{
	const struct rops *o = ops_of(st);
	struct orow *r;
	size_t n, i;

	if (o == NULL || (r = rows(o, st->ops_by_shape, false, &n)) == NULL)
		return;
	fprintf(f, "operators by self CUDA time (%zu %s, as torch.profiler's key_averages table; "
	        "GPU time %.3f ms, %.3f ms of it launched by no operator):\n"
	        "  %6s %12s %12s %6s %12s %12s %8s %s\n", n,
	        st->ops_by_shape ? "names and input shapes" : "names", o->gpu_total / 1000,
	        o->gpu_unattributed / 1000, "CUDA%", "CUDA self ms", "CUDA tot ms", "CPU%",
	        "CPU self ms", "CPU tot ms", "calls", "name");
	for (i = 0; i < n && i < top; i++) {
		fprintf(f, "  %5.1f%% %12.3f %12.3f %5.1f%% %12.3f %12.3f %8llu %.100s",
		        100 * share(r[i].gpu_self, o->gpu_total), r[i].gpu_self / 1000,
		        r[i].gpu_total / 1000, 100 * share(r[i].cpu_self, o->cpu_self_total),
		        r[i].cpu_self / 1000, r[i].cpu_total / 1000, (unsigned long long)r[i].count,
		        o->names.v[r[i].name]);
		if (st->ops_by_shape)
			fprintf(f, "  %.200s", r[i].shape != NONE ? o->shapes.v[r[i].shape] : "[]");
		fprintf(f, "\n");
	}
	free(r);
}

void report_ops_json(cJSON *parent, const struct rstats *st, size_t top)
{
	const struct rops *o = ops_of(st);
	cJSON *t, *a;
	struct orow *r;
	size_t n, i;

	if (o == NULL || (r = rows(o, st->ops_by_shape, false, &n)) == NULL)
		return;
	t = cJSON_AddObjectToObject(parent, "operators");
	cJSON_AddBoolToObject(t, "group_by_shape", st->ops_by_shape);
	jsonint_add(t, "rows_total", n);
	cJSON_AddNumberToObject(t, "gpu_us", o->gpu_total);
	cJSON_AddNumberToObject(t, "gpu_unattributed_us", o->gpu_unattributed);
	cJSON_AddNumberToObject(t, "cpu_self_us", o->cpu_self_total);
	a = cJSON_AddArrayToObject(t, "rows");
	for (i = 0; i < n && i < top; i++) {
		cJSON *x = cJSON_CreateObject();

		cJSON_AddStringToObject(x, "name", o->names.v[r[i].name]);
		if (st->ops_by_shape)
			cJSON_AddStringToObject(x, "input_shapes",
			                        r[i].shape != NONE ? o->shapes.v[r[i].shape] : "[]");
		jsonint_add(x, "count", r[i].count);
		cJSON_AddNumberToObject(x, "cpu_total_us", r[i].cpu_total);
		cJSON_AddNumberToObject(x, "cpu_self_us", r[i].cpu_self);
		cJSON_AddNumberToObject(x, "cuda_total_us", r[i].gpu_total);
		cJSON_AddNumberToObject(x, "cuda_self_us", r[i].gpu_self);
		cJSON_AddNumberToObject(x, "self_cpu_share", share(r[i].cpu_self, o->cpu_self_total));
		cJSON_AddNumberToObject(x, "self_cuda_share", share(r[i].gpu_self, o->gpu_total));
		cJSON_AddItemToArray(a, x);
	}
	free(r);
	if ((r = rows(o, false, true, &n)) == NULL)
		return;
	a = cJSON_AddArrayToObject(t, "by_module");
	for (i = 0; i < n && i < top && r[i].gpu_self > 0; i++) {
		cJSON *x = cJSON_CreateObject();

		cJSON_AddStringToObject(x, "name", o->names.v[r[i].name]);
		if (r[i].module != NONE)
			cJSON_AddStringToObject(x, "module", o->modules.v[r[i].module]);
		else
			cJSON_AddNullToObject(x, "module");
		cJSON_AddBoolToObject(x, "backward", r[i].bwd);
		jsonint_add(x, "count", r[i].count);
		cJSON_AddNumberToObject(x, "cuda_self_us", r[i].gpu_self);
		cJSON_AddNumberToObject(x, "self_cuda_share", share(r[i].gpu_self, o->gpu_total));
		cJSON_AddItemToArray(a, x);
	}
	free(r);
}

void report_ops_html(FILE *f, const struct rstats *st, size_t top)
{
	const struct rops *o = ops_of(st);
	struct orow *r;
	size_t n, i;

	if (o == NULL || (r = rows(o, st->ops_by_shape, false, &n)) == NULL)
		return;
	fprintf(f, "<h3>Operators by self CUDA time</h3>\n<p class=note>As torch.profiler's "
	        "key_averages table: %zu %s; GPU time %.3f ms, %.3f ms of it launched by no "
	        "operator.</p>\n<table><tr><th>self CUDA %%</th><th>self CUDA ms</th>"
	        "<th>CUDA total ms</th><th>self CPU %%</th><th>self CPU ms</th><th>CPU total ms</th>"
	        "<th>calls</th><th>name</th>%s</tr>\n", n,
	        st->ops_by_shape ? "names and input shapes" : "names", o->gpu_total / 1000,
	        o->gpu_unattributed / 1000, st->ops_by_shape ? "<th>input shapes</th>" : "");
	for (i = 0; i < n && i < top; i++) {
		fprintf(f, "<tr><td>%.1f%%</td><td>%.3f</td><td>%.3f</td><td>%.1f%%</td><td>%.3f</td>"
		        "<td>%.3f</td><td>%llu</td><td class=name>",
		        100 * share(r[i].gpu_self, o->gpu_total), r[i].gpu_self / 1000,
		        r[i].gpu_total / 1000, 100 * share(r[i].cpu_self, o->cpu_self_total),
		        r[i].cpu_self / 1000, r[i].cpu_total / 1000, (unsigned long long)r[i].count);
		fmt_html_esc(f, o->names.v[r[i].name]);
		if (st->ops_by_shape) {
			fprintf(f, "</td><td class=name>");
			fmt_html_esc(f, r[i].shape != NONE ? o->shapes.v[r[i].shape] : "[]");
		}
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table>\n");
	free(r);
}

size_t report_ops_findings(const struct rstats *st, const char *who, struct finding *out,
                           size_t k, size_t max)
{
	const struct rops *o = ops_of(st);
	struct orow *r;
	size_t n, i;

	if (o == NULL || o->gpu_total <= 0 || (r = rows(o, false, true, &n)) == NULL)
		return k;
	/* the operators (in their module) that take a tenth of the GPU or more */
	for (i = 0; i < n && i < 3 && k < max; i++) {
		double s = share(r[i].gpu_self, o->gpu_total);

		if (s < 0.1)
			break;
		report_finding(&out[k], st, "operator", s);
		report_evidence(&out[k], "cuda_self_us", r[i].gpu_self, false);
		report_evidence(&out[k], "gpu_us", o->gpu_total, false);
		report_evidence(&out[k], "share", s, false);
		report_evidence(&out[k], "calls", (double)r[i].count, true);
		snprintf(out[k].text, sizeof(out[k].text), "%s%.200s%s%.100s%s: %.0f%% of GPU time "
		         "(%.3f ms of kernels it launched itself, %llu call%s); the operator table "
		         "ranks the rest", who, o->names.v[r[i].name], r[i].module != NONE ? " in " : "",
		         r[i].module != NONE ? o->modules.v[r[i].module] : "",
		         r[i].bwd ? " (backward)" : "", 100 * s, r[i].gpu_self / 1000,
		         (unsigned long long)r[i].count, r[i].count == 1 ? "" : "s");
		k++;
	}
	free(r);
	return k;
}
