/*
 * Unit tests for daemon/config.c: the option table read from YAML, units,
 * sections, every kind of mistake reported with file:line, failures that
 * leave the config untouched, cross-option rules, a dump that loads
 * back to the same configuration, files that may be cut short refused, and
 * the default file's path.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

static int parse(struct config *c, const char *yaml, struct perr *err)
{
	return config_parse(c, yaml, strlen(yaml), "t.yaml", err);
}

static void expect_error(const char *yaml, const char *needle)
{
	struct config c, before;
	struct perr err = { "" };

	config_defaults(&c);
	before = c;
	if (parse(&c, yaml, &err) == 0 || strstr(err.msg, needle) == NULL)
		fail_msg("yaml %s: got \"%s\", want \"%s\"", yaml, err.msg, needle);
	assert_memory_equal(&c, &before, sizeof(c)); /* nothing applied */
}

static void test_defaults(void **state)
{
	struct config c;

	(void)state;
	config_defaults(&c);
	assert_string_equal(c.tcp, "127.0.0.1:1778");
	assert_string_equal(c.metrics, "127.0.0.1:9773");
	assert_int_equal(c.max_frame_bytes, 1u << 20);
	assert_int_equal(c.loopback_identity, 1);
	assert_int_equal(config_check(&c, NULL), 0);
	/* GPROF_SOCKET names the socket */
	setenv("GPROF_SOCKET", "/tmp/x/g.sock", 1);
	config_defaults(&c);
	assert_string_equal(c.socket_path, "/tmp/x/g.sock");
	unsetenv("GPROF_SOCKET");
}

static void test_values_and_units(void **state)
{
	struct config c;
	struct perr err;

	(void)state;
	config_defaults(&c);
	assert_int_equal(parse(&c,
		"# comment\n"
		"tcp: \"[::1]:1999\"\n"
		"state_dir: /srv/gprofd\n"
		"log_level: debug\n"
		"trace_timeout: 5m\n"
		"heartbeat_interval: 2s\n"
		"loopback_identity: no\n"
		"auth_token_file: /etc/gprofd/token\n"
		"limits:\n"
		"  frame_bytes: 2MiB\n"
		"  trace_bytes: 3G\n"
		"  connections: 10\n"
		"retention:\n"
		"  max_age: 2d\n", &err), 0);
	assert_string_equal(c.tcp, "[::1]:1999");
	assert_string_equal(c.state_dir, "/srv/gprofd");
	assert_int_equal(c.log_level, 7);
	assert_int_equal(c.trace_timeout_s, 300);
	assert_int_equal(c.heartbeat_ms, 2000);
	assert_int_equal(c.loopback_identity, 0);
	assert_int_equal(c.max_frame_bytes, 2u << 20);
	assert_int_equal(c.max_trace_bytes, 3ull << 30);
	assert_int_equal(c.max_connections, 10);
	assert_int_equal(c.retention_max_age_s, 2 * 86400);
	assert_int_equal(config_check(&c, NULL), 0);
	/* an empty file is all defaults */
	config_defaults(&c);
	assert_int_equal(parse(&c, "", &err), 0);
	assert_int_equal(parse(&c, "# nothing\n", &err), 0);
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("tcp: 1.2.3.4\n", "t.yaml:1: tcp: \"1.2.3.4\" is not HOST:PORT");
	expect_error("socket: /tmp/s\nbogus: 2\n", "t.yaml:2: unknown option \"bogus\"");
	expect_error("limits:\n  nope: 1\n", "t.yaml:2: unknown option \"limits.nope\"");
	expect_error("nosection:\n  a: 1\n", "t.yaml:1: unknown section \"nosection\"");
	expect_error("limits:\n  connections: 0\n", "outside the allowed range 1..1000000");
	expect_error("limits:\n  frame_bytes: 12Q\n", "a size such as 512M");
	expect_error("trace_timeout: forever\n", "a duration such as 30s");
	expect_error("log_level: loud\n", "is not one of err, warning");
	expect_error("state_dir: relative/dir\n", "must be an absolute path");
	expect_error("tcp: \"127.0.0.1:1\"\ntcp: \"127.0.0.1:2\"\n", "t.yaml:2: tcp: given twice");
	expect_error("limits: [1, 2]\n", "expected a single value");
	expect_error("- a\n- b\n", "must be a mapping");
	expect_error("tcp: [unclosed\n", "t.yaml:");
	expect_error("loopback_identity: maybe\n", "is not true or false");
	expect_error("admin_group: \"a\\tb\"\n", "control character");
}

