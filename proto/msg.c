/*
 * msg: the generic decoder and encoder of native-protocol messages.
 *
 * Data flow, decoding: text -> jsoncheck (UTF-8, depth, NULs) -> cJSON tree
 * -> walk the type's schema (schema.c), writing each field into the C
 * struct, checking type, range, characters and duplicates -> the schema's
 * cross-field check. Encoding runs the same per-field checks on the struct
 * and builds a cJSON tree, printed compactly into a JSON frame.
 *
 * Ownership: a decoded msg owns its cJSON tree (m->root_, where its
 * strings live) and an arena of arrays (m->arena_: a list of malloc'd
 * blocks); msg_deinit frees both. Integers go on the wire as plain decimal
 * text (cJSON raw nodes), never through a double, so 64-bit values print
 * exactly and no "1e+15" reaches a client in another language.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "frame.h"
#include "jsoncheck.h"
#include "jsonint.h"
#include "msg.h"
#include "schema.h"

/* ---- arena: every array a decoded message owns ---- */

struct arena_blk {
	struct arena_blk *next;
	max_align_t data[];
};

static void *arena_alloc(struct msg *m, size_t n)
{
	struct arena_blk *b;

	b = calloc(1, sizeof(*b) + (n ? n : 1));
	if (b == NULL)
		return NULL;
	b->next = m->arena_;
	m->arena_ = b;
	return b->data;
}

static void arena_free(struct msg *m)
{
	struct arena_blk *b = m->arena_, *next;

	for (; b != NULL; b = next) {
		next = b->next;
		free(b);
	}
	m->arena_ = NULL;
}

/* ---- typed slots inside the C structs ---- */

static void *slot(void *obj, const struct field *f)
{
	return (char *)obj + f->off;
}

static const void *cslot(const void *obj, const struct field *f)
{
	return (const char *)obj + f->off;
}

/* Arrays are `struct { T *v; size_t n; }`; the pointer is read and
 * written through memcpy so that one code path serves every T. */
static void array_get(const void *p, void **v, size_t *n)
{
	memcpy(v, p, sizeof(*v));
	memcpy(n, (const char *)p + sizeof(void *), sizeof(*n));
}

static void array_set(void *p, void *v, size_t n)
{
	memcpy(p, &v, sizeof(v));
	memcpy((char *)p + sizeof(void *), &n, sizeof(n));
}

static void set_defaults(const struct schema *sc, void *obj)
{
	size_t i;

	for (i = 0; i < sc->nfields; i++) {
		const struct field *f = &sc->fields[i];

		if (f->type == FT_INT || f->type == FT_FLAGS)
			*(int64_t *)slot(obj, f) = f->def;
		else if (f->type == FT_ENUM)
			*(int *)slot(obj, f) = (int)f->def;
	}
}

void msg_init(struct msg *m, enum msg_type type, uint64_t id)
{
	const struct schema *sc = schema_of_type(type);

	memset(m, 0, sizeof(*m));
	m->type = type;
	m->id = id;
	if (sc != NULL)
		set_defaults(sc, &m->u);
}

void msg_elem_init(enum msg_elem kind, void *elem)
{
	const struct schema *sc = schema_of_elem(kind);

	if (sc == NULL)
		return;
	memset(elem, 0, sc->size);
	set_defaults(sc, elem);
}

void msg_deinit(struct msg *m)
{
	cJSON_Delete(m->root_);
	m->root_ = NULL;
	arena_free(m);
}

/* ---- checks shared by decode and encode ---- */

static int check_chars(const struct field *f, const char *s, const char *path,
                       struct perr *err)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i;

	for (i = 0; p[i] != 0; i++) {
		unsigned char c = p[i];

		if (f->flags & FF_TOKEN) {
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '_' || c == '-' ||
			      (c == '.' && i > 0)))
				return perr_set(err, -EBADMSG, "%s: character %zu is not "
				                "allowed (use letters, digits, '.', '_', '-')",
				                path, i);
		} else if (f->flags & FF_HEX) {
			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
				return perr_set(err, -EBADMSG, "%s: must be lowercase hex", path);
		} else if (c < 0x20 || c == 0x7f) {
			if (!((f->flags & FF_TEXT) && (c == '\n' || c == '\t')))
				return perr_set(err, -EBADMSG, "%s: control character 0x%02x "
				                "at %zu", path, c, i);
		}
	}
	return 0;
}

