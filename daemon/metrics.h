/*
 * metrics.h: always-on host, GPU and process metrics (metrics.c has the
 * data flow), exported over HTTP for Prometheus, as JSON lines, and to
 * gprofctl through metrics_query.
 *
 * An opaque object: struct metrics is defined in metrics.c only;
 * metrics_start is its constructor (it sets d->metrics), metrics_stop its
 * destructor (d->metrics is NULL after); every other call takes the daemon
 * and finds it there (NULL: metrics off; a query is told so). Its parts are
 * files of their own below it: mset.c (a sample set), mhist.c (history),
 * mhost.c (host figures), mgpu.c (NVML).
 *
 * Floor: an engine above the registry (it reads struct proc). Called by
 * main.c (start, stop), hagent.c (step values), hinfo.c (metrics_query),
 * and, through d->hooks.proc_gone, the registry (a process gone).
 */
#ifndef GPROFD_METRICS_H
#define GPROFD_METRICS_H

#include "msg.h"
#include "perr.h"

struct daemon;
struct conn;
struct proc;

/* Starts sampling (first sample at once) and the HTTP endpoint (unless
 * metrics: off). 0, or a negative code with err saying what to change. */
int metrics_start(struct daemon *d, struct perr *err);
/* Stops the HTTP and sampling threads (a cycle in progress ends first) and
 * frees everything. */
void metrics_stop(struct daemon *d);
/* The loop tells the sampler an agent's step values (registration,
 * heartbeat) and that it is gone; cheap, under a lock. */
void metrics_proc_update(struct daemon *d, struct proc *p);
void metrics_proc_gone(struct daemon *d, struct proc *p);
/* The port /metrics is served on (0 when off). */
int metrics_http_port(struct daemon *d);
/* Answers a metrics_query on c, whose peer decides which process values
 * it may see. */
void metrics_query(struct daemon *d, struct conn *c, const struct msg *q);

#endif
