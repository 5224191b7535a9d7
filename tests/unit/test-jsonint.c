/* Unit tests for proto/jsonint.c: integers print as exact decimal
 * literals, above 2^31 and 2^53 too (cJSON's doubles printed 1e+15, and
 * lose digits past 2^53). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonint.h"

/* The compact text of {"v": v} as jsonint writes it. */
static char *object_with(int64_t v)
{
	cJSON *o = cJSON_CreateObject();
	char *text;

	assert_int_equal(jsonint_add(o, "v", v), 0);
	text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return text;
}

static void test_exact(void **state)
{
	static const struct { int64_t v; const char *text; } cases[] = {
		{ 0, "{\"v\":0}" },
		{ -1, "{\"v\":-1}" },
		{ 2147483648LL, "{\"v\":2147483648}" },                 /* 2^31 */
		{ 1795914211306300LL, "{\"v\":1795914211306300}" },     /* was 1.7959142113063e+15 */
		{ 1000000000000000LL, "{\"v\":1000000000000000}" },     /* was 1e+15 */
		{ 9007199254740993LL, "{\"v\":9007199254740993}" },     /* 2^53 + 1: no double holds it */
		{ INT64_MAX, "{\"v\":9223372036854775807}" },
		{ INT64_MIN, "{\"v\":-9223372036854775808}" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *text = object_with(cases[i].v);
		cJSON *back;

		assert_string_equal(text, cases[i].text);
		/* and it reads back as a JSON number */
		back = cJSON_Parse(text);
		assert_non_null(back);
		assert_true(cJSON_IsNumber(cJSON_GetObjectItem(back, "v")));
		cJSON_Delete(back);
		cJSON_free(text);
	}
}

static void test_unsigned_and_arrays(void **state)
{
	cJSON *a = cJSON_CreateArray();
	char *text;

	(void)state;
	assert_int_equal(jsonint_add_u(a, NULL, UINT64_MAX), 0);
	assert_int_equal(jsonint_add_u(a, NULL, 9007199254740993ULL), 0);
	assert_int_equal(jsonint_add(a, NULL, 3000000000LL), 0);
	text = cJSON_PrintUnformatted(a);
	assert_string_equal(text, "[18446744073709551615,9007199254740993,3000000000]");
	cJSON_free(text);
	cJSON_Delete(a);
}

/* What the helper replaces: cJSON's own numbers are not exact. */
static void test_cjson_is_not(void **state)
{
	cJSON *o = cJSON_CreateObject();
	char *text;

	(void)state;
	cJSON_AddNumberToObject(o, "v", 1795914211306300.0);
	text = cJSON_PrintUnformatted(o);
	assert_string_not_equal(text, "{\"v\":1795914211306300}");
	cJSON_free(text);
	cJSON_Delete(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact),
		cmocka_unit_test(test_unsigned_and_arrays),
		cmocka_unit_test(test_cjson_is_not),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