static int check_str(const struct field *f, const char *s, const char *path,
                     struct perr *err)
{
	size_t n = strlen(s);

	if ((int64_t)n < f->min)
		return perr_set(err, -EBADMSG, "%s: must not be empty", path);
	if ((int64_t)n > f->max)
		return perr_set(err, -EBADMSG, "%s: %zu bytes, longer than the "
		                "limit of %lld", path, n, (long long)f->max);
	return check_chars(f, s, path, err);
}

static int check_int(int64_t v, int64_t lo, int64_t hi, const char *path,
                     struct perr *err)
{
	if (v < lo || v > hi)
		return perr_set(err, -EBADMSG, "%s: %lld is outside %lld..%lld",
		                path, (long long)v, (long long)lo, (long long)hi);
	return 0;
}

/* ---- decoding ---- */

static int decode_obj(struct msg *m, const struct schema *sc, const cJSON *obj,
                      void *out, const char *path, struct perr *err);

static const char *json_type_name(const cJSON *j)
{
	if (cJSON_IsString(j)) return "a string";
	if (cJSON_IsNumber(j)) return "a number";
	if (cJSON_IsBool(j)) return "a boolean";
	if (cJSON_IsNull(j)) return "null";
	if (cJSON_IsArray(j)) return "an array";
	if (cJSON_IsObject(j)) return "an object";
	return "invalid";
}

static int want(const cJSON *j, cJSON_bool ok, const char *what, const char *path,
                struct perr *err)
{
	if (ok)
		return 0;
	return perr_set(err, -EBADMSG, "%s: expected %s, got %s", path, what,
	                json_type_name(j));
}

static int json_int(const cJSON *j, int64_t *v, const char *path, struct perr *err)
{
	double d;
	int r = want(j, cJSON_IsNumber(j), "an integer", path, err);

	if (r < 0)
		return r;
	d = j->valuedouble;
	if (!isfinite(d) || floor(d) != d || fabs(d) > (double)MSG_INT_MAX)
		return perr_set(err, -EBADMSG, "%s: expected an integer within "
		                "+-(2^53-1)", path);
	*v = (int64_t)d;
	return 0;
}

