/*
 * Unit tests for proto/dyno.c: requests exactly as the stock dyno client
 * builds them (leading newline, indentation, "\n" escapes in config), and
 * replies byte for byte as Dynolog prints them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dyno.h"
#include "frame.h"

/* The body `dyno gputrace --job-id 1234 --pids 0 --log-file /tmp/t.json`
 * sends (dyno 0.6: its request template, with the config's newlines
 * escaped as \n). */
static const char gputrace_body[] =
	"\n{\n"
	"    \"fn\": \"setKinetOnDemandRequest\",\n"
	"    \"config\": \"ACTIVITIES_LOG_FILE=/tmp/t.json\\nPROFILE_START_TIME=0\\n"
	"ACTIVITIES_DURATION_MSECS=500\\nPROFILE_REPORT_INPUT_SHAPES=false\\n"
	"PROFILE_PROFILE_MEMORY=false\\nPROFILE_WITH_STACK=false\\n"
	"PROFILE_WITH_FLOPS=false\\nPROFILE_WITH_MODULES=false\",\n"
	"    \"job_id\": 1234,\n"
	"    \"pids\": [0],\n"
	"    \"process_limit\": 3\n"
	"}";

static void expect_reply(int (*enc)(struct pbuf *), const char *want)
{
	struct pbuf b;
	uint32_t len;

	pbuf_init(&b, 0);
	assert_int_equal(enc(&b), 0);
	memcpy(&len, b.data, 4);
	assert_int_equal(len, strlen(want));
	assert_int_equal(b.len, 4 + strlen(want));
	assert_memory_equal(b.data + 4, want, strlen(want));
	pbuf_deinit(&b);
}

static void test_decode_gputrace(void **state)
{
	struct dyno_request r;
	struct perr err;

	(void)state;
	assert_true(dyno_is_request(gputrace_body, strlen(gputrace_body)));
	assert_int_equal(dyno_decode_request(&r, gputrace_body, strlen(gputrace_body), &err), 0);
	assert_int_equal(r.fn, DYNO_SET_KINETO_ONDEMAND);
	assert_int_equal(r.job_id, 1234);
	assert_int_equal(r.npids, 1);
	assert_int_equal(r.pids[0], 0);
	assert_int_equal(r.process_limit, 3);
	assert_non_null(strstr(r.config, "ACTIVITIES_LOG_FILE=/tmp/t.json\nPROFILE_START_TIME=0\n"));
	dyno_request_deinit(&r);
}

static void test_decode_simple(void **state)
{
	struct dyno_request r;
	const char *s = "{\"fn\":\"getStatus\"}";

	(void)state;
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), NULL), 0);
	assert_int_equal(r.fn, DYNO_GET_STATUS);
	dyno_request_deinit(&r);
	s = "{\"fn\":\"dcgmProfPause\",\"duration_s\":300}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), NULL), 0);
	assert_int_equal(r.fn, DYNO_DCGM_PAUSE);
	assert_int_equal(r.duration_s, 300);
	dyno_request_deinit(&r);
	/* server defaults: job 0, limit 1000 */
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[]}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), NULL), 0);
	assert_int_equal(r.job_id, 0);
	assert_int_equal(r.process_limit, DYNO_PROCESS_LIMIT_DEFAULT);
	assert_int_equal(r.npids, 0);
	dyno_request_deinit(&r);
}

