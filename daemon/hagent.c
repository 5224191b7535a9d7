/*
 * hagent: what agents send about themselves: register, heartbeat and
 * capture_status. (Their uploads are upload.c's.) Owns nothing: a
 * registered process is the registry's, and its session points at it
 * (s->proc); it is registered with the agent's capture back end
 * (agentcap.c). Called by the handler table (handler.c) for agent sessions.
 */
#include <errno.h>

#include "agentcap.h"
#include "clock.h"
#include "handler.h"
#include "log.h"
#include "metrics.h"
#include "peer.h"
#include "registry.h"
#include "trace.h"

void hagent_register(struct session *s, const struct msg *m)
{
	const struct msg_register *r = &m->u.reg;
	struct msg_register copy = *r;
	int32_t anc[PROC_PPIDS_MAX];
	int64_t ancv[PROC_PPIDS_MAX];
	struct msg reply;
	struct proc *p;
	int n, i, rc;

	if (s->proc != NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_BAD_REQUEST, "this connection already registered "
		                "pid %d", (int)s->proc->pid);
		return;
	}
	/* Only a Unix peer has a pid we can trust. */
	if (s->conn.tcp || s->conn.peer.pid <= 0) {
		conn_send_error(&s->conn, m->id, MSG_E_FORBIDDEN, "agents register over the Unix socket");
		return;
	}
	if (r->pid != s->conn.peer.pid)
		log_debug("register: message says pid %lld, credentials say %d; using %d",
		          (long long)r->pid, (int)s->conn.peer.pid, (int)s->conn.peer.pid);
	/* Ancestors come from /proc, not from the message, for the same reason. */
	n = peer_ancestors(s->conn.peer.pid, anc, PROC_PPIDS_MAX);
	for (i = 0; i < n; i++)
		ancv[i] = anc[i];
	if (n > 0) {
		copy.ppids.v = ancv;
		copy.ppids.n = (size_t)n;
	}
	rc = registry_add(s->d, &agentcap_backend, &s->conn, s->conn.peer.pid, s->conn.peer.uid, &copy, &p);
	if (rc == -EEXIST) {
		conn_send_error(&s->conn, m->id, MSG_E_BUSY, "pid %d is already registered on another "
		                "connection (one agent per process)", (int)s->conn.peer.pid);
		return;
	}
	if (rc == -ENOSPC) {
		conn_send_error(&s->conn, m->id, MSG_E_LIMIT, "%zu processes are registered, the limit "
		                "(limits.processes)", s->d->nprocs);
		return;
	}
	if (rc < 0) {
		conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "out of memory");
		return;
	}
	s->proc = p;
	p->ref = &s->proc;
	/* an unknown rank is said as such, never as -1 (issue 26) */
	if (p->rank >= 0)
		log_info("registered pid %d (uid %u, job %s, rank %lld)", (int)p->pid,
		         (unsigned)p->uid, *p->job_id ? p->job_id : "none", (long long)p->rank);
	else
		log_info("registered pid %d (uid %u, job %s, no rank)", (int)p->pid, (unsigned)p->uid,
		         *p->job_id ? p->job_id : "none");
	metrics_proc_update(s->d, p);
	msg_init(&reply, MSG_REGISTER_REPLY, m->id);
	reply.u.register_reply.heartbeat_ms = (int64_t)s->d->cfg.heartbeat_ms;
	conn_send_msg(&s->conn, &reply);
}

void hagent_heartbeat(struct session *s, const struct msg *m)
{
	if (s->proc == NULL)
		return;
	s->proc->steps = m->u.heartbeat.steps;
	s->proc->heartbeat_us = clock_now_us();
	s->proc->last_step_us = m->u.heartbeat.last_step_us;
	s->proc->median_step_us = m->u.heartbeat.median_step_us;
	metrics_proc_update(s->d, s->proc);
}

void hagent_capture_status(struct session *s, const struct msg *m)
{
	if (s->proc == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_FORBIDDEN, "register before reporting captures");
		return;
	}
	trace_capture_status(s->d, s->proc, &m->u.capture_status);
}
