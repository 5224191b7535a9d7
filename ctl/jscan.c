/*
 * jscan: see jscan.h. Two layers: token() finds one complete token at a
 * pointer (or says it needs more bytes, or what is wrong with it), and
 * act() moves the grammar's state (what may come next, the stack of open
 * containers) and calls the reader's callbacks.
 */
#include <stdlib.h>
#include <string.h>

#include "jscan.h"

#define DEPTH_LIMIT 100000
/* inlined into the scanning loop: a call per token cost 15 % (perf) */
#define HOT static inline __attribute__((always_inline))
#define CARRY_STEP 4096

enum want { W_VALUE, W_VALUE_OR_END, W_KEY_OR_END, W_KEY, W_COLON, W_COMMA_OR_END, W_DONE };
enum tok { T_LBRACE, T_RBRACE, T_LBRACK, T_RBRACK, T_COLON, T_COMMA, T_STRING, T_NUMBER,
           T_LITERAL };

struct jscan {
	const struct jscan_cb *cb;
	void *ctx;
	enum want want;
	unsigned char *stack;      /* 'm' or 'a' per open container */
	size_t depth, capstack;
	char *carry;               /* a token cut by the end of a piece */
	size_t ncarry, capcarry;
	size_t carry_seen;         /* carry[0..carry_seen) looked at by may_end */
	int carry_esc;             /* carry_seen is just after a backslash */
	uint64_t carry_off;        /* the input offset of carry[0] */
	char *dec;                 /* a string with escapes, decoded */
	size_t capdec;
	uint64_t base;             /* the input offset of the current piece */
	int failed, truncated;
	const char *err;
	uint64_t err_off;
};

/* What token() found. */
struct token {
	enum tok t;
	enum jscan_literal lit;
	const char *s;             /* a string's text (decoded), a number's text */
	size_t n;
};

struct jscan *jscan_new(const struct jscan_cb *cb, void *ctx)
{
	struct jscan *j = calloc(1, sizeof(*j));

	if (j != NULL) {
		j->cb = cb;
		j->ctx = ctx;
		j->want = W_VALUE;
	}
	return j;
}

void jscan_free(struct jscan *j)
{
	if (j == NULL)
		return;
	free(j->stack);
	free(j->carry);
	free(j->dec);
	free(j);
}

const char *jscan_error(const struct jscan *j)
{
	return j->err;
}

uint64_t jscan_error_offset(const struct jscan *j)
{
	return j->err_off;
}

int jscan_truncated(const struct jscan *j)
{
	return j->truncated;
}

static int fail(struct jscan *j, const char *why, uint64_t off)
{
	if (!j->failed) {
		j->failed = 1;
		j->err = why;
		j->err_off = off;
	}
	return -1;
}

/* ---- tokens ---- */

/* The bytes a number's text is made of. */
static const unsigned char numchar[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
	['8'] = 1, ['9'] = 1, ['-'] = 1, ['+'] = 1, ['.'] = 1, ['e'] = 1, ['E'] = 1,
};

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Might one of these 8 bytes be '"', '\\' or a control character? Never
 * says no wrongly (it can say yes wrongly: the bytes are then looked at
 * one by one). */
static int special8(uint64_t x)
{
	uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');

	return (((q - ONES) & ~q) | ((b - ONES) & ~b) | ((x - ONES * 0x20) & ~x)) & HIGHS ? 1 : 0;
}

