/*
 * trace: see trace.h (ownership, callers). It sends only to followers'
 * conns, never to a session; a process is reached only through its part's
 * back end (tp->be, backend.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "peer.h"
#include "registry.h"
#include "store.h"
#include "trace.h"

static bool final_state(int s)
{
	return s == MSG_TS_DONE || s == MSG_TS_FAILED || s == MSG_TS_CANCELLED ||
	       s == MSG_TS_SKIPPED;
}

bool trace_tproc_ended(const struct tproc *tp)
{
	return final_state(tp->state);
}

struct trace *trace_find(struct daemon *d, const char *id)
{
	struct trace *t;

	for (t = d->traces; t != NULL; t = t->next)
		if (strcmp(t->id, id) == 0)
			return t;
	return NULL;
}

struct tproc *trace_tproc(struct trace *t, pid_t pid)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (t->tp[i].pid == pid)
			return &t->tp[i];
	return NULL;
}

void trace_fill_procs(const struct trace *t, struct msg_trace_proc *procs)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct tproc *tp = &t->tp[i];

		msg_elem_init(MSG_ELEM_TRACE_PROC, &procs[i]);
		procs[i].pid = tp->pid;
		procs[i].host = tp->host;
		procs[i].job_id = tp->job_id[0] ? tp->job_id : NULL;
		procs[i].rank = tp->rank;
		procs[i].kind = tp->kind;
		procs[i].state = tp->state;
		procs[i].reason = tp->reason[0] ? tp->reason : NULL;
		procs[i].bytes = tp->bytes;
		procs[i].events = tp->events;
		procs[i].dropped = tp->dropped;
		procs[i].file = tp->file[0] ? tp->file : NULL;
	}
}

void trace_fill(const struct trace *t, struct msg *m, struct msg_trace_proc *procs)
{
	m->u.trace_info.trace_id = t->id;
	m->u.trace_info.state = t->state;
	m->u.trace_info.created_us = t->created_us;
	trace_fill_procs(t, procs);
	m->u.trace_info.procs.v = procs;
	m->u.trace_info.procs.n = t->n;
}

static void notify(struct trace *t)
{
	struct msg_trace_proc *procs;
	struct follower *f;
	struct msg m;

	if (t->followers == NULL)
		return;
	procs = calloc(t->n ? t->n : 1, sizeof(*procs));
	if (procs == NULL)
		return;
	for (f = t->followers; f != NULL; f = f->next) {
		msg_init(&m, MSG_TRACE_PROGRESS, f->id);
		trace_fill(t, &m, procs);
		conn_send_msg(f->c, &m);
	}
	free(procs);
}

static void free_followers(struct trace *t)
{
	struct follower *f, *next;

	for (f = t->followers; f != NULL; f = next) {
		next = f->next;
		free(f);
	}
	t->followers = NULL;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct trace *t = h->data;

	free(t->tp);
	free(t);
}

static void trace_free(struct daemon *d, struct trace *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		d->traces = t->next;
	if (t->next)
		t->next->prev = t->prev;
	free_followers(t);
	uv_close((uv_handle_t *)&t->timer, on_timer_closed);
}

/* Keeps at most TRACE_KEEP_FINISHED finished traces in memory. */
static void forget_old(struct daemon *d)
{
	struct trace *t, *last = NULL;
	size_t finished = 0;

	for (t = d->traces; t != NULL; t = t->next)
		if (t->finished && ++finished > TRACE_KEEP_FINISHED)
			last = t;
	if (last != NULL)
		trace_free(d, last);
}

static void proc_next(struct daemon *d, struct proc *p);
static void begin_held(struct trace *t);

