/*
 * pickle: see pickle.h. A stack machine over the input, one opcode at a
 * time, as Python's own unpickler runs, but with only the data opcodes:
 * anything that would name, import or call a Python object is refused
 * where it stands, before any value is made from it.
 *
 * Bounds, each checked before the allocation it guards: an opcode's
 * argument and a string's length must fit in the bytes that remain (a
 * 64-bit length is compared, never added to a pointer first); the stack,
 * the marks and the memo hold at most one entry per input byte (memo
 * indices above the input's size are refused); values are counted against
 * max_values, and every allocation against the bytes budget (account()).
 * None, True, False, the empty tuple and the ints 0 to 255 are one shared
 * value each (Python shares them too), so the commonest short opcodes
 * allocate nothing but their stack slot. Every value is carved from a pool freed in one go, so a
 * failure at any point frees everything, and shared or cyclic values
 * (the memo can make a list hold itself) cost nothing extra to free.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "pickle.h"

#define POOL_BLOCK 4096

uint64_t pk_steps;

/* The shared immutable values (never written: their type is all they hold). */
static struct pk pk_none = { .type = PK_NONE }, pk_true = { .type = PK_BOOL, .u.i = 1 },
                 pk_false = { .type = PK_BOOL, .u.i = 0 }, pk_empty = { .type = PK_TUPLE };
/* 0..255, what BININT1 makes (set by pickle_load the first time) */
static struct pk pk_small[256];

struct vm {
	struct pickle *p;
	const uint8_t *b;
	size_t len, off;
	struct pk **stack; size_t sn, scap;
	size_t *marks; size_t mn, mcap;
	struct pk **memo; size_t memocap, memolen;
};

static int fail(struct vm *m, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct vm *m, size_t at, const char *fmt, ...)
{
	va_list ap;

	if (m->p->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(m->p->error, sizeof(m->p->error), fmt, ap);
		va_end(ap);
		m->p->err_off = at;
	}
	return -1;
}

/* Counts n more bytes (or fewer, n negative) against the budget: -1, said
 * why, when they would pass it. */
static int account(struct vm *m, int64_t n)
{
	struct pickle *p = m->p;
	uint64_t max = (uint64_t)m->len * PICKLE_BYTES_PER_BYTE + PICKLE_BYTES_FIXED;

	if (n > 0 && p->bytes + (uint64_t)n > max)
		return fail(m, m->off, "reading it would take more than %llu bytes of memory (%d "
		            "per byte of the file, which no memory snapshot needs): refused, not a "
		            "memory snapshot", (unsigned long long)max, PICKLE_BYTES_PER_BYTE);
	p->bytes += (uint64_t)n;
	if (p->bytes > p->peak)
		p->peak = p->bytes;
	return 0;
}

/* grow() with the budget (the capacity it will reach counted first): 0,
 * or -1 said why. */
static int cgrow(struct vm *m, void **v, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 16;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	if (account(m, (int64_t)((c - *cap) * size)) < 0)
		return -1;
	if (!grow(v, cap, need, size))
		return fail(m, m->off, "out of memory");
	return 0;
}

static struct pk *new_val(struct vm *m, uint8_t type)
{
	struct pickle *p = m->p;
	size_t max = p->max_values ? p->max_values : PICKLE_MAX_VALUES;
	struct pk *v;

	if (p->values >= max) {
		fail(m, m->off, "more than %zu values: too large to read (a memory snapshot of "
		     "that size is beyond gprofctl report)", max);
		return NULL;
	}
	if (p->nblocks == 0 || p->used == POOL_BLOCK) {
		struct pk **nb;

		if (account(m, POOL_BLOCK * sizeof(struct pk) + sizeof(*nb)) < 0)
			return NULL;
		nb = realloc(p->blocks, (p->nblocks + 1) * sizeof(*nb));

		if (nb == NULL)
			return NULL;
		p->blocks = nb;
		if ((nb[p->nblocks] = calloc(POOL_BLOCK, sizeof(struct pk))) == NULL)
			return NULL;
		p->nblocks++;
		p->used = 0;
	}
	v = &p->blocks[p->nblocks - 1][p->used++];
	p->values++;
	v->type = type;
	return v;
}

