/*
 * Running traces are visible and cancellable (issue 37), with the real
 * daemon, the real gprofctl and fake agents:
 * - gprofctl trace prints its trace id on stderr as soon as the daemon has
 *   the trace, though stderr is a pipe; gprofctl traces and gprofctl status
 *   (text and --json) list the running trace with its id, state and
 *   processes; gprofctl cancel ends it: the trace is "cancelled" in the
 *   daemon, in gprofctl trace's summary (exit 5, not 1) and in the store
 *   (a part delivered before the cancel keeps its file);
 * - gprofctl cancel says what it found: 0 cancelled, 2 nothing to cancel
 *   (ended before, or unknown);
 * - "nothing matched" lists what the caller may trace, process by process
 *   (pid, rank, kind), or how to register one when there is none;
 * - identity (two real users, as root; 77 otherwise): another user's
 *   running trace is neither listed (traces, status) nor cancellable, and
 *   its processes are not named in a "nothing matched" hint.
 * Synchronisation is by what the programs print and what the daemon
 * answers; timeouts are safety nets.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
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

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "attack.h"

static char out[1 << 18];
static char outdir[] = "/tmp/gprof-running-XXXXXX";

/* gprofctl --socket D.sock ARGS in this process's identity, or (uid_set)
 * as user: stdout into out; its exit status. */
