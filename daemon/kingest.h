/*
 * kingest: the thread-pool half of collecting a file Kineto wrote
 * (kineto.c holds the rest): the file is read, only if it is a regular
 * file of the traced user and within limits.trace_bytes, and compressed
 * into a temporary file in the trace's directory with ProfilerStep# events
 * made from its optimizer steps (kstep.c) inserted, then fsync'd; kineto.c
 * hands that to deliver.c, which renames, records and acknowledges it.
 *
 * The path is the traced user's to shape: it is opened O_NONBLOCK |
 * O_NOFOLLOW | O_NOCTTY, fstat'd, and anything else refused at once, so no
 * FIFO or link can hold a pool thread or reach a file the user cannot read.
 *
 * Floor: a leaf of kineto.c; includes kstep.h only.
 */
#ifndef GPROFD_KINGEST_H
#define GPROFD_KINGEST_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

struct kingest {
	/* what to do */
	char src[PATH_MAX];    /* the file Kineto wrote */
	char tmp[PATH_MAX];    /* where the compressed copy goes */
	uint64_t limit;        /* limits.trace_bytes */
	pid_t pid;             /* the traced process */
	uid_t uid;             /* its user: src must be theirs */
	/* what came of it */
	int64_t bytes;         /* tmp's size */
	int64_t steps;         /* "Optimizer.step#..." annotations in the file */
	int64_t made_steps;    /* ProfilerStep# events added (kstep.c) */
	int result;            /* 0 done, 1 incomplete (wait), -1 failed */
	char why[240];         /* on -1: what failed, for a person */
};

/* Compresses k->src into k->tmp (kingest.h), setting what came of it. On
 * anything but 0, k->tmp is not left behind. */
void kingest_run(struct kingest *k);

#endif
