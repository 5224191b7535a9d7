/*
 * Unit tests for ctl/pickle.c, the data-only pickle reader gprofctl report
 * uses on memory snapshots: every data opcode Python's pickler writes at
 * protocols 2 to 5 (values checked), shared and cyclic values through the
 * memo, and the refusals: opcodes that would import or call code, a cut
 * file, lengths and memo indices beyond the file, a value limit, malformed
 * stacks. Inputs are written byte by byte here (and were checked against
 * Python's pickle.loads, which gives the same values or raises).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pickle.h"

#define LOAD(p, lit) pickle_load((p), (const uint8_t *)(lit), sizeof(lit) - 1)

/* {'a': [1, -2, 300, 70000, -70000, 2**40, -(2**63), 1.5, True, False, None],
 *  'b': ('x', b'yz')} as pickle.dumps(v, 2) writes it, but for the bytes
 * value: protocol 2 writes bytes through _codecs.encode (GLOBAL + REDUCE,
 * refused), so they are SHORT_BINBYTES here, as protocol 3 writes them */
static void test_protocol2_values(void **state)
{
	static const char in[] =
		"\x80\x02}q\x00(X\x01\x00\x00\x00" "aq\x01]q\x02(K\x01J\xfe\xff\xff\xffM,\x01"
		"J\x70\x11\x01\x00J\x90\xee\xfe\xff\x8a\x06\x00\x00\x00\x00\x00\x01"
		"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80G?\xf8\x00\x00\x00\x00\x00\x00"
		"\x88\x89NeX\x01\x00\x00\x00" "bq\x03X\x01\x00\x00\x00xq\x04" "C\x02yzq\x05\x86q\x06u.";
	struct pickle p = { 0 };
	const struct pk *a, *b;
	int64_t v;

	(void)state;
	assert_int_equal(LOAD(&p, in), 0);
	a = pk_get(p.root, "a");
	assert_int_equal(pk_len(a), 11);
	assert_true(pk_int(pk_at(a, 0), &v) && v == 1);
	assert_true(pk_int(pk_at(a, 1), &v) && v == -2);
	assert_true(pk_int(pk_at(a, 2), &v) && v == 300);
	assert_true(pk_int(pk_at(a, 3), &v) && v == 70000);
	assert_true(pk_int(pk_at(a, 4), &v) && v == -70000);
	assert_true(pk_int(pk_at(a, 5), &v) && v == (int64_t)1 << 40);
	assert_true(pk_int(pk_at(a, 6), &v) && v == INT64_MIN);
	assert_int_equal(pk_at(a, 7)->type, PK_FLOAT);
	assert_true(pk_at(a, 7)->u.f == 1.5);
	assert_true(pk_at(a, 8)->type == PK_BOOL && pk_at(a, 8)->u.i == 1);
	assert_true(pk_at(a, 9)->type == PK_BOOL && pk_at(a, 9)->u.i == 0);
	assert_int_equal(pk_at(a, 10)->type, PK_NONE);
	b = pk_get(p.root, "b");
	assert_int_equal(b->type, PK_TUPLE);
	assert_true(pk_str_is(pk_at(b, 0), "x"));
	assert_int_equal(pk_at(b, 1)->type, PK_BYTES);
	assert_int_equal(pk_at(b, 1)->u.s.n, 2);
	assert_null(pk_get(p.root, "c"));
	pickle_free(&p);
}

/* protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE, BINGET sharing one dict:
 * f = {'n': 'x'}; pickle.dumps([f, f], 4) */
static void test_protocol4_memo_shared(void **state)
{
	static const char in[] =
		"\x80\x04\x95\x12\x00\x00\x00\x00\x00\x00\x00]\x94(}\x94\x8c\x01n\x94\x8c\x01x"
		"\x94sh\x01" "e.";
	struct pickle p = { 0 };

	(void)state;
	assert_int_equal(LOAD(&p, in), 0);
	assert_int_equal(pk_len(p.root), 2);
	assert_ptr_equal(pk_at(p.root, 0), pk_at(p.root, 1));
	assert_true(pk_str_is(pk_get(pk_at(p.root, 1), "n"), "x"));
	pickle_free(&p);
}

/* a list that holds itself (l = []; l.append(l)): read, and freed with no
 * loop; and TUPLE1..3, DICT/LIST from a mark, POP, POP_MARK, DUP */
