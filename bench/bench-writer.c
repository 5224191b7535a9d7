/*
 * bench-writer: how fast the agent turns CUPTI records into the gzip'ed
 * Kineto trace (issue 4's target: >= 1,000,000 events/s on one core).
 *
 * It drives the agent's real gpu.c and writer.c (linked from the agent's
 * static core) with CUPTI replaced by tests/integration/fake_cupti.c, loaded through
 * the agent's own GPROF_CUPTI_PATH path: per launch one runtime API record
 * and its kernel (8 in 10), copy or set, i.e. four trace events with the
 * flow arrows. Only writer_write is timed (thread CPU time and wall).
 *
 * usage: bench-writer [LAUNCHES [OUT.json.gz [REPEATS]]]
 * Prints one line per repeat and the medians. The CI check
 * (tests/integration/agent-writer.sh) runs it small and validates OUT.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

int InitializeInjection(void);

static double now_s(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 250000;
	const char *out = argc > 2 ? argv[2] : "/tmp/gprof-bench-writer.pt.trace.json.gz";
	int reps = argc > 3 ? atoi(argv[3]) : 5, r, fd;
	uint64_t (*emit)(uint64_t, uint64_t, uint64_t, int);
	double rate[64], cpu[64];
	char why[300];
	void *fake;

	if (reps < 1 || reps > 64)
		reps = 5;
	setenv("GPROF_CUPTI_PATH", FAKE_CUPTI_PATH, 1);
	InitializeInjection();
	fake = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
	emit = fake ? (uint64_t (*)(uint64_t, uint64_t, uint64_t, int))dlsym(fake, "fake_cupti_emit")
	            : NULL;
	if (emit == NULL) {
		fprintf(stderr, "bench-writer: cannot load %s: %s\n", FAKE_CUPTI_PATH, dlerror());
		return 2;
	}
	for (r = 0; r < reps; r++) {
		struct trace_result res = { 0 };
		uint64_t t0, recs;
		double c0, w0, c1, w1;

		memset(&A.win, 0, sizeof(A.win));
		snprintf(A.win.trace_id, sizeof(A.win.trace_id), "bench-%d", r);
		A.win.max_bytes = 16ull << 30;
		A.rank = 0;
		A.world_size = 1;
		atomic_fetch_add(&A.gen, 1);
		if (gpu_start(MSG_ACT_DEFAULT, A.win.max_bytes, why, sizeof(why)) < 0) {
			fprintf(stderr, "bench-writer: %s\n", why);
			return 2;
		}
		t0 = agent_now_ns();
		recs = emit(n, t0, 100000, (int)syscall(SYS_gettid));
		atomic_store(&A.t_start, t0);
		atomic_store(&A.t_end, t0 + n * 100000 + 1000000);
		atomic_store(&A.end_reason, END_DONE);
		gpu_stop();
		c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
		w0 = now_s(CLOCK_MONOTONIC);
		fd = open(out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || writer_write(fd, &res, why, sizeof(why)) < 0) {
			fprintf(stderr, "bench-writer: %s\n", fd < 0 ? strerror(errno) : why);
			return 1;
		}
		close(fd);
		c1 = now_s(CLOCK_THREAD_CPUTIME_ID);
		w1 = now_s(CLOCK_MONOTONIC);
		gpu_reset();
		rate[r] = (double)res.events / (c1 - c0);
		cpu[r] = c1 - c0;
		printf("repeat %d: %llu CUPTI records -> %llu events, %.1f MB gzip, %.3f s CPU "
		       "(%.3f s wall): %.0f events/s\n", r, (unsigned long long)recs,
		       (unsigned long long)res.events, (double)res.bytes / 1e6, c1 - c0, w1 - w0,
		       rate[r]);
	}
	qsort(rate, (size_t)reps, sizeof(rate[0]), cmp);
	qsort(cpu, (size_t)reps, sizeof(cpu[0]), cmp);
	printf("median: %.0f events/s on one core (%.3f s CPU per trace of %llu launches)\n",
	       rate[reps / 2], cpu[reps / 2], (unsigned long long)n);
	return 0;
}
