/* Unit tests for proto/hmac.c: the auth proof against RFC 4231's
 * HMAC-SHA256 test case 2, and the verifier's accept/reject. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hmac.h"

static void test_rfc4231_case2(void **state)
{
	char out[HMAC_PROOF_LEN + 1];

	(void)state;
	hmac_proof("Jefe", 4, "what do ya want for nothing?", out);
	assert_string_equal(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void test_verify(void **state)
{
	char proof[HMAC_PROOF_LEN + 1];

	(void)state;
	hmac_proof("a-token-of-enough-length", 24, "00ff", proof);
	assert_true(hmac_verify("a-token-of-enough-length", 24, "00ff", proof));
	assert_false(hmac_verify("a-token-of-enough-length", 24, "00fe", proof)); /* other nonce */
	assert_false(hmac_verify("another-token-entirely!!", 24, "00ff", proof)); /* other key */
	proof[63] = proof[63] == '0' ? '1' : '0';
	assert_false(hmac_verify("a-token-of-enough-length", 24, "00ff", proof));
	proof[10] = 0;
	assert_false(hmac_verify("a-token-of-enough-length", 24, "00ff", proof)); /* short */
}

static void test_hex(void **state)
{
	static const uint8_t in[] = { 0x00, 0x9f, 0xff };
	char out[7];

	(void)state;
	hmac_hex(in, 3, out);
	assert_string_equal(out, "009fff");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc4231_case2),
		cmocka_unit_test(test_verify),
		cmocka_unit_test(test_hex),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
