/*
 * Integration tests of the security model: TCP authentication by token
 * (right, wrong, none), peer-credential checks on the Unix socket and on
 * loopback TCP (a second user sees and traces only its own processes and
 * traces), refusing unsafe
 * configurations, and the Dynolog RPC byte for byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dyno.h"
#include "harness.h"
#include "hmac.h"

#define TOKEN "0123456789abcdef-test-token"

static struct td D;
static char tokdir[64], tokfile[128];

static void write_token(mode_t mode)
{
	int fd;

	snprintf(tokdir, sizeof(tokdir), "/tmp/gprofd-tok-XXXXXX");
	assert_non_null(mkdtemp(tokdir));
	snprintf(tokfile, sizeof(tokfile), "%s/token", tokdir);
	fd = open(tokfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, TOKEN "\n", strlen(TOKEN) + 1), (ssize_t)strlen(TOKEN) + 1);
	close(fd);
	chmod(tokfile, mode);
}

static void remove_token(void)
{
	unlink(tokfile);
	rmdir(tokdir);
}

static int setup_auth(void **state)
{
	char yaml[512];

	(void)state;
	write_token(0600);
	snprintf(yaml, sizeof(yaml), "auth_token_file: %s\nloopback_identity: false\n", tokfile);
	return td_start(&D, yaml, NULL);
}

static int setup_plain(void **state)
{
	(void)state;
	return td_start(&D, NULL, NULL);
}

static int teardown(void **state)
{
	int rc;

	(void)state;
	rc = td_finish(&D);
	if (tokfile[0])
		remove_token();
	tokfile[0] = 0;
	return rc;
}

/* hello over TCP; returns the nonce the daemon asked us to sign ("" if none) */
static void tcp_hello(struct tc *c, char nonce[129])
{
	struct msg m, r;

	assert_int_equal(tc_connect_tcp(c, D.port), 0);
	msg_init(&m, MSG_HELLO, 0);
	m.u.hello.proto_min = m.u.hello.proto_max = 1;
	m.u.hello.role = MSG_ROLE_CTL;
	tc_call(c, &m, &r);
	assert_int_equal(r.type, MSG_HELLO_REPLY);
	snprintf(nonce, 129, "%s", r.u.hello_reply.nonce ? r.u.hello_reply.nonce : "");
	if (nonce[0])
		assert_int_equal(r.u.hello_reply.auth, MSG_AUTH_HMAC_SHA256);
	msg_deinit(&r);
}

static void test_tcp_no_token(void **state)
{
	char nonce[129];
	struct tc c;
	struct msg m;

	(void)state;
	tcp_hello(&c, nonce);
	assert_int_equal(strlen(nonce), 64);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_expect_error(&c, &m, MSG_E_AUTH_REQUIRED, "authenticate first");
	tc_close(&c);
}

static void test_tcp_wrong_token(void **state)
{
	char nonce[129], proof[65];
	struct tc c;
	struct msg m;

	(void)state;
	tcp_hello(&c, nonce);
	hmac_proof("not-the-token-at-all", 20, nonce, proof);
	msg_init(&m, MSG_AUTH, 0);
	m.u.auth.proof = proof;
	tc_expect_error(&c, &m, MSG_E_AUTH_FAILED, "wrong token");
	assert_true(tc_closed(&c));
	tc_close(&c);
	/* a proof recorded for one nonce fails for the next connection */
	tcp_hello(&c, nonce);
	hmac_proof(TOKEN, strlen(TOKEN), "00", proof);
	msg_init(&m, MSG_AUTH, 0);
	m.u.auth.proof = proof;
	tc_expect_error(&c, &m, MSG_E_AUTH_FAILED, NULL);
	tc_close(&c);
}

static void test_tcp_right_token(void **state)
{
	char nonce[129], proof[65];
	struct tc c;
	struct msg m, r;

	(void)state;
	tcp_hello(&c, nonce);
	hmac_proof(TOKEN, strlen(TOKEN), nonce, proof);
	msg_init(&m, MSG_AUTH, 0);
	m.u.auth.proof = proof;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_AUTH_REPLY);
	msg_deinit(&r);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
	msg_deinit(&r);
	tc_close(&c);
}

