/*
 * stress-app: the traced program of the agent's stress test
 * (test-stress.py), a loop much faster than a training step: each
 * iteration (~20,000 a second on one core) is an NVTX range "it" holding
 * four CUDA calls and some CPU work, then gprof_step(). So duration bursts, iteration bursts and
 * NVTX-range iteration bursts all have something to count.
 *
 * With STRESS_FAKE_CUDA=1 it plays a CUDA program against the stand-in
 * libcupti named by GPROF_CUPTI_PATH (tests/integration/fake_cupti.c): it calls
 * InitializeInjection() as the CUDA driver would, and each "CUDA call" is
 * fake_cuda_call(), which runs CUPTI's callbacks and writes activity
 * records on this thread. The stand-in aborts the process if the agent
 * breaks one of CUPTI's rules, so a rule broken is a dead program.
 * Without it the program is NVTX-only, as on a host with no GPU.
 *
 * STRESS_GRAPHS=1 (stand-in only) makes the main loop's first call of each
 * iteration a CUDA graph launch (fake_cuda_graph_launch), as a
 * torch.compile(mode="reduce-overhead") step replays its graphs.
 *
 * STRESS_THREADS=N (stand-in only) adds N-1 threads making CUDA calls in
 * their own loop, as PyTorch's autograd and NCCL threads do beside the
 * training loop; "ready" comes once each has made its first call, and each
 * iteration of the main loop begins only after every one of them made a
 * call since the last began (side_wait).
 *
 * Runs until stdin closes, then prints
 *   "done ITERATIONS max_stall_us US sessions S finalizes F records R"
 * (the longest time between two iteration starts, and the stand-in's
 * counts) and exits 0.
 */
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "apputil.h"
#include "gprof_agent.h"

int InitializeInjection(void);

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void (*call)(int);
static void (*graph_launch)(int);
static atomic_bool stopping;
/* "ready" waits until every side thread has made its first CUDA call: a
 * request that came before (on a loaded machine, before they ever ran)
 * saw one thread calling CUDA, and the finalize test's premise, a second
 * thread in CUDA, did not hold yet (issue 29) */
static pthread_barrier_t started;

/* Each side thread's calls so far. The main loop starts an iteration only
 * once every side thread made a call since the last one began, so any
 * stretch of two main iterations holds a call of every thread: on a loaded
 * machine a side thread could otherwise sit unscheduled through a whole
 * burst, and a burst that saw one thread's calls only would make the
 * finalize test's premise (a second thread in CUDA, seen by the agent)
 * false (one CI run: finalized once with three threads). */
static atomic_ulong side_calls[8];

/* another thread that calls CUDA (STRESS_THREADS) */
static void *side_thread(void *arg)
{
	uint64_t x = (uint64_t)(uintptr_t)arg | 1;
	atomic_ulong *mine = &side_calls[(uintptr_t)arg - 1];

	call(3);
	atomic_fetch_add(mine, 1);
	pthread_barrier_wait(&started);
	while (!atomic_load(&stopping)) {
		call(3); /* on a stream of its own */
		atomic_fetch_add(mine, 1);
		x = spin(x, 12);
	}
	return (void *)(uintptr_t)(x & 1);
}

/* Waits (yielding) until every side thread called since seen[] was read. */
static void side_wait(int nside, unsigned long *seen)
{
	for (int i = 0; i < nside; i++) {
		unsigned long now;

		while ((now = atomic_load(&side_calls[i])) == seen[i])
			sched_yield();
		seen[i] = now;
	}
}

int main(void)
{
	void (*stats)(unsigned long *, unsigned long *, unsigned long *) = NULL;
	unsigned long sessions = 0, finalizes = 0, records = 0;
	uint64_t n, x = 1, prev = 0, stall = 0;
	unsigned long seen[8] = { 0 };
	const char *fake = getenv("STRESS_FAKE_CUDA");
	pthread_t side[8];
	int nside;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fake && *fake && strcmp(fake, "0") != 0) {
		const char *path = getenv("GPROF_CUPTI_PATH");
		void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;

		if (h == NULL) {
			fprintf(stderr, "stress-app: STRESS_FAKE_CUDA needs GPROF_CUPTI_PATH: %s\n",
			        dlerror());
			return 2;
		}
		call = (void (*)(int))dlsym(h, "fake_cuda_call");
		stats = (void (*)(unsigned long *, unsigned long *, unsigned long *))
		        dlsym(h, "fake_cupti_stats");
		if (getenv("STRESS_GRAPHS") && strcmp(getenv("STRESS_GRAPHS"), "1") == 0)
			graph_launch = (void (*)(int))dlsym(h, "fake_cuda_graph_launch");
		if (call == NULL || stats == NULL) {
			fprintf(stderr, "stress-app: %s is not the stand-in libcupti\n", path);
			return 2;
		}
		InitializeInjection(); /* as cuInit does with CUDA_INJECTION64_PATH */
	}
	nside = getenv("STRESS_THREADS") ? atoi(getenv("STRESS_THREADS")) - 1 : 0;
	if (nside < 0 || nside > 8 || (nside > 0 && call == NULL)) {
		fprintf(stderr, "stress-app: STRESS_THREADS is 1-9, with STRESS_FAKE_CUDA\n");
		return 2;
	}
	pthread_barrier_init(&started, NULL, (unsigned)nside + 1);
	for (int i = 0; i < nside; i++)
		if (pthread_create(&side[i], NULL, side_thread, (void *)(uintptr_t)(i + 1)) != 0) {
			fprintf(stderr, "stress-app: cannot start a thread\n");
			return 2;
		}
	pthread_barrier_wait(&started);
	printf("ready\n");
	for (n = 1;; n++) {
		uint64_t t;

		side_wait(nside, seen);
		t = mono_us();

		if (prev != 0 && t - prev > stall)
			stall = t - prev;
		prev = t;
		nvtxRangePushA("it");
		for (int k = 0; k < 3; k++) {
			if (k == 0 && graph_launch)
				graph_launch(k);
			else if (call)
				call(k);
			x = spin(x, 12);
		}
		if (call)
			call(-1); /* a synchronisation: launches nothing */
		x = spin(x, 12);
		nvtxRangePop();
		gprof_step();
		if (n % 1000 == 0 && stdin_closed())
			break;
	}
	atomic_store(&stopping, true);
	for (int i = 0; i < nside; i++)
		pthread_join(side[i], NULL);
	if (stats)
		stats(&sessions, &finalizes, &records);
	printf("done %llu max_stall_us %llu sessions %lu finalizes %lu records %lu (%llu)\n",
	       (unsigned long long)n, (unsigned long long)stall, sessions, finalizes, records,
	       (unsigned long long)(x & 1));
	return 0;
}
