/*
 * state.h: the floor below every other file of the agent: the one struct
 * agent (A) that the floors share, the agent's limits, and the leaves
 * every file uses: the clock, the log, and the wake-up of the agent
 * thread (state.c). It includes nothing of the agent's.
 *
 * Who writes what in A: agent.c the identity and the thread (once, at
 * start); capture.c the window, before it arms or opens it; rec.c, on the
 * application threads, the flags, counters and thread buffers of a burst
 * (rec.h). Everyone else reads. The hot paths read A.rec_on and A.armed
 * only: everything else is behind them.
 *
 * Rules (STYLE.md rule 6): nothing in the agent exits, aborts, prints to
 * the host's stdout/stderr, installs signal handlers, or blocks an
 * application thread on I/O. Any failure turns into a failed
 * capture_status, a line in the GPROF_AGENT_LOG file, or a disabled agent.
 */
#ifndef GPROF_AGENT_STATE_H
#define GPROF_AGENT_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "msgtypes.h"

#define AGENT_HIDDEN __attribute__((visibility("hidden")))

/* The agent's own cap on one burst's memory, unless GPROF_AGENT_MAX_MB
 * says otherwise: the request's max_bytes (the daemon's limits.trace_bytes,
 * a limit on the file, 2 GB by default) is taken only up to it. Within it,
 * CPU events (with what the writer will need to write them) and CUPTI's
 * buffers share the budget (capture.c: half each when GPU kinds are on). */
#define AGENT_DEFAULT_MAX_BYTES (512ull << 20)
/* Nesting depth of NVTX/gprof ranges tracked per thread; deeper pushes are
 * counted (so their pops match) and dropped. */
#define AGENT_MAX_DEPTH 128
/* Longest range name kept (longer ones are cut). */
#define AGENT_NAME_MAX 255
/* Thread buffers the process may have at once (a buffer outlives its
 * thread and is reused): a thread past it records nothing, counted. */
#define AGENT_MAX_THREADS 1024
/* The unit a thread buffer grows by, carved whole from the burst's arena
 * (its budget): slack in a half-filled block is inside the budget too,
 * and 16 threads cannot each grow past it. */
#define AGENT_CHUNK_BYTES (64u << 10)

/* How a window ends. */
enum end_reason { END_NONE, END_DONE, END_CUT, END_CANCEL, END_EXIT };

struct tbuf; /* rec.h */

/* The window a burst captures, fixed when it is armed. */
struct window {
	char trace_id[MSG_TRACE_ID_MAX + 1];
	int64_t iterations, duration_ms, roundup, activities;
	uint64_t start_iter;    /* > 0: begin at exactly this step (the job's ranks together) */
	uint64_t start_at_ns;   /* duration/wall-clock start, 0 = now */
	char iter_range[AGENT_NAME_MAX + 1];
	uint64_t max_bytes;     /* the burst's whole budget */
	uint64_t cpu_bytes;     /* the CPU side's part of it (rec.c) */
	char *arena;            /* its address space, cpu_bytes long (rec_arena_new) */
	bool index;             /* the writer builds the range index (GPU kinds on) */
	bool memory;            /* a memory snapshot, not a trace (memsnap.c) */
	uint32_t torch_opts;    /* GPROF_WINDOW_SHAPES.. asked of the Python helper (ops.c) */
};

struct agent {
	/* The flags the hot paths read: everything else is behind them. */
	atomic_int rec_on;      /* application threads record events */
	atomic_int armed;       /* iteration mode: waiting for a boundary */
	atomic_uint_fast64_t armed_ns; /* when armed was set: earlier boundaries do not open */
	atomic_uint_fast64_t gen;

	struct window win;      /* written before arming, read after */
	atomic_uint_fast64_t t_start, t_end;
	atomic_int end_reason;
	atomic_uint_fast64_t bytes; /* CPU-side bytes charged this burst */
	atomic_uint_fast64_t dropped; /* CPU events not recorded this burst */
	atomic_uint_fast64_t arena_used; /* bytes of A.win.arena given to chunks */
	atomic_int_fast64_t win_steps; /* iterations captured so far */
	atomic_uint_fast64_t prev_step_ns; /* last boundary inside the window */

	/* steps, for the heartbeat and for iteration mode */
	atomic_uint_fast64_t steps;
	atomic_uint_fast64_t last_step_ns, last_step_dur_ns;
	uint64_t step_durs[64]; atomic_uint step_i;

	/* thread buffers */
	/* thread buffers: a list only ever pushed onto (CAS), never shrunk,
	 * so a thread finding or making its buffer waits on no other thread */
	_Atomic(struct tbuf *) tbufs;
	atomic_uint ntbufs;

	/* identity */
	int pid;
	char host[MSG_HOST_MAX + 1];
	char job_id[MSG_JOB_ID_MAX + 1];
	int64_t rank, local_rank, world_size;
	bool cuda_injected;     /* InitializeInjection ran: CUDA is in use */
	bool nvtx_attached;

	int wake_fd;            /* eventfd: application threads -> agent thread */
	pthread_t thread;
	int agent_tid;          /* the agent thread's gettid(), once it runs */
	bool thread_started;
	bool disabled;
};

extern struct agent A AGENT_HIDDEN;

/* CLOCK_REALTIME in ns: the clock of every event (CUPTI's too). */
AGENT_HIDDEN uint64_t agent_now_ns(void);
/* A line to $GPROF_AGENT_LOG (never to the host's stdio); any thread. */
AGENT_HIDDEN void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends the formatted text to the NUL-terminated note[cap], "; " after
 * what is there; what does not fit is cut (a trace's gprof_note). */
AGENT_HIDDEN void agent_note_add(char *note, size_t cap, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
/* Wakes the agent thread's loop (link.c); any thread, never blocks. */
AGENT_HIDDEN void agent_wake(void);

#endif
