/*
 * report: the pass over one trace (report.h is its public face,
 * report_int.h says what the report files share). The file is inflated by
 * a reader thread and scanned by jscan.c; the callbacks here fold each
 * event into the struct rstats as it ends, hand operators to
 * report_ops.c, ranges' launches to report_ranges.c and memory events to
 * report_mem.c, and report_finish (report_finish.c) turns what was
 * gathered into figures. Also the public accessors of a struct rstats.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "grow.h"
#include "htab.h"
#include "jscan.h"
#include "report.h"
#include "report_int.h"
#include "report_mem.h"

#define DEPTH_MAX 64

enum key { K_OTHER, K_EVENTS, K_DIST, K_HOST, K_RANK, K_WORLD, K_NAME, K_CAT, K_PH, K_PID, K_TID,
           K_TS, K_DUR, K_ARGS, K_BYTES, K_CORR, K_SEQ, K_FWD, K_DIMS, K_EXT,
           /* a [memory] event's args (Kineto's profile_memory): last, as k >= K_M_ADDR */
           K_M_ADDR, K_M_BYTES, K_M_TOTAL, K_M_RESERVED, K_M_DEVTYPE, K_M_DEVID };

struct ev {
	char name[512], cat[32], ph[4];
	int64_t pid, tid;
	double ts, dur, bytes;
	int64_t corr, seq, fwd;    /* args: correlation, Sequence number, Fwd thread id */
	char shape[1024];          /* args "Input Dims" as text: [[128, 1024], []] */
	size_t shape_len;
	bool shape_cut;
	bool ext;                  /* args has an "External id" */
	double m[6];               /* [memory] args, by K_M_* - K_M_ADDR */
};

struct parse {
	struct rstats *st;
	int depth, events_depth;   /* events_depth: the traceEvents array's depth */
	enum key key[DEPTH_MAX + 1];
	struct ev e;
	int dims_depth;            /* the depth of the Input Dims array; 0 outside */
	bool dims_sep;             /* the next dims element needs ", " first */
	size_t dims_arg;           /* where the shape of the argument being read starts */
	bool dims_list;            /* that argument is a list of tensors: written as [] */
	bool oom;
};

/* ---- growing arrays ---- */

static bool durs_add(struct durs *d, double v)
{
	if (!grow((void **)&d->v, &d->cap, d->n + 1, sizeof(*d->v)))
		return false;
	d->v[d->n++] = (float)v;
	return true;
}

static bool ivals_add(struct ivals *iv, double a, double b)
{
	if (!grow((void **)&iv->v, &iv->cap, iv->n + 2, sizeof(*iv->v)))
		return false;
	iv->v[iv->n++] = a;
	iv->v[iv->n++] = b;
	return true;
}

static bool spans_add(struct spans *sp, double a, double b, size_t name, int64_t dev)
{
	if (!grow((void **)&sp->v, &sp->cap, sp->n + 1, sizeof(*sp->v)))
		return false;
	sp->v[sp->n++] = (struct span){ a, b, (uint32_t)name, (int32_t)dev };
	return true;
}

/* ---- kernels (and copies) by name, through htab ---- */

static bool kstat_is(const void *ctx, uint32_t pos, const void *key)
{
	return strcmp(((const struct kmap *)ctx)->v[pos].name, key) == 0;
}

static struct kstat *kmap_get(struct kmap *m, const char *name)
{
	uint64_t h = htab_hash(name, strlen(name));
	uint32_t pos = htab_find(&m->idx, h, kstat_is, m, name);

	if (pos != HTAB_NONE)
		return &m->v[pos];
	if (m->n >= HTAB_NONE || !grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)))
		return NULL;
	memset(&m->v[m->n], 0, sizeof(m->v[m->n]));
	if ((m->v[m->n].name = strdup(name)) == NULL)
		return NULL;
	if (htab_add(&m->idx, h, (uint32_t)m->n) < 0) {
		free(m->v[m->n].name);
		return NULL;
	}
	return &m->v[m->n++];
}

static struct kstat *kstat_add(struct kmap *m, const char *name, double dur, double bytes)
{
	struct kstat *k = kmap_get(m, name);

	if (k == NULL || !durs_add(&k->d, dur))
		return NULL;
	k->count++;
	k->total += dur;
	k->bytes += bytes > 0 ? (uint64_t)bytes : 0;
	if (dur > k->max)
		k->max = dur;
	return k;
}

/* A device or stream's key in st->gpu_idx. */
struct gpu_key { int64_t dev, stream; };

