/*
 * grow.h: the two small helpers gprofctl's readers share (report.c,
 * report_ops.c, report_mem.c, pickle.c): an array that doubles as it fills,
 * and the FNV-1a hash their open-addressing tables use. Header-only (static
 * inline), a leaf: it includes nothing of the project.
 */
#ifndef GPROF_CTL_GROW_H
#define GPROF_CTL_GROW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* *v holds at least need elements of size bytes after a true return
 * (capacity doubling from 16; *v and *cap unchanged on false). */
static inline bool grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *p;

	if (need <= *cap)
		return true;
	while (c < need)
		c *= 2;
	if ((p = realloc(*v, c * size)) == NULL)
		return false;
	*v = p;
	*cap = c;
	return true;
}

/* FNV-1a over a NUL-terminated string. */
static inline uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

#endif
