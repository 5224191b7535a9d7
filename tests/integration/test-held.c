/*
 * test-held: iteration traces held for all their processes (daemon
 * trace.h, `held`): a trace for several ranks that finds one capturing an
 * earlier trace begins nowhere until all are free, then on one step.
 * Fake agents, each a real connection whose peer pid is a forked child
 * that connected and pauses, driven message by message from this process,
 * so every message the daemon sends each agent is seen in order:
 * - cancelled or timed out while held: the kept process is sent only the
 *   cancel, never a start (a start then a cancel before the fix);
 * - three traces over overlapping pairs, created in an order that could
 *   cycle, freed in an adverse order: each begins in turn, on one step;
 * - the daemon stopping while one is held: no start sent.
 * (Written by a review of the change; the sleeps it had before a trace
 * became waits on the daemon's process list.)
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "harness.h"

static struct td D;

static int setup(void **state) { (void)state; return td_start(&D, NULL, NULL); }
static int teardown(void **state) { (void)state; return td_finish(&D); }

struct fa {
	struct tc c;
	pid_t pid;
};

static void fa_open(struct fa *a, const char *job, int rank, int64_t steps)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), go[2];
	struct msg m, r;
	char b;

	assert_true(fd >= 0);
	assert_int_equal(pipe(go), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", D.sock);
	a->pid = fork();
	if (a->pid == 0) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			_exit(1);
		if (write(go[1], "x", 1) != 1)
			_exit(2);
		close_range(0, ~0u, 0); /* no stdout kept open */
		for (;;)
			pause();
	}
	assert_int_equal(read(go[0], &b, 1), 1);
	close(go[0]);
	close(go[1]);
	memset(&a->c, 0, sizeof(a->c));
	a->c.fd = fd;
	a->c.next_id = 1;
	frame_decoder_init(&a->c.dec, 64u << 20, 64u << 20);
	assert_int_equal(tc_hello(&a->c, MSG_ROLE_AGENT), 0);
	msg_init(&m, MSG_REGISTER, 0);
	m.u.reg.pid = a->pid;
	m.u.reg.job_id = job;
	m.u.reg.rank = rank;
	m.u.reg.name = "held-agent";
	tc_call(&a->c, &m, &r);
	assert_int_equal(r.type, MSG_REGISTER_REPLY);
	msg_deinit(&r);
	msg_init(&m, MSG_HEARTBEAT, 0);
	m.u.heartbeat.steps = steps;
	m.u.heartbeat.median_step_us = 100000;
	tc_send(&a->c, &m);
}

/* Until the daemon lists every pid with steps (each poll a round trip:
 * the heartbeats came on the agents' own connections). */
static void await_steps(const int64_t *pids, size_t n, int64_t steps)
{
	struct tc c;
	int tries;

	tc_ctl(&c, D.sock);
	for (tries = 0; tries < 100000; tries++) {
		struct msg m, r;
		size_t i, j, ok = 0;

		msg_init(&m, MSG_PROCESS_LIST, 0);
		tc_call(&c, &m, &r);
		assert_int_equal(r.type, MSG_PROCESS_LIST_REPLY);
		for (i = 0; i < n; i++)
			for (j = 0; j < r.u.process_list_reply.procs.n; j++)
				if (r.u.process_list_reply.procs.v[j].pid == pids[i] &&
				    r.u.process_list_reply.procs.v[j].steps == steps)
					ok++;
		msg_deinit(&r);
		if (ok == n) {
			tc_close(&c);
			return;
		}
	}
	fail_msg("the daemon never listed the agents' steps");
}

static void fa_close(struct fa *a)
{
	int st;

	tc_close(&a->c);
	kill(a->pid, SIGKILL);
	waitpid(a->pid, &st, 0);
}

