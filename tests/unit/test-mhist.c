/*
 * test-mhist: the compact metrics history. Every value reads back bit for
 * bit (ratios within a float's precision), with its family, labels, owner
 * and time; the oldest sample goes when cap are kept; a series no kept
 * sample names is freed, so churn (processes coming and going) does not
 * grow it; and a host's sample costs a few bytes a value, not the 24 plus
 * labels an mset holds (issue 25).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mhist.h"
#include "mhost.h"
#include "mset.h"

static const double values[] = {
	0.0, -0.0, 1, -1, 42, 123456789012.0, 9007199254740993.0 /* past 2^53 */,
	1844674407370955.0, 0.01 * 1234567, 14626.06, 0.46, 1e-9, 3.14159265358979,
	1e300, -5.5, 0.375, 1.0 / 3.0, 2.5e-7, 80000000000.0, 4.2e18,
};
#define NVALUES (sizeof(values) / sizeof(values[0]))

/* A sample: every test value twice, as a plain gauge with labels and as
 * the process counter of owner 1000. */
static void fill(struct mset *s, int64_t ts, int shift)
{
	size_t i;

	mset_reset(s);
	s->ts_us = ts;
	for (i = 0; i < NVALUES; i++) {
		struct mval *v;

		assert_non_null(mset_add(s, MF_MEM_USED, values[(i + shift) % NVALUES],
		                         "dev=\"d%zu\"", i));
		v = mset_add(s, MF_PROC_STEPS, values[i] * (shift + 1), "pid=\"%zu\"", i);
		assert_non_null(v);
		v->owner = 1000;
	}
	assert_non_null(mset_add(s, MF_LOAD1, 0.5, NULL));
}

static int copy_out(void *ud, size_t i, const struct mset *s)
{
	(void)i;
	return mset_copy(ud, s);
}

/* Sample i of h into out, as metrics_query reads it. */
static int mhist_get(const struct mhist *h, size_t i, struct mset *out)
{
	return mhist_read(h, i, 1, copy_out, out);
}

static void same_but_ratios(const struct mset *a, const struct mset *b, bool ratios);

static void same(const struct mset *a, const struct mset *b)
{
	same_but_ratios(a, b, false);
}

/* a and b hold the same values, with their labels and owners; with
 * ratios, a _ratio value may be off by a float's precision. */
static void same_but_ratios(const struct mset *a, const struct mset *b, bool ratios)
{
	size_t i;

	assert_int_equal(a->ts_us, b->ts_us);
	assert_int_equal(a->n, b->n);
	for (i = 0; i < a->n; i++) {
		assert_int_equal(a->v[i].fam, b->v[i].fam);
		assert_int_equal(a->v[i].owner, b->v[i].owner);
		assert_string_equal(mset_labels(a, &a->v[i]), mset_labels(b, &b->v[i]));
		if (ratios && strstr(mset_family_name(a->v[i].fam), "_ratio") != NULL &&
		    fabs(a->v[i].v - b->v[i].v) <= fabs(a->v[i].v) * 6e-8)
			continue;
		if (memcmp(&a->v[i].v, &b->v[i].v, sizeof(double)) != 0)
			fail_msg("value %zu: wrote %.17g, read %.17g", i, a->v[i].v, b->v[i].v);
	}
}

static void test_round_trip(void **state)
{
	struct mset in = { 0 }, out = { 0 }, want = { 0 };
	struct mhist *h = mhist_new(3);
	int k;

	(void)state;
	assert_non_null(h);
	assert_int_equal(mhist_get(h, 0, &out), -ERANGE);
	for (k = 0; k < 5; k++) {
		fill(&in, 1000 + k, k);
		assert_int_equal(mhist_append(h, &in), 0);
	}
	assert_int_equal(mhist_len(h), 3);
	for (k = 0; k < 3; k++) {
		assert_int_equal(mhist_get(h, (size_t)k, &out), 0);
		fill(&want, 1000 + k + 2, k + 2); /* the two oldest went */
		same(&want, &out);
	}
	assert_int_equal(mhist_get(h, 3, &out), -ERANGE);
	mhist_free(h);
	mset_free(&in);
	mset_free(&out);
	mset_free(&want);
}

/* A ratio that is neither a decimal nor a float keeps a float's precision. */
static void test_ratio(void **state)
{
	struct mset in = { 0 }, out = { 0 };
	struct mhist *h = mhist_new(1);
	double r = 0.123456789123;

	(void)state;
	assert_non_null(mset_add(&in, MF_GPM_SM_ACTIVE, r, "gpu=\"0\""));
	assert_non_null(mset_add(&in, MF_GPU_POWER, r, "gpu=\"0\"")); /* not a ratio: exact */
	assert_int_equal(mhist_append(h, &in), 0);
	assert_int_equal(mhist_get(h, 0, &out), 0);
	assert_true(fabs(out.v[0].v - r) < r * 6e-8);
	assert_true(out.v[1].v == r);
	mhist_free(h);
	mset_free(&in);
	mset_free(&out);
}

