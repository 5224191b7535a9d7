/*
 * report_ops: the operator table (issue 27), equal in meaning to
 * torch.profiler's key_averages().table(sort_by="self_cuda_time_total"),
 * for traces with PyTorch operators (cpu_op events: Kineto's,
 * torch.profiler's own, the agent's).
 *
 * During report.c's pass, report_ops_fold keeps per operator (cpu_op and
 * user_annotation, i.e. record_function scopes and ProfilerStep#N) its
 * span, thread, name, input shapes and sequence number; per nn.Module
 * scope its span; per CUDA runtime or driver call its correlation id,
 * thread and time; per GPU record (kernel, copy, set) its correlation id
 * and duration. About 80 bytes an operator; nothing else of the file.
 * report_ops_finish then does what torch.profiler does:
 *   - operators form one tree per thread (pid, tid): sorted by start, then
 *     longest first, each one's parent is the innermost earlier operator
 *     that encloses it (torch's _populate_cpu_children, the same rule);
 *   - CPU total = the duration; CPU self = the duration minus the
 *     children's durations;
 *   - each GPU record belongs to the innermost operator on the thread of
 *     the runtime call that launched it (the call with its correlation id)
 *     enclosing that call: CUDA self = the records launched by the
 *     operator itself, CUDA total = self plus the children's totals;
 *   - an operator's module is the innermost scope around it on its thread,
 *     an "nn.Module: X" or a record_function (user_annotation other than
 *     ProfilerStep#), else (backward operators, which run on autograd's
 *     thread outside any module) the module of the forward operator with
 *     its sequence number, else its parent's.
 * Rows group operators by name (ProfilerStep#N as ProfilerStep*, as
 * torch names it) or, with --group-by-shape, by name and input shapes;
 * shares are of all self CPU time, and of all GPU time in the trace (a
 * record no operator launched counts in the total, and is shown apart).
 *
 * Ownership: st->ops belongs to the rstats (report_ops_free); the outputs
 * (report_ops_out.c) read it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "report.h"
#include "report_ops.h"

/* A CUDA call and a GPU record are most of a trace's events: 16 and 12
 * bytes each (CUPTI's correlation ids are 32 bits; the call's thread an
 * index into threads). */
struct rlaunch { double ts; uint32_t corr, thr; };
struct thread { int64_t pid, tid; };

/* s's index in t, added when new; NONE when out of memory. */
static uint32_t intern(struct strtab *t, const char *s)
{
	size_t i;

	if ((t->n + 1) * 2 > t->mask + 1) {
		size_t nmask = t->mask ? t->mask * 2 + 1 : 63, k;
		size_t *slot = malloc((nmask + 1) * sizeof(*slot));

		if (slot == NULL)
			return NONE;
		for (k = 0; k <= nmask; k++)
			slot[k] = SIZE_MAX;
		for (k = 0; k < t->n; k++) {
			for (i = hash(t->v[k]) & nmask; slot[i] != SIZE_MAX; i = (i + 1) & nmask)
				;
			slot[i] = k;
		}
		free(t->slot);
		t->slot = slot;
		t->mask = nmask;
	}
	for (i = hash(s) & t->mask; t->slot[i] != SIZE_MAX; i = (i + 1) & t->mask)
		if (strcmp(t->v[t->slot[i]], s) == 0)
			return (uint32_t)t->slot[i];
	if (!grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)) ||
	    (t->v[t->n] = strdup(s)) == NULL)
		return NONE;
	t->slot[i] = t->n;
	return (uint32_t)t->n++;
}

static void strtab_free(struct strtab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	free(t->slot);
}

static bool add_span(struct rop **v, size_t *n, size_t *cap, const struct rop *r)
{
	if (!grow((void **)v, cap, *n + 1, sizeof(**v)))
		return false;
	(*v)[(*n)++] = *r;
	return true;
}

/* The index of thread (pid, tid); NONE when out of memory. A trace has a
 * few dozen threads and runs of calls on one: the last one found first. */
static uint32_t thread_of(struct rops *o, int64_t pid, int64_t tid)
{
	size_t i;

	if (o->nthr > o->lastthr && o->thr[o->lastthr].pid == pid && o->thr[o->lastthr].tid == tid)
		return (uint32_t)o->lastthr;
	for (i = 0; i < o->nthr; i++)
		if (o->thr[i].pid == pid && o->thr[i].tid == tid)
			break;
	if (i == o->nthr) {
		if (i >= NONE || !grow((void **)&o->thr, &o->capthr, i + 1, sizeof(*o->thr)))
			return NONE;
		o->thr[o->nthr++] = (struct thread){ pid, tid };
	}
	o->lastthr = i;
	return (uint32_t)i;
}

