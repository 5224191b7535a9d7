/*
 * mhist.c: the metrics history, compact (mhist.h has the format's why).
 *
 * Layout: a ring of cap samples, each a heap byte string; a table of
 * series (family, owner, label list), each named by its index, with an
 * open-addressing hash index over it. A sample's bytes are, in the order
 * the sampler added the values:
 *   one header byte: bit 0 set when a varint series id follows (clear: the
 *   id is the previous value's + 1, the first value's is 0), bits 1-4 the
 *   form: 0 the value 0; 1-10 a decimal, v = m / 10^(form-1), m a zigzag
 *   varint; 11 a float (4 bytes); 12 a double (8 bytes); 13 a run: a
 *   varint count k >= 2 follows, and the k series from the id on each
 *   have the value they had in the sample before; 14 a delta: a varint
 *   (zigzag(d) << 4 | e) follows, and v = (m' + d) / 10^e, where m' is
 *   the series' value in the sample before as a decimal of the same e (a
 *   counter that moved: a byte or two instead of its whole mantissa).
 * Series ids are handed out lowest first, so a steady host's values name
 * their series implicitly, and the gauges that stand still and the
 * processes that report nothing new cost a few bytes a sample together.
 *
 * Invariants: the oldest kept sample has no run or delta (they read the
 * sample before): when the oldest goes, the next one is written again
 * without them first. A sample after one that was not kept (out of
 * memory) has none either. A series is live (labels != NULL) while a kept sample names
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
	uint64_t last_seq;  /* the newest sample that names it; UINT64_MAX: none yet */
	double last_v;      /* its value there (its last one there) */
	uint32_t hash;
	uint16_t fam, lab_len;
};

struct msample {
	uint8_t *data;
	uint32_t len, nvals;
	int64_t ts_us;
};

struct mhist {
	struct msample *ring;  /* ring[(head + i) % cap], i < n */
	size_t cap, n, head;
	uint64_t seq;          /* samples appended so far */
	bool prev_kept;        /* sample seq - 1 is the newest kept */
	struct mser *ser;
	size_t nser, ser_cap;  /* slots in use or freed, and room */
	size_t first_free;     /* no free slot below it */
	uint32_t *index;       /* series id + 1, 0 empty; index_cap a power of 2 */
	size_t index_cap, live;
	size_t data_bytes, label_bytes;
};

/* One value of a sample: its series and value. */
struct pair {
	uint32_t id;
	double v;
};

/* Decoding state: each series' value in the sample last decoded. */
struct dec {
	double *vals;
	uint64_t *stamp;       /* 1 + the position of the sample it is from */
	struct pair *p;        /* the sample's values */
	size_t np_cap;
};

enum { F_ZERO = 0, F_DEC0 = 1, F_DEC9 = 10, F_FLOAT = 11, F_DOUBLE = 12, F_RUN = 13,
       F_DELTA = 14 };
#define VALUE_MAX_BYTES (1 + 10 + 10) /* header, series id, mantissa (or count) */

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

/* Rebuilds the index with room for want live series at half load; one
 * that shrinks and finds no memory keeps its larger table. */