static void finish(struct trace *t)
{
	struct daemon *d = t->d;
	size_t i, done = 0, cancelled = 0, skipped = 0, n;
	struct stored *s;

	for (i = 0; i < t->n; i++) {
		if (t->tp[i].state == MSG_TS_DONE)
			done++;
		else if (t->tp[i].state == MSG_TS_CANCELLED)
			cancelled++;
		else if (t->tp[i].state == MSG_TS_SKIPPED)
			skipped++;
	}
	/* a process left out (a launcher) is no part of the outcome; a trace a
	 * cancel request ended is cancelled, whatever had been delivered (its
	 * files stay): the one who cancelled it and the one who waits on it
	 * must both read what happened, not "partial" or "failed" */
	n = t->n - skipped;
	t->state = t->cancelled && done < n ? MSG_TRACE_CANCELLED : done == n ? MSG_TRACE_DONE :
	           done > 0 ? MSG_TRACE_PARTIAL : cancelled == n ? MSG_TRACE_CANCELLED :
	           MSG_TRACE_FAILED;
	t->finished = true;
	d->cnt.traces_ended[t->state]++;
	uv_timer_stop(&t->timer);
	d->pending_traces--;
	log_info("trace %s %s: %zu of %zu processes delivered%s", t->id,
	         msg_trace_state_name(t->state), done, n, skipped ? " (launchers left out)" : "");
	s = trace_stored(t, t->state, false);
	if (s != NULL)
		store_add(d, s);
	else
		log_err("trace %s: out of memory recording it", t->id);
	notify(t);
	free_followers(t);
	forget_old(d);
}

void trace_set_state(struct trace *t, struct tproc *tp, int state, const char *reason)
{
	struct daemon *d = t->d; /* finish() may free t (forget_old) */
	struct proc *freed = NULL;
	size_t i;

	if (t->finished || final_state(tp->state))
		return;
	tp->state = state;
	if (reason != NULL)
		snprintf(tp->reason, sizeof(tp->reason), "%s", reason);
	if (state == MSG_TS_FAILED)
		log_info("trace %s: pid %d failed: %s", t->id, (int)tp->pid, tp->reason);
	if (final_state(state)) {
		tp->queued = false;
		/* its part here is over: the process may take its next trace */
		if (tp->proc != NULL && tp->proc->busy == t) {
			tp->proc->busy = NULL;
			freed = tp->proc;
		}
	}
	for (i = 0; i < t->n; i++)
		if (!final_state(t->tp[i].state))
			break;
	if (i == t->n) {
		finish(t); /* t may be gone */
	} else {
		notify(t);
		if (final_state(state))
			begin_held(t); /* the parts left may all hold their processes now */
	}
	if (freed != NULL)
		proc_next(d, freed);
}

/* tp's part ends early (cancelled, timed out): its back end tells the
 * process, and withdraws what it had not handed over yet (a Kineto config
 * must not start later). */
static void cancel_part(struct trace *t, struct tproc *tp, const char *why)
{
	if (tp->proc != NULL)
		tp->be->cancel(t, tp, why);
}

static void on_timeout(uv_timer_t *timer)
{
	struct trace *t = timer->data;
	char why[256];
	size_t i;

	t->ending = true;
	for (i = 0; i < t->n && !t->finished; i++) {
		struct tproc *tp = &t->tp[i];

		if (final_state(tp->state))
			continue;
		tp->be->timed_out(t, tp, why, sizeof(why));
		cancel_part(t, tp, "trace timed out");
		trace_set_state(t, tp, MSG_TS_FAILED, why);
	}
}

/* Starts t's part on tp's process, which is free. */
static void begin_on(struct trace *t, struct tproc *tp)
{
	const char *why = tp->be->refuse != NULL ? tp->be->refuse(t) : NULL;

	tp->queued = false;
	tp->reason[0] = '\0';
	tp->proc->busy = t;
	if (why != NULL)
		trace_set_state(t, tp, MSG_TS_FAILED, why);
	else
		tp->be->start(t, tp);
}

static int64_t common_start(const struct trace *t);

/* tp's process, free, is kept for held trace t until t begins. */
static void hold_proc(struct trace *t, struct tproc *tp)
{
	tp->proc->busy = t;
	tp->queued = true;
	snprintf(tp->reason, sizeof(tp->reason), "held: its ranks begin on one step, and another "
	         "process of the trace is still capturing an earlier trace");
}