/* The next message to a, as "type id" (or "none" within ms). */
static const char *fa_next(struct fa *a, int ms, char *out, size_t n, int64_t *start_it)
{
	struct rframe *f = tc_recv_frame(&a->c, ms);
	struct perr err;
	struct msg m;

	if (f == NULL) {
		snprintf(out, n, "none");
		return out;
	}
	memset(&m, 0, sizeof(m));
	assert_int_equal(msg_decode(&m, (const char *)f->data, f->len, &err), 0);
	free(f);
	if (m.type == MSG_CAPTURE_START) {
		snprintf(out, n, "start %s", m.u.capture_start.trace_id);
		if (start_it)
			*start_it = m.u.capture_start.win.start_iteration;
	} else if (m.type == MSG_CAPTURE_CANCEL)
		snprintf(out, n, "cancel %s", m.u.capture_cancel.trace_id);
	else
		snprintf(out, n, "%s", msg_type_name(m.type));
	msg_deinit(&m);
	return out;
}

static void fa_upload(struct fa *a, const char *id)
{
	uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
	static uint32_t transfer = 1;
	uint8_t buf[16];
	struct pbuf b;
	struct msg m;
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = agent_byte(i);
	msg_init(&m, MSG_UPLOAD_BEGIN, 0);
	m.u.upload_begin.trace_id = id;
	m.u.upload_begin.transfer = transfer;
	tc_send(&a->c, &m);
	pbuf_init(&b, 0);
	frame_encode_chunk(&b, transfer, 0, buf, sizeof(buf));
	tc_send_raw(&a->c, b.data, b.len);
	pbuf_deinit(&b);
	crc = (uint32_t)crc32(crc, buf, sizeof(buf));
	msg_init(&m, MSG_UPLOAD_END, 0);
	m.u.upload_end.transfer = transfer++;
	m.u.upload_end.bytes = sizeof(buf);
	m.u.upload_end.crc32 = crc;
	tc_send(&a->c, &m);
	assert_int_equal(tc_recv_type(&a->c, MSG_UPLOAD_END_REPLY, &m), 0);
	msg_deinit(&m);
}

static void start_trace(struct tc *c, const char *id, const char *job, const int64_t *pids,
                        size_t npids, int64_t timeout_ms)
{
	struct msg m = tc_trace_req(job, 3), r;

	m.u.trace_start.trace_id = id;
	m.u.trace_start.pids.v = (int64_t *)pids;
	m.u.trace_start.pids.n = npids;
	m.u.trace_start.timeout_ms = timeout_ms;
	tc_call(c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_START_REPLY);
	msg_deinit(&r);
}

/* Agents a0 and a1 of job; trace X on a0 alone, then H on the job (its
 * timeout timeout_ms, 0 the default): H is held, a1 kept for it. */
static void hold(struct fa *a0, struct fa *a1, struct tc *c, const char *job, int64_t timeout_ms)
{
	char got[128];
	int64_t p0;

	fa_open(a0, job, 0, 1000);
	fa_open(a1, job, 1, 1000);
	await_steps((int64_t[]){ a0->pid, a1->pid }, 2, 1000);
	tc_ctl(c, D.sock);
	p0 = a0->pid;
	start_trace(c, "X", NULL, &p0, 1, 0);
	assert_string_equal(fa_next(a0, 2000, got, sizeof(got), NULL), "start X");
	start_trace(c, "H", job, NULL, 0, timeout_ms);
	assert_true(td_wait_log(&D, "trace H: held until every process is free", NULL));
}

/* X on a0 alone; H on the job {a0, a1}: held, a1 kept for it. Then H ends
 * before it began (cancel or timeout): a1 must only be told to cancel. */
static void held_then_end(bool by_timeout)
{
	struct fa a0, a1;
	struct tc c;
	struct msg m, r;
	char got[128], first[128];

	hold(&a0, &a1, &c, "hj", by_timeout ? 700 : 0);
	assert_string_equal(fa_next(&a1, 300, got, sizeof(got), NULL), "none");
	if (!by_timeout) {
		msg_init(&m, MSG_TRACE_CANCEL, 0);
		m.u.trace_ref.trace_id = "H";
		tc_call(&c, &m, &r);
		msg_deinit(&r);
	}
	/* what a1, which never began H, is sent now */
	fa_next(&a1, 3000, got, sizeof(got), NULL);
	fprintf(stderr, "a1 first message after H %s: %s\n",
	        by_timeout ? "timed out" : "cancelled", got);
	snprintf(first, sizeof(first), "%s", got);
	if (strcmp(got, "start H") == 0) {
		fa_next(&a1, 3000, got, sizeof(got), NULL);
		fprintf(stderr, "a1 second message: %s\n", got);
	}
	fa_close(&a0);
	fa_close(&a1);
	tc_close(&c);
	/* a trace cancelled (timed out) before it began is never started */
	assert_string_equal(first, "cancel H");
}