static int push(struct vm *m, struct pk *v)
{
	if (v == NULL)
		return m->p->error[0] ? -1 : fail(m, m->off, "out of memory");
	if (cgrow(m, (void **)&m->stack, &m->scap, m->sn + 1, sizeof(*m->stack)) < 0)
		return -1;
	m->stack[m->sn++] = v;
	return 0;
}

/* The values since the innermost mark (none when the stack is at it). */
static size_t mark_base(const struct vm *m)
{
	return m->mn ? m->marks[m->mn - 1] : 0;
}

static struct pk *pop(struct vm *m, size_t at, const char *op)
{
	if (m->sn == 0 || m->sn <= mark_base(m)) {
		fail(m, at, "%s with nothing on the stack: the file is not a valid pickle", op);
		return NULL;
	}
	return m->stack[--m->sn];
}

static int seq_add(struct vm *m, struct pk *s, struct pk *v)
{
	if (cgrow(m, (void **)&s->u.seq.v, &s->u.seq.cap, s->u.seq.n + 1, sizeof(*s->u.seq.v)) < 0)
		return -1;
	s->u.seq.v[s->u.seq.n++] = v;
	return 0;
}

/* Reads n bytes of argument at the current offset (after the opcode). */
static const uint8_t *arg(struct vm *m, size_t at, size_t n, const char *op)
{
	const uint8_t *a;

	if (n > m->len - m->off) {
		fail(m, at, "%s needs %zu more bytes but the file ends after %zu: it is cut short "
		     "(an unfinished copy?)", op, n, m->len - m->off);
		return NULL;
	}
	a = m->b + m->off;
	m->off += n;
	return a;
}

static uint64_t le(const uint8_t *a, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = n; i-- > 0;)
		v = v << 8 | a[i];
	return v;
}

static int string(struct vm *m, size_t at, size_t lenbytes, uint8_t type, const char *op)
{
	const uint8_t *a = arg(m, at, lenbytes, op);
	uint64_t n;
	struct pk *v;

	if (a == NULL)
		return -1;
	n = le(a, lenbytes);
	if (n > m->len - m->off)
		return fail(m, at, "%s says %llu bytes follow but only %zu remain: the file is cut "
		            "short or its length is false", op, (unsigned long long)n,
		            m->len - m->off);
	if ((v = new_val(m, type)) == NULL)
		return push(m, NULL);
	v->u.s.p = (const char *)m->b + m->off;
	v->u.s.n = (size_t)n;
	m->off += (size_t)n;
	return push(m, v);
}

static int integer(struct vm *m, int64_t x)
{
	struct pk *v = new_val(m, PK_INT);

	if (v != NULL)
		v->u.i = x;
	return push(m, v);
}

/* LONG1/LONG4: n bytes of two's complement, little-endian. */
static int long_n(struct vm *m, size_t at, uint64_t n, const char *op)
{
	const uint8_t *a;
	struct pk *v;
	uint64_t x;

	if (n > m->len - m->off)
		return fail(m, at, "%s says %llu bytes follow but only %zu remain: the file is cut "
		            "short or its length is false", op, (unsigned long long)n,
		            m->len - m->off);
	a = arg(m, at, (size_t)n, op);
	if (n > 8) {
		/* beyond int64 (no snapshot field is): kept as "some big int" */
		v = new_val(m, PK_BIGINT);
		return push(m, v);
	}
	if (n == 0)
		return integer(m, 0);
	x = le(a, (size_t)n);
	if (n < 8 && (a[n - 1] & 0x80))
		x |= ~(uint64_t)0 << (8 * n); /* sign-extend */
	return integer(m, (int64_t)x);
}

