/*
 * clock: see clock.h. Called from every floor (main.c at start, the
 * registry, traces, the store, Kineto clients, handlers).
 */
#include <stddef.h>
#include <sys/time.h>

#include "clock.h"

int64_t clock_now_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}
