/*
 * frame: the stream framing of the native protocol and of Dynolog's RPC.
 *
 * Every frame starts with a 4-byte little-endian header word H.
 *   - H with bit 31 clear: a JSON frame; H is the length of the UTF-8 JSON
 *     text that follows. This is exactly Dynolog's framing (its length is a
 *     positive int32), so `dyno` requests decode as JSON frames.
 *   - H with bit 31 set: a chunk frame; H & 0x7fffffff is the body length.
 *     The body is a 16-byte chunk header (u32 transfer, u32 reserved = 0,
 *     u64 offset, all little-endian) and then the data. Dynolog treats a
 *     negative length as invalid, so chunk frames can never be mistaken
 *     for Dynolog requests.
 * proto/PROTOCOL.md is the specification; this file implements it.
 *
 * Decoding is incremental: feed bytes as they arrive (partial frames, many
 * frames per read) and a callback sees each whole frame. A length above
 * the configured limit is an error before any allocation. Errors are
 * sticky: after one, the decoder refuses further input, because a stream
 * that lost its framing cannot be resynchronised; the owner closes the
 * connection.
 *
 * Ownership: the decoder owns its reassembly buffer. A frame passed to the
 * callback is valid only during the call (it may point into the caller's
 * input or into that buffer).
 */
#ifndef GPROF_FRAME_H
#define GPROF_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pbuf.h"
#include "perr.h"

#define FRAME_HDR_SIZE 4u
#define FRAME_CHUNK_BIT 0x80000000u
#define FRAME_CHUNK_HDR_SIZE 16u
#define FRAME_CHUNK_PREFIX (FRAME_HDR_SIZE + FRAME_CHUNK_HDR_SIZE)
/* Protocol defaults: what every receiver accepts and every sender respects. */
#define FRAME_MAX_JSON_DEFAULT (1u << 20)
#define FRAME_MAX_CHUNK_DEFAULT (4u << 20)
/* Hard ceiling for configured limits: the 31-bit length field. */
#define FRAME_MAX_BODY 0x7fffffffu

enum frame_kind {
	FRAME_JSON = 1,
	FRAME_CHUNK = 2,
};

struct frame {
	enum frame_kind kind;
	const uint8_t *data; /* JSON text, or chunk data after its header */
	size_t len;
	uint32_t transfer; /* chunk frames only */
	uint64_t offset;   /* chunk frames only */
	bool buffered;     /* data lies in the decoder's reassembly buffer, so the
	                    * callback may take it with frame_decoder_steal */
};

/* Returns 0 to continue, or a negative code that stops frame_decoder_feed
 * (which then returns it). */
typedef int (*frame_cb)(void *ud, const struct frame *f);

struct frame_decoder {
	size_t max_json;  /* largest JSON text accepted */
	size_t max_chunk; /* largest chunk data accepted */
	uint8_t hdr[FRAME_HDR_SIZE];
	unsigned hdr_len;
	uint32_t body_len; /* of the frame being read, once hdr is complete */
	int chunk;         /* the frame being read is a chunk frame */
	uint8_t *buf;      /* reassembly buffer for frames split across reads */
	size_t buf_cap;
	size_t have;
	int error;         /* sticky: 0 or the first error */
	bool stream;       /* deliver chunk data in pieces as it arrives */
	uint8_t chdr[FRAME_CHUNK_HDR_SIZE]; /* stream mode: the chunk header */
	size_t body_done;  /* stream mode: body bytes consumed so far */
	uint64_t frames;   /* frames delivered */
	uint64_t oversized; /* limit hits (the counter STYLE.md rule 4 asks for) */
};

/* max_json/max_chunk of 0 select the protocol defaults; values above
 * FRAME_MAX_BODY - FRAME_CHUNK_HDR_SIZE are clamped. */
void frame_decoder_init(struct frame_decoder *d, size_t max_json, size_t max_chunk);
void frame_decoder_deinit(struct frame_decoder *d);

/*
 * Consumes len bytes, calling cb for every complete frame. Returns 0 when
 * all bytes were consumed; -EMSGSIZE (length over the limit), -EBADMSG
 * (zero length, bad chunk header) or -ENOMEM, with a message in err;
 * or the negative value cb returned. After an error every call fails.
 */
int frame_decoder_feed(struct frame_decoder *d, const void *data, size_t len,
                       frame_cb cb, void *ud, struct perr *err);

/*
 * Stream mode, for receivers of large transfers: chunk frames are not
 * reassembled but delivered in pieces as their bytes arrive, each a
 * FRAME_CHUNK with the same transfer and an offset that advances by the
 * previous piece's length (so consecutive pieces are contiguous). No
 * buffer is allocated for chunk data. JSON frames are unaffected.
 */
void frame_decoder_stream_chunks(struct frame_decoder *d, bool on);

/* Called from the callback for a frame with f->buffered set: hands the
 * reassembly buffer to the caller (who frees it with free()) instead of
 * letting the decoder reuse it, so a large chunk is never copied again.
 * f->data stays valid and points into the returned block. */
void *frame_decoder_steal(struct frame_decoder *d);

/* True when the decoder holds part of a frame (a peer that closes now
 * truncated its last frame). */
static inline int frame_decoder_partial(const struct frame_decoder *d)
{
	return d->hdr_len != 0;
}

/* Appends a JSON frame (header + text). -EMSGSIZE when len is 0 or above
 * FRAME_MAX_JSON_DEFAULT; -ENOBUFS/-ENOMEM from the pbuf. */
int frame_encode_json(struct pbuf *out, const char *json, size_t len);

/* Writes the 20-byte prefix of a chunk frame carrying len data bytes, so a
 * sender can pass the data itself to writev without copying it. */
int frame_chunk_prefix(uint8_t out[FRAME_CHUNK_PREFIX], uint32_t transfer,
                       uint64_t offset, size_t len);

/* Appends a whole chunk frame. -EMSGSIZE when len is 0 or above
 * FRAME_MAX_CHUNK_DEFAULT. */
int frame_encode_chunk(struct pbuf *out, uint32_t transfer, uint64_t offset,
                       const void *data, size_t len);

#endif
