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
 */
#ifndef GPROF_AGENT_INTERNAL_H
#define GPROF_AGENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "msg.h"

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

/* One CPU-side event in a thread buffer. */
enum cev_kind { CEV_RANGE, CEV_MARK, CEV_STEP };
struct cev {
	uint64_t start_ns, end_ns; /* CLOCK_REALTIME, as CUPTI's records */
	const char *name;          /* in a chunk of the same burst */
	uint16_t name_len;
	uint8_t kind;
	uint8_t depth;
	uint32_t domain;           /* 0, or an index into the NVTX domain names */
	uint64_t id;               /* range: the External id; step: n */
};

/* A block of a thread buffer (AGENT_CHUNK_BYTES, carved from the burst's
 * arena): events from the front, the names they point to from the back.
 * Chunks never move, so a name's pointer stays good until the arena is
 * unmapped, on the agent thread after the burst's end (rec_arena_free). */
struct evchunk {
	struct evchunk *next;
	uint32_t nev;              /* events at ev[0..nev) */
	uint32_t names;            /* bytes of names at the chunk's end */
	struct cev ev[];
};

/* One application thread's event buffer (rec.c). */
struct tbuf {
	pthread_mutex_t lock;  /* owner appends, the agent thread takes the chunks */
	int tid;
	atomic_bool live;      /* a thread owns it */
	uint64_t gen;          /* burst the chunks belong to */
	struct evchunk *head, *tail;
	/* open ranges, owner thread only */
	struct { uint64_t gen, start_ns, id; const char *name; uint32_t domain;
	         uint16_t name_len; bool iter; } stack[AGENT_MAX_DEPTH];
	int depth;
	/* pushes of burst unstacked_gen not on the stack (too deep, no room):
	 * their pops are matched against this count first */
	uint64_t unstacked_gen; unsigned unstacked;
	char thread_name[64];  /* from nvtxNameOsThread, else empty */
	struct tbuf *next;     /* set before the buffer is published, then fixed */
};

/* A thread buffer's chunks taken for writing (rec_take). */
struct taken { int tid; char thread_name[64]; struct evchunk *head; };

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

/* agent.c */
AGENT_HIDDEN void agent_init(void);
AGENT_HIDDEN void agent_wake(void);
AGENT_HIDDEN uint64_t agent_now_ns(void);
AGENT_HIDDEN void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* rec.c: recording on application threads. Names are copied; a len of
 * REC_STRLEN means "NUL-terminated, measure it only if recording". */
#define REC_STRLEN ((size_t)-1)
AGENT_HIDDEN struct tbuf *rec_tbuf(void);
AGENT_HIDDEN void rec_push(const char *name, size_t len, uint32_t domain);
AGENT_HIDDEN void rec_pop(void);
AGENT_HIDDEN void rec_mark(const char *name, size_t len, uint32_t domain);
AGENT_HIDDEN uint64_t rec_range_start(const char *name, size_t len, uint32_t domain);
AGENT_HIDDEN void rec_range_end(uint64_t id);
AGENT_HIDDEN void rec_step(void);
AGENT_HIDDEN void rec_thread_name(const char *name);
/* Ends the window now (from any thread): stops recording, wakes the agent
 * thread. The first reason wins. */
AGENT_HIDDEN void rec_end(enum end_reason why);
/* Next External id (ranges and their GPU projections). */
AGENT_HIDDEN uint64_t rec_next_id(void);
/* Agent thread, after the window's end: takes every thread buffer's chunks
 * (an O(1) swap under each buffer's lock: no application thread waits on
 * what follows); rec_free frees what rec_take gave. */
AGENT_HIDDEN struct taken *rec_take(size_t *n);
AGENT_HIDDEN void rec_free(struct taken *tk, size_t n);
/* Agent thread: reserves the burst's arena, bytes of address space
 * (0, or a negative errno), before the window opens; unmaps it once the
 * chunks are taken and written. */
AGENT_HIDDEN int rec_arena_new(uint64_t bytes);
AGENT_HIDDEN void rec_arena_free(void);


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
                             int format, int64_t *bytes);

/* memsnap.c: a memory-snapshot burst's handshake with the Python helper
 * (agent thread side). begin creates the file and arms it (0, or a
 * negative code with why); pending says whether the snapshot of a window
 * that ended is still due (and in how many ms to look again); finish
 * gives the written file's path (0) or why there is none (negative), and
 * ends the handshake; discard ends it for a burst that writes nothing. */
AGENT_HIDDEN int memsnap_begin(const char *trace_id, char *why, size_t n);
AGENT_HIDDEN bool memsnap_pending(uint64_t now, int *timeout_ms);
AGENT_HIDDEN int memsnap_finish(char *path, size_t n, char *why, size_t wn);
AGENT_HIDDEN void memsnap_discard(void);

/* nvtx.c (or nvtx_none.c) */
AGENT_HIDDEN const char *nvtx_domain_name(uint32_t domain);

/* gpu.c (or gpu_none.c): CUPTI, loaded at the first burst */
struct tw;
AGENT_HIDDEN bool gpu_usable(char *why, size_t n);
/* Takes CUPTI (settling an earlier burst's release) and enables the kinds;
 * 0, or a negative code with why filled in. */
AGENT_HIDDEN int gpu_start(int64_t activities, uint64_t max_bytes, char *why, size_t n);
/* Disables, flushes, copies out what the writer needs, and gives CUPTI
 * back; from here to the next gpu_start the agent makes no CUPTI call. */
AGENT_HIDDEN void gpu_stop(void);
AGENT_HIDDEN uint64_t gpu_dropped(void);
AGENT_HIDDEN bool gpu_cut(void);
/* Writes the GPU and CUDA API events whose launch falls in the window
 * (writer.c calls it; gpu_events.c). */
AGENT_HIDDEN void gpu_write(struct tw *w, uint64_t t0, uint64_t t1);
AGENT_HIDDEN void gpu_write_devices(struct tw *w);
AGENT_HIDDEN void gpu_write_meta(struct tw *w);
AGENT_HIDDEN void gpu_reset(void);
AGENT_HIDDEN void gpu_atfork_child(void);

/* writer.c */
struct trace_result { uint64_t events, dropped, bytes; bool cut; };
/* What the writer holds per range event when it builds the range index
 * (the index entry and the sort's scratch), and per iteration (step_row):
 * rec.c charges these when the event is recorded, so the writer's memory
 * is sized from the budget, never from what arrived. */
AGENT_HIDDEN extern const size_t writer_range_bytes, writer_step_bytes;
AGENT_HIDDEN int writer_write(const char *path, struct trace_result *res, char *why, size_t n);

#endif