static bool gpu_is(const void *ctx, uint32_t pos, const void *key)
{
	const struct gpu *g = &((const struct rstats *)ctx)->gpus[pos];
	const struct gpu_key *k = key;

	return g->dev == k->dev && g->stream == k->stream;
}

/* Device dev's entry (stream -1), or that stream's: made when new. A
 * trace names as many as it likes, so they are found through a hash. */
static struct gpu *gpu_get(struct rstats *st, int64_t dev, int64_t stream)
{
	struct gpu_key k = { dev, stream };
	uint64_t h = htab_hash(&k, sizeof(k));
	uint32_t pos = htab_find(&st->gpu_idx, h, gpu_is, st, &k);

	if (pos != HTAB_NONE)
		return &st->gpus[pos];
	if (st->ngpus >= HTAB_NONE ||
	    !grow((void **)&st->gpus, &st->capgpus, st->ngpus + 1, sizeof(*st->gpus)) ||
	    htab_add(&st->gpu_idx, h, (uint32_t)st->ngpus) < 0)
		return NULL;
	memset(&st->gpus[st->ngpus], 0, sizeof(st->gpus[st->ngpus]));
	st->gpus[st->ngpus].dev = dev;
	st->gpus[st->ngpus].stream = stream;
	return &st->gpus[st->ngpus++];
}

/* What an event's cat says, across Kineto's versions (older ones wrote
 * "Kernel", "Memcpy", "Memset", "Runtime", "Driver"). */
enum cat { C_OTHER, C_KERNEL, C_COPY, C_RUNTIME, C_ANNOTATION, C_GPU_ANNOTATION };

static enum cat cat_of(const char *c)
{
	if (strcasecmp(c, "kernel") == 0)
		return C_KERNEL;
	if (strcmp(c, "gpu_memcpy") == 0 || strcmp(c, "gpu_memset") == 0 ||
	    strcmp(c, "Memcpy") == 0 || strcmp(c, "Memset") == 0)
		return C_COPY;
	if (strcmp(c, "cuda_runtime") == 0 || strcmp(c, "cuda_driver") == 0 ||
	    strcmp(c, "Runtime") == 0 || strcmp(c, "Driver") == 0)
		return C_RUNTIME;
	if (strcmp(c, "gpu_user_annotation") == 0)
		return C_GPU_ANNOTATION;
	if (strcmp(c, "user_annotation") == 0)
		return C_ANNOTATION;
	return C_OTHER;
}

/* What the operator table keeps of an event (report_ops.c). */
static bool fold_ops(struct rstats *st, const struct ev *e, enum cat c)
{
	struct rop_event o = { e->name, e->cat, e->shape_len ? e->shape : NULL, e->pid, e->tid,
	                       e->corr, e->seq, e->fwd, e->ts, e->dur, e->ext };

	if (c == C_KERNEL || c == C_COPY)
		return report_ops_gpu(st, e->corr, e->ts, e->dur);
	if (c == C_RUNTIME || c == C_ANNOTATION || strcmp(e->cat, "cpu_op") == 0 ||
	    strcmp(e->cat, "python_function") == 0 || strcmp(e->cat, "overhead") == 0)
		return report_ops_fold(st, &o);
	return true;
}

/* ---- memory: [memory] events and the operators around them (report_mem.c) ---- */

static bool mem_get(struct rstats *st)
{
	if (st->mem == NULL && (st->mem = calloc(1, sizeof(*st->mem))) != NULL)
		st->mem->rank = -1;
	return st->mem != NULL;
}

/* A GPU allocation or free (Device Type 1: CUDA; the CPU's are left out). */
static bool mem_event(struct rstats *st, const struct ev *e)
{
	struct mevent m = { .ts = e->ts, .tid = e->tid };

	if (e->m[K_M_DEVTYPE - K_M_ADDR] != 1)
		return true;
	m.dev = (int64_t)e->m[K_M_DEVID - K_M_ADDR];
	m.addr = (int64_t)e->m[0];
	m.bytes = (int64_t)e->m[K_M_BYTES - K_M_ADDR];
	m.total_alloc = (int64_t)e->m[K_M_TOTAL - K_M_ADDR];
	m.total_res = (int64_t)e->m[K_M_RESERVED - K_M_ADDR];
	return mem_get(st) && mreport_event(st->mem, &m);
}

static bool mem_op(struct rstats *st, const struct ev *e)
{
	return mem_get(st) && mreport_op(st->mem, e->ts, e->dur, e->tid, e->name);
}

