/*
 * test-kstep: ProfilerStep# events made from a Kineto trace's
 * Optimizer.step annotations (daemon/kstep.c): which annotations count,
 * the spans, where they go, files that already have steps, and matches
 * that straddle the scanner's 64 KiB reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kstep.h"

/* A Kineto-shaped event, one per line block as Kineto writes them. */
static void ev(FILE *f, const char *cat, const char *name, int pid, int tid, double ts,
               double dur)
{
	fprintf(f, "  {\n    \"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %d, "
	        "\"tid\": %d,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n"
	        "      \"External id\": 7\n    }\n  },\n", cat, name, pid, tid, ts, dur);
}

static int make(FILE **fp, char *path)
{
	int fd;

	strcpy(path, "/tmp/test-kstep-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	*fp = fdopen(dup(fd), "w");
	fprintf(*fp, "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n");
	return fd;
}

static void finish(FILE *f)
{
	fprintf(f, "  {\"ph\": \"i\", \"name\": \"Record Window End\", \"ts\": 1}\n  ],\n"
	        "  \"traceName\": \"x\"\n}\n");
	fclose(f);
}

static void test_steps_from_optimizer(void **state)
{
	char path[64], *p;
	struct kstep ks;
	FILE *f;
	int fd = make(&f, path);

	(void)state;
	ev(f, "cpu_op", "aten::mm", 42, 42, 1000.0, 5.0);
	ev(f, "user_annotation", "Optimizer.step#SGD.step", 42, 42, 1100.0, 50.0);
	ev(f, "gpu_user_annotation", "Optimizer.step#SGD.step", 0, 7, 1120.0, 40.0); /* GPU row */
	ev(f, "user_annotation", "Optimizer.step#SGD.step", 42, 42, 1300.0, 50.0);
	ev(f, "user_annotation", "Optimizer.step#SGD.step", 99, 99, 1310.0, 50.0); /* other pid */
	ev(f, "user_annotation", "Optimizer.step#SGD.step", 42, 42, 1500.5, 49.5);
	finish(f);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(kstep_scan(fd, 42, &ks), 0);
	assert_int_equal(ks.optimizer_steps, 3);
	assert_int_equal(ks.made, 3);
	assert_false(ks.has_steps);
	/* the insertion point is just past "traceEvents": [ */
	{
		char head[64];

		assert_int_equal(pread(fd, head, sizeof(head), 0), sizeof(head));
		assert_int_equal(ks.insert_at, (uint64_t)(strchr(head, '[') - head + 1));
	}
	/* iteration k: from the end of step k-1 (the first: the earliest ts) */
	p = strstr(ks.events, "\"name\": \"ProfilerStep#0\", \"pid\": 42, \"tid\": 42, "
	                      "\"ts\": 1000.000, \"dur\": 150.000");
	assert_non_null(p);
	assert_non_null(strstr(ks.events, "\"name\": \"ProfilerStep#1\", \"pid\": 42, \"tid\": 42, "
	                                  "\"ts\": 1150.000, \"dur\": 200.000"));
	assert_non_null(strstr(ks.events, "\"name\": \"ProfilerStep#2\", \"pid\": 42, \"tid\": 42, "
	                                  "\"ts\": 1350.000, \"dur\": 200.000"));
	assert_null(strstr(ks.events, "ProfilerStep#3"));
	kstep_free(&ks);
	close(fd);
	unlink(path);
}

static void test_existing_steps_kept(void **state)
{
	char path[64];
	struct kstep ks;
	FILE *f;
	int fd = make(&f, path);

	(void)state;
	ev(f, "user_annotation", "ProfilerStep#12", 42, 42, 1000.0, 400.0);
	ev(f, "user_annotation", "Optimizer.step#SGD.step", 42, 42, 1100.0, 50.0);
	finish(f);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(kstep_scan(fd, 42, &ks), 0);
	assert_true(ks.has_steps);
	assert_int_equal(ks.made, 0);
	assert_null(ks.events);
	kstep_free(&ks);
	close(fd);
	unlink(path);
}

/* 3000 steps among padding, so that many matches straddle 64 KiB reads:
 * every one is found once. */
static void test_across_reads(void **state)
{
	char path[64];
	struct kstep ks;
	FILE *f;
	int fd = make(&f, path), i, j;

	(void)state;
	for (i = 0; i < 3000; i++) {
		for (j = 0; j < (i % 7); j++)
			ev(f, "cpu_op", "aten::addmm_with_a_longer_name_for_padding", 42, 43,
			   10000.0 + i * 100 + j, 1.0);
		ev(f, "user_annotation", "Optimizer.step#AdamW.step", 42, 43, 10050.0 + i * 100, 10.0);
	}
	finish(f);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(kstep_scan(fd, 42, &ks), 0);
	assert_int_equal(ks.optimizer_steps, 3000);
	assert_int_equal(ks.made, 3000);
	assert_non_null(strstr(ks.events, "\"name\": \"ProfilerStep#2999\", \"pid\": 42, \"tid\": 43, "
	                                  "\"ts\": 309860.000, \"dur\": 100.000"));
	kstep_free(&ks);
	close(fd);
	unlink(path);
}

static void test_no_optimizer(void **state)
{
	char path[64];
	struct kstep ks;
	FILE *f;
	int fd = make(&f, path);

	(void)state;
	ev(f, "kernel", "sgemm", 0, 7, 1000.0, 5.0);
	finish(f);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(kstep_scan(fd, 42, &ks), 0);
	assert_int_equal(ks.optimizer_steps, 0);
	assert_int_equal(ks.made, 0);
	kstep_free(&ks);
	close(fd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps_from_optimizer),
		cmocka_unit_test(test_existing_steps_kept),
		cmocka_unit_test(test_across_reads),
		cmocka_unit_test(test_no_optimizer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
