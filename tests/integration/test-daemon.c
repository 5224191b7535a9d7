/*
 * Integration tests: the real gprofd, on a private socket and port in a
 * temporary directory, driven by clients built on proto/ and by forked
 * fake agents (harness.c). Every test starts its own daemon and checks that
 * it stops cleanly (exit 0: no handle left open).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "dyno.h"
#include "harness.h"

static struct td D;

static int setup(void **state)
{
	(void)state;
	return td_start(&D, NULL, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return td_finish(&D);
}

/* ---- session ---- */

static void test_status_needs_hello(void **state)
{
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(tc_connect_unix(&c, D.sock), 0);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_expect_error(&c, &m, MSG_E_BAD_REQUEST, "hello first");
	assert_int_equal(tc_hello(&c, MSG_ROLE_CTL), 0);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
	assert_string_equal(r.u.daemon_status_reply.version, GPROF_VERSION);
	assert_int_equal(r.u.daemon_status_reply.pid, D.pid);
	assert_int_equal(r.u.daemon_status_reply.processes, 0);
	msg_deinit(&r);
	tc_close(&c);
}

static void test_version_mismatch(void **state)
{
	struct tc c;
	struct msg m;

	(void)state;
	assert_int_equal(tc_connect_unix(&c, D.sock), 0);
	msg_init(&m, MSG_HELLO, 0);
	m.u.hello.proto_min = 7;
	m.u.hello.proto_max = 9;
	m.u.hello.role = MSG_ROLE_CTL;
	tc_expect_error(&c, &m, MSG_E_VERSION, "1..1");
	assert_true(tc_closed(&c));
	tc_close(&c);
}

static void test_role_permissions(void **state)
{
	struct tc c;
	struct msg m;

	(void)state;
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_REGISTER, 0);
	m.u.reg.pid = getpid();
	tc_expect_error(&c, &m, MSG_E_FORBIDDEN, "ctl may not send register");
	tc_close(&c);
	assert_int_equal(tc_connect_unix(&c, D.sock), 0);
	assert_int_equal(tc_hello(&c, MSG_ROLE_AGENT), 0);
	m = tc_trace_req("1", 1);
	tc_expect_error(&c, &m, MSG_E_FORBIDDEN, "agent may not send trace_start");
	tc_close(&c);
}

/* ---- malformed input ---- */

static void test_malformed_frames(void **state)
{
	static const uint8_t zero[4] = { 0, 0, 0, 0 };
	uint8_t huge[4] = { 0x01, 0x00, 0x10, 0x00 }; /* 1 MiB + 1 */
	struct tc c, ok;
	struct msg m, r;

	(void)state;
	/* bad JSON keeps the connection; the next request still works */
	tc_ctl(&c, D.sock);
	assert_int_equal(tc_send_raw(&c, "\x08\0\0\0not json", 12), 0);
	assert_int_equal(tc_recv(&c, &r), 0);
	assert_int_equal(r.type, MSG_ERROR);
	assert_int_equal(r.u.error.code, MSG_E_BAD_REQUEST);
	msg_deinit(&r);
	assert_int_equal(tc_send_raw(&c, "\x1c\0\0\0{\"type\":\"warp_drive\",\"id\":5}", 32), 0);
	assert_int_equal(tc_recv(&c, &r), 0);
	assert_int_equal(r.u.error.code, MSG_E_UNSUPPORTED);
	assert_int_equal(r.id, 5);
	msg_deinit(&r);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
	assert_int_equal(r.u.daemon_status_reply.counters.n > 0, 1);
	msg_deinit(&r);
	tc_close(&c);

	/* a zero length and an oversized length cost the connection, after an error */
	tc_ctl(&c, D.sock);
	assert_int_equal(tc_send_raw(&c, zero, 4), 0);
	assert_int_equal(tc_recv(&c, &r), 0);
	assert_int_equal(r.type, MSG_ERROR);
	msg_deinit(&r);
	assert_true(tc_closed(&c));
	tc_close(&c);
	tc_ctl(&c, D.sock);
	assert_int_equal(tc_send_raw(&c, huge, 4), 0);
	assert_int_equal(tc_recv(&c, &r), 0);
	assert_int_equal(r.u.error.code, MSG_E_LIMIT);
	assert_non_null(strstr(r.u.error.message, "exceeds the limit"));
	msg_deinit(&r);
	assert_true(tc_closed(&c));
	tc_close(&c);

	/* the daemon is unharmed */
	tc_ctl(&ok, D.sock);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&ok, &m, &r);
	assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
	msg_deinit(&r);
	tc_close(&ok);
}

