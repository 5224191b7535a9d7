/*
 * writer.c: writes one burst as Kineto's Chrome-trace JSON
 * (shared/TRACE_FORMAT.md) into a gzip file, in one streaming pass.
 *
 * Order in the file: schemaVersion, deviceProperties, every metadata key
 * (distributedInfo with a space after "rank":, trace_id, host_name, CUDA
 * versions, gprof's dropped/cut counts), displayTimeUnit,
 * baseTimeNanoseconds, then traceEvents: the CPU events of every thread
 * buffer (ranges, marks, ProfilerStep#<n>), CUPTI's events (gpu.c: API
 * calls, kernels, copies, sets, syncs, flows), the GPU projection of each
 * NVTX range (gpu_user_annotation: only spans that nest on their stream as
 * their ranges do, see write_projections), notes on what was left out
 * (gprof_note), the process/thread/stream rows, and "Record Window End";
 * last traceName.
 *
 * Ownership: the thread buffers' chunks are taken (rec_take: a pointer
 * swap under each buffer's lock, so application threads never wait on
 * this file's work); their memory is the burst's arena, unmapped by
 * capture.c once this returns. Nothing is copied: events are
 * written from the chunks. The range index (for the GPU projection, only
 * with GPU kinds on) and step_row's boundaries live for one writer_write
 * call, and their bytes were charged to the burst's budget when the events
 * were recorded (writer_range_bytes, writer_step_bytes), so the writer's
 * memory is sized from the budget, not from what arrived.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "agent.h"
#include "writer.h"

/* Kineto's base-time rule: floor to a multiple of 7,889,238 s, so ranks and
 * hosts started within ~3 months share the base. */
#define BASE_QUANTUM_NS (7889238ull * 1000000000ull)
/* A thread's iteration row when its ranges cross iteration boundaries
 * (step_row): Linux thread ids stay below 2^22, so bit 30 is free. */
#define ITER_ROW(tid) ((tid) | 0x40000000)

struct span { int device; int64_t stream; uint64_t start, end; };
struct rng {
	int tid; uint64_t start, end, id;
	const char *name; size_t len; uint32_t domain;
	int parent;
	struct span *spans; size_t nspans;
};

/* What rec.c charges, per event, for what this file will hold: the range
 * index entry and qsort's scratch of the same size (glibc's qsort sorts
 * through a copy when it can get one), and for each iteration its two
 * boundaries and their scratch (step_row). */
const size_t writer_range_bytes = 2 * sizeof(struct rng);
const size_t writer_step_bytes = 4 * sizeof(uint64_t);

/* Every CPU event of a taken buffer, chunk by chunk. */
#define FOR_EACH_EV(e, c, i, head) \
	for ((c) = (head); (c) != NULL; (c) = (c)->next) \
		for ((i) = 0; (i) < (c)->nev && ((e) = &(c)->ev[(i)], 1); (i)++)

struct tw {
	gzFile gz;
	char buf[1 << 16];
	size_t len;
	int err;
	uint64_t base;
	uint64_t events;
	bool first;
	struct rng *r; size_t nr;
	int *tids; size_t ntids, captids;
	struct { int device; int64_t stream; } *streams; size_t nstreams, capstreams;
};

/* -errno of a failed gzip write or close (ENOSPC on a full disk), else -EIO */
static int gz_errno(gzFile gz, int saved)
{
	int zerr = Z_OK;

	if (gz != NULL)
		gzerror(gz, &zerr);
	return (zerr == Z_ERRNO || gz == NULL) && saved > 0 ? -saved : -EIO;
}

static void flush(struct tw *w)
{
	errno = 0;
	if (w->len && !w->err && gzwrite(w->gz, w->buf, (unsigned)w->len) != (int)w->len)
		w->err = gz_errno(w->gz, errno);
	w->len = 0;
}

