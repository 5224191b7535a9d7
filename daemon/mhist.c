/*
 * mhist.c: the metrics history, compact (mhist.h has the format's why).
 *
 * Layout: a ring of cap samples, each a heap byte string; a table of
 * series (family, owner, label list), each named by its index, with an
 * open-addressing hash index over it. A sample's bytes are, per value:
 *   one header byte: bit 0 set when a varint series id follows (clear: the
 *   id is the previous value's + 1, the first value's is 0), bits 1-4 the
 *   value's form: 0 the value 0; 1-10 a decimal, v = m / 10^(form-1), m a
 *   zigzag varint; 11 a float (4 bytes); 12 a double (8 bytes).
 * Series ids are handed out lowest first and samples list their values in
 * the order the sampler adds them, so on a steady host nearly every value
 * is one header byte and its mantissa.
 *
 * Invariants: a series is live (labels != NULL) while a kept sample names
 * it: last_seq, the newest sample that did, is at least the oldest kept
 * sample's number (seq - n). Only then may its id be reused, so a sample
 * never reads another series' name.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mhist.h"

struct mser {
	char *labels;       /* NULL: a free slot */
	int64_t owner;
	uint64_t last_seq;  /* the newest sample that names it */
	uint32_t hash;
	uint16_t fam, lab_len;
};

struct msample {
	uint8_t *data;
	uint32_t len;
	int64_t ts_us;
};

struct mhist {
	struct msample *ring;  /* ring[(head + i) % cap], i < n */
	size_t cap, n, head;
	uint64_t seq;          /* samples appended so far */
	struct mser *ser;
	size_t nser, ser_cap;  /* slots in use or freed, and room */
	size_t first_free;     /* no free slot below it */
	uint32_t *index;       /* series id + 1, 0 empty; index_cap a power of 2 */
	size_t index_cap, live;
	size_t data_bytes, label_bytes;
};

enum { F_ZERO = 0, F_DEC0 = 1, F_DEC9 = 10, F_FLOAT = 11, F_DOUBLE = 12 };
#define VALUE_MAX_BYTES (1 + 10 + 10) /* header, series id, mantissa */

static const double pow10_tab[10] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9 };

struct mhist *mhist_new(size_t cap)
{
	struct mhist *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	h->cap = cap;
	if (cap > 0 && (h->ring = calloc(cap, sizeof(*h->ring))) == NULL) {
		free(h);
		return NULL;
	}
	return h;
}

void mhist_free(struct mhist *h)
{
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < h->cap; i++)
		free(h->ring[i].data);
	for (i = 0; i < h->nser; i++)
		free(h->ser[i].labels);
	free(h->ring);
	free(h->ser);
	free(h->index);
	free(h);
}

size_t mhist_len(const struct mhist *h)
{
	return h->n;
}

size_t mhist_bytes(const struct mhist *h)
{
	return sizeof(*h) + h->cap * sizeof(*h->ring) + h->data_bytes +
	       h->ser_cap * sizeof(*h->ser) + h->label_bytes + h->index_cap * sizeof(*h->index);
}

/* ---- series ---- */

static uint32_t ser_hash(int fam, int64_t owner, const char *labels, size_t len)
{
	uint32_t x = 2166136261u ^ (uint32_t)fam ^ ((uint32_t)owner * 0x9e3779b1u);
	size_t i;

	for (i = 0; i < len; i++)
		x = (x ^ (unsigned char)labels[i]) * 16777619u;
	return x;
}

static void index_put(struct mhist *h, uint32_t id)
{
	size_t mask = h->index_cap - 1, i = h->ser[id].hash & mask;

	while (h->index[i] != 0)
		i = (i + 1) & mask;
	h->index[i] = id + 1;
}

/* Rebuilds the index with room for want live series at half load. */
static int index_rebuild(struct mhist *h, size_t want)
{
	size_t cap = 16, i;
	uint32_t *idx;

	while (cap < want * 2)
		cap *= 2;
	if (cap != h->index_cap) {
		if ((idx = malloc(cap * sizeof(*idx))) == NULL)
			return -ENOMEM;
		free(h->index);
		h->index = idx;
		h->index_cap = cap;
	}
	memset(h->index, 0, h->index_cap * sizeof(*h->index));
	for (i = 0; i < h->nser; i++)
		if (h->ser[i].labels != NULL)
			index_put(h, (uint32_t)i);
	return 0;
}

