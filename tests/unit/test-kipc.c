/*
 * Unit tests for proto/kipc.c: the datagram bytes Kineto sends (checked
 * against the 80-byte "req" observed from PyTorch 2.11), replies, and the
 * socket-address rules whose mistakes make nothing match.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kipc.h"

/* A "req" as PyTorch 2.11 sent it: size 40, type 3, 6 pids, job 1234. */
static size_t observed_req(uint8_t *buf)
{
	uint64_t size = 40;
	int32_t type = 3, n = 6, pids[6] = { 5000, 4999, 4000, 300, 20, 1 };
	int64_t job = 1234;

	memset(buf, 0, 80);
	memcpy(buf, &size, 8);
	memcpy(buf + 8, "req", 3);
	memcpy(buf + 40, &type, 4);
	memcpy(buf + 44, &n, 4);
	memcpy(buf + 48, &job, 8);
	memcpy(buf + 56, pids, 24);
	return 80;
}

static void test_decode_observed(void **state)
{
	struct kipc_msg m;
	uint8_t buf[80];

	(void)state;
	assert_int_equal(kipc_decode(&m, buf, observed_req(buf), NULL), 0);
	assert_int_equal(m.kind, KIPC_REQ);
	assert_int_equal(m.u.req.type, KIPC_REQ_EVENTS | KIPC_REQ_ACTIVITIES);
	assert_int_equal(m.u.req.n, 6);
	assert_int_equal(m.u.req.job_id, 1234);
	assert_int_equal(m.u.req.pids[0], 5000);
	assert_int_equal(m.u.req.pids[5], 1);
}

static void test_encode_matches_observed(void **state)
{
	struct kipc_req r = { 3, 6, 1234, { 5000, 4999, 4000, 300, 20, 1 } };
	uint8_t want[80], got[128];

	(void)state;
	observed_req(want);
	assert_int_equal(kipc_encode_req(got, sizeof(got), &r), 80);
	assert_memory_equal(got, want, 80);
	assert_int_equal(kipc_encode_req(got, 79, &r), -ENOBUFS);
}

static void test_ctxt(void **state)
{
	struct kipc_ctxt c = { 2, 777, 99 };
	struct kipc_msg m;
	uint8_t buf[64];
	enum kipc_kind kind;
	const uint8_t *pl;
	size_t plen;
	int32_t count;
	int n;

	(void)state;
	n = kipc_encode_ctxt(buf, sizeof(buf), &c);
	assert_int_equal(n, 56);
	assert_int_equal(kipc_decode(&m, buf, (size_t)n, NULL), 0);
	assert_int_equal(m.kind, KIPC_CTXT);
	assert_int_equal(m.u.ctxt.gpu, 2);
	assert_int_equal(m.u.ctxt.pid, 777);
	assert_int_equal(m.u.ctxt.job_id, 99);

	n = kipc_encode_ctxt_reply(buf, sizeof(buf), 8);
	assert_int_equal(n, 44);
	assert_int_equal(kipc_decode_header(buf, (size_t)n, &kind, &pl, &plen, NULL), 0);
	assert_int_equal(kind, KIPC_CTXT);
	assert_int_equal(plen, 4);
	memcpy(&count, pl, 4);
	assert_int_equal(count, 8);
}

static void test_config_reply(void **state)
{
	const char *cfg = "ACTIVITIES_ITERATIONS=5\nREQUEST_TRACE_ID=7";
	uint8_t buf[256];
	enum kipc_kind kind;
	const uint8_t *pl;
	size_t plen;
	uint64_t size;
	int n;

	(void)state;
	n = kipc_encode_config_reply(buf, sizeof(buf), cfg, strlen(cfg));
	assert_int_equal(n, 40 + (int)strlen(cfg));
	memcpy(&size, buf, 8);
	assert_int_equal(size, strlen(cfg));
	assert_string_equal((char *)buf + 8, "req");
	assert_int_equal(kipc_decode_header(buf, (size_t)n, &kind, &pl, &plen, NULL), 0);
	assert_int_equal(kind, KIPC_REQ);
	assert_memory_equal(pl, cfg, strlen(cfg)); /* no NUL terminator sent */
	/* nothing to do: a header and no payload */
	assert_int_equal(kipc_encode_config_reply(buf, sizeof(buf), NULL, 0), 40);
	memcpy(&size, buf, 8);
	assert_int_equal(size, 0);
}

