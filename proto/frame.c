/*
 * frame: see frame.h for the wire format and the decoder's contract.
 *
 * Decoder state machine: read the 4-byte header (possibly across several
 * feeds), validate the length against the limits, then either hand the
 * body to the callback straight from the caller's input (the common case:
 * the whole frame arrived in one read, zero copies) or reassemble it in
 * d->buf. The reassembly buffer is released after a large frame so that
 * one 4 MiB chunk does not pin 4 MiB per idle connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

#define FRAME_KEEP_BUF (64u << 10)

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

void frame_decoder_init(struct frame_decoder *d, size_t max_json, size_t max_chunk)
{
	const size_t ceiling = FRAME_MAX_BODY - FRAME_CHUNK_HDR_SIZE;

	memset(d, 0, sizeof(*d));
	d->max_json = max_json ? max_json : FRAME_MAX_JSON_DEFAULT;
	d->max_chunk = max_chunk ? max_chunk : FRAME_MAX_CHUNK_DEFAULT;
	if (d->max_json > ceiling)
		d->max_json = ceiling;
	if (d->max_chunk > ceiling)
		d->max_chunk = ceiling;
}

void frame_decoder_deinit(struct frame_decoder *d)
{
	free(d->buf);
	d->buf = NULL;
	d->buf_cap = 0;
}

/* Validates a complete header word; sets body_len and chunk. */
static int parse_header(struct frame_decoder *d, struct perr *err)
{
	uint32_t h = get_le32(d->hdr);

	d->chunk = (h & FRAME_CHUNK_BIT) != 0;
	d->body_len = h & ~FRAME_CHUNK_BIT;
	if (!d->chunk) {
		if (d->body_len == 0)
			return perr_set(err, -EBADMSG, "frame length is 0 (a JSON frame "
			                "needs at least one byte)");
		if (d->body_len > d->max_json) {
			d->oversized++;
			return perr_set(err, -EMSGSIZE, "JSON frame of %u bytes exceeds "
			                "the limit of %zu bytes", d->body_len, d->max_json);
		}
		return 0;
	}
	if (d->body_len <= FRAME_CHUNK_HDR_SIZE)
		return perr_set(err, -EBADMSG, "chunk frame of %u bytes is too short "
		                "(needs a 16-byte chunk header and at least one data byte)",
		                d->body_len);
	if (d->body_len - FRAME_CHUNK_HDR_SIZE > d->max_chunk) {
		d->oversized++;
		return perr_set(err, -EMSGSIZE, "chunk of %u data bytes exceeds the "
		                "limit of %zu bytes",
		                d->body_len - FRAME_CHUNK_HDR_SIZE, d->max_chunk);
	}
	return 0;
}

static int deliver(struct frame_decoder *d, const uint8_t *body, frame_cb cb,
                   void *ud, struct perr *err)
{
	struct frame f;
	uint32_t reserved;

	memset(&f, 0, sizeof(f));
	f.buffered = body == d->buf;
	if (!d->chunk) {
		f.kind = FRAME_JSON;
		f.data = body;
		f.len = d->body_len;
	} else {
		reserved = get_le32(body + 4);
		if (reserved != 0)
			return perr_set(err, -EBADMSG, "chunk header has reserved bits "
			                "set (0x%08x); this peer speaks a newer framing",
			                reserved);
		f.kind = FRAME_CHUNK;
		f.transfer = get_le32(body);
		f.offset = get_le64(body + 8);
		f.data = body + FRAME_CHUNK_HDR_SIZE;
		f.len = d->body_len - FRAME_CHUNK_HDR_SIZE;
	}
	d->frames++;
	return cb(ud, &f);
}

static int buffer_body(struct frame_decoder *d, struct perr *err)
{
	uint8_t *p;

	if (d->buf_cap >= d->body_len)
		return 0;
	p = realloc(d->buf, d->body_len);
	if (p == NULL)
		return perr_set(err, -ENOMEM, "out of memory for a %u-byte frame",
		                d->body_len);
	d->buf = p;
	d->buf_cap = d->body_len;
	return 0;
}

void frame_decoder_stream_chunks(struct frame_decoder *d, bool on)
{
	d->stream = on;
}

/* Stream mode: consumes body bytes of the chunk frame being read, handing
 * data pieces to cb. Returns bytes consumed or a negative code. */
