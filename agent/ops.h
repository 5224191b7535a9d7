/*
 * ops.h: PyTorch operators from the job's own profiler (ops.c), the agent
 * thread's side; the Python side's entry points are gprof_agent.h's
 * gprof_window_flags, gprof_ops_path and gprof_ops_done. Called by
 * capture.c (begin, collect, cancel) and writer.c (write, crosses); calls
 * state.c and tw.c below it.
 */
#ifndef GPROF_AGENT_OPS_H
#define GPROF_AGENT_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

struct tw;
/* The GPROF_WINDOW_* option bits of a request's MSG_OPT_* options, with the
 * job owner's standing GPROF_TORCH_OPTS added. */
AGENT_HIDDEN uint32_t ops_opts(int64_t msg_options);
/* GPROF_STEP_OPS while a window that takes operators is open (a few atomic
 * loads; gprof_step_memory's). */
AGENT_HIDDEN int ops_poll(void);
/* At a burst's start: the window's private directory, when the window
 * takes operators (the request's MSG_OPT_* options or the job's
 * GPROF_TORCH_OPS/GPROF_TORCH_OPTS ask for them: ops.c, ops_wanted).
 * False when GPROF_TORCH_OPS=off refuses them (capture.c names what the
 * request asked). */
AGENT_HIDDEN bool ops_begin(int64_t options);
/* After its end: waits for the Python helper's file (and its file of
 * [memory] events, when the window asked for memory) and keeps their
 * events in [t0, t1], the notes on what is left out. True when a helper
 * took the window (false: none ran; capture.c names what was asked). */
AGENT_HIDDEN bool ops_collect(uint64_t t0, uint64_t t1);
/* The notes of the last burst on what it left out and why (the helper's
 * own words, a file refused); "" if none. Valid until the next ops_begin.
 * capture.c says them in the status. */
AGENT_HIDDEN const char *ops_note(void);
/* Adds capture.c's words on operators (options asked for that no helper
 * recorded) to the trace's gprof_note, after ops.c's own. */
AGENT_HIDDEN void ops_add_note(const char *text);
/* Whether one of thread tid's operators spans a step boundary (b: sorted
 * boundaries, nb of them). */
AGENT_HIDDEN bool ops_crosses(int tid, const uint64_t *b, size_t nb);
/* Writes the kept operators and the notes (writer.c). */
AGENT_HIDDEN void ops_write(struct tw *w);
/* Frees the kept operators; ops_cancel (any burst's end) removes the
 * directory too. */
AGENT_HIDDEN void ops_end(void);
AGENT_HIDDEN void ops_cancel(void);
/* The parser alone (ops_collect's, for tests and the fuzzer): keeps the
 * operators of the file text [buf, buf + len) that lie in [t0, t1];
 * NULL, or why the whole file was refused; *bad: events left out as
 * malformed; *outside: outside the window. ops_get reads kept event i
 * (flows and [memory] events have no name; a [memory] event's args are
 * its six integer args, start == end). */
AGENT_HIDDEN const char *ops_parse(const char *buf, size_t len, uint64_t t0, uint64_t t1,
                                   size_t *bad, size_t *outside);
AGENT_HIDDEN size_t ops_count(void);
AGENT_HIDDEN bool ops_get(size_t i, int *tid, uint64_t *start, uint64_t *end, const char **name,
                          const char **args);

#endif