static void test_cycle_and_rare_ops(void **state)
{
	static const char cyc[] = "\x80\x02]q\x00h\x00" "a.";
	static const char rare[] = "\x80\x02(K\x01K\x02K\x03\x87K\x04\x85K\x05K\x06\x86l(K\x07"
	                           "K\x08" "d2(K\x09" "1" "K\x0a" "0" "\x86\x86.";
	struct pickle p = { 0 };

	(void)state;
	assert_int_equal(LOAD(&p, cyc), 0);
	assert_ptr_equal(pk_at(p.root, 0), p.root);
	pickle_free(&p);
	memset(&p, 0, sizeof(p));
	assert_int_equal(LOAD(&p, rare), 0);
	/* ([(1, 2, 3), (4,), (5, 6)], ({7: 8}, {7: 8})), the dict DUP'd */
	assert_int_equal(p.root->type, PK_TUPLE);
	assert_int_equal(pk_len(pk_at(p.root, 0)), 3);
	assert_int_equal(pk_len(pk_at(pk_at(p.root, 0), 0)), 3);
	assert_int_equal(pk_len(pk_at(pk_at(p.root, 0), 1)), 1);
	assert_ptr_equal(pk_at(pk_at(p.root, 1), 0), pk_at(pk_at(p.root, 1), 1));
	assert_int_equal(pk_at(pk_at(p.root, 1), 0)->type, PK_DICT);
	pickle_free(&p);
}