/* 10,000 processes, each seen in one sample only: the series of those no
 * longer kept are freed, so the history stays the size of cap samples. */
static void test_churn(void **state)
{
	struct mset in = { 0 }, out = { 0 };
	struct mhist *h = mhist_new(10);
	size_t early = 0;
	int k, j;

	(void)state;
	for (k = 0; k < 1000; k++) {
		mset_reset(&in);
		for (j = 0; j < 10; j++)
			assert_non_null(mset_add(&in, MF_PROC_STEPS, 7, "pid=\"%05d\"", k * 10 + j));
		assert_int_equal(mhist_append(h, &in), 0);
		if (k == 20)
			early = mhist_bytes(h);
	}
	assert_true(mhist_bytes(h) <= early);
	assert_int_equal(mhist_get(h, 9, &out), 0);
	assert_int_equal(out.n, 10);
	assert_string_equal(mset_labels(&out, &out.v[0]), "pid=\"09990\"");
	mhist_free(h);
	mset_free(&in);
	mset_free(&out);
}

/* Sample k of a changing host: processes come and go (pid k % 7 is away
 * in every sample where k % 3 == 0), some values move, most stand still. */
static void churn_sample(struct mset *s, int k)
{
	int j;

	mset_reset(s);
	s->ts_us = k;
	for (j = 0; j < 40; j++) {
		double v = j < 10 ? 1000.0 + k * 0.01 * j : j < 20 ? (double)(k / 5) : 0.25 * j;

		if (j >= 30 && j % 7 == k % 7 && k % 3 == 0)
			continue;
		assert_non_null(mset_add(s, j >= 30 ? MF_PROC_STEPS : MF_NET_RX_BYTES, v,
		                         "pid=\"%d\"", j));
		if (j >= 30)
			s->v[s->n - 1].owner = j;
	}
	if (k % 4 == 0) /* a series named twice in one sample */
		assert_non_null(mset_add(s, MF_NET_RX_BYTES, k, "pid=\"%d\"", 5));
}

/* Runs of values that stand still read back as they were written, through
 * the oldest samples' going (the next one is written again without runs)
 * and series that come, go and come back. */
static void test_runs(void **state)
{
	struct mset want = { 0 }, out = { 0 }, in = { 0 };
	struct mhist *h;
	size_t cap;
	int k, i;

	(void)state;
	for (cap = 1; cap <= 5; cap++) {
		h = mhist_new(cap);
		for (k = 0; k < 40; k++) {
			churn_sample(&in, k);
			assert_int_equal(mhist_append(h, &in), 0);
			assert_int_equal(mhist_len(h), (size_t)k + 1 < cap ? (size_t)k + 1 : cap);
			for (i = 0; i < (int)mhist_len(h); i++) {
				churn_sample(&want, k + 1 - (int)mhist_len(h) + i);
				assert_int_equal(mhist_get(h, (size_t)i, &out), 0);
				same(&want, &out);
			}
		}
		mhist_free(h);
	}
	mset_free(&want);
	mset_free(&out);
	mset_free(&in);
}

/* The fixture host's 300 samples (the default history), its counters
 * moving, in a few bytes a value; an mset holds 24 a value and its
 * labels. */
static void test_host_size(void **state)
{
	struct mset s = { 0 }, base = { 0 }, out = { 0 };
	struct mhist *h = mhist_new(300);
	size_t n, per_sample, j;
	int k;

	(void)state;
	mhost_sample(FIXTURES "/host-a", &base);
	n = base.n;
	assert_true(n > 20);
	for (k = 0; k < 300; k++) {
		assert_int_equal(mset_copy(&s, &base), 0);
		s.ts_us = k;
		for (j = 0; j < n; j++) /* every other value moves, as counters do */
			if (j % 2 == 0 && s.v[j].v != 0)
				s.v[j].v += (double)(k * (int)(j + 1) * 37 % 100000);
		assert_int_equal(mhist_append(h, &s), 0);
	}
	per_sample = (mhist_bytes(h) - 300 * 24) / 300; /* less the ring's slots */
	printf("# %zu values: %zu bytes a sample kept (%zu in an mset)\n", n, per_sample,
	       n * sizeof(struct mval) + s.text_len);
	assert_true(per_sample <= n * 8);
	assert_int_equal(mhist_get(h, 299, &out), 0);
	assert_int_equal(out.n, n);
	mhist_free(h);
	mset_free(&s);
	mset_free(&base);
	mset_free(&out);
}

static uint32_t lcg(uint32_t *x)
{
	*x = *x * 1664525u + 1013904223u;
	return *x >> 8;
}

/* A 16-core host with one Hopper GPU and four traced processes: 231
 * series (issue 25 counted 231 on such a host), every counter moving
 * every second as on a busy host, the gauges wandering, GPM ratios
 * arbitrary fractions. Prints what a sample costs in the history. */