/* A held trace begins once every part still waiting holds its process. */
static void begin_held(struct trace *t)
{
	size_t i;

	if (!t->held || t->finished || t->ending)
		return;
	for (i = 0; i < t->n; i++)
		if (t->tp[i].queued && (t->tp[i].proc == NULL || t->tp[i].proc->busy != t))
			return;
	t->held = false;
	t->win.start_iteration = 0; /* chosen anew (held only when the daemon chose it) */
	t->win.start_iteration = common_start(t);
	log_info("trace %s: every process is free; every process begins at step %lld", t->id,
	         (long long)t->win.start_iteration);
	for (i = 0; i < t->n && !t->finished; i++)
		if (t->tp[i].queued)
			begin_on(t, &t->tp[i]);
}

/* p is free: the oldest trace queued on it begins there (a held trace:
 * takes p, and begins when it holds all its processes). */
static void proc_next(struct daemon *d, struct proc *p)
{
	struct trace *t, *oldest = NULL;
	struct tproc *tp, *first = NULL;

	for (t = d->traces; t != NULL; t = t->next) {
		if (t->finished || (tp = trace_tproc(t, p->pid)) == NULL || tp->proc != p ||
		    !tp->queued)
			continue;
		oldest = t; /* d->traces is newest first */
		first = tp;
	}
	if (oldest != NULL && p->busy == NULL) {
		log_debug("trace %s: pid %d was waiting for its previous trace; %s",
		          oldest->id, (int)p->pid, oldest->held ? "held for it" : "starting");
		if (oldest->held) {
			hold_proc(oldest, first);
			begin_held(oldest);
		} else {
			begin_on(oldest, first);
		}
	}
}

/* Why p sits out trace t although the request matched it, or NULL: a
 * launcher never steps, and a process that never stepped while others
 * of the request have cannot deliver an iteration trace. Such a process
 * would block the job's trace until the timeout; it is reported as
 * skipped instead. Only applied while another matched process remains. */
static const char *sits_out(struct daemon *d, const struct trace *t, const struct proc *p,
                            struct proc *const *m, size_t n, char *why, size_t size)
{
	char kids[128];
	size_t i;

	if (registry_launcher(d, p, kids, sizeof(kids))) {
		snprintf(why, size, "skipped: a launcher (it started %s of this job and never "
		         "steps); name its pid alone with --pid to trace it", kids);
		return why;
	}
	if (t->win.iterations <= 0 || t->iteration_range[0] || !p->be->counts_steps ||
	    p->steps > 0)
		return NULL;
	for (i = 0; i < n; i++)
		if (m[i] != p && m[i]->be->counts_steps && m[i]->steps > 0)
			break;
	if (i == n)
		return NULL;
	snprintf(why, size, "skipped: it has not stepped (gprof_step or optimizer.step) since it "
	         "registered, while pid %d of this request has, so an iteration trace would wait "
	         "on it; trace it by --duration-ms, or alone with --pid", (int)m[i]->pid);
	return why;
}

/*
 * The step every process of an iteration trace begins on. A job's ranks
 * are in step on the GPU, but their CPUs can be many steps apart (a fast
 * rank runs ahead until it blocks on the slow one), so each beginning on
 * its own next multiple of the roundup would number their iterations
 * differently. So: the first multiple of the roundup (1 if none) at least
 * two steps past the most advanced process's estimated step now (its last
 * heartbeat's count, plus what its median step time says it did since that
 * heartbeat came, counted for 3 s at most). 0 (each its own roundup) when no traced agent
 * has stepped, or the trace counts NVTX ranges.
 */
