/*
 * Integration tests of the profiler options (issue 27): what the daemon
 * hands a Kineto client in its on-demand config, and an agent in its
 * capture_start, for each of --record-shapes, --profile-memory,
 * --with-stack, --with-flops and --with-modules, whether the request came
 * from the real gprofctl or from the stock `dyno gputrace` RPC (its exact
 * config lines over TCP). The Kineto client is this process speaking
 * Kineto's datagrams (harness kc_*); the agent a bare registered agent
 * connection. Bad option values in a dyno config are refused with the
 * reason, and the client is handed nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "harness.h"

static struct td D;

/* The five options as gprofctl names them, the key Kineto reads (in the
 * order MSG_OPT_* numbers them) and what `dyno gputrace` calls them. */
static const struct {
	const char *flag, *key;
	int64_t bit;
} opts[] = {
	{ "--record-shapes", "PROFILE_REPORT_INPUT_SHAPES", MSG_OPT_RECORD_SHAPES },
	{ "--profile-memory", "PROFILE_PROFILE_MEMORY", MSG_OPT_PROFILE_MEMORY },
	{ "--with-stack", "PROFILE_WITH_STACK", MSG_OPT_WITH_STACK },
	{ "--with-flops", "PROFILE_WITH_FLOPS", MSG_OPT_WITH_FLOPS },
	{ "--with-modules", "PROFILE_WITH_MODULES", MSG_OPT_WITH_MODULES },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* A daemon serving Kineto in directory mode (its socket in the daemon's
 * test directory, known only after the first start). */
static int setup(void **state)
{
	char yaml[700];

	(void)state;
	if (td_start(&D, "kineto:\n  enabled: false\n", NULL) < 0)
		return -1;
	td_stop(&D);
	snprintf(yaml, sizeof(yaml), "kineto:\n  socket_dir: %s\n  trace_dir: %s/ktrace\n", D.dir,
	         D.dir);
	return td_restart(&D, yaml, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return td_finish(&D);
}

/* Starts `gprofctl trace --job JOB --duration-ms 60000` (or, with
 * iterations set, `--iterations 5`) with the options whose bits are in
 * mask; its output is not read (it ends by SIGINT). */
static pid_t ctl_start_win(const char *job, int64_t mask, bool iterations)
{
	const char *argv[32];
	char out[300];
	size_t n = 0, i;
	pid_t pid;

	snprintf(out, sizeof(out), "%s/out", D.dir);
	argv[n++] = GPROFCTL_PATH;
	argv[n++] = "--socket";
	argv[n++] = D.sock;
	argv[n++] = "trace";
	argv[n++] = "--job";
	argv[n++] = job;
	argv[n++] = iterations ? "--iterations" : "--duration-ms";
	argv[n++] = iterations ? "5" : "60000";
	argv[n++] = "--timeout";
	argv[n++] = "120";
	argv[n++] = "--output-dir";
	argv[n++] = out;
	for (i = 0; i < NOPTS; i++)
		if (mask & opts[i].bit)
			argv[n++] = opts[i].flag;
	argv[n] = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static pid_t ctl_start(const char *job, int64_t mask)
{
	return ctl_start_win(job, mask, false);
}

/* Interrupts gprofctl, which cancels its trace everywhere before it
 * exits; then the daemon has logged the cancellation. */
static void ctl_stop(pid_t pid, size_t *from)
{
	int status;

	assert_int_equal(kill(pid, SIGINT), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(td_wait_log(&D, " cancelled", from));
}

/* Each option's line is in cfg once, true exactly when its bit is in
 * mask, before the window's lines (the iteration fallback appends). */
static void assert_options(const char *cfg, int64_t mask)
{
	char want[100];
	size_t i;

	for (i = 0; i < NOPTS; i++) {
		const char *at;

		snprintf(want, sizeof(want), "\n%s=%s\n", opts[i].key,
		         (mask & opts[i].bit) ? "true" : "false");
		at = strstr(cfg, want);
		if (at == NULL)
			fail_msg("config lacks \"%s\":\n%s", want + 1, cfg);
		assert_null(strstr(at + strlen(want), want + 1)); /* once */
	}
}

/* The config the client is handed at its next free poll, once the daemon
 * has logged the trace's start. */
static void poll_config(struct kc *k, size_t *from, char *cfg, size_t cap)
{
	assert_true(td_wait_log(&D, " started by ", from));
	assert_true(kc_poll(k, 3, 88, cfg, cap, TD_TIMEOUT_MS) > 0);
}

/* Each flag of the real gprofctl, alone, then none and all: the Kineto
 * client's config says exactly those true. */
static void test_gprofctl_to_kineto(void **state)
{
	char cfg[8192];
	size_t from = 0, i;
	struct kc k;
	pid_t pid;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 88, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0); /* registers */
	for (i = 0; i <= NOPTS + 1; i++) {
		int64_t mask = i < NOPTS ? opts[i].bit : i == NOPTS ? 0 : MSG_OPT_ALL;

		pid = ctl_start("88", mask);
		poll_config(&k, &from, cfg, sizeof(cfg));
		assert_options(cfg, mask);
		assert_non_null(strstr(cfg, "\nACTIVITIES_DURATION_MSECS=60000\n"));
		ctl_stop(pid, &from);
	}
	/* an iteration config: the options come before the window's lines, so
	 * the duration the daemon appends for its fallback stays last */
	pid = ctl_start_win("88", MSG_OPT_ALL, true);
	poll_config(&k, &from, cfg, sizeof(cfg));
	assert_options(cfg, MSG_OPT_ALL);
	assert_non_null(strstr(cfg, "\nACTIVITIES_ITERATIONS=5\n"));
	assert_true(strlen(cfg) > 28 &&
	            strcmp(cfg + strlen(cfg) - 28, "\nACTIVITIES_DURATION_MSECS=0") == 0);
	ctl_stop(pid, &from);
	kc_close(&k);
}

/* `dyno gputrace --job-id 88 --duration-ms 60000` with the options in
 * mask, its config built as dyno's gputrace.rs builds it (the memory
 * option adds PROFILE_MEMORY and its duration). */
static char *dyno_gputrace(int64_t mask)
{
	char body[2048];
	int n;

	n = snprintf(body, sizeof(body), "\n{\n    \"fn\": \"setKinetOnDemandRequest\",\n"
	             "    \"config\": \"ACTIVITIES_LOG_FILE=/tmp/gputrace.json\\n"
	             "PROFILE_START_TIME=0\\nACTIVITIES_DURATION_MSECS=60000\\n"
	             "PROFILE_REPORT_INPUT_SHAPES=%s",
	             (mask & MSG_OPT_RECORD_SHAPES) ? "true" : "false");
	if (mask & MSG_OPT_PROFILE_MEMORY)
		n += snprintf(body + n, sizeof(body) - (size_t)n, "\\nPROFILE_PROFILE_MEMORY=true\\n"
		              "PROFILE_MEMORY=true\\nPROFILE_MEMORY_DURATION_MSECS=60000");
	snprintf(body + n, sizeof(body) - (size_t)n,
	         "\\nPROFILE_WITH_STACK=%s\\nPROFILE_WITH_FLOPS=%s\\nPROFILE_WITH_MODULES=%s\",\n"
	         "    \"job_id\": 88,\n    \"pids\": [0],\n    \"process_limit\": 3\n}",
	         (mask & MSG_OPT_WITH_STACK) ? "true" : "false",
	         (mask & MSG_OPT_WITH_FLOPS) ? "true" : "false",
	         (mask & MSG_OPT_WITH_MODULES) ? "true" : "false");
	return tc_dyno_call(D.port, body);
}

/* Cancels the trace a dyno reply named (its traceId). */
static void cancel_dyno_trace(const char *reply, size_t *from)
{
	cJSON *root = cJSON_Parse(reply), *id;
	struct msg m, r;
	struct tc c;

	assert_non_null(root);
	id = cJSON_GetObjectItem(root, "traceId");
	assert_true(cJSON_IsString(id));
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_TRACE_CANCEL, 0);
	m.u.trace_ref.trace_id = id->valuestring;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_CANCEL_REPLY);
	msg_deinit(&r);
	tc_close(&c);
	cJSON_Delete(root);
	assert_true(td_wait_log(&D, " cancelled", from));
}

/* The stock dyno client's config with each option, none and all: the
 * Kineto client is handed the same option lines gprofctl's would give. */
static void test_dyno_to_kineto(void **state)
{
	char cfg[8192], *got;
	size_t from = 0, i;
	struct kc k;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 88, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	for (i = 0; i <= NOPTS + 1; i++) {
		int64_t mask = i < NOPTS ? opts[i].bit : i == NOPTS ? 0 : MSG_OPT_ALL;

		got = dyno_gputrace(mask);
		assert_non_null(strstr(got, "\"activityProfilersTriggered\":[")); /* not failed */
		poll_config(&k, &from, cfg, sizeof(cfg));
		assert_options(cfg, mask);
		cancel_dyno_trace(got, &from);
		free(got);
	}
	kc_close(&k);
}

/* A config Kineto would throw on, or one that sets an option both ways,
 * is refused with the line and what to do; the client gets nothing. */
static void test_dyno_bad_options(void **state)
{
	static const struct { const char *config, *why; } bad[] = {
		{ "ACTIVITIES_DURATION_MSECS=500\\nPROFILE_WITH_FLOPS=sure",
		  "config line 2: PROFILE_WITH_FLOPS=sure is not a boolean: give true or false" },
		{ "PROFILE_WITH_STACK=true\\nPYTHON_STACK_TRACE=false",
		  "config line 2: PYTHON_STACK_TRACE=false contradicts line 1 "
		  "(PROFILE_WITH_STACK=true); Kineto would take the later one: give the option once" },
	};
	char body[1024], cfg[8192], *got;
	struct kc k;
	size_t i;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 88, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"fn\":\"setKinetOnDemandRequest\",\"config\":\"%s\","
		         "\"job_id\":88,\"pids\":[0],\"process_limit\":3}", bad[i].config);
		got = tc_dyno_call(D.port, body);
		assert_non_null(strstr(got, "\"status\":\"failed\""));
		if (strstr(got, bad[i].why) == NULL)
			fail_msg("reply %s lacks \"%s\"", got, bad[i].why);
		free(got);
		assert_int_equal(kc_poll(&k, 3, 88, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	}
	assert_int_equal(td_log_count(&D, " started by "), 0);
	kc_close(&k);
}

/* An agent-served process: gprofctl's options reach its capture_start. */
static void test_gprofctl_to_agent(void **state)
{
	size_t from = 0;
	struct msg m;
	struct tc a;
	pid_t pid;

	(void)state;
	tc_agent(&a, D.sock, "89");
	pid = ctl_start("89", MSG_OPT_RECORD_SHAPES | MSG_OPT_WITH_MODULES);
	assert_int_equal(tc_recv_type(&a, MSG_CAPTURE_START, &m), 0);
	assert_int_equal(m.u.capture_start.win.options, MSG_OPT_RECORD_SHAPES | MSG_OPT_WITH_MODULES);
	assert_int_equal(m.u.capture_start.win.duration_ms, 60000);
	msg_deinit(&m);
	ctl_stop(pid, &from);
	tc_close(&a);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_gprofctl_to_kineto, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dyno_to_kineto, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dyno_bad_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gprofctl_to_agent, setup, teardown),
	};

	(void)argc;
	(void)argv;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
