/*
 * report: what a trace says, read in one streaming pass (issue 14).
 *
 * Data flow: report_read opens one trace file (gzip or plain), feeds it in
 * 64 KiB pieces to a yajl parser whose callbacks fill one event at a time
 * (name, cat, ph, pid, tid, ts, dur, args.bytes); each finished event is
 * folded into the file's struct rstats, and nothing else of the file is
 * kept: per GPU device and stream the busy intervals (to merge them into
 * busy and idle time), per kernel name its durations (for the median),
 * the iteration (ProfilerStep#) durations, copy and set totals. Memory is
 * a few dozen bytes per GPU event, whatever the file's size.
 * report_finish sorts and merges; report_print and report_json write a
 * list of finished rstats (one per rank) as text or cJSON, with the
 * cross-rank comparison and the findings.
 *
 * Ownership: the caller owns each struct rstats (report_free releases
 * what report_read allocated in it); the cJSON tree is the caller's.
 */
#ifndef GPROFCTL_REPORT_H
#define GPROFCTL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

struct ivals { double *v; size_t n, cap; };            /* start, end pairs (us) */
struct durs { float *v; size_t n, cap; };

struct kstat {                 /* one kernel name, or one copy/set kind */
	char *name;
	bool nccl;                 /* a collective (NCCL) kernel */
	uint64_t count, bytes;
	double total, max;
	struct durs d;
};

struct kmap { struct kstat *v; size_t n, cap; size_t *slot; size_t mask; };

struct gpu {                   /* one device, or one stream of it */
	int64_t dev, stream;       /* stream -1: the device as a whole */
	struct ivals iv;
	double busy, span, idle_bucket[5];
};

struct rstats {
	char path[1024];
	int64_t rank, world;       /* from distributedInfo; -1 unknown */
	uint64_t events, gpu_events;
	double t0, t1;             /* the window: first start, last end (us) */
	struct kmap kernels, copies;
	struct kmap ranges, granges; /* user ranges (NVTX, record_function): CPU, GPU projection */
	struct gpu *gpus;
	size_t ngpus, capgpus;
	struct durs steps;
	double nccl, kernel_total, runtime_total, sync_total;
	uint64_t short_kernels;    /* shorter than 10 us */
	bool truncated;
	char error[300];           /* set when the file could not be read whole */
};

/* Reads path into st (zeroed here). 0; or -1 with st->error saying what
 * and where (byte offset), and st holding whatever was read before. */
int report_read(const char *path, struct rstats *st);
void report_free(struct rstats *st);

/* Text for people (several ranks: the comparison across them, then the
 * findings), or the same as JSON. */
void report_print(FILE *f, struct rstats *const *st, size_t n, size_t top);
cJSON *report_json(struct rstats *const *st, size_t n, size_t top);

#endif
