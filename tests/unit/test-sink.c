/* Unit tests for ctl/sink.c: a download becomes its file only when size and
 * CRC-32 match the daemon's download_end; otherwise nothing remains. */
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
#include <zlib.h>

#include "ctl.h"

static char dir[] = "/tmp/gprofctl-sink-XXXXXX";

static void feed(struct sink *s, uint32_t transfer, const char *data)
{
	struct frame f = { .kind = FRAME_CHUNK, .data = (const uint8_t *)data, .len = strlen(data),
	                   .transfer = transfer, .offset = s->bytes };
	char err[200];

	assert_int_equal(sink_write(s, &f, err, sizeof(err)), 0);
}

static size_t entries(void)
{
	char cmd[300];
	FILE *p;
	size_t n = 0;
	char line[300];

	snprintf(cmd, sizeof(cmd), "ls -A %s/t", dir);
	p = popen(cmd, "r");
	while (fgets(line, sizeof(line), p))
		n++;
	pclose(p);
	return n;
}

static void test_complete_download(void **state)
{
	struct msg_download_end e = { 1, 11, 0 };
	char sub[300], err[200], path[400];
	struct sink s;
	struct stat st;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/t", dir);
	assert_int_equal(sink_open(&s, sub, "a.gz", 1, 11, err, sizeof(err)), 0);
	feed(&s, 1, "hello ");
	feed(&s, 1, "world");
	e.crc32 = crc32(0, (const Bytef *)"hello world", 11);
	assert_int_equal(sink_finish(&s, &e, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/a.gz", sub);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 11);
	assert_int_equal(entries(), 1); /* no .part left */
	unlink(path);
}

/* Until download_end nothing has a name (a SIGKILL then leaves nothing);
 * a file already there is replaced whole, and no .part stays. */
static void test_named_only_when_whole_and_overwrites(void **state)
{
	struct msg_download_end e = { 6, 3, 0 };
	char sub[300], err[200], path[400], got[8] = { 0 };
	struct sink s;
	FILE *f;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/t", dir);
	snprintf(path, sizeof(path), "%s/f.gz", sub);
	assert_int_equal(sink_open(&s, sub, "f.gz", 6, 3, err, sizeof(err)), 0);
	feed(&s, 6, "old");
	assert_int_equal(entries(), s.unnamed ? 0 : 1);
	e.crc32 = crc32(0, (const Bytef *)"old", 3);
	assert_int_equal(sink_finish(&s, &e, err, sizeof(err)), 0);
	assert_int_equal(entries(), 1);
	/* the same name again: the old file stays whole until the new one is */
	assert_int_equal(sink_open(&s, sub, "f.gz", 7, 3, err, sizeof(err)), 0);
	feed(&s, 7, "new");
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(got, 1, sizeof(got), f), 3);
	fclose(f);
	assert_string_equal(got, "old");
	e.transfer = 7;
	e.crc32 = crc32(0, (const Bytef *)"new", 3);
	assert_int_equal(sink_finish(&s, &e, err, sizeof(err)), 0);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(got, 1, sizeof(got), f), 3);
	fclose(f);
	assert_string_equal(got, "new");
	assert_int_equal(entries(), 1); /* no .part left */
	unlink(path);
}

static void test_damaged_download_leaves_nothing(void **state)
{
	struct msg_download_end e = { 2, 11, 0 };
	char sub[300], err[200];
	struct sink s;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/t", dir);
	assert_int_equal(sink_open(&s, sub, "b.gz", 2, 11, err, sizeof(err)), 0);
	feed(&s, 2, "hello world");
	e.crc32 = 12345; /* not the data's */
	assert_int_equal(sink_finish(&s, &e, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "damaged"));
	assert_int_equal(entries(), 0);
	/* short: fewer bytes than announced */
	assert_int_equal(sink_open(&s, sub, "c.gz", 3, 100, err, sizeof(err)), 0);
	feed(&s, 3, "only part");
	e.transfer = 3;
	e.bytes = 9;
	e.crc32 = crc32(0, (const Bytef *)"only part", 9);
	assert_int_equal(sink_finish(&s, &e, err, sizeof(err)), -1);
	assert_int_equal(entries(), 0);
	/* aborted midway (the host failed) */
	assert_int_equal(sink_open(&s, sub, "d.gz", 4, 100, err, sizeof(err)), 0);
	feed(&s, 4, "some");
	sink_abort(&s);
	assert_int_equal(entries(), 0);
}

static void test_out_of_order_refused(void **state)
{
	struct frame f = { .kind = FRAME_CHUNK, .data = (const uint8_t *)"x", .len = 1,
	                   .transfer = 5, .offset = 7 };
	char sub[300], err[200];
	struct sink s;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/t", dir);
	assert_int_equal(sink_open(&s, sub, "e.gz", 5, 8, err, sizeof(err)), 0);
	assert_int_equal(sink_write(&s, &f, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out of order"));
	sink_abort(&s);
	assert_int_equal(entries(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_complete_download),
		cmocka_unit_test(test_named_only_when_whole_and_overwrites),
		cmocka_unit_test(test_damaged_download_leaves_nothing),
		cmocka_unit_test(test_out_of_order_refused),
	};
	char cmd[300];
	int r;

	if (mkdtemp(dir) == NULL)
		return 1;
	r = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return r;
}