static int name_index(const char *const *names, const char *s)
{
	int i;

	for (i = 0; names[i] != NULL; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

static int decode_field(struct msg *m, const struct field *f, const cJSON *j,
                        void *obj, const char *path, struct perr *err)
{
	char sub[128];
	const cJSON *e;
	size_t n, i;
	int64_t v;
	int idx, r;

	switch (f->type) {
	case FT_STR:
		r = want(j, cJSON_IsString(j), "a string", path, err);
		if (r < 0)
			return r;
		r = check_str(f, j->valuestring, path, err);
		if (r < 0)
			return r;
		*(const char **)slot(obj, f) = j->valuestring;
		return 0;
	case FT_INT:
		r = json_int(j, &v, path, err);
		if (r < 0)
			return r;
		r = check_int(v, f->min, f->max, path, err);
		if (r < 0)
			return r;
		*(int64_t *)slot(obj, f) = v;
		return 0;
	case FT_BOOL:
		r = want(j, cJSON_IsBool(j), "true or false", path, err);
		if (r < 0)
			return r;
		*(bool *)slot(obj, f) = cJSON_IsTrue(j);
		return 0;
	case FT_NUM:
		r = want(j, cJSON_IsNumber(j) && isfinite(j->valuedouble), "a number",
		         path, err);
		if (r < 0)
			return r;
		*(double *)slot(obj, f) = j->valuedouble;
		return 0;
	case FT_ENUM:
		r = want(j, cJSON_IsString(j), "a string", path, err);
		if (r < 0)
			return r;
		idx = name_index(f->names, j->valuestring);
		if (idx < 0)
			return perr_set(err, -EBADMSG, "%s: unknown value \"%.40s\"",
			                path, j->valuestring);
		*(int *)slot(obj, f) = idx;
		return 0;
	case FT_FLAGS:
		r = want(j, cJSON_IsArray(j), "an array of names", path, err);
		if (r < 0)
			return r;
		v = 0;
		cJSON_ArrayForEach(e, j) {
			r = want(e, cJSON_IsString(e), "a string", path, err);
			if (r < 0)
				return r;
			idx = name_index(f->names, e->valuestring);
			if (idx < 0)
				return perr_set(err, -EBADMSG, "%s: unknown name \"%.40s\"",
				                path, e->valuestring);
			v |= (int64_t)1 << idx;
		}
		*(int64_t *)slot(obj, f) = v;
		return 0;
	case FT_INTS: {
		int64_t *arr;

		r = want(j, cJSON_IsArray(j), "an array of integers", path, err);
		if (r < 0)
			return r;
		n = (size_t)cJSON_GetArraySize(j);
		if (n > f->cmax)
			return perr_set(err, -EBADMSG, "%s: %zu elements, more than %u",
			                path, n, f->cmax);
		arr = arena_alloc(m, n * sizeof(*arr));
		if (arr == NULL)
			return perr_set(err, -ENOMEM, "out of memory");
		i = 0;
		cJSON_ArrayForEach(e, j) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			r = json_int(e, &arr[i], sub, err);
			if (r < 0)
				return r;
			r = check_int(arr[i], f->min, f->max, sub, err);
			if (r < 0)
				return r;
			i++;
		}
		array_set(slot(obj, f), arr, n);
		return 0;
	}
	case FT_OBJS: {
		const struct schema *sc = f->sub;
		char *arr;

		r = want(j, cJSON_IsArray(j), "an array of objects", path, err);
		if (r < 0)
			return r;
		n = (size_t)cJSON_GetArraySize(j);
		if (n > f->cmax)
			return perr_set(err, -EBADMSG, "%s: %zu elements, more than %u",
			                path, n, f->cmax);
		arr = arena_alloc(m, n * sc->size);
		if (arr == NULL)
			return perr_set(err, -ENOMEM, "out of memory");
		i = 0;
		cJSON_ArrayForEach(e, j) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			set_defaults(sc, arr + i * sc->size);
			r = decode_obj(m, sc, e, arr + i * sc->size, sub, err);
			if (r < 0)
				return r;
			i++;
		}
		array_set(slot(obj, f), arr, n);
		return 0;
	}
	case FT_NUMMAP: {
		struct msg_nummap *map = slot(obj, f);

		r = want(j, cJSON_IsObject(j), "an object of numbers", path, err);
		if (r < 0)
			return r;
		n = (size_t)cJSON_GetArraySize(j);
		if (n > f->cmax)
			return perr_set(err, -EBADMSG, "%s: %zu entries, more than %u",
			                path, n, f->cmax);
		map->names = arena_alloc(m, n * sizeof(*map->names));
		map->values = arena_alloc(m, n * sizeof(*map->values));
		if (map->names == NULL || map->values == NULL)
			return perr_set(err, -ENOMEM, "out of memory");
		i = 0;
		cJSON_ArrayForEach(e, j) {
			if (strlen(e->string) == 0 || (int64_t)strlen(e->string) > f->max)
				return perr_set(err, -EBADMSG, "%s: a name is empty or longer "
				                "than %lld bytes", path, (long long)f->max);
			snprintf(sub, sizeof(sub), "%s.%.40s", path, e->string);
			r = want(e, cJSON_IsNumber(e) && isfinite(e->valuedouble),
			         "a number", sub, err);
			if (r < 0)
				return r;
			map->names[i] = e->string;
			map->values[i] = e->valuedouble;
			i++;
		}
		map->n = n;
		return 0;
	}
	}
	return perr_set(err, -EINVAL, "%s: bad schema", path);
}

