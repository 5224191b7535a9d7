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
/* GPROF_MEMORY_MAX_ENTRIES as the agent reads it (1000 to 100000000, else
 * the default 100000, logged): the one reading of it, for the helper's
 * [memory] events (memevents.py) as for snapshots. */
GPROF_API int64_t gprof_memory_max_entries(void);
GPROF_API int gprof_memory_path(char *buf, size_t n);
/* After DUMP: ok 1 when the file is written, else 0 and why. Returns 1 when
 * the agent takes the file, 0 when that capture was given up meanwhile (the
 * caller then deletes the file). */
GPROF_API int gprof_memory_done(int ok, const char *why);

/*
 * What the current capture window wants of the program, for helpers that
 * poll it at step boundaries (python/gprof_agent): the GPROF_WINDOW_* bits
 * in the low 32 bits, the burst's number in the high 32 (a new number is a
 * new window). Cheap: a few atomic loads and an uncontended lock.
 */
#define GPROF_WINDOW_OPEN    (1u << 0) /* a window is recording now */
#define GPROF_WINDOW_OPS     (1u << 1) /* it takes PyTorch operators (gprof_ops_path) */
#define GPROF_WINDOW_SHAPES  (1u << 2) /* with input shapes (--record-shapes) */
#define GPROF_WINDOW_MODULES (1u << 3) /* with nn.Module scopes (--with-modules) */
#define GPROF_WINDOW_STACK   (1u << 4) /* asked: --with-stack */
#define GPROF_WINDOW_FLOPS   (1u << 5) /* asked: --with-flops */
#define GPROF_WINDOW_MEMORY  (1u << 6) /* asked: --profile-memory */
/* operators by default, not asked for: from the helper's observer only if
 * it is built (no fallback to torch.profiler, no build started) */
#define GPROF_WINDOW_UNASKED (1u << 7)
GPROF_API uint64_t gprof_window_flags(void);
/* Also in what gprof_step_memory returns, beside the GPROF_MEMORY_* action
 * (the low byte): a window that takes PyTorch operators is open. The
 * helper's one call per step tells it when to call gprof_window_flags, so
 * outside windows it makes no other call. */
#define GPROF_STEP_OPS 0x100

/* Claims the open window's operator file: writes its path (a file in a
 * directory private to this process, made for this window) into buf and
 * returns the window's number (the high half of gprof_window_flags), or 0
 * when the window takes no operators or the file is claimed already. The
 * claimer must call gprof_ops_done once the file is written (or not). */
GPROF_API uint64_t gprof_ops_path(char *buf, size_t n);

/* The operator file of window gen is complete (or, with why set, absent or
 * partial: why goes into the trace's note). The agent merges it into the
 * window's trace; it waits for this call at most GPROF_TORCH_OPS_WAIT_MS. */
GPROF_API void gprof_ops_done(uint64_t gen, const char *why);

/* What the calling helper understands (GPROF_HELPER_* bits, or-ed in; the
 * helper says so once, when it loads the agent). A window that did not ask
 * for operators (GPROF_WINDOW_UNASKED) is offered only to a helper that
 * declared GPROF_HELPER_UNASKED: an older helper would take it for an asked
 * one and start torch.profiler's CPU side and a build in every plain trace. */
#define GPROF_HELPER_UNASKED (1u << 0)
GPROF_API void gprof_helper_caps(uint32_t caps);

#ifdef __cplusplus
}
#endif

#endif
