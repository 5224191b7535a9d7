/*
 * handler: see handler.h. The table is indexed by message type; a type
 * with no entry is one clients never send (replies, events). Owns the
 * table. Called by bus.c (handler_dispatch) only: it calls the handler
 * files, none calls it back (their shared helper is hpage.c).
 */
#include "handler.h"
#include "log.h"
#include "upload.h"

#define R_AGENT (1u << MSG_ROLE_AGENT)
#define R_CTL (1u << MSG_ROLE_CTL)
#define R_ANY (R_AGENT | R_CTL)

struct handler {
	void (*fn)(struct session *s, const struct msg *m);
	unsigned roles;
};

static const struct handler handlers[MSG_TYPE_COUNT] = {
	[MSG_REGISTER] = { hagent_register, R_AGENT },
	[MSG_HEARTBEAT] = { hagent_heartbeat, R_AGENT },
	[MSG_CAPTURE_STATUS] = { hagent_capture_status, R_AGENT },
	[MSG_UPLOAD_BEGIN] = { upload_begin, R_AGENT },
	[MSG_UPLOAD_END] = { upload_end, R_AGENT },
	[MSG_TRACE_START] = { htrace_start, R_CTL },
	[MSG_TRACE_STATUS] = { htrace_status, R_CTL },
	[MSG_TRACE_CANCEL] = { htrace_cancel, R_CTL },
	[MSG_TRACE_LIST] = { htrace_list, R_CTL },
	[MSG_TRACE_DOWNLOAD] = { htrace_download, R_CTL },
	[MSG_TRACE_DELETE] = { htrace_delete, R_CTL },
	[MSG_PROCESS_LIST] = { hinfo_process_list, R_CTL },
	[MSG_DAEMON_STATUS] = { hinfo_daemon_status, R_ANY },
	[MSG_METRICS_QUERY] = { hinfo_metrics_query, R_CTL },
};

void handler_dispatch(struct session *s, const struct msg *m)
{
	const struct handler *h = &handlers[m->type];

	if (m->type == MSG_HELLO) {
		hsession_hello(s, m);
		return;
	}
	if (s->role == SESSION_ROLE_NONE || s->role == SESSION_ROLE_DYNO) {
		conn_send_error(&s->conn, m->id, MSG_E_BAD_REQUEST, "send hello first");
		return;
	}
	if (m->type == MSG_AUTH) {
		hsession_auth(s, m);
		return;
	}
	if (s->need_auth && !s->authed) {
		conn_send_error(&s->conn, m->id, MSG_E_AUTH_REQUIRED, "authenticate first: answer the "
		                "nonce of hello_reply with an auth message");
		return;
	}
	if (h->fn == NULL || !(h->roles & (1u << s->role))) {
		conn_send_error(&s->conn, m->id, MSG_E_FORBIDDEN, "a %s may not send %s",
		                s->role == MSG_ROLE_AGENT ? "agent" : "ctl",
		                msg_type_name(m->type));
		return;
	}
	h->fn(s, m);
}