static int ctl_as(const char *user, const char *const *args)
{
	const char *argv[40];
	int p[2], n = 0, status;
	size_t len = 0;
	ssize_t r;
	pid_t pid;
	uid_t uid = 0;
	gid_t gid = 0;

	argv[n++] = GPROFCTL_PATH;
	argv[n++] = "--socket";
	argv[n++] = D.sock;
	while (*args && n < 38)
		argv[n++] = *args++;
	argv[n] = NULL;
	if (user != NULL)
		assert_int_equal(user_ids(user, &uid, &gid), 0);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		if (user != NULL && (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0))
			_exit(100);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	while ((r = read(p[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = 0;
	close(p[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int ctl(const char *const *args)
{
	return ctl_as(NULL, args);
}

/* A gprofctl trace running in the background: its stderr a pipe (never a
 * terminal), its stdout a file read when it ends. */
struct bg {
	pid_t pid;
	int err;
	char outfile[300];
};

static void bg_start(struct bg *b, const char *const *args)
{
	const char *argv[40];
	int p[2], n = 0, fd;

	argv[n++] = GPROFCTL_PATH;
	argv[n++] = "--socket";
	argv[n++] = D.sock;
	while (*args && n < 38)
		argv[n++] = *args++;
	argv[n] = NULL;
	snprintf(b->outfile, sizeof(b->outfile), "%s/trace.out", outdir);
	assert_int_equal(pipe(p), 0);
	b->pid = fork();
	if (b->pid == 0) {
		fd = open(b->outfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(p[1], 2);
		close(p[0]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	b->err = p[0];
}

/* Reads b's stderr until a line containing needle; that line into line. */
static void bg_line(struct bg *b, const char *needle, char *line, size_t size)
{
	struct pollfd pf = { .fd = b->err, .events = POLLIN };
	size_t n = 0;

	for (;;) {
		assert_int_equal(poll(&pf, 1, TD_TIMEOUT_MS), 1);
		assert_int_equal(read(b->err, line + n, 1), 1);
		if (line[n] != '\n') {
			if (n + 2 < size)
				n++;
			continue;
		}
		line[n] = 0;
		if (strstr(line, needle) != NULL)
			return;
		n = 0;
	}
}

/* Waits for b to end: its exit status; its stdout into out. */
static int bg_end(struct bg *b)
{
	int status, fd;
	ssize_t r;

	assert_int_equal(waitpid(b->pid, &status, 0), b->pid);
	close(b->err);
	fd = open(b->outfile, O_RDONLY);
	assert_true(fd >= 0);
	r = read(fd, out, sizeof(out) - 1);
	out[r > 0 ? r : 0] = 0;
	close(fd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The id printed by "gprofctl trace: trace ID started ...". */
static void id_of(const char *line, char *id, size_t size)
{
	const char *p = strstr(line, "trace: trace ");

	if (p == NULL)
		fail_msg("no trace id in: %s", line);
	p += strlen("trace: trace ");
	snprintf(id, size, "%.*s", (int)strcspn(p, " "), p);
	assert_true(strlen(id) > 0);
}

/* The trace's state as the daemon says (trace_status). */
static int daemon_state(const char *id)
{
	struct tc c;
	struct msg m, r;
	int state;

	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_TRACE_STATUS, 0);
	m.u.trace_ref.trace_id = id;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_STATUS_REPLY);
	state = r.u.trace_info.state;
	msg_deinit(&r);
	tc_close(&c);
	return state;
}

/* The object of trace id in `gprofctl --json traces` output (out), or NULL. */
static cJSON *listed(cJSON *root, const char *id)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "traces"))
		if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t, "trace_id")), id) == 0)
			return t;
	return NULL;
}

/* A trace of one process that never answers (this process, a bare agent):
 * its id is printed at once; it is listed running with its process by
 * traces and status; cancel ends it cancelled, and gprofctl trace exits 5. */
static void test_running_listed_and_cancelled(void **state)
{
	const char *targs[] = { "trace", "--job", "runjob", "--iterations", "5", "--timeout", "60",
	                        "--output-dir", outdir, NULL };
	char line[1024], id[80];
	struct tc ag;
	struct bg b;
	cJSON *root, *t, *p;

	(void)state;
	if (geteuid() != 0)
		skip();
	tc_agent(&ag, D.sock, "runjob");
	bg_start(&b, targs);
	/* the id, on a pipe, before the trace ends */
	bg_line(&b, "gprofctl trace: trace ", line, sizeof(line));
	id_of(line, id, sizeof(id));
	assert_non_null(strstr(line, "gprofctl cancel"));
	assert_int_equal(daemon_state(id), MSG_TRACE_RUNNING);
	{
		const char *args[] = { "--json", "traces", NULL };

		assert_int_equal(ctl(args), 0);
	}
	root = cJSON_Parse(out);
	assert_non_null(root);
	t = listed(root, id);
	assert_non_null(t);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t, "state")), "running");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "procs")), 1);
	p = cJSON_GetArrayItem(cJSON_GetObjectItem(t, "procs"), 0);
	assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "pid")), (int)getpid());
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p, "kind")), "agent");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p, "state")), "matched");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p, "job")), "runjob");
	cJSON_Delete(root);
	{
		const char *args[] = { "traces", NULL };

		assert_int_equal(ctl(args), 0);
		assert_non_null(strstr(out, id));
		assert_non_null(strstr(out, "running (1 matched)"));
	}
	{
		const char *args[] = { "--json", "status", NULL };

		assert_int_equal(ctl(args), 0);
	}
	root = cJSON_Parse(out);
	assert_non_null(root);
	t = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
		cJSON_GetObjectItem(root, "hosts"), 0), "running_traces"), 0);
	assert_non_null(t);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t, "trace_id")), id);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "procs")), 1);
	cJSON_Delete(root);
	{
		const char *args[] = { "status", NULL };

		assert_int_equal(ctl(args), 0);
		assert_non_null(strstr(out, id));
		assert_non_null(strstr(out, "job runjob, 1 process"));
	}
	{
		const char *args[] = { "cancel", id, NULL };

		assert_int_equal(ctl(args), 0);
		assert_non_null(strstr(out, "1 process cancelled"));
	}
	/* cancelled everywhere: the waiting gprofctl, the daemon */
	assert_int_equal(bg_end(&b), 5);
	assert_non_null(strstr(out, "CANCELLED: cancelled by request"));
	assert_null(strstr(out, "FAILED"));
	assert_int_equal(daemon_state(id), MSG_TRACE_CANCELLED);
	{
		const char *args[] = { "--json", "traces", NULL };

		assert_int_equal(ctl(args), 0);
		root = cJSON_Parse(out);
		assert_non_null(root);
		assert_null(listed(root, id)); /* no longer running, nothing stored */
		cJSON_Delete(root);
	}
	{
		/* again: nothing to cancel, said, and exit 2 */
		const char *args[] = { "cancel", id, NULL };

		assert_int_equal(ctl(args), 2);
		assert_non_null(strstr(out, "had already ended cancelled"));
	}
	{
		const char *args[] = { "cancel", "no-such-trace", NULL };

		assert_int_equal(ctl(args), 2);
	}
	tc_close(&ag);
}

