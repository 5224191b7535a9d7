/*
 * htrace: gprofctl's trace requests: start, status, cancel, and the stored
 * traces: list, download, delete; the list also shows the traces in
 * progress (trace_list's running), so a trace's id is known while it runs
 * and it can be cancelled. A client sees only traces it owns, unless it
 * is an administrator. Owns nothing: traces are trace.c's,
 * stored traces store.c's, a download its session's. Called by the
 * handler table (handler.c) for ctl sessions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "download.h"
#include "handler.h"
#include "hpage.h"
#include "log.h"
#include "peer.h"
#include "registry.h"
#include "store.h"
#include "trace.h"
#include "window.h"

void htrace_start(struct session *s, const struct msg *m)
{
	struct msg_trace_proc *procs;
	struct perr err;
	struct trace *t;
	char id[TRACE_ID_LEN], *hint;
	struct msg r;
	int64_t timeout_ms;
	int code = 0;

	/* A window that cannot end before the trace times out would hold its
	 * processes for the whole timeout and then fail: refused at once, by
	 * the rule the Dynolog RPC meets too (proto/window.h). */
	timeout_ms = m->u.trace_start.timeout_ms ? m->u.trace_start.timeout_ms
	                                         : (int64_t)s->d->cfg.trace_timeout_s * 1000;
	if (window_fits(&m->u.trace_start.win, clock_now_us(), timeout_ms, &err) < 0) {
		conn_send_error(&s->conn, m->id, MSG_E_BAD_REQUEST, "%s", err.msg);
		return;
	}
	t = trace_create(s->d, conn_peer(&s->conn), &m->u.trace_start, true, &code, &err);
	msg_init(&r, MSG_TRACE_START_REPLY, m->id);
	if (t == NULL && code != MSG_E_NOT_FOUND) {
		conn_send_error(&s->conn, m->id, code, "%s", err.msg);
		return;
	}
	if (t == NULL) {
		/* Nothing matched: an empty reply with the hint, not an error, so
		 * a fan-out over many hosts can tell "no process here" apart. The
		 * hint lists what the caller may trace here, process by process
		 * (err's room holds only a summary, for the log). */
		log_info("trace request from %s matched nothing: %s", s->conn.peer.desc, err.msg);
		if (m->u.trace_start.trace_id != NULL)
			snprintf(id, sizeof(id), "%s", m->u.trace_start.trace_id);
		else
			msg_trace_id_new(id, sizeof(id));
		if ((hint = malloc(MSG_TEXT_MAX)) != NULL)
			registry_describe(s->d, conn_peer(&s->conn)->uid, conn_peer(&s->conn)->admin,
			                  hint, MSG_TEXT_MAX);
		r.u.trace_start_reply.trace_id = id;
		r.u.trace_start_reply.hint = hint != NULL ? hint : err.msg;
		conn_send_msg(&s->conn, &r);
		free(hint);
		return;
	}
	procs = calloc(t->n, sizeof(*procs));
	if (procs == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "out of memory");
		return;
	}
	trace_fill_procs(t, procs);
	r.u.trace_start_reply.trace_id = t->id;
	r.u.trace_start_reply.procs.v = procs;
	r.u.trace_start_reply.procs.n = t->n;
	conn_send_msg(&s->conn, &r);
	free(procs);
	if (m->u.trace_start.follow && !t->finished)
		trace_follow(t, &s->conn, m->id);
}

static struct trace *visible_trace(struct session *s, uint64_t id, const char *trace_id)
{
	struct trace *t = trace_find(s->d, trace_id);

	if (t == NULL || !peer_may(conn_peer(&s->conn), t->owner)) {
		conn_send_error(&s->conn, id, MSG_E_NOT_FOUND, "no trace %s that you may see (gprofctl "
		                "traces lists your stored ones)", trace_id);
		return NULL;
	}
	return t;
}

void htrace_status(struct session *s, const struct msg *m)
{
	struct msg_trace_proc *procs;
	struct trace *t = visible_trace(s, m->id, m->u.trace_ref.trace_id);
	struct msg r;

	if (t == NULL)
		return;
	procs = calloc(t->n ? t->n : 1, sizeof(*procs));
	if (procs == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "out of memory");
		return;
	}
	msg_init(&r, MSG_TRACE_STATUS_REPLY, m->id);
	trace_fill(t, &r, procs);
	conn_send_msg(&s->conn, &r);
	free(procs);
	if (m->u.trace_ref.follow && !t->finished)
		trace_follow(t, &s->conn, m->id);
}

void htrace_cancel(struct session *s, const struct msg *m)
{
	struct trace *t = visible_trace(s, m->id, m->u.trace_ref.trace_id);
	char why[160];
	struct msg r;
	int n;

	if (t == NULL)
		return;
	/* who asked, for the one who waits on the trace */
	snprintf(why, sizeof(why), "cancelled by request (%s)", s->conn.peer.desc);
	n = trace_cancel(s->d, t, why);
	msg_init(&r, MSG_TRACE_CANCEL_REPLY, m->id);
	r.u.trace_cancel_reply.cancelled = n;
	/* ended now (cancelled) or before (its own state); t is only freed in
	 * its timer's close callback, after this */
	r.u.trace_cancel_reply.state = t->state;
	conn_send_msg(&s->conn, &r);
}

