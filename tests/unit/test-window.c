/* Unit tests for proto/window.c: the trace window's one set of rules, met
 * by the native trace_start (msg_decode) and by the Dynolog RPC's Kineto
 * config (kconfig_window) alike: every out-of-range value is refused by
 * both, with the same message (issue 23, item 7), and window_fits refuses
 * a window that cannot end before its trace times out. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kconfig.h"
#include "msg.h"
#include "window.h"

/* The error of a native trace_start with these window fields ("" if none). */
static void native_error(const char *fields, char *out, size_t size)
{
	char json[512];
	struct perr err = { "" };
	struct msg m;
	int r;

	snprintf(json, sizeof(json), "{\"type\":\"trace_start\",\"id\":1,\"job_id\":\"7\",%s}",
	         fields);
	r = msg_decode(&m, json, strlen(json), &err);
	snprintf(out, size, "%s", r < 0 ? err.msg : "");
	if (r == 0)
		msg_deinit(&m);
}

/* The error of a Dynolog RPC's Kineto config ("" if none). */
static void kineto_error(const char *config, char *out, size_t size)
{
	struct perr err = { "" };
	struct kconfig k;
	struct msg m;
	int r;

	msg_init(&m, MSG_TRACE_START, 1); /* the defaults dynorpc.c starts from */
	r = kconfig_parse(&k, config, &err);
	if (r == 0)
		r = kconfig_window(&k, &m.u.trace_start.win, &err);
	snprintf(out, size, "%s", r < 0 ? err.msg : "");
}

static void test_same_rules_both_paths(void **state)
{
	static const struct { const char *native, *kineto, *why; } cases[] = {
		{ "\"duration_ms\":1000000000000000", "ACTIVITIES_DURATION_MSECS=1000000000000000",
		  "duration_ms (ACTIVITIES_DURATION_MSECS) is 1000000000000000; give 1..86400000" },
		{ "\"duration_ms\":86400001", "ACTIVITIES_DURATION_MSECS=86400001",
		  "is 86400001; give 1..86400000" },
		{ "\"iterations\":1000000000000", "ACTIVITIES_ITERATIONS=1000000000000",
		  "iterations (ACTIVITIES_ITERATIONS) is 1000000000000; give 1..1000000" },
		{ "\"iterations\":5,\"iteration_roundup\":1000001",
		  "ACTIVITIES_ITERATIONS=5\nPROFILE_START_ITERATION_ROUNDUP=1000001",
		  "iteration_roundup (PROFILE_START_ITERATION_ROUNDUP) is 1000001; give 0..1000000" },
		/* PROFILE_START_TIME whose x1000 overflows, or lands past 2^53 us;
		 * the native wire cannot carry such a start_at_us at all (NULL:
		 * the decoder's exact-integer check refuses it first) */
		{ NULL, "PROFILE_START_TIME=99999999999999999", "is after the year 2255" },
		{ NULL, "PROFILE_START_TIME=9223372036854775807", "is after the year 2255" },
		{ NULL, "PROFILE_START_TIME=9007199254741", "is after the year 2255" },
	};
	char a[PERR_MAX], b[PERR_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].native != NULL)
			native_error(cases[i].native, a, sizeof(a));
		else
			snprintf(a, sizeof(a), "%s", cases[i].why);
		kineto_error(cases[i].kineto, b, sizeof(b));
		if (strstr(a, cases[i].why) == NULL || strstr(b, cases[i].why) == NULL)
			fail_msg("case %zu: want \"%s\" on both paths, got native \"%s\", "
			         "kineto \"%s\"", i, cases[i].why, a, b);
	}
	/* the largest values are accepted on both */
	native_error("\"iterations\":1000000,\"iteration_roundup\":1000000", a, sizeof(a));
	kineto_error("ACTIVITIES_ITERATIONS=1000000\nPROFILE_START_ITERATION_ROUNDUP=1000000",
	             b, sizeof(b));
	assert_string_equal(a, "");
	assert_string_equal(b, "");
	native_error("\"duration_ms\":86400000,\"start_at_us\":9007199254740991", a, sizeof(a));
	/* the native wire's limit for a start time, met on both */
	native_error("\"duration_ms\":5,\"start_at_us\":9007199254740992", b, sizeof(b));
	assert_non_null(strstr(b, "within +-(2^53-1)"));
	kineto_error("ACTIVITIES_DURATION_MSECS=86400000\nPROFILE_START_TIME=9007199254740", b,
	             sizeof(b));
	assert_string_equal(a, "");
	assert_string_equal(b, "");
}

static void test_kineto_conversion(void **state)
{
	struct kconfig k;
	struct msg m;

	(void)state;
	msg_init(&m, MSG_TRACE_START, 1);
	assert_int_equal(kconfig_parse(&k, "PROFILE_START_TIME=1700000000123", NULL), 0);
	assert_int_equal(kconfig_window(&k, &m.u.trace_start.win, NULL), 0);
	assert_int_equal(m.u.trace_start.win.start_at_us, 1700000000123000LL);
	assert_int_equal(m.u.trace_start.win.duration_ms, KCONFIG_DURATION_DEFAULT_MS);
	assert_int_equal(kconfig_parse(&k, "ACTIVITIES_ITERATIONS=3\n"
	                 "PROFILE_START_ITERATION_ROUNDUP=4\nACTIVITIES_DURATION_MSECS=9", NULL), 0);
	assert_int_equal(kconfig_window(&k, &m.u.trace_start.win, NULL), 0);
	assert_int_equal(m.u.trace_start.win.iterations, 3);
	assert_int_equal(m.u.trace_start.win.iteration_roundup, 4);
	assert_int_equal(m.u.trace_start.win.duration_ms, 0);
}

static void test_fits(void **state)
{
	const int64_t now = 1700000000000000LL;
	struct msg_window w = { .duration_ms = 1000, .activities = MSG_ACT_DEFAULT };
	struct perr err;

	(void)state;
	assert_int_equal(window_fits(&w, now, 300000, &err), 0);
	/* a start in the past means now */
	w.start_at_us = 1;
	assert_int_equal(window_fits(&w, now, 300000, &err), 0);
	/* ends exactly at the timeout: accepted; a millisecond later: not */
	w.start_at_us = now + 299000000;
	assert_int_equal(window_fits(&w, now, 300000, &err), 0);
	w.start_at_us++;
	assert_int_equal(window_fits(&w, now, 300000, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "after its timeout (300 s)"));
	w.start_at_us = 0;
	w.duration_ms = 300001;
	assert_int_equal(window_fits(&w, now, 300000, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "end in 300.001 s, after its timeout (300 s)"));
	/* a timeout under a second reads as such, not as 0 s */
	w.duration_ms = 5;
	assert_int_equal(window_fits(&w, now, 1, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "end in 0.005 s, after its timeout (0.001 s)"));
	/* an iteration window: only its start is known */
	w.duration_ms = 0;
	w.iterations = 5;
	w.start_at_us = now + 299999000;
	assert_int_equal(window_fits(&w, now, 300000, &err), 0);
	w.start_at_us = now + 300000000;
	assert_int_equal(window_fits(&w, now, 300000, &err), -ERANGE);
	assert_non_null(strstr(err.msg, "start in 300 s, not before its timeout (300 s)"));
	/* the largest values do not overflow */
	w.start_at_us = WINDOW_START_AT_US_MAX;
	assert_int_equal(window_fits(&w, 0, 86400000, &err), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_rules_both_paths),
		cmocka_unit_test(test_kineto_conversion),
		cmocka_unit_test(test_fits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
