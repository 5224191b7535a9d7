/*
 * htab: see htab.h. SipHash-1-3 after Aumasson and Bernstein (the
 * reference's round function, one compression round, three finalisation
 * rounds), keyed once per process.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "htab.h"

struct htab_counts htab_counts;

static uint64_t key0, key1;
static bool keyed;

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND do { \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

/* The key: from getrandom; should it fail (a very old kernel), from the
 * clock and the pid, which still differ from run to run. */
static void make_key(void)
{
	uint64_t k[2];

	if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		k[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
		k[1] = (uint64_t)getpid() * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)(uintptr_t)&ts;
	}
	key0 = k[0];
	key1 = k[1];
	keyed = true;
}

uint64_t htab_hash(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t v0, v1, v2, v3, m, b = (uint64_t)n << 56;
	size_t i;

	if (!keyed)
		make_key();
	v0 = key0 ^ 0x736f6d6570736575ull;
	v1 = key1 ^ 0x646f72616e646f6dull;
	v2 = key0 ^ 0x6c7967656e657261ull;
	v3 = key1 ^ 0x7465646279746573ull;
	for (; n >= 8; n -= 8, s += 8) {
		memcpy(&m, s, 8); /* little-endian hosts; any order hashes as well */
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (i = 0; i < n; i++)
		b |= (uint64_t)s[i] << (8 * i);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

uint32_t htab_find(const struct htab *t, uint64_t h,
                   bool (*eq)(const void *ctx, uint32_t pos, const void *key),
                   const void *ctx, const void *key)
{
	size_t i;

	htab_counts.lookups++;
	if (t->idx == NULL)
		return HTAB_NONE;
	for (i = (size_t)h & t->mask; t->idx[i] != HTAB_NONE; i = (i + 1) & t->mask) {
		htab_counts.probes++;
		if (t->hash[i] == h && eq(ctx, t->idx[i], key))
			return t->idx[i];
	}
	return HTAB_NONE;
}

/* Puts pos under h in slots of size mask + 1 (which has room). */
static void place(uint32_t *idx, uint64_t *hash, size_t mask, uint64_t h, uint32_t pos)
{
	size_t i;

	for (i = (size_t)h & mask; idx[i] != HTAB_NONE; i = (i + 1) & mask)
		htab_counts.probes++;
	idx[i] = pos;
	hash[i] = h;
}

int htab_add(struct htab *t, uint64_t h, uint32_t pos)
{
	if ((t->n + 1) * 2 > (t->idx ? t->mask + 1 : 0)) {
		size_t nmask = t->idx ? t->mask * 2 + 1 : 63, k;
		uint32_t *idx = malloc((nmask + 1) * sizeof(*idx));
		uint64_t *hash = malloc((nmask + 1) * sizeof(*hash));

		if (idx == NULL || hash == NULL) {
			free(idx);
			free(hash);
			return -ENOMEM;
		}
		memset(idx, 0xff, (nmask + 1) * sizeof(*idx));
		for (k = 0; t->idx != NULL && k <= t->mask; k++)
			if (t->idx[k] != HTAB_NONE)
				place(idx, hash, nmask, t->hash[k], t->idx[k]);
		free(t->idx);
		free(t->hash);
		t->idx = idx;
		t->hash = hash;
		t->mask = nmask;
	}
	place(t->idx, t->hash, t->mask, h, pos);
	t->n++;
	return 0;
}

void htab_deinit(struct htab *t)
{
	free(t->idx);
	free(t->hash);
	memset(t, 0, sizeof(*t));
}