/* Pops the values above the innermost mark, and the mark, into a new
 * sequence of type t (a dict takes them as key, value pairs). */
static int from_mark(struct vm *m, size_t at, uint8_t t, const char *op)
{
	size_t base, n;
	struct pk *v;

	if (m->mn == 0)
		return fail(m, at, "%s without a MARK: the file is not a valid pickle", op);
	base = m->marks[--m->mn];
	n = m->sn - base;
	if (t == PK_DICT && n % 2)
		return fail(m, at, "%s with an odd number of keys and values", op);
	if (t == PK_TUPLE && n == 0) {
		m->sn = base;
		return push(m, &pk_empty);
	}
	if ((v = new_val(m, t)) == NULL)
		return push(m, NULL);
	if (n > 0) {
		if (account(m, (int64_t)(n * sizeof(*v->u.seq.v))) < 0)
			return -1;
		if ((v->u.seq.v = malloc(n * sizeof(*v->u.seq.v))) == NULL)
			return fail(m, at, "out of memory");
		memcpy(v->u.seq.v, m->stack + base, n * sizeof(*v->u.seq.v));
		v->u.seq.n = v->u.seq.cap = n;
	}
	m->sn = base;
	return push(m, v);
}

/* APPENDS/SETITEMS: the values above the mark go into the list or dict
 * just below it. */
static int extend_mark(struct vm *m, size_t at, uint8_t t, const char *op)
{
	size_t base, i;
	struct pk *s;

	if (m->mn == 0)
		return fail(m, at, "%s without a MARK: the file is not a valid pickle", op);
	base = m->marks[--m->mn];
	if (base == 0 || m->stack[base - 1]->type != t)
		return fail(m, at, "%s onto something that is not a %s: not a pickle of plain "
		            "data", op, t == PK_DICT ? "dict" : "list");
	if (t == PK_DICT && (m->sn - base) % 2)
		return fail(m, at, "%s with an odd number of keys and values", op);
	s = m->stack[base - 1];
	for (i = base; i < m->sn; i++)
		if (seq_add(m, s, m->stack[i]) < 0)
			return -1;
	m->sn = base;
	return 0;
}

static int memo_put(struct vm *m, size_t at, uint64_t idx)
{
	if (m->sn == 0 || m->sn <= mark_base(m))
		return fail(m, at, "a memo store with nothing on the stack");
	if (idx > m->len)
		return fail(m, at, "memo index %llu is beyond anything a file of %zu bytes can "
		            "hold: the file is not a valid pickle", (unsigned long long)idx, m->len);
	if (idx >= m->memocap) {
		size_t old = m->memocap;

		if (cgrow(m, (void **)&m->memo, &m->memocap, (size_t)idx + 1, sizeof(*m->memo)) < 0)
			return -1;
		memset(m->memo + old, 0, (m->memocap - old) * sizeof(*m->memo));
	}
	m->memo[idx] = m->stack[m->sn - 1];
	if (idx >= m->memolen)
		m->memolen = (size_t)idx + 1;
	return 0;
}

static int memo_get(struct vm *m, size_t at, uint64_t idx)
{
	if (idx >= m->memolen || m->memo[idx] == NULL)
		return fail(m, at, "memo index %llu was never stored: the file is not a valid "
		            "pickle", (unsigned long long)idx);
	return push(m, m->memo[idx]);
}