static int span_by_start(const void *a, const void *b)
{
	const double *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* After the pass: the memory figures, per iteration by ProfilerStep#. A
 * trace with operators but no [memory] event has none. */
static void mem_finish(struct rstats *st)
{
	double *steps;
	size_t i;

	if (st->mem == NULL)
		return;
	if (st->mem->nev == 0) {
		mreport_free(st->mem);
		free(st->mem);
		st->mem = NULL;
		return;
	}
	snprintf(st->mem->path, sizeof(st->mem->path), "%s", st->path);
	st->mem->rank = st->rank;
	steps = calloc(st->step_spans.n + 1, 2 * sizeof(double));
	for (i = 0; steps != NULL && i < st->step_spans.n; i++) {
		steps[2 * i] = st->step_spans.v[i].a;
		steps[2 * i + 1] = st->step_spans.v[i].b;
	}
	if (steps != NULL)
		qsort(steps, st->step_spans.n, 2 * sizeof(double), span_by_start);
	mreport_finish_trace(st->mem, steps, steps ? st->step_spans.n : 0);
	free(steps);
}

/* An nn.Module scope that torch.profiler writes as a python_function
 * (with_stack, with_modules): a range like the agent's user_annotation
 * of the same name. */
static bool module_scope(const struct ev *e)
{
	return strcmp(e->cat, "python_function") == 0 && strncmp(e->name, "nn.Module: ", 11) == 0;
}

/* One complete event: folded into the file's figures. */
static bool fold(struct rstats *st, const struct ev *e)
{
	enum cat c = cat_of(e->cat);
	struct gpu *g, *s;

	st->events++;
	if (e->ph[0] == 'i' && strcmp(e->name, "[memory]") == 0)
		return mem_event(st, e);
	if (strcmp(e->ph, "X") != 0 || e->dur < 0)
		return true;
	if (c == C_OTHER && strcmp(e->cat, "cpu_op") == 0 && !mem_op(st, e))
		return false;
	if (e->ts < st->t0)
		st->t0 = e->ts;
	if (e->ts + e->dur > st->t1)
		st->t1 = e->ts + e->dur;
	if (!fold_ops(st, e, c))
		return false;
	if (c == C_KERNEL || c == C_COPY) {
		st->gpu_events++;
		if ((g = gpu_get(st, e->pid, -1)) == NULL || !ivals_add(&g->iv, e->ts, e->ts + e->dur) ||
		    (s = gpu_get(st, e->pid, e->tid)) == NULL || !ivals_add(&s->iv, e->ts, e->ts + e->dur))
			return false;
	}
	if (c == C_KERNEL) {
		struct kstat *k = kstat_add(&st->kernels, e->name, e->dur, 0);

		if (k == NULL)
			return false;
		st->kernel_total += e->dur;
		if (e->dur < 10)
			st->short_kernels++;
		if (k->count == 1)
			k->nccl = report_has_ci(e->name, "nccl"); /* once per name */
		if (k->nccl)
			st->nccl += e->dur;
		return true;
	}
	if (c == C_COPY)
		return kstat_add(&st->copies, e->name, e->dur, e->bytes) != NULL;
	if (c == C_RUNTIME) {
		st->runtime_total += e->dur;
		if (strstr(e->name, "Synchronize") != NULL) {
			struct kstat *k = kstat_add(&st->syncs, e->name, e->dur, 0);

			st->sync_total += e->dur;
			return k != NULL && spans_add(&st->sync_spans, e->ts, e->ts + e->dur,
			                              (size_t)(k - st->syncs.v), -1);
		}
		return true;
	}
	/* the CPU's iterations; Kineto copies them onto GPU rows too */
	if (strncmp(e->name, "ProfilerStep#", 13) == 0)
		return c == C_GPU_ANNOTATION ||
		       (durs_add(&st->steps, e->dur) &&
		        spans_add(&st->step_spans, e->ts, e->ts + e->dur,
		                  strtoul(e->name + 13, NULL, 10), -1));
	/* a user range, and its projection on the GPU: from the start of the
	 * first GPU work launched inside it to the end of the last */
	if (c == C_ANNOTATION || c == C_GPU_ANNOTATION || module_scope(e)) {
		bool cpu = c != C_GPU_ANNOTATION;
		struct kmap *m = cpu ? &st->ranges : &st->granges;
		struct kstat *k = kstat_add(m, e->name, e->dur, 0);

		return k != NULL && spans_add(cpu ? &st->cpu_spans : &st->gpu_spans,
		                              e->ts, e->ts + e->dur, (size_t)(k - m->v),
		                              cpu ? -1 : e->pid) &&
		       (!cpu || report_ranges_range(st, (uint32_t)(k - m->v), e->pid, e->tid, e->ts,
		                                    e->ts + e->dur));
	}
	return true;
}

/* ---- the parser's callbacks ---- */

/* Every key of every event comes through here: by length, then bytes. */
static enum key key_of(const char *k, size_t n)
{
#define IS(lit) (memcmp(k, lit, sizeof(lit) - 1) == 0)
	switch (n) {
	case 2: return IS("ph") ? K_PH : IS("ts") ? K_TS : K_OTHER;
	case 3: return IS("cat") ? K_CAT : IS("pid") ? K_PID : IS("tid") ? K_TID :
	               IS("dur") ? K_DUR : K_OTHER;
	case 4: return IS("name") ? K_NAME : IS("args") ? K_ARGS : IS("rank") ? K_RANK :
	               IS("Addr") ? K_M_ADDR : K_OTHER;
	case 5: return IS("bytes") ? K_BYTES : IS("Bytes") ? K_M_BYTES : K_OTHER;
	case 9: return IS("Device Id") ? K_M_DEVID : IS("host_name") ? K_HOST : K_OTHER;
	case 10: return IS("world_size") ? K_WORLD : IS("Input Dims") ? K_DIMS : K_OTHER;
	case 11: return IS("traceEvents") ? K_EVENTS : IS("correlation") ? K_CORR :
	                IS("Device Type") ? K_M_DEVTYPE : IS("External id") ? K_EXT : K_OTHER;
	case 13: return IS("Fwd thread id") ? K_FWD : K_OTHER;
	case 14: return IS("Total Reserved") ? K_M_RESERVED : K_OTHER;
	case 15: return IS("distributedInfo") ? K_DIST : IS("Sequence number") ? K_SEQ :
	                IS("Total Allocated") ? K_M_TOTAL : K_OTHER;
	default: return K_OTHER;
	}
#undef IS
}

static bool in_event(const struct parse *p)
{
	return p->events_depth > 0 && p->depth == p->events_depth + 1;
}

static bool in_args(const struct parse *p)
{
	return p->events_depth > 0 && p->depth == p->events_depth + 2 &&
	       p->key[p->events_depth + 1] == K_ARGS;
}

/* Inside an event's args "Input Dims" array (at any depth). */
static bool in_dims(const struct parse *p)
{
	return p->dims_depth > 0 && p->depth >= p->dims_depth;
}

/* Appends text to the shape being read (element: a number or an opening
 * bracket, after ", " when one came before it); what does not fit is cut,
 * once, to "...". */
static void dims_put(struct parse *p, const char *s, size_t n, bool element)
{
	struct ev *e = &p->e;

	if (element && p->dims_sep)
		dims_put(p, ", ", 2, false);
	if (e->shape_cut)
		return;
	if (e->shape_len + n + 4 > sizeof(e->shape)) {
		memcpy(e->shape + e->shape_len, "...", 4);
		e->shape_len += 3;
		e->shape_cut = true;
		return;
	}
	memcpy(e->shape + e->shape_len, s, n);
	e->shape_len += n;
	e->shape[e->shape_len] = '\0';
}

static bool in_dist(const struct parse *p)
{
	return p->depth == 2 && p->key[1] == K_DIST;
}

/* A number read as an integer field: -1 (unknown) when it is not a finite
 * value within int64 (1e400 reads as inf: converting that is undefined). */
static int64_t as_int(double v)
{
	return isfinite(v) && v >= -9.2e18 && v <= 9.2e18 ? (int64_t)v : -1;
}

static int on_number(struct parse *p, double v)
{
	/* A time, length or size beyond any a trace holds is not one: 0. (Times
	 * are microseconds, about 2e15 since 1970; 1e400 reads as inf; 1e120
	 * would be inf as the float a duration is kept in; 1e-300 would make
	 * a rate inf.) */
	double f = isfinite(v) && fabs(v) <= 1e18 && (v == 0 || fabs(v) >= 1e-9) ? v : 0;

	if (in_event(p)) {
		switch (p->key[p->depth]) {
		case K_PID: p->e.pid = as_int(v); break;
		case K_TID: p->e.tid = as_int(v); break;
		case K_TS: p->e.ts = f; break;
		case K_DUR: p->e.dur = f; break;
		default: break;
		}
	} else if (in_args(p) && p->key[p->depth] == K_BYTES) {
		p->e.bytes = f;
	} else if (in_args(p) && p->key[p->depth] == K_CORR) {
		p->e.corr = as_int(v);
	} else if (in_args(p) && p->key[p->depth] == K_EXT) {
		p->e.ext = true;
	} else if (in_args(p) && p->key[p->depth] == K_SEQ) {
		p->e.seq = as_int(v);
	} else if (in_args(p) && p->key[p->depth] == K_FWD) {
		p->e.fwd = as_int(v);
	} else if (in_args(p) && p->key[p->depth] >= K_M_ADDR) {
		/* sizes and addresses: whole numbers, exact up to 2^53 */
		p->e.m[p->key[p->depth] - K_M_ADDR] = isfinite(v) ? v : 0;
	} else if (in_dist(p)) {
		if (p->key[2] == K_RANK)
			p->st->rank = as_int(v);
		else if (p->key[2] == K_WORLD)
			p->st->world = as_int(v);
	}
	return 1;
}

/* The number's text as the scanner found it: only the few numbers read
 * are converted, and the usual ones (digits, a point, digits) without
 * strtod. */
static int cb_number(void *ctx, const char *s, size_t n)
{
	struct parse *p = ctx;
	char tmp[64];
	double v = 0, scale = 1;
	size_t i = 0;
	bool neg = false, simple = true;

	enum key k = p->depth <= DEPTH_MAX ? p->key[p->depth] : K_OTHER;

	/* the dimensions of an operator's inputs, as their text */
	if (in_dims(p)) {
		if (p->dims_list)
			return 1;
		dims_put(p, s, n, true);
		p->dims_sep = true;
		return 1;
	}
	/* only these numbers are read: the rest (grids, External ids...) skipped */
	if (!(in_event(p) && (k == K_PID || k == K_TID || k == K_TS || k == K_DUR)) &&
	    !(in_args(p) && (k == K_BYTES || k == K_CORR || k == K_SEQ || k == K_FWD ||
	                     k == K_EXT || k >= K_M_ADDR)) &&
	    !(in_dist(p) && (k == K_RANK || k == K_WORLD)))
		return 1;
	if (n > 0 && s[0] == '-') {
		neg = true;
		i = 1;
	}
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		v = v * 10 + (s[i] - '0');
	if (i < n && s[i] == '.')
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
			scale /= 10;
			v += (s[i] - '0') * scale;
		}
	if (i < n)
		simple = false; /* an exponent: the general way */
	if (!simple) {
		if (n >= sizeof(tmp))
			return 1;
		memcpy(tmp, s, n);
		tmp[n] = '\0';
		v = strtod(tmp, NULL);
		neg = false;
	}
	return on_number(p, neg ? -v : v);
}

