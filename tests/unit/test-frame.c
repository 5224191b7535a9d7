/*
 * Unit tests for proto/frame.c: the wire bytes, incremental decoding
 * (byte by byte, many frames per read), limits checked before allocation,
 * sticky errors, chunk frames.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"

#define MAXF 16

struct seen {
	int n;
	enum frame_kind kind[MAXF];
	char *data[MAXF];
	size_t len[MAXF];
	uint32_t transfer[MAXF];
	uint64_t offset[MAXF];
	int stop_at; /* return -ECANCELED on this frame (1-based), 0 = never */
};

static int collect(void *ud, const struct frame *f)
{
	struct seen *s = ud;

	assert_true(s->n < MAXF);
	s->kind[s->n] = f->kind;
	s->data[s->n] = malloc(f->len);
	memcpy(s->data[s->n], f->data, f->len);
	s->len[s->n] = f->len;
	s->transfer[s->n] = f->transfer;
	s->offset[s->n] = f->offset;
	s->n++;
	return s->n == s->stop_at ? -ECANCELED : 0;
}

static void seen_free(struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->data[i]);
	memset(s, 0, sizeof(*s));
}

static void test_json_wire_bytes(void **state)
{
	struct pbuf b;
	static const uint8_t want[] = { 12, 0, 0, 0, '{', '"', 'f', 'n', '"', ':', '"', 'x', '"', '}', ' ', ' ' };

	(void)state;
	pbuf_init(&b, 0);
	assert_int_equal(frame_encode_json(&b, "{\"fn\":\"x\"}  ", 12), 0);
	assert_int_equal(b.len, 16);
	assert_memory_equal(b.data, want, 16);
	pbuf_deinit(&b);
}

static void test_chunk_wire_bytes(void **state)
{
	struct pbuf b;
	static const uint8_t want[] = {
		0x13, 0, 0, 0x80,            /* chunk bit | 16 + 3 */
		7, 0, 0, 0,                  /* transfer 7 */
		0, 0, 0, 0,                  /* reserved */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* offset */
		'a', 'b', 'c',
	};

	(void)state;
	pbuf_init(&b, 0);
	assert_int_equal(frame_encode_chunk(&b, 7, 0x0102030405060708ull, "abc", 3), 0);
	assert_int_equal(b.len, sizeof(want));
	assert_memory_equal(b.data, want, sizeof(want));
	pbuf_deinit(&b);
}

/* The same stream decoded whole and one byte at a time gives the same frames. */
static void test_incremental(void **state)
{
	struct frame_decoder d;
	struct seen s = { 0 };
	struct pbuf b;
	size_t i;

	(void)state;
	pbuf_init(&b, 0);
	frame_encode_json(&b, "{\"a\":1}", 7);
	frame_encode_chunk(&b, 3, 100, "0123456789", 10);
	frame_encode_json(&b, "{\"b\":2}", 7);

	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, b.data, b.len, collect, &s, NULL), 0);
	assert_int_equal(s.n, 3);
	assert_false(frame_decoder_partial(&d));
	frame_decoder_deinit(&d);
	seen_free(&s);

	frame_decoder_init(&d, 0, 0);
	for (i = 0; i < b.len; i++) {
		assert_int_equal(frame_decoder_feed(&d, b.data + i, 1, collect, &s, NULL), 0);
		if (i + 1 < b.len)
			assert_true(s.n < 3);
	}
	assert_int_equal(s.n, 3);
	assert_int_equal(s.kind[0], FRAME_JSON);
	assert_int_equal(s.len[0], 7);
	assert_memory_equal(s.data[0], "{\"a\":1}", 7);
	assert_int_equal(s.kind[1], FRAME_CHUNK);
	assert_int_equal(s.transfer[1], 3);
	assert_int_equal(s.offset[1], 100);
	assert_int_equal(s.len[1], 10);
	assert_memory_equal(s.data[1], "0123456789", 10);
	assert_memory_equal(s.data[2], "{\"b\":2}", 7);
	assert_int_equal(d.frames, 3);
	frame_decoder_deinit(&d);
	seen_free(&s);
	pbuf_deinit(&b);
}

/* A 4 MiB chunk split into uneven reads is reassembled and the big
 * buffer is released afterwards. */