void tw_raw(struct tw *w, const char *s, size_t n)
{
	while (n > 0) {
		size_t k = sizeof(w->buf) - w->len;

		if (k == 0) {
			flush(w);
			continue;
		}
		if (k > n)
			k = n;
		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
}

static inline void put(struct tw *w, char c)
{
	if (w->len == sizeof(w->buf))
		flush(w);
	w->buf[w->len++] = c;
}

void tw_str(struct tw *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	if (n == (size_t)-1)
		n = strlen(s);
	put(w, '"');
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			put(w, '\\');
			put(w, (char)c);
		} else if (c < 0x20 || c == 0x7f) {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

			tw_raw(w, e, 6);
		} else if (c >= 0x80) {
			/* keep valid UTF-8 sequences, replace stray bytes */
			size_t k = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0, j;
			bool ok = k > 0 && c < 0xf5 && i + k < n;

			for (j = 1; ok && j <= k; j++)
				ok = i + j < n && ((unsigned char)s[i + j] & 0xc0) == 0x80;
			if (ok) {
				tw_raw(w, s + i, k + 1);
				i += k;
			} else {
				tw_lit(w, "\\ufffd");
			}
		} else {
			put(w, (char)c);
		}
	}
	put(w, '"');
}

static size_t fmt_u64(char *out, uint64_t v)
{
	char tmp[24];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

void tw_int(struct tw *w, int64_t v)
{
	char b[24];
	size_t n = 0;

	if (v < 0) {
		b[n++] = '-';
		n += fmt_u64(b + n, (uint64_t)0 - (uint64_t)v);
	} else {
		n = fmt_u64(b, (uint64_t)v);
	}
	tw_raw(w, b, n);
}

static void fixed3(struct tw *w, uint64_t ns)
{
	char b[32];
	size_t n = fmt_u64(b, ns / 1000);
	unsigned f = (unsigned)(ns % 1000);

	b[n++] = '.';
	b[n++] = (char)('0' + f / 100);
	b[n++] = (char)('0' + f / 10 % 10);
	b[n++] = (char)('0' + f % 10);
	tw_raw(w, b, n);
}

void tw_fix2(struct tw *w, double v)
{
	char b[40];
	int n = snprintf(b, sizeof(b), "%.2f", v);

	tw_raw(w, b, (size_t)n);
}

void tw_ts(struct tw *w, uint64_t ns)
{
	fixed3(w, ns >= w->base ? ns - w->base : 0);
}

void tw_dur(struct tw *w, uint64_t ns)
{
	fixed3(w, ns);
}

void tw_event(struct tw *w)
{
	if (!w->first)
		tw_lit(w, ",\n");
	w->first = false;
	put(w, '{');
	w->events++;
}

void tw_x(struct tw *w, const char *cat, const char *name, size_t nlen, int64_t pid,
          int64_t tid, uint64_t start, uint64_t end)
{
	tw_event(w);
	tw_lit(w, "\"ph\":\"X\",\"cat\":\"");
	tw_raw(w, cat, strlen(cat));
	tw_lit(w, "\",\"name\":");
	tw_str(w, name, nlen);
	tw_lit(w, ",\"pid\":");
	tw_int(w, pid);
	tw_lit(w, ",\"tid\":");
	tw_int(w, tid);
	tw_lit(w, ",\"ts\":");
	tw_ts(w, start);
	tw_lit(w, ",\"dur\":");
	tw_dur(w, end > start ? end - start : 0);
}

void tw_flow(struct tw *w, char ph, uint64_t id, int64_t pid, int64_t tid, uint64_t ts)
{
	tw_event(w);
	tw_lit(w, "\"ph\":\"");
	put(w, ph);
	tw_lit(w, "\",\"id\":");
	tw_int(w, (int64_t)id);
	tw_lit(w, ",\"pid\":");
	tw_int(w, pid);
	tw_lit(w, ",\"tid\":");
	tw_int(w, tid);
	tw_lit(w, ",\"ts\":");
	tw_ts(w, ts);
	tw_lit(w, ",\"cat\":\"ac2g\",\"name\":\"ac2g\"");
	if (ph == 'f')
		tw_lit(w, ",\"bp\":\"e\"");
	put(w, '}');
}

void tw_thread(struct tw *w, int tid)
{
	size_t i;

	for (i = 0; i < w->ntids; i++)
		if (w->tids[i] == tid)
			return;
	if (w->ntids == w->captids) {
		size_t cap = w->captids ? w->captids * 2 : 16;
		int *p = realloc(w->tids, cap * sizeof(*p));

		if (p == NULL)
			return;
		w->tids = p;
		w->captids = cap;
	}
	w->tids[w->ntids++] = tid;
}

void tw_stream(struct tw *w, int device, int64_t stream)
{
	size_t i;

	for (i = 0; i < w->nstreams; i++)
		if (w->streams[i].device == device && w->streams[i].stream == stream)
			return;
	if (w->nstreams == w->capstreams) {
		size_t cap = w->capstreams ? w->capstreams * 2 : 16;
		void *p = realloc(w->streams, cap * sizeof(*w->streams));

		if (p == NULL)
			return;
		w->streams = p;
		w->capstreams = cap;
	}
	w->streams[w->nstreams].device = device;
	w->streams[w->nstreams].stream = stream;
	w->nstreams++;
}

void tw_note(struct tw *w, const char *text)
{
	tw_event(w);
	tw_lit(w, "\"ph\":\"M\",\"name\":\"gprof_note\",\"pid\":");
	tw_int(w, A.pid);
	tw_lit(w, ",\"tid\":0,\"ts\":0,\"args\":{\"note\":");
	tw_str(w, text, (size_t)-1);
	tw_lit(w, "}}");
}

/* ---- the range index: NVTX ranges by thread and time ---- */

static int rng_cmp(const void *a, const void *b)
{
	const struct rng *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1; /* the outer one first */
	return 0;
}

/* Sorts the ranges and links each to the innermost range containing it. */
static void index_ranges(struct tw *w)
{
	int stack[AGENT_MAX_DEPTH + 1];
	int depth = 0;
	size_t i;

	qsort(w->r, w->nr, sizeof(*w->r), rng_cmp);
	for (i = 0; i < w->nr; i++) {
		struct rng *r = &w->r[i];

		if (i > 0 && w->r[i - 1].tid != r->tid)
			depth = 0;
		while (depth > 0 && w->r[stack[depth - 1]].end < r->end)
			depth--;
		r->parent = depth > 0 ? stack[depth - 1] : -1;
		if (depth <= AGENT_MAX_DEPTH)
			stack[depth++] = (int)i;
		if (depth > AGENT_MAX_DEPTH)
			depth = AGENT_MAX_DEPTH;
	}
}

int tw_range_at(struct tw *w, int tid, uint64_t ts)
{
	size_t lo = 0, hi = w->nr;
	int r;

	/* the last range of tid that starts at or before ts */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct rng *m = &w->r[mid];

		if (m->tid < tid || (m->tid == tid && m->start <= ts))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || w->r[lo - 1].tid != tid)
		return -1;
	for (r = (int)lo - 1; r >= 0 && w->r[r].end < ts; r = w->r[r].parent)
		;
	return r;
}

