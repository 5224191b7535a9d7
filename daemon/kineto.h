/*
 * kineto: serves stock PyTorch processes started with KINETO_USE_DAEMON=1
 * (shared/DYNOLOG_COMPAT.md section 2, proto/PROTOCOL.md section 8), so
 * they can be traced with no agent at all.
 *
 * Data flow: Kineto's client polls with a "req" datagram (every 5 s by
 * default) -> the sender is registered (or refreshed) in the registry as
 * kind kineto, identified by SCM_CREDENTIALS -> the reply carries the
 * on-demand config a trace left for it (never while it reports its
 * activity profiler busy), else nothing -> Kineto captures and writes its trace file into a
 * directory the daemon made for that process -> a file watch sees it
 * appear -> it is gzip-compressed into the trace store on the thread pool
 * -> the process is done, and gprofctl downloads it like any other.
 *
 * Iteration requests. Kineto captures by iterations only once it has
 * counted a step of the process (it counts from the first config it
 * receives on, and a process still setting up has not stepped); an
 * iteration config that arrives before then is captured by time instead,
 * silently, unless it carries no duration, in which case it is dropped.
 * So an iteration config goes out with ACTIVITIES_DURATION_MSECS=0 and is
 * offered again at every free poll (a copy Kineto already holds is ignored
 * by it) until the client reports itself busy (taken) or its file appears
 * (taken and done: Kineto renames the file into place before it reports
 * itself free). After kineto.step_wait (at most the trace's timeout less
 * 20 s, the time Kineto's fallback needs, but at least half the timeout)
 * the same config with Kineto's default 500 ms duration is handed over
 * once: a process that never steps gets a capture by time, and the status
 * says so. proc->pending, ->fallback (set only while an iteration config
 * is being offered), ->fallback_at_us and ->offers hold that state.
 *
 * Every pending datagram is drained on each wake-up (Dynolog handles one
 * per 10 ms, and 8 ranks polling at once time out). Clients silent for
 * kineto.expiry are forgotten. Malformed datagrams are dropped and counted.
 *
 * Ownership: the daemon owns the socket, its poll handle, the expiry timer
 * and the list of file watches (d->kwatches); a watch is freed in its
 * handle's close callback.
 *
 * Floor: an engine above trace, registry and store (it reports into
 * them like an upload does); the trace engine reaches it only through
 * d->hooks.kineto_capture and kineto_withdraw, which main.c points here.
 * Called by main.c (start, stop), the hooks, and libuv.
 */
#ifndef GPROFD_KINETO_H
#define GPROFD_KINETO_H

#include "daemon.h"
#include "perr.h"

struct proc;
struct trace;
struct tproc;

int kineto_start(struct daemon *d, struct perr *err);
void kineto_stop(struct daemon *d);

/* Leaves t's on-demand config for tp's Kineto client, to be handed over at
 * its next poll, and watches for the file it will write. */
void kineto_capture(struct daemon *d, struct trace *t, struct tproc *tp);

/* Withdraws p's config not yet handed over (and stops offering it). */
void kineto_withdraw(struct proc *p);

#endif