/* ---- registry and matching ---- */

static void test_register_and_list(void **state)
{
	struct agent a, b;
	struct tc c;
	struct msg m, r;
	size_t i;

	(void)state;
	assert_int_equal(agent_spawn(&a, D.sock, "1234", 0, 1000), 0);
	assert_int_equal(agent_spawn(&b, D.sock, "999", 3, 1000), 0);
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_PROCESS_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_PROCESS_LIST_REPLY);
	assert_int_equal(r.u.process_list_reply.procs.n, 2);
	for (i = 0; i < 2; i++) {
		const struct msg_proc_info *p = &r.u.process_list_reply.procs.v[i];

		assert_true(p->pid == a.pid || p->pid == b.pid);
		assert_int_equal(p->uid, getuid());
		/* ancestors come from /proc: the test process is the parent */
		assert_true(p->ppids.n >= 1);
		assert_int_equal(p->ppids.v[0], getpid());
		if (p->pid == b.pid) {
			assert_string_equal(p->job_id, "999");
			assert_int_equal(p->rank, 3);
		}
	}
	msg_deinit(&r);
	msg_init(&m, MSG_PROCESS_LIST, 0);
	m.u.process_list.job_id = "1234";
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.process_list_reply.procs.n, 1);
	assert_int_equal(r.u.process_list_reply.procs.v[0].pid, a.pid);
	msg_deinit(&r);

	/* disconnect removes the process */
	agent_stop(&b);
	assert_true(td_wait_log(&D, "closed: peer closed", NULL));
	msg_init(&m, MSG_PROCESS_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.process_list_reply.procs.n, 1);
	msg_deinit(&r);
	agent_stop(&a);
	tc_close(&c);
}

static void test_nothing_matched_hint(void **state)
{
	struct agent a;
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(agent_spawn(&a, D.sock, "1234", 0, 1000), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("77", 5);
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_START_REPLY);
	assert_int_equal(r.u.trace_start_reply.procs.n, 0);
	assert_non_null(r.u.trace_start_reply.hint);
	{
		char want[64];

		/* each process the caller may trace, with its rank and kind */
		snprintf(want, sizeof(want), "job 1234: 1 process (pid %d rank 0 agent)", (int)a.pid);
		assert_non_null(strstr(r.u.trace_start_reply.hint, want));
	}
	msg_deinit(&r);
	agent_stop(&a);
	tc_close(&c);
}

