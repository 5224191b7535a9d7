/*
 * Unit tests for proto/msg.c and schema.c: every message type round-trips
 * byte for byte; typed fields read back right; every validation rule
 * rejects what it should, with a message that names the field.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "msg.h"
#include "msg-samples.h"

#define NSAMPLES (sizeof(msg_samples) / sizeof(msg_samples[0]))

static int decode(struct msg *m, const char *s, struct perr *err)
{
	return msg_decode(m, s, strlen(s), err);
}

/* Decodes s, expecting failure with code; err must mention `needle`. */
static void expect_reject(const char *s, int code, const char *needle)
{
	struct msg m;
	struct perr err = { "" };
	int r = decode(&m, s, &err);

	if (r != code || (needle && !strstr(err.msg, needle)))
		fail_msg("input %s: got %d \"%s\", want %d with \"%s\"", s, r, err.msg,
		         code, needle ? needle : "");
	msg_deinit(&m);
}

static void test_roundtrip_every_sample(void **state)
{
	bool covered[MSG_TYPE_COUNT] = { false };
	struct perr err;
	struct pbuf b;
	struct msg m;
	size_t i;
	int t;

	(void)state;
	for (i = 0; i < NSAMPLES; i++) {
		const char *s = msg_samples[i];

		if (decode(&m, s, &err) != 0)
			fail_msg("sample %zu did not decode: %s", i, err.msg);
		covered[m.type] = true;
		pbuf_init(&b, 0);
		if (msg_encode(&b, &m, &err) != 0)
			fail_msg("sample %zu did not encode: %s", i, err.msg);
		if (b.len != 4 + strlen(s) || memcmp(b.data + 4, s, strlen(s)) != 0)
			fail_msg("sample %zu re-encoded as %.*s", i, (int)b.len - 4,
			         (const char *)b.data + 4);
		pbuf_deinit(&b);
		msg_deinit(&m);
	}
	for (t = MSG_NONE + 1; t < MSG_TYPE_COUNT; t++)
		if (!covered[t])
			fail_msg("no sample for message type %s", msg_type_name(t));
}

static void test_typed_fields(void **state)
{
	struct msg m;

	(void)state;
	assert_int_equal(decode(&m, msg_samples[5], NULL), 0); /* register */
	assert_int_equal(m.type, MSG_REGISTER);
	assert_int_equal(m.id, 4);
	assert_int_equal(m.u.reg.pid, 1234);
	assert_int_equal(m.u.reg.ppids.n, 2);
	assert_int_equal(m.u.reg.ppids.v[1], 1);
	assert_string_equal(m.u.reg.job_id, "1234");
	assert_int_equal(m.u.reg.rank, 3);
	assert_int_equal(m.u.reg.caps, MSG_CAP_CUPTI | MSG_CAP_NVTX);
	msg_deinit(&m);

	assert_int_equal(decode(&m, msg_samples[8], NULL), 0); /* capture_start */
	assert_int_equal(m.u.capture_start.win.start_at_us, 1795000000123456LL);
	assert_int_equal(m.u.capture_start.win.activities,
	                 MSG_ACT_KERNEL | MSG_ACT_MEMCPY | MSG_ACT_NVTX);
	assert_string_equal(m.u.capture_start.win.iteration_range, "train_step");
	assert_int_equal(m.u.capture_start.win.options,
	                 MSG_OPT_RECORD_SHAPES | MSG_OPT_WITH_MODULES);
	msg_deinit(&m);

	assert_int_equal(decode(&m, msg_samples[23], NULL), 0); /* trace_list_reply */
	assert_int_equal(m.u.trace_list_reply.traces.n, 1);
	assert_int_equal(m.u.trace_list_reply.traces.v[0].files.n, 1);
	assert_string_equal(m.u.trace_list_reply.traces.v[0].files.v[0].host, "h");
	msg_deinit(&m);

	assert_int_equal(decode(&m, msg_samples[34], NULL), 0); /* metrics_reply */
	assert_int_equal(m.u.metrics_reply.samples.n, 1);
	assert_int_equal(m.u.metrics_reply.samples.v[0].values.n, 2);
	assert_string_equal(m.u.metrics_reply.samples.v[0].values.names[0], "gpu0.util");
	assert_true(m.u.metrics_reply.samples.v[0].values.values[0] == 0.5);
	msg_deinit(&m);
}