bool report_ops_fold(struct rstats *st, const struct rop_event *e)
{
	static const char modp[] = "nn.Module: ";
	bool cpu_op = strcmp(e->cat, "cpu_op") == 0, ann = strcmp(e->cat, "user_annotation") == 0;
	bool py = strcmp(e->cat, "python_function") == 0;
	struct rops *o = st->ops;
	struct rop r = { .a = e->ts, .b = e->ts + e->dur, .dur = e->dur, .pid = e->pid, .tid = e->tid,
	                 .seq = e->seq, .shape = NONE, .module = NONE, .parent = -1,
	                 .bwd = e->fwd_tid > 0, .scope = ann };

	if (o == NULL && (st->ops = o = calloc(1, sizeof(*o))) == NULL)
		return false;
	if ((py || ann || cpu_op) && strncmp(e->name, modp, sizeof(modp) - 1) == 0) {
		r.name = intern(&o->modules, e->name + sizeof(modp) - 1);
		return r.name != NONE && add_span(&o->mods, &o->nmods, &o->capmods, &r);
	}
	if (cpu_op || ann) {
		char step[16];
		const char *name = e->name;

		/* ProfilerStep#N: one row for all, as torch.profiler names it */
		if (strncmp(name, "ProfilerStep#", 13) == 0) {
			snprintf(step, sizeof(step), "ProfilerStep*");
			name = step;
			r.scope = false;
		}
		o->cpu_ops += cpu_op;
		r.name = intern(&o->names, name);
		if (e->shape != NULL && e->shape[0])
			r.shape = intern(&o->shapes, e->shape);
		return r.name != NONE && (e->shape == NULL || !e->shape[0] || r.shape != NONE) &&
		       add_span(&o->ops, &o->nops, &o->capops, &r);
	}
	if (e->corr < 0 || e->corr > UINT32_MAX)
		return true;
	if (strcmp(e->cat, "cuda_runtime") == 0 || strcmp(e->cat, "cuda_driver") == 0 ||
	    strcmp(e->cat, "Runtime") == 0 || strcmp(e->cat, "Driver") == 0) {
		uint32_t t = thread_of(o, e->pid, e->tid);

		if (t == NONE || !grow((void **)&o->l, &o->capl, o->nl + 1, sizeof(*o->l)))
			return false;
		o->l[o->nl++] = (struct rlaunch){ e->ts, (uint32_t)e->corr, t };
	}
	return true;
}

bool report_ops_gpu(struct rstats *st, int64_t corr, double dur)
{
	struct rops *o = st->ops;

	if (o == NULL && (st->ops = o = calloc(1, sizeof(*o))) == NULL)
		return false;
	o->gpu_total += dur;
	if (corr < 0 || corr > UINT32_MAX) {
		o->gpu_unattributed += dur;
		return true;
	}
	if (!grow((void **)&o->gcorr, &o->capg, o->ng + 1, sizeof(*o->gcorr)) ||
	    !grow((void **)&o->gdur, &o->capg2, o->ng + 1, sizeof(*o->gdur)))
		return false;
	o->gcorr[o->ng] = (uint32_t)corr;
	o->gdur[o->ng++] = dur;
	return true;
}

/* ---- after the pass ---- */

/* By thread, then start, then the longer first (an enclosing op before
 * what it encloses, when both start together). */
static int by_thread_start(const void *x, const void *y)
{
	const struct rop *a = x, *b = y;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	if (a->b != b->b)
		return a->b > b->b ? -1 : 1;
	return 0;
}

static int by_corr(const void *x, const void *y)
{
	const struct rlaunch *a = x, *b = y;

	return a->corr < b->corr ? -1 : a->corr > b->corr;
}

/* A forward operator's sequence number and module. Several ops share a
 * number (each peeks at the counter; the one that records the autograd
 * node advances it), all in one module: any of them names it. */
struct fwd { int64_t seq; uint32_t module; };