static int cb_string(void *ctx, const char *s, size_t n)
{
	struct parse *p = ctx;
	char *dst = NULL;
	size_t cap = 0;

	if (p->depth == 1 && p->key[1] == K_HOST) { /* the trace's host_name */
		dst = p->st->host;
		cap = sizeof(p->st->host);
	} else if (!in_event(p))
		return 1;
	switch (dst != NULL ? K_HOST : p->key[p->depth]) {
	case K_HOST: /* the trace's, above; an event's "host_name" is not read */
		if (dst == NULL)
			return 1;
		break;
	case K_NAME: dst = p->e.name; cap = sizeof(p->e.name); break;
	case K_CAT: dst = p->e.cat; cap = sizeof(p->e.cat); break;
	case K_PH: dst = p->e.ph; cap = sizeof(p->e.ph); break;
	case K_PID: p->e.pid = -1; return 1; /* a named row ("Spans"): no device */
	case K_TID: p->e.tid = -1; return 1;
	default: return 1;
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 1;
}

static int cb_key(void *ctx, const char *k, size_t n)
{
	struct parse *p = ctx;

	if (p->depth <= DEPTH_MAX)
		p->key[p->depth] = key_of(k, n);
	return 1;
}

static int open_level(struct parse *p, bool array)
{
	if (++p->depth > DEPTH_MAX)
		return 1; /* deeper than anything read: only counted */
	p->key[p->depth] = K_OTHER;
	if (array && p->depth == 2 && p->key[1] == K_EVENTS)
		p->events_depth = 2, p->st->saw_events = true;
	if (!array && in_event(p)) {
		/* field by field: the name's 512 bytes need only their first */
		p->e.name[0] = p->e.cat[0] = p->e.ph[0] = p->e.shape[0] = '\0';
		p->e.ts = p->e.dur = p->e.bytes = 0;
		memset(p->e.m, 0, sizeof(p->e.m));
		p->e.pid = p->e.tid = p->e.corr = p->e.seq = p->e.fwd = -1;
		p->e.shape_len = 0;
		p->e.shape_cut = false;
		p->e.ext = false;
		p->dims_depth = 0;
	}
	if (array && in_dims(p)) {
		/* A list inside an argument: the argument is a list of tensors,
		 * whose shape torch.profiler's key_averages takes as [] (Kineto
		 * writes each tensor's when it records concrete inputs). */
		if (p->depth > p->dims_depth + 1) {
			if (!p->dims_list && !p->e.shape_cut) {
				p->e.shape_len = p->dims_arg + 1;
				p->e.shape[p->e.shape_len] = '\0';
			}
			p->dims_list = true;
			return 1;
		}
		dims_put(p, "[", 1, true);
		p->dims_arg = p->e.shape_len - 1;
		p->dims_sep = false;
	} else if (array && p->events_depth > 0 && p->depth == p->events_depth + 3 &&
	           p->key[p->events_depth + 1] == K_ARGS && p->key[p->events_depth + 2] == K_DIMS) {
		p->dims_depth = p->depth;
		p->e.shape_len = 0;
		p->e.shape_cut = false;
		p->dims_sep = false;
		p->dims_list = false;
		dims_put(p, "[", 1, false);
	}
	return 1;
}

static int cb_start_map(void *ctx)
{
	return open_level(ctx, false);
}

static int cb_start_array(void *ctx)
{
	return open_level(ctx, true);
}

static int cb_end_map(void *ctx)
{
	struct parse *p = ctx;

	if (in_event(p) && !fold(p->st, &p->e)) {
		p->oom = true;
		return 0;
	}
	p->depth--;
	return 1;
}

static int cb_end_array(void *ctx)
{
	struct parse *p = ctx;

	if (p->depth == p->events_depth)
		p->events_depth = 0;
	if (in_dims(p) && !(p->dims_list && p->depth > p->dims_depth + 1)) {
		dims_put(p, "]", 1, false);
		p->dims_sep = true;
		p->dims_list = false;
		if (p->depth == p->dims_depth)
			p->dims_depth = 0;
	}
	p->depth--;
	return 1;
}

static const struct jscan_cb callbacks = {
	.start_map = cb_start_map, .end_map = cb_end_map, .start_array = cb_start_array,
	.end_array = cb_end_array, .key = cb_key, .string = cb_string, .number = cb_number,
};

/*
 * Reading: one thread inflates (zlib's gzread; a plain file passes through
 * it unchanged) into a ring of NBUF buffers while the caller's thread
 * scans them, so a gzip trace costs about what a plain one does when two
 * cores are free. The reader owns a buffer from taking it empty to
 * handing it full; the scanner from taking it full to handing it back.
 */
#define NBUF 4
#define BUFSZ (256 << 10)

struct feeder {
	gzFile gz;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *buf[NBUF];
	int len[NBUF];             /* bytes in a full buffer; -1: gzread failed */
	unsigned head, tail;       /* buffers filled so far, and scanned so far */
	bool eof, stop;
};

static void *feed_thread(void *arg)
{
	struct feeder *f = arg;

	for (;;) {
		int n, slot;

		pthread_mutex_lock(&f->lock);
		while (f->head - f->tail == NBUF && !f->stop)
			pthread_cond_wait(&f->cond, &f->lock);
		slot = (int)(f->head % NBUF);
		if (f->stop) {
			pthread_mutex_unlock(&f->lock);
			return NULL;
		}
		pthread_mutex_unlock(&f->lock);
		n = gzread(f->gz, f->buf[slot], BUFSZ);
		pthread_mutex_lock(&f->lock);
		if (n <= 0)
			f->eof = true;
		if (n != 0) {
			f->len[slot] = n;
			f->head++;
		}
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&f->lock);
		if (n <= 0)
			return NULL;
	}
}