/* trace_list's additions (issue 26: job filter, pages, the owner and a
 * job per file) decode with their defaults from an older peer's message,
 * and round-trip from a newer one. */
static void test_trace_list_extensions(void **state)
{
	struct msg m, back;
	struct pbuf b;
	struct perr err;

	(void)state;
	assert_int_equal(decode(&m, msg_samples[23], NULL), 0); /* an older daemon's reply */
	assert_int_equal(m.u.trace_list_reply.traces.v[0].uid, -1);
	assert_null(m.u.trace_list_reply.traces.v[0].files.v[0].job_id);
	assert_int_equal(m.u.trace_list_reply.next_offset, 0);
	msg_deinit(&m);
	assert_int_equal(decode(&m, "{\"type\":\"trace_list\",\"id\":4,\"job_id\":\"j 1\","
	                        "\"offset\":7}", NULL), 0);
	assert_string_equal(m.u.trace_ref.job_id, "j 1");
	assert_int_equal(m.u.trace_ref.offset, 7);
	assert_null(m.u.trace_ref.trace_id);
	msg_deinit(&m);
	assert_int_equal(decode(&m, "{\"type\":\"trace_list\",\"id\":4,\"offset\":-1}", &err),
	                 -EBADMSG);
	assert_int_equal(decode(&m, "{\"type\":\"trace_list_reply\",\"id\":9,\"total\":3,"
	                        "\"next_offset\":1,\"traces\":[{\"trace_id\":\"t-1\",\"uid\":65534,"
	                        "\"state\":\"done\",\"files\":[{\"name\":\"a.gz\",\"bytes\":1,"
	                        "\"job_id\":\"ja\"}]}]}", NULL), 0);
	pbuf_init(&b, 0);
	assert_int_equal(msg_encode(&b, &m, &err), 0);
	/* past the frame header: 4 bytes of length */
	assert_int_equal(msg_decode(&back, (const char *)b.data + 4, b.len - 4, &err), 0);
	assert_int_equal(back.u.trace_list_reply.total, 3);
	assert_int_equal(back.u.trace_list_reply.next_offset, 1);
	assert_int_equal(back.u.trace_list_reply.traces.v[0].uid, 65534);
	assert_string_equal(back.u.trace_list_reply.traces.v[0].files.v[0].job_id, "ja");
	assert_int_equal(back.u.trace_list_reply.traces.v[0].files.v[0].rank, -1);
	msg_deinit(&back);
	msg_deinit(&m);
	pbuf_deinit(&b);
}

/* issue 37's additions: trace_list's running, a running summary's procs,
 * trace_cancel_reply's state; absent (an older peer) they read as not
 * asked, none, and "running" (not said); present they round-trip; a bad
 * value is refused with the field's name. */