static int by_seq(const void *x, const void *y)
{
	const struct fwd *a = x, *b = y;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Each span's parent: the innermost earlier span on its thread that
 * encloses it (torch.profiler's rule: a candidate that ends before this
 * one starts, or ends before this one ends, is no parent and is dropped). */
static bool link(struct rop *v, size_t n)
{
	int32_t *stack = malloc((n ? n : 1) * sizeof(*stack));
	size_t i, depth = 0;

	if (stack == NULL)
		return false;
	for (i = 0; i < n; i++) {
		if (i > 0 && (v[i].pid != v[i - 1].pid || v[i].tid != v[i - 1].tid))
			depth = 0;
		while (depth > 0) {
			const struct rop *p = &v[stack[depth - 1]];

			if (v[i].a >= p->b || v[i].b > p->b)
				depth--;
			else
				break;
		}
		v[i].parent = depth > 0 ? stack[depth - 1] : -1;
		stack[depth++] = (int32_t)i;
	}
	free(stack);
	return true;
}

/* The innermost span of v (sorted, linked) on thread (pid, tid) holding
 * t, or -1. */
static int32_t innermost(const struct rop *v, size_t n, int64_t pid, int64_t tid, double t)
{
	size_t lo = 0, hi = n;
	int32_t i;

	/* the last span starting at or before t on that thread */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct rop *m = &v[mid];

		if (m->pid < pid || (m->pid == pid && (m->tid < tid || (m->tid == tid && m->a <= t))))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	i = (int32_t)lo - 1;
	if (v[i].pid != pid || v[i].tid != tid)
		return -1;
	while (i >= 0 && v[i].b < t)
		i = v[i].parent;
	return i;
}

bool report_ops_finish(struct rstats *st)
{
	struct rops *o = st->ops;
	struct fwd *fwd = NULL;
	size_t i, nfwd = 0;

	if (o == NULL)
		return true;
	if (o->nops)
		qsort(o->ops, o->nops, sizeof(*o->ops), by_thread_start);
	if (o->nmods)
		qsort(o->mods, o->nmods, sizeof(*o->mods), by_thread_start);
	if (o->nl)
		qsort(o->l, o->nl, sizeof(*o->l), by_corr);
	if (!link(o->ops, o->nops) || !link(o->mods, o->nmods))
		return false;
	/* GPU records to the operator that launched them */
	for (i = 0; i < o->ng; i++) {
		struct rlaunch key = { .corr = o->gcorr[i] }, *l = NULL;
		int32_t op = -1;

		if (o->nl)
			l = bsearch(&key, o->l, o->nl, sizeof(*o->l), by_corr);
		if (l != NULL)
			op = innermost(o->ops, o->nops, o->thr[l->thr].pid, o->thr[l->thr].tid, l->ts);
		if (op >= 0)
			o->ops[op].gself += o->gdur[i];
		else
			o->gpu_unattributed += o->gdur[i];
	}
	/* children come after their parent: walking back, each is complete
	 * when it is added to its parent */
	for (i = 0; i < o->nops; i++)
		o->ops[i].gtotal = o->ops[i].gself;
	for (i = o->nops; i-- > 0;) {
		struct rop *r = &o->ops[i];

		if (r->parent >= 0) {
			o->ops[r->parent].gtotal += r->gtotal;
			o->ops[r->parent].child_cpu += r->dur;
		}
	}
	/* modules: the scope around each op; forward ops' by sequence number */
	if (o->nops && (fwd = malloc(o->nops * sizeof(*fwd))) == NULL)
		return false;
	for (i = 0; i < o->nops; i++) {
		struct rop *r = &o->ops[i];
		int32_t m = innermost(o->mods, o->nmods, r->pid, r->tid, r->a);

		int32_t u = r->parent;

		while (m >= 0 && o->mods[m].b < r->b)
			m = o->mods[m].parent;
		if (m >= 0)
			r->module = o->mods[m].name;
		/* a record_function scope inside that module (or with none) is
		 * the nearer one */
		while (u >= 0 && !o->ops[u].scope)
			u = o->ops[u].parent;
		if (u >= 0 && (m < 0 || o->ops[u].a >= o->mods[m].a) &&
		    (r->module = intern(&o->modules, o->names.v[o->ops[u].name])) == NONE) {
			free(fwd);
			return false;
		}
		if (r->parent >= 0 && o->ops[r->parent].bwd) /* parents come first */
			r->bwd = true;
		if (r->module != NONE && !r->bwd && r->seq >= 0) {
			fwd[nfwd].seq = r->seq;
			fwd[nfwd++].module = r->module;
		}
		o->cpu_self_total += r->dur - r->child_cpu;
	}
	if (nfwd)
		qsort(fwd, nfwd, sizeof(*fwd), by_seq);
	for (i = 0; i < o->nops; i++) {
		struct rop *r = &o->ops[i];
		struct fwd key = { .seq = r->seq }, *f;

		if (r->module != NONE)
			continue;
		if (r->bwd && r->seq >= 0 && nfwd &&
		    (f = bsearch(&key, fwd, nfwd, sizeof(*fwd), by_seq)) != NULL)
			r->module = f->module;
		if (r->module == NONE && r->parent >= 0)
			r->module = o->ops[r->parent].module;
	}
	free(fwd);
	return true;
}

void report_ops_free(struct rstats *st)
{
	struct rops *o = st->ops;

	if (o == NULL)
		return;
	free(o->ops);
	free(o->mods);
	free(o->l);
	free(o->gcorr);
	free(o->gdur);
	free(o->thr);
	strtab_free(&o->names);
	strtab_free(&o->shapes);
	strtab_free(&o->modules);
	free(o);
	st->ops = NULL;
}