static void refused(const char *in, size_t n, const char *why, size_t off)
{
	struct pickle p = { 0 };

	assert_int_equal(pickle_load(&p, (const uint8_t *)in, n), -1);
	assert_null(p.root);
	if (strstr(p.error, why) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", p.error, why);
	assert_int_equal(p.err_off, off);
	pickle_free(&p);
}
#define REFUSED(lit, why, off) refused((lit), sizeof(lit) - 1, (why), (off))

/* Code is never run: every opcode that names or calls an object is
 * refused where it stands, whatever comes before or after. */
static void test_code_opcodes_refused(void **state)
{
	(void)state;
	REFUSED("\x80\x02" "cos\nsystem\n" "X\x02\x00\x00\x00ls\x85R.", "GLOBAL", 2);
	REFUSED("\x80\x04\x8c\x02os\x8c\x06system\x93.", "STACK_GLOBAL", 14);
	REFUSED("\x80\x02)}R.", "REDUCE", 4);
	REFUSED("\x80\x02}}b.", "BUILD", 4);
	REFUSED("\x80\x02(io\n.", "INST", 3);
	REFUSED("\x80\x02(o.", "OBJ", 3);
	REFUSED("\x80\x02))\x81.", "NEWOBJ", 4);
	REFUSED("\x80\x04)}\x92.", "NEWOBJ_EX", 4);
	REFUSED("\x80\x02\x82\x01.", "EXT1", 2);
	REFUSED("\x80\x02K\x01Q.", "BINPERSID", 4);
	REFUSED("\x80\x02P1\n.", "PERSID", 2);
	REFUSED("\x80\x05\x97.", "not used by memory snapshots", 2);  /* NEXT_BUFFER */
	REFUSED("\x80\x02I1\n.", "INT", 2);                              /* protocol 0 */
	REFUSED("\x80\x02\xff.", "no pickle opcode", 2);
}

/* Lengths are never trusted: a string, bytes or long that claims more
 * than the file holds; a cut file; a memo index beyond the file */
static void test_lengths_and_cuts(void **state)
{
	(void)state;
	REFUSED("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40" "abc.", "bytes follow but only 4", 2);
	REFUSED("\x80\x02X\xff\xff\xff\xff" "ab.", "only 3 remain", 2);
	REFUSED("\x80\x02\x8b\xff\xff\xff\x7f.", "LONG4 says 2147483647 bytes", 2);
	REFUSED("\x80\x02\x8b\xff\xff\xff\xff.", "negative length", 2);
	REFUSED("\x80\x02X\x01\x00", "cut short", 2);
	REFUSED("\x80\x02]q\x00(K\x01", "no STOP", 8);
	REFUSED("\x80\x02" "K\x01r\xff\xff\xff\x7f.", "memo index 2147483647", 4);
	REFUSED("\x80\x02h\x05.", "never stored", 2);
	REFUSED("", "empty", 0);
	REFUSED("{\"json\": 1}", "does not begin with PROTO", 0);
	REFUSED("\x80\x01N.", "protocol 1", 0);
}

/* A stack that does not add up is refused, never read past. */
static void test_bad_stacks(void **state)
{
	(void)state;
	REFUSED("\x80\x02K\x01K\x02.", "STOP with 2 values", 6);
	REFUSED("\x80\x02" "a.", "APPEND with nothing", 2);
	REFUSED("\x80\x02)K\x01" "a.", "not a list", 5);
	REFUSED("\x80\x02]K\x01K\x02s.", "not a dict", 7);
	REFUSED("\x80\x02}(K\x01u.", "odd number", 6);
	REFUSED("\x80\x02K\x01" "e.", "without a MARK", 4);
	REFUSED("\x80\x02(\x86.", "TUPLE2 with fewer", 3);
	REFUSED("\x80\x02(" "0" "0.", "POP with nothing", 4);
}

/* max_values bounds the memory a file can make the reader take. */
static void test_value_limit(void **state)
{
	/* BININT2: the ints 0..255 (BININT1) are shared, and not counted */
	static const char in[] = "\x80\x02(M\x01\x01M\x02\x01M\x03\x01M\x04\x01l.";
	struct pickle p = { .max_values = 4 };

	(void)state;
	assert_int_equal(LOAD(&p, in), -1);
	assert_non_null(strstr(p.error, "more than 4 values"));
	pickle_free(&p);
	memset(&p, 0, sizeof(p));
	p.max_values = 5;
	assert_int_equal(LOAD(&p, in), 0);
	assert_int_equal(pk_len(p.root), 4);
	pickle_free(&p);
}

/* A file of n empty lists under a dict root: the most values per byte. */
static uint8_t *lists(size_t n, size_t *len)
{
	uint8_t *b = malloc(n + 6);

	assert_non_null(b);
	memcpy(b, "\x80\x04}(", 4);
	memset(b + 4, ']', n);
	memcpy(b + 4 + n, "l.", 2); /* never reached: refused before */
	*len = n + 6;
	return b;
}

/* Issue 43: the memory a file costs is counted, and a file is refused
 * where it would pass PICKLE_BYTES_PER_BYTE times its size (the old reader
 * took 48 bytes per byte of such a file); what it counts grows linearly. */
static void test_memory_bound(void **state)
{
	static const size_t sizes[] = { 1u << 20, 2u << 20, 4u << 20 };
	uint64_t peak[3];
	size_t i, len;

	(void)state;
	for (i = 0; i < 3; i++) {
		struct pickle p = { 0 };
		uint8_t *b = lists(sizes[i], &len);

		assert_int_equal(pickle_load(&p, b, len), -1);
		assert_non_null(strstr(p.error, "bytes of memory"));
		assert_true(p.err_off < len);
		peak[i] = p.peak;
		assert_true(p.peak <= (uint64_t)len * PICKLE_BYTES_PER_BYTE + PICKLE_BYTES_FIXED);
		pickle_free(&p);
		assert_int_equal(p.bytes, 0);
		free(b);
	}
	assert_true(peak[1] <= 2 * peak[0] + PICKLE_BYTES_FIXED);
	assert_true(peak[2] <= 2 * peak[1] + PICKLE_BYTES_FIXED);
}

/* Plain data well under the bound is read whole, and costs what is counted:
 * n small ints in a list (shared values: a slot each). */
static void test_memory_counted(void **state)
{
	size_t n = 100000, len = 2 * n + 6, i;
	uint8_t *b = malloc(len);
	struct pickle p = { 0 };

	(void)state;
	assert_non_null(b);
	memcpy(b, "\x80\x04(", 3);
	for (i = 0; i < n; i++) {
		b[3 + 2 * i] = 'K';
		b[4 + 2 * i] = (uint8_t)i;
	}
	memcpy(b + 3 + 2 * n, "l.", 3);
	assert_int_equal(pickle_load(&p, b, len - 1), 0);
	assert_int_equal(pk_len(p.root), n);
	assert_int_equal(p.values, 1); /* the list; the ints are shared */
	assert_true(p.peak > 8 * n && p.peak <= 8 * len + PICKLE_BYTES_FIXED);
	pickle_free(&p);
	free(b);
}

/* want_dict: a file whose value is not a dict is refused at its first
 * opcode, before the rest is read; a dict is read as before. */
static void test_want_dict(void **state)
{
	struct pickle p = { .want_dict = true };

	(void)state;
	assert_int_equal(LOAD(&p, "\x80\x02]]]]]]]]."), -1);
	assert_non_null(strstr(p.error, "not a dict"));
	assert_int_equal(p.err_off, 2);
	pickle_free(&p);
	memset(&p, 0, sizeof(p));
	p.want_dict = true;
	assert_int_equal(LOAD(&p, "\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00}."), 0);
	assert_int_equal(p.root->type, PK_DICT);
	pickle_free(&p);
	memset(&p, 0, sizeof(p));
	p.want_dict = true;
	assert_int_equal(LOAD(&p, "\x80\x02(}l."), -1); /* a mark first: a list or tuple */
	assert_non_null(strstr(p.error, "not a dict"));
	pickle_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_protocol2_values),
		cmocka_unit_test(test_protocol4_memo_shared),
		cmocka_unit_test(test_cycle_and_rare_ops),
		cmocka_unit_test(test_code_opcodes_refused),
		cmocka_unit_test(test_lengths_and_cuts),
		cmocka_unit_test(test_bad_stacks),
		cmocka_unit_test(test_value_limit),
		cmocka_unit_test(test_memory_bound),
		cmocka_unit_test(test_memory_counted),
		cmocka_unit_test(test_want_dict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