/* Whether stored trace s is one the list request q asks for: the caller
 * may see it, and it passes the trace_id and job_id filters (a trace is
 * of a job when any of its files is). */
static bool list_match(struct session *s, const struct msg_trace_ref *q, const struct stored *st)
{
	size_t i;

	if (!peer_may(conn_peer(&s->conn), st->owner) || (q->trace_id && strcmp(q->trace_id, st->id) != 0))
		return false;
	if (q->job_id == NULL)
		return true;
	for (i = 0; i < st->nfiles; i++)
		if (strcmp(q->job_id, st->files[i].job_id) == 0)
			return true;
	return false;
}

/* The stored traces the caller may see, newest first, as one page from
 * the request's offset: as many as one frame holds (halving until the
 * reply encodes), so a daemon with many traces answers in several pages
 * (next_offset) instead of a frame past the limit. */
/* A page of the trace list (hpage_send). */
static void trace_page(struct msg *r, void *v, size_t n, size_t from, size_t k)
{
	r->u.trace_list_reply.traces.v = (struct msg_trace_summary *)v + from;
	r->u.trace_list_reply.traces.n = k;
	r->u.trace_list_reply.next_offset = from + k < n ? (int64_t)(from + k) : 0;
}

/* Whether running trace t is one the list request q asks for: not
 * finished, the caller may see it, and it passes the filters (a trace is
 * of a job when any of its processes is). */
static bool running_match(struct session *s, const struct msg_trace_ref *q, const struct trace *t)
{
	size_t i;

	if (t->finished || !peer_may(conn_peer(&s->conn), t->owner) ||
	    (q->trace_id && strcmp(q->trace_id, t->id) != 0))
		return false;
	if (q->job_id == NULL)
		return true;
	for (i = 0; i < t->n; i++)
		if (strcmp(q->job_id, t->tp[i].job_id) == 0)
			return true;
	return false;
}

/* The traces in progress the caller may see, newest first, in pages as
 * the stored ones: each with its processes (state, kind, rank; the
 * reasons are trace_status's, so a page stays small) and the files
 * delivered so far. */
static void list_running(struct session *s, const struct msg *m)
{
	const struct msg_trace_ref *q = &m->u.trace_ref;
	struct msg_trace_summary *sums = NULL;
	struct msg_trace_proc *procs = NULL;
	struct msg_trace_file *files = NULL;
	size_t ns = 0, np = 0, nf = 0, i, from;
	struct trace *t;
	struct msg r;

	for (t = s->d->traces; t != NULL; t = t->next)
		if (running_match(s, q, t)) {
			ns++;
			np += t->n;
		}
	sums = calloc(ns ? ns : 1, sizeof(*sums));
	procs = calloc(np ? np : 1, sizeof(*procs));
	files = calloc(np ? np : 1, sizeof(*files));
	if (sums == NULL || procs == NULL || files == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "out of memory");
		goto out;
	}
	ns = np = 0;
	for (t = s->d->traces; t != NULL; t = t->next) {
		struct msg_trace_summary *sum;

		if (!running_match(s, q, t))
			continue;
		sum = &sums[ns++];
		msg_elem_init(MSG_ELEM_TRACE_SUMMARY, sum);
		sum->trace_id = t->id;
		sum->created_us = t->created_us;
		sum->state = t->state;
		sum->uid = (int64_t)t->owner;
		trace_fill_procs(t, &procs[np]);
		sum->procs.v = &procs[np];
		sum->procs.n = t->n;
		sum->files.v = &files[nf];
		for (i = 0; i < t->n; i++) {
			const struct tproc *tp = &t->tp[i];
			struct msg_trace_file *f;

			procs[np + i].reason = NULL;
			if (tp->state != MSG_TS_DONE || tp->file[0] == 0)
				continue;
			f = &files[nf++];
			msg_elem_init(MSG_ELEM_TRACE_FILE, f);
			f->name = tp->file;
			f->bytes = tp->stored_bytes;
			f->pid = tp->pid;
			f->rank = tp->rank;
			f->host = tp->host[0] ? tp->host : NULL;
			f->job_id = tp->job_id[0] ? tp->job_id : NULL;
			sum->files.n++;
		}
		np += t->n;
	}
	from = q->offset < (int64_t)ns ? (size_t)q->offset : ns;
	msg_init(&r, MSG_TRACE_LIST_REPLY, m->id);
	r.u.trace_list_reply.total = (int64_t)ns;
	hpage_send(s, &r, sums, ns, from, ns, trace_page, "running trace list");
out:
	free(sums);
	free(procs);
	free(files);
}