static void test_matching_and_limit(void **state)
{
	struct agent a[4];
	struct tc c;
	struct msg m, r;
	int64_t pids[2];
	int i;

	(void)state;
	for (i = 0; i < 3; i++)
		assert_int_equal(agent_spawn(&a[i], D.sock, "42", i, 100), 0);
	assert_int_equal(agent_spawn(&a[3], D.sock, "43", 0, 100), 0);
	tc_ctl(&c, D.sock);
	/* by job */
	m = tc_trace_req("42", 1);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 3);
	msg_deinit(&r);
	assert_true(td_wait_log(&D, "3 of 3 processes delivered", NULL));
	/* by pid */
	m = tc_trace_req(NULL, 1);
	pids[0] = a[1].pid;
	m.u.trace_start.pids.v = pids;
	m.u.trace_start.pids.n = 1;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 1);
	assert_int_equal(r.u.trace_start_reply.procs.v[0].pid, a[1].pid);
	msg_deinit(&r);
	/* by an ancestor pid (this process), with a process limit; the oldest
	 * registrations are chosen first */
	m = tc_trace_req(NULL, 1);
	pids[0] = getpid();
	m.u.trace_start.pids.v = pids;
	m.u.trace_start.pids.n = 1;
	m.u.trace_start.process_limit = 2;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 2);
	assert_int_equal(r.u.trace_start_reply.procs.v[0].pid, a[0].pid);
	assert_int_equal(r.u.trace_start_reply.procs.v[1].pid, a[1].pid);
	msg_deinit(&r);
	/* job and pids together: both must match */
	m = tc_trace_req("43", 1);
	pids[0] = a[0].pid; /* of job 42 */
	m.u.trace_start.pids.v = pids;
	m.u.trace_start.pids.n = 1;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 0);
	msg_deinit(&r);
	m = tc_trace_req("43", 1);
	pids[0] = getpid(); /* the ancestor of all four */
	m.u.trace_start.pids.v = pids;
	m.u.trace_start.pids.n = 1;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 1);
	assert_int_equal(r.u.trace_start_reply.procs.v[0].pid, a[3].pid);
	msg_deinit(&r);
	/* a client-chosen trace id is used, and refused when taken */
	m = tc_trace_req("42", 1);
	m.u.trace_start.trace_id = "fleet-trace-1";
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_START_REPLY);
	assert_string_equal(r.u.trace_start_reply.trace_id, "fleet-trace-1");
	msg_deinit(&r);
	m = tc_trace_req("42", 1);
	m.u.trace_start.trace_id = "fleet-trace-1";
	tc_expect_error(&c, &m, MSG_E_BUSY, "already used");
	for (i = 0; i < 4; i++)
		agent_stop(&a[i]);
	tc_close(&c);
}

/* ---- a whole trace: start, follow, upload, list, download, delete ---- */

static void download(struct tc *c, const char *trace_id, const char *file, size_t want)
{
	struct msg m, r;
	struct rframe *f;
	uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
	size_t got = 0;

	msg_init(&m, MSG_TRACE_DOWNLOAD, 0);
	m.u.trace_download.trace_id = trace_id;
	m.u.trace_download.file = file;
	tc_call(c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_DOWNLOAD_REPLY);
	assert_int_equal(r.u.trace_download_reply.bytes, want);
	msg_deinit(&r);
	for (;;) {
		f = tc_recv_frame(c, TD_TIMEOUT_MS);
		assert_non_null(f);
		if (f->kind == FRAME_JSON) {
			assert_int_equal(msg_decode(&r, (char *)f->data, f->len, NULL), 0);
			free(f);
			assert_int_equal(r.type, MSG_DOWNLOAD_END);
			assert_int_equal(r.u.download_end.bytes, want);
			assert_int_equal(r.u.download_end.crc32, crc);
			msg_deinit(&r);
			break;
		}
		assert_int_equal(f->offset, got);
		for (size_t i = 0; i < f->len; i++)
			if (f->data[i] != agent_byte(got + i))
				fail_msg("byte %zu differs", got + i);
		crc = (uint32_t)crc32(crc, f->data, (uInt)f->len);
		got += f->len;
		free(f);
	}
	assert_int_equal(got, want);
}

