/*
 * Fuzz target: gprofctl report's JSON scanner (ctl/jscan.c) on arbitrary
 * bytes (a trace file is whatever was on disk). Properties:
 *  - fed whole, and fed in pieces of 1-8 bytes (the first byte picks the
 *    sizes), it reports the same events, the same verdict, the same error
 *    offset;
 *  - yajl, a maintained parser, run on the same bytes, gives the same
 *    verdict, and when both accept, the same events (keys, strings with
 *    their escapes decoded, numbers' text, literals, containers). Inputs
 *    where yajl departs from RFC 8259 are left out of that comparison:
 *    '\v' or '\f' (yajl takes them for whitespace) and surrogate escapes
 *    (yajl decodes a lone one as '?'); and where yajl accepts a complete
 *    value followed by the start of another cut by the end of the input
 *    ('"a" "b'), which jscan refuses, only the events are compared.
 */
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "fuzz.h"
#include "jscan.h"

/* The events as one byte string: a tag, then for texts their length and
 * bytes. */
struct log { char *v; size_t n, cap; };

static int put(struct log *l, char tag, const char *s, size_t n)
{
	size_t need = l->n + 1 + sizeof(n) + n;

	if (need > l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		char *v;

		while (cap < need)
			cap *= 2;
		if ((v = realloc(l->v, cap)) == NULL)
			return 0;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = tag;
	if (s != NULL) {
		memcpy(l->v + l->n, &n, sizeof(n));
		memcpy(l->v + l->n + sizeof(n), s, n);
		l->n += sizeof(n) + n;
	}
	return 1;
}

static int j_start_map(void *c) { return put(c, '{', NULL, 0); }
static int j_end_map(void *c) { return put(c, '}', NULL, 0); }
static int j_start_array(void *c) { return put(c, '[', NULL, 0); }
static int j_end_array(void *c) { return put(c, ']', NULL, 0); }
static int j_key(void *c, const char *s, size_t n) { return put(c, 'k', s, n); }
static int j_string(void *c, const char *s, size_t n) { return put(c, 's', s, n); }
static int j_number(void *c, const char *s, size_t n) { return put(c, 'n', s, n); }
static int j_literal(void *c, enum jscan_literal w) { return put(c, "0ft"[w], NULL, 0); }

static const struct jscan_cb jcb = { j_start_map, j_end_map, j_start_array, j_end_array, j_key,
                                     j_string, j_number, j_literal };

static int y_null(void *c) { return put(c, '0', NULL, 0); }
static int y_bool(void *c, int b) { return put(c, b ? 't' : 'f', NULL, 0); }
static int y_number(void *c, const char *s, size_t n) { return put(c, 'n', s, n); }
static int y_string(void *c, const unsigned char *s, size_t n)
{
	return put(c, 's', (const char *)s, n);
}
static int y_key(void *c, const unsigned char *s, size_t n)
{
	return put(c, 'k', (const char *)s, n);
}

static const yajl_callbacks ycb = { y_null, y_bool, NULL, NULL, y_number, y_string, j_start_map,
                                    y_key, j_end_map, j_start_array, j_end_array };

struct result { int ok; uint64_t off; struct log log; };

static void scan(const uint8_t *d, size_t n, size_t step_seed, struct result *r)
{
	struct jscan *j;
	size_t i = 0, k = 0;

	memset(r, 0, sizeof(*r));
	if ((j = jscan_new(&jcb, &r->log)) == NULL)
		return;
	r->ok = 1;
	while (i < n && r->ok) {
		size_t step = step_seed ? 1 + (step_seed + k++ * 7) % 8 : n;

		if (step > n - i)
			step = n - i;
		r->ok = jscan_feed(j, (const char *)d + i, step) == 0;
		i += step;
	}
	if (r->ok)
		r->ok = jscan_finish(j) == 0;
	r->off = r->ok ? 0 : jscan_error_offset(j);
	FUZZ_CHECK(r->ok == (jscan_error(j) == NULL));
	jscan_free(j);
}

/* Did the events make one complete value (containers all closed)? */
static int complete(const struct log *l)
{
	size_t i = 0;
	long depth = 0;
	int values = 0;

	while (i < l->n) {
		char t = l->v[i++];
		size_t n;

		if (t == '{' || t == '[')
			depth++;
		else if (t == '}' || t == ']')
			depth--;
		if (t == 'k' || t == 's' || t == 'n') {
			memcpy(&n, l->v + i, sizeof(n));
			i += sizeof(n) + n;
		}
		if (depth == 0 && t != 'k')
			values++;
	}
	return depth == 0 && values == 1;
}

static int yajl_departs(const uint8_t *d, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (d[i] == '\v' || d[i] == '\f')
			return 1;
		if (d[i] == '\\' && i + 2 < n && d[i + 1] == 'u' && (d[i + 2] == 'd' || d[i + 2] == 'D'))
			return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole, pieces;
	struct log ylog = { 0 };
	yajl_handle h;
	int yok;

	if (size == 0)
		return 0;
	scan(data + 1, size - 1, 0, &whole);
	scan(data + 1, size - 1, data[0] | 1u, &pieces);
	FUZZ_CHECK(whole.ok == pieces.ok && whole.off == pieces.off);
	FUZZ_CHECK(whole.log.n == pieces.log.n &&
	           (whole.log.n == 0 || memcmp(whole.log.v, pieces.log.v, whole.log.n) == 0));
	if (!yajl_departs(data + 1, size - 1) && (h = yajl_alloc(&ycb, NULL, &ylog)) != NULL) {
		yajl_config(h, yajl_dont_validate_strings, 1);
		yok = yajl_parse(h, data + 1, size - 1) == yajl_status_ok &&
		      yajl_complete_parse(h) == yajl_status_ok;
		yajl_free(h);
		FUZZ_CHECK(yok == whole.ok || (yok && complete(&whole.log)));
		if (yok)
			FUZZ_CHECK(ylog.n == whole.log.n &&
			           (ylog.n == 0 || memcmp(ylog.v, whole.log.v, ylog.n) == 0));
	}
	free(ylog.v);
	free(whole.log.v);
	free(pieces.log.v);
	return 0;
}
