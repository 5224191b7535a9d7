/*
 * state.c: the one struct agent (A) and the leaves of the agent (state.h):
 * the clock, the log, the wake-up of the agent thread. Called from every
 * file, on any thread; it calls nothing of the agent's.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state.h"

struct agent A = {
	.rank = -1, .local_rank = -1, .world_size = -1,
	.wake_fd = -1,
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -2; /* -2: not opened yet, -1: no log */

uint64_t agent_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Log lines go only to $GPROF_AGENT_LOG, never to the host's stdio. */
void agent_note_add(char *note, size_t cap, const char *fmt, va_list ap)
{
	size_t n = strlen(note);

	if (n + 3 >= cap)
		return;
	if (n > 0) {
		memcpy(note + n, "; ", 3);
		n += 2;
	}
	vsnprintf(note + n, cap - n, fmt, ap);
}

void agent_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	pthread_mutex_lock(&log_lock);
	if (log_fd == -2) {
		const char *p = getenv("GPROF_AGENT_LOG");

		log_fd = p && *p ? open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
	}
	if (log_fd >= 0) {
		n = snprintf(line, sizeof(line), "gprof_agent[%d]: ", (int)getpid());
		va_start(ap, fmt);
		n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
		va_end(ap);
		if (n > (int)sizeof(line) - 2)
			n = (int)sizeof(line) - 2;
		line[n++] = '\n';
		if (write(log_fd, line, (size_t)n) < 0) {
			/* nowhere else to say it */
		}
	}
	pthread_mutex_unlock(&log_lock);
}

void agent_wake(void)
{
	uint64_t one = 1;

	if (A.wake_fd >= 0 && write(A.wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the agent thread is awake anyway */
	}
}
