/*
 * kineto: serves stock PyTorch processes started with KINETO_USE_DAEMON=1
 * (shared/DYNOLOG_COMPAT.md section 2, proto/PROTOCOL.md section 8), so
 * they can be traced with no agent at all.
 *
 * Data flow: Kineto's client polls with a "req" datagram (every 5 s by
 * default) -> the sender is registered (or refreshed) in the registry as
 * kind kineto, identified by SCM_CREDENTIALS -> the reply carries the
 * on-demand config a trace left for it (one-shot, never while it reports
 * busy), else nothing -> Kineto captures and writes its trace file into a
 * directory the daemon made for that process -> a file watch sees it
 * appear -> it is gzip-compressed into the trace store on the thread pool
 * -> the process is done, and gprofctl downloads it like any other.
 *
 * Kineto initializes its profiler lazily, at the first config it takes,
 * and until then it drops the process's step reports: an iteration request
 * to a never-traced process would silently be captured by time instead
 * (docs/gpu-validation.md). So the first iteration request to a process is
 * preceded by a priming config: a 1 ms capture into prime_<pid>.pt.trace.json,
 * which is deleted when it appears; the real config follows at the next poll.
 *
 * Every pending datagram is drained on each wake-up (Dynolog handles one
 * per 10 ms, and 8 ranks polling at once time out). Clients silent for
 * kineto.expiry are forgotten. Malformed datagrams are dropped and counted.
 *
 * Ownership: the daemon owns the socket, its poll handle, the expiry timer
 * and the list of file watches (d->kwatches); a watch is freed in its
 * handle's close callback.
 */
#ifndef GPROFD_KINETO_H
#define GPROFD_KINETO_H

#include "daemon.h"
#include "perr.h"

struct trace;
struct tproc;

int kineto_start(struct daemon *d, struct perr *err);
void kineto_stop(struct daemon *d);

/* Leaves t's on-demand config for tp's Kineto client, to be handed over at
 * its next poll, and watches for the file it will write. */
void kineto_capture(struct daemon *d, struct trace *t, struct tproc *tp);

#endif
