/*
 * attack.c: the helpers of the attack suites (attack.h): users, children
 * running as them, the daemon fixture.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <arpa/inet.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dyno.h"
#include "harness.h"
#include "kipc.h"

#include "attack.h"

struct td D;

/* The uid and gid of user name, created (a system user, no home) when
 * absent. 0 or -1. */
int user_ids(const char *name, uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam(name);
	char cmd[160];

	if (pw == NULL) {
		snprintf(cmd, sizeof(cmd), "useradd --system --no-create-home --shell /usr/sbin/nologin "
		         "%s >/dev/null 2>&1", name);
		if (system(cmd) != 0 || (pw = getpwnam(name)) == NULL)
			return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

/* Forks a child that becomes user and runs fn(out, ctl, arg), then exits
 * with fn's result (0: every check held, else the failed check's number). */
int spawn_as(struct child *ch, const char *user, int (*fn)(int, int, void *), void *arg)
{
	int out[2], ctl[2];
	uid_t uid;
	gid_t gid;

	if (user_ids(user, &uid, &gid) < 0 || pipe2(out, O_CLOEXEC) != 0 ||
	    pipe2(ctl, O_CLOEXEC) != 0)
		return -1;
	ch->pid = fork();
	if (ch->pid == 0) {
		close(out[0]);
		close(ctl[1]);
		if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
			_exit(100);
		_exit(fn(out[1], ctl[0], arg));
	}
	close(out[1]);
	close(ctl[0]);
	ch->out = out[0];
	ch->ctl = ctl[1];
	return ch->pid > 0 ? 0 : -1;
}

/* Ends the child (closes its ctl pipe) and returns its exit status. */
int child_end(struct child *ch)
{
	int status;

	close(ch->ctl);
	close(ch->out);
	if (waitpid(ch->pid, &status, 0) != ch->pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Reads one line the child reports (with a safety timeout). */
int child_line(struct child *ch, char *buf, size_t size)
{
	struct pollfd p = { .fd = ch->out, .events = POLLIN };
	size_t n = 0;

	while (n + 1 < size) {
		if (poll(&p, 1, TD_TIMEOUT_MS) != 1 || read(ch->out, buf + n, 1) != 1)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	return 0;
}

void wait_ctl(int ctl)
{
	char b;

	while (read(ctl, &b, 1) > 0)
		;
}

int setup(void **state)
{
	(void)state;
	return td_start(&D, NULL, NULL);
}

int teardown(void **state)
{
	(void)state;
	td_signal(&D, SIGCONT); /* a test that failed with the daemon stopped */
	return td_finish(&D);
}

/* The victim: an agent-loaded process of its own and, when trace is set, a
 * stored trace of it. Reports "<agent pid> <trace id>". */
int victim_main(int out, int ctl, void *arg)
{
	const char *job = arg;
	char line[128], id[64] = "-";
	struct agent a;
	struct tc c;
	struct msg m, r;
	int state;

	if (agent_spawn(&a, D.sock, job, 0, 2000) != 0)
		return 1;
	if (strcmp(job, "vjob") == 0) {
		if (tc_connect_unix(&c, D.sock) < 0 || tc_hello(&c, MSG_ROLE_CTL) < 0)
			return 2;
		m = tc_trace_req(job, 1);
		m.u.trace_start.follow = true;
		if (tc_send(&c, &m) < 0 || tc_recv_type(&c, MSG_TRACE_START_REPLY, &r) < 0)
			return 3;
		snprintf(id, sizeof(id), "%s", r.u.trace_start_reply.trace_id);
		msg_deinit(&r);
		do {
			if (tc_recv_type(&c, MSG_TRACE_PROGRESS, &r) < 0)
				return 4;
			state = r.u.trace_info.state;
			msg_deinit(&r);
		} while (state == MSG_TRACE_RUNNING);
		if (state != MSG_TRACE_DONE)
			return 5;
		tc_close(&c);
	}
	snprintf(line, sizeof(line), "%d %s\n", (int)a.pid, id);
	if (write(out, line, strlen(line)) != (ssize_t)strlen(line))
		return 6;
	wait_ctl(ctl);
	agent_stop(&a);
	return 0;
}