static int64_t common_start(const struct trace *t)
{
	int64_t now = clock_now_us(), best = 0, r = t->win.iteration_roundup > 0 ?
	              t->win.iteration_roundup : 1;
	size_t i;

	/* gprofctl chose it for all hosts (from process_list's step_now) */
	if (t->win.iterations <= 0 || t->iteration_range[0] || t->win.start_iteration > 0)
		return t->win.start_iteration;
	for (i = 0; i < t->n; i++) {
		int64_t est;

		if (t->tp[i].state == MSG_TS_SKIPPED || t->tp[i].proc == NULL)
			continue;
		if ((est = registry_step_now(t->tp[i].proc, now)) <= 0)
			continue;
		/* room for the request to reach every agent before it passes the
		 * step: 250 ms of its steps (2 at least); 2 steps alone were too
		 * few for a 1 ms loop on a loaded machine (CI, 8 ranks) */
		est += t->tp[i].proc->median_step_us > 0 ?
		       250000 / t->tp[i].proc->median_step_us + 2 : 2;
		if (est > best)
			best = est;
	}
	if (best == 0)
		return 0;
	return (best + r - 1) / r * r;
}

struct trace *trace_create(struct daemon *d, const struct peer *peer,
                           const struct msg_trace_start *req, bool queue_busy, int *code,
                           struct perr *err)
{
	const char *job = req->all ? NULL : req->job_id;
	struct proc **m = NULL, *p;
	const char **out = NULL;
	struct trace *t;
	size_t n = 0, i, kept = 0, taken = 0;
	char (*why)[200] = NULL;

