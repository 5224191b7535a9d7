/*
 * apputil.h: the two helpers the agent's test programs (agent-app.c,
 * stress-app.c) share: deterministic CPU work and "has stdin closed".
 */
#ifndef GPROF_TEST_APPUTIL_H
#define GPROF_TEST_APPUTIL_H

#include <poll.h>
#include <stdint.h>
#include <unistd.h>

/* About us microseconds of CPU work whose result does not depend on
 * timing, so a run with the agent can be compared with one without. */
static inline uint64_t spin(uint64_t x, long us)
{
	for (long i = 0; i < us * 300; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

/* Whether the driving test closed our stdin (its way of saying stop). */
static inline int stdin_closed(void)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };
	char c;

	return poll(&p, 1, 0) > 0 && read(0, &c, 1) <= 0;
}

#endif