/* A bare agent of job arg in a process of its own (not an ancestor of the
 * other agents: a launcher would be left out): registered, it answers
 * nothing. Reports its pid once registered. */
static int bare_main(int outfd, int ctlfd, void *arg)
{
	struct tc ag;
	char line[32];

	tc_agent(&ag, D.sock, arg);
	snprintf(line, sizeof(line), "%d\n", (int)getpid());
	if (write(outfd, line, strlen(line)) != (ssize_t)strlen(line))
		return 1;
	wait_ctl(ctlfd);
	tc_close(&ag);
	return 0;
}

/* Two processes: one delivers, one never answers; a cancel then ends the
 * trace cancelled (not partial), the delivered file stays, gprofctl trace
 * says 1 of 2 delivered, CANCELLED, and exits 5. */
static void test_cancel_after_a_delivery(void **state)
{
	const char *targs[] = { "trace", "--job", "halfjob", "--duration-ms", "50",
	                        "--timeout", "60", "--output-dir", outdir, NULL };
	char line[1024], id[80];
	struct agent a;
	struct child bare;
	struct bg b;
	cJSON *root, *t;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(agent_spawn(&a, D.sock, "halfjob", 0, 3000), 0);
	assert_int_equal(spawn_as(&bare, "root", bare_main, "halfjob"), 0);
	assert_int_equal(child_line(&bare, line, sizeof(line)), 0);
	bg_start(&b, targs);
	bg_line(&b, "gprofctl trace: trace ", line, sizeof(line));
	id_of(line, id, sizeof(id));
	/* gprofctl says each state change on a stderr that is no terminal:
	 * rank 0 delivered; the other never will */
	bg_line(&b, "rank 0: done", line, sizeof(line));
	assert_int_equal(daemon_state(id), MSG_TRACE_RUNNING);
	{
		const char *args[] = { "cancel", id, NULL };

		assert_int_equal(ctl(args), 0);
		assert_non_null(strstr(out, "1 process cancelled"));
	}
	assert_int_equal(bg_end(&b), 5);
	assert_non_null(strstr(out, "1 of 2 matched processes delivered"));
	assert_non_null(strstr(out, "CANCELLED"));
	assert_null(strstr(out, "FAILED"));
	assert_int_equal(daemon_state(id), MSG_TRACE_CANCELLED);
	{
		const char *args[] = { "--json", "traces", id, NULL };

		assert_int_equal(ctl(args), 0);
		root = cJSON_Parse(out);
		t = listed(root, id);
		assert_non_null(t);
		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t, "state")), "cancelled");
		assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "files")), 1);
		cJSON_Delete(root);
	}
	assert_int_equal(child_end(&bare), 0);
	agent_stop(&a);
}

/* "nothing matched" names what the caller may trace (pid, rank, kind),
 * and with nothing registered, how a process registers. */
static void test_nothing_matched_lists(void **state)
{
	struct agent a;
	char want[64];

	(void)state;
	if (geteuid() != 0)
		skip();
	{
		const char *args[] = { "trace", "--job", "nobody-runs-this", "--iterations", "1",
		                       "--output-dir", outdir, NULL };

		assert_int_equal(ctl(args), 2);
		assert_non_null(strstr(out, "KINETO_USE_DAEMON=1"));
		assert_non_null(strstr(out, "gprofctl launch"));
		assert_non_null(strstr(out, "CUDA_INJECTION64_PATH"));
	}
	assert_int_equal(agent_spawn(&a, D.sock, "realjob", 7, 100), 0);
	{
		const char *args[] = { "trace", "--job", "typo", "--iterations", "1",
		                       "--output-dir", outdir, NULL };

		assert_int_equal(ctl(args), 2);
		snprintf(want, sizeof(want), "job realjob: 1 process (pid %d rank 7 agent)",
		         (int)a.pid);
		assert_non_null(strstr(out, want));
	}
	agent_stop(&a);
}

