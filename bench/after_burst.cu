/*
 * after_burst.cu: the CUDA C loop of bench/after_burst.py (issue 24: a job
 * gets its speed back after a burst). Each step: LAUNCHES x (cudaGetDevice,
 * an empty kernel's launch, cudaGetLastError), a stream synchronize, then
 * gprof_step() (the agent's step counter, so `gprofctl trace --iterations`
 * works). Prints "trigger" on stdout at step TRIGGER (the driver then asks
 * for a capture; the loop does not wait for it) and, at the end, one JSON
 * line with every step's duration in ns, and the step at which the driver
 * said (a line on stdin) that the capture was over; then waits for stdin's
 * end. Built on the dev machine by tests/gpu/prepare.sh, linked with the
 * agent for gprof_step.
 *
 *   after_burst BEFORE AFTER [LAUNCHES]     (LAUNCHES default 20)
 * runs BEFORE steps, prints "trigger", runs on until the driver's line came
 * and then AFTER steps more.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	static std::atomic<bool> over(false);
	int before = argc > 1 ? atoi(argv[1]) : 2000, after = argc > 2 ? atoi(argv[2]) : 2000;
	int launches = argc > 3 ? atoi(argv[3]) : 20, dev, i, s, over_at = -1;
	std::vector<uint64_t> dur;
	cudaStream_t st;

	if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
		fprintf(stderr, "after_burst: no CUDA device\n");
		return 1;
	}
	for (i = 0; i < 200; i++) /* module loading, first launches */
		empty<<<1, 32, 0, st>>>(NULL);
	cudaStreamSynchronize(st);
	std::thread([] { char c; while (read(0, &c, 1) == 1 && c != '\n') ; over = true; }).detach();
	printf("ready\n");
	fflush(stdout);
	for (s = 0; over_at < 0 || s < over_at + after; s++) {
		uint64_t t0 = now_ns();

		if (s == before) {
			printf("trigger\n");
			fflush(stdout);
		}
		if (s > before && over_at < 0 && over.load())
			over_at = s;
		for (i = 0; i < launches; i++) {
			cudaGetDevice(&dev);
			empty<<<1, 32, 0, st>>>(NULL);
			cudaGetLastError();
		}
		cudaStreamSynchronize(st);
		gprof_step();
		dur.push_back(now_ns() - t0);
	}
	printf("{\"over_at\": %d, \"steps_ns\": [", over_at);
	for (s = 0; s < (int)dur.size(); s++)
		printf("%s%llu", s ? "," : "", (unsigned long long)dur[s]);
	printf("]}\n");
	fflush(stdout);
	return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
