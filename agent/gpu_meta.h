/*
 * gpu_meta.h: what a trace's header says of the GPUs and the CUDA stack
 * (gpu_meta.c, or gpu_none.c's stand-ins for the two writers). gpu.c
 * loads and probes; writer.c and gpu_events.c read the copies.
 */
#ifndef GPROF_AGENT_GPU_META_H
#define GPROF_AGENT_GPU_META_H

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

struct tw;

/* libcuda's calls resolved when libcupti is loaded (with its API version);
 * devices and versions read once, at the first harvest, CUPTI held. */
AGENT_HIDDEN void gpu_meta_load(uint32_t cupti_version);
AGENT_HIDDEN void gpu_meta_probe(void);
AGENT_HIDDEN bool gpu_meta_probed(void);
AGENT_HIDDEN int gpu_sm_count(uint32_t dev);
/* The header's deviceProperties entries, and its CUDA version keys. */
AGENT_HIDDEN void gpu_write_devices(struct tw *w);
AGENT_HIDDEN void gpu_write_meta(struct tw *w);

#endif
