/*
 * report: see report.h.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "report.h"

#define DEPTH_MAX 64

enum key { K_OTHER, K_EVENTS, K_DIST, K_RANK, K_WORLD, K_NAME, K_CAT, K_PH, K_PID, K_TID,
           K_TS, K_DUR, K_ARGS, K_BYTES };

struct ev {
	char name[512], cat[32], ph[4];
	int64_t pid, tid;
	double ts, dur, bytes;
};

struct parse {
	struct rstats *st;
	int depth, events_depth;   /* events_depth: the traceEvents array's depth */
	enum key key[DEPTH_MAX + 1];
	struct ev e;
	bool oom;
};

/* ---- growing arrays ---- */

static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	if ((p = realloc(*v, c * size)) == NULL)
		return false;
	*v = p;
	*cap = c;
	return true;
}

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

/* ---- kernels (and copies) by name: open addressing over an array ---- */

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static struct kstat *kmap_get(struct kmap *m, const char *name)
{
	size_t i;

	if ((m->n + 1) * 2 > m->mask + 1) {
		size_t nmask = m->mask ? m->mask * 2 + 1 : 255, k;
		size_t *slot = malloc((nmask + 1) * sizeof(*slot));

		if (slot == NULL)
			return NULL;
		for (k = 0; k <= nmask; k++)
			slot[k] = SIZE_MAX;
		for (k = 0; k < m->n; k++) {
			for (i = hash(m->v[k].name) & nmask; slot[i] != SIZE_MAX; i = (i + 1) & nmask)
				;
			slot[i] = k;
		}
		free(m->slot);
		m->slot = slot;
		m->mask = nmask;
	}
	for (i = hash(name) & m->mask; m->slot[i] != SIZE_MAX; i = (i + 1) & m->mask)
		if (strcmp(m->v[m->slot[i]].name, name) == 0)
			return &m->v[m->slot[i]];
	if (!grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)))
		return NULL;
	memset(&m->v[m->n], 0, sizeof(m->v[m->n]));
	if ((m->v[m->n].name = strdup(name)) == NULL)
		return NULL;
	m->slot[i] = m->n;
	return &m->v[m->n++];
}