/* The id of the series (fam, owner, labels), made if new; -1 on ENOMEM. */
static long ser_find(struct mhist *h, const struct mval *v, const char *labels)
{
	uint32_t hash = ser_hash(v->fam, v->owner, labels, v->lab_len);
	struct mser *s;
	size_t i, id;

	if (h->index_cap > 0) {
		for (i = hash & (h->index_cap - 1); h->index[i] != 0; i = (i + 1) & (h->index_cap - 1)) {
			s = &h->ser[h->index[i] - 1];
			if (s->hash == hash && s->fam == v->fam && s->owner == v->owner &&
			    s->lab_len == v->lab_len && memcmp(s->labels, labels, v->lab_len) == 0)
				return (long)(h->index[i] - 1);
		}
	}
	if ((h->live + 1) * 2 > h->index_cap && index_rebuild(h, h->live + 1) < 0)
		return -1;
	for (id = h->first_free; id < h->nser && h->ser[id].labels != NULL; id++)
		;
	if (id == h->ser_cap) {
		size_t cap = h->ser_cap ? h->ser_cap * 2 : 64;
		struct mser *p = realloc(h->ser, cap * sizeof(*p));

		if (p == NULL)
			return -1;
		h->ser = p;
		h->ser_cap = cap;
	}
	s = &h->ser[id];
	if ((s->labels = malloc((size_t)v->lab_len + 1)) == NULL)
		return -1;
	memcpy(s->labels, labels, v->lab_len);
	s->labels[v->lab_len] = '\0';
	s->hash = hash;
	s->fam = v->fam;
	s->owner = v->owner;
	s->lab_len = v->lab_len;
	if (id == h->nser)
		h->nser++;
	h->first_free = id + 1;
	h->live++;
	h->label_bytes += (size_t)v->lab_len + 1;
	index_put(h, (uint32_t)id);
	return (long)id;
}

/* Frees the series no kept sample names. */
static void ser_sweep(struct mhist *h)
{
	uint64_t oldest = h->seq - h->n;
	bool freed = false;
	size_t i;

	for (i = 0; i < h->nser; i++) {
		struct mser *s = &h->ser[i];

		if (s->labels == NULL || s->last_seq >= oldest)
			continue;
		h->label_bytes -= (size_t)s->lab_len + 1;
		free(s->labels);
		s->labels = NULL;
		h->live--;
		if (i < h->first_free)
			h->first_free = i;
		freed = true;
	}
	while (h->nser > 0 && h->ser[h->nser - 1].labels == NULL)
		h->nser--;
	if (h->first_free > h->nser)
		h->first_free = h->nser;
	if (freed)
		index_rebuild(h, h->live); /* same or smaller: cannot fail past a free */
}

/* ---- values ---- */

static uint8_t *put_varint(uint8_t *p, uint64_t x)
{
	while (x >= 0x80) {
		*p++ = (uint8_t)(x | 0x80);
		x >>= 7;
	}
	*p++ = (uint8_t)x;
	return p;
}

static const uint8_t *get_varint(const uint8_t *p, const uint8_t *end, uint64_t *x)
{
	unsigned shift = 0;

	*x = 0;
	while (p < end && shift < 64) {
		*x |= (uint64_t)(*p & 0x7f) << shift;
		if ((*p++ & 0x80) == 0)
			return p;
		shift += 7;
	}
	return NULL;
}

/* The value's form and, for a decimal, its mantissa. */
static int value_form(int fam, double v, int64_t *m)
{
	int e;

	if (v == 0)
		return signbit(v) ? F_FLOAT : F_ZERO; /* -0 is no decimal */
	for (e = 0; e < 10; e++) {
		double x = v * pow10_tab[e], r;

		if (fabs(x) >= 9007199254740992.0) /* 2^53: past it, not every integer is a double */
			break;
		r = nearbyint(x);
		if (r / pow10_tab[e] == v) {
			*m = (int64_t)r;
			return F_DEC0 + e;
		}
	}
	if ((double)(float)v == v)
		return F_FLOAT;
	/* a ratio keeps 24 bits of mantissa: "exact enough" for a fraction */
	if (strstr(mset_family_name(fam), "_ratio") != NULL)
		return F_FLOAT;
	return F_DOUBLE;
}

