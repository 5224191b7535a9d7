/* Unit tests for proto/pbuf.c: growth, the size ceiling, consume. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pbuf.h"

static void test_append_grows(void **state)
{
	struct pbuf b;
	char chunk[1000];
	int i;

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	pbuf_init(&b, 0);
	for (i = 0; i < 100; i++)
		assert_int_equal(pbuf_append(&b, chunk, sizeof(chunk)), 0);
	assert_int_equal(b.len, 100000);
	assert_true(b.cap >= b.len);
	assert_int_equal(b.data[99999], 'x');
	pbuf_deinit(&b);
	assert_null(b.data);
}

static void test_max_enforced(void **state)
{
	struct pbuf b;
	char chunk[100] = { 0 };

	(void)state;
	pbuf_init(&b, 250);
	assert_int_equal(pbuf_append(&b, chunk, 100), 0);
	assert_int_equal(pbuf_append(&b, chunk, 100), 0);
	assert_int_equal(pbuf_append(&b, chunk, 100), -ENOBUFS);
	assert_int_equal(b.len, 200); /* a refused append changes nothing */
	assert_int_equal(pbuf_append(&b, chunk, 50), 0);
	assert_int_equal(b.len, 250);
	assert_true(b.cap <= 250);
	pbuf_deinit(&b);
}

static void test_consume(void **state)
{
	struct pbuf b;

	(void)state;
	pbuf_init(&b, 0);
	pbuf_append(&b, "abcdef", 6);
	pbuf_consume(&b, 2);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, "cdef", 4);
	pbuf_consume(&b, 10);
	assert_int_equal(b.len, 0);
	pbuf_deinit(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_grows),
		cmocka_unit_test(test_max_enforced),
		cmocka_unit_test(test_consume),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