static void test_full_trace(void **state)
{
	const size_t sizes[2] = { 3u << 20, 12345 }; /* several chunks; one */
	char trace_id[64], files[2][160];
	struct agent a[2];
	struct tc c;
	struct msg m, r;
	struct stat st;
	char path[600];
	int i, progress = 0;

	(void)state;
	for (i = 0; i < 2; i++)
		assert_int_equal(agent_spawn(&a[i], D.sock, "7", i, sizes[i]), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("7", 5);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_START_REPLY);
	assert_int_equal(r.u.trace_start_reply.procs.n, 2);
	snprintf(trace_id, sizeof(trace_id), "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	/* follow until the trace ends */
	for (;;) {
		assert_int_equal(tc_recv(&c, &r), 0);
		assert_int_equal(r.type, MSG_TRACE_PROGRESS);
		assert_int_equal(r.id, m.id);
		progress++;
		if (r.u.trace_info.state != MSG_TRACE_RUNNING)
			break;
		msg_deinit(&r);
	}
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	assert_true(progress >= 3); /* capturing, writing, uploading, done ... */
	for (i = 0; i < 2; i++) {
		const struct msg_trace_proc *p = &r.u.trace_info.procs.v[i];
		int k = p->pid == a[0].pid ? 0 : 1;

		assert_int_equal(p->state, MSG_TS_DONE);
		assert_int_equal(p->bytes, sizes[k]);
		assert_int_equal(p->events, 42);
		assert_non_null(p->file);
		/* <host>_<pid>_rank<R>.<unix-ns>.pt.trace.json.gz (rank known) */
		char want[48];
		assert_true(p->rank >= 0);
		snprintf(want, sizeof(want), "_%d_rank%lld.", (int)p->pid, (long long)p->rank);
		assert_non_null(strstr(p->file, want));
		assert_non_null(strstr(p->file, ".pt.trace.json.gz"));
		snprintf(files[k], sizeof(files[k]), "%s", p->file);
	}
	msg_deinit(&r);
	/* files on disk: complete, private, no temporary left */
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/traces/%s/%s", D.state, trace_id, files[i]);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, sizes[i]);
		assert_int_equal(st.st_mode & 077, 0);
		strcat(path, ".tmp");
		assert_int_not_equal(stat(path, &st), 0);
	}
	/* list */
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_LIST_REPLY);
	assert_int_equal(r.u.trace_list_reply.traces.n, 1);
	assert_string_equal(r.u.trace_list_reply.traces.v[0].trace_id, trace_id);
	assert_int_equal(r.u.trace_list_reply.traces.v[0].files.n, 2);
	msg_deinit(&r);
	/* download, byte for byte with CRC */
	for (i = 0; i < 2; i++)
		download(&c, trace_id, files[i], sizes[i]);
	/* clients that ask for the 3 MB file, read its first frame and go
	 * away: the daemon's next write fails (EPIPE), which must cost that
	 * connection only (SIGPIPE's default would kill the daemon) */
	for (i = 0; i < 5; i++) {
		struct tc q;
		struct rframe *f;

		tc_ctl(&q, D.sock);
		msg_init(&m, MSG_TRACE_DOWNLOAD, 0);
		m.u.trace_download.trace_id = trace_id;
		m.u.trace_download.file = files[0];
		assert_int_equal(tc_send(&q, &m), 0);
		assert_non_null(f = tc_recv_frame(&q, TD_TIMEOUT_MS));
		free(f);
		tc_close(&q);
		msg_init(&m, MSG_DAEMON_STATUS, 0);
		tc_call(&c, &m, &r);
		assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
		msg_deinit(&r);
	}
	/* status of a finished trace */
	msg_init(&m, MSG_TRACE_STATUS, 0);
	m.u.trace_ref.trace_id = trace_id;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_STATUS_REPLY);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	/* delete */
	msg_init(&m, MSG_TRACE_DELETE, 0);
	m.u.trace_ref.trace_id = trace_id;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_DELETE_REPLY);
	assert_int_equal(r.u.trace_delete_reply.files, 2);
	assert_int_equal(r.u.trace_delete_reply.bytes, (int64_t)(sizes[0] + sizes[1]));
	msg_deinit(&r);
	snprintf(path, sizeof(path), "%s/traces/%s", D.state, trace_id);
	assert_int_not_equal(stat(path, &st), 0);
	msg_init(&m, MSG_TRACE_DOWNLOAD, 0);
	m.u.trace_download.trace_id = trace_id;
	m.u.trace_download.file = files[0];
	tc_expect_error(&c, &m, MSG_E_NOT_FOUND, NULL);
	for (i = 0; i < 2; i++)
		agent_stop(&a[i]);
	tc_close(&c);
}

