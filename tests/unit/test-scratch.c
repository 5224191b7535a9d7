/* Unit tests for agent/scratch.c (issue 43, cases 4 and 7): a burst's file
 * has no name in its directory while the agent has it (so nothing there
 * can be taken first or left behind), it is the process's own (a regular
 * file, mode 0600, no link); a copy kept when the daemon cannot take it
 * gets a new name with a random part each time, mode 0600, the same bytes;
 * a directory the agent cannot write is refused with what to do. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "scratch.h"
#include "state.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test-scratch-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	setenv("GPROF_AGENT_TRACE_DIR", dir, 1);
	A.pid = (int)getpid();
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The number of entries in dir, . and .. left out. */
static int entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void test_no_name(void **state)
{
	char why[300], buf[8];
	struct stat st;
	int fd;

	(void)state;
	fd = scratch_new(why, sizeof(why));
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	assert_int_equal(write(fd, "trace", 5), 5);
	assert_int_equal(entries(), 0); /* nothing in the directory to take */
	assert_int_equal(pread(fd, buf, 5, 0), 5);
	assert_memory_equal(buf, "trace", 5);
	close(fd);
	assert_int_equal(entries(), 0);
}

static void test_keep(void **state)
{
	char why[300], a[600], b[600], buf[16], want[40];
	struct stat st;
	int fd, k;

	(void)state;
	fd = scratch_new(why, sizeof(why));
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789", 10), 10);
	assert_int_equal(scratch_keep(fd, "t1", ".pt.trace.json.gz", a, sizeof(a)), 0);
	assert_int_equal(scratch_keep(fd, "t1", ".pt.trace.json.gz", b, sizeof(b)), 0);
	assert_string_not_equal(a, b); /* a random part, new each time */
	snprintf(want, sizeof(want), "gprof-%d-t1-", (int)getpid());
	assert_true(strncmp(strrchr(a, '/') + 1, want, strlen(want)) == 0);
	assert_non_null(strstr(a, ".pt.trace.json.gz"));
	assert_int_equal(lstat(a, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, 10);
	k = open(a, O_RDONLY);
	assert_int_equal(read(k, buf, sizeof(buf)), 10);
	assert_memory_equal(buf, "0123456789", 10);
	close(k);
	close(fd);
	assert_int_equal(entries(), 2); /* the two copies, nothing else */
}

static void test_unwritable(void **state)
{
	char why[300];

	(void)state;
	setenv("GPROF_AGENT_TRACE_DIR", "/nonexistent/gprof", 1);
	assert_true(scratch_new(why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "/nonexistent/gprof"));
	assert_non_null(strstr(why, "GPROF_AGENT_TRACE_DIR"));
	setenv("GPROF_AGENT_TRACE_DIR", dir, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwritable, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
