/*
 * htab: the one hash index gprofctl's readers use for every lookup keyed by
 * something a file controls (kernel and range names, devices and streams,
 * threads, operator names, allocation addresses): report.c, report_ops.c,
 * report_mem.c.
 *
 * An index, not a container: it maps a key's hash to a uint32_t position in
 * the caller's own array, and asks the caller (eq) whether the entry there
 * is the key. Open addressing with linear probing, kept at most half full,
 * so a lookup costs O(1) probes on average whatever the keys are, as long
 * as the keys cannot be chosen to collide: the hash is SipHash-1-3 (the
 * hash Python and Rust use for the same reason) under a key drawn from
 * getrandom once per process, so a trace cannot be built to fall into one
 * chain (with FNV-1a or a fixed multiplier it can, and each lookup becomes
 * a scan).
 *
 * Every lookup and every probe is counted in htab_counts (one process-wide
 * pair; gprofctl report is single-threaded where it looks things up), so a
 * test can hold the work to the input's size without a clock.
 *
 * Ownership: the caller owns struct htab (htab_deinit frees its slots).
 */
#ifndef GPROFCTL_HTAB_H
#define GPROFCTL_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTAB_NONE UINT32_MAX

struct htab {
	uint32_t *idx;             /* HTAB_NONE: empty */
	uint64_t *hash;            /* each slot's hash, to grow without the keys */
	size_t mask, n;
};

struct htab_counts { uint64_t lookups, probes; };
extern struct htab_counts htab_counts;

/* The keyed hash of n bytes. */
uint64_t htab_hash(const void *p, size_t n);
/* The position whose entry eq(ctx, position, key) says is key, hashing to
 * h; HTAB_NONE when none is. */
uint32_t htab_find(const struct htab *t, uint64_t h,
                   bool (*eq)(const void *ctx, uint32_t pos, const void *key),
                   const void *ctx, const void *key);
/* Records position pos (not yet in t) under hash h. 0 or -ENOMEM. */
int htab_add(struct htab *t, uint64_t h, uint32_t pos);
void htab_deinit(struct htab *t);

#endif
