/*
 * capture.h: the agent thread's side of a burst (capture.c), from
 * capture_start to the uploaded file. link.c, which owns the agent
 * thread's loop and the daemon connection, queues the daemon's commands
 * here and calls capture_tick on every turn; capture.c drives rec.c,
 * gpu.c and writer.c below it, and reports back only through the
 * callbacks link.c gave it (capture_init), so it never calls up.
 */
#ifndef GPROF_AGENT_CAPTURE_H
#define GPROF_AGENT_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "msgtypes.h"
#include "state.h"

/* What a burst reports through: its capture_status as it moves (events,
 * dropped and bytes are 0 until the file is written), and the finished
 * file, a trace or a memory snapshot, read from its descriptor fd from
 * offset 0 (format: MSG_FMT_*; 0 once the daemon has it; the file, which
 * has no name (scratch.c), goes when capture.c closes fd). ctx is passed
 * back as it was given. */
struct capture_out {
	void (*status)(void *ctx, const char *trace_id, int state, const char *reason,
	               int64_t events, int64_t dropped, int64_t bytes);
	int (*upload)(void *ctx, const char *trace_id, int fd, int format, int64_t *bytes);
	void *ctx;
};

/* Once, on the agent thread, before any other call: out is copied. */
AGENT_HIDDEN void capture_init(const struct capture_out *out);
/* Commands from the daemon are queued (strings copied) and taken by
 * capture_tick, in order, one burst at a time; a cancel applies at once. */
AGENT_HIDDEN void capture_queue_start(const struct msg_capture_start *cs);
AGENT_HIDDEN void capture_queue_cancel(const char *trace_id, const char *why);
/* ms until the agent thread must call capture_tick, or -1 */
AGENT_HIDDEN int capture_timeout_ms(void);
AGENT_HIDDEN void capture_tick(void);
/* a burst is running or a command waits */
AGENT_HIDDEN bool capture_busy(void);

#endif