static void rstats_init(struct rstats *st, const char *path)
{
	memset(st, 0, sizeof(*st));
	st->rank = st->world = -1;
	st->t0 = HUGE_VAL; /* no event yet: window() is 0 */
	st->t1 = -HUGE_VAL;
	snprintf(st->path, sizeof(st->path), "%s", path);
}

/* After the last piece was fed (bad: jscan_feed's last answer): says why
 * the text was not whole, if it was not. */
static void scan_end(struct rstats *st, struct jscan *j, const struct parse *p, int bad,
                     uint64_t offset)
{
	if (bad == 0 && jscan_finish(j) < 0 && jscan_truncated(j)) {
		st->truncated = true;
		snprintf(st->error, sizeof(st->error), "the file ends early, after %llu bytes (a "
		         "trace still being written, or cut): what came before is reported",
		         (unsigned long long)offset);
	}
	if (!st->error[0] && jscan_error(j) != NULL) {
		st->truncated = true;
		snprintf(st->error, sizeof(st->error), "%s at byte %llu: %s; what came before is "
		         "reported", p->oom ? "out of memory" : "not valid JSON",
		         (unsigned long long)jscan_error_offset(j), jscan_error(j));
	}
}

/*
 * A file that is no trace, or a trace with nothing in it, is refused with
 * why and what to do (issue 37): /etc/passwd made a report of zeros ending
 * "nothing stands out". A trace is a JSON object with a traceEvents array
 * (Kineto, torch.profiler and gprofd write nothing else); one that breaks
 * after that array opened is a trace cut short, reported as far as it goes.
 */
