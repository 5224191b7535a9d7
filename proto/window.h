/*
 * window: the one set of rules for a trace window (struct msg_window: how
 * many iterations or how long, and when to start), shared by every path
 * that can ask for a trace: the native trace_start and capture_start
 * (schema.c runs window_check on decode and encode) and the Dynolog RPC's
 * Kineto config (kconfig_window runs it on what it parsed). One place
 * decides the limits, so both paths refuse the same values with the same
 * words; proto/PROTOCOL.md lists the numbers.
 *
 * Two checks, because one needs the clock and the trace's timeout:
 *   window_check  ranges and cross-field rules, on the values alone;
 *   window_fits   the window begins and ends before the trace times out,
 *                 so a request the daemon accepts can be delivered: a start
 *                 far in the future, or a duration longer than the timeout,
 *                 would hold the process for the whole timeout and then
 *                 fail (issue 23, item 7). The daemon runs it before it
 *                 creates a trace (htrace.c, dynorpc.c).
 */
#ifndef GPROF_WINDOW_H
#define GPROF_WINDOW_H

#include <stdint.h>

#include "msgtypes.h"
#include "perr.h"

#define WINDOW_ITERATIONS_MAX 1000000
#define WINDOW_ROUNDUP_MAX 1000000
#define WINDOW_DURATION_MS_MAX 86400000LL /* one day */
#define WINDOW_START_AT_US_MAX MSG_INT_MAX /* the largest exact JSON integer */
#define WINDOW_START_ITERATION_MAX MSG_INT_MAX

/* 0, or -EBADMSG with err saying which value is wrong and what to give. */
int window_check(const struct msg_window *w, struct perr *err);

/* 0 when the window (already window_check'ed) starts and ends within
 * timeout_ms of now_us (Unix microseconds); else -ERANGE with err saying
 * when it would start or end and what to change. A start in the past means
 * now. An iteration window's end is unknown here; only its start is
 * checked. */
int window_fits(const struct msg_window *w, int64_t now_us, int64_t timeout_ms,
                struct perr *err);

#endif