uint64_t tw_range_id(struct tw *w, int r)
{
	return r >= 0 && (size_t)r < w->nr ? w->r[r].id : 0;
}

void tw_range_gpu(struct tw *w, int r, int device, int64_t stream, uint64_t start, uint64_t end)
{
	for (; r >= 0; r = w->r[r].parent) {
		struct rng *g = &w->r[r];
		size_t i;

		for (i = 0; i < g->nspans; i++)
			if (g->spans[i].device == device && g->spans[i].stream == stream)
				break;
		if (i == g->nspans) {
			struct span *p = realloc(g->spans, (g->nspans + 1) * sizeof(*p));

			if (p == NULL)
				return;
			g->spans = p;
			g->spans[g->nspans++] = (struct span){ device, stream, start, end };
			continue;
		}
		if (start < g->spans[i].start)
			g->spans[i].start = start;
		if (end > g->spans[i].end)
			g->spans[i].end = end;
	}
}

/* ---- CPU events ---- */

/* Events recorded after the window's end (a duration timer fires a
 * little late; a thread may be mid-event when recording stops) are not
 * part of the window. */
static bool in_window(const struct cev *e, uint64_t t0, uint64_t t1)
{
	return e->start_ns >= t0 && e->end_ns <= t1;
}

/* The range index, for the GPU projection: only when GPU kinds are on (no
 * kernel to project otherwise), and then every range's entry was charged
 * to the budget when it was recorded (writer_range_bytes). */