static void refuse_non_trace(struct rstats *st)
{
	static const char what[] = "gprofctl report reads Chrome-trace JSON (.json, .json.gz: "
	                           "gprofctl trace's, torch.profiler's, Kineto's) and memory "
	                           "snapshots (.pickle)";
	char why[300], *tail;

	/* what was read before the break is no report when nothing was */
	if ((tail = strstr(st->error, "; what came before is reported")) != NULL ||
	    (tail = strstr(st->error, ": what came before is reported")) != NULL)
		*tail = '\0';
	if (!st->saw_events) {
		if (strncmp(st->error, "the file ends early, after 0 bytes", 34) == 0)
			snprintf(why, sizeof(why), "an empty file");
		else if (strncmp(st->error, "the file ends early", 19) == 0)
			snprintf(why, sizeof(why), "it ends before any traceEvents array (%.150s)",
			         st->error);
		else if (st->error[0])
			snprintf(why, sizeof(why), "%.250s", st->error);
		else
			snprintf(why, sizeof(why), "JSON without a \"traceEvents\" array");
		snprintf(st->error, sizeof(st->error), "not a trace: %s. %s", why, what);
		st->refused = REFUSED_NOT_TRACE;
	} else if (st->t1 < st->t0 && st->mem == NULL) {
		if (st->error[0])
			snprintf(why, sizeof(why), "%.250s, before its first complete event. Wait until "
			         "it is whole, or fetch it again", st->error);
		else
			snprintf(why, sizeof(why), "of its %llu events none is timed (a \"ph\": \"X\" "
			         "event), only metadata. The traced process did no GPU work nor "
			         "annotated CPU work in the window: trace it while it works (a longer "
			         "--duration, or --iterations)", (unsigned long long)st->events);
		snprintf(st->error, sizeof(st->error), "an empty trace: %s", why);
		st->refused = REFUSED_EMPTY;
	}
}

