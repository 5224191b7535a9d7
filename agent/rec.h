/*
 * rec.h: what application threads record (rec.c): ranges, marks and
 * iterations, each into its own thread's buffer, and the window's
 * opening and end as the iterations and ranges reach them. Called by
 * nvtx.c's handlers and agent.c's gprof_* API on application threads; by
 * capture.c on the agent thread to set a burst up and tear it down; read
 * by writer.c (rec_take). Above state.h only.
 */
#ifndef GPROF_AGENT_REC_H
#define GPROF_AGENT_REC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

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

/* What each recorded range and iteration reserves in the burst's budget
 * for what the writer, above this floor, holds while it writes (issue 23):
 * per range, when the range index is built (A.win.index), its index entry
 * and qsort's scratch copy of it (glibc's qsort sorts through a copy when
 * it can get one); per iteration, its two boundaries and their scratch
 * (writer.c, step_row). So the writer's memory is sized from the budget,
 * never from what arrived. tw.c and writer.c check at compile time that
 * their structures fit these. */
#define REC_RANGE_RESERVE (2 * 9 * sizeof(uint64_t))
#define REC_STEP_RESERVE (4 * sizeof(uint64_t))

/* Recording, on application threads (nvtx.c, agent.c's gprof_* API).
 * Names are copied; a len of REC_STRLEN means "NUL-terminated, measure it
 * only if recording". */
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

/* NVTX domains' names, by the index events carry (0: the default domain,
 * which has none): added by nvtx.c when a module creates a domain, read
 * by the writer; kept for the process. rec_domain gives name's index,
 * added if new, or 0 past REC_DOMAINS_MAX (or without memory). */
#define REC_DOMAINS_MAX 256
AGENT_HIDDEN uint32_t rec_domain(const char *name);
AGENT_HIDDEN const char *rec_domain_name(uint32_t domain);

#endif
