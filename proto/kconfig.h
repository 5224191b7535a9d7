/*
 * kconfig: libkineto's on-demand config text, the `config` string of
 * Dynolog's setKinetOnDemandRequest and the payload Kineto clients poll for
 * (shared/DYNOLOG_COMPAT.md). Lines of KEY=VALUE; blank lines and lines
 * starting with '#' are skipped; surrounding spaces are trimmed. A line
 * with more than one '=' makes Kineto reject the whole config, so it is an
 * error here too (the user learns it before a trace silently never runs).
 * Keys gprofd does not need are accepted and ignored, as Kineto accepts
 * many.
 *
 * The profiler options (msg.h MSG_OPT_*) are read from the keys libkineto's
 * Config.cpp reads (PROFILE_REPORT_INPUT_SHAPES, PROFILE_PROFILE_MEMORY,
 * PROFILE_WITH_STACK, PROFILE_WITH_FLOPS, PROFILE_WITH_MODULES, and the
 * older CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION and PYTHON_STACK_TRACE)
 * with Kineto's own booleans (n/y, no/yes, f/t, false/true, 0/1, any case),
 * and written back with the five current keys. A value Kineto would throw
 * on, and one option set twice to opposite values (Kineto would take the
 * later line, so the request means two things), are errors here.
 */
#ifndef GPROF_KCONFIG_H
#define GPROF_KCONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "msgtypes.h"
#include "perr.h"

#define KCONFIG_DURATION_DEFAULT_MS 500

struct kconfig {
	char log_file[4096];      /* ACTIVITIES_LOG_FILE */
	int64_t duration_ms;      /* ACTIVITIES_DURATION_MSECS (default 500) */
	int64_t start_time_ms;    /* PROFILE_START_TIME, ms since the epoch; 0 = now */
	int64_t iterations;       /* ACTIVITIES_ITERATIONS; > 0 selects iteration mode */
	int64_t start_iteration;  /* PROFILE_START_ITERATION */
	int64_t roundup;          /* PROFILE_START_ITERATION_ROUNDUP */
	char trace_id[65];        /* REQUEST_TRACE_ID */
	bool profile_memory;      /* PROFILE_PROFILE_MEMORY / PROFILE_MEMORY */
	int64_t options;          /* MSG_OPT_*: the profiler options set true */
};

/* Parses text (NUL-terminated). 0, or -EINVAL with err naming the line. */
int kconfig_parse(struct kconfig *k, const char *text, struct perr *err);

/* Sets w's iterations, iteration_roundup, duration_ms, start_at_us and
 * options from k (the rest of w stays as the caller set it) and checks the result with
 * window_check, the rules a native trace request meets: 0, or -EBADMSG
 * with err saying which value to change. Values too large to convert
 * (PROFILE_START_TIME x 1000) saturate, so that check refuses them. */
int kconfig_window(const struct kconfig *k, struct msg_window *w, struct perr *err);

/* Appends the five option lines for options (MSG_OPT_*), each "KEY=true"
 * or "KEY=false" as `dyno gputrace` writes them, to buf (NUL-terminated,
 * size bytes). Returns the length written, or -ENOBUFS (buf unchanged
 * past its old end) when it does not fit. */
int kconfig_options_format(int64_t options, char *buf, size_t size);

#endif