static long stream_chunk(struct frame_decoder *d, const uint8_t *p, size_t len, frame_cb cb,
                         void *ud, struct perr *err)
{
	size_t used = 0, n;
	struct frame f;
	uint32_t reserved;
	int r;

	if (d->body_done < FRAME_CHUNK_HDR_SIZE) {
		n = FRAME_CHUNK_HDR_SIZE - d->body_done;
		if (n > len)
			n = len;
		memcpy(d->chdr + d->body_done, p, n);
		d->body_done += n;
		used += n;
		if (d->body_done < FRAME_CHUNK_HDR_SIZE)
			return (long)used;
		reserved = get_le32(d->chdr + 4);
		if (reserved != 0)
			return perr_set(err, -EBADMSG, "chunk header has reserved bits set "
			                "(0x%08x); this peer speaks a newer framing", reserved);
	}
	n = d->body_len - d->body_done;
	if (n > len - used)
		n = len - used;
	if (n == 0)
		return (long)used;
	memset(&f, 0, sizeof(f));
	f.kind = FRAME_CHUNK;
	f.transfer = get_le32(d->chdr);
	f.offset = get_le64(d->chdr + 8) + (d->body_done - FRAME_CHUNK_HDR_SIZE);
	f.data = p + used;
	f.len = n;
	d->body_done += n;
	if (d->body_done == d->body_len)
		d->frames++;
	r = cb(ud, &f);
	if (r < 0)
		return r;
	return (long)(used + n);
}

void *frame_decoder_steal(struct frame_decoder *d)
{
	void *p = d->buf;

	d->buf = NULL;
	d->buf_cap = 0;
	return p;
}

static void frame_done(struct frame_decoder *d)
{
	d->hdr_len = 0;
	d->have = 0;
	if (d->buf_cap > FRAME_KEEP_BUF) {
		free(d->buf);
		d->buf = NULL;
		d->buf_cap = 0;
	}
}

int frame_decoder_feed(struct frame_decoder *d, const void *data, size_t len,
                       frame_cb cb, void *ud, struct perr *err)
{
	const uint8_t *p = data;
	size_t n;
	int r = 0;

	if (d->error)
		return perr_set(err, d->error, "stream already failed; close the connection");
	while (len > 0) {
		if (d->hdr_len < FRAME_HDR_SIZE) {
			n = FRAME_HDR_SIZE - d->hdr_len;
			if (n > len)
				n = len;
			memcpy(d->hdr + d->hdr_len, p, n);
			d->hdr_len += (unsigned)n;
			p += n;
			len -= n;
			if (d->hdr_len < FRAME_HDR_SIZE)
				break;
			r = parse_header(d, err);
			if (r < 0)
				goto out;
			d->body_done = 0;
			if (len == 0)
				break; /* allocate nothing until body bytes arrive */
		}
		if (d->stream && d->chunk) {
			long used = stream_chunk(d, p, len, cb, ud, err);

			if (used < 0) {
				r = (int)used;
				goto out;
			}
			p += used;
			len -= (size_t)used;
			if (d->body_done == d->body_len)
				frame_done(d);
			continue;
		}
		if (d->have == 0 && len >= d->body_len) {
			/* Whole body in the caller's buffer: no copy. */
			r = deliver(d, p, cb, ud, err);
			p += d->body_len;
			len -= d->body_len;
			frame_done(d);
			if (r < 0)
				goto out;
			continue;
		}
		r = buffer_body(d, err);
		if (r < 0)
			goto out;
		n = d->body_len - d->have;
		if (n > len)
			n = len;
		memcpy(d->buf + d->have, p, n);
		d->have += n;
		p += n;
		len -= n;
		if (d->have < d->body_len)
			break;
		r = deliver(d, d->buf, cb, ud, err);
		frame_done(d);
		if (r < 0)
			goto out;
	}
out:
	if (r < 0)
		d->error = r;
	return r;
}

int frame_encode_json(struct pbuf *out, const char *json, size_t len)
{
	uint8_t hdr[FRAME_HDR_SIZE];
	int r;

	if (len == 0 || len > FRAME_MAX_JSON_DEFAULT)
		return -EMSGSIZE;
	put_le32(hdr, (uint32_t)len);
	r = pbuf_reserve(out, sizeof(hdr) + len);
	if (r < 0)
		return r;
	pbuf_append(out, hdr, sizeof(hdr));
	pbuf_append(out, json, len);
	return 0;
}

int frame_chunk_prefix(uint8_t out[FRAME_CHUNK_PREFIX], uint32_t transfer,
                       uint64_t offset, size_t len)
{
	if (len == 0 || len > FRAME_MAX_CHUNK_DEFAULT)
		return -EMSGSIZE;
	put_le32(out, FRAME_CHUNK_BIT | (uint32_t)(FRAME_CHUNK_HDR_SIZE + len));
	put_le32(out + 4, transfer);
	put_le32(out + 8, 0);
	put_le64(out + 12, offset);
	return 0;
}

int frame_encode_chunk(struct pbuf *out, uint32_t transfer, uint64_t offset,
                       const void *data, size_t len)
{
	uint8_t prefix[FRAME_CHUNK_PREFIX];
	int r;

	r = frame_chunk_prefix(prefix, transfer, offset, len);
	if (r < 0)
		return r;
	r = pbuf_reserve(out, sizeof(prefix) + len);
	if (r < 0)
		return r;
	pbuf_append(out, prefix, sizeof(prefix));
	pbuf_append(out, data, len);
	return 0;
}
