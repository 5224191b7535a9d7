/*
 * mhist.h: the metrics history (mhist.c), the last `cap` samples kept
 * compactly for metrics_query.
 *
 * A sample in an mset costs 24 bytes a value plus its label text, and the
 * buffers it grew to (about 10 kB a sample on a host with no GPU, 3 MB for
 * the default 300 samples: issue 25). Here each series (family, owner and
 * label list) is kept once, in a table shared by every sample, and a sample
 * is a byte string of (series, value) pairs: a decimal mantissa as a
 * varint for the values /proc and NVML give (integers, hundredths), a float
 * for the rest, one byte for a 0, and a run of a few bytes for the series
 * that kept the value they had in the sample before (the gauges that stand
 * still, the registered processes that reported nothing new). Every value reads back bit for bit, except those of the
 * _ratio families that are neither decimals nor floats (GPM ratios), which
 * read back as the nearest float (a relative error under 6e-8).
 *
 * Memory: bounded by cap samples of at most 100,000 values each (mset's
 * limit) and the series those samples name; a series that no kept sample
 * names any more is freed at the next append.
 *
 * Ownership: the caller serialises every call (metrics.c holds m->lock).
 */
#ifndef GPROFD_MHIST_H
#define GPROFD_MHIST_H

#include <stddef.h>
#include <stdint.h>

#include "mset.h"

struct mhist;

/* A history of up to cap samples (cap 0: keeps none). NULL on ENOMEM. */
struct mhist *mhist_new(size_t cap);
void mhist_free(struct mhist *h);
/* Appends s, evicting the oldest sample when cap are kept. 0 or -ENOMEM
 * (then s is not kept, and the history is as it was less its oldest). */
int mhist_append(struct mhist *h, const struct mset *s);
/* Samples kept (at most cap). */
size_t mhist_len(const struct mhist *h);
/* Calls fn with a copy of each of the samples first .. first + count - 1
 * (0 the oldest kept, mhist_len - 1 the newest), in order, and i counted
 * from first. A sample is read from the oldest on (runs read the one
 * before), so one call for all the samples wanted, not one each. Stops at
 * fn's first negative return and returns it; else 0, -ERANGE or -ENOMEM. */
int mhist_read(const struct mhist *h, size_t first, size_t count,
               int (*fn)(void *ud, size_t i, const struct mset *s), void *ud);
/* Bytes the history holds on the heap (samples, series, their tables), for
 * the docs and tests; malloc's own overhead not counted. */
size_t mhist_bytes(const struct mhist *h);

#endif
