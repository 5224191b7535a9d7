/*
 * Footprint (issue 25): what an idle gprofd keeps in private memory
 * (Pss_Anon, /proc/PID/smaps_rollup: the memory only it holds, which is
 * what it costs a host), with metrics on and its history full.
 *
 * Two daemons run side by side with the defaults except the sampling
 * interval: 100 ms with a 30 s history holds the 300 samples the defaults
 * (1 s, 300 s) hold, and fills in 30 s instead of 5 minutes. One is idle;
 * the other has 1,000 registered agent processes (real, forked), whose
 * step series are in every sample. Each samples into a JSON lines file,
 * whose lines say how many samples it has taken: the test waits for 300
 * of each, never for a time.
 *
 * What must hold: the idle daemon at most 1 MB with its history full, and
 * still after answering a metrics query for its whole history (whose
 * reply once left 750 kB of freed heap resident); the second at most 2 KB
 * more per registered process. Before issue 25: 4.2 MB idle (each sample
 * an mset of about 10 kB, and OpenSSL linked in though TLS was off).
 *
 * Not under AddressSanitizer (meson does not build it there: its shadow
 * memory and quarantine are the daemon's private memory), and reported as
 * skipped (exit 77) when the daemon runs under a wrapper (valgrind).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define SAMPLES 300          /* the default history: 300 s at 1 s */
#define PROCESSES 1000
#define IDLE_MAX_KB 1024
#define PER_PROCESS_MAX 2048 /* bytes */

static struct td idle, busy;
static char dir[64];

static double mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Pss_Anon of pid in kB, or -1. */
static long pss_anon_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Pss_Anon: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* Pss_Anon of two daemons, each the median of 9 readings 0.1 s apart
 * (one a sampling cycle): a reading taken while a cycle builds its
 * sample holds that sample twice for a moment, which is not what the
 * daemon keeps. */
static void pss_median(pid_t a, pid_t b, long *ka, long *kb)
{
	struct timespec gap = { 0, 100 * 1000 * 1000 };
	long ra[9], rb[9];
	int i;

	for (i = 0; i < 9; i++) {
		ra[i] = pss_anon_kb(a);
		rb[i] = pss_anon_kb(b);
		nanosleep(&gap, NULL);
	}
	qsort(ra, 9, sizeof(long), cmp_long);
	qsort(rb, 9, sizeof(long), cmp_long);
	*ka = ra[4];
	*kb = rb[4];
}

/* The samples a daemon has written to its JSON lines file. */
static long samples(const char *path)
{
	char buf[65536];
	long n = 0;
	ssize_t r, i;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		for (i = 0; i < r; i++)
			n += buf[i] == '\n';
	close(fd);
	return n;
}

/* Waits until the file holds at least n samples: the daemon's own count
 * (a short nap between looks; the deadline is only a safety net). */
static void wait_samples(const char *path, long n)
{
	double deadline = mono_s() + 120;
	struct timespec nap = { 0, 50 * 1000 * 1000 };

	while (samples(path) < n) {
		if (mono_s() > deadline)
			fail_msg("%s: %ld samples after 120 s, waiting for %ld", path, samples(path), n);
		nanosleep(&nap, NULL);
	}
}

static void start(struct td *t, const char *jsonl)
{
	char yaml[512];

	snprintf(yaml, sizeof(yaml), "metrics: 127.0.0.1:0\nsampling:\n  interval: 100\n"
	         "  history: 30s\nexport:\n  jsonl: %s\n", jsonl);
	assert_int_equal(td_start(t, yaml, NULL), 0);
}

static void test_footprint(void **state)
{
	char idle_jsonl[128], busy_jsonl[128];
	struct agents a;
	long idle_kb, busy_kb, after_kb;
	double per_process;
	struct tc c;
	struct msg m, r;
	long busy0;
	int n;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gprof-footprint-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(idle_jsonl, sizeof(idle_jsonl), "%s/idle.jsonl", dir);
	snprintf(busy_jsonl, sizeof(busy_jsonl), "%s/busy.jsonl", dir);
	start(&idle, idle_jsonl);
	start(&busy, busy_jsonl);
	if ((n = agents_spawn(&a, PROCESSES, busy.sock, "footprint", 0)) != PROCESSES)
		fail_msg("%d of %d agents registered", n, PROCESSES);
	busy0 = samples(busy_jsonl);
	/* both histories full, the processes in every sample of the second */
	wait_samples(idle_jsonl, SAMPLES + 1);
	wait_samples(busy_jsonl, busy0 + SAMPLES + 1);
	pss_median(idle.pid, busy.pid, &idle_kb, &busy_kb);
	per_process = (double)(busy_kb - idle_kb) * 1024.0 / PROCESSES;
	print_message("idle, %d samples kept: Pss_Anon %ld kB; with %d processes: %ld kB "
	              "(%.0f bytes a process)\n", SAMPLES, idle_kb, PROCESSES, busy_kb, per_process);
	assert_true(idle_kb > 0 && busy_kb > 0);
	if (idle_kb > IDLE_MAX_KB)
		fail_msg("an idle daemon holds %ld kB of private memory (at most %d)", idle_kb,
		         IDLE_MAX_KB);
	if (per_process >= PER_PROCESS_MAX)
		fail_msg("%.0f bytes a registered process (under %d)", per_process, PER_PROCESS_MAX);
	agents_stop(&a);

	/* the whole history asked for (the largest reply there is), then two
	 * cycles of the sampler, which gives freed heap back */
	tc_ctl(&c, idle.sock);
	msg_init(&m, MSG_METRICS_QUERY, 0);
	m.u.metrics_query.history_s = 30;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_METRICS_REPLY);
	assert_true(r.u.metrics_reply.samples.n > 100);
	msg_deinit(&r);
	tc_close(&c);
	wait_samples(idle_jsonl, samples(idle_jsonl) + 2);
	pss_median(idle.pid, idle.pid, &after_kb, &after_kb);
	print_message("after a metrics query of the whole history: %ld kB\n", after_kb);
	if (after_kb > IDLE_MAX_KB)
		fail_msg("after a metrics query an idle daemon holds %ld kB (at most %d)", after_kb,
		         IDLE_MAX_KB);
}

static int teardown(void **state)
{
	char path[128];
	int r;

	(void)state;
	r = td_finish(&idle) | td_finish(&busy);
	snprintf(path, sizeof(path), "%s/idle.jsonl", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/busy.jsonl", dir);
	unlink(path);
	rmdir(dir);
	return r;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_footprint, teardown),
	};
	const char *w = getenv("GPROFD_WRAPPER");

	if (w != NULL && *w != '\0') {
		printf("skipped: the daemon runs under %s, whose memory is not the daemon's\n", w);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
