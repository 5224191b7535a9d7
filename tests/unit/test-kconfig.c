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

/* Issue 27: the profiler options `dyno gputrace` sends, read with
 * Kineto's own booleans; the older key names Kineto still reads. */
static void test_options(void **state)
{
	struct kconfig k;

	(void)state;
	assert_int_equal(kconfig_parse(&k, "ACTIVITIES_LOG_FILE=/tmp/t.json\n"
	                 "PROFILE_REPORT_INPUT_SHAPES=true\nPROFILE_PROFILE_MEMORY=false\n"
	                 "PROFILE_WITH_STACK=false\nPROFILE_WITH_FLOPS=True\n"
	                 "PROFILE_WITH_MODULES=1\n", NULL), 0);
	assert_int_equal(k.options, MSG_OPT_RECORD_SHAPES | MSG_OPT_WITH_FLOPS |
	                 MSG_OPT_WITH_MODULES);
	assert_false(k.profile_memory);
	assert_int_equal(kconfig_parse(&k, "PROFILE_PROFILE_MEMORY=yes\nPROFILE_WITH_STACK=t\n",
	                 NULL), 0);
	assert_int_equal(k.options, MSG_OPT_PROFILE_MEMORY | MSG_OPT_WITH_STACK);
	assert_true(k.profile_memory);
	assert_int_equal(kconfig_parse(&k, "CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION=y\n"
	                 "PYTHON_STACK_TRACE=1\n", NULL), 0);
	assert_int_equal(k.options, MSG_OPT_RECORD_SHAPES | MSG_OPT_WITH_STACK);
	/* the same value twice is one request */
	assert_int_equal(kconfig_parse(&k, "PROFILE_WITH_STACK=true\nPYTHON_STACK_TRACE=yes\n",
	                 NULL), 0);
	assert_int_equal(k.options, MSG_OPT_WITH_STACK);
	assert_int_equal(kconfig_parse(&k, "", NULL), 0);
	assert_int_equal(k.options, 0);
}

/* A value Kineto throws on, and one option set both ways, are refused
 * with the line and what to do. */
static void test_options_rejected(void **state)
{
	struct perr err;
	struct kconfig k;

	(void)state;
	assert_int_equal(kconfig_parse(&k, "PROFILE_WITH_FLOPS=maybe\n", &err), -EINVAL);
	assert_string_equal(err.msg, "config line 1: PROFILE_WITH_FLOPS=maybe is not a boolean: "
	                    "give true or false (Kineto would reject the whole config)");
	assert_int_equal(kconfig_parse(&k, "PROFILE_WITH_MODULES=\n", &err), -EINVAL);
	assert_int_equal(kconfig_parse(&k, "PROFILE_REPORT_INPUT_SHAPES=true\nA=1\n"
	                 "CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION=false\n", &err), -EINVAL);
	assert_string_equal(err.msg, "config line 3: CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION="
	                    "false contradicts line 1 (PROFILE_REPORT_INPUT_SHAPES=true); Kineto "
	                    "would take the later one: give the option once");
	assert_int_equal(kconfig_parse(&k, "PYTHON_STACK_TRACE=0\nPROFILE_WITH_STACK=1\n", &err),
	                 -EINVAL);
	assert_non_null(strstr(err.msg, "contradicts line 1 (PYTHON_STACK_TRACE=false)"));
}

/* What a Kineto client is handed: all five keys, as dyno writes them. */
static void test_options_format(void **state)
{
	char buf[400] = "ACTIVITIES_LOG_FILE=/x\n", small[40] = "X=1\n";
	struct kconfig k;
	int n;

	(void)state;
	n = kconfig_options_format(MSG_OPT_RECORD_SHAPES | MSG_OPT_WITH_MODULES, buf, sizeof(buf));
	assert_string_equal(buf, "ACTIVITIES_LOG_FILE=/x\nPROFILE_REPORT_INPUT_SHAPES=true\n"
	                    "PROFILE_PROFILE_MEMORY=false\nPROFILE_WITH_STACK=false\n"
	                    "PROFILE_WITH_FLOPS=false\nPROFILE_WITH_MODULES=true\n");
	assert_int_equal(n, (int)strlen(buf) - 23);
	/* what it writes reads back as the same options, for every set */
	for (int64_t o = 0; o <= MSG_OPT_KINETO; o++) {
		buf[0] = 0;
		assert_true(kconfig_options_format(o, buf, sizeof(buf)) > 0);
		assert_int_equal(kconfig_parse(&k, buf, NULL), 0);
		assert_int_equal(k.options, o);
	}
	/* operators (the agent's) has no Kineto key: Kineto always records them */
	buf[0] = 0;
	kconfig_options_format(MSG_OPT_OPERATORS, buf, sizeof(buf));
	assert_int_equal(kconfig_parse(&k, buf, NULL), 0);
	assert_int_equal(k.options, 0);
	assert_int_equal(kconfig_options_format(MSG_OPT_ALL, small, sizeof(small)), -ENOBUFS);
	assert_string_equal(small, "X=1\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dyno_duration),
		cmocka_unit_test(test_iterations_and_defaults),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_options_rejected),
		cmocka_unit_test(test_options_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