static void test_running_extensions(void **state)
{
	struct msg m, back;
	struct pbuf b;
	struct perr err;

	(void)state;
	assert_int_equal(decode(&m, "{\"type\":\"trace_list\",\"id\":4}", NULL), 0);
	assert_false(m.u.trace_ref.running);
	msg_deinit(&m);
	assert_int_equal(decode(&m, "{\"type\":\"trace_list\",\"id\":4,\"running\":true}", NULL), 0);
	assert_true(m.u.trace_ref.running);
	msg_deinit(&m);
	assert_int_equal(decode(&m, "{\"type\":\"trace_list\",\"id\":4,\"running\":1}", &err),
	                 -EBADMSG);
	assert_non_null(strstr(err.msg, "running"));
	assert_int_equal(decode(&m, "{\"type\":\"trace_cancel_reply\",\"id\":2,\"cancelled\":0}",
	                        NULL), 0);
	assert_int_equal(m.u.trace_cancel_reply.state, MSG_TRACE_RUNNING); /* not said */
	msg_deinit(&m);
	assert_int_equal(decode(&m, "{\"type\":\"trace_cancel_reply\",\"id\":2,\"cancelled\":3,"
	                        "\"state\":\"cancelled\"}", NULL), 0);
	assert_int_equal(m.u.trace_cancel_reply.state, MSG_TRACE_CANCELLED);
	msg_deinit(&m);
	assert_int_equal(decode(&m, "{\"type\":\"trace_cancel_reply\",\"id\":2,\"cancelled\":3,"
	                        "\"state\":\"gone\"}", &err), -EBADMSG);
	assert_int_equal(decode(&m, "{\"type\":\"trace_list_reply\",\"id\":9,\"traces\":[{"
	                        "\"trace_id\":\"t-1\",\"state\":\"running\",\"files\":[],"
	                        "\"procs\":[{\"pid\":7,\"state\":\"capturing\",\"kind\":\"kineto\","
	                        "\"rank\":2}]}]}", NULL), 0);
	pbuf_init(&b, 0);
	assert_int_equal(msg_encode(&b, &m, &err), 0);
	assert_int_equal(msg_decode(&back, (const char *)b.data + 4, b.len - 4, &err), 0);
	assert_int_equal(back.u.trace_list_reply.traces.v[0].procs.n, 1);
	assert_int_equal(back.u.trace_list_reply.traces.v[0].procs.v[0].pid, 7);
	assert_int_equal(back.u.trace_list_reply.traces.v[0].procs.v[0].state, MSG_TS_CAPTURING);
	assert_int_equal(back.u.trace_list_reply.traces.v[0].procs.v[0].kind, MSG_KIND_KINETO);
	assert_int_equal(back.u.trace_list_reply.traces.v[0].procs.v[0].rank, 2);
	msg_deinit(&back);
	msg_deinit(&m);
	pbuf_deinit(&b);
	/* the options as gprofctl's flags name them, for the agent's notes;
	 * a short buffer is cut, never overrun */
	{
		char buf[64], small[8];

		assert_int_equal(msg_options_flags(MSG_OPT_WITH_STACK | MSG_OPT_OPERATORS, buf,
		                                   sizeof(buf)), strlen("--with-stack, --operators"));
		assert_string_equal(buf, "--with-stack, --operators");
		assert_int_equal(msg_options_flags(0, buf, sizeof(buf)), 0);
		assert_string_equal(buf, "");
		assert_true(msg_options_flags(MSG_OPT_ALL, small, sizeof(small)) < sizeof(small));
		assert_int_equal(strlen(small), sizeof(small) - 1);
	}
	/* a stored trace from an older daemon: no procs */
	assert_int_equal(decode(&m, msg_samples[23], NULL), 0);
	assert_int_equal(m.u.trace_list_reply.traces.v[0].procs.n, 0);
	msg_deinit(&m);
}

static void test_defaults(void **state)
{
	struct msg m;

	(void)state;
	assert_int_equal(decode(&m, "{\"type\":\"register\",\"id\":1,\"pid\":5}", NULL), 0);
	assert_int_equal(m.u.reg.rank, -1);
	assert_int_equal(m.u.reg.world_size, -1);
	assert_null(m.u.reg.job_id);
	assert_int_equal(m.u.reg.gpus.n, 0);
	msg_deinit(&m);

	assert_int_equal(decode(&m, "{\"type\":\"trace_start\",\"id\":1,\"all\":true,"
	                        "\"iterations\":5}", NULL), 0);
	assert_int_equal(m.u.trace_start.win.activities, MSG_ACT_DEFAULT);
	assert_int_equal(m.u.trace_start.process_limit, 1000);
	assert_int_equal(m.u.trace_start.win.options, 0); /* an older gprofctl's request */
	msg_deinit(&m);

	/* msg_init sets the same defaults for builders */
	msg_init(&m, MSG_PROCESS_LIST, 3);
	assert_int_equal(m.u.process_list.pid, -1);
	assert_int_equal(m.u.process_list.uid, -1);
	struct msg_trace_proc p;
	msg_elem_init(MSG_ELEM_TRACE_PROC, &p);
	assert_int_equal(p.rank, -1);
	assert_int_equal(p.kind, MSG_KIND_AGENT);
}

static void test_unknown_keys_ignored(void **state)
{
	struct msg m;

	(void)state;
	assert_int_equal(decode(&m, "{\"type\":\"heartbeat\",\"steps\":1,"
	                        "\"future\":{\"x\":[1,2]}}", NULL), 0);
	assert_int_equal(m.u.heartbeat.steps, 1);
	msg_deinit(&m);
}

