/*
 * jsonint: JSON integers printed exactly (issue 37).
 *
 * cJSON keeps every number as a double and prints any value outside the
 * range of an int with "%1.15g": a created_us of 1795914211306300 came out
 * as 1.7959142113063e+15, which strict integer decoders (Go, serde) reject,
 * and any value above 2^53 loses digits. Every integer that gprofd and
 * gprofctl put in JSON goes through here instead: a cJSON raw node holding
 * its decimal digits (PRId64 / PRIu64), never a double.
 *
 * A raw node is not cJSON_IsNumber: build trees with these only for
 * printing, never to read numbers back from.
 */
#ifndef GPROF_JSONINT_H
#define GPROF_JSONINT_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* A node printing as the integer literal v; NULL when out of memory. */
cJSON *jsonint_new(int64_t v);
cJSON *jsonint_new_u(uint64_t v);
/* Adds "key": v to object o (or appends v to array o when key is NULL);
 * 0, or -ENOMEM. */
int jsonint_add(cJSON *o, const char *key, int64_t v);
int jsonint_add_u(cJSON *o, const char *key, uint64_t v);

#endif
