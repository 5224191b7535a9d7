/*
 * trace: trace orchestration. A trace request selects processes, gets a
 * trace id, and starts each process's part at once through that
 * process's capture back end (backend.h: the agent, a Kineto client); each
 * process moves through matched -> waiting -> capturing -> writing ->
 * uploading -> done, or ends failed or cancelled with a reason a person
 * can act on. When every process has ended, the trace is handed to the
 * store (its files and manifest stay on disk) and followers get a last
 * trace_progress.
 *
 * Ownership: the daemon owns every trace (d->traces, newest first). A
 * trace is freed only in its timer's close callback. Each tproc holds its
 * registry proc weakly: registry_remove calls trace_proc_gone first
 * (through d->hooks.proc_gone).
 * Followers are (conn, request id) pairs; trace_conn_gone drops a closing
 * conn's. Finished traces stay in memory (for trace_status and reasons)
 * until more than TRACE_KEEP_FINISHED have finished.
 *
 * Back ends. The engine names no kind of capture: it starts, cancels and
 * times out a part through its process's back end (tp->be, backend.h:
 * agentcap.c, kineto.c), which reports back by trace_set_state; a
 * finished file reaches the part through deliver.c.
 *
 * Floor: an engine above the registry and the store; it sends only to
 * followers' conns and never sees a session. Called by htrace.c and
 * dynorpc.c (requests), hagent.c (progress), the back ends and deliver.c,
 * bus.c (a session gone), main.c (hooks, shutdown).
 */
#ifndef GPROFD_TRACE_H
#define GPROFD_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "backend.h"
#include "daemon.h"
#include "msg.h"

#define TRACE_ID_LEN 48
#define TRACE_KEEP_FINISHED 256

struct proc;
struct conn;
struct peer;
struct stored;

struct tproc {
	pid_t pid;
	uid_t uid;
	int kind;                  /* MSG_KIND_*, as its back end reports it */
	const struct backend *be;  /* its process's capture back end (backend.h) */
	int state;                 /* MSG_TS_* */
	char reason[1024];         /* why it failed; on a delivered part, the agent's note
	                            * (options it could not honour, a cut): room for it */
	int64_t bytes, events, dropped;   /* progress, as the agent reports it */
	char file[160];            /* stored file name once done */
	int64_t stored_bytes;      /* the size of file on disk: the one count the store
	                            * and retention use (never the agent's word) */
	bool upload_begun;         /* one upload per process and trace, ever */
	bool recording;            /* file is on disk, its manifest being written */
	char host[64];
	char job_id[MSG_JOB_ID_MAX + 1];
	int64_t rank;
	bool queued;               /* waits for the process's current trace (or, in a held
	                            * trace, holds the free process: proc->busy == the trace) */
	struct proc *proc;         /* weak; NULL once the process is gone */
};

struct follower {
	struct follower *next;
	struct conn *c;
	uint64_t id;
};

struct trace {
	struct trace *next, *prev;
	struct daemon *d;
	char id[TRACE_ID_LEN];
	uid_t owner;
	int64_t created_us;
	struct msg_window win;
	char iteration_range[MSG_NAME_MAX + 1];
	int64_t timeout_ms;
	int state;                 /* MSG_TRACE_* */
	bool finished;
	/* An iteration trace whose processes must begin on one step, some of
	 * them busy with an earlier trace when it came: it begins nowhere
	 * until all are free. Each, as it frees (oldest queued trace first),
	 * is held for it (proc->busy set, nothing sent), so no later trace
	 * takes it meanwhile; then the common step is chosen anew and every
	 * part starts. Begun one by one, each would start on its own next
	 * step past the chosen one, and the ranks' iterations would differ. */
	bool held;
	bool ending;               /* cancelled, timed out or shut down: its parts
	                            * end one by one, and a held trace must not begin
	                            * on the rest meanwhile */
	bool cancelled;            /* a cancel request ended a part of it: it ends
	                            * MSG_TRACE_CANCELLED, whatever was delivered before */
	size_t n;
	struct tproc *tp;
	struct follower *followers;
	uv_timer_t timer;
};

/*
 * Creates a trace for a validated trace_start on behalf of peer (who
 * decides which processes may be traced) and sends capture_start to every
 * matched agent. A process busy with another trace either waits its turn
 * (queue_busy: the trace's part there starts when the process's current
 * one ends, within the timeout) or fails at once as busy (Dynolog's rule,
 * for dyno requests). Returns the trace, possibly already finished; or
 * NULL with *code set and err saying why: MSG_E_LIMIT, MSG_E_INTERNAL, or
 * MSG_E_NOT_FOUND when nothing matched (err is then a hint naming what is
 * registered).
 */
struct trace *trace_create(struct daemon *d, const struct peer *peer,
                           const struct msg_trace_start *req, bool queue_busy, int *code,
                           struct perr *err);

struct trace *trace_find(struct daemon *d, const char *id);

/* Agent reports. */
void trace_capture_status(struct daemon *d, struct proc *p, const struct msg_capture_status *s);
/* The agent of p started uploading to trace t / finished / failed. */
struct tproc *trace_tproc(struct trace *t, pid_t pid);
void trace_set_state(struct trace *t, struct tproc *tp, int state, const char *reason);
/* True when tp's part has ended (done, failed, cancelled, skipped): no
 * file may be stored for it any more. */
bool trace_tproc_ended(const struct tproc *tp);

/* Cancels t: agents are told, unfinished processes end cancelled, and
 * the trace ends MSG_TRACE_CANCELLED (at once: every part is then over).
 * Returns how many processes were cancelled (0: it had already ended, and
 * keeps the state it ended in). */
int trace_cancel(struct daemon *d, struct trace *t, const char *why);

/* Adds c as a follower of t (trace_progress messages with id). */
void trace_follow(struct trace *t, struct conn *c, uint64_t id);

/* Fills procs (room for t->n entries) with t's processes. */
void trace_fill_procs(const struct trace *t, struct msg_trace_proc *procs);
/* Fills m (a trace_status_reply or trace_progress) from t; procs must
 * have room for t->n entries. */
void trace_fill(const struct trace *t, struct msg *m, struct msg_trace_proc *procs);

/* A record of t for the store (store.h), in the given state, listing the
 * processes whose file is acknowledged (done) and, when running, also
 * those whose file waits to be recorded (tproc.recording). NULL when out
 * of memory. */
struct stored *trace_stored(const struct trace *t, int state, bool running);

/* p is about to be freed (d->hooks.proc_gone, from registry_remove):
 * its unfinished parts fail, and no tproc points at it any more. */
void trace_proc_gone(struct daemon *d, struct proc *p);
void trace_conn_gone(struct daemon *d, struct conn *c);

/* Fails every unfinished trace and frees all (shutdown). */
void trace_shutdown(struct daemon *d);

#endif