/* Decodes obj into out following sc. Keys not in the schema are ignored;
 * a key given twice is an error (two parsers could disagree on which one
 * counts). */
static int decode_obj(struct msg *m, const struct schema *sc, const cJSON *obj,
                      void *out, const char *path, struct perr *err)
{
	uint64_t seen[2] = { 0, 0 };
	char sub[128];
	const cJSON *c;
	size_t i;
	int r;

	r = want(obj, cJSON_IsObject(obj), "an object", path, err);
	if (r < 0)
		return r;
	cJSON_ArrayForEach(c, obj) {
		for (i = 0; i < sc->nfields; i++)
			if (strcmp(sc->fields[i].name, c->string) == 0)
				break;
		if (i == sc->nfields)
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", c->string);
		if (seen[i / 64] & (1ull << (i % 64)))
			return perr_set(err, -EBADMSG, "%s: given twice", sub);
		seen[i / 64] |= 1ull << (i % 64);
		r = decode_field(m, &sc->fields[i], c, out, sub, err);
		if (r < 0)
			return r;
	}
	for (i = 0; i < sc->nfields; i++)
		if ((sc->fields[i].flags & FF_REQUIRED) &&
		    !(seen[i / 64] & (1ull << (i % 64))))
			return perr_set(err, -EBADMSG, "%s%s%s: required field missing",
			                path, *path ? "." : "", sc->fields[i].name);
	if (sc->check != NULL)
		return sc->check(out, err);
	return 0;
}

int msg_type_from_name(const char *name)
{
	int t;

	for (t = MSG_NONE + 1; t < MSG_TYPE_COUNT; t++)
		if (strcmp(schema_type_names[t], name) == 0)
			return t;
	return -1;
}

