/*
 * attack.h: what the attack suites (test-attack.c, test-attack-ids.c)
 * share: two real users, children running as one of them, and the daemon
 * each test starts on a private socket (setup/teardown). Tests of issue
 * 23; they run as root (CI does): acting as two users needs it.
 */
#ifndef GPROF_TEST_ATTACK_H
#define GPROF_TEST_ATTACK_H

#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

#define VICTIM "gprofvictim"
#define ATTACKER "nobody"

/* the daemon of the test running now */
extern struct td D;

/* A child process running as another user: out carries what it reports,
 * closing ctl ends it. */
struct child {
	pid_t pid;
	int out;
	int ctl;
};

/* The uid and gid of user name, created (a system user, no home) when
 * absent. 0 or -1. */
int user_ids(const char *name, uid_t *uid, gid_t *gid);
/* Forks a child that becomes user and runs fn(out, ctl, arg), then exits
 * with fn's result (0: every check held, else the failed check's number). */
int spawn_as(struct child *ch, const char *user, int (*fn)(int, int, void *), void *arg);
/* Ends the child (closes its ctl pipe) and returns its exit status. */
int child_end(struct child *ch);
/* Reads one line the child reports (with a safety timeout). */
int child_line(struct child *ch, char *buf, size_t size);
/* Returns when ctl's write end closes. */
void wait_ctl(int ctl);
/* The victim: an agent-loaded process of its own and, when trace is set, a
 * stored trace of it. Reports "<agent pid> <trace id>". */
int victim_main(int out, int ctl, void *arg);
/* cmocka fixtures: D started with the defaults (as root; else nothing, and
 * the tests skip), and finished. */
int setup(void **state);
int teardown(void **state);

#endif