static void test_large_chunk_split(void **state)
{
	struct frame_decoder d;
	struct seen s = { 0 };
	struct pbuf b;
	size_t n = FRAME_MAX_CHUNK_DEFAULT, off = 0, step = 65537, i;
	uint8_t *data = malloc(n);

	(void)state;
	for (i = 0; i < n; i++)
		data[i] = (uint8_t)(i * 31);
	pbuf_init(&b, 0);
	assert_int_equal(frame_encode_chunk(&b, 1, 0, data, n), 0);
	frame_decoder_init(&d, 0, 0);
	while (off < b.len) {
		size_t k = b.len - off < step ? b.len - off : step;

		assert_int_equal(frame_decoder_feed(&d, b.data + off, k, collect, &s, NULL), 0);
		off += k;
	}
	assert_int_equal(s.n, 1);
	assert_int_equal(s.len[0], n);
	assert_memory_equal(s.data[0], data, n);
	assert_null(d.buf);
	frame_decoder_deinit(&d);
	seen_free(&s);
	pbuf_deinit(&b);
	free(data);
}

/* A length above the limit fails as soon as the header is complete,
 * before any body byte arrives and before any allocation; then the
 * decoder stays failed. */
static void test_oversize_before_alloc(void **state)
{
	struct frame_decoder d;
	struct seen s = { 0 };
	struct perr err;
	uint8_t hdr[4] = { 0x01, 0x00, 0x10, 0x00 }; /* 1 MiB + 1 */

	(void)state;
	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, hdr, 4, collect, &s, &err), -EMSGSIZE);
	assert_non_null(strstr(err.msg, "exceeds the limit"));
	assert_null(d.buf);
	assert_int_equal(d.oversized, 1);
	assert_int_equal(frame_decoder_feed(&d, "{}", 2, collect, &s, NULL), -EMSGSIZE);
	assert_int_equal(s.n, 0);
	frame_decoder_deinit(&d);

	/* configured limits apply: 100-byte JSON cap */
	frame_decoder_init(&d, 100, 0);
	hdr[0] = 101; hdr[1] = 0; hdr[2] = 0; hdr[3] = 0;
	assert_int_equal(frame_decoder_feed(&d, hdr, 4, collect, &s, NULL), -EMSGSIZE);
	frame_decoder_deinit(&d);

	/* chunk over the chunk cap (4 MiB + 1 data bytes) */
	frame_decoder_init(&d, 0, 0);
	uint32_t h = 0x80000000u | (16u + (4u << 20) + 1u);
	uint8_t ch[4] = { (uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16), (uint8_t)(h >> 24) };
	assert_int_equal(frame_decoder_feed(&d, ch, 4, collect, &s, NULL), -EMSGSIZE);
	frame_decoder_deinit(&d);
}

static void test_bad_headers(void **state)
{
	struct frame_decoder d;
	struct seen s = { 0 };
	static const uint8_t zero[4] = { 0, 0, 0, 0 };
	static const uint8_t short_chunk[4] = { 16, 0, 0, 0x80 };
	uint8_t reserved[24] = { 20, 0, 0, 0x80, 1, 0, 0, 0, 1, 0, 0, 0 };

	(void)state;
	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, zero, 4, collect, &s, NULL), -EBADMSG);
	frame_decoder_deinit(&d);

	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, short_chunk, 4, collect, &s, NULL), -EBADMSG);
	frame_decoder_deinit(&d);

	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, reserved, sizeof(reserved), collect, &s, NULL),
	                 -EBADMSG);
	assert_int_equal(s.n, 0);
	frame_decoder_deinit(&d);
}

static void test_callback_stops(void **state)
{
	struct frame_decoder d;
	struct seen s = { 0 };
	struct pbuf b;

	(void)state;
	pbuf_init(&b, 0);
	frame_encode_json(&b, "1", 1);
	frame_encode_json(&b, "2", 1);
	frame_encode_json(&b, "3", 1);
	s.stop_at = 2;
	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, b.data, b.len, collect, &s, NULL), -ECANCELED);
	assert_int_equal(s.n, 2);
	frame_decoder_deinit(&d);
	seen_free(&s);
	pbuf_deinit(&b);
}

static void test_partial(void **state)
{
	struct frame_decoder d;
	struct seen s = { 0 };
	struct pbuf b;

	(void)state;
	pbuf_init(&b, 0);
	frame_encode_json(&b, "{\"a\":1}", 7);
	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, b.data, 2, collect, &s, NULL), 0);
	assert_true(frame_decoder_partial(&d));
	assert_int_equal(frame_decoder_feed(&d, b.data + 2, 5, collect, &s, NULL), 0);
	assert_true(frame_decoder_partial(&d));
	assert_int_equal(frame_decoder_feed(&d, b.data + 7, b.len - 7, collect, &s, NULL), 0);
	assert_false(frame_decoder_partial(&d));
	assert_int_equal(s.n, 1);
	frame_decoder_deinit(&d);
	seen_free(&s);
	pbuf_deinit(&b);
}

