/* Unit tests for proto/jsoncheck.c: what cJSON lets through and we must not. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "jsoncheck.h"

static int check(const char *s)
{
	return jsoncheck_text(s, strlen(s), JSONCHECK_DEPTH_DEFAULT, NULL);
}

static void test_accepts_valid(void **state)
{
	(void)state;
	assert_int_equal(check("{\"a\":[1,2,{\"b\":\"c\"}]}"), 0);
	/* multi-byte UTF-8: 2, 3 and 4 bytes */
	assert_int_equal(check("{\"s\":\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}"), 0);
	/* escapes that are fine, including an escaped backslash before u0000 text */
	assert_int_equal(check("{\"s\":\"\\n\\t\\u0041\\\\u0000\"}"), 0);
	/* brackets inside strings do not count toward depth */
	assert_int_equal(check("{\"s\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}"), 0);
}

static void test_rejects_bad_utf8(void **state)
{
	struct perr err;

	(void)state;
	assert_int_equal(check("{\"s\":\"\xff\"}"), -EBADMSG);
	assert_int_equal(check("{\"s\":\"\xc0\xaf\"}"), -EBADMSG);        /* overlong '/' */
	assert_int_equal(check("{\"s\":\"\xe0\x80\xaf\"}"), -EBADMSG);    /* overlong */
	assert_int_equal(check("{\"s\":\"\xed\xa0\x80\"}"), -EBADMSG);    /* surrogate */
	assert_int_equal(check("{\"s\":\"\xf4\x90\x80\x80\"}"), -EBADMSG); /* > U+10FFFF */
	assert_int_equal(check("{\"s\":\"\xe2\x82\"}"), -EBADMSG);        /* truncated */
	assert_int_equal(jsoncheck_text("{\"s\":\"\xc3", 7, 16, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "offset 6"));
}

static void test_rejects_nul_and_controls(void **state)
{
	(void)state;
	assert_int_equal(check("{\"s\":\"a\\u0000b\"}"), -EBADMSG);
	assert_int_equal(check("{\"s\":\"a\tb\"}"), -EBADMSG);
	assert_int_equal(jsoncheck_text("{\"s\":\"a\0\"}", 9, 16, NULL), -EBADMSG);
}

static void test_depth(void **state)
{
	char deep[64];
	int i;

	(void)state;
	for (i = 0; i < 17; i++)
		deep[i] = '[';
	deep[17] = 0;
	assert_int_equal(check(deep), -EBADMSG);
	deep[16] = 0; /* 16 levels is the limit, accepted */
	assert_int_equal(check(deep), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepts_valid),
		cmocka_unit_test(test_rejects_bad_utf8),
		cmocka_unit_test(test_rejects_nul_and_controls),
		cmocka_unit_test(test_depth),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