/* A peer that closes while its reply is on the way (gprofctl exiting right
 * after a trace's last progress, a download abandoned) must cost that
 * connection only: seen killing the daemon by SIGPIPE in the agent
 * stress. The race is narrow (test_full_trace abandons downloads), so the
 * property itself is checked: the running daemon ignores SIGPIPE. */
static void test_sigpipe_ignored(void **state)
{
	char path[64], line[256];
	unsigned long long ign = 0;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)D.pid);
	assert_non_null(f = fopen(path, "r"));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigIgn: %llx", &ign) == 1)
			break;
	fclose(f);
	assert_true((ign >> (SIGPIPE - 1)) & 1);
}

static void test_failures_have_reasons(void **state)
{
	struct agent bad, good;
	struct tc c;
	struct msg m, r;
	size_t i;

	(void)state;
	assert_int_equal(agent_spawn(&bad, D.sock, "5", 0, 0), 0);   /* reports failure */
	assert_int_equal(agent_spawn(&good, D.sock, "5", 1, 500), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("5", 2);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_PARTIAL);
	for (i = 0; i < r.u.trace_info.procs.n; i++) {
		const struct msg_trace_proc *p = &r.u.trace_info.procs.v[i];

		if (p->pid == bad.pid) {
			assert_int_equal(p->state, MSG_TS_FAILED);
			assert_string_equal(p->reason, "CUPTI is held by another tool (test)");
		} else
			assert_int_equal(p->state, MSG_TS_DONE);
	}
	msg_deinit(&r);
	agent_stop(&bad);
	agent_stop(&good);
	tc_close(&c);
}

static void test_agent_vanishes(void **state)
{
	struct tc c, ag;
	struct msg m, r;

	(void)state;
	/* an agent that registers and never answers, then disconnects */
	tc_agent(&ag, D.sock, "gone");
	tc_ctl(&c, D.sock);
	m = tc_trace_req("gone", 3);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 1);
	msg_deinit(&r);
	assert_int_equal(tc_recv_type(&ag, MSG_CAPTURE_START, &r), 0);
	assert_int_equal(r.u.capture_start.win.iterations, 3);
	msg_deinit(&r);
	tc_close(&ag);
	assert_int_equal(tc_recv_type(&c, MSG_TRACE_PROGRESS, &r), 0);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_FAILED);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason, "agent disconnected"));
	msg_deinit(&r);
	tc_close(&c);
}

static void test_cancel_and_timeout(void **state)
{
	struct tc c, ag;
	struct msg m, r;
	char id[64];

	(void)state;
	tc_agent(&ag, D.sock, "slow");
	tc_ctl(&c, D.sock);
	/* cancel */
	m = tc_trace_req("slow", 3);
	tc_call(&c, &m, &r);
	snprintf(id, sizeof(id), "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	msg_init(&m, MSG_TRACE_CANCEL, 0);
	m.u.trace_ref.trace_id = id;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_CANCEL_REPLY);
	assert_int_equal(r.u.trace_cancel_reply.cancelled, 1);
	msg_deinit(&r);
	assert_int_equal(tc_recv_type(&ag, MSG_CAPTURE_START, &r), 0);
	msg_deinit(&r);
	assert_int_equal(tc_recv_type(&ag, MSG_CAPTURE_CANCEL, &r), 0);
	assert_string_equal(r.u.capture_cancel.trace_id, id);
	msg_deinit(&r);
	/* timeout: a 300 ms trace the agent never answers */
	m = tc_trace_req("slow", 3);
	m.u.trace_start.timeout_ms = 300;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_int_equal(tc_recv_type(&c, MSG_TRACE_PROGRESS, &r), 0);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_FAILED);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason, "timed out"));
	msg_deinit(&r);
	tc_close(&ag);
	tc_close(&c);
}