static void test_encode_limits(void **state)
{
	struct pbuf b;
	uint8_t prefix[FRAME_CHUNK_PREFIX];
	char *big = calloc(1, FRAME_MAX_CHUNK_DEFAULT + 1);

	(void)state;
	pbuf_init(&b, 0);
	assert_int_equal(frame_encode_json(&b, "", 0), -EMSGSIZE);
	assert_int_equal(frame_encode_json(&b, big, FRAME_MAX_JSON_DEFAULT + 1), -EMSGSIZE);
	assert_int_equal(frame_encode_json(&b, "x", 1), 0);
	assert_int_equal(frame_encode_chunk(&b, 1, 0, big, 0), -EMSGSIZE);
	assert_int_equal(frame_encode_chunk(&b, 1, 0, big, FRAME_MAX_CHUNK_DEFAULT + 1), -EMSGSIZE);
	assert_int_equal(frame_chunk_prefix(prefix, 1, 0, FRAME_MAX_CHUNK_DEFAULT), 0);
	assert_int_equal(b.len, 5); /* only the one good frame */
	pbuf_deinit(&b);
	free(big);
}

/* What the dyno client sends: a native-endian int32 length, then JSON
 * that starts with a newline. It decodes as a plain JSON frame. */
static void test_dyno_framing(void **state)
{
	struct frame_decoder d;
	struct seen s = { 0 };
	const char *json = "\n{\n    \"fn\": \"getStatus\"\n}";
	int32_t len = (int32_t)strlen(json);
	uint8_t buf[64];

	(void)state;
	memcpy(buf, &len, 4); /* the client's native order (little-endian here) */
	memcpy(buf + 4, json, (size_t)len);
	frame_decoder_init(&d, 0, 0);
	assert_int_equal(frame_decoder_feed(&d, buf, 4 + (size_t)len, collect, &s, NULL), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.kind[0], FRAME_JSON);
	assert_int_equal(s.len[0], (size_t)len);
	frame_decoder_deinit(&d);
	seen_free(&s);
}

/* Stream mode: a 4 MiB chunk arrives as contiguous pieces, never
 * buffered; JSON frames around it are whole. */
struct pieces {
	size_t json, bytes, npieces;
	uint64_t next_off;
	uint32_t transfer;
	int bad;
	const uint8_t *want;
};

static int on_piece(void *ud, const struct frame *f)
{
	struct pieces *p = ud;

	if (f->kind == FRAME_JSON) {
		p->json++;
		return 0;
	}
	if (f->offset != p->next_off || f->transfer != 9 ||
	    memcmp(f->data, p->want + (f->offset - 1000), f->len) != 0)
		p->bad++;
	p->next_off = f->offset + f->len;
	p->bytes += f->len;
	p->npieces++;
	return 0;
}

static void test_stream_chunks(void **state)
{
	struct frame_decoder d;
	struct pieces pc = { 0 };
	struct pbuf b;
	size_t n = 4u << 20, off, step = 70001, i;
	uint8_t *data = malloc(n);

	(void)state;
	for (i = 0; i < n; i++)
		data[i] = (uint8_t)(i * 13 + 1);
	pbuf_init(&b, 0);
	frame_encode_json(&b, "{\"a\":1}", 7);
	frame_encode_chunk(&b, 9, 1000, data, n);
	frame_encode_json(&b, "{\"b\":2}", 7);
	frame_decoder_init(&d, 0, 0);
	frame_decoder_stream_chunks(&d, true);
	pc.next_off = 1000;
	pc.want = data;
	for (off = 0; off < b.len; off += step) {
		size_t k = b.len - off < step ? b.len - off : step;

		assert_int_equal(frame_decoder_feed(&d, b.data + off, k, on_piece, &pc, NULL), 0);
		assert_null(d.buf); /* nothing reassembled */
	}
	assert_int_equal(pc.json, 2);
	assert_int_equal(pc.bad, 0);
	assert_int_equal(pc.bytes, n);
	assert_true(pc.npieces > 1);
	assert_int_equal(d.frames, 3);
	assert_false(frame_decoder_partial(&d));
	frame_decoder_deinit(&d);
	pbuf_deinit(&b);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_wire_bytes),
		cmocka_unit_test(test_chunk_wire_bytes),
		cmocka_unit_test(test_incremental),
		cmocka_unit_test(test_large_chunk_split),
		cmocka_unit_test(test_oversize_before_alloc),
		cmocka_unit_test(test_bad_headers),
		cmocka_unit_test(test_callback_stops),
		cmocka_unit_test(test_partial),
		cmocka_unit_test(test_encode_limits),
		cmocka_unit_test(test_dyno_framing),
		cmocka_unit_test(test_stream_chunks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
