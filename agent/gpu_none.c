/*
 * gpu_none.c: built instead of gpu.c where the CUPTI headers are absent
 * (no CUDA toolkit at build time). The agent runs CPU-only: NVTX ranges,
 * marks and iterations, and says so when it registers. It stands in for
 * gpu.h, gpu_events.h and gpu_meta.h, for the same callers.
 */
#include <stdio.h>

#include "gpu.h"
#include "gpu_events.h"
#include "gpu_meta.h"
#include "tw.h"

bool gpu_usable(char *why, size_t n)
{
	snprintf(why, n, "built without CUPTI");
	return false;
}

int gpu_start(int64_t activities, uint64_t max_bytes, char *why, size_t n)
{
	(void)activities;
	(void)max_bytes;
	snprintf(why, n, "built without CUPTI");
	return -1;
}

void gpu_left_out(char *buf, size_t n)
{
	if (n > 0)
		buf[0] = '\0';
}

void gpu_stop(void) {}
uint64_t gpu_dropped(void) { return 0; }
bool gpu_cut(void) { return false; }
void gpu_shed(void) { }
void gpu_write(struct tw *w, uint64_t t0, uint64_t t1)
{
	(void)w;
	(void)t0;
	(void)t1;
}
void gpu_write_devices(struct tw *w) { (void)w; }
void gpu_write_meta(struct tw *w) { (void)w; }
void gpu_reset(void) {}
void gpu_atfork_child(void) {}
