/*
 * mhost.h: host metrics from /proc under a root directory (mhost.c).
 *
 * Floor: a leaf under metrics.c, its only caller (the sampler thread).
 */
#ifndef GPROFD_MHOST_H
#define GPROFD_MHOST_H

#include "mset.h"

/* Adds CPU, memory, load, network and disk values found under root
 * ("/" normally; a fixture tree in tests) to s. */
void mhost_sample(const char *root, struct mset *s);

/* The files mhost_sample reads, in the order of its rel_paths. */
enum mhost_file { MHOST_STAT, MHOST_MEMINFO, MHOST_LOADAVG, MHOST_NETDEV, MHOST_DISKSTATS,
	          MHOST_FILES };

/* Parses one file's text (len bytes; text[len] must be '\0') into s: what
 * mhost_sample does with each file it reads (the fuzz target calls it). */
void mhost_parse(enum mhost_file f, const char *text, size_t len, struct mset *s);

#endif