/* The opcodes refused: their name, and whether they would run code. */
static const char *refused(uint8_t op, bool *code)
{
	*code = true;
	switch (op) {
	case 'c': return "GLOBAL";
	case 0x93: return "STACK_GLOBAL";
	case 'R': return "REDUCE";
	case 'b': return "BUILD";
	case 'i': return "INST";
	case 'o': return "OBJ";
	case 0x81: return "NEWOBJ";
	case 0x92: return "NEWOBJ_EX";
	case 0x82: return "EXT1";
	case 0x83: return "EXT2";
	case 0x84: return "EXT4";
	case 'P': return "PERSID";
	case 'Q': return "BINPERSID";
	default: break;
	}
	*code = false;
	switch (op) {
	case 0x8f: return "EMPTY_SET";
	case 0x90: return "ADDITEMS";
	case 0x91: return "FROZENSET";
	case 0x96: return "BYTEARRAY8";
	case 0x97: return "NEXT_BUFFER";
	case 0x98: return "READONLY_BUFFER";
	case 'I': return "INT";
	case 'L': return "LONG";
	case 'S': return "STRING";
	case 'T': return "BINSTRING";
	case 'U': return "SHORT_BINSTRING";
	case 'V': return "UNICODE";
	case 'F': return "FLOAT";
	case 'p': return "PUT";
	case 'g': return "GET";
	default: return NULL;
	}
}