static void test_dyno_refused_without_auth(void **state)
{
	static const char req[] = "{\"fn\":\"getStatus\"}";
	struct rframe *f;
	struct tc c;
	int32_t n = (int32_t)strlen(req);

	(void)state;
	assert_int_equal(tc_connect_tcp(&c, D.port), 0);
	assert_int_equal(tc_send_raw(&c, &n, 4), 0);
	assert_int_equal(tc_send_raw(&c, req, strlen(req)), 0);
	f = tc_recv_frame(&c, TD_TIMEOUT_MS);
	assert_non_null(f);
	assert_non_null(strstr((char *)f->data, "\"status\":\"failed\""));
	assert_non_null(strstr((char *)f->data, "authentication"));
	free(f);
	assert_true(tc_closed(&c));
	tc_close(&c);
}

static void test_unsafe_configs_refused(void **state)
{
	char cmd[512], yaml[256], path[160];
	FILE *f;

	(void)state;
	/* a non-loopback TCP address needs a token */
	snprintf(cmd, sizeof(cmd), "%s --tcp 0.0.0.0:1778 --check-config 2>&1 | "
	         "grep -q 'auth_token_file must be set'", GPROFD_PATH);
	assert_int_equal(system(cmd), 0);
	/* a token readable by others is refused */
	write_token(0644);
	snprintf(path, sizeof(path), "%s/cfg.yaml", tokdir);
	snprintf(yaml, sizeof(yaml), "auth_token_file: %s\n", tokfile);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(yaml, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s --config %s --check-config 2>&1 | grep -q 'chmod 600'",
	         GPROFD_PATH, path);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s --config %s --check-config >/dev/null 2>&1", GPROFD_PATH, path);
	assert_int_not_equal(system(cmd), 0);
	unlink(path);
	remove_token();
	tokfile[0] = 0;
}

/* Runs fn as the user `nobody` in a child; fn returns 0 when every check
 * held, or the number of the check that failed. */
static int as_nobody(int (*fn)(void *), void *arg)
{
	struct passwd *pw = getpwnam("nobody");
	pid_t pid;
	int status;

	if (pw == NULL)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
			_exit(100);
		_exit(fn(arg));
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 101;
}

struct other_view {
	const char *trace_id;
	const char *file;
	bool tcp; /* over loopback TCP (the daemon identifies the socket's owner) */
};

/* What user nobody can see of root's processes and traces: nothing; of its
 * own: its process (so it was identified as nobody, not refused as unknown). */
static int nobody_checks(void *arg)
{
	const struct other_view *v = arg;
	struct agent mine;
	struct tc c;
	struct msg m, r;

	/* a process of nobody's own: the one thing nobody sees */
	if (agent_spawn(&mine, D.sock, "mine", 0, 0) != 0)
		return 7;
	if ((v->tcp ? tc_connect_tcp(&c, D.port) : tc_connect_unix(&c, D.sock)) < 0 ||
	    tc_hello(&c, MSG_ROLE_CTL) < 0)
		return 1;
	msg_init(&m, MSG_PROCESS_LIST, 0);
	if (tc_send(&c, &m) < 0 || tc_recv(&c, &r) < 0 || r.type != MSG_PROCESS_LIST_REPLY ||
	    r.u.process_list_reply.procs.n != 1 ||
	    r.u.process_list_reply.procs.v[0].pid != mine.pid ||
	    r.u.process_list_reply.procs.v[0].uid != (int64_t)getuid())
		return 2;
	msg_deinit(&r);
	agent_stop(&mine);
	m = tc_trace_req("sec", 1);
	if (tc_send(&c, &m) < 0 || tc_recv(&c, &r) < 0 || r.type != MSG_TRACE_START_REPLY ||
	    r.u.trace_start_reply.procs.n != 0 || !r.u.trace_start_reply.hint ||
	    !strstr(r.u.trace_start_reply.hint, "you may not trace them"))
		return 3;
	msg_deinit(&r);
	msg_init(&m, MSG_TRACE_LIST, 0);
	if (tc_send(&c, &m) < 0 || tc_recv(&c, &r) < 0 || r.type != MSG_TRACE_LIST_REPLY ||
	    r.u.trace_list_reply.traces.n != 0)
		return 4;
	msg_deinit(&r);
	msg_init(&m, MSG_TRACE_DOWNLOAD, 0);
	m.u.trace_download.trace_id = v->trace_id;
	m.u.trace_download.file = v->file;
	if (tc_send(&c, &m) < 0 || tc_recv(&c, &r) < 0 || r.type != MSG_ERROR ||
	    r.u.error.code != MSG_E_NOT_FOUND)
		return 5;
	msg_deinit(&r);
	msg_init(&m, MSG_TRACE_DELETE, 0);
	m.u.trace_ref.trace_id = v->trace_id;
	if (tc_send(&c, &m) < 0 || tc_recv(&c, &r) < 0 || r.type != MSG_ERROR)
		return 6;
	msg_deinit(&r);
	tc_close(&c);
	return 0;
}

