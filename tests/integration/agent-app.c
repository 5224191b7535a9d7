/*
 * agent-app: the "training job" of the agent's CI test. Each iteration
 * opens nested NVTX ranges (forward > layer0, layer1; backward; a range in
 * a named domain with a registered string), puts a mark, spins ~1 ms of
 * CPU work, and calls gprof_step(). It is linked with libgprof_agent
 * (plain linking) and started with NVTX_INJECTION64_PATH pointing at the
 * same library, so both ways of loading meet in one instance.
 *
 * usage: agent-app STEPS   (0 = until stdin closes)
 * Prints "step N" every 100 iterations (so a test sees it make progress)
 * and "done CHECKSUM" at the end; nothing else, with or without agent.
 * With AGENT_APP_FORK set it first forks a child that runs 200 iterations
 * of the same loop (a DataLoader worker, say) and prints "child exit N".
 * With AGENT_APP_OUTER set each iteration is also inside a range "step"
 * that gprof_step() falls inside, as a training step wrapped in an NVTX
 * range with an optimizer hook counting iterations.
 * With AGENT_APP_BARRIER set it is one rank of a job kept in lockstep by
 * its launcher, as a collective would: after each step it prints "b N"
 * and waits for a line on stdin (EOF ends it); no "step N" lines.
 * With AGENT_APP_NO_STEP set it never calls gprof_step (an evaluation
 * helper: same ranges, no iterations).
 * With AGENT_APP_FLOOD=N it is instead N threads (the main one and N-1
 * more, at most 64) recording as fast as they can: nested NVTX ranges
 * with names that vary, marks, and gprof_step() on the main thread, so a
 * long window fills the agent's byte budget in a second. Each thread
 * notes the longest time between two of its iterations (a stall, be it a
 * wait or a CPU taken by another thread), and how long it was blocked in
 * all: wall time less its CPU time less its wait for a CPU (the kernel's
 * run_delay, /proc/thread-self/schedstat). These threads never block of
 * their own accord, so blocked time is time spent waiting on the agent (a
 * lock, the kernel's memory map lock), whatever the machine's load. On
 * stdin's close it prints
 * "done 0 iterations N max_stall_us US max_blocked_us US" and exits 0.
 * With AGENT_APP_DEEP set each iteration nests 200 ranges "deep 0".."deep
 * 199" (deeper than the agent tracks), then pops them one by one, putting
 * a mark "after deep K" after the pop that closes "deep K", and steps; it
 * runs until stdin closes.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "apputil.h"
#include "gprof_agent.h"

#ifdef HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#define PUSH(s) nvtxRangePushA(s)
#define POP() nvtxRangePop()
#define MARK(s) nvtxMarkA(s)
#else
#define PUSH(s) gprof_range_push(s)
#define POP() gprof_range_pop()
#define MARK(s) ((void)(s))
#endif

/* ---- AGENT_APP_FLOOD ---- */

#define FLOOD_MAX 64
static atomic_bool flood_stop;
static atomic_uint_fast64_t flood_iters, flood_stall_us, flood_blocked_us;

/* Raises *m to v. */
static void atomic_max(atomic_uint_fast64_t *m, uint64_t v)
{
	uint64_t seen = atomic_load(m);

	while (v > seen && !atomic_compare_exchange_weak(m, &seen, v))
		;
}

/* This thread's wall, CPU and run-queue wait times (us); run_delay is
 * UINT64_MAX when the kernel does not say. */