static void test_gpu_host_size(void **state)
{
	static double cpu[136], net[26];
	struct mset s = { 0 }, out = { 0 };
	struct mhist *h = mhist_new(300);
	uint32_t x = 1;
	double used = 60e9, power = 350.125, load = 3.5;
	size_t per_sample;
	int k, j;

	(void)state;
	for (k = 0; k < 300; k++) {
		mset_reset(&s);
		s.ts_us = 1700000000000000 + k * 1000000LL;
		for (j = 0; j < 136; j++) { /* cpu= x mode=: ticks in hundredths of a second */
			cpu[j] += (double)(lcg(&x) % 101) / 100.0;
			mset_add(&s, MF_CPU_SECONDS, cpu[j] + 123456.78, "cpu=\"%d\",mode=\"m%d\"",
			         j / 8, j % 8);
		}
		used += (double)(lcg(&x) % 2000) * 4096.0 - 4096000.0;
		for (j = 0; j < 7; j++)
			mset_add(&s, MF_MEM_TOTAL + j % 5, j < 2 ? 540e9 : used + j * 4096.0, "k=\"%d\"", j);
		load += (double)((int)(lcg(&x) % 21) - 10) / 100.0;
		for (j = 0; j < 3; j++)
			mset_add(&s, MF_LOAD1 + j, nearbyint(load * 100.0 + j) / 100.0, NULL);
		for (j = 0; j < 26; j++) { /* network and disk counters */
			net[j] += (double)(lcg(&x) % (j % 2 ? 1000 : 1000000));
			mset_add(&s, MF_NET_RX_BYTES + j % 13, net[j], "dev=\"d%d\"", j);
		}
		mset_add(&s, MF_NVML_UP, 1, NULL);
		mset_add(&s, MF_GPUS, 1, NULL);
		mset_add(&s, MF_GPU_INFO, 1, "gpu=\"0\",uuid=\"GPU-0\",name=\"H100\"");
		mset_add(&s, MF_GPU_UTIL, (double)(lcg(&x) % 101) / 100.0, "gpu=\"0\"");
		mset_add(&s, MF_GPU_MEM_UTIL, (double)(lcg(&x) % 101) / 100.0, "gpu=\"0\"");
		mset_add(&s, MF_GPU_MEM_USED, (double)(lcg(&x) % 80000) * 1048576.0, "gpu=\"0\"");
		mset_add(&s, MF_GPU_MEM_TOTAL, 85520809984.0, "gpu=\"0\"");
		power += (double)((int)(lcg(&x) % 2001) - 1000) / 1000.0;
		mset_add(&s, MF_GPU_POWER, nearbyint(power * 1000.0) / 1000.0, "gpu=\"0\"");
		mset_add(&s, MF_GPU_ENERGY, 987654.321 + (k / 300) * 100.0, "gpu=\"0\"");
		mset_add(&s, MF_GPU_TEMP, 40 + lcg(&x) % 30, "gpu=\"0\"");
		mset_add(&s, MF_GPU_SM_CLOCK, (1500 + lcg(&x) % 480) * 1e6, "gpu=\"0\"");
		mset_add(&s, MF_GPU_MEM_CLOCK, 2619e6, "gpu=\"0\"");
		for (j = 0; j < 10; j++)
			mset_add(&s, MF_GPU_CLOCK_EVENTS, j == 3 && k % 7 == 0, "gpu=\"0\",reason=\"r%d\"", j);
		for (j = 0; j < 6; j++)
			mset_add(&s, j < 2 ? MF_GPU_ECC : MF_GPU_REMAPPED, 0, "gpu=\"0\",t=\"%d\"", j);
		for (j = 0; j < 4; j++)
			mset_add(&s, MF_GPU_PCIE_TX + j, (double)k * (double)(lcg(&x) % 100000000), "gpu=\"0\"");
		for (j = 0; j < 7; j++) /* GPM: fractions NVML computes */
			mset_add(&s, MF_GPM_SM_ACTIVE + j, (double)lcg(&x) / 16777216.0 / 3.0, "gpu=\"0\"");
		for (j = 0; j < 12; j++) /* four processes: steps, last, median */
			mset_add(&s, MF_PROC_STEPS + j % 3, j % 3 == 0 ? (double)k * 2 :
			         nearbyint(0.25 * 1e6 + lcg(&x) % 1000) / 1e6, "pid=\"%d\"", j / 3);
		for (j = 0; j < 8; j++) /* the daemon's own */
			mset_add(&s, MF_SAMPLE_SECONDS + j, (double)(lcg(&x) % 100000) / 1e6, NULL);
		assert_int_equal(s.n, 231);
		assert_int_equal(mhist_append(h, &s), 0);
	}
	per_sample = (mhist_bytes(h) - 300 * 24) / 300;
	printf("# GPU host, %zu series: %zu bytes a sample kept (%zu in an mset)\n", s.n,
	       per_sample, s.n * sizeof(struct mval) + s.text_len);
	assert_true(per_sample <= s.n * 8);
	assert_int_equal(mhist_get(h, 299, &out), 0);
	same_but_ratios(&s, &out, true);
	mhist_free(h);
	mset_free(&s);
	mset_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_ratio),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_runs),
		cmocka_unit_test(test_host_size),
		cmocka_unit_test(test_gpu_host_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