static void test_decode_errors(void **state)
{
	struct dyno_request r;
	struct perr err;
	const char *s;

	(void)state;
	s = "{\"fn\":\"reboot\"}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EOPNOTSUPP);
	assert_non_null(strstr(err.msg, "reboot"));
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"pids\":[0]}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EINVAL);
	assert_non_null(strstr(err.msg, "config"));
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\"}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EINVAL);
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[-1]}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	/* every numeric field within the native protocol's limits (issue 23):
	 * a pid the kernel can never hand out, a process limit, a fraction */
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[4194305]}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "0..4194304"));
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[2147483647]}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[4194304],"
	    "\"process_limit\":1000000}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), 0);
	dyno_request_deinit(&r);
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[0],"
	    "\"process_limit\":1000001}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[0],"
	    "\"job_id\":1e300}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[1.5]}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	s = "{\"fn\":\"dcgmProfPause\",\"duration_s\":1e18}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	s = "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=1\",\"pids\":[0],\"job_id\":\"7\"}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "job_id"));
	s = "{\"fn\":1}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	s = "not json";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
	s = "{\"fn\":\"getStatus\",\"x\":\"\xc3\x28\"}";
	assert_int_equal(dyno_decode_request(&r, s, strlen(s), &err), -EBADMSG);
}

static void test_is_request(void **state)
{
	(void)state;
	assert_true(dyno_is_request("{\"fn\":\"getStatus\"}", 18));
	assert_true(dyno_is_request("\n{\n  \"fn\" : 1}", 14));
	assert_false(dyno_is_request("{\"type\":\"hello\",\"x\":\"fn\"}", 26));
	assert_false(dyno_is_request("{\"a\":{\"fn\":1}}", 14));
	assert_false(dyno_is_request("{\"type\":\"fn\"}", 13));
}

static int enc_status(struct pbuf *b) { return dyno_encode_status(b); }
static int enc_version(struct pbuf *b) { return dyno_encode_version(b, "0.1.0"); }
static int enc_dcgm(struct pbuf *b) { return dyno_encode_dcgm(b, false); }
static int enc_failed(struct pbuf *b) { return dyno_encode_failed(b, "unknown fn \"x\""); }
static int enc_kineto(struct pbuf *b)
{
	static const int32_t matched[] = { 101, 102 }, triggered[] = { 101 };
	struct dyno_kineto_reply rep = { matched, 2, triggered, 1, 1, NULL };

	return dyno_encode_kineto_reply(b, &rep);
}
static int enc_kineto_id(struct pbuf *b)
{
	struct dyno_kineto_reply rep = { NULL, 0, NULL, 0, 0, "t-9" };

	return dyno_encode_kineto_reply(b, &rep);
}

static void test_reply_bytes(void **state)
{
	(void)state;
	expect_reply(enc_status, "{\"status\":1}");
	expect_reply(enc_version, "{\"version\":\"0.1.0\"}");
	expect_reply(enc_dcgm, "{\"status\":false}");
	expect_reply(enc_failed, "{\"error\":\"unknown fn \\\"x\\\"\",\"status\":\"failed\"}");
	expect_reply(enc_kineto, "{\"activityProfilersBusy\":1,\"activityProfilersTriggered\":[101],"
	             "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],"
	             "\"processesMatched\":[101,102]}");
	expect_reply(enc_kineto_id, "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[],"
	             "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],"
	             "\"processesMatched\":[],\"traceId\":\"t-9\"}");
}

static void test_request_roundtrip(void **state)
{
	struct dyno_request in, out;
	struct pbuf b;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.fn = DYNO_SET_KINETO_ONDEMAND;
	in.config = "ACTIVITIES_ITERATIONS=5\nREQUEST_TRACE_ID=7";
	in.pids[0] = 42;
	in.npids = 1;
	in.job_id = 77;
	in.process_limit = 3;
	pbuf_init(&b, 0);
	assert_int_equal(dyno_encode_request(&b, &in), 0);
	assert_int_equal(dyno_decode_request(&out, (char *)b.data + 4, b.len - 4, NULL), 0);
	assert_string_equal(out.config, in.config);
	assert_int_equal(out.pids[0], 42);
	assert_int_equal(out.job_id, 77);
	assert_int_equal(out.process_limit, 3);
	dyno_request_deinit(&out);
	pbuf_deinit(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_gputrace),
		cmocka_unit_test(test_decode_simple),
		cmocka_unit_test(test_decode_errors),
		cmocka_unit_test(test_is_request),
		cmocka_unit_test(test_reply_bytes),
		cmocka_unit_test(test_request_roundtrip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