int report_read_mem(const char *name, const char *text, size_t len, struct rstats *st)
{
	struct parse p = { .st = st };
	struct jscan *j;

	rstats_init(st, name);
	if ((j = jscan_new(&callbacks, &p)) == NULL)
		snprintf(st->error, sizeof(st->error), "out of memory");
	else
		scan_end(st, j, &p, jscan_feed(j, text, len), len);
	jscan_free(j);
	mem_finish(st);
	if (!report_finish(st) && !st->error[0])
		snprintf(st->error, sizeof(st->error), "out of memory while summing up");
	refuse_non_trace(st);
	return st->error[0] ? -1 : 0;
}

int report_read(const char *path, struct rstats *st)
{
	struct feeder f = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct parse p = { .st = st };
	uint64_t offset = 0;
	struct jscan *j = NULL;
	pthread_t tid;
	int n = 0, bad = 0, i;
	bool started = false;

	rstats_init(st, path);
	if ((f.gz = gzopen(path, "rb")) == NULL) {
		snprintf(st->error, sizeof(st->error), "cannot open it: %s", strerror(errno));
		st->refused = REFUSED_UNREADABLE;
		return -1;
	}
	gzbuffer(f.gz, 256 << 10);
	for (i = 0; i < NBUF; i++)
		f.buf[i] = malloc(BUFSZ);
	for (i = 0; i < NBUF && f.buf[i] != NULL; i++)
		;
	if (i < NBUF || (j = jscan_new(&callbacks, &p)) == NULL ||
	    pthread_create(&tid, NULL, feed_thread, &f) != 0) {
		snprintf(st->error, sizeof(st->error), "out of memory");
		goto out;
	}
	started = true;
	for (;;) {
		int slot;

		pthread_mutex_lock(&f.lock);
		while (f.head == f.tail && !f.eof)
			pthread_cond_wait(&f.cond, &f.lock);
		if (f.head == f.tail) { /* the end, or gzread failed */
			pthread_mutex_unlock(&f.lock);
			break;
		}
		slot = (int)(f.tail % NBUF);
		n = f.len[slot];
		pthread_mutex_unlock(&f.lock);
		if (n < 0)
			break;
		bad = jscan_feed(j, f.buf[slot], (size_t)n);
		pthread_mutex_lock(&f.lock);
		f.tail++;
		if (bad < 0)
			f.stop = true;
		pthread_cond_broadcast(&f.cond);
		pthread_mutex_unlock(&f.lock);
		if (bad < 0)
			break;
		offset += (uint64_t)n;
	}
	pthread_join(tid, NULL);
	started = false;
	if (n < 0) {
		int zerr;
		const char *why = gzerror(f.gz, &zerr);

		st->truncated = true;
		snprintf(st->error, sizeof(st->error), "gzip data broken after %llu bytes (%s): "
		         "what came before is reported", (unsigned long long)offset, why);
	} else {
		scan_end(st, j, &p, bad, offset);
	}
out:
	if (started)
		pthread_join(tid, NULL);
	jscan_free(j);
	for (i = 0; i < NBUF; i++)
		free(f.buf[i]);
	gzclose(f.gz);
	mem_finish(st);
	if (!report_finish(st) && !st->error[0])
		snprintf(st->error, sizeof(st->error), "out of memory while summing up");
	refuse_non_trace(st);
	return st->error[0] ? -1 : 0;
}

