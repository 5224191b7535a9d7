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

#ifdef __cplusplus
}
#endif

#endif
