/*
 * tw.c: the trace stream one burst is written into (writer.c opens it and
 * writes the document; gpu_events.c and gpu_meta.c add CUPTI's events and
 * the GPUs' properties to it): one buffer into one gzip stream, JSON
 * primitives, the CPU threads and GPU streams seen (their rows), and the
 * index of NVTX ranges that GPU work is projected onto, with the check
 * that keeps the projection drawable (tw_write_projections).
 *
 * A floor below the writer and the GPU parts: it knows neither (issue 25:
 * the writer calls gpu_write, which writes through here). Ownership: the
 * stream, the row sets and the index belong to the struct tw, which
 * writer_write allocates and frees; the index's entries point to names in
 * the burst's arena, valid until writer_write returns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "rec.h"
#include "state.h"
#include "tw.h"

/* What rec.c reserved for each range is what the index holds for it: its
 * entry and qsort's scratch copy (glibc's qsort sorts through a copy). */
_Static_assert(2 * sizeof(struct rng) <= REC_RANGE_RESERVE,
               "the range index holds more per range than rec.c reserves (rec.h)");

/* -errno of a failed gzip write or close (ENOSPC on a full disk), else -EIO */
static int gz_errno(gzFile gz, int saved)
{
	int zerr = Z_OK;

	if (gz != NULL)
		gzerror(gz, &zerr);
	return (zerr == Z_ERRNO || gz == NULL) && saved > 0 ? -saved : -EIO;
}

void tw_flush(struct tw *w)
{
	errno = 0;
	if (w->len && !w->err && gzwrite(w->gz, w->buf, (unsigned)w->len) != (int)w->len)
		w->err = gz_errno(w->gz, errno);
	w->len = 0;
}

/* Flushes and closes the gzip stream: 0, or w->err (the first failure). */
int tw_close(struct tw *w)
{
	tw_flush(w);
	errno = 0;
	if (gzclose(w->gz) != Z_OK && !w->err)
		w->err = gz_errno(NULL, errno); /* the handle is gone: errno is what is left */
	return w->err;
}

void tw_raw(struct tw *w, const char *s, size_t n)
{
	while (n > 0) {
		size_t k = sizeof(w->buf) - w->len;

		if (k == 0) {
			tw_flush(w);
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

void tw_str(struct tw *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	if (n == (size_t)-1)
		n = strlen(s);
	tw_put(w, '"');
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			tw_put(w, '\\');
			tw_put(w, (char)c);
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
			tw_put(w, (char)c);
		}
	}
	tw_put(w, '"');
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
	tw_put(w, '{');
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
	tw_put(w, ph);
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
	tw_put(w, '}');
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
void tw_index_ranges(struct tw *w)
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

void tw_write_projections(struct tw *w)
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
