/*
 * report_int.h: the report's insides, shared by report.c and the
 * report_*.c files below report.h and nothing else (report_run.c, the run
 * above them that the commands call, sees report.h, never this).
 *
 * Data flow: report_read (report.c) opens one trace file (gzip or plain);
 * a reader thread inflates it into a ring of 256 KiB buffers that the
 * scanner, jscan.c, walks, its callbacks filling one event at a time
 * (name, cat, ph, pid, tid, ts, dur, args.bytes); each finished event is
 * folded into the file's struct rstats, and nothing else of the file is
 * kept: per GPU device and stream the busy intervals (to merge them into
 * busy and idle time), per kernel name its durations (for the median),
 * the iteration (ProfilerStep#) durations, copy and set totals, and the
 * spans of user ranges, iterations and synchronising calls; operators go
 * to report_ops.c, ranges' launches to report_ranges.c, memory events to
 * report_mem.c. Memory is a few dozen bytes per GPU event, whatever the
 * file's size.
 * After the pass, report_finish (report_finish.c) sorts each device's
 * operations, finds the launch-bound stretches in them, merges them into
 * busy intervals (idle gaps bucketed, the longest kept, those a
 * synchronising call opened added up), and the GPU idle during data
 * loading; the ranges' GPU time is what was launched inside them, by
 * correlation (report_ranges.c). The figures the outputs share (the
 * busiest device, the window, medians, "what ran at t", the busy
 * timeline from prefix sums) are report_figures.c's; report_out.c writes
 * text, JSON and the findings, report_html.c one page, report_ops_out.c
 * the operator table in each.
 *
 * Calls go one way: report.c -> report_finish.c -> report_figures.c;
 * report_html.c -> report_out.c -> report_ops_out.c; every output ->
 * report_figures.c; report_figures.c calls no other report file.
 *
 * Ownership: the caller owns each struct rstats (report_free releases
 * what report_read allocated in it); the cJSON tree is the caller's.
 */
#ifndef GPROFCTL_REPORT_INT_H
#define GPROFCTL_REPORT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "htab.h"

/* report.h first: the public types (struct rstats's refusal, struct
 * mreport) are its; not included here, so that report.c, which includes
 * this header, and report.h stay one way (.ci/include-cycles.py). */
#ifndef GPROFCTL_REPORT_H
#error "include report.h before report_int.h"
#endif

struct ivals { double *v; size_t n, cap; };            /* start, end pairs (us) */
struct durs { float *v; size_t n, cap; };

struct kstat {                 /* one kernel name, or one copy/set kind */
	char *name;
	bool nccl;                 /* a collective (NCCL) kernel */
	uint64_t count, bytes;
	double total, max, median;  /* median: set after the pass */
	struct durs d;             /* the durations, in no order after the pass */
};

struct kmap { struct kstat *v; size_t n, cap; struct htab idx; }; /* idx: by name */

/* A range in time: a user range on the CPU or its projection on a GPU,
 * an iteration, a synchronising call (name: its index in the map it
 * belongs to; dev: the GPU for projections, else -1). */
struct span { double a, b; uint32_t name; int32_t dev; };
struct spans { struct span *v; size_t n, cap; };

#define REPORT_BINS 400        /* the busy timeline's resolution */
#define REPORT_TOP_GAPS 5

struct gap { double a, b; };

/* A launch-bound stretch: many short GPU operations in a row with the
 * GPU idle between them, waiting for the CPU to launch the next. */
struct stretch { double a, b, busy; uint32_t ops; int64_t dev; };

struct gpu {                   /* one device, or one stream of it */
	int64_t dev, stream;       /* stream -1: the device as a whole */
	struct ivals iv;           /* after report_read: merged, sorted, disjoint */
	double *prefix;            /* busy time before each merged interval */
	double busy, span, idle_bucket[5];
	double idle_after_sync;    /* idle in gaps that a synchronising call opened */
	uint32_t sync_gaps;
	struct gap top_gaps[REPORT_TOP_GAPS]; /* the longest idle gaps, longest first */
};

struct rops;                   /* the operators (report_ops.c) */
struct rranges;                /* the ranges' launches while reading (report_ranges.c) */