/* The victim's side: a bare agent of its own, and a trace of it that
 * stays running (the agent never answers). Reports "<pid> <trace id>". */
static int victim_running(int outfd, int ctlfd, void *arg)
{
	struct tc ag, c;
	struct msg m, r;
	char line[160];

	(void)arg;
	tc_agent(&ag, D.sock, "vrun");
	if (tc_connect_unix(&c, D.sock) < 0 || tc_hello(&c, MSG_ROLE_CTL) < 0)
		return 2;
	m = tc_trace_req("vrun", 5);
	m.u.trace_start.timeout_ms = 60000;
	if (tc_send(&c, &m) < 0 || tc_recv_type(&c, MSG_TRACE_START_REPLY, &r) < 0 ||
	    r.u.trace_start_reply.procs.n != 1)
		return 3;
	snprintf(line, sizeof(line), "%d %s\n", (int)getpid(), r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	if (write(outfd, line, strlen(line)) != (ssize_t)strlen(line))
		return 4;
	wait_ctl(ctlfd);
	tc_close(&c);
	tc_close(&ag);
	return 0;
}

/* Another user's running trace: not listed for nobody (traces, status),
 * not cancellable by it, its process not named in nobody's "nothing
 * matched"; root sees it. */
static void test_identity(void **state)
{
	struct child v;
	char line[160], id[80], pid[32];
	cJSON *root;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(spawn_as(&v, VICTIM, victim_running, NULL), 0);
	assert_int_equal(child_line(&v, line, sizeof(line)), 0);
	assert_int_equal(sscanf(line, "%31s %79s", pid, id), 2);
	{
		const char *args[] = { "--json", "traces", NULL };

		assert_int_equal(ctl_as(ATTACKER, args), 0);
		root = cJSON_Parse(out);
		assert_non_null(root);
		assert_null(listed(root, id));
		cJSON_Delete(root);
	}
	{
		const char *args[] = { "traces", NULL };

		assert_int_equal(ctl_as(ATTACKER, args), 0);
		assert_null(strstr(out, id));
	}
	{
		const char *args[] = { "status", NULL };

		assert_int_equal(ctl_as(ATTACKER, args), 0);
		assert_null(strstr(out, id));
	}
	{
		const char *args[] = { "cancel", id, NULL };

		assert_int_equal(ctl_as(ATTACKER, args), 2);
	}
	assert_int_equal(daemon_state(id), MSG_TRACE_RUNNING);
	{
		const char *args[] = { "trace", "--job", "vrun", "--iterations", "1",
		                       "--output-dir", "/tmp", NULL };

		assert_int_equal(ctl_as(ATTACKER, args), 2);
		assert_non_null(strstr(out, "processes of other users are, but you may not"));
		assert_null(strstr(out, pid));
	}
	/* root sees it, with its process */
	{
		const char *args[] = { "--json", "traces", NULL };

		assert_int_equal(ctl(args), 0);
		root = cJSON_Parse(out);
		assert_non_null(listed(root, id));
		cJSON_Delete(root);
	}
	{
		const char *args[] = { "status", NULL };

		assert_int_equal(ctl(args), 0);
		assert_non_null(strstr(out, id));
	}
	assert_int_equal(child_end(&v), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_running_listed_and_cancelled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_after_a_delivery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nothing_matched_lists, setup, teardown),
		cmocka_unit_test_setup_teardown(test_identity, setup, teardown),
	};
	char cmd[400];
	int rc;

	/* acting as two users needs root: say SKIP, never OK */
	if (geteuid() != 0) {
		fprintf(stderr, "test-running: not root: cannot act as two users; SKIP\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(outdir) == NULL)
		return 1;
	chmod(outdir, 0755);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", outdir);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}
