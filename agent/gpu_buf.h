/*
 * gpu_buf.h: the burst's activity buffers, CUPTI's and the agent's own,
 * and the harvest copied out of them (gpu_buf.c). Used by gpu.c (which
 * registers the buffer callbacks with CUPTI and harvests), gpu_api.c (own
 * records), gpu_tail.c (the records as they come back) and gpu_events.c
 * (the harvested records). Built only where the CUPTI headers exist.
 */
#ifndef GPROF_AGENT_GPU_BUF_H
#define GPROF_AGENT_GPU_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#include "state.h"

struct tw;
typedef void (*gpu_rec_fn)(struct tw *w, CUpti_Activity *r, void *ud);

/* The CUPTI calls this floor makes, resolved by gpu.c when it loads
 * libcupti and given here before any buffer is asked for. */
struct gpu_buf_cupti {
	__typeof__(cuptiActivityGetNextRecord) *next_record;
	__typeof__(cuptiActivityGetNumDroppedRecords) *num_dropped;
	__typeof__(cuptiGetCallbackName) *callback_name;
};
AGENT_HIDDEN void gpu_buf_init(const struct gpu_buf_cupti *c);

/* A burst's start, on the agent thread: its byte limit (counts and the cut
 * flag cleared) before the callbacks are registered; then, once the last
 * burst's buffers are flushed and reset, the counters cleared and the
 * pool filled. */
AGENT_HIDDEN void gpu_buf_limit(uint64_t limit);
AGENT_HIDDEN void gpu_buf_begin(void);
/* CUPTI's buffer callbacks (cuptiActivityRegisterCallbacks). */
AGENT_HIDDEN void CUPTIAPI gpu_buf_request(uint8_t **buffer, size_t *size, size_t *max_records);
AGENT_HIDDEN void CUPTIAPI gpu_buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                            size_t size, size_t valid);

/* Own records (gpu_api.c): charged to the burst's byte limit (false, and
 * the burst cut, past it), and handed over finished: buf holds valid bytes
 * of records GPU_BUF_OWN_REC apart, shaped as CUPTI's CUpti_ActivityAPI;
 * owner is freed at gpu_buf_reset. */
#define GPU_BUF_OWN_REC ((sizeof(CUpti_ActivityAPI) + 7) & ~(size_t)7)
AGENT_HIDDEN bool gpu_buf_charge(size_t bytes);
AGENT_HIDDEN void gpu_buf_uncharge(size_t bytes);
AGENT_HIDDEN void gpu_buf_add_own(void *owner, uint8_t *buf, size_t valid, size_t charged);

/* Before the window opens (see gpu_buf.c): the agent thread frees what came
 * back (the number of buffers freed); an API call not recorded because the
 * window was not open yet gives its correlation id (gpu_api.c); the highest
 * such id; what was shed this burst. */
AGENT_HIDDEN size_t gpu_buf_shed(void);
AGENT_HIDDEN void gpu_buf_note_pre(uint32_t corr);
AGENT_HIDDEN uint32_t gpu_buf_pre_corr(void);
AGENT_HIDDEN void gpu_buf_shed_stats(uint64_t *bufs, uint64_t *recs, uint64_t *dropped);

/* Indexes every record and copies out what points into CUPTI (kernel
 * names, callback names); CUPTI still held. */
AGENT_HIDDEN void gpu_buf_harvest(void);
/* Whether the bursts' API records came from more than one thread, and how
 * many were seen in all (gpu.c's release policy). */
AGENT_HIDDEN bool gpu_buf_api_threads(uint64_t *records);
/* Whether a harvest ever held a kernel a CUDA graph launched (graphId set):
 * gpu.c then never finalizes CUPTI (see graphs_seen there). */
AGENT_HIDDEN bool gpu_buf_graph_kernels(void);
/* Records CUPTI dropped this burst, with the ones that never completed;
 * whether the byte limit cut the burst. */
AGENT_HIDDEN uint64_t gpu_buf_dropped(void);
AGENT_HIDDEN bool gpu_buf_cut(void);
/* Frees the burst's buffers, index and name copies; touches no CUPTI. */
AGENT_HIDDEN void gpu_buf_reset(void);
AGENT_HIDDEN void gpu_buf_atfork_child(void);

/* For gpu_tail.c, while CUPTI is held: buffers CUPTI holds of this burst;
 * fn (w = NULL) for each record of the buffers that came back since
 * *scanned (advanced), under the buffer lock; returns the buffers so far. */
AGENT_HIDDEN int64_t gpu_buf_out(void);
AGENT_HIDDEN size_t gpu_buf_each_new(size_t *scanned, gpu_rec_fn fn, void *ud);

/* For gpu_events.c, after the harvest: the completed buffers stay put
 * between lock and unlock; gpu_buf_each calls fn for every harvested
 * record and returns the number of buffers (lock held). */
AGENT_HIDDEN void gpu_buf_lock(void);
AGENT_HIDDEN void gpu_buf_unlock(void);
AGENT_HIDDEN size_t gpu_buf_each(struct tw *w, gpu_rec_fn fn, void *ud);
/* cudaLaunchKernel for CUPTI's cudaLaunchKernel_v7000 (not NUL-ended at len). */
AGENT_HIDDEN const char *gpu_buf_api_name(CUpti_ActivityKind kind, uint32_t cbid, size_t *len);
/* A record that never completed: counted with the dropped ones. */
AGENT_HIDDEN void gpu_buf_incomplete(void);

/* Whether CUPTI numbered a burst's API calls: not when most of n share an
 * id with an earlier one (repeats; the toolkit's libcupti 13.0 after an
 * unsubscribe, seen on an H100). Records are then matched by time and
 * count, never by id (gpu_events.c, gpu_tail.c). */
static inline bool gpu_ids_broken(uint64_t n, uint64_t repeats)
{
	return n >= 16 && repeats * 2 > n;
}

#endif