static void test_cross_rules(void **state)
{
	struct config c;
	struct perr err;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_set(&c, "tcp", "0.0.0.0:1778", &err), 0);
	assert_int_equal(config_check(&c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "auth_token_file must be set"));
	assert_int_equal(config_set(&c, "auth_token_file", "/etc/t", &err), 0);
	assert_int_equal(config_check(&c, &err), 0);
	config_defaults(&c);
	assert_int_equal(config_set(&c, "loopback_identity", "false", &err), 0);
	assert_int_equal(config_check(&c, &err), -EINVAL);
	assert_int_equal(config_set(&c, "nope", "1", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unknown option"));
}

static void test_dump_loads_back(void **state)
{
	struct config c, back;
	struct perr err;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	config_defaults(&c);
	assert_int_equal(parse(&c, "limits:\n  trace_bytes: 1536M\nretention:\n  max_age: 90m\n"
	                       "heartbeat_interval: 750ms\nadmin_group: \"it's \\\\ \\\"odd\\\"\"\n", &err), 0);
	assert_string_equal(c.admin_group, "it's \\ \"odd\"");
	f = open_memstream(&text, &len);
	config_dump(&c, f);
	fclose(f);
	config_defaults(&back);
	if (config_parse(&back, text, len, "dump", &err) != 0)
		fail_msg("dump does not load: %s\n%s", err.msg, text);
	assert_memory_equal(&c, &back, sizeof(c));
	free(text);
}

static void test_addresses(void **state)
{
	char host[64];
	int port;

	(void)state;
	assert_int_equal(config_split_addr("10.0.0.1:80", host, sizeof(host), &port), 0);
	assert_string_equal(host, "10.0.0.1");
	assert_int_equal(port, 80);
	assert_int_equal(config_split_addr("[fe80::1]:1778", host, sizeof(host), &port), 0);
	assert_string_equal(host, "fe80::1");
	assert_int_equal(config_split_addr("h:99999", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(config_split_addr(":80", host, sizeof(host), &port), -EINVAL);
	assert_true(config_addr_is_loopback("127.0.0.1:1"));
	assert_true(config_addr_is_loopback("[::1]:1"));
	assert_true(config_addr_is_loopback("localhost:1"));
	assert_false(config_addr_is_loopback("0.0.0.0:1"));
}

/* Writes text to a new file under dir; returns its path. */
static const char *put(const char *dir, const char *name, const char *text)
{
	size_t len = strlen(text);
	static char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
	return path;
}

/* config_load takes only a whole file: empty, unterminated, or not a
 * regular file is refused with nothing applied; {} and a comment mean
 * every default; a missing file is -ENOENT (main decides if that is fine). */
static void test_load_whole_files_only(void **state)
{
	char dir[] = "/tmp/gprof-config-XXXXXX", path[300];
	struct config c, before;
	struct perr err = { "" };

	(void)state;
	assert_non_null(mkdtemp(dir));
	config_defaults(&c);
	assert_int_equal(parse(&c, "retention:\n  max_age: 300d\n", &err), 0);
	before = c;
	assert_int_equal(config_load(&c, put(dir, "empty.yaml", ""), &err), -ENODATA);
	assert_non_null(strstr(err.msg, "empty.yaml is empty"));
	assert_int_equal(config_load(&c, put(dir, "cut.yaml", "retention:\n  max_age: 300"),
	                             &err), -ENODATA);
	assert_non_null(strstr(err.msg, "cut.yaml: no newline at its end"));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(config_load(&c, path, &err), -EFBIG); /* and did not block */
	snprintf(path, sizeof(path), "%s/none.yaml", dir);
	assert_int_equal(config_load(&c, path, &err), -ENOENT);
	assert_memory_equal(&c, &before, sizeof(c));
	assert_int_equal(config_load(&c, put(dir, "c.yaml", "# nothing\n"), &err), 0);
	assert_int_equal(c.retention_max_age_s, 300 * 86400); /* over c: kept */
	config_defaults(&c);
	assert_int_equal(config_load(&c, put(dir, "b.yaml", "{}\n"), &err), 0);
	assert_int_equal(config_load(&c, put(dir, "d.yaml", "retention:\n  max_age: 3d\n"),
	                             &err), 0);
	assert_int_equal(c.retention_max_age_s, 3 * 86400);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	assert_int_equal(system(path), 0);
}

/* The default file: systemd's CONFIGURATION_DIRECTORY (its first entry),
 * else root's /etc/gprofd/gprofd.yaml (these tests run as root in CI). */
static void test_default_path(void **state)
{
	char p[256];

	(void)state;
	setenv("CONFIGURATION_DIRECTORY", "/etc/gprofd:/etc/other", 1);
	config_default_path(p, sizeof(p));
	assert_string_equal(p, "/etc/gprofd/gprofd.yaml");
	setenv("CONFIGURATION_DIRECTORY", "/x/conf", 1);
	config_default_path(p, sizeof(p));
	assert_string_equal(p, "/x/conf/gprofd.yaml");
	unsetenv("CONFIGURATION_DIRECTORY");
	config_default_path(p, sizeof(p));
	if (geteuid() == 0)
		assert_string_equal(p, "/etc/gprofd/gprofd.yaml");
	else
		assert_non_null(strstr(p, "/gprofd/gprofd.yaml"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values_and_units),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_cross_rules),
		cmocka_unit_test(test_dump_loads_back),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_load_whole_files_only),
		cmocka_unit_test(test_default_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
