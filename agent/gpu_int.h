/*
 * gpu_int.h: what gpu_events.c (the records as trace events) and
 * gpu_tail.c (the end of a burst) use of gpu.c (CUPTI's life cycle and
 * buffers). Both are built only where the
 * CUPTI headers exist.
 */
#ifndef GPROF_AGENT_GPU_INT_H
#define GPROF_AGENT_GPU_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#include "agent.h"

struct tw;
typedef void (*gpu_rec_fn)(struct tw *w, CUpti_Activity *r, void *ud);

/* The completed buffers stay put between lock and unlock. */
AGENT_HIDDEN void gpu_records_lock(void);
AGENT_HIDDEN void gpu_records_unlock(void);
/* Calls fn for every record of every completed buffer; returns the number
 * of buffers. Lock held. */
AGENT_HIDDEN size_t gpu_each_record(struct tw *w, gpu_rec_fn fn, void *ud);
/* cudaLaunchKernel for CUPTI's cudaLaunchKernel_v7000 (not NUL-ended at len). */
AGENT_HIDDEN const char *gpu_api_name(CUpti_ActivityKind kind, uint32_t cbid, size_t *len);
/* Whether CUPTI was loaded (a burst ran); probes the devices once. */
AGENT_HIDDEN bool gpu_loaded(void);
AGENT_HIDDEN int gpu_sm_count(uint32_t dev);
/* A record that never completed: counted with the dropped ones. */
AGENT_HIDDEN void gpu_count_incomplete(void);
/* Whether CUPTI numbered a burst's API calls: not when most of n share an
 * id with an earlier one (repeats; the toolkit's libcupti 13.0 after an
 * unsubscribe, seen on an H100). Records are then matched by time and
 * count, never by id (gpu_events.c, gpu_tail.c). */
static inline bool gpu_ids_broken(uint64_t n, uint64_t repeats)
{
	return n >= 16 && repeats * 2 > n;
}

/* For gpu_tail.c, on the agent thread while CUPTI is held: */
AGENT_HIDDEN void gpu_kind_off(int64_t kind);
AGENT_HIDDEN void gpu_flush_complete(void);       /* cuptiActivityFlushAll(0) */
AGENT_HIDDEN int64_t gpu_buffers_out(void);       /* buffers CUPTI holds of this burst */
/* Calls fn (w = NULL) for each record of the buffers that came back since
 * *scanned (advanced), under the buffer lock; returns the buffers so far. */
AGENT_HIDDEN size_t gpu_each_new_record(size_t *scanned, gpu_rec_fn fn, void *ud);
/* Turns the kinds off (API kinds first), then waits for the GPU records of
 * the window's launches (gpu_tail.c). */
AGENT_HIDDEN void gpu_tail_drain(const int64_t *kinds, size_t nkinds);

/* The header's metadata (gpu_meta.c): libcuda's calls resolved when
 * libcupti is loaded (with its API version), devices and versions read
 * once, at the first harvest, CUPTI held. */
AGENT_HIDDEN void gpu_meta_load(uint32_t cupti_version);
AGENT_HIDDEN void gpu_meta_probe(void);
AGENT_HIDDEN bool gpu_meta_probed(void);

/* Runtime calls recorded by the agent's own callback (gpu_api.c), and the
 * driver API's launch calls it records too (their callback ids). */
AGENT_HIDDEN extern const CUpti_CallbackId gpu_api_driver_launches[];
AGENT_HIDDEN extern const size_t gpu_api_n_driver_launches;
AGENT_HIDDEN void gpu_api_arm(void);       /* a burst starts recording */
AGENT_HIDDEN bool gpu_api_armed(void);
/* Stops recording; waits for threads inside the callback, then hands every
 * chunk over (gpu_add_own). The callbacks must be off in CUPTI already or
 * at once after: a late one records nothing. */
AGENT_HIDDEN void gpu_api_disarm(void);
/* One runtime-API callback, or a driver-API launch's, on the application's
 * thread; now: CUPTI's clock. A driver call inside a runtime call is not
 * recorded (the runtime call is the launch). */
AGENT_HIDDEN void gpu_api_record(CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const CUpti_CallbackData *cb, uint64_t now);
/* Whether a call that began after the window's end (A.t_end) was recorded:
 * its correlation id bounds what was launched inside the window. */
AGENT_HIDDEN bool gpu_api_after_end(void);
/* The records this burst lost (byte limit, no memory). */
AGENT_HIDDEN uint64_t gpu_api_lost(void);
/* Walks a chunk's records as cuptiActivityGetNextRecord walks a buffer. */
AGENT_HIDDEN bool gpu_api_next(const uint8_t *buf, size_t valid, CUpti_Activity **rec);
AGENT_HIDDEN void gpu_api_atfork_child(void);
/* gpu.c's side: the burst's byte limit, and its finished buffers. */
AGENT_HIDDEN bool gpu_charge(size_t bytes);   /* false (and the burst cut) past the limit */
AGENT_HIDDEN void gpu_uncharge(size_t bytes);
/* A finished chunk of own records at buf; owner is freed at gpu_reset. */
AGENT_HIDDEN void gpu_add_own(void *owner, uint8_t *buf, size_t valid);

#endif
