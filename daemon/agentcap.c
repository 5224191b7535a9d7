/*
 * agentcap: see agentcap.h. Every call sends at most one message to the
 * process's connection, and changes no state of the engine's.
 */
#include <stdio.h>

#include "agentcap.h"
#include "conn.h"
#include "msg.h"
#include "registry.h"
#include "trace.h"

/* capture_start with t's window and the daemon's byte limit. */
static void agentcap_start(struct trace *t, struct tproc *tp)
{
	struct msg m;

	msg_init(&m, MSG_CAPTURE_START, 0);
	m.u.capture_start.trace_id = t->id;
	m.u.capture_start.win = t->win;
	m.u.capture_start.win.iteration_range = t->iteration_range[0] ? t->iteration_range : NULL;
	m.u.capture_start.max_bytes = (int64_t)t->d->cfg.max_trace_bytes;
	conn_send_msg(tp->proc->conn, &m);
}

/* capture_cancel, when the agent's connection is still there. */
static void agentcap_cancel(struct trace *t, struct tproc *tp, const char *why)
{
	struct msg m;

	if (tp->proc->conn == NULL)
		return;
	msg_init(&m, MSG_CAPTURE_CANCEL, 0);
	m.u.capture_cancel.trace_id = t->id;
	m.u.capture_cancel.reason = why;
	conn_send_msg(tp->proc->conn, &m);
}

/* An agent stuck short of its window, or in its upload. */
static void agentcap_timed_out(const struct trace *t, const struct tproc *tp, char *why,
                               size_t size)
{
	snprintf(why, size, "timed out after %lld s while %s (raise --timeout, or check that the "
	         "process reaches the requested iterations)", (long long)(t->timeout_ms / 1000),
	         msg_tstate_name(tp->state));
}

const struct backend agentcap_backend = {
	.name = "agent",
	.kind = MSG_KIND_AGENT,
	.counts_steps = true,
	.start = agentcap_start,
	.cancel = agentcap_cancel,
	.timed_out = agentcap_timed_out,
};
