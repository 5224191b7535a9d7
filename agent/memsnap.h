/*
 * memsnap.h: memory-snapshot bursts (memsnap.c), the agent thread's side of
 * the handshake with the job's Python helper; the Python side's entry
 * points are gprof_agent.h's gprof_memory_* and gprof_step_memory. Called
 * by capture.c; calls rec.c (the step) and state.c below it.
 */
#ifndef GPROF_AGENT_MEMSNAP_H
#define GPROF_AGENT_MEMSNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

/* Creates the burst's snapshot file (no name: scratch.c) and arms the handshake: 0, or a
 * negative code with why filled in. */
AGENT_HIDDEN int memsnap_begin(const char *trace_id, char *why, size_t n);
/* Whether the snapshot of a window that ended whole is still due (and, in
 * *timeout_ms when not NULL, in how many ms to look again). */
AGENT_HIDDEN bool memsnap_pending(uint64_t now, int *timeout_ms);
/* The written file's descriptor (>= 0, the caller's to upload and close),
 * or why there is none (negative, the file gone); the handshake is over
 * either way. */
AGENT_HIDDEN int memsnap_finish(char *why, size_t wn);
/* Ends the handshake of a burst that writes nothing (cancelled). */
AGENT_HIDDEN void memsnap_discard(void);

#endif
