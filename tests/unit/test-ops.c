/* Unit tests for agent/ops.c's parser (ops_parse): the PyTorch operator
 * file the job's profiler exports, as the agent reads it before merging
 * it into its trace (issue 27). Known answers for every shape torch has
 * written (Kineto with baseTimeNanoseconds after the events or before
 * them, absolute microseconds, the legacy profiler's bare array), times
 * exact to the nanosecond, and bad input: refused whole (not JSON, cut,
 * no events) or event by event (wrong types, overflow, exponents), with
 * "ts" in args or inside a string never mistaken for the event's; and the
 * helper's [memory] events (--profile-memory): kept with exactly their six
 * integer args, other instant events skipped, a bad one counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ops.h"

#define ALL 0, UINT64_MAX

static const char *parse(const char *text, uint64_t t0, uint64_t t1, size_t *bad,
                         size_t *outside)
{
	return ops_parse(text, strlen(text), t0, t1, bad, outside);
}

static void get(size_t i, int *tid, uint64_t *s, uint64_t *e, const char **name,
                const char **args)
{
	assert_true(ops_get(i, tid, s, e, name, args));
}

static void test_kineto_base_after(void **state)
{
	/* Kineto writes baseTimeNanoseconds after traceEvents */
	const char *t =
		"{\"schemaVersion\": 1, \"deviceProperties\": [], \"traceEvents\": [\n"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": 9, "
		"\"tid\": 77, \"ts\": 10.500, \"dur\": 5.250, \"args\": {\"External id\": 1, "
		"\"Input Dims\": [[128, 64], [32]], \"Sequence number\": 4}},\n"
		"{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", "
		"\"pid\": 9, \"tid\": 77, \"ts\": 1.0, \"dur\": 100},\n"
		"{\"ph\": \"s\", \"id\": 4, \"pid\": 9, \"tid\": 77, \"ts\": 11.0, \"cat\": \"fwdbwd\", "
		"\"name\": \"fwdbwd\"},\n"
		"{\"ph\": \"f\", \"id\": 4, \"pid\": 9, \"tid\": 77, \"ts\": 50.0, \"cat\": \"fwdbwd\", "
		"\"name\": \"fwdbwd\", \"bp\": \"e\"},\n"
		"{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, "
		"\"ts\": 12, \"dur\": 1},\n"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"late\", \"pid\": 9, \"tid\": 77, "
		"\"ts\": 900, \"dur\": 1},\n"
		"{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 9, \"tid\": 0}\n"
		"], \"traceName\": \"x\", \"displayTimeUnit\": \"ms\", "
		"\"baseTimeNanoseconds\": 1000000000000}";
	size_t bad, outside;
	uint64_t s, e;
	const char *name, *args;
	int tid;

	(void)state;
	assert_null(parse(t, 1000000000000ull, 1000000500000ull, &bad, &outside));
	assert_int_equal(bad, 0);
	assert_int_equal(outside, 1); /* "late"; the kernel and ProfilerStep are not taken */
	assert_int_equal(ops_count(), 3); /* the operator and the flow's two ends */
	get(0, &tid, &s, &e, &name, &args);
	assert_int_equal(tid, 77);
	assert_int_equal(s, 1000000010500ull);
	assert_int_equal(e, 1000000015750ull);
	assert_string_equal(name, "aten::linear");
	assert_string_equal(args, "{\"External id\":1,\"Input Dims\":[[128,64],[32]],"
	                    "\"Sequence number\":4}");
	get(1, &tid, &s, &e, &name, &args);
	assert_null(name); /* the flow */
	assert_int_equal(s, 1000000011000ull);
	ops_end();
}

/* A flow is kept whole or not at all: an end whose other end lies outside
 * the window, or whose id repeats, goes (a lone end is an error to
 * Perfetto and HTA; seen in duration windows on an H200, 2026-11-29). */
