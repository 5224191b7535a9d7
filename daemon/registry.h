/*
 * registry: the processes this host can trace.
 *
 * An agent's process is registered by its `register` message and lives
 * as long as its connection: bus.c calls registry_remove when the
 * session goes. A process that registers by no message (a Kineto client,
 * issue 7) is added by its back end (registry_add_client), which removes
 * it when it falls silent. Each proc names its capture back end (p->be,
 * backend.h); the registry names none. Either is dropped sooner
 * when its pid is claimed by another process (registry_find_live): a pid
 * names a process only while that process lives.
 *
 * Ownership: the registry owns every struct proc (d->procs, a doubly
 * linked list) and its strings. A proc's `conn` is a borrowed pointer that
 * is valid for the proc's whole life; its `ref` is its session's pointer
 * to it, which registry_remove clears. Traces hold procs only weakly: the
 * trace module is told (trace_proc_gone, through d->hooks.proc_gone)
 * before a proc is freed.
 *
 * Floor: the lowest engine: it includes only conn.h (an agent's conn,
 * to know its process alive) and backend.h, and tells the floors above
 * that a process is gone through d->hooks.proc_gone. Called by hagent.c (register),
 * bus.c (a session gone), kineto.c, trace.c (matching), hinfo.c and
 * metrics.c (reading).
 */
#ifndef GPROFD_REGISTRY_H
#define GPROFD_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "daemon.h"
#include "msg.h"

#define PROC_PPIDS_MAX 16
#define PROC_GPUS_MAX 16

struct proc {
	struct proc *next, *prev;
	pid_t pid;
	uid_t uid;
	int kind;                  /* MSG_KIND_* */
	int32_t ppids[PROC_PPIDS_MAX];
	int nppids;
	int32_t gpus[PROC_GPUS_MAX];
	int ngpus;
	char *job_id;              /* "" when none */
	char *host;
	char *version;
	char *name;
	int64_t rank, local_rank, world_size;
	int64_t caps;
	int64_t registered_us;
	unsigned long long start_time; /* of the process pid was when it registered
	                                  (peer_start_time); 0 if unknown */
	int64_t steps, last_step_us, median_step_us; /* last_step_us: its duration */
	int64_t heartbeat_us;      /* when the last heartbeat (and steps) came */
	struct conn *conn;         /* agents: their connection (transport, conn.h) */
	struct proc **ref;         /* agents: their session's pointer to this proc,
	                            * cleared when the registry removes it */
	struct trace *busy;        /* the trace capturing it now, if any */
	size_t mslot;              /* metrics.c's slot for its step values, + 1 */
	size_t bytes;              /* what it holds, as counted in proc_bytes */
	const struct backend *be;  /* how it is captured (backend.h); never NULL */
	void *be_data;             /* its back end's own state for it (owned by the
	                            * back end, freed by be->forget) */
};

/* Adds a process from a validated `register` message, captured through
 * be. pid and uid come from the connection's credentials. 0, -ENOSPC
 * (limits.processes), -EEXIST (that pid is already registered on another
 * connection), -ENOMEM. */
int registry_add(struct daemon *d, const struct backend *be, struct conn *c, pid_t pid,
                 uid_t uid, const struct msg_register *r, struct proc **out);

/* The process registered as pid, if it is still the process that
 * registered, as the kernel says the process with that pid now is of uid:
 * a registration whose process has exited (its connection handed to a
 * child that lives on, a Kineto client gone silent) while a new process
 * took the pid is dropped here (its connection stays open, unregistered),
 * and NULL returned. */
struct proc *registry_find_live(struct daemon *d, pid_t pid, uid_t uid);

/* Removes and frees p: clears *p->ref, tells the floors above
 * (d->hooks.proc_gone: traces, metrics), then its back end (be->forget),
 * and frees it. */
void registry_remove(struct daemon *d, struct proc *p);

/* Adds a process that registers by no message (a Kineto client seen
 * polling), captured through be: pid and uid from its credentials, its
 * job id and ancestors as its back end found them; its rank, local rank
 * and world size unknown (-1) until the back end sets them, its version
 * be->name. 0, -ENOSPC (limits.processes), -ENOMEM. */
int registry_add_client(struct daemon *d, const struct backend *be, pid_t pid, uid_t uid,
                        const char *job_id, const int32_t *ppids, int nppids,
                        struct proc **out);

struct proc *registry_find(struct daemon *d, pid_t pid);

/* Does p match a request for job_id (NULL = any) and pids (n = 0, or the
 * single pid 0, = any)? A pid matches p itself or any of its ancestors,
 * as Dynolog matches. */
bool registry_match(const struct proc *p, const char *job_id,
                    const int64_t *pids, size_t npids);

/* Is p a launcher (torchrun's elastic agent, mp.spawn's parent, a wrapper
 * that imported torch): another registered process of the same job
 * descends from it (p's pid is among its ancestors) and is a different
 * participant (another rank, or it has stepped), while p itself has never
 * stepped? A launcher never steps, so an iteration trace would wait on it
 * forever; traces leave it out (trace.c) and `gprofctl list` says so.
 * When true and kids is not NULL, "pids 12 13" (its descendants, up to
 * size bytes) is written there. Kineto clients report no steps: for them
 * only the rank tells (read from their environment). */
bool registry_launcher(struct daemon *d, const struct proc *p, char *kids, size_t size);

/* p's step now, estimated: its last heartbeat's count plus what its
 * median step time says it did since that heartbeat came (counted for 3 s
 * at most); 0 when it has not stepped or reports no steps (Kineto). */
int64_t registry_step_now(const struct proc *p, int64_t now_us);

/* Describes what is registered, for "nothing matched" hints: up to size
 * bytes like "registered on this host: job 1234: 2 processes (pid 100
 * rank 0 agent, pid 101 rank 1 kineto)", at most 8 processes of each of
 * 16 jobs; or, with none, what registers a process (the agent through
 * gprofctl launch or CUDA_INJECTION64_PATH, KINETO_USE_DAEMON=1). Only
 * processes visible to `uid`/`admin` are listed; that others are is said. */
void registry_describe(struct daemon *d, uid_t uid, bool admin, char *buf, size_t size);

/* Fills a proc_info for process_list replies; strings are borrowed. */
void registry_info(struct daemon *d, const struct proc *p, struct msg_proc_info *info,
                   int64_t *ppids, int64_t *gpus);

#endif
