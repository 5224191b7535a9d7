/*
 * window: see window.h. Messages name the native field and the Kineto
 * config key together, because either path may be the one that asked.
 */
#include <errno.h>
#include <stdio.h>

#include "window.h"

int window_check(const struct msg_window *w, struct perr *err)
{
	if (w->iterations < 0 || w->iterations > WINDOW_ITERATIONS_MAX)
		return perr_set(err, -EBADMSG, "iterations (ACTIVITIES_ITERATIONS) is %lld; "
		                "give 1..%d", (long long)w->iterations, WINDOW_ITERATIONS_MAX);
	if (w->duration_ms < 0 || w->duration_ms > WINDOW_DURATION_MS_MAX)
		return perr_set(err, -EBADMSG, "duration_ms (ACTIVITIES_DURATION_MSECS) is %lld; "
		                "give 1..%lld (one day)", (long long)w->duration_ms,
		                WINDOW_DURATION_MS_MAX);
	if (w->start_at_us < 0 || w->start_at_us > WINDOW_START_AT_US_MAX)
		return perr_set(err, -EBADMSG, "the start time (start_at_us, PROFILE_START_TIME) "
		                "is after the year 2255: give a Unix time (us in start_at_us, "
		                "ms in PROFILE_START_TIME) or 0 for now");
	if (w->iteration_roundup < 0 || w->iteration_roundup > WINDOW_ROUNDUP_MAX)
		return perr_set(err, -EBADMSG, "iteration_roundup (PROFILE_START_ITERATION_ROUNDUP) "
		                "is %lld; give 0..%d", (long long)w->iteration_roundup,
		                WINDOW_ROUNDUP_MAX);
	if (w->start_iteration < 0 || w->start_iteration > WINDOW_START_ITERATION_MAX)
		return perr_set(err, -EBADMSG, "start_iteration is %lld; give 0..%lld",
		                (long long)w->start_iteration, WINDOW_START_ITERATION_MAX);
	if ((w->iterations > 0) == (w->duration_ms > 0))
		return perr_set(err, -EBADMSG, "give exactly one of iterations and "
		                "duration_ms");
	if (w->iterations == 0 && w->iteration_roundup > 0)
		return perr_set(err, -EBADMSG, "iteration_roundup needs iterations");
	if (w->iterations == 0 && w->start_iteration > 0)
		return perr_set(err, -EBADMSG, "start_iteration needs iterations");
	if (w->iterations == 0 && w->iteration_range != NULL)
		return perr_set(err, -EBADMSG, "iteration_range needs iterations");
	/* the snapshot is opened and taken at optimizer steps (python/gprof_agent) */
	if (w->memory_snapshot && w->iteration_range != NULL)
		return perr_set(err, -EBADMSG, "memory_snapshot counts iterations by steps: "
		                "leave out iteration_range");
	if (w->activities == 0)
		return perr_set(err, -EBADMSG, "activities is empty: name at least one");
	return 0;
}

/* ms as seconds for a message: "300 s", "0.001 s". */
static const char *secs(char *buf, size_t size, int64_t ms)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%lld s", (long long)(ms / 1000));
	else
		snprintf(buf, size, "%lld.%03lld s", (long long)(ms / 1000), (long long)(ms % 1000));
	return buf;
}

int window_fits(const struct msg_window *w, int64_t now_us, int64_t timeout_ms,
                struct perr *err)
{
	/* both bounded by window_check and the schema (timeout <= one day), so
	 * nothing below overflows */
	int64_t delay_ms = w->start_at_us > now_us ? (w->start_at_us - now_us + 999) / 1000 : 0;
	char a[32], b[32];

	if (delay_ms >= timeout_ms)
		return perr_set(err, -ERANGE, "the trace would start in %s, not before its "
		                "timeout (%s), so it could never be delivered: start it "
		                "sooner or raise the timeout (gprofctl trace --timeout; for dyno, "
		                "trace_timeout in gprofd's config)",
		                secs(a, sizeof(a), delay_ms), secs(b, sizeof(b), timeout_ms));
	if (w->duration_ms > 0 && delay_ms + w->duration_ms > timeout_ms)
		return perr_set(err, -ERANGE, "the trace would end in %s, after its timeout "
		                "(%s), so it could never be delivered: shorten it, start "
		                "sooner, or raise the timeout (gprofctl trace --timeout; for dyno, "
		                "trace_timeout in gprofd's config)",
		                secs(a, sizeof(a), delay_ms + w->duration_ms),
		                secs(b, sizeof(b), timeout_ms));
	return 0;
}
