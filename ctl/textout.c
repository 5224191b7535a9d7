/*
 * textout: see textout.h. A glibc cookie stream (fopencookie): stdio
 * buffers the text as usual and hands it here in pieces, which may cut a
 * UTF-8 sequence; the unfinished end of a piece waits in pend for the next.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "textout.h"

uint64_t textout_escaped;

struct textout {
	FILE *to;
	unsigned char pend[4];
	size_t npend;
};

/* How long the UTF-8 sequence at s (n bytes there) is when well formed and
 * printable; 0 when it is not; -1 when it may be, but is cut by n. */
static int utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	int len, i;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	/* the second byte's range: no overlong forms, no surrogates, nothing
	 * past U+10FFFF, and no C1 control (U+0080..U+009F: C2 80..C2 9F) */
	if (c == 0xc2)
		lo = 0xa0;
	else if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	for (i = 1; i < len; i++) {
		if ((size_t)i >= n)
			return -1;
		if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
			return 0;
	}
	return len;
}

/* Writes s[0..n) escaped; keeps a cut sequence at its end when more may
 * follow (!last). */
static int put(struct textout *t, const unsigned char *s, size_t n, bool last)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		int len;

		if ((c >= 0x20 && c < 0x7f) || c == '\n') {
			size_t j = i + 1;

			while (j < n && ((s[j] >= 0x20 && s[j] < 0x7f) || s[j] == '\n'))
				j++;
			if (fwrite(s + i, 1, j - i, t->to) != j - i)
				return -1;
			i = j;
			continue;
		}
		len = c >= 0x80 ? utf8_len(s + i, n - i) : 0;
		if (len < 0 && !last) {
			memmove(t->pend, s + i, n - i); /* s may be pend itself */
			t->npend = n - i;
			return 0;
		}
		if (len > 0) {
			if (fwrite(s + i, 1, (size_t)len, t->to) != (size_t)len)
				return -1;
			i += (size_t)len;
			continue;
		}
		textout_escaped++;
		if (fprintf(t->to, "\\x%02x", c) < 0)
			return -1;
		i++;
	}
	return 0;
}

static ssize_t tw_write(void *cookie, const char *buf, size_t n)
{
	struct textout *t = cookie;
	unsigned char *b;
	size_t k = t->npend;
	int r;

	if (t->npend == 0)
		return put(t, (const unsigned char *)buf, n, false) < 0 ? -1 : (ssize_t)n;
	/* a sequence cut by the last piece: completed from this one's start */
	if ((b = malloc(k + n)) == NULL)
		return -1;
	memcpy(b, t->pend, k);
	memcpy(b + k, buf, n);
	t->npend = 0;
	r = put(t, b, k + n, false);
	free(b);
	return r < 0 ? -1 : (ssize_t)n;
}

static int tw_close(void *cookie)
{
	struct textout *t = cookie;
	int r = 0;

	if (t->npend > 0) {
		unsigned char p[4];
		size_t k = t->npend;

		memcpy(p, t->pend, k);
		t->npend = 0;
		if (put(t, p, k, true) < 0)
			r = EOF;
	}
	if (fflush(t->to) != 0)
		r = EOF;
	free(t);
	return r;
}

FILE *textout_open(FILE *to)
{
	static const cookie_io_functions_t io = { .write = tw_write, .close = tw_close };
	struct textout *t = calloc(1, sizeof(*t));
	FILE *f;

	if (t == NULL)
		return NULL;
	t->to = to;
	if ((f = fopencookie(t, "w", io)) == NULL)
		free(t);
	return f;
}

int textout_close(FILE *f)
{
	return fclose(f);
}