static void test_flows_paired(void **state)
{
#define FLOW(ph, id, ts) "{\"ph\": \"" ph "\", \"id\": " id ", \"pid\": 1, \"tid\": 2, " \
	"\"ts\": " ts ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"},"
	const char *t = "{\"traceEvents\": ["
		FLOW("s", "1", "10") FLOW("f", "1", "20")        /* whole: kept */
		FLOW("s", "2", "30") FLOW("f", "2", "500")       /* its end after the window */
		FLOW("s", "3", "200") FLOW("f", "3", "40")       /* its start after the window */
		FLOW("s", "5", "50") FLOW("f", "5", "60") FLOW("s", "5", "70") /* a repeated id */
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op\", \"pid\": 1, "
		"\"tid\": 2, \"ts\": 15, \"dur\": 1}]}";
#undef FLOW
	size_t bad, outside, i;
	uint64_t s, e, seen = 0;
	const char *name, *args;
	int tid;

	(void)state;
	assert_null(parse(t, 0, 100000, &bad, &outside));
	assert_int_equal(bad, 0);
	assert_int_equal(outside, 2);
	assert_int_equal(ops_count(), 3);
	for (i = 0; i < 3; i++) {
		get(i, &tid, &s, &e, &name, &args);
		seen |= (uint64_t)1 << (s / 1000);
	}
	/* the op at 15 us and flow 1's ends at 10 and 20 us */
	assert_int_equal(seen, ((uint64_t)1 << 10) | ((uint64_t)1 << 15) | ((uint64_t)1 << 20));
	ops_end();
}

static void test_absolute_exact(void **state)
{
	/* no base: absolute microseconds, which a double holds only to 0.25 us */
	const char *t = "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", "
	                "\"args\": {\"ts\": 5, \"dur\": \"x\"}, \"name\": \"a\\\"ts\\\": 3\", "
	                "\"pid\": 1, \"tid\": 5, \"dur\": 0.001, \"ts\": 1764081234567890.123}]}";
	size_t bad, outside;
	uint64_t s, e;
	const char *name, *args;
	int tid;

	(void)state;
	assert_null(parse(t, ALL, &bad, &outside));
	assert_int_equal(ops_count(), 1);
	get(0, &tid, &s, &e, &name, &args);
	assert_int_equal(s, 1764081234567890123ull);
	assert_int_equal(e, 1764081234567890124ull);
	assert_string_equal(name, "a\"ts\": 3");
	ops_end();
}

static void test_legacy_array(void **state)
{
	const char *t = "[{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", "
	                "\"pid\": 1, \"tid\": 3, \"ts\": 7, \"dur\": 2}]";
	size_t bad, outside;

	(void)state;
	assert_null(parse(t, ALL, &bad, &outside));
	assert_int_equal(ops_count(), 1);
	ops_end();
}

static void test_bad_events(void **state)
{
	const char *t = "{\"traceEvents\": ["
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"s\", \"tid\": 1, \"ts\": \"1\", \"dur\": 1},"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"neg\", \"tid\": -1, \"ts\": 1, \"dur\": 1},"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"big\", \"tid\": 99999999, \"ts\": 1, "
		"\"dur\": 1},"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"exp\", \"tid\": 1, \"ts\": 1e3, \"dur\": 1},"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"ovf\", \"tid\": 1, "
		"\"ts\": 99999999999999999999999, \"dur\": 1},"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"negts\", \"tid\": 1, \"ts\": -4, \"dur\": 1},"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": 5, \"tid\": 1, \"ts\": 4, \"dur\": 1},"
		"17, [],"
		"{\"ph\": \"s\", \"cat\": \"fwdbwd\", \"id\": 1e300, \"tid\": 1, \"ts\": 4},"
		"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"good\", \"tid\": 1, \"ts\": 4, \"dur\": 1}"
		"], \"baseTimeNanoseconds\": 0}";
	size_t bad, outside;
	uint64_t s, e;
	const char *name, *args;
	int tid;

	(void)state;
	assert_null(parse(t, ALL, &bad, &outside));
	assert_int_equal(bad, 10);
	assert_int_equal(ops_count(), 1);
	get(0, &tid, &s, &e, &name, &args);
	assert_string_equal(name, "good");
	assert_null(args);
	ops_end();
}

