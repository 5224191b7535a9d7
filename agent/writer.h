/*
 * writer.h: one burst written as Kineto's Chrome-trace JSON into a gzip
 * file (writer.c). capture.c calls it once per burst, after the window's
 * end and gpu_stop; it reads rec.c's thread buffers and the GPU parts'
 * harvest, and writes through tw.c.
 */
#ifndef GPROF_AGENT_WRITER_H
#define GPROF_AGENT_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

struct trace_result { uint64_t events, dropped, bytes; bool cut; };

/* Writes the trace of the burst that just ended into fd (an empty file the
 * caller made and keeps: scratch_new; written through a duplicate, fd's
 * offset is left at the end): 0, or a negative errno with why saying what
 * failed and what to do. */
AGENT_HIDDEN int writer_write(int fd, struct trace_result *res, char *why, size_t n);

#endif
