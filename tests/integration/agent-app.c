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
 */
#include <poll.h>
#include <stdint.h>
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
#else
#define PUSH(s) gprof_range_push(s)
#define POP() gprof_range_pop()
#endif

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