static int index_rebuild(struct mhist *h, size_t want)
{
	size_t cap = 16, i;
	uint32_t *idx;

	while (cap < want * 2)
		cap *= 2;
	if (cap > h->index_cap || cap * 4 <= h->index_cap) {
		if ((idx = malloc(cap * sizeof(*idx))) != NULL) {
			free(h->index);
			h->index = idx;
			h->index_cap = cap;
		} else if (cap > h->index_cap) {
			return -ENOMEM;
		}
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
	s->last_seq = UINT64_MAX; /* in no sample yet */
	s->last_v = 0;
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

		if (s->labels == NULL || (s->last_seq >= oldest && s->last_seq != UINT64_MAX))
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
		index_rebuild(h, h->live); /* smaller: cannot fail */
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
	while (p != NULL && p < end && shift < 64) {
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

/* Does p repeat what its series had in the sample before (seq - 1), and
 * is it the series' first value in this one? */
static bool repeats(const struct mhist *h, const struct pair *p)
{
	const struct mser *s = &h->ser[p->id];

	return s->last_seq == h->seq - 1 && memcmp(&s->last_v, &p->v, sizeof(double)) == 0;
}

/* Writes n values into buf (room for n * VALUE_MAX_BYTES); with runs, the
 * values that repeat the sample before as runs. With mark (a new sample),
 * each series' last_seq and last_v are set as it is written; without (a
 * sample written again), the series are not touched. Returns the bytes
 * written. */
static size_t encode(struct mhist *h, const struct pair *p, size_t n, bool runs, bool mark,
                     uint8_t *buf)
{
	uint8_t *o = buf;
	long prev = -1;
	size_t i = 0, k, j;

	while (i < n) {
		long id = (long)p[i].id;
		bool implicit = id == prev + 1;

		k = 0;
		while (runs && i + k < n && (k == 0 || p[i + k].id == p[i + k - 1].id + 1) &&
		       repeats(h, &p[i + k]))
			k++;
		if (k < 2)
			k = 1;
		if (k >= 2) {
			*o++ = (uint8_t)(F_RUN << 1 | !implicit);
			if (!implicit)
				o = put_varint(o, (uint64_t)id);
			o = put_varint(o, k);
		} else {
			const struct mser *sr = &h->ser[id];
			int64_t m = 0, mp = 0;
			int form = value_form(sr->fam, p[i].v, &m);
			uint64_t d = 0;
			float f;

			/* a decimal whose series was a decimal of the same scale in the
			 * sample before: its difference */
			if (runs && form >= F_DEC0 && form <= F_DEC9 && sr->last_seq == h->seq - 1 &&
			    value_form(sr->fam, sr->last_v, &mp) == form) {
				d = ((uint64_t)(m - mp) << 1) ^ (uint64_t)((m - mp) >> 63);
				if (d < (1ull << 59))
					form = F_DELTA;
			}
			*o++ = (uint8_t)(form << 1 | !implicit);
			if (!implicit)
				o = put_varint(o, (uint64_t)id);
			if (form == F_DELTA) {
				o = put_varint(o, d << 4 | (uint64_t)(value_form(sr->fam, p[i].v, &m) - F_DEC0));
			} else if (form >= F_DEC0 && form <= F_DEC9) {
				o = put_varint(o, ((uint64_t)m << 1) ^ (uint64_t)(m >> 63));
			} else if (form == F_FLOAT) {
				f = (float)p[i].v;
				memcpy(o, &f, 4);
				o += 4;
			} else if (form == F_DOUBLE) {
				memcpy(o, &p[i].v, 8);
				o += 8;
			}
		}
		for (j = i; mark && j < i + k; j++) {
			h->ser[p[j].id].last_seq = h->seq;
			h->ser[p[j].id].last_v = p[j].v;
		}
		prev = (long)p[i + k - 1].id;
		i += k;
	}
	return (size_t)(o - buf);
}

static void dec_deinit(struct dec *d)
{
	free(d->vals);
	free(d->stamp);
	free(d->p);
}

/* Decodes the sample at position i (the one at i - 1 decoded just before
 * with d, unless i is 0) into d->p. Its count of values, or -ENOMEM, or
 * -EINVAL (cannot happen: this file wrote it). */
static long decode(const struct mhist *h, struct dec *d, size_t i)
{
	const struct msample *smp = &h->ring[(h->head + i) % h->cap];
	const uint8_t *p = smp->data, *end = p + smp->len;
	uint64_t id = (uint64_t)-1, u, k;
	size_t n = 0;

	if (d->vals == NULL) {
		d->vals = calloc(h->nser ? h->nser : 1, sizeof(*d->vals));
		d->stamp = calloc(h->nser ? h->nser : 1, sizeof(*d->stamp));
		if (d->vals == NULL || d->stamp == NULL)
			return -ENOMEM;
	}
	if (d->np_cap < smp->nvals) {
		struct pair *np = realloc(d->p, smp->nvals * sizeof(*np));

		if (np == NULL)
			return -ENOMEM;
		d->p = np;
		d->np_cap = smp->nvals;
	}
	while (p != NULL && p < end) {
		int form = *p >> 1;
		double x = 0;
		float f;

		if (*p++ & 1)
			p = get_varint(p, end, &id);
		else
			id++;
		if (p == NULL || id >= h->nser)
			return -EINVAL;
		if (form == F_RUN) {
			if ((p = get_varint(p, end, &k)) == NULL || k > h->nser - id || n + k > smp->nvals)
				return -EINVAL;
			for (u = id; u < id + k; u++) {
				if (i == 0 || d->stamp[u] != i) /* not in the sample before (stamped i) */
					return -EINVAL;
				d->stamp[u] = i + 1;
				d->p[n].id = (uint32_t)u;
				d->p[n++].v = d->vals[u];
			}
			id += k - 1;
			continue;
		}
		if (form == F_DELTA) {
			int e;
			int64_t mp;

			if ((p = get_varint(p, end, &u)) == NULL || i == 0 || d->stamp[id] != i ||
			    (e = (int)(u & 15)) > 9)
				return -EINVAL;
			u >>= 4;
			/* the same expression value_form used on the writer's side */
			mp = (int64_t)nearbyint(d->vals[id] * pow10_tab[e]);
			x = (double)(mp + (int64_t)((u >> 1) ^ (~(u & 1) + 1))) / pow10_tab[e];
		} else if (form >= F_DEC0 && form <= F_DEC9) {
			if ((p = get_varint(p, end, &u)) == NULL)
				return -EINVAL;
			x = (double)(int64_t)((u >> 1) ^ (~(u & 1) + 1)) / pow10_tab[form - F_DEC0];
		} else if (form == F_FLOAT) {
			if (end - p < 4)
				return -EINVAL;
			memcpy(&f, p, 4);
			p += 4;
			x = f;
		} else if (form == F_DOUBLE) {
			if (end - p < 8)
				return -EINVAL;
			memcpy(&x, p, 8);
			p += 8;
		}
		if (n >= smp->nvals)
			return -EINVAL;
		d->vals[id] = x;
		d->stamp[id] = i + 1;
		d->p[n].id = (uint32_t)id;
		d->p[n++].v = x;
	}
	return p == NULL || n != smp->nvals ? -EINVAL : (long)n;
}

/* Stores n values as a sample's bytes in slot (its buffer reused); runs
 * and mark as encode's. */
static int store(struct mhist *h, struct msample *slot, const struct pair *p, size_t n, bool runs,
                 bool mark)
{
	uint8_t *data = realloc(slot->data, n * VALUE_MAX_BYTES + 1);

	if (data == NULL)
		return -ENOMEM;
	slot->len = (uint32_t)encode(h, p, n, runs, mark, data);
	slot->nvals = (uint32_t)n;
	/* shrinking in place: glibc splits the chunk, nothing is copied */
	slot->data = realloc(data, slot->len ? slot->len : 1);
	if (slot->data == NULL)
		slot->data = data;
	return 0;
}

static void drop_all(struct mhist *h)
{
	size_t i;

	for (i = 0; i < h->cap; i++) {
		free(h->ring[i].data);
		h->ring[i].data = NULL;
	}
	h->n = h->head = h->data_bytes = 0;
	h->prev_kept = false;
}

/* The oldest sample goes; the next, the new oldest, is written again
 * without runs (they read the one that goes). 0, or -ENOMEM with the whole
 * history dropped. Its buffer is handed to the caller in *buf. */
static int evict(struct mhist *h, uint8_t **buf)
{
	struct msample *old = &h->ring[h->head], *next;
	struct dec d = { 0 };
	long n;
	int r = 0;

	if (h->n >= 2) {
		next = &h->ring[(h->head + 1) % h->cap];
		if (decode(h, &d, 0) < 0 || (n = decode(h, &d, 1)) < 0) {
			r = -ENOMEM;
		} else {
			h->data_bytes -= next->len;
			r = store(h, next, d.p, (size_t)n, false, false);
			h->data_bytes += next->len;
		}
		dec_deinit(&d);
		if (r < 0) {
			drop_all(h);
			*buf = NULL;
			return r;
		}
	}
	*buf = old->data;
	old->data = NULL;
	h->data_bytes -= old->len;
	h->head = (h->head + 1) % h->cap;
	h->n--;
	return 0;
}

int mhist_append(struct mhist *h, const struct mset *s)
{
	struct msample slot = { 0 };
	struct pair *p = NULL;
	bool runs;
	size_t i;
	int r = 0;

	if (h->cap == 0)
		return 0;
	if (h->n == h->cap && (r = evict(h, &slot.data)) < 0)
		goto out;
	if (s->n > 0 && (p = malloc(s->n * sizeof(*p))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < s->n; i++) {
		long id = ser_find(h, &s->v[i], mset_labels(s, &s->v[i]));

		if (id < 0) {
			r = -ENOMEM;
			goto out;
		}
		p[i].id = (uint32_t)id;
		p[i].v = s->v[i].v;
	}
	/* the sample before must be kept, and not the one going */
	runs = h->prev_kept && h->n > 0;
	if ((r = store(h, &slot, p, s->n, runs, true)) < 0)
		goto out;
	slot.ts_us = s->ts_us;
	h->ring[(h->head + h->n) % h->cap] = slot;
	slot.data = NULL; /* transferred */
	h->data_bytes += h->ring[(h->head + h->n) % h->cap].len;
	h->n++;
out:
	free(slot.data);
	free(p);
	/* a failure comes before any series is marked with this sample: the
	 * series it made are in no sample (UINT64_MAX), and the sweep frees them */
	h->prev_kept = r == 0;
	h->seq++;
	ser_sweep(h);
	return r;
}

int mhist_read(const struct mhist *h, size_t first, size_t count,
               int (*fn)(void *ud, size_t i, const struct mset *s), void *ud)
{
	struct mset out = { 0 };
	struct dec d = { 0 };
	size_t i, j;
	long n;
	int r = 0;

	if (first > h->n || count > h->n - first)
		return -ERANGE;
	for (i = 0; i < first + count && r == 0; i++) {
		if ((n = decode(h, &d, i)) < 0) {
			r = (int)n;
			break;
		}
		if (i < first)
			continue;
		mset_reset(&out);
		out.ts_us = h->ring[(h->head + i) % h->cap].ts_us;
		for (j = 0; j < (size_t)n; j++) {
			const struct mser *s = &h->ser[d.p[j].id];
			struct mval *v = mset_add_labels(&out, s->fam, d.p[j].v, s->labels);

			if (v == NULL) {
				r = -ENOMEM;
				break;
			}
			v->owner = s->owner;
		}
		if (r == 0)
			r = fn(ud, i - first, &out);
	}
	dec_deinit(&d);
	mset_free(&out);
	return r;
}