int msg_decode(struct msg *m, const char *json, size_t len, struct perr *err)
{
	const struct schema *sc;
	const char *end = NULL;
	const cJSON *type, *id, *c;
	cJSON *root;
	int64_t idv = 0;
	int r, t, ntype = 0;

	memset(m, 0, sizeof(*m));
	r = jsoncheck_text(json, len, JSONCHECK_DEPTH_DEFAULT, err);
	if (r < 0)
		return r;
	root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (root == NULL)
		return perr_set(err, -EBADMSG, "not valid JSON (near byte %td)",
		                end ? end - json : (ptrdiff_t)0);
	m->root_ = root;
	while (end != NULL && end < json + len &&
	       (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
		end++;
	if (end != json + len) {
		r = perr_set(err, -EBADMSG, "trailing bytes after the JSON object");
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		r = perr_set(err, -EBADMSG, "a message must be a JSON object");
		goto out;
	}
	cJSON_ArrayForEach(c, root)
		if (strcmp(c->string, "type") == 0)
			ntype++;
	type = cJSON_GetObjectItemCaseSensitive(root, "type");
	id = cJSON_GetObjectItemCaseSensitive(root, "id");
	if (id != NULL) {
		r = json_int(id, &idv, "id", err);
		if (r == 0 && idv < 0)
			r = perr_set(err, -EBADMSG, "id: must not be negative");
		if (r < 0)
			goto out;
		m->id = (uint64_t)idv;
	}
	if (type == NULL || !cJSON_IsString(type) || ntype != 1) {
		r = perr_set(err, -EBADMSG, "a message needs exactly one string "
		             "field \"type\"");
		goto out;
	}
	t = msg_type_from_name(type->valuestring);
	if (t < 0) {
		r = perr_set(err, -EPROTONOSUPPORT, "unknown message type \"%.40s\"",
		             type->valuestring);
		goto out;
	}
	sc = schema_of_type((enum msg_type)t);
	if (sc->request && m->id == 0) {
		r = perr_set(err, -EBADMSG, "%s: a request needs an \"id\" >= 1",
		             sc->name);
		goto out;
	}
	set_defaults(sc, &m->u);
	r = decode_obj(m, sc, root, &m->u, "", err);
	if (r < 0)
		goto out;
	m->type = (enum msg_type)t;
	return 0;
out:
	/* Keep the id, so the caller can address its error reply. */
	idv = (int64_t)m->id;
	msg_deinit(m);
	memset(m, 0, sizeof(*m));
	m->id = (uint64_t)idv;
	return r;
}

/* ---- encoding ---- */

static cJSON *encode_obj(const struct schema *sc, const void *obj,
                         const char *path, struct perr *err, int *rc);

static int add_int(cJSON *o, const char *key, int64_t v)
{
	return jsonint_add(o, key, v);
}

/* Adds item under key to an object, or appends it to an array (key NULL). */
static int add_item(cJSON *o, const char *key, cJSON *item)
{
	if (item == NULL)
		return -ENOMEM;
	if (key == NULL)
		cJSON_AddItemToArray(o, item);
	else
		cJSON_AddItemToObject(o, key, item);
	return 0;
}

static int encode_field(cJSON *o, const struct field *f, const void *obj,
                        const char *path, struct perr *err)
{
	char sub[128];
	cJSON *a, *e;
	void *v;
	size_t n, i;
	int r;

	switch (f->type) {
	case FT_STR: {
		const char *s = *(const char *const *)cslot(obj, f);

		if (s == NULL)
			return (f->flags & FF_REQUIRED) ?
			       perr_set(err, -EINVAL, "%s: required field missing", path) : 0;
		r = check_str(f, s, path, err);
		if (r < 0)
			return -EINVAL;
		return add_item(o, f->name, cJSON_CreateString(s));
	}
	case FT_INT: {
		int64_t x = *(const int64_t *)cslot(obj, f);

		if (x == f->def && !(f->flags & FF_REQUIRED))
			return 0;
		if (check_int(x, f->min, f->max, path, err) < 0)
			return -EINVAL;
		return add_int(o, f->name, x);
	}
	case FT_BOOL:
		if (!*(const bool *)cslot(obj, f))
			return 0;
		return add_item(o, f->name, cJSON_CreateTrue());
	case FT_NUM: {
		double d = *(const double *)cslot(obj, f);

		if (!isfinite(d))
			return perr_set(err, -EINVAL, "%s: not a finite number", path);
		return add_item(o, f->name, cJSON_CreateNumber(d));
	}
	case FT_ENUM: {
		int x = *(const int *)cslot(obj, f);

		if (x < 0 || x > f->max)
			return perr_set(err, -EINVAL, "%s: value %d out of range", path, x);
		if (x == f->def && !(f->flags & FF_REQUIRED))
			return 0;
		return add_item(o, f->name, cJSON_CreateString(f->names[x]));
	}
	case FT_FLAGS: {
		int64_t x = *(const int64_t *)cslot(obj, f);

		if (x == f->def)
			return 0;
		a = cJSON_AddArrayToObject(o, f->name);
		if (a == NULL)
			return -ENOMEM;
		for (i = 0; f->names[i] != NULL; i++) {
			if (!(x & ((int64_t)1 << i)))
				continue;
			x &= ~((int64_t)1 << i);
			if (add_item(a, NULL, cJSON_CreateString(f->names[i])) < 0)
				return -ENOMEM;
		}
		if (x != 0)
			return perr_set(err, -EINVAL, "%s: unknown flag bits", path);
		return 0;
	}
	case FT_INTS:
		array_get(cslot(obj, f), &v, &n);
		if (n == 0 && !(f->flags & FF_REQUIRED))
			return 0;
		if (n > f->cmax)
			return perr_set(err, -EINVAL, "%s: more than %u elements", path, f->cmax);
		a = cJSON_AddArrayToObject(o, f->name);
		if (a == NULL)
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			int64_t x = ((const int64_t *)v)[i];

			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			if (check_int(x, f->min, f->max, sub, err) < 0)
				return -EINVAL;
			if (add_item(a, NULL, jsonint_new(x)) < 0)
				return -ENOMEM;
		}
		return 0;
	case FT_OBJS:
		array_get(cslot(obj, f), &v, &n);
		if (n == 0 && !(f->flags & FF_REQUIRED))
			return 0;
		if (n > f->cmax)
			return perr_set(err, -EINVAL, "%s: more than %u elements", path, f->cmax);
		a = cJSON_AddArrayToObject(o, f->name);
		if (a == NULL)
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			e = encode_obj(f->sub, (const char *)v + i * f->sub->size, sub, err, &r);
			if (e == NULL)
				return r;
			cJSON_AddItemToArray(a, e);
		}
		return 0;
	case FT_NUMMAP: {
		const struct msg_nummap *map = cslot(obj, f);

		if (map->n == 0)
			return 0;
		if (map->n > f->cmax)
			return perr_set(err, -EINVAL, "%s: more than %u entries", path, f->cmax);
		a = cJSON_AddObjectToObject(o, f->name);
		if (a == NULL)
			return -ENOMEM;
		for (i = 0; i < map->n; i++) {
			const char *k = map->names[i];

			if (k == NULL || *k == 0 || (int64_t)strlen(k) > f->max ||
			    !isfinite(map->values[i]))
				return perr_set(err, -EINVAL, "%s: entry %zu has a bad name "
				                "or a value that is not finite", path, i);
			if (add_item(a, k, cJSON_CreateNumber(map->values[i])) < 0)
				return -ENOMEM;
		}
		return 0;
	}
	}
	return -EINVAL;
}

