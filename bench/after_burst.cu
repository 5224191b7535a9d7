/*
 * after_burst.cu: the CUDA C loop of bench/after_burst.py (issue 24: a job
 * gets its speed back after a burst). Each step: LAUNCHES x (cudaGetDevice,
 * an empty kernel's launch, cudaGetLastError), a stream synchronize, then
 * gprof_step() (the agent's step counter, so `gprofctl trace --iterations`
 * works). Built on the dev machine by tests/gpu/prepare.sh, linked with the
 * agent for gprof_step.
 *
 *   after_burst BEFORE AFTER [LAUNCHES [BLOCK]]   (LAUNCHES default 20)
 *
 * Prints "ready" after its warm-up. Then, with BLOCK 0 (free running): waits
 * for a line ("go"), times its steps, prints "trigger" at step BEFORE (the
 * driver asks for a capture; the loop does not wait for it), and runs on
 * until a second line ("over", read by a thread) came and AFTER steps more.
 * With BLOCK > 0 (taking turns with a partner process): each "go" line runs
 * BLOCK steps and answers "yield"; an "over" line between two makes the
 * next step the first after the capture; it ends at a block's end once
 * AFTER steps followed it. Last, one JSON line: every step's duration in
 * ns, the step at which "over" took effect, and (free running) the wall
 * clock at the first step; then it waits for stdin's end.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <atomic>
#include <thread>
#include <unistd.h>
#include <vector>

#include "gprof_agent.h"

__global__ void empty(int *p)
{
	if (p != NULL && threadIdx.x == 1024)
		*p = 1;
}

static uint64_t now_ns(clockid_t clk)
{
	struct timespec t;

	clock_gettime(clk, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* One line from stdin into buf (without its newline); false at its end. */
static bool read_line(char *buf, size_t n)
{
	size_t k = 0;
	char c;

	while (read(0, &c, 1) == 1) {
		if (c == '\n') {
			buf[k] = '\0';
			return true;
		}
		if (k + 1 < n)
			buf[k++] = c;
	}
	return false;
}

struct loop {
	cudaStream_t st;
	int launches;
	std::vector<uint64_t> dur;
};

static void step(struct loop *l)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	int dev;

	for (int i = 0; i < l->launches; i++) {
		cudaGetDevice(&dev);
		empty<<<1, 32, 0, l->st>>>(NULL);
		cudaGetLastError();
	}
	cudaStreamSynchronize(l->st);
	gprof_step();
	l->dur.push_back(now_ns(CLOCK_MONOTONIC) - t0);
}

static void trigger(void)
{
	printf("trigger\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static std::atomic<bool> over(false);
	int before = argc > 1 ? atoi(argv[1]) : 2000, after = argc > 2 ? atoi(argv[2]) : 2000;
	int block = argc > 4 ? atoi(argv[4]) : 0, s = 0, over_at = -1;
	uint64_t t0_ns = 0;
	struct loop l;
	char line[64];

	l.launches = argc > 3 ? atoi(argv[3]) : 20;
	if (cudaStreamCreateWithFlags(&l.st, cudaStreamNonBlocking) != cudaSuccess) {
		fprintf(stderr, "after_burst: no CUDA device\n");
		return 1;
	}
	for (int i = 0; i < 200; i++) /* module loading, first launches */
		empty<<<1, 32, 0, l.st>>>(NULL);
	cudaStreamSynchronize(l.st);
	printf("ready\n");
	fflush(stdout);
	if (block <= 0) {
		read_line(line, sizeof(line)); /* "go": the round's processes start together */
		std::thread([] { char b[64]; read_line(b, sizeof(b)); over = true; }).detach();
		t0_ns = now_ns(CLOCK_REALTIME);
		for (; over_at < 0 || s < over_at + after; s++) {
			if (s == before)
				trigger();
			if (s > before && over_at < 0 && over.load())
				over_at = s;
			step(&l);
		}
	} else {
		bool said_over = false;

		while (read_line(line, sizeof(line))) {
			if (strcmp(line, "over") == 0) {
				said_over = true;
				continue;
			}
			if (strcmp(line, "go") != 0)
				break;
			for (int i = 0; i < block; i++, s++) {
				if (s == before)
					trigger();
				if (s > before && over_at < 0 && said_over)
					over_at = s;
				step(&l);
			}
			if (over_at >= 0 && s >= over_at + after)
				break;
			if (over_at < 0 && s > before + 50 * after)
				break; /* the capture never ended: no result rather than no end */
			printf("yield\n");
			fflush(stdout);
		}
	}
	printf("{\"over_at\": %d, \"block\": %d, \"t0_ns\": %llu, \"steps_ns\": [", over_at, block,
	       (unsigned long long)t0_ns);
	for (size_t i = 0; i < l.dur.size(); i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)l.dur[i]);
	printf("]}\n");
	fflush(stdout);
	while (read(0, line, sizeof(line)) > 0) /* the driver closes stdin once it has the line */
		;
	return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
