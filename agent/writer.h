/*
 * writer.h: the streaming trace writer (writer.c), used by gpu.c to add
 * CUPTI's events to the trace being written. Everything goes through one
 * buffer into one gzip stream: no document tree, no second pass over the
 * output. Times are CLOCK_REALTIME nanoseconds; the writer prints them as
 * microseconds relative to baseTimeNanoseconds with exactly 3 decimals.
 */
#ifndef GPROF_AGENT_WRITER_H
#define GPROF_AGENT_WRITER_H

#include <stddef.h>
#include <stdint.h>

struct tw;

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

/* The NVTX range (index) innermost around time ts on thread tid, or -1;
 * and the GPU projection: extends the span of range r and its parents on
 * (device, stream) to cover [start, end]. Call it only for GPU work whose
 * launch is known to lie in r (its correlation id names one call); the
 * writer leaves out spans that still overlap a range not their own
 * (writer.c, write_projections) and notes it in the trace. */
int tw_range_at(struct tw *w, int tid, uint64_t ts) __attribute__((visibility("hidden")));
uint64_t tw_range_id(struct tw *w, int r) __attribute__((visibility("hidden")));
void tw_range_gpu(struct tw *w, int r, int device, int64_t stream, uint64_t start, uint64_t end)
	__attribute__((visibility("hidden")));

#endif