static void test_malformed(void **state)
{
	struct kipc_msg m;
	struct perr err;
	uint8_t buf[128];
	size_t n = observed_req(buf);
	int32_t v;
	uint64_t size;

	(void)state;
	assert_int_equal(kipc_decode(&m, buf, 39, &err), -EBADMSG); /* short header */
	assert_int_equal(kipc_decode(&m, buf, n - 1, &err), -EBADMSG); /* truncated */
	assert_non_null(strstr(err.msg, "header says 40"));

	observed_req(buf);
	memcpy(buf + 8, "wat", 3);
	assert_int_equal(kipc_decode(&m, buf, n, &err), -EPROTONOSUPPORT);
	assert_non_null(strstr(err.msg, "wat"));

	observed_req(buf);
	memcpy(buf + 8, "request", 7); /* prefix match, as Kineto compares */
	assert_int_equal(kipc_decode(&m, buf, n, NULL), 0);

	observed_req(buf);
	v = 7; /* n = 7 but only 6 pids of payload */
	memcpy(buf + 44, &v, 4);
	assert_int_equal(kipc_decode(&m, buf, n, &err), -EBADMSG);

	observed_req(buf);
	v = 0;
	memcpy(buf + 44, &v, 4);
	size = 16;
	memcpy(buf, &size, 8);
	assert_int_equal(kipc_decode(&m, buf, 56, &err), -EBADMSG); /* no pids */

	observed_req(buf);
	v = 9; /* not a mask of 1|2 */
	memcpy(buf + 40, &v, 4);
	assert_int_equal(kipc_decode(&m, buf, n, &err), -EBADMSG);

	observed_req(buf);
	v = -5;
	memcpy(buf + 56, &v, 4);
	assert_int_equal(kipc_decode(&m, buf, n, &err), -EBADMSG);

	/* ctxt with the wrong payload size */
	struct kipc_ctxt c = { 0, 1, 0 };
	int k = kipc_encode_ctxt(buf, sizeof(buf), &c);
	size = 15;
	memcpy(buf, &size, 8);
	assert_int_equal(kipc_decode(&m, buf, (size_t)k - 1, &err), -EBADMSG);
}

static void test_heartbeat_type0(void **state)
{
	struct kipc_req r = { 0, 1, 0, { 42 } };
	struct kipc_msg m;
	uint8_t buf[64];

	(void)state;
	assert_int_equal(kipc_encode_req(buf, sizeof(buf), &r), 60);
	assert_int_equal(kipc_decode(&m, buf, 60, NULL), 0);
	assert_int_equal(m.u.req.type, 0);
}

static void test_addresses(void **state)
{
	struct sockaddr_un sa;
	socklen_t len;
	char longname[200];

	(void)state;
	assert_int_equal(kipc_addr_abstract(&sa, &len, "dynolog"), 0);
	assert_int_equal(len, sizeof(sa_family_t) + 7 + 2);
	assert_int_equal(sa.sun_path[0], 0);
	assert_memory_equal(sa.sun_path + 1, "dynolog", 7);
	assert_int_equal(sa.sun_path[8], 0);

	assert_int_equal(kipc_addr_dir(&sa, &len, "/run/kineto", "dynolog"), 0);
	assert_string_equal(sa.sun_path, "/run/kineto/dynolog");
	assert_int_equal(len, sizeof(sa_family_t) + strlen("/run/kineto/dynolog") + 1);

	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	assert_int_equal(kipc_addr_abstract(&sa, &len, longname), -ENAMETOOLONG);
	assert_int_equal(kipc_addr_dir(&sa, &len, "/tmp", longname), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_observed),
		cmocka_unit_test(test_encode_matches_observed),
		cmocka_unit_test(test_ctxt),
		cmocka_unit_test(test_config_reply),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_heartbeat_type0),
		cmocka_unit_test(test_addresses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