/* A range name's GPU work, by correlation (report_ranges.c): the GPU
 * records launched inside its instances (each once), their time, and the
 * summed spans from the first one's start to the last one's end. */
struct range_gpu { double gpu, span; uint64_t ops; };

struct rstats {
	char path[1024];
	int64_t rank, world;       /* from distributedInfo; -1 unknown */
	char host[256];            /* host_name from the trace's metadata; "" unknown */
	uint64_t events, gpu_events;
	double t0, t1;             /* the window: first start, last end (us) */
	struct kmap kernels, copies;
	struct kmap ranges, granges; /* user ranges (NVTX, record_function): CPU, GPU projection */
	struct kmap syncs;         /* synchronising CUDA calls by name */
	struct spans cpu_spans, gpu_spans, sync_spans, step_spans;
	struct rranges *rr;        /* freed by report_ranges_finish */
	struct range_gpu *range_gpu; /* per ranges entry; NULL: unknown (no GPU record linked) */
	uint64_t gpu_unlinked;     /* GPU records no (one) call in the trace launched */
	struct gpu *gpus;          /* after report_read: by device, then stream (-1 first) */
	size_t ngpus, capgpus;
	struct htab gpu_idx;       /* gpus by (dev, stream), during the pass */
	struct durs steps;         /* sorted; step_spans keeps their order */
	struct stretch stretches[3]; /* the launch-bound stretches idling the GPU most */
	size_t nstretches;
	double stretch_idle;       /* GPU idle inside all launch-bound stretches */
	double data_cpu, data_idle; /* data-loading ranges: CPU time, GPU idle meanwhile */
	uint64_t data_calls;
	double nccl, kernel_total, runtime_total, sync_total;
	uint64_t short_kernels;    /* shorter than 10 us */
	bool truncated;
	/* refused, with error saying why and what to do (report.h) */
	enum report_refusal refused;
	bool saw_events;           /* the traceEvents array was opened */
	char error[640];           /* set when the file could not be read whole */
	struct rops *ops;          /* PyTorch operators, kernels by launch (report_ops.c) */
	bool ops_by_shape;         /* the operator table per input shape (set by the caller) */
	struct mreport *mem;       /* its [memory] events, when it has some (report_mem.c) */
	uint32_t wheres;           /* report_where's lookups answered (REPORT_WHERE_MAX) */
};

/* report_where scans the ranges (linear in them); the outputs ask it a few
 * times per device, and a trace names as many devices as it likes, so
 * after this many per file it answers "not looked up" (counted in wheres):
 * the work stays this many times the file's ranges. */
#define REPORT_WHERE_MAX 256

/* report_finish.c, between the pass (report.c) and the outputs: fills
 * every figure from what the pass gathered; false when out of memory. */
bool report_finish(struct rstats *st);

/* Shared by the outputs. A finding: what it is (kind, one
 * of docs/REPORT.md's), how much it costs (weight, roughly the share of
 * the window; severity follows from it), whom it is about (the trace's
 * file, rank and host; NULL, -1 and "" when not one trace's or unknown),
 * the figures it rests on (evidence: name, value, whether an integer; the
 * names are static strings), and the sentence for people. */
#define FINDING_EVIDENCE 8
struct evidence { const char *name; double v; bool integer; };
struct finding {
	double weight;
	const char *kind;
	const char *file, *host;
	int64_t rank;
	struct evidence ev[FINDING_EVIDENCE];
	size_t nev;
	char text[600];
};

/* Starts finding f about trace s (NULL: none), of kind and weight. */
static inline struct finding *report_finding(struct finding *f, const struct rstats *s,
                                             const char *kind, double weight)
{
	f->weight = weight;
	f->kind = kind;
	f->file = s != NULL ? s->path : NULL;
	f->host = s != NULL ? s->host : "";
	f->rank = s != NULL ? s->rank : -1;
	f->nev = 0;
	f->text[0] = '\0';
	return f;
}

/* Adds a figure to f's evidence (the first FINDING_EVIDENCE are kept). */
static inline void report_evidence(struct finding *f, const char *name, double v, bool integer)
{
	if (f->nev < FINDING_EVIDENCE)
		f->ev[f->nev++] = (struct evidence){ name, v, integer };
}

