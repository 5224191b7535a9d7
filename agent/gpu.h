/*
 * gpu.h: CUPTI for one burst at a time (gpu.c, or gpu_none.c where the
 * CUPTI headers are absent): loaded at the first burst, enabled for the
 * window, drained, harvested and given back after it. capture.c drives
 * it; link.c asks whether it is usable; writer.c and gpu_events.c read
 * its counts. No CUPTI type appears here, so the floors above build
 * without the toolkit.
 */
#ifndef GPROF_AGENT_GPU_H
#define GPROF_AGENT_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

/* Whether CUPTI may be tried in this process (CUDA in use, not a forked
 * child); why says why not. */
AGENT_HIDDEN bool gpu_usable(char *why, size_t n);
/* Takes CUPTI (settling an earlier burst's release) and enables the kinds;
 * 0, or a negative code with why filled in. */
AGENT_HIDDEN int gpu_start(int64_t activities, uint64_t max_bytes, char *why, size_t n);
/* The activities the last gpu_start asked for that CUPTI would not turn
 * on, named with CUPTI's reason ("sync left out: CUPTI refused it
 * (CUPTI_ERROR_NOT_SUPPORTED)"), into buf; "" when it took them all. */
AGENT_HIDDEN void gpu_left_out(char *buf, size_t n);
/* Between gpu_start and the window's opening (the agent thread, often):
 * frees the records CUPTI handed back meanwhile, none of them the
 * window's, so a long wait for the window cannot fill its budget. */
AGENT_HIDDEN void gpu_shed(void);
/* Disables, flushes, copies out what the writer needs, and gives CUPTI
 * back; from here to the next gpu_start the agent makes no CUPTI call. */
AGENT_HIDDEN void gpu_stop(void);
/* Records lost this burst (CUPTI's drops, incomplete ones, own records
 * past the limit); whether the byte limit cut it. */
AGENT_HIDDEN uint64_t gpu_dropped(void);
AGENT_HIDDEN bool gpu_cut(void);
/* Frees the burst's buffers and copies; touches no CUPTI. */
AGENT_HIDDEN void gpu_reset(void);
AGENT_HIDDEN void gpu_atfork_child(void);
/* Whether CUPTI was loaded (a burst ran) and the devices probed. */
AGENT_HIDDEN bool gpu_loaded(void);

#endif
