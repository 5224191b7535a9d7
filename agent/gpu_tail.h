/*
 * gpu_tail.h: the end of a burst, while the GPU still runs the window's
 * work (gpu_tail.c). gpu.c calls gpu_tail_drain from gpu_stop, CUPTI held,
 * and gives it the two CUPTI controls it needs, so the tail reads the
 * records (gpu_buf.c, gpu_api.c) and calls nothing above it.
 */
#ifndef GPROF_AGENT_GPU_TAIL_H
#define GPROF_AGENT_GPU_TAIL_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

struct gpu_tail_ctl {
	void (*kind_off)(int64_t kind); /* turns one activity kind off */
	void (*flush)(void);            /* cuptiActivityFlushAll(0): complete buffers */
};

/* Turns the kinds off (API kinds first), then waits for the GPU records of
 * the window's launches. */
AGENT_HIDDEN void gpu_tail_drain(const struct gpu_tail_ctl *ctl, const int64_t *kinds,
                                 size_t nkinds);

#endif