static int hex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int hex4(const char *s)
{
	int v = 0, i, h;

	for (i = 0; i < 4; i++) {
		if ((h = hex((unsigned char)s[i])) < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static size_t utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Decodes the escapes of a string's body s[0..n) into j->dec. The length,
 * or -1 with *bad at the offending escape. */
static long decode(struct jscan *j, const char *s, size_t n, size_t *bad)
{
	size_t i, o = 0;

	if (j->capdec < n + 1) {
		char *d = realloc(j->dec, n + 1);

		if (d == NULL)
			return -2;
		j->dec = d;
		j->capdec = n + 1;
	}
	for (i = 0; i < n; i++) {
		unsigned long cp;
		int v;

		if (s[i] != '\\') {
			j->dec[o++] = s[i];
			continue;
		}
		*bad = i;
		switch (s[++i]) {
		case '"': case '\\': case '/': j->dec[o++] = s[i]; break;
		case 'b': j->dec[o++] = '\b'; break;
		case 'f': j->dec[o++] = '\f'; break;
		case 'n': j->dec[o++] = '\n'; break;
		case 'r': j->dec[o++] = '\r'; break;
		case 't': j->dec[o++] = '\t'; break;
		case 'u': /* four hex digits, at s[i + 1..i + 4] */
			if (i + 4 >= n || (v = hex4(s + i + 1)) < 0)
				return -1;
			i += 4;
			cp = (unsigned long)v;
			/* a surrogate pair is one character */
			if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < n && s[i + 1] == '\\' && s[i + 2] == 'u' &&
			    (v = hex4(s + i + 3)) >= 0xdc00 && v < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + ((unsigned long)v - 0xdc00);
				i += 6;
			}
			o += utf8(j->dec + o, cp);
			break;
		default:
			return -1;
		}
	}
	return (long)o;
}

/* One token at p (not whitespace): its length; 0 when it may go on past
 * end (final: there is nothing past end, so that is an error); -1 with
 * the error set (at off + the offending byte). */
HOT long token(struct jscan *j, const char *p, const char *end, int final, uint64_t off,
               struct token *tk)
{
	const char *q;
	char c = *p;

	/* tested in the order they are common in a trace, as conditions: a
	 * switch's jump table mispredicted on every other token (perf) */
	if (c == '"')
		goto string;
	if ((c >= '0' && c <= '9') || c == '-')
		goto number;
	if (c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',') {
		tk->t = c == '{' ? T_LBRACE : c == '}' ? T_RBRACE : c == '[' ? T_LBRACK :
		        c == ']' ? T_RBRACK : c == ':' ? T_COLON : T_COMMA;
		return 1;
	}
	if (c == 't' || c == 'f' || c == 'n')
		goto literal;
	return fail(j, "an unexpected character", off);
string: {
		int esc = 0;

		for (q = p + 1;;) {
			uint64_t x;

			while (end - q >= 8 && (memcpy(&x, q, 8), !special8(x)))
				q += 8;
			if (q >= end)
				goto more;
			if (*q == '"')
				break;
			if (*q == '\\') {
				esc = 1;
				if (end - q < 2)
					goto more;
				q += 2;
			} else if ((unsigned char)*q < 0x20) {
				return fail(j, "a control character inside a string (escape it)",
				            off + (uint64_t)(q - p));
			} else
				q++;
		}
		tk->t = T_STRING;
		tk->s = p + 1;
		tk->n = (size_t)(q - p - 1);
		if (esc) {
			size_t bad = 0;
			long n = decode(j, p + 1, tk->n, &bad);

			if (n == -2)
				return fail(j, "out of memory", off);
			if (n < 0)
				return fail(j, "an invalid escape in a string", off + 1 + bad);
			tk->s = j->dec;
			tk->n = (size_t)n;
		}
		return q + 1 - p;
	}
number: {
		const char *s = p;

		for (q = p; q < end && numchar[(unsigned char)*q]; q++)
			;
		if (q == end && !final)
			return 0;
		/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
		if (s < q && *s == '-')
			s++;
		if (s < q && *s == '0')
			s++;
		else if (s < q && *s >= '1' && *s <= '9')
			while (s < q && *s >= '0' && *s <= '9')
				s++;
		else
			goto bad_number;
		if (s < q && *s == '.') {
			if (++s >= q || *s < '0' || *s > '9')
				goto bad_number;
			while (s < q && *s >= '0' && *s <= '9')
				s++;
		}
		if (s < q && (*s == 'e' || *s == 'E')) {
			if (++s < q && (*s == '+' || *s == '-'))
				s++;
			if (s >= q || *s < '0' || *s > '9')
				goto bad_number;
			while (s < q && *s >= '0' && *s <= '9')
				s++;
		}
		if (s != q)
			goto bad_number;
		tk->t = T_NUMBER;
		tk->s = p;
		tk->n = (size_t)(q - p);
		return q - p;
bad_number:
		if (q == end)
			j->truncated = 1; /* "-" or "1." at the very end */
		return fail(j, "an invalid number", off + (uint64_t)(s - p));
	}
literal:
		for (q = p; q < end && *q >= 'a' && *q <= 'z'; q++)
			;
		if (q - p <= 5 && q == end && !final) /* more than 5 letters: no literal */
			return 0;
		tk->t = T_LITERAL;
		if (q - p == 4 && memcmp(p, "true", 4) == 0)
			tk->lit = JSCAN_TRUE;
		else if (q - p == 5 && memcmp(p, "false", 5) == 0)
			tk->lit = JSCAN_FALSE;
		else if (q - p == 4 && memcmp(p, "null", 4) == 0)
			tk->lit = JSCAN_NULL;
		else {
			if (q == end && final && (memcmp(p, "true", (size_t)(q - p)) == 0 ||
			                          memcmp(p, "null", (size_t)(q - p)) == 0 ||
			                          memcmp(p, "false", (size_t)(q - p)) == 0))
				j->truncated = 1;
			return fail(j, "an invalid literal (true, false and null are the only ones)", off);
		}
		return q - p;
more:
	if (!final)
		return 0;
	j->truncated = 1;
	return fail(j, "the input ends inside a string", off);
}

/* ---- the grammar ---- */

static int stopped(struct jscan *j, uint64_t off)
{
	return fail(j, "stopped by the reader", off);
}

static void after_value(struct jscan *j)
{
	j->want = j->depth ? W_COMMA_OR_END : W_DONE;
}

static int push(struct jscan *j, unsigned char kind, uint64_t off)
{
	if (j->depth == DEPTH_LIMIT)
		return fail(j, "containers nested deeper than 100000 levels", off);
	if (j->depth == j->capstack) {
		size_t cap = j->capstack ? j->capstack * 2 : 64;
		unsigned char *s = realloc(j->stack, cap);

		if (s == NULL)
			return fail(j, "out of memory", off);
		j->stack = s;
		j->capstack = cap;
	}
	j->stack[j->depth++] = kind;
	return 0;
}

static int pop(struct jscan *j, unsigned char kind, uint64_t off)
{
	const struct jscan_cb *cb = j->cb;

	if (j->depth == 0 || j->stack[j->depth - 1] != kind)
		return fail(j, kind == 'm' ? "a '}' that closes no object" :
		            "a ']' that closes no array", off);
	j->depth--;
	if (!(kind == 'm' ? (cb->end_map ? cb->end_map(j->ctx) : 1) :
	      (cb->end_array ? cb->end_array(j->ctx) : 1)))
		return stopped(j, off);
	after_value(j);
	return 0;
}

HOT int value(struct jscan *j, const struct token *tk, uint64_t off)
{
	const struct jscan_cb *cb = j->cb;
	int ok = 1;

	switch (tk->t) {
	case T_LBRACE:
		if (push(j, 'm', off) < 0)
			return -1;
		j->want = W_KEY_OR_END;
		return cb->start_map && !cb->start_map(j->ctx) ? stopped(j, off) : 0;
	case T_LBRACK:
		if (push(j, 'a', off) < 0)
			return -1;
		j->want = W_VALUE_OR_END;
		return cb->start_array && !cb->start_array(j->ctx) ? stopped(j, off) : 0;
	case T_STRING: ok = cb->string ? cb->string(j->ctx, tk->s, tk->n) : 1; break;
	case T_NUMBER: ok = cb->number ? cb->number(j->ctx, tk->s, tk->n) : 1; break;
	case T_LITERAL: ok = cb->literal ? cb->literal(j->ctx, tk->lit) : 1; break;
	default:
		return fail(j, j->depth ? "a value expected here" : "a JSON value expected", off);
	}
	if (!ok)
		return stopped(j, off);
	after_value(j);
	return 0;
}

HOT int act(struct jscan *j, const struct token *tk, uint64_t off)
{
	switch (j->want) {
	case W_DONE:
		return fail(j, "text after the end of the JSON value", off);
	case W_COLON:
		if (tk->t != T_COLON)
			return fail(j, "a ':' expected after the key", off);
		j->want = W_VALUE;
		return 0;
	case W_COMMA_OR_END:
		if (tk->t == T_COMMA) {
			j->want = j->stack[j->depth - 1] == 'm' ? W_KEY : W_VALUE;
			return 0;
		}
		if (tk->t == T_RBRACE || tk->t == T_RBRACK)
			return pop(j, tk->t == T_RBRACE ? 'm' : 'a', off);
		return fail(j, j->stack[j->depth - 1] == 'm' ? "a ',' or '}' expected" :
		            "a ',' or ']' expected", off);
	case W_KEY_OR_END:
		if (tk->t == T_RBRACE)
			return pop(j, 'm', off);
		/* fall through */
	case W_KEY:
		if (tk->t != T_STRING)
			return fail(j, "a key (a string) expected", off);
		if (j->cb->key && !j->cb->key(j->ctx, tk->s, tk->n))
			return stopped(j, off);
		j->want = W_COLON;
		return 0;
	case W_VALUE_OR_END:
		if (tk->t == T_RBRACK)
			return pop(j, 'a', off);
		/* fall through */
	case W_VALUE:
		return value(j, tk, off);
	}
	return fail(j, "internal error", off);
}

static int carry_add(struct jscan *j, const char *p, size_t n)
{
	if (j->ncarry + n > j->capcarry) {
		size_t cap = j->capcarry ? j->capcarry : CARRY_STEP;
		char *c;

		while (cap < j->ncarry + n)
			cap *= 2;
		if ((c = realloc(j->carry, cap)) == NULL)
			return fail(j, "out of memory", j->carry_off);
		j->carry = c;
		j->capcarry = cap;
	}
	memcpy(j->carry + j->ncarry, p, n);
	j->ncarry += n;
	return 0;
}

uint64_t jscan_carry_scanned;

/* Whether the carried token can end within what was added to it since the
 * last look, by token()'s own rules: a string ends at an unescaped quote,
 * a number at the first byte that is not numchar, a literal at the first
 * that is not a-z (or past 5 letters). Until it can, token() need not read
 * the carry again: it reads all of it each time, and a long token cut
 * across many pieces would cost its length squared (issue 43). Never says
 * no wrongly: then the carry would take bytes past the token's end. */
static int may_end(struct jscan *j)
{
	unsigned char c0 = (unsigned char)j->carry[0];
	size_t i = j->carry_seen ? j->carry_seen : 1;
	int end = 0;

	if (c0 == '"') {
		for (; i < j->ncarry && !end; i++) {
			if (j->carry_esc)
				j->carry_esc = 0;
			else if (j->carry[i] == '\\')
				j->carry_esc = 1;
			else if (j->carry[i] == '"')
				end = 1;
		}
	} else if ((c0 >= '0' && c0 <= '9') || c0 == '-') { /* token()'s number: */
		for (; i < j->ncarry && !end; i++)
			end = !numchar[(unsigned char)j->carry[i]];
	} else if (c0 == 't' || c0 == 'f' || c0 == 'n') { /* and literal */
		for (; i < j->ncarry && !end; i++)
			end = j->carry[i] < 'a' || j->carry[i] > 'z' || i >= 5;
	} else {
		end = 1;
	}
	j->carry_seen = j->ncarry;
	return end;
}

/* Completes the carried token from buf; how many bytes of buf it took
 * (n when it is still not complete), or -1. */
static long complete_carry(struct jscan *j, const char *buf, size_t n, int final)
{
	size_t old = j->ncarry, taken = 0;
	struct token tk = { 0 };
	long r;

	for (;;) {
		size_t step = n - taken < CARRY_STEP ? n - taken : CARRY_STEP;

		if (carry_add(j, buf + taken, step) < 0)
			return -1;
		taken += step;
		if (!may_end(j) && !(final && taken == n)) {
			if (taken == n)
				return (long)n; /* still incomplete: all of it carried */
			continue;
		}
		jscan_carry_scanned += j->ncarry - step; /* what token() read before */
		r = token(j, j->carry, j->carry + j->ncarry, final && taken == n, j->carry_off, &tk);
		if (r < 0)
			return -1;
		if (r > 0)
			break;
		if (taken == n)
			return (long)n; /* still incomplete: all of it carried */
	}
	j->ncarry = j->carry_seen = 0;
	j->carry_esc = 0;
	if (act(j, &tk, j->carry_off) < 0)
		return -1;
	return (long)((size_t)r - old);
}

static int scan(struct jscan *j, const char *buf, size_t n, int final)
{
	const char *p = buf, *end = buf + n;
	const uint64_t base = j->base; /* kept in a register across the callbacks */
	struct token tk = { 0 };
	long r;

	if (j->failed)
		return -1;
	if (j->ncarry) {
		if ((r = complete_carry(j, buf, n, final)) < 0)
			return -1;
		p += r;
	}
	while (p < end && j->ncarry == 0) {
		switch (*p) { /* the commonest bytes first, without a call */
		case ' ': case '\n': case '\r': case '\t':
			p++;
			continue;
		case ':':
			if (j->want != W_COLON)
				break;
			j->want = W_VALUE;
			p++;
			continue;
		case ',':
			if (j->want != W_COMMA_OR_END)
				break;
			j->want = j->stack[j->depth - 1] == 'm' ? W_KEY : W_VALUE;
			p++;
			continue;
		default:
			break;
		}
		r = token(j, p, end, final, base + (uint64_t)(p - buf), &tk);
		if (r < 0)
			return -1;
		if (r == 0) { /* cut by the piece's end: carried to the next */
			j->carry_off = base + (uint64_t)(p - buf);
			if (carry_add(j, p, (size_t)(end - p)) < 0)
				return -1;
			break;
		}
		if (act(j, &tk, base + (uint64_t)(p - buf)) < 0)
			return -1;
		p += r;
	}
	j->base = base + n;
	return 0;
}

int jscan_feed(struct jscan *j, const char *buf, size_t n)
{
	return scan(j, buf, n, 0);
}

int jscan_finish(struct jscan *j)
{
	if (j->failed)
		return -1;
	if (j->ncarry && scan(j, "", 0, 1) < 0)
		return -1;
	if (j->want != W_DONE) {
		j->truncated = 1;
		return fail(j, j->depth || j->want != W_VALUE ? "the input ends before the JSON value does"
		                                                : "no JSON value in the input", j->base);
	}
	return 0;
}