static void test_upload_errors(void **state)
{
	struct tc c, ag;
	struct msg m, r;
	struct pbuf b;
	char id[64];

	(void)state;
	tc_agent(&ag, D.sock, "up");
	tc_ctl(&c, D.sock);
	m = tc_trace_req("up", 1);
	tc_call(&c, &m, &r);
	snprintf(id, sizeof(id), "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	/* wrong CRC: refused, nothing stored */
	msg_init(&m, MSG_UPLOAD_BEGIN, 0);
	m.u.upload_begin.trace_id = id;
	m.u.upload_begin.transfer = 3;
	assert_int_equal(tc_send(&ag, &m), 0);
	pbuf_init(&b, 0);
	frame_encode_chunk(&b, 3, 0, "hello", 5);
	assert_int_equal(tc_send_raw(&ag, b.data, b.len), 0);
	pbuf_deinit(&b);
	msg_init(&m, MSG_UPLOAD_END, 0);
	m.u.upload_end.transfer = 3;
	m.u.upload_end.bytes = 5;
	m.u.upload_end.crc32 = 1;
	tc_expect_error(&ag, &m, MSG_E_BAD_REQUEST, "CRC-32");
	msg_init(&m, MSG_TRACE_STATUS, 0);
	m.u.trace_ref.trace_id = id;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_STATUS_REPLY);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_FAILED);
	assert_int_equal(r.u.trace_info.procs.v[0].state, MSG_TS_FAILED);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason, "CRC-32"));
	msg_deinit(&r);
	/* nothing of it was kept */
	{
		char path[600];
		struct stat st;

		snprintf(path, sizeof(path), "%s/traces/%s", D.state, id);
		assert_int_not_equal(stat(path, &st), 0);
	}
	tc_close(&ag);
	tc_close(&c);
}

static void test_chunk_for_unknown_transfer(void **state)
{
	struct tc ag;
	struct msg r;
	struct pbuf b;

	(void)state;
	assert_int_equal(tc_connect_unix(&ag, D.sock), 0);
	assert_int_equal(tc_hello(&ag, MSG_ROLE_AGENT), 0);
	pbuf_init(&b, 0);
	frame_encode_chunk(&b, 99, 0, "x", 1);
	assert_int_equal(tc_send_raw(&ag, b.data, b.len), 0);
	pbuf_deinit(&b);
	assert_int_equal(tc_recv(&ag, &r), 0);
	assert_int_equal(r.type, MSG_ERROR);
	assert_non_null(strstr(r.u.error.message, "not open"));
	msg_deinit(&r);
	assert_true(tc_closed(&ag));
	tc_close(&ag);
}

/* A process whose part is done is downloadable while the trace still runs
 * for others (gprofctl fetches each file at once: a fast rank's file must
 * not wait for, or fail on, the slowest rank). */
