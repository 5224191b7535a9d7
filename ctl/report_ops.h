/*
 * report_ops.h: what report_ops.c (the operator table's pass and
 * finish) leaves for report_ops_out.c (its rows and outputs), and what
 * report_ranges.c reads of the calls and GPU records before that finish;
 * private to the three. Ownership: a struct rops belongs to its rstats (report_ops_free).
 */
#ifndef GPROFCTL_REPORT_OPS_H
#define GPROFCTL_REPORT_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NONE UINT32_MAX          /* no index: no shape, module, thread... */

/* An operator (cpu_op, user_annotation), or an nn.Module scope. */
struct rop {
	double a, b, dur;          /* start, end, and the duration as written (us):
	                              b - a of a time near 2^42 us is off by 1 ns */
	int64_t pid, tid;
	int64_t seq;               /* Sequence number; -1 none */
	uint32_t name, shape;      /* interned; shape NONE when not recorded */
	uint32_t module;           /* interned module name, NONE when none */
	int32_t parent;            /* the enclosing operator (index among the sorted
	                              ops); -1 a root */
	int32_t jump;              /* an ancestor further up (Myers' skew-binary jump
	                              pointers), so climbing the tree takes O(log n)
	                              steps; -1 for a root */
	uint32_t depth;            /* its ancestors' count */
	bool bwd;                  /* on autograd's backward pass */
	bool scope;                /* a record_function scope (not ProfilerStep#) */
	bool dead;                 /* merged into its parent of the same name */
	double child_cpu, gself, gtotal;
};

#include "htab.h"

/* Interned strings: v[i], found through idx. */
struct strtab { char **v; size_t n, cap; struct htab idx; };

/* A row of the table. */
struct orow {
	uint32_t name, shape, module;
	bool bwd;
	uint64_t count;
	double cpu_total, cpu_self, gpu_total, gpu_self;
};

/* A CUDA runtime or driver call, or a CUPTI overhead record: most of a
 * trace's events, so 32 bytes. corr: CUPTI's correlation id (32 bits),
 * NONE without; thr: its thread (an index into threads), NONE for none
 * (CUPTI's overhead records are written with pid -1). report_ranges.c
 * reads them (and the GPU records) before report_ops_finish reorders
 * them. */
struct rcall {
	double ts, dur;
	uint32_t corr, name, thr;
	bool linked;               /* Kineto linked it to an operator (External id) */
};
struct thread { int64_t pid, tid; };

/* Everything the operator table keeps of one trace. */
struct rops {
	struct rop *ops, *mods;    /* mods: module scopes (name: the module) */
	size_t nops, capops, nmods, capmods;
	struct rcall *calls;       /* freed by report_ops_finish, which leaves crows */
	size_t ncalls, capcalls;
	uint64_t linked_calls;
	struct orow *crows;        /* the calls' rows, by name */
	size_t ncrows, capcrows;
	uint32_t *gcorr;           /* GPU records: correlation ids, durations, starts */
	double *gdur, *gts;
	size_t ng, capg, capg2, capg3;
	struct thread *thr;
	size_t nthr, capthr, lastthr;
	struct htab thr_idx;       /* thr by (pid, tid), until place_calls sorts them */
	struct strtab names, shapes, modules;
	uint64_t cpu_ops;          /* cpu_op events: the table exists when > 0 */
	double gpu_total, gpu_unattributed, cpu_self_total;
};

/* The operator table's index of thread (pid, tid), or NONE (a thread that
 * made no CUDA call and ran no operator); found through thr_idx, so valid
 * until report_ops_finish sorts the threads. */
uint32_t report_ops_thread(const struct rops *o, int64_t pid, int64_t tid);

#endif
