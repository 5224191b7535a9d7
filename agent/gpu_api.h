/*
 * gpu_api.h: CUDA runtime calls recorded by the agent's own CUPTI callback
 * (gpu_api.c). gpu.c arms it for a burst, forwards each runtime-API
 * callback and disarms it; gpu_tail.c asks whether a call after the window
 * was seen. The records go to gpu_buf.c. Built only where the CUPTI
 * headers exist.
 */
#ifndef GPROF_AGENT_GPU_API_H
#define GPROF_AGENT_GPU_API_H

#include <stdbool.h>
#include <stdint.h>

#include <cupti.h>

#include "state.h"

AGENT_HIDDEN void gpu_api_arm(void);       /* a burst starts recording */
AGENT_HIDDEN bool gpu_api_armed(void);
/* Stops recording; waits for threads inside the callback, then hands every
 * chunk over (gpu_buf_add_own). The callbacks must be off in CUPTI already
 * or at once after: a late one records nothing. false when a thread stayed
 * inside past the wait (it may still read CUPTI's clock: CUPTI must not be
 * finalized under it). */
AGENT_HIDDEN bool gpu_api_disarm(void);
/* One runtime-API callback, or a driver-API launch's, on the application's
 * thread; clock: CUPTI's, read only while recording is on and counted (so
 * never while CUPTI is being given back). A driver call inside a runtime
 * call is not recorded (the runtime call is the launch). */
AGENT_HIDDEN void gpu_api_record(CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const CUpti_CallbackData *cb, uint64_t (*clock)(void));
/* The driver API's launch calls the callback records too (their ids). */
AGENT_HIDDEN extern const CUpti_CallbackId gpu_api_driver_launches[];
AGENT_HIDDEN extern const size_t gpu_api_n_driver_launches;
/* Whether a call that began after the window's end (A.t_end) was recorded:
 * its correlation id bounds what was launched inside the window. */
AGENT_HIDDEN bool gpu_api_after_end(void);
/* The records this burst lost (byte limit, no memory). */
AGENT_HIDDEN uint64_t gpu_api_lost(void);
AGENT_HIDDEN void gpu_api_atfork_child(void);

#endif
