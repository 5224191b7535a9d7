/*
 * pickle: a reader for the data subset of Python's pickle format (protocols
 * 2 to 5), enough for PyTorch's memory snapshots: dicts, lists, tuples,
 * str, bytes, int, float, bool and None, with the memo (shared values).
 *
 * It is a data reader, never an unpickler: opcodes that name or call Python
 * objects (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*,
 * PERSID, out-of-band buffers) are refused with the offset and the reason;
 * nothing in the file is executed or looked up. Every length is checked
 * against the bytes that remain before anything is allocated for it, memo
 * indices against the file's size, and the number of values against a
 * caller's limit, so memory is bounded by the input's size.
 *
 * Ownership: pickle_load returns a tree owned by struct pickle (every value
 * lives in its pool; strings point into the caller's buffer, which must
 * outlive it); pickle_free releases it all. Values may be shared (the memo)
 * and a hostile file can make a list contain itself: walk the tree by the
 * paths you expect, never recursively without a bound.
 */
#ifndef GPROFCTL_PICKLE_H
#define GPROFCTL_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pk_type { PK_NONE, PK_BOOL, PK_INT, PK_BIGINT, PK_FLOAT, PK_STR, PK_BYTES, PK_LIST,
               PK_TUPLE, PK_DICT };

struct pk {
	uint8_t type;
	union {
		int64_t i;             /* PK_BOOL (0/1), PK_INT */
		double f;              /* PK_FLOAT */
		struct { const char *p; size_t n; } s;   /* PK_STR (UTF-8), PK_BYTES */
		struct { struct pk **v; size_t n, cap; } seq; /* lists, tuples; dicts:
		                                               * key, value, key, value */
	} u;
};

struct pickle {
	struct pk *root;
	struct pk **blocks;        /* the pool: every value, freed together */
	size_t nblocks, used, values;
	size_t max_values;         /* 0: the default, PICKLE_MAX_VALUES */
	size_t err_off;
	char error[200];
};

#define PICKLE_MAX_VALUES (64u << 20)

/* Reads buf (len bytes) into p->root. 0; or -1 with p->error saying what
 * and p->err_off where. p must be zeroed (max_values may be set first). */
int pickle_load(struct pickle *p, const uint8_t *buf, size_t len);
void pickle_free(struct pickle *p);

/* The value of key in dict d (a str key), or NULL (d not a dict, no key). */
const struct pk *pk_get(const struct pk *d, const char *key);
/* Whole numbers: an int (or bool) as int64; false for anything else. */
bool pk_int(const struct pk *v, int64_t *out);
/* Does v hold the str s? */
bool pk_str_is(const struct pk *v, const char *s);
/* A list's or tuple's length (0 for anything else). */
size_t pk_len(const struct pk *v);
const struct pk *pk_at(const struct pk *v, size_t i);

#endif
