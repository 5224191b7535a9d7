/*
 * schema: the one table that declares every native-protocol message, field
 * by field: wire name, type, limits, default, and where the value lives in
 * the C struct of msg.h. msg.c's generic decoder and encoder walk these
 * tables, so adding a field is one line here plus one in PROTOCOL.md.
 * Internal to proto/.
 */
#ifndef GPROF_SCHEMA_H
#define GPROF_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msgtypes.h"
#include "perr.h"

enum ftype {
	FT_STR,    /* const char *; min/max = length in bytes */
	FT_INT,    /* int64_t; min/max = value range */
	FT_BOOL,   /* bool */
	FT_NUM,    /* double (finite); min/max = value range */
	FT_ENUM,   /* int; a string from names[] on the wire */
	FT_FLAGS,  /* int64_t bit mask; an array of names[] on the wire */
	FT_INTS,   /* struct msg_ints; min/max = element range, cmax = count */
	FT_OBJS,   /* MSG_ARRAY of sub->size elements; cmax = count */
	FT_NUMMAP, /* struct msg_nummap; max = key length, cmax = count */
};

enum {
	FF_REQUIRED = 1 << 0,
	FF_TOKEN = 1 << 1, /* [A-Za-z0-9._-], not starting with '.': safe in paths */
	FF_TEXT = 1 << 2,  /* free text: newlines and tabs allowed */
	FF_HEX = 1 << 3,   /* lowercase hex digits */
};

struct schema;

struct field {
	const char *name;
	uint8_t type;
	uint8_t flags;
	uint32_t off;
	int64_t min, max, def;
	const char *const *names; /* FT_ENUM, FT_FLAGS: NULL-terminated */
	const struct schema *sub; /* FT_OBJS */
	uint32_t cmax;            /* arrays and maps: most elements */
};

struct schema {
	const char *name;
	const struct field *fields;
	size_t nfields;
	size_t size;    /* sizeof the struct (array elements) */
	int (*check)(const void *obj, struct perr *err); /* cross-field rules */
	bool request;   /* needs an id >= 1 and gets a reply */
};

extern const char *const schema_type_names[MSG_TYPE_COUNT];
extern const char *const schema_errcode_names[];
extern const char *const schema_tstate_names[];
extern const char *const schema_trace_state_names[];
extern const char *const schema_kind_names[];
extern const char *const schema_activity_names[];
extern const char *const schema_option_names[];

/* The schema of a message type (never NULL for 0 < t < MSG_TYPE_COUNT). */
const struct schema *schema_of_type(enum msg_type t);
const struct schema *schema_of_elem(enum msg_elem e);

#endif