/* Adds sc's fields of obj to the object o, then runs the schema's check. */
static int encode_fields(cJSON *o, const struct schema *sc, const void *obj,
                         const char *path, struct perr *err)
{
	char sub[128];
	size_t i;
	int r;

	for (i = 0; i < sc->nfields; i++) {
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "",
		         sc->fields[i].name);
		r = encode_field(o, &sc->fields[i], obj, sub, err);
		if (r < 0)
			return r;
	}
	if (sc->check != NULL && sc->check(obj, err) < 0)
		return -EINVAL;
	return 0;
}

static cJSON *encode_obj(const struct schema *sc, const void *obj,
                         const char *path, struct perr *err, int *rc)
{
	cJSON *o = cJSON_CreateObject();

	if (o == NULL) {
		*rc = perr_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	*rc = encode_fields(o, sc, obj, path, err);
	if (*rc < 0) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int msg_encode(struct pbuf *out, const struct msg *m, struct perr *err)
{
	const struct schema *sc = schema_of_type(m->type);
	cJSON *root = NULL;
	char *text = NULL;
	int r;

	if (sc == NULL)
		return perr_set(err, -EINVAL, "cannot encode message type %d", m->type);
	if (sc->request && m->id == 0)
		return perr_set(err, -EINVAL, "%s: a request needs an id >= 1", sc->name);
	if (m->id > (uint64_t)MSG_INT_MAX)
		return perr_set(err, -EINVAL, "id above 2^53-1");
	/* "type" and "id" lead the text: cheap to eyeball in a capture. */
	root = cJSON_CreateObject();
	if (root == NULL || cJSON_AddStringToObject(root, "type", sc->name) == NULL ||
	    (m->id != 0 && add_int(root, "id", (int64_t)m->id) < 0)) {
		r = perr_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	r = encode_fields(root, sc, &m->u, "", err);
	if (r < 0)
		goto out;
	text = cJSON_PrintUnformatted(root);
	if (text == NULL) {
		r = perr_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	r = frame_encode_json(out, text, strlen(text));
	if (r == -EMSGSIZE)
		perr_set(err, r, "%s message of %zu bytes exceeds the frame limit",
		         sc->name, strlen(text));
out:
	cJSON_free(text);
	cJSON_Delete(root);
	return r;
}

int msg_encode_error(struct pbuf *out, uint64_t id, enum msg_errcode code,
                     const char *fmt, ...)
{
	char text[1024];
	struct msg m;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	msg_init(&m, MSG_ERROR, id);
	m.u.error.code = code;
	m.u.error.message = text;
	return msg_encode(out, &m, NULL);
}

/* ---- names ---- */

static const char *name_of(const char *const *names, int count, int v)
{
	return v >= 0 && v < count ? names[v] : "?";
}

#define NAMES_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

const char *msg_type_name(enum msg_type t)
{
	return name_of(schema_type_names, MSG_TYPE_COUNT, (int)t);
}

const char *msg_errcode_name(int code)
{
	return name_of(schema_errcode_names, MSG_E_INTERNAL + 1, code);
}

const char *msg_tstate_name(int state)
{
	return name_of(schema_tstate_names, MSG_TS_SKIPPED + 1, state);
}

const char *msg_trace_state_name(int state)
{
	return name_of(schema_trace_state_names, MSG_TRACE_CANCELLED + 1, state);
}

const char *msg_kind_name(int kind)
{
	return name_of(schema_kind_names, MSG_KIND_KINETO + 1, kind);
}

bool msg_type_is_request(enum msg_type t)
{
	const struct schema *sc = schema_of_type(t);

	return sc != NULL && sc->request;
}

size_t msg_activities_format(int64_t mask, char *buf, size_t size)
{
	size_t len = 0, i;
	int n;

	if (size == 0)
		return 0;
	buf[0] = 0;
	for (i = 0; schema_activity_names[i] != NULL; i++) {
		if (!(mask & ((int64_t)1 << i)))
			continue;
		n = snprintf(buf + len, size - len, "%s%s", len ? "," : "",
		             schema_activity_names[i]);
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
	return len;
}

size_t msg_options_flags(int64_t mask, char *buf, size_t size)
{
	size_t len = 0, i, k;

	if (size == 0)
		return 0;
	buf[0] = 0;
	for (i = 0; schema_option_names[i] != NULL && len < size; i++) {
		if (!(mask & ((int64_t)1 << i)))
			continue;
		len += (size_t)snprintf(buf + len, size - len, "%s--", len ? ", " : "");
		for (k = 0; schema_option_names[i][k] && len + 1 < size; k++)
			buf[len++] = schema_option_names[i][k] == '_' ? '-' : schema_option_names[i][k];
		buf[len < size ? len : size - 1] = 0;
	}
	return len < size ? len : size - 1;
}

int64_t msg_activities_parse(const char *list, struct perr *err)
{
	char word[32];
	const char *p = list, *q;
	int64_t mask = 0;
	size_t n;
	int idx;

	while (*p) {
		q = strchr(p, ',');
		n = q ? (size_t)(q - p) : strlen(p);
		if (n == 0 || n >= sizeof(word))
			return perr_set(err, -EINVAL, "activity list \"%.60s\": empty or "
			                "overlong name", list);
		memcpy(word, p, n);
		word[n] = 0;
		idx = name_index(schema_activity_names, word);
		if (idx < 0)
			return perr_set(err, -EINVAL, "unknown activity \"%s\"; choose "
			                "from kernel, memcpy, memset, cuda_runtime, "
			                "cuda_driver, sync, overhead, memory, nvtx", word);
		mask |= (int64_t)1 << idx;
		p += n;
		if (*p == ',')
			p++;
	}
	if (mask == 0)
		return perr_set(err, -EINVAL, "activity list is empty");
	return mask;
}

void msg_trace_id_new(char *out, size_t size)
{
	unsigned char r[3] = { 0, 0, 0 };
	time_t now = time(NULL);
	struct tm tm;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		r[0] = (unsigned char)getpid();
		r[1] = (unsigned char)clock();
	}
	gmtime_r(&now, &tm);
	snprintf(out, size, "%04d%02d%02dT%02d%02d%02dZ-%02x%02x%02x", tm.tm_year + 1900,
	         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, r[0], r[1], r[2]);
}