static void test_refused_whole(void **state)
{
	static const char *const bad_files[] = {
		"", "this is not a trace {", "{\"traceEvents\": 5}", "{\"schemaVersion\": 1}",
		"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\", \"tid\": 1, "
		"\"ts\": 1, \"dur\": 1}, {\"ph\": \"X\", \"ca",
		"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\", \"tid\": 1, "
		"\"ts\": 1, \"dur\": 1} {}]}",
		"{\"traceEvents\": [", "[1, 2",
	};
	size_t i, bad, outside;

	(void)state;
	for (i = 0; i < sizeof(bad_files) / sizeof(bad_files[0]); i++) {
		assert_non_null(parse(bad_files[i], ALL, &bad, &outside));
		assert_int_equal(ops_count(), 0); /* nothing half-kept */
	}
}

static void test_memory_events(void **state)
{
	const char *t =
		"{\"baseTimeNanoseconds\": 0, \"traceEvents\": [\n"
		"{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", "
		"\"pid\": 9, \"tid\": 77, \"ts\": 1700000000123456.000, \"args\": {\"Total Reserved\": "
		"2097152, \"Total Allocated\": 39424, \"Bytes\": -512, \"Device Id\": 0, "
		"\"Device Type\": 1, \"Addr\": 139810345382400, \"Ev Idx\": 3, \"x\": \"y\"}},\n"
		/* an instant event that is not [memory]: skipped, not bad */
		"{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": "
		"\"Iteration Start: PyTorch Profiler\", \"pid\": 9, \"tid\": 77, \"ts\": 5.0},\n"
		/* Bytes not an integer; an arg missing; args not an object: bad */
		"{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"tid\": 77, "
		"\"ts\": 1.0, \"args\": {\"Total Reserved\": 1, \"Total Allocated\": 1, \"Bytes\": 0.5, "
		"\"Device Id\": 0, \"Device Type\": 1, \"Addr\": 1}},\n"
		"{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"tid\": 77, "
		"\"ts\": 1.0, \"args\": {\"Total Reserved\": 1, \"Total Allocated\": 1, \"Bytes\": 1, "
		"\"Device Id\": 0, \"Device Type\": 1}},\n"
		"{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"tid\": 77, "
		"\"ts\": 1.0, \"args\": 7}\n"
		"]}";
	const char *name, *args;
	size_t bad, outside;
	uint64_t s, e;
	int tid;

	(void)state;
	assert_null(parse(t, ALL, &bad, &outside));
	assert_int_equal(ops_count(), 1);
	assert_int_equal(bad, 3);
	get(0, &tid, &s, &e, &name, &args);
	assert_int_equal(tid, 77);
	assert_true(s == 1700000000123456000ull && e == s);
	assert_null(name);
	assert_string_equal(args, "{\"Total Reserved\":2097152,\"Total Allocated\":39424,"
	                    "\"Bytes\":-512,\"Device Id\":0,\"Device Type\":1,"
	                    "\"Addr\":139810345382400}");
	/* outside the window: counted, not kept */
	assert_null(parse(t, 1700000000123457000ull, UINT64_MAX, &bad, &outside));
	assert_int_equal(ops_count(), 0);
	assert_int_equal(outside, 1);
	ops_end();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kineto_base_after),
		cmocka_unit_test(test_flows_paired),
		cmocka_unit_test(test_absolute_exact),
		cmocka_unit_test(test_legacy_array),
		cmocka_unit_test(test_bad_events),
		cmocka_unit_test(test_refused_whole),
		cmocka_unit_test(test_memory_events),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
