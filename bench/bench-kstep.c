/*
 * bench-kstep: how fast gprofd's kstep_scan (daemon/kstep.c) reads a
 * Kineto trace file, which it does for every trace Kineto writes in daemon
 * mode before compressing it. A synthetic file like Kineto's (one kernel,
 * one runtime call and one CPU op per event triple, an Optimizer.step
 * annotation every STEP events) of SIZE MB is written to a temporary file
 * and scanned ROUNDS times from the page cache.
 * Prints the median and the slowest round as MB/s.
 * usage: bench-kstep [SIZE_MB (default 200)] [ROUNDS (default 7)]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kstep.h"

#define STEP 3000

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long mb = argc > 1 ? atol(argv[1]) : 200, rounds = argc > 2 ? atol(argv[2]) : 7, i;
	char path[] = "/tmp/bench-kstep-XXXXXX";
	int fd = mkstemp(path);
	FILE *f;
	long long ts = 1700000000000LL, bytes = 0, n = 0, steps = 0;
	double *t;

	if (fd < 0 || mb <= 0 || rounds <= 0 || (t = calloc((size_t)rounds, sizeof(*t))) == NULL) {
		fprintf(stderr, "usage: bench-kstep [SIZE_MB] [ROUNDS]\n");
		return 2;
	}
	unlink(path);
	f = fdopen(dup(fd), "w");
	bytes += fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n");
	while (bytes < mb * 1000000LL) {
		if (++n % STEP == 0) {
			bytes += fprintf(f, "  {\n    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
			                 "\"Optimizer.step#SGD.step\", \"pid\": 4242, \"tid\": 4242,\n    "
			                 "\"ts\": %lld.%03d, \"dur\": 850.125,\n    \"args\": {\n      "
			                 "\"External id\": %lld\n    }\n  },\n", ts / 1000, 125, n);
			steps++;
		}
		bytes += fprintf(f, "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
		                 "\"void at::native::vectorized_elementwise_kernel<4, "
		                 "at::native::CUDAFunctor_add<float>>(int, float*)\", \"pid\": 0, "
		                 "\"tid\": 7,\n    \"ts\": %lld.%03d, \"dur\": 3.200,\n    \"args\": {\n"
		                 "      \"External id\": %lld, \"device\": 0, \"stream\": 7, "
		                 "\"correlation\": %lld, \"registers per thread\": 32\n    }\n  },\n",
		                 ts / 1000, 250, n, n);
		bytes += fprintf(f, "  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": "
		                 "\"cudaLaunchKernel\", \"pid\": 4242, \"tid\": 4242,\n    \"ts\": "
		                 "%lld.%03d, \"dur\": 4.100,\n    \"args\": {\n      \"External id\": "
		                 "%lld, \"cbid\": 211, \"correlation\": %lld\n    }\n  },\n",
		                 ts / 1000, 500, n, n);
		bytes += fprintf(f, "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
		                 "\"aten::add\", \"pid\": 4242, \"tid\": 4242,\n    \"ts\": %lld.%03d, "
		                 "\"dur\": 9.000,\n    \"args\": {\n      \"External id\": %lld\n    }\n"
		                 "  },\n", ts / 1000, 750, n);
		ts += 10000;
	}
	bytes += fprintf(f, "  {\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", "
	                 "\"pid\": \"\", \"tid\": \"\", \"ts\": %lld.000}\n  ]\n}\n", ts / 1000);
	fclose(f);
	for (i = 0; i < rounds; i++) {
		struct kstep ks;
		double t0 = now_s();

		lseek(fd, 0, SEEK_SET);
		if (kstep_scan(fd, 4242, &ks) != 0 || ks.optimizer_steps != steps || ks.made != steps) {
			fprintf(stderr, "bench-kstep: scan found %lld of %lld steps\n",
			        (long long)ks.optimizer_steps, steps);
			return 1;
		}
		t[i] = now_s() - t0;
		kstep_free(&ks);
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp_d);
	printf("kstep_scan: %.1f MB file, %lld events, %lld optimizer steps: median %.0f MB/s "
	       "(%.3f s), slowest %.0f MB/s, %ld rounds\n", (double)bytes / 1e6, n * 3 + steps, steps,
	       (double)bytes / 1e6 / t[rounds / 2], t[rounds / 2], (double)bytes / 1e6 / t[rounds - 1],
	       rounds);
	free(t);
	close(fd);
	return 0;
}
