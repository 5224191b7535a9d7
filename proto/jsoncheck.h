/*
 * jsoncheck: the checks cJSON does not make, run over untrusted JSON text
 * before cJSON parses it.
 *
 * cJSON accepts invalid UTF-8, raw control characters inside strings and
 * "\u0000" (which silently truncates a C string), and recurses up to 1000
 * levels deep. A protocol message needs none of that, and every one of
 * them is a way to smuggle something past a validator or to burn stack.
 * This scanner rejects them in one linear pass, reporting the byte offset.
 */
#ifndef GPROF_JSONCHECK_H
#define GPROF_JSONCHECK_H

#include <stddef.h>

#include "perr.h"

#define JSONCHECK_DEPTH_DEFAULT 16

/* 0, or -EBADMSG with a message naming the offset and the problem. */
int jsoncheck_text(const char *s, size_t len, unsigned max_depth, struct perr *err);

#endif
