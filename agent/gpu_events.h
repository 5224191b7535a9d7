/*
 * gpu_events.h: CUPTI's records of a burst as trace events (gpu_events.c,
 * or gpu_none.c's stand-in). writer.c calls it once per trace, after
 * gpu_stop has harvested the burst.
 */
#ifndef GPROF_AGENT_GPU_EVENTS_H
#define GPROF_AGENT_GPU_EVENTS_H

#include <stdint.h>

#include "state.h"

struct tw;

/* Writes the GPU and CUDA API events whose launch falls in [t0, t1]. */
AGENT_HIDDEN void gpu_write(struct tw *w, uint64_t t0, uint64_t t1);

#endif
