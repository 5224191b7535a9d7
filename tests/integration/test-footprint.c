/*
 * Footprint (issue 25): what an idle gprofd holds, with metrics on and its
 * history full, and what each registered process adds, read from the
 * daemon's own counts (issue 37: never from its resident size, which
 * depends on the allocator and the machine's load; bench/footprint.py
 * measures that): the sample history's heap (gprofd_metrics_history_bytes,
 * in each JSON line), what connections and the registry hold (the status
 * reply's conn_bytes, proc_bytes).
 *
 * Two daemons run side by side with the defaults except the sampling
 * interval: 100 ms with a 30 s history holds the 300 samples the defaults
 * (1 s, 300 s) hold, and fills in 30 s instead of 5 minutes. One is idle;
 * the other has 1,000 registered agent processes (real, forked), whose
 * step series are in every sample. Each samples into a JSON lines file,
 * whose lines say how many samples it has taken: the test waits for 300
 * of each, never for a time.
 *
 * What must hold: the idle daemon's history at most 512 KiB full; at most
 * 2 KB more per registered process (its connection, its registry entry,
 * its step series in 300 samples); and after a metrics query for the whole
 * history (the largest reply there is), nothing of it held: the
 * connections back at what they held before.
 *
 * Reported as skipped (exit 77) when the daemon runs under a wrapper
 * (valgrind): 1,000 agents and a 100 ms sampling interval are sized for
 * a daemon that runs at full speed.
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
#define IDLE_MAX_BYTES (512 * 1024)
#define PER_PROCESS_MAX 2048 /* bytes */

static struct td idle, busy;
static char dir[64];

static double mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A counter of the daemon on sock (its status reply), or -1. */
static double counter(const char *sock, const char *name)
{
	struct msg m, r;
	double v = -1;
	struct tc c;
	size_t i;

	tc_ctl(&c, sock);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&c, &m, &r);
	for (i = 0; i < r.u.daemon_status_reply.counters.n; i++)
		if (strcmp(r.u.daemon_status_reply.counters.names[i], name) == 0)
			v = r.u.daemon_status_reply.counters.values[i];
	msg_deinit(&r);
	tc_close(&c);
	if (v < 0)
		fail_msg("the status reply has no counter %s", name);
	return v;
}

/* gprofd_metrics_history_bytes in the last sample of a JSON lines file. */
static double history_bytes(const char *path)
{
	static const char key[] = "\"gprofd_metrics_history_bytes\":";
	char *buf = NULL, *p, *last = NULL;
	size_t cap = 0;
	double v = -1;
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	while (getline(&buf, &cap, f) > 0)
		if ((p = strstr(buf, key)) != NULL)
			v = strtod(p + sizeof(key) - 1, &last);
	free(buf);
	fclose(f);
	if (v < 0)
		fail_msg("%s: no gprofd_metrics_history_bytes in its samples", path);
	return v;
}

/* What the daemon on sock counts it holds: its history, its connections
 * (less the one asking), its registered processes. */
static double held(const char *sock, const char *jsonl)
{
	return history_bytes(jsonl) + counter(sock, "conn_bytes") + counter(sock, "proc_bytes");
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
	double idle_b, busy_b, per_process, conns0, hist0;
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
	idle_b = held(idle.sock, idle_jsonl);
	busy_b = held(busy.sock, busy_jsonl);
	per_process = (busy_b - idle_b) / PROCESSES;
	print_message("idle, %d samples kept: %.0f bytes held (history %.0f); with %d processes: "
	              "%.0f (%.0f bytes a process: connection %.0f, registry %.0f)\n", SAMPLES,
	              idle_b, history_bytes(idle_jsonl), PROCESSES, busy_b, per_process,
	              counter(busy.sock, "conn_bytes") / PROCESSES,
	              counter(busy.sock, "proc_bytes") / PROCESSES);
	assert_true(history_bytes(idle_jsonl) > 0 && counter(busy.sock, "proc_bytes") > 0);
	if (idle_b > IDLE_MAX_BYTES)
		fail_msg("an idle daemon holds %.0f bytes (at most %d)", idle_b, IDLE_MAX_BYTES);
	if (per_process >= PER_PROCESS_MAX)
		fail_msg("%.0f bytes a registered process (under %d)", per_process, PER_PROCESS_MAX);
	agents_stop(&a);

	/* the whole history asked for (the largest reply there is): once it
	 * is read and its connection closed, nothing of it is held */
	conns0 = counter(idle.sock, "conn_bytes");
	hist0 = history_bytes(idle_jsonl);
	tc_ctl(&c, idle.sock);
	msg_init(&m, MSG_METRICS_QUERY, 0);
	m.u.metrics_query.history_s = 30;
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_METRICS_REPLY);
	assert_true(r.u.metrics_reply.samples.n > 100);
	msg_deinit(&r);
	tc_close(&c);
	wait_samples(idle_jsonl, samples(idle_jsonl) + 2);
	print_message("after a metrics query of the whole history: connections %.0f bytes (%.0f "
	              "before), history %.0f (%.0f)\n", counter(idle.sock, "conn_bytes"), conns0,
	              history_bytes(idle_jsonl), hist0);
	assert_true(counter(idle.sock, "conn_bytes") == conns0);
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
		printf("skipped: the daemon runs under %s, too slow for 1,000 agents and 10 "
		       "samples a second\n", w);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