static void test_rejects_structure(void **state)
{
	(void)state;
	expect_reject("", -EBADMSG, "not valid JSON");
	expect_reject("[1]", -EBADMSG, "JSON object");
	expect_reject("{\"type\":\"heartbeat\"} x", -EBADMSG, "trailing");
	expect_reject("{\"type\":\"heartbeat\"", -EBADMSG, "not valid JSON");
	expect_reject("{\"id\":1}", -EBADMSG, "\"type\"");
	expect_reject("{\"type\":7}", -EBADMSG, "\"type\"");
	expect_reject("{\"type\":\"heartbeat\",\"type\":\"heartbeat\"}", -EBADMSG, "\"type\"");
	expect_reject("{\"type\":\"heartbeat\",\"steps\":1,\"steps\":2}", -EBADMSG, "steps: given twice");
	expect_reject("{\"type\":\"heartbeat\",\"x\":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}",
	              -EBADMSG, "nested");
	expect_reject("{\"type\":\"heartbeat\",\"x\":\"\xff\"}", -EBADMSG, "UTF-8");
	expect_reject("{\"type\":\"register\",\"id\":1,\"pid\":5,\"name\":\"a\\u0000b\"}",
	              -EBADMSG, "NUL");
}

static void test_unknown_type_keeps_id(void **state)
{
	struct perr err;
	struct msg m;

	(void)state;
	assert_int_equal(decode(&m, "{\"type\":\"teleport\",\"id\":42}", &err),
	                 -EPROTONOSUPPORT);
	assert_int_equal(m.type, MSG_NONE);
	assert_int_equal(m.id, 42);
	assert_non_null(strstr(err.msg, "teleport"));
	msg_deinit(&m);
}

static void test_rejects_fields(void **state)
{
	(void)state;
	/* requests need ids */
	expect_reject("{\"type\":\"daemon_status\"}", -EBADMSG, "needs an \"id\"");
	expect_reject("{\"type\":\"daemon_status\",\"id\":-1}", -EBADMSG, "id");
	expect_reject("{\"type\":\"daemon_status\",\"id\":1.5}", -EBADMSG, "integer");
	/* required */
	expect_reject("{\"type\":\"register\",\"id\":1}", -EBADMSG, "pid: required");
	/* wrong types */
	expect_reject("{\"type\":\"register\",\"id\":1,\"pid\":\"5\"}", -EBADMSG,
	              "pid: expected an integer, got a string");
	expect_reject("{\"type\":\"trace_status\",\"id\":1,\"trace_id\":\"a\",\"follow\":1}",
	              -EBADMSG, "follow: expected true or false");
	expect_reject("{\"type\":\"register\",\"id\":1,\"pid\":5,\"gpus\":[0,\"1\"]}",
	              -EBADMSG, "gpus[1]");
	/* ranges */
	expect_reject("{\"type\":\"register\",\"id\":1,\"pid\":0}", -EBADMSG, "outside 1..");
	expect_reject("{\"type\":\"register\",\"id\":1,\"pid\":5,\"rank\":-2}", -EBADMSG, "rank");
	expect_reject("{\"type\":\"heartbeat\",\"steps\":9007199254740992}", -EBADMSG, "2^53");
	expect_reject("{\"type\":\"heartbeat\",\"steps\":1e400}", -EBADMSG, "integer");
	/* strings: length and characters */
	expect_reject("{\"type\":\"trace_cancel\",\"id\":1,\"trace_id\":\"\"}", -EBADMSG, "empty");
	expect_reject("{\"type\":\"trace_cancel\",\"id\":1,\"trace_id\":\"../etc\"}", -EBADMSG,
	              "not allowed");
	expect_reject("{\"type\":\"trace_cancel\",\"id\":1,\"trace_id\":\"a/b\"}", -EBADMSG,
	              "not allowed");
	expect_reject("{\"type\":\"trace_cancel\",\"id\":1,\"trace_id\":"
	              "\"0123456789012345678901234567890123456789012345678901234567890123456789\"}",
	              -EBADMSG, "longer than the limit of 64");
	expect_reject("{\"type\":\"register\",\"id\":1,\"pid\":5,\"host\":\"a\\nb\"}", -EBADMSG,
	              "control character");
	expect_reject("{\"type\":\"auth\",\"id\":1,\"proof\":\"XYZ\"}", -EBADMSG, "hex");
	/* enums and flags */
	expect_reject("{\"type\":\"hello\",\"id\":1,\"proto_min\":1,\"proto_max\":1,"
	              "\"role\":\"root\"}", -EBADMSG, "unknown value");
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"all\":true,\"iterations\":1,"
	              "\"activities\":[\"kernel\",\"magic\"]}", -EBADMSG, "unknown name");
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"all\":true,\"iterations\":1,"
	              "\"options\":[\"with_stack\",\"with_everything\"]}", -EBADMSG,
	              "options: unknown name \"with_everything\"");
	/* arrays */
	char big[8192];
	int n = snprintf(big, sizeof(big), "{\"type\":\"register\",\"id\":1,\"pid\":5,\"gpus\":[");
	for (int i = 0; i < 65; i++)
		n += snprintf(big + n, sizeof(big) - (size_t)n, "%s%d", i ? "," : "", i);
	snprintf(big + n, sizeof(big) - (size_t)n, "]}");
	expect_reject(big, -EBADMSG, "more than 64");
	/* nested objects report their path */
	expect_reject("{\"type\":\"trace_start_reply\",\"id\":1,\"trace_id\":\"t\","
	              "\"procs\":[{\"pid\":1,\"state\":\"done\"},{\"pid\":2}]}", -EBADMSG,
	              "procs[1].state: required");
}

