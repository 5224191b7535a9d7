/*
 * report_mem: what a job did with its GPU memory, for gprofctl report, from
 * either source:
 *  - a PyTorch memory snapshot (torch.cuda.memory._snapshot(), pickled; what
 *    gprofctl trace --memory-snapshot delivers), read with pickle.c: the
 *    allocator's end state (segments, blocks) and its history of the window
 *    (device_traces), replayed back from the end to find the peak;
 *  - a trace with Kineto's profile_memory events (instant events named
 *    "[memory]", with "Total Allocated", "Total Reserved", "Bytes", "Addr"),
 *    fed event by event by report.c, with the operators (cpu_op) around
 *    them, to say which operator made each allocation.
 * Per device: peak allocated and reserved, fragmentation (reserved less
 * allocated at the peak), the largest allocations live at the peak with the
 * Python frames or the operator that made them, and per iteration the
 * allocations and the growth of allocated memory (a leak grows every one).
 *
 * Ownership: struct mreport and everything in it belong to the caller
 * (mreport_free); report.c keeps one per trace file in rstats->mem.
 */
#ifndef GPROFCTL_REPORT_MEM_H
#define GPROFCTL_REPORT_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "htab.h"

#define MEM_TOP 10

struct mtop { uint64_t bytes; char where[320]; };
struct mstep { int64_t step; int64_t allocations; int64_t growth; uint64_t allocated; };

struct mdev {
	int64_t dev;
	uint64_t peak_alloc, res_at_peak, peak_res;
	uint64_t start_alloc, end_alloc, start_res, end_res;
	uint64_t allocs, frees, alloc_bytes, events;
	struct mtop top[MEM_TOP];
	size_t ntop;
	bool before_unknown;       /* allocations older than the window are not listed */
	struct mstep *its;         /* per iteration, when the source has them */
	size_t nits;
	double growth_per_it;
};

/* One [memory] event or operator of a trace, as report.c reads them. */
struct mevent { double ts; int64_t tid, dev, addr, bytes, total_alloc, total_res; };
struct mop { double a, b; int64_t tid; uint32_t name; };

struct mreport {
	char path[1024];
	int64_t rank;
	const char *source;        /* "snapshot" or "trace" */
	struct mdev *devs;
	size_t ndevs;
	char note[300];
	char error[400];
	/* a trace's events while it is read (report.c) */
	struct mevent *ev; size_t nev, capev;
	struct mop *ops; size_t nops, capops;
	char **names; size_t nnames, capnames;
	struct htab nidx;          /* names, by name */
};

/* Reads a snapshot file into r (zeroed here). 0; or -1 with r->error
 * saying what is wrong and what to do. */
int mreport_snapshot(const char *path, struct mreport *r);
/* The same from bytes in memory (tests, the fuzz target). */
int mreport_snapshot_mem(const char *name, const uint8_t *buf, size_t len, struct mreport *r);

/* A trace, while report.c reads it: each [memory] event and each operator
 * (false when out of memory), then the figures once the file is read, given
 * its iterations (start, end pairs in us, in order). */
bool mreport_event(struct mreport *r, const struct mevent *e);
bool mreport_op(struct mreport *r, double ts, double dur, int64_t tid, const char *name);
void mreport_finish_trace(struct mreport *r, const double *steps, size_t nsteps);

void mreport_free(struct mreport *r);

void mreport_print(FILE *f, const struct mreport *r, size_t top);
cJSON *mreport_json(const struct mreport *r, size_t top);

/* The most memory a snapshot's pickle took while read (pickle.c's count), in
 * this process. */
extern uint64_t mreport_peak_bytes;

/* Is this file name a memory snapshot's (*.pickle)? */
bool mreport_is_snapshot(const char *name);

#endif
