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
 * says so. The client's struct kclient (kineto.c, its proc->be_data)
 * holds that state: pending, fallback (set only while an iteration config
 * is being offered), fallback_at_us and offers.
 *
 * Every pending datagram is drained on each wake-up (Dynolog handles one
 * per 10 ms, and 8 ranks polling at once time out). Clients silent for
 * kineto.expiry are forgotten. Malformed datagrams are dropped and counted.
 *
 * The capture back end. Kineto clients are registered with this file's
 * backend table (backend.h), through which the trace engine starts,
 * cancels and times out their parts (kineto_part_start: the config and a
 * file watch). A file Kineto wrote is compressed into the trace's
 * directory on the thread pool (kingest.c) and handed to deliver.c, which stores,
 * records and acknowledges it as it does an agent's upload.
 *
 * Ownership: the service's state is a struct kineto of kineto.c's own
 * (d->kineto), made by kineto_start and freed by kineto_free once the
 * loop has run out; it owns the socket, its poll handle, the expiry timer
 * and the list of file watches; a watch is freed in its handle's close
 * callback (or, with an ingest in flight, when that ends). A socket
 * systemd passed is the server's hand-off (d->kineto_passed, server.c). Each client's struct kclient is this file's,
 * freed when the registry forgets the process (the table's forget).
 *
 * Floor: a back end above trace, registry, store and deliver (it reports
 * into them like an upload does); nothing of the engine names it. Called
 * by main.c (start, stop), the engine through its backend table, and
 * libuv.
 */
#ifndef GPROFD_KINETO_H
#define GPROFD_KINETO_H

#include <stdbool.h>

#include "daemon.h"
#include "perr.h"

/* Serves the Kineto socket (kineto.enabled): 0, or -errno with err saying
 * why (a taken name, and who holds it). */
int kineto_start(struct daemon *d, struct perr *err);
/* Closes the socket and every file watch; what Kineto wrote for traces
 * still running goes. */
void kineto_stop(struct daemon *d);

/* Frees the service (after the loop has run out; NULL-safe). */
void kineto_free(struct daemon *d);

/* Is the socket served? *passed: it is the one systemd passed. */
bool kineto_serving(struct daemon *d, bool *passed);

#endif