static int step(struct vm *m, bool *stop)
{
	size_t at = m->off;
	uint8_t op = m->b[m->off++];
	const uint8_t *a;
	struct pk *v, *k, *s;
	bool code;
	const char *name;

	switch (op) {
	case 0x80: /* PROTO */
		if ((a = arg(m, at, 1, "PROTO")) == NULL)
			return -1;
		if (a[0] < 2 || a[0] > 5)
			return fail(m, at, "pickle protocol %u: only 2 to 5 are read (what Python 3 "
			            "writes)", a[0]);
		return 0;
	case 0x95: /* FRAME: a hint for buffered readers; the bytes follow as usual */
		return arg(m, at, 8, "FRAME") ? 0 : -1;
	case '}': return push(m, new_val(m, PK_DICT));
	case ']': return push(m, new_val(m, PK_LIST));
	case ')': return push(m, &pk_empty);
	case 'N': return push(m, &pk_none);
	case 0x88: case 0x89: return push(m, op == 0x88 ? &pk_true : &pk_false);
	case '(':
		if (cgrow(m, (void **)&m->marks, &m->mcap, m->mn + 1, sizeof(*m->marks)) < 0)
			return -1;
		m->marks[m->mn++] = m->sn;
		return 0;
	case 's': /* SETITEM */
		if ((v = pop(m, at, "SETITEM")) == NULL || (k = pop(m, at, "SETITEM")) == NULL)
			return -1;
		if (m->sn <= mark_base(m) || (s = m->stack[m->sn - 1])->type != PK_DICT)
			return fail(m, at, "SETITEM onto something that is not a dict: not a pickle "
			            "of plain data");
		return seq_add(m, s, k) < 0 ? -1 : seq_add(m, s, v);
	case 'u': return extend_mark(m, at, PK_DICT, "SETITEMS");
	case 'a': /* APPEND */
		if ((v = pop(m, at, "APPEND")) == NULL)
			return -1;
		if (m->sn <= mark_base(m) || (s = m->stack[m->sn - 1])->type != PK_LIST)
			return fail(m, at, "APPEND onto something that is not a list: not a pickle "
			            "of plain data");
		return seq_add(m, s, v);
	case 'e': return extend_mark(m, at, PK_LIST, "APPENDS");
	case 't': return from_mark(m, at, PK_TUPLE, "TUPLE");
	case 'l': return from_mark(m, at, PK_LIST, "LIST");
	case 'd': return from_mark(m, at, PK_DICT, "DICT");
	case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
		size_t n = (size_t)(op - 0x84), i;

		if (m->sn < mark_base(m) + n)
			return fail(m, at, "TUPLE%zu with fewer than %zu values on the stack", n, n);
		if ((v = new_val(m, PK_TUPLE)) == NULL)
			return push(m, NULL);
		if (account(m, (int64_t)(n * sizeof(*v->u.seq.v))) < 0)
			return -1;
		if ((v->u.seq.v = malloc(n * sizeof(*v->u.seq.v))) == NULL)
			return fail(m, at, "out of memory");
		for (i = 0; i < n; i++)
			v->u.seq.v[i] = m->stack[m->sn - n + i];
		v->u.seq.n = v->u.seq.cap = n;
		m->sn -= n;
		return push(m, v);
	}
	case 'X': return string(m, at, 4, PK_STR, "BINUNICODE");
	case 0x8c: return string(m, at, 1, PK_STR, "SHORT_BINUNICODE");
	case 0x8d: return string(m, at, 8, PK_STR, "BINUNICODE8");
	case 'B': return string(m, at, 4, PK_BYTES, "BINBYTES");
	case 'C': return string(m, at, 1, PK_BYTES, "SHORT_BINBYTES");
	case 0x8e: return string(m, at, 8, PK_BYTES, "BINBYTES8");
	case 'J':
		if ((a = arg(m, at, 4, "BININT")) == NULL)
			return -1;
		return integer(m, (int32_t)(uint32_t)le(a, 4));
	case 'K':
		if ((a = arg(m, at, 1, "BININT1")) == NULL)
			return -1;
		return push(m, &pk_small[a[0]]);
	case 'M':
		if ((a = arg(m, at, 2, "BININT2")) == NULL)
			return -1;
		return integer(m, (int64_t)le(a, 2));
	case 0x8a:
		if ((a = arg(m, at, 1, "LONG1")) == NULL)
			return -1;
		return long_n(m, at, a[0], "LONG1");
	case 0x8b: {
		int32_t n;

		if ((a = arg(m, at, 4, "LONG4")) == NULL)
			return -1;
		n = (int32_t)(uint32_t)le(a, 4);
		if (n < 0)
			return fail(m, at, "LONG4 with a negative length");
		return long_n(m, at, (uint64_t)n, "LONG4");
	}
	case 'G': {
		uint64_t bits = 0;
		size_t i;

		if ((a = arg(m, at, 8, "BINFLOAT")) == NULL)
			return -1;
		for (i = 0; i < 8; i++) /* big-endian */
			bits = bits << 8 | a[i];
		if ((v = new_val(m, PK_FLOAT)) != NULL)
			memcpy(&v->u.f, &bits, sizeof(bits));
		return push(m, v);
	}
	case 0x94: return memo_put(m, at, m->memolen);
	case 'q':
		if ((a = arg(m, at, 1, "BINPUT")) == NULL)
			return -1;
		return memo_put(m, at, a[0]);
	case 'r':
		if ((a = arg(m, at, 4, "LONG_BINPUT")) == NULL)
			return -1;
		return memo_put(m, at, le(a, 4));
	case 'h':
		if ((a = arg(m, at, 1, "BINGET")) == NULL)
			return -1;
		return memo_get(m, at, a[0]);
	case 'j':
		if ((a = arg(m, at, 4, "LONG_BINGET")) == NULL)
			return -1;
		return memo_get(m, at, le(a, 4));
	case '0': /* POP: a value, or the mark on top */
		if (m->mn && m->marks[m->mn - 1] == m->sn) {
			m->mn--;
			return 0;
		}
		return pop(m, at, "POP") ? 0 : -1;
	case '1': /* POP_MARK */
		if (m->mn == 0)
			return fail(m, at, "POP_MARK without a MARK");
		m->sn = m->marks[--m->mn];
		return 0;
	case '2': /* DUP */
		if (m->sn == 0 || m->sn <= mark_base(m))
			return fail(m, at, "DUP with nothing on the stack");
		return push(m, m->stack[m->sn - 1]);
	case '.':
		if (m->sn != 1 || m->mn != 0)
			return fail(m, at, "STOP with %zu values and %zu marks left: the file is not a "
			            "valid pickle", m->sn, m->mn);
		m->p->root = m->stack[0];
		*stop = true;
		return 0;
	default:
		break;
	}
	if ((name = refused(op, &code)) != NULL && code)
		return fail(m, at, "opcode %s (0x%02x) would import or call Python code; a memory "
		            "snapshot holds only data, so this file is refused, and nothing in it "
		            "was run", name, op);
	if (name != NULL)
		return fail(m, at, "opcode %s (0x%02x) is not used by memory snapshots: this file "
		            "is not one", name, op);
	return fail(m, at, "byte 0x%02x is no pickle opcode: the file is not a pickle, or it "
	            "is damaged", op);
}