static void test_peer_credentials(void **state)
{
	struct other_view v;
	char id[64], file[160];
	struct agent a;
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(agent_spawn(&a, D.sock, "sec", 0, 2000), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("sec", 1);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	snprintf(id, sizeof(id), "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	snprintf(file, sizeof(file), "%s", r.u.trace_info.procs.v[0].file);
	msg_deinit(&r);
	v.trace_id = id;
	v.file = file;
	v.tcp = false;
	assert_int_equal(as_nobody(nobody_checks, &v), 0);
	/* the same over loopback TCP: the daemon finds the client socket's
	 * owner (loopback_identity), so nobody is nobody there too, not root */
	assert_true(D.port > 0);
	v.tcp = true;
	assert_int_equal(as_nobody(nobody_checks, &v), 0);
	/* root still sees everything, including the trace nobody could not delete */
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_list_reply.traces.n, 1);
	msg_deinit(&r);
	agent_stop(&a);
	tc_close(&c);
}

/* Every loopback connection is identified at accept, through one
 * sock_diag socket the daemon keeps (issue 25): many in a row are each
 * still answered, none refused as "no owner" for a reply gone astray. */
static void test_many_loopback_lookups(void **state)
{
	char *got;
	int i;

	(void)state;
	for (i = 0; i < 500; i++) {
		got = tc_dyno_call(D.port, "{\"fn\":\"getStatus\"}");
		assert_non_null(got);
		assert_string_equal(got, "{\"status\":1}");
		free(got);
	}
	assert_int_equal(td_log_count(&D, "could not be identified"), 0);
}

static void test_dyno_bytes(void **state)
{
	static const char gputrace[] =
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
	char want[256], *got;
	struct agent a;

	(void)state;
	got = tc_dyno_call(D.port, "{\"fn\":\"getStatus\"}");
	assert_string_equal(got, "{\"status\":1}");
	free(got);
	got = tc_dyno_call(D.port, "{\"fn\":\"getVersion\"}");
	assert_string_equal(got, "{\"version\":\"" GPROF_VERSION "\"}");
	free(got);
	got = tc_dyno_call(D.port, "{\"fn\":\"dcgmProfPause\",\"duration_s\":10}");
	assert_string_equal(got, "{\"status\":false}");
	free(got);
	got = tc_dyno_call(D.port, "{\"fn\":\"teleport\"}");
	assert_non_null(strstr(got, "\"status\":\"failed\""));
	assert_non_null(strstr(got, "unknown fn"));
	free(got);
	/* nothing registered: empty lists, as Dynolog answers */
	got = tc_dyno_call(D.port, gputrace);
	assert_string_equal(got, "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[],"
	                    "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],"
	                    "\"processesMatched\":[]}");
	free(got);
	/* one process of job 1234: matched, triggered, and the trace completes */
	assert_int_equal(agent_spawn(&a, D.sock, "1234", 0, 777), 0);
	got = tc_dyno_call(D.port, gputrace);
	snprintf(want, sizeof(want), "{\"activityProfilersBusy\":0,\"activityProfilersTriggered\":[%d],"
	         "\"eventProfilersBusy\":0,\"eventProfilersTriggered\":[],"
	         "\"processesMatched\":[%d],\"traceId\":\"", (int)a.pid, (int)a.pid);
	assert_memory_equal(got, want, strlen(want));
	free(got);
	assert_true(td_wait_log(&D, "1 of 1 processes delivered", NULL));
	/* a bad Kineto config is refused with the reason */
	got = tc_dyno_call(D.port, "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"A=B=C\",\"pids\":[0],"
	                "\"job_id\":1234}");
	assert_non_null(strstr(got, "more than one '='"));
	free(got);
	agent_stop(&a);
}

/* A setKinetOnDemandRequest with this Kineto config (JSON-escaped). */
static char *dyno_kineto(const char *config)
{
	char body[1024];

	snprintf(body, sizeof(body), "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"%s\","
	         "\"job_id\":1234,\"pids\":[0],\"process_limit\":3}", config);
	return tc_dyno_call(D.port, body);
}

/*
 * Issue 23, item 7: a Kineto config whose window no process could deliver
 * (a duration of 31,000 years, 10^12 iterations, a start time whose x1000
 * overflowed, a duration or a start past the trace timeout of 300 s, a
 * roundup past its limit) is refused with the reason, not answered
 * "triggered" and left to hold the process for the timeout. The native
 * trace request meets the same rules (proto/window.c) in the same words.
 * Afterwards the process is free: a trace of it is delivered at once.
 */
static void test_dyno_window_refused(void **state)
{
	char late[128];
	const struct { const char *config, *why; } bad[] = {
		{ "ACTIVITIES_DURATION_MSECS=1000000000000000",
		  "duration_ms (ACTIVITIES_DURATION_MSECS) is 1000000000000000; give 1..86400000" },
		{ "ACTIVITIES_ITERATIONS=1000000000000",
		  "iterations (ACTIVITIES_ITERATIONS) is 1000000000000; give 1..1000000" },
		{ "PROFILE_START_TIME=99999999999999999", "is after the year 2255" },
		{ "PROFILE_START_TIME=9223372036854775807", "is after the year 2255" },
		{ "ACTIVITIES_DURATION_MSECS=400000", "end in 400 s, after its timeout (300 s)" },
		{ late, "not before its timeout (300 s)" },
		{ "ACTIVITIES_ITERATIONS=5\\nPROFILE_START_ITERATION_ROUNDUP=2000000",
		  "iteration_roundup (PROFILE_START_ITERATION_ROUNDUP) is 2000000" },
	};
	struct agent a;
	struct msg m, r;
	struct tc c;
	size_t i;
	char *got;

	(void)state;
	snprintf(late, sizeof(late), "PROFILE_START_TIME=%lld",
	         (long long)(time(NULL) + 3600) * 1000);
	assert_int_equal(agent_spawn(&a, D.sock, "1234", 0, 777), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		got = dyno_kineto(bad[i].config);
		if (strstr(got, "\"status\":\"failed\"") == NULL || strstr(got, bad[i].why) == NULL)
			fail_msg("%s: want a refusal with \"%s\", got %s", bad[i].config, bad[i].why, got);
		free(got);
	}
	/* the native request: the same limits, the same words */
	tc_ctl(&c, D.sock);
	m = tc_trace_req("1234", 0);
	m.u.trace_start.win.duration_ms = 700000;
	m.u.trace_start.timeout_ms = 600000;
	tc_expect_error(&c, &m, MSG_E_BAD_REQUEST, "end in 700 s, after its timeout (600 s)");
	m.u.trace_start.win.duration_ms = 100;
	m.u.trace_start.win.start_at_us = (int64_t)(time(NULL) + 3600) * 1000000;
	tc_expect_error(&c, &m, MSG_E_BAD_REQUEST, "not before its timeout (600 s)");
	/* nothing was left holding the process: a good trace is delivered now */
	m.u.trace_start.win.start_at_us = 0;
	m.u.trace_start.timeout_ms = 20000;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_START_REPLY);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	tc_close(&c);
	agent_stop(&a);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tcp_no_token, setup_auth, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_wrong_token, setup_auth, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_right_token, setup_auth, teardown),
		cmocka_unit_test_setup_teardown(test_dyno_refused_without_auth, setup_auth, teardown),
		cmocka_unit_test_setup_teardown(test_unsafe_configs_refused, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_dyno_bytes, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_many_loopback_lookups, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_dyno_window_refused, setup_plain, teardown),
	};
	/* acting as a second user needs root (meson's security-root) */
	const struct CMUnitTest root_tests[] = {
		cmocka_unit_test_setup_teardown(test_peer_credentials, setup_plain, teardown),
	};
	signal(SIGPIPE, SIG_IGN);
	return td_main(argc, argv, tests, TD_NELEM(tests), root_tests, TD_NELEM(root_tests));
}
