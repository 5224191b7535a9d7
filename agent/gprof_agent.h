/*
 * gprof_agent.h: the C API of libgprof_agent, for programs that mark their
 * own iterations and ranges (code without NVTX, or a training loop that
 * wants exact iteration boundaries).
 *
 * Every function is cheap and safe to call from any thread at any time,
 * with or without a daemon, before or after CUDA is initialised: while no
 * capture is running each one reads one atomic flag and returns. None of
 * them blocks, prints, or fails in a way the caller must handle.
 *
 * Programs that may run without the agent can resolve these symbols with
 * dlsym(RTLD_DEFAULT, "gprof_step") instead of linking.
 */
#ifndef GPROF_AGENT_H
#define GPROF_AGENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPROF_API __attribute__((visibility("default")))

/* Marks the end of one iteration (a training step) and the start of the
 * next: captures by iterations count these calls, and each captured
 * iteration appears in the trace as ProfilerStep#<n>. */
GPROF_API void gprof_step(void);

/* Opens a named range on the calling thread (a user_annotation in the
 * trace, with its GPU projection); ranges nest. name is copied. */
GPROF_API void gprof_range_push(const char *name);

/* Closes the innermost range the calling thread opened. */
GPROF_API void gprof_range_pop(void);

/* The number of gprof_step calls so far. */
GPROF_API uint64_t gprof_steps(void);

/* Memory snapshots (gprofctl trace --memory-snapshot), for the Python
 * helper (python/gprof_agent), which calls gprof_step_memory (gprof_step,
 * then gprof_memory_poll) at every optimizer step; one atomic load more
 * than gprof_step while no snapshot is wanted. The poll says what to do
 * now: NOTHING; START recording the CUDA allocator's history, keeping
 * gprof_memory_entries() entries; DUMP: write the snapshot (a pickle) to
 * the path gprof_memory_path puts in buf (0; -1 when buf's n bytes are too
 * few or no DUMP is pending), stop recording, then call gprof_memory_done;
 * STOP recording and write nothing (cancelled). */
#define GPROF_MEMORY_NOTHING 0
#define GPROF_MEMORY_START 1
#define GPROF_MEMORY_DUMP 2
#define GPROF_MEMORY_STOP 3
GPROF_API int gprof_memory_poll(void);
GPROF_API int gprof_step_memory(void);
GPROF_API int64_t gprof_memory_entries(void);
GPROF_API int gprof_memory_path(char *buf, size_t n);
/* After DUMP: ok 1 when the file is written, else 0 and why. Returns 1 when
 * the agent takes the file, 0 when that capture was given up meanwhile (the
 * caller then deletes the file). */
GPROF_API int gprof_memory_done(int ok, const char *why);

#ifdef __cplusplus
}
#endif

#endif
