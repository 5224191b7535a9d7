/*
 * report_ops: the operator table (issue 27), equal to torch.profiler's
 * key_averages().table(sort_by="self_cuda_time_total") on the trace it
 * exported, for traces with PyTorch operators (cpu_op events: Kineto's,
 * torch.profiler's own, the agent's).
 *
 * During report.c's pass, report_ops_fold keeps per operator (cpu_op and
 * user_annotation, i.e. record_function scopes and ProfilerStep#N) its
 * span, thread, name, input shapes and sequence number (96 bytes); per
 * nn.Module scope its span; per CUDA runtime or driver call and CUPTI
 * overhead record ("Activity Buffer Request", cat overhead) its span,
 * name, thread, correlation id and whether it has an External id (32
 * bytes: they are most of a trace's events); per GPU record (kernel,
 * copy, set) its correlation id, start and duration (the start for the
 * ranges, report_ranges.c). Nothing else of the file.
 * report_ops_finish then does what torch.profiler's _parse_kineto_results
 * and EventList._build_tree do:
 *   - the operators torch leaves out (_filter_name: aten::is_leaf,
 *     aten::output_nr, aten::_version, profiler::_record_function_*) are
 *     not kept: their time is their parent's;
 *   - each GPU record belongs to the innermost operator on the thread of
 *     the runtime call that launched it (the call with its correlation id)
 *     enclosing that call, which is the operator Kineto's External id names;
 *   - the calls are CPU events too: a call with an External id sits on its
 *     own thread (its operator's), one without (a call outside every
 *     operator, CUPTI's overhead, written with pid -1) on the thread that
 *     stopped the profiler, the main thread (Kineto gives an unlinked
 *     event at::RecordFunction::currentThreadId() of the thread stopping
 *     it); in a trace where no call has an External id (the agent's) each
 *     call stays on its own thread;
 *   - operators and calls form one tree per thread (pid, tid): sorted by
 *     start, then longest first, each one's parent is the innermost
 *     earlier event that encloses it (_populate_cpu_children, the same
 *     rule); a node that is the only child of a parent of the same name is
 *     merged into it, its kernels and children going up (_remove_dup_nodes);
 *   - CPU total = the duration; CPU self = the duration minus the
 *     children's durations, calls included (a launch inside aten::addmm is
 *     not addmm's self time); CUDA self = the records launched by the
 *     operator itself (a call has none); CUDA total = self plus the
 *     children's totals;
 *   - an operator's module is the innermost scope around it on its thread,
 *     an "nn.Module: X" or a record_function (user_annotation other than
 *     ProfilerStep#), else (backward operators, which run on autograd's
 *     thread outside any module) the module of the forward operator with
 *     its sequence number, else its parent's.
 * Rows group operators by name (ProfilerStep#N as ProfilerStep*, as
 * torch names it) or, with --group-by-shape, by name and input shapes
 * (report.c writes a list-of-tensors argument's shape as [], as
 * key_averages keys it); each call name is a row too (cudaLaunchKernel,
 * Activity Buffer Request...: no shapes, no CUDA time, so below the
 * operators with GPU time in the sort). key_averages' rows for GPU
 * records (kernels, memsets, gpu_user_annotation), which have no CPU time,
 * are the report's kernel and range tables instead. Shares are of all self
 * CPU time (calls included) and of all GPU time in the trace (a record no
 * operator launched counts in the total, and is shown apart).
 *
 * tests/integration/test-report-ops.py's test_key_averages holds the
 * table to key_averages itself on an H200 trace (tests/fixtures/traces/
 * ops/h200-torch211-*). Where it differs, on purpose: torch 2.11 gave
 * CUPTI's overhead records CUDA time. There an Activity Buffer Request
 * inside aten::addmm got the 27.551 us kernel that addmm launched,
 * which then counted twice in the CUDA totals of addmm and the
 * aten::linear around it, key_averages' self CUDA times adding up to
 * 27.551 us more than the trace's GPU time. Kineto writes no id for an
 * overhead record, so the trace does not say which kernels torch gives
 * it; here it gets none, and every GPU record counts once.
 *
 * Ownership: st->ops belongs to the rstats (report_ops_free); the outputs
 * (report_ops_out.c) read it. The calls live only until report_ops_finish,
 * which leaves their rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "report.h"
#include "report_int.h"
#include "report_ops.h"


static bool str_is(const void *ctx, uint32_t pos, const void *key)
{
	return strcmp(((const struct strtab *)ctx)->v[pos], key) == 0;
}

/* s's index in t, added when new; NONE when out of memory. */
static uint32_t intern(struct strtab *t, const char *s)
{
	uint64_t h = htab_hash(s, strlen(s));
	uint32_t pos = htab_find(&t->idx, h, str_is, t, s);

	if (pos != NONE)
		return pos;
	if (t->n >= NONE || !grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)) ||
	    (t->v[t->n] = strdup(s)) == NULL)
		return NONE;
	if (htab_add(&t->idx, h, (uint32_t)t->n) < 0) {
		free(t->v[t->n]);
		return NONE;
	}
	return (uint32_t)t->n++;
}

