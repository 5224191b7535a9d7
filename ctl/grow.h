/*
 * grow.h: the small helper gprofctl's readers share (report.c,
 * report_ops.c, report_ranges.c, report_mem.c, pickle.c): an array that doubles as it fills.
 * (Their lookups go through htab.c.) Header-only (static inline), a leaf: it
 * includes nothing of the project.
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

#endif