static void times_us(uint64_t *wall, uint64_t *cpu, uint64_t *delay)
{
	struct timespec ts;
	unsigned long long on = 0, wait = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	clock_gettime(CLOCK_MONOTONIC, &ts);
	*wall = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	*cpu = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	*delay = UINT64_MAX;
	if (f != NULL) {
		if (fscanf(f, "%llu %llu", &on, &wait) == 2)
			*delay = wait / 1000u;
		fclose(f);
	}
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* One flooding thread; k == 0 is the main thread, which also steps and
 * watches stdin. */
static void *flood(void *arg)
{
	int k = (int)(intptr_t)arg;
	uint64_t prev = mono_us(), now, worst = 0, n;
	uint64_t wall0, cpu0, delay0, wall1, cpu1, delay1;
	char name[64];

	times_us(&wall0, &cpu0, &delay0);

	for (n = 0; !atomic_load_explicit(&flood_stop, memory_order_relaxed); n++) {
		snprintf(name, sizeof(name), "flood thread %d op %llu", k,
		         (unsigned long long)(n % 997));
		PUSH(name);
		PUSH("inner");
		POP();
		POP();
		if (n % 16 == 0)
			MARK("tick");
		if (k == 0 && n % 64 == 0)
			gprof_step();
		if (k == 0 && n % 4096 == 0 && stdin_closed())
			atomic_store(&flood_stop, true);
		now = mono_us();
		if (now - prev > worst)
			worst = now - prev;
		prev = now;
	}
	times_us(&wall1, &cpu1, &delay1);
	atomic_fetch_add(&flood_iters, n);
	atomic_max(&flood_stall_us, worst);
	if (delay0 == UINT64_MAX || delay1 == UINT64_MAX)
		atomic_store(&flood_blocked_us, UINT64_MAX); /* unknown: the test says so */
	else if (wall1 - wall0 > cpu1 - cpu0 + (delay1 - delay0))
		atomic_max(&flood_blocked_us, wall1 - wall0 - (cpu1 - cpu0) - (delay1 - delay0));
	return NULL;
}

static int flood_main(int threads)
{
	pthread_t t[FLOOD_MAX];
	int i, n = 0;

	if (threads > FLOOD_MAX)
		threads = FLOOD_MAX;
	for (i = 1; i < threads; i++)
		if (pthread_create(&t[n], NULL, flood, (void *)(intptr_t)i) == 0)
			n++;
	printf("ready %d\n", n + 1);
	flood((void *)0);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("done 0 iterations %llu max_stall_us %llu max_blocked_us %lld\n",
	       (unsigned long long)atomic_load(&flood_iters),
	       (unsigned long long)atomic_load(&flood_stall_us),
	       atomic_load(&flood_blocked_us) == UINT64_MAX ? -1ll :
	       (long long)atomic_load(&flood_blocked_us));
	return 0;
}

/* AGENT_APP_DEEP: nesting past the agent's depth limit */
static int deep_main(void)
{
	char name[32];
	long n;
	int k;

	printf("ready deep\n");
	for (n = 1; !(n % 16 == 0 && stdin_closed()); n++) {
		for (k = 0; k < 200; k++) {
			snprintf(name, sizeof(name), "deep %d", k);
			PUSH(name);
		}
		for (k = 199; k >= 0; k--) {
			POP();
			snprintf(name, sizeof(name), "after deep %d", k);
			MARK(name);
		}
		gprof_step();
	}
	printf("done 0\n");
	return 0;
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 0, n;
	int outer = getenv("AGENT_APP_OUTER") != NULL;
	int barrier = getenv("AGENT_APP_BARRIER") != NULL;
	int nostep = getenv("AGENT_APP_NO_STEP") != NULL;
	uint64_t sum = 0, x = 1;
#ifdef HAVE_NVTX
	nvtxDomainHandle_t dom = nvtxDomainCreateA("app");
	nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "optimizer");
	nvtxEventAttributes_t at = { 0 };

	at.version = NVTX_VERSION;
	at.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	at.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	at.message.registered = reg;
	nvtxNameOsThreadA(0, "trainer");
#endif
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getenv("AGENT_APP_FLOOD"))
		return flood_main(atoi(getenv("AGENT_APP_FLOOD")));
	if (getenv("AGENT_APP_DEEP"))
		return deep_main();
	if (getenv("AGENT_APP_FORK")) {
		pid_t child = fork();
		int st = -1;

		if (child == 0) {
			for (n = 0; n < 200; n++) {
				PUSH("child work");
				x = spin(x, 50);
				POP();
				gprof_step();
			}
			_exit(0);
		}
		waitpid(child, &st, 0);
		printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	for (n = 1; steps == 0 || n <= steps; n++) {
		if (outer)
			PUSH("step");
		PUSH("forward");
		PUSH("layer0");
		x = spin(x, 200);
		POP();
		PUSH("layer1");
		x = spin(x, 200);
		POP();
		POP();
		PUSH("backward");
		x = spin(x, 300);
		POP();
#ifdef HAVE_NVTX
		nvtxDomainRangePushEx(dom, &at);
		x = spin(x, 100);
		nvtxDomainRangePop(dom);
		nvtxMarkA("step end");
#endif
		sum += x & 0xff;
		if (!nostep)
			gprof_step();
		if (outer) {
			x = spin(x, 50);
			POP();
		}
		if (barrier) {
			char line[16];

			printf("b %ld\n", n);
			if (fgets(line, sizeof(line), stdin) == NULL)
				break;
			continue;
		}
		if (n % 100 == 0) {
			printf("step %ld\n", n);
			if (steps == 0 && stdin_closed())
				break;
		}
	}
	printf("done %llu\n", (unsigned long long)(steps ? sum : 0));
	return 0;
}
