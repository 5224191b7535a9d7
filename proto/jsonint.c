/*
 * jsonint: see jsonint.h. Depends on cJSON only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "jsonint.h"

/* v's decimal digits in a raw node. */
cJSON *jsonint_new(int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return cJSON_CreateRaw(buf);
}

/* The same, unsigned. */
cJSON *jsonint_new_u(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_CreateRaw(buf);
}

/* Puts item under key (or at the end of an array); frees it on failure. */
static int put(cJSON *o, const char *key, cJSON *item)
{
	if (item == NULL)
		return -ENOMEM;
	if (key == NULL ? !cJSON_AddItemToArray(o, item) : !cJSON_AddItemToObject(o, key, item)) {
		cJSON_Delete(item);
		return -ENOMEM;
	}
	return 0;
}

/* key: v into o. */
int jsonint_add(cJSON *o, const char *key, int64_t v)
{
	return put(o, key, jsonint_new(v));
}

/* key: v into o, unsigned. */
int jsonint_add_u(cJSON *o, const char *key, uint64_t v)
{
	return put(o, key, jsonint_new_u(v));
}