	if (d->pending_traces >= d->cfg.max_pending_traces) {
		d->cnt.traces_refused++;
		*code = MSG_E_LIMIT;
		perr_set(err, -EBUSY, "%zu traces are in progress, the limit "
		         "(limits.pending_traces); wait for one to finish", d->pending_traces);
		return NULL;
	}
	if (req->trace_id != NULL &&
	    (trace_find(d, req->trace_id) != NULL || store_find(d, req->trace_id) != NULL)) {
		*code = MSG_E_BUSY;
		perr_set(err, -EEXIST, "trace id %s is already used on this host; choose another",
		         req->trace_id);
		return NULL;
	}
	for (p = d->procs; p != NULL; p = p->next)
		if (peer_may(peer, p->uid) && registry_match(p, job, req->pids.v, req->pids.n))
			n++;
	if (n == 0) {
		*code = MSG_E_NOT_FOUND;
		registry_describe(d, peer->uid, peer->admin, err->msg, sizeof(err->msg));
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	m = calloc(n, sizeof(*m));
	out = calloc(n, sizeof(*out));
	why = calloc(n, sizeof(*why));
	if (t == NULL || m == NULL || out == NULL || why == NULL ||
	    (t->tp = calloc(n, sizeof(*t->tp))) == NULL) {
		free(t);
		free(m);
		free(out);
		free(why);
		*code = MSG_E_INTERNAL;
		perr_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	t->d = d;
	if (req->trace_id != NULL)
		snprintf(t->id, sizeof(t->id), "%s", req->trace_id);
	else
		msg_trace_id_new(t->id, sizeof(t->id));
	t->owner = peer->uid;
	t->created_us = clock_now_us();
	t->win = req->win;
	if (req->win.iteration_range)
		snprintf(t->iteration_range, sizeof(t->iteration_range), "%s",
		         req->win.iteration_range);
	t->win.iteration_range = NULL;
	t->timeout_ms = req->timeout_ms ? req->timeout_ms : (int64_t)d->cfg.trace_timeout_s * 1000;
	t->state = MSG_TRACE_RUNNING;
	/* Oldest registrations first: with a process limit, long-lived workers
	 * win over short-lived helpers that registered after them. */
	for (p = d->procs; p != NULL && p->next != NULL; p = p->next)
		;
	for (n = 0; p != NULL; p = p->prev)
		if (peer_may(peer, p->uid) && registry_match(p, job, req->pids.v, req->pids.n))
			m[n++] = p;
	for (i = 0; i < n; i++)
		if ((out[i] = sits_out(d, t, m[i], m, n, why[i], sizeof(why[i]))) == NULL)
			kept++;
	/* Everyone would sit out (a lone launcher, nobody stepped): trace all. */
	if (kept == 0) {
		for (i = 0; i < n; i++)
			out[i] = NULL;
		kept = n;
	}
	for (i = 0; i < n; i++) {
		struct tproc *tp;

		/* the process limit counts the processes that are traced */
		if (out[i] == NULL && taken++ >= (size_t)req->process_limit)
			continue;
		p = m[i];
		tp = &t->tp[t->n++];
		tp->pid = p->pid;
		tp->uid = p->uid;
		tp->kind = p->kind;
		tp->be = p->be;
		tp->rank = p->rank;
		tp->proc = p;
		snprintf(tp->host, sizeof(tp->host), "%s", p->host);
		snprintf(tp->job_id, sizeof(tp->job_id), "%s", p->job_id);
		tp->state = out[i] ? MSG_TS_SKIPPED : MSG_TS_MATCHED;
		if (out[i] != NULL)
			snprintf(tp->reason, sizeof(tp->reason), "%s", out[i]);
	}
	free(m);
	free(out);
	free(why);
	uv_timer_init(d->loop, &t->timer);
	t->timer.data = t;
	t->next = d->traces;
	if (d->traces)
		d->traces->prev = t;
	d->traces = t;
	d->pending_traces++;
	d->cnt.traces_started++;
	log_info("trace %s started by %s: %zu process%s%s", t->id, peer->desc, t->n - (n - kept),
	         t->n - (n - kept) == 1 ? "" : "es", n > kept ? " (launchers and processes that "
	         "never stepped left out)" : "");
	uv_timer_start(&t->timer, on_timeout, (uint64_t)t->timeout_ms, 0);
	/* the daemon picks the common step (not gprofctl, for all hosts) and
	 * a part must wait: the trace is held (struct trace) */
	if (queue_busy && t->win.start_iteration <= 0)
		for (i = 0; i < t->n; i++)
			if (t->tp[i].state != MSG_TS_SKIPPED && t->tp[i].proc->busy != NULL)
				t->held = true;
	t->win.start_iteration = common_start(t);
	if (t->win.start_iteration <= 0)
		t->held = false; /* no common step: each part begins on its own */
	if (t->held)
		log_info("trace %s: held until every process is free (they begin on one step)", t->id);
	else if (t->win.start_iteration > 0)
		log_info("trace %s: every process begins at step %lld", t->id,
		         (long long)t->win.start_iteration);
	for (i = 0; i < t->n && !t->finished; i++) {
		struct tproc *tp = &t->tp[i];

		if (tp->state == MSG_TS_SKIPPED) {
			log_info("trace %s: pid %d %s", t->id, (int)tp->pid, tp->reason);
			continue;
		}
		if (t->held && tp->proc->busy == NULL) {
			hold_proc(t, tp);
			continue;
		}
		if (tp->proc->busy != NULL) {
			char busy[160];

			snprintf(busy, sizeof(busy), "%s trace %s%s", queue_busy ?
			         "queued: the process is capturing" : "busy: already capturing",
			         tp->proc->busy->id, tp->proc->busy->held ? " (kept for it: that trace "
			         "waits for its other processes, to begin on one step)" : "");
			if (queue_busy) {
				tp->queued = true;
				snprintf(tp->reason, sizeof(tp->reason), "%s", busy);
			} else {
				trace_set_state(t, tp, MSG_TS_FAILED, busy);
			}
			continue;
		}
		begin_on(t, tp);
	}
	return t;
}

void trace_capture_status(struct daemon *d, struct proc *p, const struct msg_capture_status *s)
{
	struct trace *t = trace_find(d, s->trace_id);
	struct tproc *tp;

	if (t == NULL || (tp = trace_tproc(t, p->pid)) == NULL) {
		log_debug("pid %d reports on unknown trace %s", (int)p->pid, s->trace_id);
		return;
	}
	tp->events = s->events;
	tp->dropped = s->dropped;
	/* once a file is stored, its size is the daemon's count, not the
	 * agent's word */
	if (tp->file[0] == 0)
		tp->bytes = s->bytes;
	/* done comes from the daemon (the upload is stored), not from the agent */
	if (s->state == MSG_TS_DONE)
		return;
	/* the agent's word replaces an older one (a "queued" note, say) */
	trace_set_state(t, tp, s->state, s->reason ? s->reason : "");
}

int trace_cancel(struct daemon *d, struct trace *t, const char *why)
{
	int n = 0;
	size_t i;

	(void)d;
	t->ending = true;
	for (i = 0; i < t->n && !t->finished; i++)
		if (!final_state(t->tp[i].state))
			t->cancelled = true; /* before the last part ends (finish) */
	for (i = 0; i < t->n && !t->finished; i++) {
		struct tproc *tp = &t->tp[i];

		if (final_state(tp->state))
			continue;
		cancel_part(t, tp, why);
		n++;
		trace_set_state(t, tp, MSG_TS_CANCELLED, why);
	}
	return n;
}

void trace_follow(struct trace *t, struct conn *c, uint64_t id)
{
	struct follower *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return;
	f->c = c;
	f->id = id;
	f->next = t->followers;
	t->followers = f;
}

/* A record of t in the given state (trace.h) listing the processes whose file is
 * acknowledged (done), and when running also those whose file waits to be
 * recorded (tproc.recording). NULL when out of memory. */
struct stored *trace_stored(const struct trace *t, int state, bool running)
{
	struct stored *s;
	size_t i, n = 0;

	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->files = calloc(t->n + 1, sizeof(*s->files))) == NULL) {
		free(s);
		return NULL;
	}
	snprintf(s->id, sizeof(s->id), "%s", t->id);
	s->owner = t->owner;
	s->created_us = t->created_us;
	s->state = state;
	for (i = 0; i < t->n; i++) {
		const struct tproc *tp = &t->tp[i];
		struct stored_file *sf;

		if (tp->state != MSG_TS_SKIPPED)
			n++;
		if (tp->file[0] == 0 || !(tp->state == MSG_TS_DONE ||
		                          (running && tp->recording && !trace_tproc_ended(tp))))
			continue;
		sf = &s->files[s->nfiles++];
		snprintf(sf->name, sizeof(sf->name), "%s", tp->file);
		snprintf(sf->host, sizeof(sf->host), "%s", tp->host);
		snprintf(sf->job_id, sizeof(sf->job_id), "%s", tp->job_id);
		sf->bytes = tp->stored_bytes;
		sf->pid = tp->pid;
		sf->rank = tp->rank;
		s->bytes += (uint64_t)tp->stored_bytes;
	}
	s->processes = n;
	return s;
}