static void test_cross_field_rules(void **state)
{
	(void)state;
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"all\":true}", -EBADMSG,
	              "exactly one of iterations and duration_ms");
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"all\":true,\"iterations\":1,"
	              "\"duration_ms\":5}", -EBADMSG, "exactly one");
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"iterations\":1}", -EBADMSG,
	              "name a target");
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"all\":true,\"job_id\":\"1\","
	              "\"iterations\":1}", -EBADMSG, "excludes");
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"all\":true,\"duration_ms\":5,"
	              "\"iteration_roundup\":2}", -EBADMSG, "iteration_roundup needs");
	expect_reject("{\"type\":\"trace_start\",\"id\":1,\"all\":true,\"iterations\":1,"
	              "\"activities\":[]}", -EBADMSG, "activities is empty");
	expect_reject("{\"type\":\"hello\",\"id\":1,\"proto_min\":3,\"proto_max\":2,"
	              "\"role\":\"agent\"}", -EBADMSG, "above proto_max");
	expect_reject("{\"type\":\"hello_reply\",\"id\":1,\"proto\":1,\"software\":\"s\","
	              "\"host\":\"h\",\"auth\":\"hmac-sha256\"}", -EBADMSG, "needs a nonce");
}

static void test_encode_validates(void **state)
{
	char longname[300];
	struct perr err;
	struct pbuf b;
	struct msg m;
	int64_t gpus[1] = { 5000 };
	const char *names[1] = { "x" };
	double vals[1] = { NAN };

	(void)state;
	pbuf_init(&b, 0);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	assert_int_equal(msg_encode(&b, &m, &err), -EINVAL); /* request without id */

	msg_init(&m, MSG_REGISTER, 1);
	assert_int_equal(msg_encode(&b, &m, &err), -EINVAL); /* pid 0 is out of range */
	assert_non_null(strstr(err.msg, "pid"));
	m.u.reg.pid = 10;
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	m.u.reg.name = longname;
	assert_int_equal(msg_encode(&b, &m, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "name"));
	m.u.reg.name = "python3";
	m.u.reg.gpus.v = gpus;
	m.u.reg.gpus.n = 1;
	assert_int_equal(msg_encode(&b, &m, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "gpus[0]"));
	gpus[0] = 1;
	assert_int_equal(msg_encode(&b, &m, &err), 0);

	msg_init(&m, MSG_ERROR, 1);
	m.u.error.code = MSG_E_LIMIT;
	assert_int_equal(msg_encode(&b, &m, &err), -EINVAL); /* message missing */

	msg_init(&m, MSG_METRICS_REPLY, 1);
	m.u.metrics_reply.host = "h";
	struct msg_sample s;
	msg_elem_init(MSG_ELEM_SAMPLE, &s);
	s.ts_us = 1;
	s.values.names = names;
	s.values.values = vals;
	s.values.n = 1;
	m.u.metrics_reply.samples.v = &s;
	m.u.metrics_reply.samples.n = 1;
	assert_int_equal(msg_encode(&b, &m, &err), -EINVAL); /* NaN */
	pbuf_deinit(&b);
}

