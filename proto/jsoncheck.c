/*
 * jsoncheck: see jsoncheck.h. The scanner tracks only what it must: whether
 * it is inside a string, whether the previous byte was a backslash, and the
 * nesting depth outside strings. Everything else about JSON syntax is left
 * to cJSON.
 */
#include <errno.h>
#include <stdint.h>

#include "jsoncheck.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_seq(const uint8_t *s, size_t avail)
{
	uint8_t c = s[0], lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f; /* no UTF-16 surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f; /* nothing above U+10FFFF */
	} else
		return 0;
	if (avail < n)
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

static int is_nul_escape(const uint8_t *s, size_t avail)
{
	/* s points just after "\u" */
	return avail >= 4 && s[0] == '0' && s[1] == '0' && s[2] == '0' && s[3] == '0';
}

int jsoncheck_text(const char *text, size_t len, unsigned max_depth, struct perr *err)
{
	const uint8_t *s = (const uint8_t *)text;
	unsigned depth = 0;
	int in_str = 0, esc = 0;
	size_t i = 0, n;

	while (i < len) {
		uint8_t c = s[i];

		if (c == 0)
			return perr_set(err, -EBADMSG, "NUL byte at offset %zu", i);
		if (c >= 0x80) {
			n = utf8_seq(s + i, len - i);
			if (n == 0)
				return perr_set(err, -EBADMSG, "invalid UTF-8 at offset %zu; "
				                "send text as UTF-8", i);
			i += n;
			esc = 0;
			continue;
		}
		if (in_str) {
			if (esc) {
				if (c == 'u' && is_nul_escape(s + i + 1, len - i - 1))
					return perr_set(err, -EBADMSG, "\\u0000 at offset %zu: "
					                "strings may not contain NUL", i - 1);
				esc = 0;
			} else if (c == '\\')
				esc = 1;
			else if (c == '"')
				in_str = 0;
			else if (c < 0x20)
				return perr_set(err, -EBADMSG, "raw control character 0x%02x "
				                "in a string at offset %zu; escape it", c, i);
		} else if (c == '"')
			in_str = 1;
		else if (c == '{' || c == '[') {
			if (++depth > max_depth)
				return perr_set(err, -EBADMSG, "JSON nested deeper than %u "
				                "levels at offset %zu", max_depth, i);
		} else if ((c == '}' || c == ']') && depth > 0)
			depth--;
		i++;
	}
	return 0;
}
