/*
 * Integration tests of issue 23, cases about who a process is, with real
 * processes and two real users (`nobody` attacks, `gprofvictim` is
 * attacked; attack.h), each failing on the code before its fix:
 *   12 a Kineto datagram's ancestor list declared another user's process a
 *      launcher, skipped from that user's traces;
 *   13 a registration outlived its process (the connection handed to a
 *      child), so a new process given the same pid was refused; and a
 *      Kineto client's pid, reused by another user's process, made that
 *      process taken for the old client.
 * The program re-executes itself as a registering or polling child
 * (--register-self, --kineto-poll). They run as root (CI does).
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

static char kname[64];
static const char *self_exe;

/* ---- case 12: a Kineto datagram naming another user's process its parent ---- */

static int setup_kineto(void **state)
{
	char yaml[128];

	(void)state;
	snprintf(kname, sizeof(kname), "gprofd-attack-%d", (int)getpid());
	snprintf(yaml, sizeof(yaml), "kineto:\n  socket_name: %s\n", kname);
	return td_start(&D, yaml, NULL);
}

/* Kineto's poll in job 4242, naming parent as this process's parent;
 * waits for the daemon's answer. 0 or the failed step. */
static int kineto_poll(int32_t parent)
{
	struct kipc_req r = { KIPC_REQ_ACTIVITIES, 2, 4242, { (int32_t)getpid(), parent } };
	uint8_t buf[KIPC_HDR_SIZE + KIPC_CONFIG_MAX];
	struct sockaddr_un me, daemon;
	socklen_t mlen, dlen;
	char cname[64];
	int fd, len;

	snprintf(cname, sizeof(cname), "dynoconfigclient-attack-%d", (int)getpid());
	kipc_addr_abstract(&me, &mlen, cname);
	kipc_addr_abstract(&daemon, &dlen, kname);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, mlen) != 0)
		return 1;
	len = kipc_encode_req(buf, sizeof(buf), &r);
	if (sendto(fd, buf, (size_t)len, 0, (struct sockaddr *)&daemon, dlen) != len)
		return 2;
	if (poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, TD_TIMEOUT_MS) != 1 ||
	    recv(fd, buf, sizeof(buf), 0) <= 0)
		return 3;
	close(fd);
	return 0;
}

/* The liar: the victim's process as its parent, in the victim's job. */
static int kineto_liar_main(int out, int ctl, void *arg)
{
	(void)out;
	(void)ctl;
	return kineto_poll((int32_t)(intptr_t)arg);
}

/* An honest Kineto client that polls once, reports its pid and exits. */
static int kineto_once_main(int out, int ctl, void *arg)
{
	(void)ctl;
	(void)arg;
	if (kineto_poll((int32_t)getppid()) != 0)
		return 1;
	dprintf(out, "%d\n", (int)getpid());
	return 0;
}

static void test_kineto_ancestors_from_the_kernel(void **state)
{
	struct child victim, liar;
	char line[128];
	int vpid, found = 0;
	struct tc c;
	struct msg m, r;
	size_t i;

	(void)state;
	assert_int_equal(spawn_as(&victim, VICTIM, victim_main, "4242"), 0);
	assert_int_equal(child_line(&victim, line, sizeof(line)), 0);
	vpid = atoi(line);
	assert_int_equal(spawn_as(&liar, ATTACKER, kineto_liar_main, (void *)(intptr_t)vpid), 0);
	assert_int_equal(child_end(&liar), 0);
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_PROCESS_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.process_list_reply.procs.n, 2); /* the victim, and the liar */
	for (i = 0; i < r.u.process_list_reply.procs.n; i++)
		if (r.u.process_list_reply.procs.v[i].pid == vpid) {
			found++;
			/* not a launcher: it is traced */
			assert_false(r.u.process_list_reply.procs.v[i].launcher);
		} else {
			/* the liar's real ancestors: its real parent, not the victim */
			const struct msg_ints *pp = &r.u.process_list_reply.procs.v[i].ppids;

			assert_true(pp->n >= 1);
			assert_int_equal(pp->v[0], getpid());
		}
	assert_int_equal(found, 1);
	msg_deinit(&r);
	tc_close(&c);
	assert_int_equal(child_end(&victim), 0);
}

/* A Kineto client of the victim polls and exits; a process of the attacker
 * is given its pid and polls: it is registered as itself, not taken for
 * the victim's client (whose configs, naming where to write a trace, it
 * would receive). */
static void test_kineto_pid_reuse_is_another_process(void **state)
{
	struct child victim;
	char line[32], *argv[5];
	int status, tries, users = 0;
	pid_t old = -1, again = -1;
	struct tc c;
	struct msg m, r;
	size_t i;

	(void)state;
	for (tries = 0; tries < 10 && again < 0; tries++) {
		struct clone_args ca;

		assert_int_equal(spawn_as(&victim, VICTIM, kineto_once_main, NULL), 0);
		assert_int_equal(child_line(&victim, line, sizeof(line)), 0);
		assert_int_equal(child_end(&victim), 0);
		old = atoi(line);
		memset(&ca, 0, sizeof(ca));
		ca.exit_signal = SIGCHLD;
		ca.set_tid = (uint64_t)(uintptr_t)&old;
		ca.set_tid_size = 1;
		again = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (again == 0) {
			/* a fresh program, which becomes the attacker and polls */
			argv[0] = (char *)self_exe;
			argv[1] = "--kineto-poll";
			argv[2] = kname;
			argv[3] = ATTACKER;
			argv[4] = NULL;
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		if (again < 0)
			assert_int_equal(errno, EEXIST);
	}
	assert_int_equal(again, old);
	assert_int_equal(waitpid(again, &status, 0), again);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_PROCESS_LIST, 0);
	tc_call(&c, &m, &r);
	for (i = 0; i < r.u.process_list_reply.procs.n; i++)
		if (r.u.process_list_reply.procs.v[i].pid == old) {
			users++;
			assert_int_equal(r.u.process_list_reply.procs.v[i].uid,
			                 getpwnam(ATTACKER)->pw_uid);
		}
	assert_int_equal(users, 1);
	msg_deinit(&r);
	tc_close(&c);
}