static void test_large_integers_exact(void **state)
{
	struct pbuf b;
	struct msg m, back;

	(void)state;
	pbuf_init(&b, 0);
	msg_init(&m, MSG_HEARTBEAT, 0);
	m.u.heartbeat.steps = MSG_INT_MAX;
	m.u.heartbeat.last_step_us = 1795000000123457LL;
	assert_int_equal(msg_encode(&b, &m, NULL), 0);
	assert_non_null(memmem(b.data, b.len, "9007199254740991", 16));
	assert_null(memmem(b.data, b.len, "e+", 2));
	assert_int_equal(msg_decode(&back, (char *)b.data + 4, b.len - 4, NULL), 0);
	assert_int_equal(back.u.heartbeat.steps, MSG_INT_MAX);
	assert_int_equal(back.u.heartbeat.last_step_us, 1795000000123457LL);
	msg_deinit(&back);
	pbuf_deinit(&b);
}

static void test_encode_error(void **state)
{
	struct pbuf b;
	struct msg m;

	(void)state;
	pbuf_init(&b, 0);
	assert_int_equal(msg_encode_error(&b, 9, MSG_E_FORBIDDEN, "uid %d may not trace pid %d",
	                                  1000, 1), 0);
	assert_int_equal(msg_decode(&m, (char *)b.data + 4, b.len - 4, NULL), 0);
	assert_int_equal(m.type, MSG_ERROR);
	assert_int_equal(m.id, 9);
	assert_int_equal(m.u.error.code, MSG_E_FORBIDDEN);
	assert_string_equal(m.u.error.message, "uid 1000 may not trace pid 1");
	assert_string_equal(msg_errcode_name(m.u.error.code), "forbidden");
	msg_deinit(&m);
	pbuf_deinit(&b);
}

static void test_activities(void **state)
{
	struct perr err;
	char buf[128];

	(void)state;
	assert_int_equal(msg_activities_parse("kernel,memcpy", &err),
	                 MSG_ACT_KERNEL | MSG_ACT_MEMCPY);
	assert_int_equal(msg_activities_parse("kernel,warp", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "warp"));
	assert_int_equal(msg_activities_parse("", &err), -EINVAL);
	assert_int_equal(msg_activities_parse("kernel,,memcpy", &err), -EINVAL);
	msg_activities_format(MSG_ACT_SYNC | MSG_ACT_KERNEL, buf, sizeof(buf));
	assert_string_equal(buf, "kernel,sync");
}

static void test_trace_id(void **state)
{
	char a[64], b[64];
	struct msg m;
	char json[160];

	(void)state;
	msg_trace_id_new(a, sizeof(a));
	msg_trace_id_new(b, sizeof(b));
	assert_int_equal(strlen(a), 23);          /* 20261122T093000Z-3f9a1c */
	assert_int_equal(a[8], 'T');
	assert_int_equal(a[15], 'Z');
	assert_string_not_equal(a, b);            /* 24 random bits each */
	/* a valid token wherever the protocol takes a trace id */
	snprintf(json, sizeof(json), "{\"type\":\"trace_cancel\",\"id\":1,\"trace_id\":\"%s\"}", a);
	assert_int_equal(msg_decode(&m, json, strlen(json), NULL), 0);
	msg_deinit(&m);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(msg_type_name(MSG_TRACE_START), "trace_start");
	assert_int_equal(msg_type_from_name("trace_start"), MSG_TRACE_START);
	assert_int_equal(msg_type_from_name("nope"), -1);
	assert_string_equal(msg_type_name(MSG_TYPE_COUNT), "?");
	assert_string_equal(msg_tstate_name(MSG_TS_UPLOADING), "uploading");
	assert_string_equal(msg_trace_state_name(MSG_TRACE_PARTIAL), "partial");
	assert_string_equal(msg_kind_name(MSG_KIND_KINETO), "kineto");
	assert_true(msg_type_is_request(MSG_TRACE_START));
	assert_false(msg_type_is_request(MSG_HEARTBEAT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_every_sample),
		cmocka_unit_test(test_typed_fields),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_trace_list_extensions),
		cmocka_unit_test(test_running_extensions),
		cmocka_unit_test(test_unknown_keys_ignored),
		cmocka_unit_test(test_rejects_structure),
		cmocka_unit_test(test_unknown_type_keeps_id),
		cmocka_unit_test(test_rejects_fields),
		cmocka_unit_test(test_cross_field_rules),
		cmocka_unit_test(test_encode_validates),
		cmocka_unit_test(test_large_integers_exact),
		cmocka_unit_test(test_encode_error),
		cmocka_unit_test(test_activities),
		cmocka_unit_test(test_trace_id),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
