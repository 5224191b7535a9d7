/* Unit tests for proto/fsutil.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <stdlib.h>
#include <unistd.h>

#include "fsutil.h"

static void test_mkdir_p(void **state)
{
	char dir[] = "/tmp/gprof-fsutil-XXXXXX", path[200], cmd[250];
	struct stat st;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	assert_int_equal(fsutil_mkdir_p(path, 0700), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(fsutil_mkdir_p(path, 0700), 0); /* exists: fine */
	snprintf(path, sizeof(path), "%s/file", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(fsutil_mkdir_p(path, 0700), -ENOTDIR);    /* a file in the way */
	snprintf(path, sizeof(path), "%s/file/sub", dir);
	assert_int_equal(fsutil_mkdir_p(path, 0700), -ENOTDIR);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* The agent's and gprofctl's default socket: $GPROF_SOCKET first, then the
 * system one when present or when there is no per-user runtime dir. */
static void test_client_socket(void **state)
{
	char buf[256];
	int sys = access("/run/gprofd/gprofd.sock", F_OK) == 0;

	(void)state;
	setenv("GPROF_SOCKET", "/tmp/x.sock", 1);
	assert_string_equal(fsutil_client_socket(buf, sizeof(buf)), "/tmp/x.sock");
	unsetenv("GPROF_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
	assert_string_equal(fsutil_client_socket(buf, sizeof(buf)), "/run/gprofd/gprofd.sock");
	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	assert_string_equal(fsutil_client_socket(buf, sizeof(buf)),
	                    sys ? "/run/gprofd/gprofd.sock" : "/run/user/1000/gprofd/gprofd.sock");
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_mkdir_p),
	                                    cmocka_unit_test(test_client_socket) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