int mhist_append(struct mhist *h, const struct mset *s)
{
	struct msample slot = { 0 };
	uint8_t *p, *data;
	long prev = -1;
	size_t i;
	int r = 0;

	if (h->cap == 0)
		return 0;
	if (h->n == h->cap) { /* the oldest goes; its buffer serves this one */
		slot = h->ring[h->head];
		h->ring[h->head].data = NULL;
		h->data_bytes -= slot.len;
		h->head = (h->head + 1) % h->cap;
		h->n--;
	}
	if ((data = realloc(slot.data, s->n * VALUE_MAX_BYTES + 1)) == NULL) {
		free(slot.data);
		r = -ENOMEM;
		goto out;
	}
	slot.data = data;
	p = data;
	for (i = 0; i < s->n; i++) {
		const struct mval *v = &s->v[i];
		long id = ser_find(h, v, mset_labels(s, v));
		int64_t m = 0;
		int form;
		float f;

		if (id < 0) {
			free(slot.data);
			r = -ENOMEM;
			goto out;
		}
		h->ser[id].last_seq = h->seq;
		form = value_form(v->fam, v->v, &m);
		*p++ = (uint8_t)(form << 1 | (id != prev + 1));
		if (id != prev + 1)
			p = put_varint(p, (uint64_t)id);
		prev = id;
		if (form >= F_DEC0 && form <= F_DEC9) {
			p = put_varint(p, ((uint64_t)m << 1) ^ (uint64_t)(m >> 63));
		} else if (form == F_FLOAT) {
			f = (float)v->v;
			memcpy(p, &f, 4);
			p += 4;
		} else if (form == F_DOUBLE) {
			memcpy(p, &v->v, 8);
			p += 8;
		}
	}
	slot.len = (uint32_t)(p - data);
	/* shrinking in place: glibc splits the chunk, nothing is copied */
	if ((data = realloc(slot.data, slot.len ? slot.len : 1)) != NULL)
		slot.data = data;
	slot.ts_us = s->ts_us;
	h->ring[(h->head + h->n) % h->cap] = slot;
	h->data_bytes += slot.len;
	h->n++;
out:
	h->seq++;
	ser_sweep(h);
	return r;
}

int mhist_get(const struct mhist *h, size_t i, struct mset *out)
{
	const struct msample *smp;
	const uint8_t *p, *end;
	uint64_t id = (uint64_t)-1;

	mset_reset(out);
	if (i >= h->n)
		return -ERANGE;
	smp = &h->ring[(h->head + i) % h->cap];
	out->ts_us = smp->ts_us;
	p = smp->data;
	end = p + smp->len;
	while (p != NULL && p < end) {
		int form = *p >> 1;
		const struct mser *s;
		struct mval *v;
		uint64_t u = 0;
		double x = 0;
		float f;

		if (*p++ & 1)
			p = get_varint(p, end, &id);
		else
			id++;
		if (p == NULL || id >= h->nser || h->ser[id].labels == NULL)
			return -EINVAL; /* cannot happen: this file wrote it */
		if (form >= F_DEC0 && form <= F_DEC9) {
			if ((p = get_varint(p, end, &u)) == NULL)
				return -EINVAL;
			x = (double)(int64_t)((u >> 1) ^ (~(u & 1) + 1)) / pow10_tab[form - F_DEC0];
		} else if (form == F_FLOAT) {
			memcpy(&f, p, 4);
			p += 4;
			x = f;
		} else if (form == F_DOUBLE) {
			memcpy(&x, p, 8);
			p += 8;
		}
		s = &h->ser[id];
		if ((v = mset_add_labels(out, s->fam, x, s->labels)) == NULL)
			return -ENOMEM;
		v->owner = s->owner;
	}
	return 0;
}
