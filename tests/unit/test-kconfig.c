/* Unit tests for proto/kconfig.c: the Kineto on-demand config text as the
 * dyno client writes it, defaults, and the lines Kineto would reject. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kconfig.h"

static void test_dyno_duration(void **state)
{
	struct kconfig k;

	(void)state;
	assert_int_equal(kconfig_parse(&k, "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_TIME=0\n"
	                 "ACTIVITIES_DURATION_MSECS=750\nPROFILE_REPORT_INPUT_SHAPES=false\n"
	                 "PROFILE_PROFILE_MEMORY=true\nREQUEST_TRACE_ID=abc", NULL), 0);
	assert_string_equal(k.log_file, "/tmp/t.json");
	assert_int_equal(k.duration_ms, 750);
	assert_int_equal(k.start_time_ms, 0);
	assert_int_equal(k.iterations, 0);
	assert_true(k.profile_memory);
	assert_string_equal(k.trace_id, "abc");
}

static void test_iterations_and_defaults(void **state)
{
	struct kconfig k;

	(void)state;
	assert_int_equal(kconfig_parse(&k, "\n# comment\n  PROFILE_START_ITERATION=0 \n"
	                 "PROFILE_START_ITERATION_ROUNDUP=100\r\nACTIVITIES_ITERATIONS=5\nUNKNOWN_KEY=1\n",
	                 NULL), 0);
	assert_int_equal(k.iterations, 5);
	assert_int_equal(k.roundup, 100);
	assert_int_equal(k.duration_ms, KCONFIG_DURATION_DEFAULT_MS);
	assert_false(k.profile_memory);
	assert_int_equal(kconfig_parse(&k, "", NULL), 0);
	assert_int_equal(k.duration_ms, KCONFIG_DURATION_DEFAULT_MS);
}

static void test_rejects(void **state)
{
	struct perr err;
	struct kconfig k;

	(void)state;
	assert_int_equal(kconfig_parse(&k, "A=1\nB=2=3\n", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "line 2"));
	assert_non_null(strstr(err.msg, "more than one '='"));
	assert_int_equal(kconfig_parse(&k, "JUSTAWORD\n", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not KEY=VALUE"));
	assert_int_equal(kconfig_parse(&k, "ACTIVITIES_ITERATIONS=five\n", &err), -EINVAL);
	assert_int_equal(kconfig_parse(&k, "ACTIVITIES_DURATION_MSECS=-5\n", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "non-negative integer"));
	/* every number a config carries (issue 23): not a float, not past
	 * int64 (strtoll's ERANGE), not trailing junk; the limits on what
	 * parses are window_check's (test-window.c) */
	assert_int_equal(kconfig_parse(&k, "ACTIVITIES_ITERATIONS=1e12\n", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "ACTIVITIES_ITERATIONS=1e12"));
	assert_int_equal(kconfig_parse(&k, "PROFILE_START_TIME=99999999999999999999\n", &err),
	                 -EINVAL);
	assert_int_equal(kconfig_parse(&k, "PROFILE_START_ITERATION=5x\n", &err), -EINVAL);
	assert_int_equal(kconfig_parse(&k, "PROFILE_START_ITERATION_ROUNDUP=\n", &err), -EINVAL);
	assert_int_equal(kconfig_parse(&k, "PROFILE_START_TIME=9223372036854775807\n", &err), 0);
	assert_int_equal(k.start_time_ms, INT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dyno_duration),
		cmocka_unit_test(test_iterations_and_defaults),
		cmocka_unit_test(test_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
