/*
 * pbuf: a growable byte buffer, the one output type of every encoder in
 * proto/. Encoders append; the owner sends [data, data+len) and then
 * resets or consumes what went out.
 *
 * Ownership: the pbuf owns `data`; pbuf_deinit frees it. A pbuf never grows
 * past its `max` (0 = PBUF_DEFAULT_MAX), so a runaway encoder fails with
 * -ENOBUFS instead of eating the host's memory.
 */
#ifndef GPROF_PBUF_H
#define GPROF_PBUF_H

#include <stddef.h>
#include <stdint.h>

#define PBUF_DEFAULT_MAX (64u << 20)

struct pbuf {
	uint8_t *data;
	size_t len;
	size_t cap;
	size_t max;
};

void pbuf_init(struct pbuf *b, size_t max);
void pbuf_deinit(struct pbuf *b);
/* Makes room for n more bytes: 0, -ENOBUFS past max, -ENOMEM. */
int pbuf_reserve(struct pbuf *b, size_t n);
/* Appends n bytes: 0 or as pbuf_reserve. */
int pbuf_append(struct pbuf *b, const void *p, size_t n);
/* Drops the first n bytes (they were sent). */
void pbuf_consume(struct pbuf *b, size_t n);
static inline void pbuf_reset(struct pbuf *b) { b->len = 0; }

#endif