/* "high" (weight 0.3 or more), "medium" (0.1 or more) or "low". */
static inline const char *report_severity(double weight)
{
	return weight >= 0.3 ? "high" : weight >= 0.1 ? "medium" : "low";
}

/* The findings of st[0..n) into out (at most max), heaviest first; how
 * many (report_out.c). */
size_t report_findings(struct rstats *const *st, size_t n, struct finding *out, size_t max);

/* ---- the shared figures (report_figures.c): read a finished rstats,
 * change nothing in it but the count of report_where's lookups ---- */

/* The median of d (sorted), 0 when empty. */
double report_median(const struct durs *d);
/* The window's length (us), 0 when nothing was timed. */
double report_window(const struct rstats *st);
/* per-iteration figures divide by this: the iterations, or 1 when none */
double report_iterations_or_1(const struct rstats *st);
/* The busiest device (NULL when no GPU work). */
const struct gpu *report_busiest(const struct rstats *st);
/* GPU busy time (us) between a and b on a merged device or stream. */
double report_busy_between(const struct gpu *g, double a, double b);
/* The busy share of each of the REPORT_BINS slices of the window on
 * device g, into out (the timeline; worked out when drawn, not kept per
 * device, which a trace of many devices would make large). */
void report_bins(const struct rstats *st, const struct gpu *g, float *out);
/* Does s contain needle (lowercase), ignoring case? */
bool report_has_ci(const char *s, const char *needle);
/* Whether the n files are the ranks of one job, so comparing them means
 * something: at least two, each with a known rank, all distinct, one
 * world size. Unrelated traces (no rank, or rank 0 of 1 each) are not. */
bool report_one_job(struct rstats *const *st, size_t n);
struct kstat **report_ranked(const struct kmap *m); /* by total, largest first; free() it */
/* What was running at time t, as text: the innermost user range there
 * (what the CPU was in, with cpu_first; else the range whose GPU work on
 * dev was running, falling back on each other) and the iteration. Counts
 * itself in st->wheres (the one field it changes). */
void report_where(const struct rstats *st, int64_t dev, double t, bool cpu_first, char *out,
                  size_t n);
/* A range's GPU work (k: an entry of st->ranges), or NULL when unknown. */
const struct range_gpu *report_range_gpu(const struct rstats *st, const struct kstat *k);
/* "N operations in X ms at +T ms, GPU busy B%, in 'range', ProfilerStep#I" */
void report_stretch_text(const struct rstats *st, const struct stretch *x, char *out, size_t n);

/* The operator table (report_ops.c). One event as it needs it (shape:
 * "Input Dims" as text, NULL when absent; corr, seq, fwd_tid -1 when
 * absent; linked: it has an "External id"): operators, module scopes,
 * CUDA API calls and CUPTI's overhead records go to _fold, GPU records to
 * _gpu (false: out of memory); _finish after the pass; the outputs write
 * nothing for a trace without cpu_op events. */
struct rop_event {
	const char *name, *cat, *shape;
	int64_t pid, tid, corr, seq, fwd_tid;
	double ts, dur;
	bool linked;
};
bool report_ops_fold(struct rstats *st, const struct rop_event *e);
bool report_ops_gpu(struct rstats *st, int64_t corr, double ts, double dur);
bool report_ops_finish(struct rstats *st);
void report_ops_free(struct rstats *st);
void report_ops_print(FILE *f, const struct rstats *st, size_t top);
void report_ops_json(cJSON *r, const struct rstats *st, size_t top);
void report_ops_html(FILE *f, const struct rstats *st, size_t top);
/* Adds the operators (in their module) with a tenth of the GPU time or
 * more to out[k..max), each text starting with who; the new k. */
size_t report_ops_findings(const struct rstats *st, const char *who, struct finding *out,
                           size_t k, size_t max);
/* The ranges' GPU time (report_ranges.c): each range (name: its index
 * in st->ranges) during the pass (false: out of memory); _finish after it,
 * before report_ops_finish (it reads the operator table's calls and GPU
 * records), fills st->range_gpu and frees what the pass kept; _free_pass
 * frees that early. */
bool report_ranges_range(struct rstats *st, uint32_t name, int64_t pid, int64_t tid, double a,
                         double b);
bool report_ranges_finish(struct rstats *st);
void report_ranges_free_pass(struct rstats *st);

#endif