static void test_download_while_running(void **state)
{
	struct tc c, me;
	struct agent a;
	struct msg m, r;
	char trace_id[64], file[160] = "";
	size_t i;

	(void)state;
	assert_int_equal(agent_spawn(&a, D.sock, "77", 0, 3000), 0);
	tc_agent(&me, D.sock, "78"); /* never answers: the trace stays running */
	tc_ctl(&c, D.sock);
	m = tc_trace_req(NULL, 1);
	m.u.trace_start.all = true;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 2);
	snprintf(trace_id, sizeof(trace_id), "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	while (!file[0]) {
		assert_int_equal(tc_recv(&c, &r), 0);
		assert_int_equal(r.type, MSG_TRACE_PROGRESS);
		assert_int_equal(r.u.trace_info.state, MSG_TRACE_RUNNING);
		for (i = 0; i < r.u.trace_info.procs.n; i++)
			if (r.u.trace_info.procs.v[i].pid == a.pid &&
			    r.u.trace_info.procs.v[i].state == MSG_TS_DONE)
				snprintf(file, sizeof(file), "%s", r.u.trace_info.procs.v[i].file);
		msg_deinit(&r);
	}
	/* a fresh connection: this one still receives the trace's progress */
	tc_close(&c);
	tc_ctl(&c, D.sock);
	download(&c, trace_id, file, 3000);
	msg_init(&m, MSG_TRACE_DOWNLOAD, 0);
	m.u.trace_download.trace_id = trace_id;
	m.u.trace_download.file = "x_1.1.pt.trace.json.gz";
	tc_expect_error(&c, &m, MSG_E_NOT_FOUND, "still running");
	msg_init(&m, MSG_TRACE_CANCEL, 0);
	m.u.trace_ref.trace_id = trace_id;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_CANCEL_REPLY);
	assert_int_equal(r.u.trace_cancel_reply.cancelled, 1);
	msg_deinit(&r);
	/* and from the store once it has ended */
	download(&c, trace_id, file, 3000);
	agent_stop(&a);
	tc_close(&me);
	tc_close(&c);
}

/* A launcher (this process: it started both ranks of its job, has no rank
 * and never steps) is shown as one by process_list, and a trace of the job
 * leaves it out as skipped, with the reason, and completes on the ranks;
 * named alone by pid it is traced. */
static void test_launcher_left_out(void **state)
{
	struct tc c, me;
	struct agent a[2];
	struct msg m, r;
	int64_t pids[1];
	size_t i, skipped = 0, from = 0;
	int k;

	(void)state;
	tc_agent(&me, D.sock, "79");
	for (k = 0; k < 2; k++)
		assert_int_equal(agent_spawn(&a[k], D.sock, "79", k, 500), 0);
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_PROCESS_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.process_list_reply.procs.n, 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(r.u.process_list_reply.procs.v[i].launcher,
		                 r.u.process_list_reply.procs.v[i].pid == getpid());
	msg_deinit(&r);
	m = tc_trace_req("79", 2);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 3);
	for (i = 0; i < 3; i++) {
		const struct msg_trace_proc *p = &r.u.trace_start_reply.procs.v[i];

		if (p->pid != getpid())
			continue;
		assert_int_equal(p->state, MSG_TS_SKIPPED);
		assert_non_null(strstr(p->reason, "launcher"));
		skipped++;
	}
	assert_int_equal(skipped, 1);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	assert_true(td_wait_log(&D, "done: 2 of 2 processes delivered (launchers left out)",
	                        &from));
	/* by its own pid (the ranks descend from it, so they match too): left
	 * out again; a lone launcher matched by job is traced */
	tc_close(&c);
	tc_ctl(&c, D.sock);
	m = tc_trace_req(NULL, 1);
	pids[0] = getpid();
	m.u.trace_start.pids.v = pids;
	m.u.trace_start.pids.n = 1;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 3);
	msg_deinit(&r);
	assert_true(td_wait_log(&D, "done: 2 of 2 processes delivered (launchers left out)",
	                        &from));
	for (k = 0; k < 2; k++) {
		char gone[64];

		agent_stop(&a[k]);
		snprintf(gone, sizeof(gone), "unregistered pid %d:", (int)a[k].pid);
		assert_true(td_wait_log(&D, gone, NULL));
	}
	m = tc_trace_req("79", 1);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 1);
	assert_int_equal(r.u.trace_start_reply.procs.v[0].pid, getpid());
	assert_int_not_equal(r.u.trace_start_reply.procs.v[0].state, MSG_TS_SKIPPED);
	msg_deinit(&r);
	tc_close(&me);
	tc_close(&c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_status_needs_hello, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_role_permissions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_register_and_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_matched_hint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_matching_and_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_trace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sigpipe_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures_have_reasons, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_vanishes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_and_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upload_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_for_unknown_transfer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_download_while_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_launcher_left_out, setup, teardown),
	};
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]); /* run one test by name */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
