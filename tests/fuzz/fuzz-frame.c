/*
 * Fuzz target: the frame decoder, fed in pieces whose sizes come from the
 * input itself, with every JSON frame passed on to msg_decode and
 * dyno_decode_request as a server would. Properties: no crash, no leak;
 * a stream cut at different points yields the same frames.
 */
#include <stdbool.h>
#include <string.h>

#include "dyno.h"
#include "frame.h"
#include "fuzz.h"
#include "msg.h"

struct tally {
	size_t frames;
	uint32_t sum; /* order-sensitive digest of frame contents */
	size_t json, chunk_bytes;
};

/* Stream mode: only totals are comparable (pieces split chunks). */
static int on_piece(void *ud, const struct frame *f)
{
	struct tally *t = ud;

	if (f->kind == FRAME_JSON)
		t->json++;
	else
		t->chunk_bytes += f->len;
	return 0;
}

static int on_frame(void *ud, const struct frame *f)
{
	struct tally *t = ud;
	struct dyno_request dr;
	struct msg m;
	size_t i;

	t->frames++;
	if (f->kind == FRAME_JSON)
		t->json++;
	else
		t->chunk_bytes += f->len;
	for (i = 0; i < f->len; i++)
		t->sum = t->sum * 31 + f->data[i];
	t->sum = t->sum * 7 + (uint32_t)f->kind + f->transfer + (uint32_t)f->offset;
	if (f->kind != FRAME_JSON)
		return 0;
	if (dyno_is_request((const char *)f->data, f->len)) {
		if (dyno_decode_request(&dr, (const char *)f->data, f->len, NULL) == 0)
			dyno_request_deinit(&dr);
	} else {
		msg_decode(&m, (const char *)f->data, f->len, NULL);
		msg_deinit(&m);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_decoder d;
	struct tally whole = { 0 }, pieces = { 0 }, streamed = { 0 };
	bool complete;
	size_t off = 0, step;
	int r1, r2 = 0;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	/* small limits so the fuzzer reaches the limit paths */
	frame_decoder_init(&d, 4096, 4096);
	r1 = frame_decoder_feed(&d, data, size, on_frame, &whole, NULL);
	complete = r1 == 0 && !frame_decoder_partial(&d);
	frame_decoder_deinit(&d);

	/* stream mode, in pieces: the same JSON frames and chunk bytes */
	frame_decoder_init(&d, 4096, 4096);
	frame_decoder_stream_chunks(&d, true);
	for (off = 0; off < size; off += step) {
		size_t n = size - off < step ? size - off : step;

		if (frame_decoder_feed(&d, data + off, n, on_piece, &streamed, NULL) < 0)
			break;
	}
	if (complete)
		FUZZ_CHECK(!frame_decoder_partial(&d) && streamed.json == whole.json &&
		           streamed.chunk_bytes == whole.chunk_bytes);
	frame_decoder_deinit(&d);
	off = 0;

	frame_decoder_init(&d, 4096, 4096);
	while (off < size && r2 == 0) {
		size_t n = size - off < step ? size - off : step;

		r2 = frame_decoder_feed(&d, data + off, n, on_frame, &pieces, NULL);
		off += n;
	}
	frame_decoder_deinit(&d);
	FUZZ_CHECK(r1 == r2);
	FUZZ_CHECK(whole.frames == pieces.frames && whole.sum == pieces.sum);
	return 0;
}
