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
 * caller's limit; every byte the reader allocates is counted (bytes, peak)
 * and the file is refused, where it stands, once they would pass
 * PICKLE_BYTES_PER_BYTE times its size plus PICKLE_BYTES_FIXED: memory is a
 * stated multiple of the input, whatever the file (docs/REPORT.md, Limits).
 * Reading is one pass, linear in the input.
 *
 * Walking the tree is counted too: pk_get and pk_at add what they look at
 * to pk_steps (one process-wide count), so a walker can hold its work to a
 * multiple of the input where shared values (the memo) would otherwise let
 * a small file be walked without end; pk_get reads dicts of at most
 * PK_GET_MAX keys (a bigger one reads as having none).
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
	bool want_dict;            /* refuse at its first opcode a file whose value is
	                              not a dict (set by the caller) */
	uint64_t bytes, peak;      /* allocated now (the tree, and the stack while
	                              reading), and at most */
	size_t err_off;
	char error[200];
};

#define PICKLE_MAX_VALUES (64u << 20)
/* The memory a file may cost: a real snapshot needs about 3 bytes per byte
 * (the H100 fixture: 3.1, 4.2 with the first 128 KB pool block); a file of
 * nothing but empty lists would need 40 to 48, and is refused at 16. */
#define PICKLE_BYTES_PER_BYTE 16
#define PICKLE_BYTES_FIXED (1u << 20)
/* A dict pk_get searches (snapshots' have about ten keys). */
#define PK_GET_MAX 256

/* Keys compared by pk_get and values reached by pk_at, in this process. */
extern uint64_t pk_steps;

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