static void strtab_free(struct strtab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	htab_deinit(&t->idx);
}

static bool add_span(struct rop **v, size_t *n, size_t *cap, const struct rop *r)
{
	if (!grow((void **)v, cap, *n + 1, sizeof(**v)))
		return false;
	(*v)[(*n)++] = *r;
	return true;
}

static bool thread_is(const void *ctx, uint32_t pos, const void *key)
{
	const struct thread *a = &((const struct rops *)ctx)->thr[pos], *b = key;

	return a->pid == b->pid && a->tid == b->tid;
}

/* The index of thread (pid, tid); NONE when out of memory. Runs of calls
 * come on one thread: the last one found is tried first; the others through
 * thr_idx, since a trace names as many threads as it likes. */
static uint32_t thread_of(struct rops *o, int64_t pid, int64_t tid)
{
	struct thread k = { pid, tid };
	uint64_t h;
	uint32_t i;

	if (o->nthr > o->lastthr && o->thr[o->lastthr].pid == pid && o->thr[o->lastthr].tid == tid)
		return (uint32_t)o->lastthr;
	h = htab_hash(&k, sizeof(k));
	if ((i = htab_find(&o->thr_idx, h, thread_is, o, &k)) == NONE) {
		i = (uint32_t)o->nthr;
		if (i >= NONE || !grow((void **)&o->thr, &o->capthr, i + 1, sizeof(*o->thr)) ||
		    htab_add(&o->thr_idx, h, i) < 0)
			return NONE;
		o->thr[o->nthr++] = k;
	}
	o->lastthr = i;
	return i;
}

uint32_t report_ops_thread(const struct rops *o, int64_t pid, int64_t tid)
{
	struct thread k = { pid, tid };

	return htab_find(&o->thr_idx, htab_hash(&k, sizeof(k)), thread_is, o, &k);
}

/* Operators torch.profiler leaves out of its table (_filter_name): the
 * profiler's own and three autograd utilities; their time is their
 * parent's. */