void trace_proc_gone(struct daemon *d, struct proc *p)
{
	struct trace *t, *next;
	struct tproc *tp;

	for (t = d->traces; t != NULL; t = next) {
		next = t->next;
		tp = trace_tproc(t, p->pid);
		if (tp == NULL || tp->proc != p)
			continue;
		tp->proc = NULL;
		if (!t->finished && !final_state(tp->state))
			trace_set_state(t, tp, MSG_TS_FAILED, tp->state == MSG_TS_UPLOADING ?
			                "the agent disconnected during the upload" :
			                "the process exited or its agent disconnected before the "
			                "trace was delivered");
	}
}

void trace_conn_gone(struct daemon *d, struct conn *c)
{
	struct follower **fp, *f;
	struct trace *t;

	for (t = d->traces; t != NULL; t = t->next) {
		for (fp = &t->followers; *fp != NULL;) {
			f = *fp;
			if (f->c == c) {
				*fp = f->next;
				free(f);
			} else
				fp = &f->next;
		}
	}
}

void trace_shutdown(struct daemon *d)
{
	struct trace *t;
	size_t i;

	while ((t = d->traces) != NULL) {
		t->ending = true;
		for (i = 0; i < t->n && !t->finished; i++)
			if (!final_state(t->tp[i].state))
				trace_set_state(t, &t->tp[i], MSG_TS_FAILED, "the daemon stopped");
		trace_free(d, t);
	}
}