int pickle_load(struct pickle *p, const uint8_t *buf, size_t len)
{
	struct vm m = { .p = p, .b = buf, .len = len };
	bool stop = false, begun = false;
	int r = 0;

	p->root = NULL;
	p->error[0] = '\0';
	if (pk_small[1].type != PK_INT)
		for (r = 0; r < 256; r++)
			pk_small[r] = (struct pk){ .type = PK_INT, .u.i = r };
	r = 0;
	if (len == 0 || buf[0] != 0x80) {
		fail(&m, 0, len == 0 ? "the file is empty" : "not a pickle of protocol 2 or later "
		     "(it does not begin with PROTO): not a memory snapshot");
		return -1;
	}
	while (!stop && r == 0) {
		if (m.off >= m.len) {
			r = fail(&m, m.off, "the file ends before the pickle does (no STOP after %zu "
			         "bytes): it is cut short", m.len);
			break;
		}
		r = step(&m, &stop);
		/* the first opcode that made a value (or a mark) made the root */
		if (r == 0 && p->want_dict && !begun && (m.sn > 0 || m.mn > 0)) {
			begun = true;
			if (m.mn > 0 || m.stack[0]->type != PK_DICT)
				r = fail(&m, m.off - 1, "a pickle, but its value is not a dict, as a "
				         "PyTorch memory snapshot's is: not one");
		}
	}
	free(m.stack);
	free(m.marks);
	free(m.memo);
	p->bytes -= (uint64_t)(m.scap * sizeof(*m.stack) + m.mcap * sizeof(*m.marks) +
	                       m.memocap * sizeof(*m.memo));
	if (r < 0) {
		p->root = NULL;
		return -1;
	}
	return 0;
}

void pickle_free(struct pickle *p)
{
	size_t i, j, n;

	for (i = 0; i < p->nblocks; i++) {
		n = i + 1 == p->nblocks ? p->used : POOL_BLOCK;
		for (j = 0; j < n; j++) {
			uint8_t t = p->blocks[i][j].type;

			if (t == PK_LIST || t == PK_TUPLE || t == PK_DICT)
				free(p->blocks[i][j].u.seq.v);
		}
		free(p->blocks[i]);
	}
	free(p->blocks);
	p->blocks = NULL;
	p->nblocks = p->used = p->values = 0;
	p->bytes = 0;
	p->root = NULL;
}

const struct pk *pk_get(const struct pk *d, const char *key)
{
	size_t i, n = strlen(key);

	if (d == NULL || d->type != PK_DICT || d->u.seq.n > 2 * PK_GET_MAX)
		return NULL;
	for (i = d->u.seq.n; i >= 2; i -= 2) { /* the last one wins, as in Python */
		const struct pk *k = d->u.seq.v[i - 2];

		pk_steps++;
		if (k->type == PK_STR && k->u.s.n == n && memcmp(k->u.s.p, key, n) == 0)
			return d->u.seq.v[i - 1];
	}
	return NULL;
}

bool pk_int(const struct pk *v, int64_t *out)
{
	if (v == NULL || (v->type != PK_INT && v->type != PK_BOOL))
		return false;
	*out = v->u.i;
	return true;
}

bool pk_str_is(const struct pk *v, const char *s)
{
	size_t n = strlen(s);

	return v != NULL && v->type == PK_STR && v->u.s.n == n && memcmp(v->u.s.p, s, n) == 0;
}

size_t pk_len(const struct pk *v)
{
	return v != NULL && (v->type == PK_LIST || v->type == PK_TUPLE) ? v->u.seq.n : 0;
}

const struct pk *pk_at(const struct pk *v, size_t i)
{
	pk_steps++;
	return i < pk_len(v) ? v->u.seq.v[i] : NULL;
}
