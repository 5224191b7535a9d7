/*
 * kstep.h: ProfilerStep#<n> events for Kineto's daemon-mode traces, made
 * from their Optimizer.step annotations (kstep.c says how and why).
 *
 * Floor: a leaf (pure functions on a trace file's text). Called by
 * kineto.c when it collects a Kineto trace, by bench-kstep and test-kstep.
 */
#ifndef GPROF_KSTEP_H
#define GPROF_KSTEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kstep {
	int64_t optimizer_steps; /* Optimizer.step# annotations of the process */
	int64_t made;            /* ProfilerStep# events in `events` */
	bool has_steps;          /* the file has ProfilerStep# of its own */
	uint64_t insert_at;      /* byte offset just past "traceEvents": [ ; 0 = not found */
	char *events;            /* JSON events, each followed by ",\n" (owned) */
	size_t len;
};

/* Reads fd from its current offset to EOF. 0, or -ENOMEM, -E2BIG (more
 * than 100,000 steps) or a read error; ks is filled either way and must
 * be kstep_free'd. */
int kstep_scan(int fd, int64_t pid, struct kstep *ks);
void kstep_free(struct kstep *ks);

#endif