static void collect_ranges(struct tw *w, const struct taken *tk, size_t ntk, uint64_t t0,
                           uint64_t t1)
{
	const struct evchunk *c;
	const struct cev *e;
	size_t i, n = 0;
	uint32_t j;

	if (!A.win.index)
		return;
	for (i = 0; i < ntk; i++)
		FOR_EACH_EV(e, c, j, tk[i].head)
			n += e->kind == CEV_RANGE && in_window(e, t0, t1);
	w->r = calloc(n ? n : 1, sizeof(*w->r));
	if (w->r == NULL)
		return;
	for (i = 0; i < ntk; i++) {
		FOR_EACH_EV(e, c, j, tk[i].head) {
			if (e->kind != CEV_RANGE || !in_window(e, t0, t1))
				continue;
			w->r[w->nr++] = (struct rng){
				.tid = tk[i].tid, .start = e->start_ns, .end = e->end_ns, .id = e->id,
				.name = e->name, .len = e->name_len, .domain = e->domain };
		}
	}
	index_ranges(w);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The row a thread's ProfilerStep# events go on. Normally the stepping
 * thread's own, as Kineto does; but when one of that thread's ranges
 * crosses an iteration boundary (an NVTX range around the whole training
 * step, with the optimizer hook's boundary inside it), the two would
 * overlap on one row and Perfetto drops one of them: then the thread's
 * iterations get a row of their own, "iterations (thread N)".
 */
static int64_t step_row(const struct taken *t, uint64_t t0, uint64_t t1)
{
	const struct evchunk *c;
	const struct cev *e;
	uint64_t *b = NULL;
	size_t nb = 0;
	int64_t row = t->tid;
	uint32_t j;

	FOR_EACH_EV(e, c, j, t->head)
		if (e->kind == CEV_STEP && in_window(e, t0, t1))
			nb += 2;
	if (nb == 0 || (b = malloc(nb * sizeof(*b))) == NULL)
		return row;
	nb = 0;
	FOR_EACH_EV(e, c, j, t->head)
		if (e->kind == CEV_STEP && in_window(e, t0, t1)) {
			b[nb++] = e->start_ns;
			b[nb++] = e->end_ns;
		}
	qsort(b, nb, sizeof(*b), cmp_u64);
	if (ops_crosses(t->tid, b, nb)) /* Optimizer.step, whose hook steps */
		row = ITER_ROW(t->tid);
	FOR_EACH_EV(e, c, j, t->head) {
		size_t lo = 0, hi = nb;

		if (row != t->tid)
			break;
		if (e->kind != CEV_RANGE || !in_window(e, t0, t1))
			continue;
		while (lo < hi) { /* the first boundary after the range's start */
			size_t mid = (lo + hi) / 2;

			if (b[mid] <= e->start_ns)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nb && b[lo] < e->end_ns)
			row = ITER_ROW(t->tid);
	}
	free(b);
	return row;
}

static void write_cpu(struct tw *w, const struct taken *tk, size_t ntk, uint64_t t0,
                      uint64_t t1)
{
	const struct evchunk *c;
	const struct cev *e;
	char step[40];
	uint32_t j;
	size_t i;

	for (i = 0; i < ntk; i++) {
		int64_t srow = step_row(&tk[i], t0, t1);

		tw_thread(w, tk[i].tid);
		if (srow != tk[i].tid)
			tw_thread(w, (int)srow);
		FOR_EACH_EV(e, c, j, tk[i].head) {
			const char *dn;

			if (!in_window(e, t0, t1))
				continue;
			if (e->kind == CEV_STEP) {
				int n = snprintf(step, sizeof(step), "ProfilerStep#%llu",
				                 (unsigned long long)e->id);

				tw_x(w, "user_annotation", step, (size_t)n, A.pid, srow,
				     e->start_ns, e->end_ns);
				put(w, '}');
				continue;
			}
			if (e->kind == CEV_MARK) {
				tw_event(w);
				tw_lit(w, "\"ph\":\"i\",\"s\":\"t\",\"cat\":\"user_annotation\",\"name\":");
				tw_str(w, e->name, e->name_len);
				tw_lit(w, ",\"pid\":");
				tw_int(w, A.pid);
				tw_lit(w, ",\"tid\":");
				tw_int(w, tk[i].tid);
				tw_lit(w, ",\"ts\":");
				tw_ts(w, e->start_ns);
			} else {
				tw_x(w, "user_annotation", e->name, e->name_len,
				     A.pid, tk[i].tid, e->start_ns, e->end_ns);
				tw_lit(w, ",\"args\":{\"External id\":");
				tw_int(w, (int64_t)e->id);
				if (e->domain && (dn = nvtx_domain_name(e->domain)) != NULL) {
					tw_lit(w, ",\"domain\":");
					tw_str(w, dn, (size_t)-1);
				}
				put(w, '}');
			}
			put(w, '}');
		}
	}
}

/*
 * The GPU projection's rule: on each (device, stream) row the spans of
 * ranges are a proper nesting that mirrors the CPU ranges: two spans that
 * intersect belong to a range and one of its ancestors (same thread), and
 * the ancestor's contains the other's (which tw_range_gpu's extension of
 * every parent guarantees). Spans that break it (two threads' ranges
 * launching onto one stream, interleaved on the GPU; a launch attributed
 * to the wrong range) would be drawn wrongly by Perfetto and summed twice
 * by report, so both spans of such a pair are left out, and the trace and
 * the agent log say so. A sweep per row, in order of start (the longer
 * first): the open spans form one chain of ancestors, so a span is checked
 * against the innermost open one only; a span that fails is not pushed.
 */
struct pspan { int device; int64_t stream; uint64_t start, end; int r; size_t j; bool drop; };

static int pspan_cmp(const void *a, const void *b)
{
	const struct pspan *x = a, *y = b;

	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	/* equal spans: a parent sorts before its children (index_ranges) */
	return x->r < y->r ? -1 : x->r > y->r;
}

static bool is_ancestor(const struct tw *w, int a, int r)
{
	for (r = w->r[r].parent; r >= 0; r = w->r[r].parent)
		if (r == a)
			return true;
	return false;
}

/* Marks the spans that break the rule; returns how many, or -1 without
 * memory (then nothing is written). */
static long check_projections(struct tw *w, struct pspan *v, size_t n)
{
	size_t *stack = malloc((n ? n : 1) * sizeof(*stack)), depth = 0, i;
	long bad = 0;

	if (stack == NULL)
		return -1;
	qsort(v, n, sizeof(*v), pspan_cmp);
	for (i = 0; i < n; i++) {
		struct pspan *s = &v[i], *top;

		if (i > 0 && (v[i - 1].device != s->device || v[i - 1].stream != s->stream))
			depth = 0; /* a new row */
		while (depth > 0 && v[stack[depth - 1]].end <= s->start)
			depth--;
		top = depth > 0 ? &v[stack[depth - 1]] : NULL;
		if (top != NULL && (s->end > top->end || !is_ancestor(w, top->r, s->r))) {
			bad += !s->drop + !top->drop;
			s->drop = top->drop = true;
			continue;
		}
		stack[depth++] = i;
	}
	free(stack);
	return bad;
}

static void write_projections(struct tw *w)
{
	struct pspan *v;
	size_t i, j, n = 0, rows = 0, last = 0;
	long bad;
	char note[400];

	for (i = 0; i < w->nr; i++)
		n += w->r[i].nspans;
	if (n == 0)
		return;
	if ((v = malloc(n * sizeof(*v))) == NULL) {
		agent_log("trace %s: out of memory checking the GPU projection of NVTX ranges: "
		          "left out", A.win.trace_id);
		return;
	}
	n = 0;
	for (i = 0; i < w->nr; i++)
		for (j = 0; j < w->r[i].nspans; j++) {
			const struct span *p = &w->r[i].spans[j];

			v[n++] = (struct pspan){ p->device, p->stream, p->start, p->end, (int)i, j, false };
		}
	if ((bad = check_projections(w, v, n)) < 0) {
		agent_log("trace %s: out of memory checking the GPU projection of NVTX ranges: "
		          "left out", A.win.trace_id);
		free(v);
		return;
	}
	for (i = 0; i < n; i++) {
		const struct pspan *p = &v[i];
		const struct rng *r = &w->r[p->r];

		if (p->drop) {
			/* v is sorted by row: count the rows that lost a span */
			rows += rows == 0 || v[last].device != p->device || v[last].stream != p->stream;
			last = i;
			continue;
		}
		tw_x(w, "gpu_user_annotation", r->name, r->len, p->device, p->stream, p->start,
		     p->end);
		tw_lit(w, ",\"args\":{\"External id\":");
		tw_int(w, (int64_t)r->id);
		tw_lit(w, ",\"device\":");
		tw_int(w, p->device);
		tw_lit(w, ",\"stream\":");
		tw_int(w, p->stream);
		tw_lit(w, "}}");
	}
	if (bad > 0) {
		snprintf(note, sizeof(note), "GPU spans of %ld NVTX ranges left out on %zu stream(s): "
		         "each overlapped, on its stream, the span of a range that is not its own "
		         "parent or child (ranges of two threads launching onto one stream, "
		         "interleaved on the GPU), which one row cannot draw", bad, rows);
		tw_note(w, note);
		agent_log("trace %s: %s", A.win.trace_id, note);
	}
	free(v);
}

static void comm_of(int tid, char *out, size_t n)
{
	char path[64];
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), tid ? "/proc/self/task/%d/comm" : "/proc/self/comm", tid);
	out[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	k = read(fd, out, n - 1);
	close(fd);
	out[k > 0 ? k : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

static void meta(struct tw *w, const char *what, int64_t pid, int64_t tid, const char *key,
                 const char *sval, int64_t ival)
{
	tw_event(w);
	tw_lit(w, "\"ph\":\"M\",\"name\":\"");
	tw_raw(w, what, strlen(what));
	tw_lit(w, "\",\"pid\":");
	tw_int(w, pid);
	tw_lit(w, ",\"tid\":");
	tw_int(w, tid);
	tw_lit(w, ",\"ts\":0,\"args\":{\"");
	tw_raw(w, key, strlen(key));
	tw_lit(w, "\":");
	if (sval)
		tw_str(w, sval, (size_t)-1);
	else
		tw_int(w, ival);
	tw_lit(w, "}}");
}

static void write_rows(struct tw *w, const struct taken *tk, size_t ntk)
{
	char name[128], comm[64];
	size_t i, j;
	int dev;

	comm_of(0, comm, sizeof(comm));
	meta(w, "process_name", A.pid, 0, "name", comm[0] ? comm : "process", 0);
	meta(w, "process_labels", A.pid, 0, "labels", "CPU", 0);
	meta(w, "process_sort_index", A.pid, 0, "sort_index", NULL, A.pid);
	for (i = 0; i < w->ntids; i++) {
		const char *tn = NULL;

		for (j = 0; j < ntk; j++)
			if (tk[j].tid == w->tids[i] && tk[j].thread_name[0])
				tn = tk[j].thread_name;
		if (w->tids[i] & ITER_ROW(0)) {
			snprintf(name, sizeof(name), "iterations (thread %d)", w->tids[i] & ~ITER_ROW(0));
			meta(w, "thread_name", A.pid, w->tids[i], "name", name, 0);
			meta(w, "thread_sort_index", A.pid, w->tids[i], "sort_index", NULL,
			     w->tids[i] & ~ITER_ROW(0));
			continue;
		}
		if (tn == NULL) {
			comm_of(w->tids[i], comm, sizeof(comm));
			tn = comm;
		}
		snprintf(name, sizeof(name), "thread %d (%s)", w->tids[i], tn);
		meta(w, "thread_name", A.pid, w->tids[i], "name", name, 0);
		meta(w, "thread_sort_index", A.pid, w->tids[i], "sort_index", NULL, w->tids[i]);
	}
	for (i = 0; i < w->nstreams; i++) {
		dev = w->streams[i].device;
		for (j = 0; j < i && w->streams[j].device != dev; j++)
			;
		if (j == i) { /* first stream of this device: the device's rows */
			snprintf(name, sizeof(name), "GPU %d", dev);
			meta(w, "process_name", dev, 0, "name", name, 0);
			meta(w, "process_labels", dev, 0, "labels", name, 0);
			meta(w, "process_sort_index", dev, 0, "sort_index", NULL, 0x1000000 + dev);
		}
		snprintf(name, sizeof(name), "stream %lld ", (long long)w->streams[i].stream);
		meta(w, "thread_name", dev, w->streams[i].stream, "name", name, 0);
		meta(w, "thread_sort_index", dev, w->streams[i].stream, "sort_index", NULL,
		     w->streams[i].stream);
	}
}

static void write_header(struct tw *w, uint64_t dropped, uint64_t cpu_dropped, bool cut)
{
	tw_lit(w, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
	gpu_write_devices(w);
	tw_lit(w, "\n  ]");
	/* distributedInfo only for a process that has a rank, as Kineto writes
	 * it only once torch.distributed is up: "rank 0 of 1" for a process
	 * with none would make unrelated traces look like ranks of one job. */
	if (A.rank >= 0) {
		tw_lit(w, ",\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": ");
		tw_int(w, A.rank);
		if (A.world_size > 0) {
			tw_lit(w, ", \"world_size\": ");
			tw_int(w, A.world_size);
		}
		if (A.local_rank >= 0) {
			tw_lit(w, ", \"local_rank\": ");
			tw_int(w, A.local_rank);
		}
		tw_lit(w, "}");
	}
	tw_lit(w, ",\n  \"trace_id\": ");
	tw_str(w, A.win.trace_id, (size_t)-1);
	tw_lit(w, ",\n  \"host_name\": ");
	tw_str(w, A.host, (size_t)-1);
	gpu_write_meta(w);
	tw_lit(w, ",\n  \"gprof_agent_version\": \"" GPROF_VERSION "\"");
	tw_lit(w, ",\n  \"gprof_dropped_records\": ");
	tw_int(w, (int64_t)dropped);
	tw_lit(w, ",\n  \"gprof_dropped_cpu_events\": ");
	tw_int(w, (int64_t)cpu_dropped);
	tw_lit(w, ",\n  \"gprof_trace_cut\": ");
	if (cut)
		tw_lit(w, "true");
	else
		tw_lit(w, "false");
	tw_lit(w, ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ");
	tw_int(w, (int64_t)w->base);
	tw_lit(w, ",\n  \"traceEvents\": [\n");
}

int writer_write(const char *path, struct trace_result *res, char *why, size_t n)
{
	struct tw *w = calloc(1, sizeof(*w));
	uint64_t t0 = atomic_load(&A.t_start), t1 = atomic_load(&A.t_end);
	uint64_t cpu_dropped;
	struct taken *tk;
	size_t ntk = 0, i;
	char name[256];
	int fd, r = 0;

	if (w == NULL) {
		snprintf(why, n, "out of memory writing the trace");
		return -ENOMEM;
	}
	if (t0 == 0)
		t0 = t1;
	w->first = true;
	w->base = t0 / BASE_QUANTUM_NS * BASE_QUANTUM_NS;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || (w->gz = gzdopen(fd, "wb1")) == NULL) {
		r = -errno;
		snprintf(why, n, "cannot write the trace file %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		free(w);
		return r ? r : -EIO;
	}
	tk = rec_take(&ntk); /* recording has stopped: nothing is dropped after this */
	res->dropped = gpu_dropped();
	cpu_dropped = atomic_load(&A.dropped);
	res->cut = atomic_load(&A.end_reason) == END_CUT || gpu_cut();
	write_header(w, res->dropped, cpu_dropped, res->cut);
	res->dropped += cpu_dropped;
	collect_ranges(w, tk, ntk, t0, t1);
	write_cpu(w, tk, ntk, t0, t1);
	ops_write(w);
	gpu_write(w, t0, t1);
	write_projections(w);
	write_rows(w, tk, ntk);
	tw_event(w);
	tw_lit(w, "\"ph\":\"i\",\"s\":\"g\",\"name\":\"Record Window End\",\"pid\":\"\",\"tid\":\"\",\"ts\":");
	tw_ts(w, t1);
	put(w, '}');
	snprintf(name, sizeof(name), "%s_%d.%llu.pt.trace.json.gz", A.host, A.pid,
	         (unsigned long long)t0);
	tw_lit(w, "\n  ],\n  \"traceName\": ");
	tw_str(w, name, (size_t)-1);
	tw_lit(w, "\n}\n");
	flush(w);
	errno = 0;
	if (gzclose(w->gz) != Z_OK && !w->err)
		w->err = gz_errno(NULL, errno); /* the handle is gone: errno is what is left */
	if (w->err) {
		r = w->err;
		snprintf(why, n, "writing the trace file %s failed: %s (the agent writes its traces "
		         "to $GPROF_AGENT_TRACE_DIR, else $TMPDIR or /tmp: free space there, or point "
		         "it elsewhere)", path, strerror(-r));
	}
	res->events = w->events;
	{
		struct stat st;

		if (stat(path, &st) == 0)
			res->bytes = (uint64_t)st.st_size;
	}
	rec_free(tk, ntk);
	for (i = 0; i < w->nr; i++)
		free(w->r[i].spans);
	free(w->r);
	free(w->tids);
	free(w->streams);
	free(w);
	return r;
}