static void test_held_cancelled(void **state) { (void)state; held_then_end(false); }
static void test_held_timed_out(void **state) { (void)state; held_then_end(true); }

/* Three held traces over overlapping sets, created in an order that could
 * cycle; busy processes free in an adverse order: every trace must begin,
 * each on one step for all its parts. */
static void test_held_three(void **state)
{
	struct fa a[3];
	struct tc c;
	char got[128];
	int64_t p[3], s01[2], s12[2], s20[2], it[3];
	int i;

	(void)state;
	for (i = 0; i < 3; i++) {
		fa_open(&a[i], "tj", i, 1000);
		p[i] = a[i].pid;
	}
	await_steps(p, 3, 1000);
	tc_ctl(&c, D.sock);
	start_trace(&c, "X0", NULL, &p[0], 1, 0);
	start_trace(&c, "X1", NULL, &p[1], 1, 0);
	for (i = 0; i < 2; i++)
		assert_string_equal(fa_next(&a[i], 2000, got, sizeof(got), NULL),
		                    i == 0 ? "start X0" : "start X1");
	s01[0] = p[0], s01[1] = p[1];
	s12[0] = p[1], s12[1] = p[2];
	s20[0] = p[2], s20[1] = p[0];
	start_trace(&c, "A", NULL, s01, 2, 0);   /* waits on a0, a1 */
	start_trace(&c, "B", NULL, s12, 2, 0);   /* waits on a1; keeps a2 */
	start_trace(&c, "C", NULL, s20, 2, 0);   /* waits on a2, a0 */
	fa_upload(&a[1], "X1");
	assert_string_equal(fa_next(&a[2], 300, got, sizeof(got), NULL), "none");
	fa_upload(&a[0], "X0");
	assert_string_equal(fa_next(&a[0], 2000, got, sizeof(got), &it[0]), "start A");
	assert_string_equal(fa_next(&a[1], 2000, got, sizeof(got), &it[1]), "start A");
	assert_true(it[0] == it[1] && it[0] > 0);
	fa_upload(&a[0], "A");
	fa_upload(&a[1], "A");
	assert_string_equal(fa_next(&a[1], 2000, got, sizeof(got), &it[1]), "start B");
	assert_string_equal(fa_next(&a[2], 2000, got, sizeof(got), &it[2]), "start B");
	assert_true(it[1] == it[2]);
	fa_upload(&a[1], "B");
	fa_upload(&a[2], "B");
	assert_string_equal(fa_next(&a[2], 2000, got, sizeof(got), &it[2]), "start C");
	assert_string_equal(fa_next(&a[0], 2000, got, sizeof(got), &it[0]), "start C");
	assert_true(it[0] == it[2]);
	for (i = 0; i < 3; i++)
		fa_close(&a[i]);
	tc_close(&c);
}

/* The daemon stops while H is held: a1 must not be sent a capture_start. */
static void test_held_at_shutdown(void **state)
{
	struct fa a0, a1;
	struct tc c;
	char got[128];

	(void)state;
	hold(&a0, &a1, &c, "sj", 0);
	tc_close(&c);
	td_signal(&D, SIGTERM);
	fa_next(&a1, 3000, got, sizeof(got), NULL);
	fprintf(stderr, "a1 is sent at shutdown: %s\n", got);
	fa_close(&a0);
	fa_close(&a1);
	assert_string_not_equal(got, "start H");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_held_cancelled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_timed_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_three, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_at_shutdown, setup, teardown),
	};
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