static void kmap_free(struct kmap *m)
{
	size_t i;

	for (i = 0; i < m->n; i++) {
		free(m->v[i].name);
		free(m->v[i].d.v);
	}
	free(m->v);
	htab_deinit(&m->idx);
}

void report_free(struct rstats *st)
{
	size_t i;

	kmap_free(&st->kernels);
	kmap_free(&st->copies);
	kmap_free(&st->ranges);
	kmap_free(&st->granges);
	kmap_free(&st->syncs);
	report_ops_free(st);
	free(st->cpu_spans.v);
	free(st->gpu_spans.v);
	free(st->sync_spans.v);
	free(st->step_spans.v);
	free(st->range_gpu);
	report_ranges_free_pass(st);
	for (i = 0; i < st->ngpus; i++) {
		free(st->gpus[i].iv.v);
		free(st->gpus[i].prefix);
	}
	free(st->gpus);
	htab_deinit(&st->gpu_idx);
	free(st->steps.v);
	if (st->mem != NULL)
		mreport_free(st->mem);
	free(st->mem);
	memset(st, 0, sizeof(*st));
}

/* ---- the public interface's way in (report.h) ---- */

/* Uninitialised room: report_read zeroes it first. */
struct rstats *report_new(void)
{
	return malloc(sizeof(struct rstats));
}

/* The path the file was read from. */
const char *report_path(const struct rstats *st)
{
	return st->path;
}

/* The rank from distributedInfo, -1 when unknown. */
int64_t report_rank(const struct rstats *st)
{
	return st->rank;
}

/* Why the file could not be read whole, "" when it was. */
const char *report_error(const struct rstats *st)
{
	return st->error;
}

/* Whether (and why) no report is made from the file. */
enum report_refusal report_refusal(const struct rstats *st)
{
	return st->refused;
}

/* Its memory events' report, NULL when it had none. */
struct mreport *report_memory(const struct rstats *st)
{
	return st->mem;
}

/* Asks for the operator table per input shape. */
void report_set_by_shape(struct rstats *st, bool by_shape)
{
	st->ops_by_shape = by_shape;
}

/* report_where's lookups in this file. */
uint32_t report_wheres(const struct rstats *st)
{
	return st->wheres;
}

/* qsort order: by rank, unknown ranks last, then by path. */
static int by_rank(const void *a, const void *b)
{
	const struct rstats *x = *(struct rstats *const *)a, *y = *(struct rstats *const *)b;

	if (x->rank != y->rank)
		return x->rank < 0 ? 1 : y->rank < 0 ? -1 : x->rank < y->rank ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* Ranks in order, so each output lists them the same way. */
void report_sort(struct rstats **st, size_t n)
{
	if (n > 0)
		qsort(st, n, sizeof(*st), by_rank);
}
