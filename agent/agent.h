/*
 * agent.h: the top of libgprof_agent. agent.c brings the agent to life
 * (agent_init, also called by nvtx.c's injection entry point); and, for
 * the tests and the benchmark that drive the floors directly
 * (tests/integration/projection-app.c, bench/bench-writer.c), this header
 * includes every floor's. No file of the agent but agent.c and nvtx.c,
 * the entry points, includes it.
 *
 * The floors, each file calling only those below it (issue 25; the
 * include-cycles and symbol-cycles tests keep it so):
 *
 *   agent.c, nvtx.c    entry points: injection, constructor, gprof_* API
 *   link.c             the agent thread: daemon connection, loop, heartbeats
 *   capture.c          one burst at a time; reports through link.c's callbacks
 *   memsnap.c          memory snapshots: the handshake with the Python helper
 *                      (its gprof_memory_* and gprof_step_memory entry points)
 *   writer.c           the trace document
 *   scratch.c          the burst's file: no name until the daemon has it
 *   gpu_events.c       CUPTI's records as trace events
 *   gpu.c              CUPTI's life cycle
 *   gpu_tail.c         the end of a burst (gpu.c's CUPTI controls handed in)
 *   gpu_api.c          runtime calls by our own callback
 *   gpu_buf.c          buffers, byte limit, harvest
 *   gpu_meta.c         devices and versions for the header
 *   tw.c               the trace stream, the NVTX range index
 *   rec.c              application threads' recording
 *   state.c            struct agent A, clock, log, wake-up
 *
 * Data flow of one burst:
 *
 *   daemon --capture_start--> link.c (agent thread) --> capture.c's queue
 *     --> capture_tick (the agent thread's loop, when no burst runs):
 *     capture.c fixes the window, asks gpu.c to enable CUPTI (if the
 *     request wants GPU activities and CUPTI can be had), then arms the
 *     window: now (duration mode), at a wall-clock time, or at the next
 *     iteration boundary (rec.c, on the application thread that steps).
 *   application threads --> rec.c: NVTX handlers (nvtx.c) and the gprof_*
 *     API append ranges, marks and ProfilerStep#<n> to their own thread's
 *     buffer while A.rec_on is set; CUPTI hands completed activity buffers
 *     to gpu_buf.c's list from its own threads.
 *   end of window (last step, duration timer, byte limit, cancel) -->
 *     the agent thread: gpu_stop() (disable, the tail, forced flush,
 *     dropped count, everything the writer needs copied out of CUPTI,
 *     CUPTI released), writer.c streams the Kineto JSON into a gzip file
 *     with no name (scratch.c) in one pass over rec.c's thread buffers and
 *     gpu_buf.c's harvest, then capture.c hands its descriptor to link.c's
 *     upload callback, which sends it in chunk frames; closing it deletes
 *     the file (a named copy is kept, and its path logged, when the daemon
 *     is gone).
 *
 * Ownership: the one struct agent (A, state.c) lives for the process.
 * Thread buffers (struct tbuf, at most AGENT_MAX_THREADS) are never freed:
 * a thread that exits leaves its buffer for the next new thread. Their
 * chunks belong to one burst: the agent thread takes them all at its end
 * (written or not) and unmaps the arena they were carved from, before the
 * next burst begins. CUPTI buffers belong to gpu_buf.c from request to
 * gpu_reset(). Only the agent thread starts and ends bursts, so at most
 * one burst exists at a time.
 */
#ifndef GPROF_AGENT_INTERNAL_H
#define GPROF_AGENT_INTERNAL_H

#include "capture.h"
#include "gpu.h"
#include "gpu_events.h"
#include "gpu_meta.h"
#include "link.h"
#include "msg.h"
#include "rec.h"
#include "state.h"
#include "tw.h"
#include "writer.h"

/* Starts the agent once per process (pthread_once): identity from the
 * environment, the agent thread (link.c); A.disabled when it must stay
 * inert. Any thread, any number of times. */
AGENT_HIDDEN void agent_init(void);

#endif
