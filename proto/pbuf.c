/* pbuf: see pbuf.h. Growth doubles, so appending is amortised O(1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pbuf.h"

void pbuf_init(struct pbuf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max ? max : PBUF_DEFAULT_MAX;
}

void pbuf_deinit(struct pbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int pbuf_reserve(struct pbuf *b, size_t n)
{
	size_t need, cap;
	uint8_t *p;

	if (n > b->max || b->len > b->max - n)
		return -ENOBUFS;
	need = b->len + n;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	if (cap > b->max)
		cap = b->max;
	while (cap < need)
		cap = cap > b->max / 2 ? b->max : cap * 2;
	p = realloc(b->data, cap);
	if (p == NULL)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int pbuf_append(struct pbuf *b, const void *p, size_t n)
{
	int r;

	if (n == 0)
		return 0;
	r = pbuf_reserve(b, n);
	if (r < 0)
		return r;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void pbuf_consume(struct pbuf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}
