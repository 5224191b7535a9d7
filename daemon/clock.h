/*
 * clock: the daemon's wall clock, a leaf every module may include (it
 * includes nothing of ours). Wall-clock microseconds, because they are
 * compared with times other hosts and processes send (a trace's start
 * time, an agent's step times) and written into manifests; loop-relative
 * deadlines use uv_now instead.
 */
#ifndef GPROFD_CLOCK_H
#define GPROFD_CLOCK_H

#include <stdint.h>

/* Microseconds since the Unix epoch (gettimeofday). */
int64_t clock_now_us(void);

#endif
