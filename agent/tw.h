/*
 * tw.h: the trace stream (tw.c), written by writer.c (the document) and by
 * gpu_events.c and gpu_meta.c (CUPTI's events, the GPUs' properties).
 * Everything goes through one buffer into one gzip stream: no document
 * tree, no second pass over the output. Times are CLOCK_REALTIME
 * nanoseconds; the stream prints them as microseconds relative to
 * baseTimeNanoseconds with exactly 3 decimals.
 */
#ifndef GPROF_AGENT_TW_H
#define GPROF_AGENT_TW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

/* An NVTX range in the index, and the span of GPU work launched inside it
 * on one (device, stream). */
struct span { int device; int64_t stream; uint64_t start, end; };
struct rng {
	int tid; uint64_t start, end, id;
	const char *name; size_t len; uint32_t domain;
	int parent;
	struct span *spans; size_t nspans;
};

/* One trace being written. writer_write allocates it, opens gz, sets base
 * and first (true), fills r[0..nr) before tw_index_ranges, and frees r
 * (with each entry's spans), tids and streams after tw_close. */
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

/* Writes out the buffer; a failure is kept in w->err (the first one). */
void tw_flush(struct tw *w) __attribute__((visibility("hidden")));
/* Flushes and closes the stream: 0, or w->err (a negative errno). */
int tw_close(struct tw *w) __attribute__((visibility("hidden")));
/* One character. */
static inline void tw_put(struct tw *w, char c)
{
	if (w->len == sizeof(w->buf))
		tw_flush(w);
	w->buf[w->len++] = c;
}

/* Raw text (already JSON). */
void tw_raw(struct tw *w, const char *s, size_t n) __attribute__((visibility("hidden")));
/* s must be a string literal (sizeof of anything else is wrong): the
 * "" s "" forces that at compile time. */
#define tw_lit(w, s) tw_raw((w), "" s "", sizeof(s) - 1)
/* A JSON string, quoted and fully escaped; n may be (size_t)-1 for strlen. */
void tw_str(struct tw *w, const char *s, size_t n) __attribute__((visibility("hidden")));
void tw_int(struct tw *w, int64_t v) __attribute__((visibility("hidden")));
/* A double with 2 decimals (bandwidths, occupancy). */
void tw_fix2(struct tw *w, double v) __attribute__((visibility("hidden")));
/* A timestamp (relative to the base) and a duration, as "123.456". */
void tw_ts(struct tw *w, uint64_t ns) __attribute__((visibility("hidden")));
void tw_dur(struct tw *w, uint64_t ns) __attribute__((visibility("hidden")));
/* Starts an event object: the separator and "{"; counts it. */
void tw_event(struct tw *w) __attribute__((visibility("hidden")));
/* A complete event's common head: {"ph":"X","cat":..,"name":..,"pid":..,
 * "tid":..,"ts":..,"dur":.. (no closing brace: args or "}" follow). */
void tw_x(struct tw *w, const char *cat, const char *name, size_t nlen, int64_t pid,
          int64_t tid, uint64_t start, uint64_t end) __attribute__((visibility("hidden")));
/* A flow end point (ph "s" on the launch, "f" on the GPU event). */
void tw_flow(struct tw *w, char ph, uint64_t id, int64_t pid, int64_t tid, uint64_t ts)
	__attribute__((visibility("hidden")));
/* Notes a CPU thread seen in the trace, so it gets a thread_name row. */
void tw_thread(struct tw *w, int tid) __attribute__((visibility("hidden")));
/* Notes a GPU stream row, so it gets a thread_name row. */
void tw_stream(struct tw *w, int device, int64_t stream) __attribute__((visibility("hidden")));

/* A note to the reader about what the trace leaves out and why: a
 * metadata event "gprof_note" on the process's row, args.note the text
 * (the header is written before the events that need one are known). */
void tw_note(struct tw *w, const char *text) __attribute__((visibility("hidden")));

/* Sorts the index (w->r) and links each range to the innermost range
 * containing it; before any tw_range_at. */
void tw_index_ranges(struct tw *w) __attribute__((visibility("hidden")));
/* The NVTX range (index) innermost around time ts on thread tid, or -1;
 * and the GPU projection: extends the span of range r and its parents on
 * (device, stream) to cover [start, end]. Call it only for GPU work whose
 * launch is known to lie in r (its correlation id names one call); the
 * writer leaves out spans that still overlap a range not their own
 * (tw_write_projections) and notes it in the trace. */
int tw_range_at(struct tw *w, int tid, uint64_t ts) __attribute__((visibility("hidden")));
uint64_t tw_range_id(struct tw *w, int r) __attribute__((visibility("hidden")));
void tw_range_gpu(struct tw *w, int r, int device, int64_t stream, uint64_t start, uint64_t end)
	__attribute__((visibility("hidden")));
/* Writes the GPU projection of every range (gpu_user_annotation), leaving
 * out the spans that do not nest on their stream as their ranges do. */
void tw_write_projections(struct tw *w) __attribute__((visibility("hidden")));

#endif
