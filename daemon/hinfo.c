/*
 * hinfo: read-only views: process_list, daemon_status, metrics_query.
 * Owns nothing. Called by the handler table (handler.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "component.h"
#include "handler.h"
#include "hpage.h"
#include "metrics.h"
#include "peer.h"
#include "registry.h"
#include "store.h"

/* A page of the process list (hpage_send). */
static void proc_page(struct msg *r, void *v, size_t n, size_t from, size_t k)
{
	r->u.process_list_reply.procs.v = (struct msg_proc_info *)v + from;
	r->u.process_list_reply.procs.n = k;
	r->u.process_list_reply.next_offset = from + k < n ? (int64_t)(from + k) : 0;
}

void hinfo_process_list(struct session *s, const struct msg *m)
{
	const struct msg_process_list *q = &m->u.process_list;
	struct msg_proc_info *infos;
	int64_t (*ppids)[PROC_PPIDS_MAX], (*gpus)[PROC_GPUS_MAX];
	size_t n = 0;
	struct proc *p;
	struct msg r;

	infos = calloc(s->d->nprocs + 1, sizeof(*infos));
	ppids = calloc(s->d->nprocs + 1, sizeof(*ppids));
	gpus = calloc(s->d->nprocs + 1, sizeof(*gpus));
	if (infos == NULL || ppids == NULL || gpus == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "out of memory");
		goto out;
	}
	for (p = s->d->procs; p != NULL; p = p->next) {
		if (!peer_may(conn_peer(&s->conn), p->uid))
			continue;
		if ((q->job_id && strcmp(q->job_id, p->job_id) != 0) ||
		    (q->pid >= 0 && q->pid != p->pid) || (q->uid >= 0 && q->uid != (int64_t)p->uid))
			continue;
		registry_info(s->d, p, &infos[n], ppids[n], gpus[n]);
		n++;
	}
	/* A page from offset, as many as one frame holds: 10,000 processes do
	 * not fit in one (1 MiB), so the client asks again from next_offset. */
	msg_init(&r, MSG_PROCESS_LIST_REPLY, m->id);
	r.u.process_list_reply.total = (int64_t)n;
	hpage_send(s, &r, infos, n, q->offset < (int64_t)n ? (size_t)q->offset : n, 4096,
	                  proc_page, "process list");
out:
	free(infos);
	free(ppids);
	free(gpus);
}

void hinfo_daemon_status(struct session *s, const struct msg *m)
{
	const struct counters *k = &s->d->cnt;
	const char *names[] = {
		"conns_accepted", "conns_refused", "conns_timed_out", "conns_open", "frames_in",
		"bad_frames",
		"bad_messages", "write_queue_drops", "processes_refused", "traces_refused",
		"traces_started", "uploads_failed", "dyno_requests", "auth_failures",
		"retention_deleted", "kineto_datagrams", "kineto_malformed", "kineto_configs",
		"tls_failures", "traces_done", "traces_partial", "traces_failed",
		"traces_cancelled",
		/* connection memory (conn.h): bytes held now, their peak, the
		 * conns closed and refused by its budgets, the times a conn was
		 * not read for its unread replies, heap trims; and what the
		 * registry's processes hold */
		"conn_bytes", "conn_bytes_peak", "conns_memory_closed", "conns_memory_refused",
		"conns_backlogged", "heap_trims", "proc_bytes",
	};
	double values[] = {
		(double)k->conns_accepted, (double)k->conns_refused, (double)k->conns_timed_out,
		(double)s->d->nconns,
		(double)k->frames_in, (double)k->bad_frames, (double)k->bad_messages,
		(double)k->write_queue_drops, (double)k->processes_refused,
		(double)k->traces_refused, (double)k->traces_started, (double)k->uploads_failed,
		(double)k->dyno_requests, (double)k->auth_failures, (double)k->retention_deleted,
		(double)k->kineto_datagrams, (double)k->kineto_malformed, (double)k->kineto_configs,
		(double)k->tls_failures, (double)k->traces_ended[MSG_TRACE_DONE],
		(double)k->traces_ended[MSG_TRACE_PARTIAL], (double)k->traces_ended[MSG_TRACE_FAILED],
		(double)k->traces_ended[MSG_TRACE_CANCELLED],
		(double)k->conn_bytes, (double)k->conn_bytes_peak, (double)k->conns_memory_closed,
		(double)k->conns_memory_refused, (double)k->conns_backlogged, (double)k->heap_trims,
		(double)k->proc_bytes,
	};
	struct component_view cv;
	struct msg r;

	msg_init(&r, MSG_DAEMON_STATUS_REPLY, m->id);
	r.u.daemon_status_reply.version = GPROF_VERSION;
	r.u.daemon_status_reply.host = s->d->host;
	r.u.daemon_status_reply.pid = getpid();
	r.u.daemon_status_reply.started_us = s->d->started_us;
	r.u.daemon_status_reply.processes = (int64_t)s->d->nprocs;
	r.u.daemon_status_reply.pending_traces = (int64_t)s->d->pending_traces;
	r.u.daemon_status_reply.stored_traces = (int64_t)store_count(s->d);
	r.u.daemon_status_reply.stored_bytes = (int64_t)store_bytes(s->d);
	r.u.daemon_status_reply.counters.names = names;
	r.u.daemon_status_reply.counters.values = values;
	r.u.daemon_status_reply.counters.n = sizeof(names) / sizeof(names[0]);
	component_fill(s->d, &cv, &r.u.daemon_status_reply);
	conn_send_msg(&s->conn, &r);
}

void hinfo_metrics_query(struct session *s, const struct msg *m)
{
	metrics_query(s->d, &s->conn, m);
}
