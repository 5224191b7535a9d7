/*
 * agent.h: the internals of libgprof_agent, shared by its files.
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
 *     to gpu.c's list from its own threads.
 *   end of window (last step, duration timer, byte limit, cancel) -->
 *     the agent thread: gpu_stop() (disable, forced flush, dropped count,
 *     everything the writer needs copied out of CUPTI, CUPTI released),
 *     writer.c streams the Kineto JSON into a gzip file in one pass over
 *     rec.c's thread buffers and gpu.c's activity buffers, then link.c
 *     uploads the file in chunk frames and deletes it (kept, and its path
 *     logged, when the daemon is gone).
 *
 * Ownership: the one struct agent (A) lives for the process. Thread
 * buffers (struct tbuf, at most AGENT_MAX_THREADS) are never freed: a
 * thread that exits leaves its buffer for the next new thread. Their
 * chunks belong to one burst: the agent thread takes them all at its end
 * (written or not) and unmaps the arena they were carved from, before
 * the next burst begins. CUPTI buffers belong to gpu.c from
 * request to gpu_reset(). Only the agent thread starts and ends bursts, so
 * at most one burst exists at a time.
 *
 * Rules (STYLE.md rule 6): nothing here exits, aborts, prints to the
 * host's stdout/stderr, installs signal handlers, or blocks an application
 * thread on I/O. Any failure turns into a failed capture_status, a line in
 * the GPROF_AGENT_LOG file, or a disabled agent.
 */#ifndef GPROF_AGENT_INTERNAL_H
#define GPROF_AGENT_INTERNAL_H

#include "gpu.h"
#include "gpu_events.h"
#include "gpu_meta.h"
#include "msg.h"
#include "rec.h"
#include "state.h"
#include "tw.h"

/* agent.c */
AGENT_HIDDEN void agent_init(void);

/* capture.c: the agent thread's side of a burst. Commands from the daemon
 * are queued (strings copied) and taken by capture_tick, in order, one
 * burst at a time. */
struct link;
AGENT_HIDDEN void capture_queue_start(struct link *l, const struct msg_capture_start *cs);
AGENT_HIDDEN void capture_queue_cancel(const char *trace_id, const char *why);
/* ms until the agent thread must call capture_tick, or -1 */
AGENT_HIDDEN int capture_timeout_ms(void);
AGENT_HIDDEN void capture_tick(struct link *l);
/* a burst is running or a command waits */
AGENT_HIDDEN bool capture_busy(void);

/* link.c: the daemon connection (agent thread) */
AGENT_HIDDEN void *link_main(void *arg);
AGENT_HIDDEN void link_status(struct link *l, const char *trace_id, int state,
                              const char *reason, int64_t events, int64_t dropped,
                              int64_t bytes);
AGENT_HIDDEN int link_upload(struct link *l, const char *trace_id, const char *path,
                             int64_t *bytes);

/* writer.c */
struct trace_result { uint64_t events, dropped, bytes; bool cut; };
AGENT_HIDDEN int writer_write(const char *path, struct trace_result *res, char *why, size_t n);

#endif