/* ---- case 13: a registration that outlives its process ---- */

/* Registers this process as an agent on a fresh connection; prints
 * "ok" or the daemon's error. The process that runs it was given a pid
 * another process registered and left behind. */
static int register_self(const char *sock)
{
	struct tc c;
	struct msg m, r;

	if (tc_connect_unix(&c, sock) < 0 || tc_hello(&c, MSG_ROLE_AGENT) < 0)
		return 1;
	msg_init(&m, MSG_REGISTER, 0);
	m.u.reg.pid = getpid();
	m.u.reg.job_id = "reuse";
	if (tc_send(&c, &m) < 0 || tc_recv(&c, &r) < 0)
		return 2;
	printf("%s\n", r.type == MSG_REGISTER_REPLY ? "ok" :
	       r.type == MSG_ERROR ? r.u.error.message : "?");
	fflush(stdout);
	msg_deinit(&r);
	tc_close(&c);
	return 0;
}

/* Registers, hands the connection to a child that lives on (until ctl
 * closes), and exits: the registered pid is free, the connection open. */
static pid_t register_and_leave(int ctl_r, int ctl_w)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct tc c;
		struct msg m, r;

		if (tc_connect_unix(&c, D.sock) < 0 || tc_hello(&c, MSG_ROLE_AGENT) < 0)
			_exit(1);
		msg_init(&m, MSG_REGISTER, 0);
		m.u.reg.pid = getpid();
		m.u.reg.job_id = "reuse";
		if (tc_send(&c, &m) < 0 || tc_recv(&c, &r) < 0 || r.type != MSG_REGISTER_REPLY)
			_exit(2);
		if (fork() == 0) { /* the heir keeps the connection */
			close(ctl_w);
			wait_ctl(ctl_r);
			_exit(0);
		}
		_exit(0);
	}
	return pid;
}

static void test_registration_dies_with_its_process(void **state)
{
	char out[256] = "";
	int ctl[2], res[2], status, tries;
	pid_t old = -1, again = -1;
	ssize_t n;

	(void)state;
	assert_int_equal(pipe2(ctl, O_CLOEXEC), 0);
	assert_int_equal(pipe2(res, O_CLOEXEC), 0);
	/* a new process with the old pid: clone3's set_tid asks for that pid
	 * exactly (root may); another process may take it first, so retry */
	for (tries = 0; tries < 10 && again < 0; tries++) {
		struct clone_args ca;

		old = register_and_leave(ctl[0], ctl[1]);
		assert_true(old > 0);
		assert_int_equal(waitpid(old, &status, 0), old);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		memset(&ca, 0, sizeof(ca));
		ca.exit_signal = SIGCHLD;
		ca.set_tid = (uint64_t)(uintptr_t)&old;
		ca.set_tid_size = 1;
		again = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (again == 0) {
			/* a fresh program: the registration runs in a clean process */
			dup2(res[1], 1);
			execl("/proc/self/exe", self_exe, "--register-self", D.sock, (char *)NULL);
			_exit(127);
		}
		if (again < 0)
			assert_int_equal(errno, EEXIST);
	}
	assert_int_equal(again, old);
	close(res[1]);
	n = read(res[0], out, sizeof(out) - 1);
	assert_true(n > 0);
	out[n] = 0;
	assert_int_equal(waitpid(again, &status, 0), again);
	fprintf(stderr, "pid %d registered again: %s", (int)again, out);
	assert_string_equal(out, "ok\n");
	assert_true(td_wait_log(&D, "the process that registered it has exited", NULL));
	close(ctl[1]); /* the heirs (init's children now) end */
	close(ctl[0]);
	close(res[0]);
}

int main(int argc, char **argv)
{
	/* every case acts as other local users: all need root (meson's attack-ids-root) */
	const struct CMUnitTest root_tests[] = {
		cmocka_unit_test_setup_teardown(test_kineto_ancestors_from_the_kernel, setup_kineto,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_kineto_pid_reuse_is_another_process,
		                                setup_kineto, teardown),
		cmocka_unit_test_setup_teardown(test_registration_dies_with_its_process, setup,
		                                teardown),
	};

	if (argc == 3 && strcmp(argv[1], "--register-self") == 0)
		return register_self(argv[2]);
	if (argc == 4 && strcmp(argv[1], "--kineto-poll") == 0) {
		uid_t uid;
		gid_t gid;

		snprintf(kname, sizeof(kname), "%s", argv[2]);
		if (user_ids(argv[3], &uid, &gid) < 0 || setgroups(0, NULL) != 0 ||
		    setgid(gid) != 0 || setuid(uid) != 0)
			return 100;
		return kineto_poll((int32_t)getppid());
	}
	self_exe = argv[0];
	signal(SIGPIPE, SIG_IGN);
	return td_main(argc, argv, NULL, 0, root_tests, TD_NELEM(root_tests));
}