void htrace_list(struct session *s, const struct msg *m)
{
	const struct msg_trace_ref *q = &m->u.trace_ref;
	struct msg_trace_summary *sums = NULL;
	struct msg_trace_file *files = NULL;
	size_t ns = 0, nf = 0, i, from;
	struct stored *st;
	struct msg r;

	if (q->running) {
		list_running(s, m);
		return;
	}
	for (st = store_list(s->d); st != NULL; st = st->next)
		if (list_match(s, q, st)) {
			ns++;
			nf += st->nfiles;
		}
	sums = calloc(ns ? ns : 1, sizeof(*sums));
	files = calloc(nf ? nf : 1, sizeof(*files));
	if (sums == NULL || files == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "out of memory");
		goto out;
	}
	ns = nf = 0;
	for (st = store_list(s->d); st != NULL; st = st->next) {
		struct msg_trace_summary *sum;

		if (!list_match(s, q, st))
			continue;
		sum = &sums[ns++];
		msg_elem_init(MSG_ELEM_TRACE_SUMMARY, sum);
		sum->trace_id = st->id;
		sum->created_us = st->created_us;
		sum->state = st->state;
		sum->uid = (int64_t)st->owner;
		sum->files.v = &files[nf];
		for (i = 0; i < st->nfiles; i++) {
			struct msg_trace_file *f = &files[nf++];

			msg_elem_init(MSG_ELEM_TRACE_FILE, f);
			f->name = st->files[i].name;
			f->bytes = st->files[i].bytes;
			f->pid = st->files[i].pid;
			f->rank = st->files[i].rank;
			f->host = st->files[i].host[0] ? st->files[i].host : NULL;
			f->job_id = st->files[i].job_id[0] ? st->files[i].job_id : NULL;
		}
		sum->files.n = st->nfiles;
	}
	from = q->offset < (int64_t)ns ? (size_t)q->offset : ns;
	msg_init(&r, MSG_TRACE_LIST_REPLY, m->id);
	r.u.trace_list_reply.total = (int64_t)ns;
	hpage_send(s, &r, sums, ns, from, ns, trace_page, "trace list");
out:
	free(sums);
	free(files);
}

static struct stored *visible_stored(struct session *s, uint64_t id, const char *trace_id)
{
	struct stored *st = store_find(s->d, trace_id);

	if (st == NULL || !peer_may(conn_peer(&s->conn), st->owner)) {
		conn_send_error(&s->conn, id, MSG_E_NOT_FOUND, "no stored trace %s that you may read "
		                "(gprofctl traces lists yours; retention may have deleted it)",
		                trace_id);
		return NULL;
	}
	return st;
}

/* A file of a trace still running: a process whose part is done has its
 * file in the trace's store directory already, and gprofctl fetches it
 * at once rather than wait for the slowest rank. True when found and
 * visible (the download is started). */
static bool download_running(struct session *s, const struct msg *m)
{
	const struct msg_trace_download *req = &m->u.trace_download;
	struct trace *t = trace_find(s->d, req->trace_id);
	char path[PATH_MAX];
	size_t i;

	if (t == NULL || t->finished || !peer_may(conn_peer(&s->conn), t->owner))
		return false;
	for (i = 0; i < t->n; i++)
		if (t->tp[i].state == MSG_TS_DONE && strcmp(t->tp[i].file, req->file) == 0)
			break;
	if (i == t->n) {
		conn_send_error(&s->conn, m->id, MSG_E_NOT_FOUND, "trace %s is still running and has no "
		                "file %s yet; download it when its process is done", t->id,
		                req->file);
		return true;
	}
	store_path(s->d, t->id, req->file, path, sizeof(path));
	download_start(s, m->id, path, (uint64_t)req->offset);
	return true;
}

void htrace_download(struct session *s, const struct msg *m)
{
	const struct msg_trace_download *req = &m->u.trace_download;
	struct stored *st;
	char path[PATH_MAX];

	if (download_running(s, m))
		return;
	st = visible_stored(s, m->id, req->trace_id);
	if (st == NULL)
		return;
	if (store_file(st, req->file) == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_NOT_FOUND, "trace %s has no file %s", st->id,
		                req->file);
		return;
	}
	store_path(s->d, st->id, req->file, path, sizeof(path));
	download_start(s, m->id, path, (uint64_t)req->offset);
}

void htrace_delete(struct session *s, const struct msg *m)
{
	struct stored *st = visible_stored(s, m->id, m->u.trace_ref.trace_id);
	struct msg r;

	if (st == NULL)
		return;
	msg_init(&r, MSG_TRACE_DELETE_REPLY, m->id);
	r.u.trace_delete_reply.files = (int64_t)st->nfiles;
	r.u.trace_delete_reply.bytes = (int64_t)st->bytes;
	log_info("trace %s deleted by %s", st->id, s->conn.peer.desc);
	store_delete(s->d, st);
	conn_send_msg(&s->conn, &r);
}