/* name's entry, or NULL; never adds. */
static const struct kstat *kmap_find(const struct kmap *m, const char *name)
{
	size_t i;

	if (m->slot == NULL)
		return NULL;
	for (i = hash(name) & m->mask; m->slot[i] != SIZE_MAX; i = (i + 1) & m->mask)
		if (strcmp(m->v[m->slot[i]].name, name) == 0)
			return &m->v[m->slot[i]];
	return NULL;
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

static struct gpu *gpu_get(struct rstats *st, int64_t dev, int64_t stream)
{
	size_t i;

	for (i = 0; i < st->ngpus; i++)
		if (st->gpus[i].dev == dev && st->gpus[i].stream == stream)
			return &st->gpus[i];
	if (!grow((void **)&st->gpus, &st->capgpus, st->ngpus + 1, sizeof(*st->gpus)))
		return NULL;
	memset(&st->gpus[st->ngpus], 0, sizeof(st->gpus[st->ngpus]));
	st->gpus[st->ngpus].dev = dev;
	st->gpus[st->ngpus].stream = stream;
	return &st->gpus[st->ngpus++];
}

static bool has_ci(const char *s, const char *needle)
{
	size_t n = strlen(needle);

	for (; *s; s++)
		if (tolower((unsigned char)*s) == needle[0] && strncasecmp(s, needle, n) == 0)
			return true;
	return false;
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

/* One complete event: folded into the file's figures. */
static bool fold(struct rstats *st, const struct ev *e)
{
	enum cat c = cat_of(e->cat);
	struct gpu *g, *s;

	st->events++;
	if (strcmp(e->ph, "X") != 0 || e->dur < 0)
		return true;
	if (e->ts < st->t0)
		st->t0 = e->ts;
	if (e->ts + e->dur > st->t1)
		st->t1 = e->ts + e->dur;
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
			k->nccl = has_ci(e->name, "nccl"); /* once per name */
		if (k->nccl)
			st->nccl += e->dur;
		return true;
	}
	if (c == C_COPY)
		return kstat_add(&st->copies, e->name, e->dur, e->bytes) != NULL;
	if (c == C_RUNTIME) {
		st->runtime_total += e->dur;
		if (strstr(e->name, "Synchronize") != NULL)
			st->sync_total += e->dur;
		return true;
	}
	/* the CPU's iterations; Kineto copies them onto GPU rows too */
	if (strncmp(e->name, "ProfilerStep#", 13) == 0)
		return c == C_GPU_ANNOTATION || durs_add(&st->steps, e->dur);
	/* a user range, and the GPU time of the work launched inside it */
	if (c == C_ANNOTATION)
		return kstat_add(&st->ranges, e->name, e->dur, 0) != NULL;
	if (c == C_GPU_ANNOTATION)
		return kstat_add(&st->granges, e->name, e->dur, 0) != NULL;
	return true;
}

/* ---- the parser's callbacks ---- */

/* Every key of every event comes through here: by length, then bytes. */
static enum key key_of(const unsigned char *k, size_t n)
{
#define IS(lit) (memcmp(k, lit, sizeof(lit) - 1) == 0)
	switch (n) {
	case 2: return IS("ph") ? K_PH : IS("ts") ? K_TS : K_OTHER;
	case 3: return IS("cat") ? K_CAT : IS("pid") ? K_PID : IS("tid") ? K_TID :
	               IS("dur") ? K_DUR : K_OTHER;
	case 4: return IS("name") ? K_NAME : IS("args") ? K_ARGS : IS("rank") ? K_RANK : K_OTHER;
	case 5: return IS("bytes") ? K_BYTES : K_OTHER;
	case 10: return IS("world_size") ? K_WORLD : K_OTHER;
	case 11: return IS("traceEvents") ? K_EVENTS : K_OTHER;
	case 15: return IS("distributedInfo") ? K_DIST : K_OTHER;
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

static bool in_dist(const struct parse *p)
{
	return p->depth == 2 && p->key[1] == K_DIST;
}

static int on_number(struct parse *p, double v)
{
	if (in_event(p)) {
		switch (p->key[p->depth]) {
		case K_PID: p->e.pid = (int64_t)v; break;
		case K_TID: p->e.tid = (int64_t)v; break;
		case K_TS: p->e.ts = v; break;
		case K_DUR: p->e.dur = v; break;
		default: break;
		}
	} else if (in_args(p) && p->key[p->depth] == K_BYTES) {
		p->e.bytes = v;
	} else if (in_dist(p)) {
		if (p->key[2] == K_RANK)
			p->st->rank = (int64_t)v;
		else if (p->key[2] == K_WORLD)
			p->st->world = (int64_t)v;
	}
	return 1;
}

/* The number's text as yajl found it (it skips its own conversion when
 * given this callback): only the few numbers read are converted, and the
 * usual ones (digits, a point, digits) without strtod. */
static int cb_number(void *ctx, const char *s, size_t n)
{
	struct parse *p = ctx;
	char tmp[64];
	double v = 0, scale = 1;
	size_t i = 0;
	bool neg = false, simple = true;

	enum key k = p->depth <= DEPTH_MAX ? p->key[p->depth] : K_OTHER;

	/* only these numbers are read: the rest (correlation ids, grids...) skipped */
	if (!(in_event(p) && (k == K_PID || k == K_TID || k == K_TS || k == K_DUR)) &&
	    !(in_args(p) && k == K_BYTES) && !(in_dist(p) && (k == K_RANK || k == K_WORLD)))
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

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
	struct parse *p = ctx;
	char *dst = NULL;
	size_t cap = 0;

	if (!in_event(p))
		return 1;
	switch (p->key[p->depth]) {
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

static int cb_key(void *ctx, const unsigned char *k, size_t n)
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
		p->events_depth = 2;
	if (!array && in_event(p)) {
		memset(&p->e, 0, sizeof(p->e));
		p->e.pid = p->e.tid = -1;
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
	p->depth--;
	return 1;
}

static const yajl_callbacks callbacks = {
	NULL, NULL, NULL, NULL, cb_number, cb_string, cb_start_map, cb_key, cb_end_map,
	cb_start_array, cb_end_array,
};

/* ---- after the pass ---- */

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

static void gap(struct gpu *g, double len)
{
	static const double edges[4] = { 10, 100, 1000, 10000 }; /* us */
	size_t b;

	if (len <= 0)
		return;
	for (b = 0; b < 4 && len >= edges[b]; b++)
		;
	g->idle_bucket[b] += len;
}

/* Merges a device's or stream's intervals: busy time, and idle gaps by
 * length (from the window's start to its end, t0..t1). */
static void merge(struct gpu *g, double t0, double t1)
{
	double end = t0, busy = 0;
	size_t i;

	if (g->iv.n > 0)
		qsort(g->iv.v, g->iv.n / 2, 2 * sizeof(double), cmp_double_pairs);
	for (i = 0; i < g->iv.n; i += 2) {
		double a = g->iv.v[i], z = g->iv.v[i + 1];

		if (a > end)
			gap(g, a - end);
		if (i == 0 || a > end) {
			busy += z - a;
			end = z;
		} else if (z > end) {
			busy += z - end;
			end = z;
		}
	}
	gap(g, t1 - end);
	g->busy = busy;
	g->span = g->iv.n ? end - g->iv.v[0] : 0;
}

static void finish(struct rstats *st)
{
	size_t i;

	for (i = 0; i < st->ngpus; i++)
		merge(&st->gpus[i], st->t0, st->t1);
	for (i = 0; i < st->kernels.n; i++)
		qsort(st->kernels.v[i].d.v, st->kernels.v[i].d.n, sizeof(float), cmp_float);
	for (i = 0; i < st->copies.n; i++)
		qsort(st->copies.v[i].d.v, st->copies.v[i].d.n, sizeof(float), cmp_float);
	if (st->steps.n > 0) /* qsort's base may not be NULL, even for nothing */
		qsort(st->steps.v, st->steps.n, sizeof(float), cmp_float);
}

int report_read(const char *path, struct rstats *st)
{
	static unsigned char buf[64 << 10];
	struct parse p = { .st = st };
	uint64_t offset = 0;
	yajl_handle h;
	yajl_status s = yajl_status_ok;
	gzFile gz;
	int n;

	memset(st, 0, sizeof(*st));
	st->rank = st->world = -1;
	st->t0 = HUGE_VAL; /* no event yet: window() is 0 */
	st->t1 = -HUGE_VAL;
	snprintf(st->path, sizeof(st->path), "%s", path);
	if ((gz = gzopen(path, "rb")) == NULL) {
		snprintf(st->error, sizeof(st->error), "cannot open it: %s", strerror(errno));
		return -1;
	}
	gzbuffer(gz, 256 << 10);
	if ((h = yajl_alloc(&callbacks, NULL, &p)) == NULL) {
		gzclose(gz);
		snprintf(st->error, sizeof(st->error), "out of memory");
		return -1;
	}
	/* UTF-8 checks of every string cost a third of the time; names are
	 * only printed, cut at 512 bytes, and the JSON output escapes them */
	yajl_config(h, yajl_dont_validate_strings, 1);
	while ((n = gzread(gz, buf, sizeof(buf))) > 0) {
		s = yajl_parse(h, buf, (size_t)n);
		if (s != yajl_status_ok)
			break;
		offset += (uint64_t)n;
	}
	if (n < 0) {
		int zerr;
		const char *why = gzerror(gz, &zerr);

		st->truncated = true;
		snprintf(st->error, sizeof(st->error), "gzip data broken after %llu bytes (%s): "
		         "what came before is reported", (unsigned long long)offset, why);
	} else if (s == yajl_status_ok && (s = yajl_complete_parse(h)) != yajl_status_ok) {
		st->truncated = true;
		snprintf(st->error, sizeof(st->error), "the file ends early, after %llu bytes (a "
		         "trace still being written, or cut): what came before is reported",
		         (unsigned long long)offset);
	} else if (s != yajl_status_ok) {
		unsigned char *e = yajl_get_error(h, 0, NULL, 0);

		st->truncated = true;
		snprintf(st->error, sizeof(st->error), "%s at byte %llu: %s; what came before is "
		         "reported", p.oom ? "out of memory" : "not valid JSON",
		         (unsigned long long)(offset + yajl_get_bytes_consumed(h)),
		         e ? (const char *)e : "?");
		if (e)
			yajl_free_error(h, e);
	}
	yajl_free(h);
	gzclose(gz);
	finish(st);
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
	free(m->slot);
}

void report_free(struct rstats *st)
{
	size_t i;

	kmap_free(&st->kernels);
	kmap_free(&st->copies);
	kmap_free(&st->ranges);
	kmap_free(&st->granges);
	for (i = 0; i < st->ngpus; i++)
		free(st->gpus[i].iv.v);
	free(st->gpus);
	free(st->steps.v);
	memset(st, 0, sizeof(*st));
}

/* ---- figures the outputs share ---- */

static double median(const struct durs *d)
{
	if (d->n == 0)
		return 0;
	return d->n % 2 ? d->v[d->n / 2] : (d->v[d->n / 2 - 1] + d->v[d->n / 2]) / 2;
}

static int by_total(const void *a, const void *b)
{
	const struct kstat *x = *(struct kstat *const *)a, *y = *(struct kstat *const *)b;

	return x->total > y->total ? -1 : x->total < y->total;
}

/* The kernels (or copies) by GPU time, largest first: an array of n
 * pointers the caller frees. */
static struct kstat **ranked(const struct kmap *m)
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

static double window(const struct rstats *st)
{
	return st->t1 > st->t0 ? st->t1 - st->t0 : 0;
}


/* per-iteration figures divide by this: the iterations, or 1 when none */
static double iterations_or_1(const struct rstats *st)
{
	return st->steps.n ? (double)st->steps.n : 1;
}

/* Findings, most important first: written into out (one per line,
 * "what; evidence; what to do"), at most max. */
struct finding { double weight; char text[400]; };

static int by_weight(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;

	return x->weight > y->weight ? -1 : x->weight < y->weight;
}

static size_t findings(struct rstats *const *st, size_t n, struct finding *out, size_t max)
{
	size_t k = 0, i, j;

	for (i = 0; i < n && k + 4 < max; i++) {
		const struct rstats *s = st[i];
		double w = window(s), busy = 0, kernels = 0;
		char who[32] = "";

		if (n > 1)
			snprintf(who, sizeof(who), "rank %lld: ", (long long)s->rank);
		for (j = 0; j < s->ngpus; j++)
			if (s->gpus[j].stream < 0 && s->gpus[j].busy > busy)
				busy = s->gpus[j].busy;
		for (j = 0; j < s->kernels.n; j++)
			kernels += (double)s->kernels.v[j].count;
		if (w > 0 && s->gpu_events > 0 && busy / w < 0.7) {
			out[k].weight = 1 - busy / w;
			snprintf(out[k++].text, sizeof(out[0].text), "%sthe GPU is idle %.0f%% of the "
			         "window; look at what the CPU does in the gaps (data loading, host "
			         "copies, synchronisation, launch overhead)", who, 100 * (1 - busy / w));
		}
		if (kernels >= 20 && (double)s->short_kernels / kernels > 0.5) {
			out[k].weight = 0.5 * (double)s->short_kernels / kernels;
			snprintf(out[k++].text, sizeof(out[0].text), "%s%.0f%% of kernels run shorter "
			         "than 10 us: the loop is launch-bound; fuse them (torch.compile), or "
			         "replay them as a CUDA graph", who,
			         100 * (double)s->short_kernels / kernels);
		}
		for (j = 0; j < s->copies.n; j++)
			if (strstr(s->copies.v[j].name, "Pageable") != NULL) {
				out[k].weight = 0.4;
				snprintf(out[k++].text, sizeof(out[0].text), "%s%llu copies from or to "
				         "pageable host memory (%s): pin the host buffers "
				         "(pin_memory=True)", who, (unsigned long long)s->copies.v[j].count,
				         s->copies.v[j].name);
				break;
			}
		if (w > 0 && s->sync_total / w > 0.1) {
			out[k].weight = s->sync_total / w;
			snprintf(out[k++].text, sizeof(out[0].text), "%s%.0f%% of the window in "
			         "synchronising CUDA calls: each stops the CPU until the GPU catches up; "
			         "remove the .item()/.cpu() calls in the loop, or move them out of it",
			         who, 100 * s->sync_total / w);
		}
	}
	if (n > 1 && k < max) {
		/* the straggler: the rank that waits least in collectives while
		 * another waits much longer */
		size_t lo = 0, hi = 0;

		for (i = 1; i < n; i++) {
			if (st[i]->nccl / iterations_or_1(st[i]) < st[lo]->nccl / iterations_or_1(st[lo]))
				lo = i;
			if (st[i]->nccl / iterations_or_1(st[i]) > st[hi]->nccl / iterations_or_1(st[hi]))
				hi = i;
		}
		if (st[hi]->nccl / iterations_or_1(st[hi]) >
		    2 * st[lo]->nccl / iterations_or_1(st[lo]) + 100) {
			out[k].weight = 0.9;
			snprintf(out[k++].text, sizeof(out[0].text), "rank %lld is the straggler: rank "
			         "%lld waits %.2f ms per iteration in NCCL kernels, rank %lld %.2f ms; "
			         "look at what rank %lld does besides the collectives (its data, its "
			         "share of the work, its GPU)", (long long)st[lo]->rank,
			         (long long)st[hi]->rank, st[hi]->nccl / iterations_or_1(st[hi]) / 1000,
			         (long long)st[lo]->rank, st[lo]->nccl / iterations_or_1(st[lo]) / 1000,
			         (long long)st[lo]->rank);
		}
	}
	qsort(out, k, sizeof(*out), by_weight);
	return k;
}

/* ---- text ---- */

static void print_top(FILE *f, const struct kmap *m, size_t top, double total, bool copies)
{
	struct kstat **v = ranked(m);
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
		        (unsigned long long)k->count, k->total / (double)k->count, median(&k->d), k->max,
		        bw, copies ? " " : "", k->name);
	}
	free(v);
}

static void print_one(FILE *f, const struct rstats *s, size_t top)
{
	static const char *const bucket[5] = { "<10us", "10-100us", "0.1-1ms", "1-10ms", ">=10ms" };
	double w = window(s);
	size_t i, b;

	fprintf(f, "== %s", s->path);
	if (s->rank >= 0)
		fprintf(f, " (rank %lld of %lld)", (long long)s->rank, (long long)s->world);
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
		for (b = 0; b < s->ngpus; b++)
			if (s->gpus[b].dev == g->dev && s->gpus[b].stream >= 0)
				fprintf(f, "  stream %lld: busy %.3f ms (%.1f%%)\n",
				        (long long)s->gpus[b].stream, s->gpus[b].busy / 1000,
				        w > 0 ? 100 * s->gpus[b].busy / w : 0);
	}
	if (s->steps.n)
		fprintf(f, "iterations: %zu, median %.3f ms, min %.3f, max %.3f (max/min %.2f)\n",
		        s->steps.n, median(&s->steps) / 1000, s->steps.v[0] / 1000.0,
		        s->steps.v[s->steps.n - 1] / 1000.0,
		        s->steps.v[0] > 0 ? s->steps.v[s->steps.n - 1] / s->steps.v[0] : 0);
	fprintf(f, "CPU: %.3f ms in CUDA API calls (%.3f ms synchronising); GPU kernels %.3f ms, "
	        "NCCL %.3f ms (%.1f%% of kernel time)\n", s->runtime_total / 1000,
	        s->sync_total / 1000, s->kernel_total / 1000, s->nccl / 1000,
	        s->kernel_total > 0 ? 100 * s->nccl / s->kernel_total : 0);
	if (s->kernels.n) {
		fprintf(f, "top kernels by GPU time:\n");
		print_top(f, &s->kernels, top, s->kernel_total, false);
	}
	if (s->copies.n) {
		fprintf(f, "copies and sets:\n");
		print_top(f, &s->copies, top, 0, true);
	}
	if (s->ranges.n) {
		struct kstat **v = ranked(&s->ranges);

		fprintf(f, "ranges (NVTX, record_function) by CPU time, with the GPU time of the work "
		        "launched inside them:\n  %10s %10s %7s %s\n", "CPU ms", "GPU ms", "count", "name");
		for (i = 0; v != NULL && i < s->ranges.n && i < top; i++) {
			const struct kstat *g = kmap_find(&s->granges, v[i]->name);

			fprintf(f, "  %10.3f %10.3f %7llu %.100s\n", v[i]->total / 1000,
			        g ? g->total / 1000 : 0, (unsigned long long)v[i]->count, v[i]->name);
		}
		free(v);
	}
}

void report_print(FILE *f, struct rstats *const *st, size_t n, size_t top)
{
	struct finding fs[64];
	size_t i, k;

	for (i = 0; i < n; i++) {
		print_one(f, st[i], top);
		fprintf(f, "\n");
	}
	if (n > 1) {
		fprintf(f, "== across ranks\n  %5s %12s %12s %14s %10s\n", "rank", "step ms", "GPU busy %",
		        "NCCL ms/step", "kernels");
		for (i = 0; i < n; i++) {
			double busy = 0, w = window(st[i]);
			uint64_t kernels = 0;
			size_t j;

			for (j = 0; j < st[i]->ngpus; j++)
				if (st[i]->gpus[j].stream < 0 && st[i]->gpus[j].busy > busy)
					busy = st[i]->gpus[j].busy;
			for (j = 0; j < st[i]->kernels.n; j++)
				kernels += st[i]->kernels.v[j].count;
			fprintf(f, "  %5lld %12.3f %12.1f %14.3f %10llu\n", (long long)st[i]->rank,
			        median(&st[i]->steps) / 1000, w > 0 ? 100 * busy / w : 0,
			        st[i]->nccl / iterations_or_1(st[i]) / 1000, (unsigned long long)kernels);
		}
		fprintf(f, "\n");
	}
	k = findings(st, n, fs, sizeof(fs) / sizeof(fs[0]));
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
	struct kstat **v = ranked(m);
	size_t i;

	for (i = 0; v != NULL && i < m->n && i < top; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "name", v[i]->name);
		cJSON_AddNumberToObject(o, "count", (double)v[i]->count);
		cJSON_AddNumberToObject(o, "total_us", v[i]->total);
		cJSON_AddNumberToObject(o, "mean_us", v[i]->total / (double)v[i]->count);
		cJSON_AddNumberToObject(o, "median_us", median(&v[i]->d));
		cJSON_AddNumberToObject(o, "max_us", v[i]->max);
		if (total > 0)
			cJSON_AddNumberToObject(o, "share", v[i]->total / total);
		if (v[i]->bytes)
			cJSON_AddNumberToObject(o, "bytes", (double)v[i]->bytes);
		cJSON_AddItemToArray(a, o);
	}
	free(v);
	return a;
}

cJSON *report_json(struct rstats *const *st, size_t n, size_t top)
{
	cJSON *root = cJSON_CreateObject(), *ranks = cJSON_AddArrayToObject(root, "ranks"), *fa;
	struct finding fs[64];
	size_t i, j, k;

	for (i = 0; i < n; i++) {
		const struct rstats *s = st[i];
		cJSON *r = cJSON_CreateObject(), *gpus = cJSON_CreateArray(), *steps;

		cJSON_AddStringToObject(r, "file", s->path);
		cJSON_AddNumberToObject(r, "rank", (double)s->rank);
		cJSON_AddNumberToObject(r, "world_size", (double)s->world);
		if (s->error[0])
			cJSON_AddStringToObject(r, "error", s->error);
		cJSON_AddNumberToObject(r, "window_us", window(s));
		cJSON_AddNumberToObject(r, "events", (double)s->events);
		cJSON_AddNumberToObject(r, "gpu_events", (double)s->gpu_events);
		for (j = 0; j < s->ngpus; j++) {
			const struct gpu *g = &s->gpus[j];
			cJSON *o = cJSON_CreateObject();

			cJSON_AddNumberToObject(o, "device", (double)g->dev);
			if (g->stream >= 0)
				cJSON_AddNumberToObject(o, "stream", (double)g->stream);
			cJSON_AddNumberToObject(o, "busy_us", g->busy);
			if (g->stream < 0) {
				cJSON_AddNumberToObject(o, "idle_us", window(s) - g->busy);
				cJSON_AddItemToObject(o, "idle_gaps_us", cJSON_CreateDoubleArray(g->idle_bucket,
				                                                                   5));
			}
			cJSON_AddItemToArray(gpus, o);
		}
		cJSON_AddItemToObject(r, "gpus", gpus);
		steps = cJSON_AddObjectToObject(r, "iterations");
		cJSON_AddNumberToObject(steps, "count", (double)s->steps.n);
		cJSON_AddNumberToObject(steps, "median_us", median(&s->steps));
		cJSON_AddNumberToObject(steps, "min_us", s->steps.n ? s->steps.v[0] : 0);
		cJSON_AddNumberToObject(steps, "max_us", s->steps.n ? s->steps.v[s->steps.n - 1] : 0);
		cJSON_AddNumberToObject(r, "kernel_us", s->kernel_total);
		cJSON_AddNumberToObject(r, "nccl_us", s->nccl);
		cJSON_AddNumberToObject(r, "nccl_us_per_iteration", s->nccl / iterations_or_1(s));
		cJSON_AddNumberToObject(r, "cuda_api_us", s->runtime_total);
		cJSON_AddNumberToObject(r, "sync_us", s->sync_total);
		cJSON_AddNumberToObject(r, "short_kernels", (double)s->short_kernels);
		cJSON_AddItemToObject(r, "top_kernels", top_json(&s->kernels, top, s->kernel_total));
		cJSON_AddItemToObject(r, "copies", top_json(&s->copies, top, 0));
		{
			cJSON *ra = cJSON_AddArrayToObject(r, "ranges");
			struct kstat **v = ranked(&s->ranges);

			for (j = 0; v != NULL && j < s->ranges.n && j < top; j++) {
				const struct kstat *g = kmap_find(&s->granges, v[j]->name);
				cJSON *o = cJSON_CreateObject();

				cJSON_AddStringToObject(o, "name", v[j]->name);
				cJSON_AddNumberToObject(o, "count", (double)v[j]->count);
				cJSON_AddNumberToObject(o, "cpu_us", v[j]->total);
				cJSON_AddNumberToObject(o, "gpu_us", g ? g->total : 0);
				cJSON_AddItemToArray(ra, o);
			}
			free(v);
		}
		cJSON_AddItemToArray(ranks, r);
	}
	k = findings(st, n, fs, sizeof(fs) / sizeof(fs[0]));
	fa = cJSON_AddArrayToObject(root, "findings");
	for (i = 0; i < k; i++)
		cJSON_AddItemToArray(fa, cJSON_CreateString(fs[i].text));
	return root;
}
