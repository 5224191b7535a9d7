/*
 * hsession: hello (version agreement, role) and auth (the token proof).
 * Owns the session's role and authentication state (s->role, s->authed,
 * s->nonce). Called by handler_dispatch, before any role check.
 */
#include "auth.h"
#include "daemon.h"
#include "handler.h"
#include "hmac.h"
#include "log.h"

void hsession_hello(struct session *s, const struct msg *m)
{
	const struct msg_hello *h = &m->u.hello;
	struct msg r;

	if (s->role != SESSION_ROLE_NONE) {
		conn_send_error(&s->conn, m->id, MSG_E_BAD_REQUEST, "hello was already sent on this "
		                "connection");
		return;
	}
	if (h->proto_max < GPROF_PROTO_MIN || h->proto_min > GPROF_PROTO_MAX) {
		conn_send_error(&s->conn, m->id, MSG_E_VERSION, "this daemon speaks protocol versions "
		                "%d..%d, the client %lld..%lld; upgrade the older side",
		                GPROF_PROTO_MIN, GPROF_PROTO_MAX, (long long)h->proto_min,
		                (long long)h->proto_max);
		conn_finish(&s->conn, "no common protocol version");
		return;
	}
	s->role = h->role;
	conn_greeted(&s->conn);
	msg_init(&r, MSG_HELLO_REPLY, m->id);
	r.u.hello_reply.proto = h->proto_max < GPROF_PROTO_MAX ? h->proto_max : GPROF_PROTO_MAX;
	r.u.hello_reply.software = "gprofd " GPROF_VERSION;
	r.u.hello_reply.host = s->d->host;
	if (s->need_auth) {
		if (auth_nonce(s->nonce) < 0) {
			conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "no randomness for a nonce");
			conn_finish(&s->conn, "getrandom failed");
			return;
		}
		r.u.hello_reply.auth = MSG_AUTH_HMAC_SHA256;
		r.u.hello_reply.nonce = s->nonce;
	}
	log_debug("%s: hello, %s %s", s->conn.peer.desc, h->role == MSG_ROLE_AGENT ? "agent" : "ctl",
	          h->software ? h->software : "");
	conn_send_msg(&s->conn, &r);
}

void hsession_auth(struct session *s, const struct msg *m)
{
	struct msg r;

	if (!s->need_auth || s->authed) {
		conn_send_error(&s->conn, m->id, MSG_E_BAD_REQUEST, "no authentication was asked for");
		return;
	}
	if (!hmac_verify(s->d->token, s->d->token_len, s->nonce, m->u.auth.proof)) {
		s->d->cnt.auth_failures++;
		log_warn("%s: authentication failed", s->conn.peer.desc);
		conn_send_error(&s->conn, m->id, MSG_E_AUTH_FAILED, "wrong token proof; check that "
		                "--token-file holds the daemon's auth_token_file");
		conn_finish(&s->conn, "authentication failed");
		return;
	}
	s->authed = true;
	s->conn.peer.resolved = true;
	s->conn.peer.admin = true;
	s->conn.peer.known = true;
	s->conn.peer.uid = 0;
	msg_init(&r, MSG_AUTH_REPLY, m->id);
	conn_send_msg(&s->conn, &r);
}