static bool filtered(const char *name)
{
	static const char *const skip[] = {
		"profiler::_record_function_enter", "profiler::_record_function_enter_new",
		"profiler::_record_function_exit", "aten::is_leaf", "aten::output_nr",
		"aten::_version",
	};
	size_t i;

	for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (strcmp(name, skip[i]) == 0)
			return true;
	return false;
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
	struct rcall c = { e->ts, e->dur, NONE, NONE, NONE, e->linked };

	if (o == NULL && (st->ops = o = calloc(1, sizeof(*o))) == NULL)
		return false;
	if ((py || ann || cpu_op) && strncmp(e->name, modp, sizeof(modp) - 1) == 0) {
		r.name = intern(&o->modules, e->name + sizeof(modp) - 1);
		return r.name != NONE && add_span(&o->mods, &o->nmods, &o->capmods, &r);
	}
	if (cpu_op || ann) {
		char step[16];
		const char *name = e->name;

		if (filtered(name))
			return true;
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
	if (py)
		return true;
	/* a CUDA runtime or driver call, or CUPTI's overhead */
	if (e->corr >= 0 && e->corr < NONE)
		c.corr = (uint32_t)e->corr;
	if (e->pid >= 0 && (c.thr = thread_of(o, e->pid, e->tid)) == NONE)
		return false;
	/* runs of one name (cudaLaunchKernel...): the last one's index first */
	if (o->ncalls > 0 && strcmp(o->names.v[o->calls[o->ncalls - 1].name], e->name) == 0)
		c.name = o->calls[o->ncalls - 1].name;
	else if ((c.name = intern(&o->names, e->name)) == NONE)
		return false;
	if (!grow((void **)&o->calls, &o->capcalls, o->ncalls + 1, sizeof(*o->calls)))
		return false;
	o->calls[o->ncalls++] = c;
	o->linked_calls += c.linked;
	return true;
}

bool report_ops_gpu(struct rstats *st, int64_t corr, double ts, double dur)
{
	struct rops *o = st->ops;

	if (o == NULL && (st->ops = o = calloc(1, sizeof(*o))) == NULL)
		return false;
	o->gpu_total += dur;
	if (corr < 0 || corr >= NONE) {
		o->gpu_unattributed += dur;
		return true;
	}
	if (!grow((void **)&o->gcorr, &o->capg, o->ng + 1, sizeof(*o->gcorr)) ||
	    !grow((void **)&o->gdur, &o->capg2, o->ng + 1, sizeof(*o->gdur)) ||
	    !grow((void **)&o->gts, &o->capg3, o->ng + 1, sizeof(*o->gts)))
		return false;
	o->gts[o->ng] = ts;
	o->gcorr[o->ng] = (uint32_t)corr;
	o->gdur[o->ng++] = dur;
	return true;
}

/* ---- after the pass ---- */

/* By start, then the longer first (an enclosing span before what it
 * encloses, when both start together): spans a0-a1 and b0-b1. */
static int by_start(double a0, double a1, double b0, double b1)
{
	if (a0 != b0)
		return a0 < b0 ? -1 : 1;
	if (a1 != b1)
		return a1 > b1 ? -1 : 1;
	return 0;
}

/* By thread, then start, then the longer first. */
static int by_thread_start(const void *x, const void *y)
{
	const struct rop *a = x, *b = y;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return by_start(a->a, a->b, b->a, b->b);
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

/* v[i]'s depth and jump pointer, its parent's being set: the jump goes as
 * far as the parent's two jumps when those two cover equal distances, else
 * to the parent (Myers, "An applicative random-access stack", 1983), which
 * gives any ancestor within O(log depth) jumps and steps. */
static void set_jump(struct rop *v, size_t i)
{
	int32_t p = v[i].parent, j;

	v[i].depth = 0;
	v[i].jump = -1;
	if (p < 0)
		return;
	v[i].depth = v[p].depth + 1;
	j = v[p].jump;
	if (j >= 0 && v[j].jump >= 0 &&
	    v[p].depth - v[j].depth == v[j].depth - v[v[j].jump].depth)
		v[i].jump = v[j].jump;
	else
		v[i].jump = p;
}

/* i, or the nearest of its ancestors that ends at or after t; -1 when none
 * does. Ends never decrease going up (a parent encloses its children), so
 * a jump whose target still ends before t skips only spans that do too.
 * A trace can nest as deep as it likes: a step at a time would make this
 * linear in the depth, and the callers' work the depth times the queries. */
static int32_t climb(const struct rop *v, int32_t i, double t)
{
	htab_counts.lookups++;
	while (i >= 0 && v[i].b < t) {
		int32_t j = v[i].jump;

		htab_counts.probes++;
		i = j >= 0 && v[j].b < t ? j : v[i].parent;
	}
	return i;
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
		set_jump(v, i);
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
	return climb(v, i, t);
}

/* ---- the CPU tree: operators and calls together ---- */

/*
 * torch.profiler's tree (_populate_cpu_children) holds every CPU-side
 * event, the CUDA calls and CUPTI's overhead with the operators: a call
 * inside an operator is one of its children. Node m is operator m when m <
 * nops, else call m - nops. Built by report_ops_finish and gone after it.
 */
struct tree {
	struct rops *o;
	size_t n;
	uint32_t *up;              /* each node's parent; NONE: a root */
	uint32_t *kids;            /* its number of children */
	uint32_t *order;           /* the nodes by thread and start: parents first */
	bool *dead;                /* merged into its parent */
	double *cchild, *cgtotal;  /* per call: its children's CPU time, GPU total */
};

static bool is_op(const struct tree *t, uint32_t m)
{
	return m < t->o->nops;
}

static const struct rcall *call_of(const struct tree *t, uint32_t m)
{
	return &t->o->calls[m - t->o->nops];
}

static double node_a(const struct tree *t, uint32_t m)
{
	return is_op(t, m) ? t->o->ops[m].a : call_of(t, m)->ts;
}

static double node_b(const struct tree *t, uint32_t m)
{
	return is_op(t, m) ? t->o->ops[m].b : call_of(t, m)->ts + call_of(t, m)->dur;
}

static double node_dur(const struct tree *t, uint32_t m)
{
	return is_op(t, m) ? t->o->ops[m].dur : call_of(t, m)->dur;
}

static uint32_t node_name(const struct tree *t, uint32_t m)
{
	return is_op(t, m) ? t->o->ops[m].name : call_of(t, m)->name;
}

static double *node_child(struct tree *t, uint32_t m)
{
	return is_op(t, m) ? &t->o->ops[m].child_cpu : &t->cchild[m - t->o->nops];
}

static double *node_gtotal(struct tree *t, uint32_t m)
{
	return is_op(t, m) ? &t->o->ops[m].gtotal : &t->cgtotal[m - t->o->nops];
}

static int by_corr(const void *x, const void *y)
{
	const struct rcall *a = x, *b = y;

	return a->corr < b->corr ? -1 : a->corr > b->corr;
}

/* By thread (threads sorted, so as the operators), start, the longer first. */
static int by_thread_call(const void *x, const void *y)
{
	const struct rcall *a = x, *b = y;

	if (a->thr != b->thr)
		return a->thr < b->thr ? -1 : 1;
	return by_start(a->ts, a->ts + a->dur, b->ts, b->ts + b->dur);
}

/* A thread and its index before the sort. */
struct thread_ix { struct thread t; uint32_t old; };

static int by_pid_tid(const void *x, const void *y)
{
	const struct thread *a = &((const struct thread_ix *)x)->t;
	const struct thread *b = &((const struct thread_ix *)y)->t;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* Each GPU record to the operator that launched it: the innermost one
 * around the call with its correlation id, on that call's thread. */
static void attribute_gpu(struct rops *o)
{
	size_t i;

	if (o->ncalls)
		qsort(o->calls, o->ncalls, sizeof(*o->calls), by_corr);
	for (i = 0; i < o->ng; i++) {
		struct rcall key = { .corr = o->gcorr[i] }, *c = NULL;
		int32_t op = -1;

		if (o->ncalls)
			c = bsearch(&key, o->calls, o->ncalls, sizeof(*o->calls), by_corr);
		if (c != NULL && c->thr != NONE)
			op = innermost(o->ops, o->nops, o->thr[c->thr].pid, o->thr[c->thr].tid, c->ts);
		if (op >= 0)
			o->ops[op].gself += o->gdur[i];
		else
			o->gpu_unattributed += o->gdur[i];
	}
}

/*
 * The thread each call sits on in the tree, as torch.profiler places it:
 * a call Kineto linked to an operator (it has an External id) on that
 * operator's thread, which is its own (Kineto links a call to the
 * operator open on its thread); any other (a call outside every
 * operator, CUPTI's overhead) on the thread that stopped the profiler,
 * taken here as the process's main thread (tid = pid) or else the thread
 * of the first operator. A trace with no linked call at all (the agent's)
 * keeps each call on its own thread. Then the threads are sorted as the
 * operators are, and the calls by thread and start.
 */
static bool place_calls(struct rops *o)
{
	const struct rop *first = NULL;
	struct thread_ix *v;
	uint32_t mainthr = NONE, *pos;
	size_t i;

	for (i = 0; i < o->nops && mainthr == NONE; i++) {
		if (o->ops[i].tid == o->ops[i].pid &&
		    (mainthr = thread_of(o, o->ops[i].pid, o->ops[i].tid)) == NONE)
			return false;
		if (first == NULL || o->ops[i].a < first->a)
			first = &o->ops[i];
	}
	if (mainthr == NONE && first != NULL &&
	    (mainthr = thread_of(o, first->pid, first->tid)) == NONE)
		return false;
	for (i = 0; i < o->ncalls; i++)
		if (o->calls[i].thr == NONE || (o->linked_calls && !o->calls[i].linked))
			o->calls[i].thr = mainthr;
	/* the threads in (pid, tid) order, as the operators are: thread i
	 * becomes thread pos[i] */
	v = malloc((o->nthr ? o->nthr : 1) * sizeof(*v));
	pos = malloc((o->nthr ? o->nthr : 1) * sizeof(*pos));
	if (v == NULL || pos == NULL) {
		free(v);
		free(pos);
		return false;
	}
	htab_deinit(&o->thr_idx); /* the positions change: no lookups after this */
	for (i = 0; i < o->nthr; i++)
		v[i] = (struct thread_ix){ o->thr[i], (uint32_t)i };
	qsort(v, o->nthr, sizeof(*v), by_pid_tid);
	for (i = 0; i < o->nthr; i++) {
		o->thr[i] = v[i].t;
		pos[v[i].old] = (uint32_t)i;
	}
	for (i = 0; i < o->ncalls; i++)
		if (o->calls[i].thr != NONE)
			o->calls[i].thr = pos[o->calls[i].thr];
	o->lastthr = 0;
	free(v);
	free(pos);
	if (o->ncalls)
		qsort(o->calls, o->ncalls, sizeof(*o->calls), by_thread_call);
	return true;
}

/* Does operator r come before call c in the tree's order (thread, start,
 * the longer first; the operator first on a tie)? Calls with no thread
 * come last. */
static bool op_first(const struct rops *o, const struct rop *r, const struct rcall *c)
{
	const struct thread *h = c->thr != NONE ? &o->thr[c->thr] : NULL;

	if (h == NULL)
		return true;
	if (r->pid != h->pid)
		return r->pid < h->pid;
	if (r->tid != h->tid)
		return r->tid < h->tid;
	return by_start(r->a, r->b, c->ts, c->ts + c->dur) <= 0;
}

/* Each node's parent, as link() finds it for operators alone (both
 * arrays sorted, merged thread by thread); each parent's children counted
 * and their time added to its children's CPU time. */
static bool tree_link(struct tree *t)
{
	struct rops *o = t->o;
	uint32_t *stack = malloc((t->n ? t->n : 1) * sizeof(*stack));
	size_t i = 0, j = 0, k, depth = 0;
	int64_t pid = 0, tid = 0;

	if (stack == NULL)
		return false;
	for (k = 0; k < t->n; k++) {
		uint32_t m;
		int64_t p, q;

		if (j == o->ncalls || (i < o->nops && op_first(o, &o->ops[i], &o->calls[j]))) {
			m = (uint32_t)i++;
			p = o->ops[m].pid;
			q = o->ops[m].tid;
		} else if (o->calls[j].thr != NONE) {
			m = (uint32_t)(o->nops + j++);
			p = o->thr[call_of(t, m)->thr].pid;
			q = o->thr[call_of(t, m)->thr].tid;
		} else { /* no thread: a root of its own */
			m = (uint32_t)(o->nops + j++);
			t->up[m] = NONE;
			t->order[k] = m;
			depth = 0;
			continue;
		}
		if (k == 0 || p != pid || q != tid)
			depth = 0;
		pid = p;
		tid = q;
		while (depth > 0 && (node_a(t, m) >= node_b(t, stack[depth - 1]) ||
		                     node_b(t, m) > node_b(t, stack[depth - 1])))
			depth--;
		t->up[m] = depth > 0 ? stack[depth - 1] : NONE;
		if (depth > 0) {
			t->kids[stack[depth - 1]]++;
			*node_child(t, stack[depth - 1]) += node_dur(t, m);
		}
		stack[depth++] = m;
		t->order[k] = m;
	}
	free(stack);
	return true;
}

/* torch.profiler's _remove_dup_nodes: a node that is the only child of a
 * parent of the same name is merged into it (the parent takes its
 * children and its kernels, and it leaves the table). Parents come first
 * in order, so one pass merges chains too. */
static void tree_merge(struct tree *t)
{
	struct rops *o = t->o;
	size_t k;

	for (k = 0; k < t->n; k++) {
		uint32_t m = t->order[k], p = t->up[m];

		while (p != NONE && t->dead[p])
			p = t->up[p];
		t->up[m] = p;
		if (p == NONE || t->kids[p] != 1 || node_name(t, p) != node_name(t, m))
			continue;
		t->dead[m] = true;
		t->kids[p] = t->kids[m];
		*node_child(t, p) = *node_child(t, m);
		if (is_op(t, p))
			o->ops[p].gself = is_op(t, m) ? o->ops[m].gself : 0;
		if (is_op(t, m))
			o->ops[m].dead = true;
	}
}

/* GPU totals (a node's kernels and its children's totals, children
 * last in order), then the calls' rows by name; CPU self time summed. */
static bool tree_totals(struct tree *t)
{
	struct rops *o = t->o;
	uint32_t *row;
	size_t k;

	for (k = 0; k < o->nops; k++)
		o->ops[k].gtotal = o->ops[k].gself;
	for (k = t->n; k-- > 0;) {
		uint32_t m = t->order[k];

		if (!t->dead[m] && t->up[m] != NONE)
			*node_gtotal(t, t->up[m]) += *node_gtotal(t, m);
	}
	if ((row = malloc((o->names.n ? o->names.n : 1) * sizeof(*row))) == NULL)
		return false;
	for (k = 0; k < o->names.n; k++)
		row[k] = NONE;
	for (k = 0; k < o->ncalls; k++) {
		const struct rcall *c = &o->calls[k];
		struct orow *r;

		if (t->dead[o->nops + k])
			continue;
		if (row[c->name] == NONE) {
			if (!grow((void **)&o->crows, &o->capcrows, o->ncrows + 1,
			          sizeof(*o->crows))) {
				free(row);
				return false;
			}
			row[c->name] = (uint32_t)o->ncrows;
			o->crows[o->ncrows++] = (struct orow){ c->name, NONE, NONE, false, 0, 0, 0, 0, 0 };
		}
		r = &o->crows[row[c->name]];
		r->count++;
		r->cpu_total += c->dur;
		r->cpu_self += c->dur - t->cchild[k];
		r->gpu_total += t->cgtotal[k];
		o->cpu_self_total += c->dur - t->cchild[k];
	}
	free(row);
	return true;
}

/* The tree, its merges and totals; then the calls themselves are let go
 * (their rows stay). */
static bool calls_finish(struct rops *o)
{
	struct tree t = { .o = o, .n = o->nops + o->ncalls };
	size_t n = t.n ? t.n : 1, nc = o->ncalls ? o->ncalls : 1;
	bool ok;

	if (t.n >= NONE)
		return false;
	/* up, kids and order in one array; cchild and cgtotal in another */
	t.up = calloc(3 * n, sizeof(*t.up));
	t.dead = calloc(n, sizeof(*t.dead));
	t.cchild = calloc(2 * nc, sizeof(*t.cchild));
	ok = t.up != NULL && t.dead != NULL && t.cchild != NULL;
	if (ok) {
		t.kids = t.up + n;
		t.order = t.up + 2 * n;
		t.cgtotal = t.cchild + nc;
		ok = tree_link(&t);
	}
	if (ok) {
		tree_merge(&t);
		ok = tree_totals(&t);
	}
	free(t.up);
	free(t.dead);
	free(t.cchild);
	free(o->calls);
	o->calls = NULL;
	o->ncalls = o->capcalls = 0;
	return ok;
}

/* Each operator's module: the scope around it; backward operators' by the
 * forward operator with their sequence number, else their parent's. Then
 * the CPU self time of the operators. */
static bool assign_modules(struct rops *o)
{
	struct fwd *fwd = NULL;
	int32_t *scope = NULL;     /* per operator: the nearest scope above it, -1 none */
	size_t i, nfwd = 0;

	if (o->nops && ((fwd = malloc(o->nops * sizeof(*fwd))) == NULL ||
	                (scope = malloc(o->nops * sizeof(*scope))) == NULL)) {
		free(fwd);
		return false;
	}
	for (i = 0; i < o->nops; i++) {
		struct rop *r = &o->ops[i];
		int32_t m = innermost(o->mods, o->nmods, r->pid, r->tid, r->a);
		int32_t u = r->parent;

		m = climb(o->mods, m, r->b);
		if (m >= 0)
			r->module = o->mods[m].name;
		/* a record_function scope inside that module (or with none) is
		 * the nearer one: the nearest above its parent, found there first
		 * (parents come first) */
		if (u >= 0 && !o->ops[u].scope)
			u = scope[u];
		scope[i] = u;
		if (u >= 0 && (m < 0 || o->ops[u].a >= o->mods[m].a) &&
		    (r->module = intern(&o->modules, o->names.v[o->ops[u].name])) == NONE) {
			free(fwd);
			free(scope);
			return false;
		}
		if (r->parent >= 0 && o->ops[r->parent].bwd) /* parents come first */
			r->bwd = true;
		if (r->module != NONE && !r->bwd && r->seq >= 0) {
			fwd[nfwd].seq = r->seq;
			fwd[nfwd++].module = r->module;
		}
		if (!r->dead)
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
	free(scope);
	return true;
}

bool report_ops_finish(struct rstats *st)
{
	struct rops *o = st->ops;

	if (o == NULL)
		return true;
	if (o->cpu_ops == 0) { /* no table: nothing more to work out */
		free(o->calls);
		o->calls = NULL;
		o->ncalls = o->capcalls = 0;
		return true;
	}
	if (o->nops)
		qsort(o->ops, o->nops, sizeof(*o->ops), by_thread_start);
	if (o->nmods)
		qsort(o->mods, o->nmods, sizeof(*o->mods), by_thread_start);
	if (!link(o->ops, o->nops) || !link(o->mods, o->nmods))
		return false;
	attribute_gpu(o);
	return place_calls(o) && calls_finish(o) && assign_modules(o);
}

void report_ops_free(struct rstats *st)
{
	struct rops *o = st->ops;

	if (o == NULL)
		return;
	free(o->ops);
	free(o->mods);
	free(o->calls);
	free(o->crows);
	free(o->gcorr);
	free(o->gdur);
	free(o->gts);
	free(o->thr);
	htab_deinit(&o->thr_idx);
	strtab_free(&o->names);
	strtab_free(&o->shapes);
	strtab_free(&o->modules);
	free(o);
	st->ops = NULL;
}
