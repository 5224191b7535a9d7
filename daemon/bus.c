/*
 * bus: see bus.h. The session's side of the conn callbacks is here, in
 * the order a session lives them: accept (admission), frame (routing),
 * writable, gone (detach), closed (free); then the deadlines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "bus.h"
#include "conn.h"
#include "download.h"
#include "dyno.h"
#include "dynorpc.h"
#include "handler.h"
#include "log.h"
#include "registry.h"
#include "session.h"
#include "trace.h"
#include "upload.h"

/* A frame from s's peer: a chunk belongs to an upload; JSON is either a
 * Dynolog request or a native message, validated by proto/ and dispatched
 * through the handler table. */
static int on_frame(struct conn *c, const struct frame *f)
{
	struct session *s = session_of(c);
	struct perr err;
	struct msg m;
	int r;

	if (f->kind == FRAME_CHUNK)
		return upload_chunk(s, f);
	if (s->role == SESSION_ROLE_DYNO || dyno_is_request((const char *)f->data, f->len)) {
		dynorpc_handle(s, (const char *)f->data, f->len);
		return c->closing || c->finishing ? -EPIPE : 0;
	}
	r = msg_decode(&m, (const char *)f->data, f->len, &err);
	if (r < 0) {
		s->d->cnt.bad_messages++;
		log_debug("%s: bad message: %s", c->peer.desc, err.msg);
		conn_send_error(c, m.id, r == -EPROTONOSUPPORT ? MSG_E_UNSUPPORTED :
		                MSG_E_BAD_REQUEST, "%s", err.msg);
		msg_deinit(&m);
		return c->closing || c->finishing ? -EPIPE : 0;
	}
	handler_dispatch(s, &m);
	msg_deinit(&m);
	return c->closing || c->finishing ? -EPIPE : 0;
}

/* A write completed: a download reads its next block. */
static void on_writable(struct conn *c)
{
	struct session *s = session_of(c);

	if (s->download != NULL)
		download_pump(s);
}

/* s's conn is closing: nothing may point at s or its conn afterwards. */
static void on_gone(struct conn *c, const char *why)
{
	struct session *s = session_of(c);
	struct daemon *d = s->d;

	if (s->proc != NULL) {
		log_info("unregistered pid %d: %s", (int)s->proc->pid, why);
		registry_remove(d, s->proc); /* clears s->proc */
	}
	upload_session_gone(s);
	download_session_gone(s);
	trace_conn_gone(d, c);
	if (s->prev)
		s->prev->next = s->next;
	else
		d->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	d->nconns--;
}

/* libuv has let go of s's conn: s is freed here and only here. */
static void on_closed(struct conn *c)
{
	free(session_of(c));
}

static const struct conn_ops session_ops = {
	.frame = on_frame,
	.gone = on_gone,
	.closed = on_closed,
	.writable = on_writable,
};

/* Is o's owner s's? Peers with no known uid (remote TCP clients before
 * their token proof) share one owner: together they get one user's share. */
static bool same_owner(const struct session *o, const struct session *s)
{
	if (o->conn.peer.known != s->conn.peer.known)
		return false;
	return !s->conn.peer.known || o->conn.peer.uid == s->conn.peer.uid;
}

/* Refuses s at accept, telling it why (it has sent nothing yet). */
static void refuse(struct session *s, enum msg_errcode code, const char *why, const char *text)
{
	s->d->cnt.conns_refused++;
	log_warn("%s: refused: %s", s->conn.peer.desc, text);
	conn_send_error(&s->conn, 0, code, "%s", text);
	conn_finish(&s->conn, why);
}

int bus_accept(struct daemon *d, uv_stream_t *listener, bool tcp, bool tls)
{
	char text[256];
	struct session *o;
	size_t mine = 0, share;
	struct session *s = calloc(1, sizeof(*s));
	struct peer *peer;
	int r;

	if (s == NULL)
		return UV_ENOMEM;
	s->d = d;
	s->role = SESSION_ROLE_NONE;
	r = conn_init(&s->conn, d->loop, tcp, &d->cfg, &d->cnt, &session_ops, s);
	if (r < 0) {
		free(s);
		return r;
	}
	s->next = d->sessions;
	if (d->sessions)
		d->sessions->prev = s;
	d->sessions = s;
	d->nconns++;
	r = conn_accept(&s->conn, listener, d->tls_open);
	if (r < 0)
		return r; /* closing: on_gone unlinks s, on_closed frees it */
	peer = conn_peer(&s->conn);
	if (tcp) {
		/* A token holder may come from anywhere; without a token, a
		 * loopback peer whose socket has no live owner is refused:
		 * whatever it sent was sent by someone who is no longer there
		 * to be identified. */
		if (!peer->known && d->token_len == 0 && peer->loopback_identity &&
		    peer_is_loopback(peer)) {
			refuse(s, MSG_E_FORBIDDEN, "no owner", "the client's socket could not be "
			       "identified (closed before the daemon accepted it?); a client must stay "
			       "connected until it is answered");
			return 0;
		}
		s->need_auth = d->token_len > 0 && !peer->known;
	}
	if (d->nconns > d->cfg.max_connections) {
		snprintf(text, sizeof(text), "the daemon has %zu connections open, its limit "
		         "(limits.connections); try again later", d->nconns - 1);
		refuse(s, MSG_E_LIMIT, "connection limit", text);
		return 0;
	}
	/* One user may not hold every slot (issue 23, case 8); root, who runs
	 * the daemon, is not counted against a share. */
	for (o = d->sessions; o != NULL && !(peer->known && peer->uid == 0); o = o->next)
		if (o != s && same_owner(o, s))
			mine++;
	share = d->cfg.max_connections_per_uid ? d->cfg.max_connections_per_uid :
	        d->cfg.max_connections / 8 ? d->cfg.max_connections / 8 : 1;
	if (mine >= share) {
		if (peer->known)
			snprintf(text, sizeof(text), "uid %u has %zu connections open, and may have "
			         "%zu (limits.connections_per_uid); close some (a gprofctl left "
			         "running?) or ask the administrator to raise it", (unsigned)peer->uid,
			         mine, share);
		else
			snprintf(text, sizeof(text), "%zu unauthenticated connections are open, and "
			         "%zu may be (limits.connections_per_uid); try again later", mine, share);
		refuse(s, MSG_E_LIMIT, "per-user connection limit", text);
		return 0;
	}
	if (tls && d->tls != NULL) {
		struct perr err;

		if (conn_start_tls(&s->conn, d->tls, &err) < 0) {
			log_warn("%s: %s", peer->desc, err.msg);
			conn_close(&s->conn, err.msg);
			return -ENOMEM;
		}
	}
	d->cnt.conns_accepted++;
	log_debug("connection from %s%s", peer->desc, s->conn.tls ? " (TLS)" : "");
	return conn_start(&s->conn);
}

void bus_close_all(struct daemon *d)
{
	while (d->sessions != NULL)
		conn_close(&d->sessions->conn, "daemon stopping");
}

/* Does s wait for something the daemon will send by itself: a trace it
 * follows, a download, an upload in progress? Such a session is busy,
 * not idle, however long it stays silent. */
static bool session_waits(struct session *s)
{
	const struct trace *t;
	const struct follower *f;

	if (s->download != NULL || s->uploads != NULL || s->proc != NULL)
		return true;
	for (t = s->d->traces; t != NULL; t = t->next)
		for (f = t->followers; f != NULL; f = f->next)
			if (f->c == &s->conn)
				return true;
	return false;
}

void bus_deadlines(struct daemon *d)
{
	uint64_t now = uv_now(d->loop);
	struct session *s, *next;
	struct conn *c;

	for (s = d->sessions; s != NULL; s = next) {
		next = s->next;
		c = &s->conn;
		if (c->closing)
			continue;
		if (!c->finishing && s->role == SESSION_ROLE_NONE &&
		    now - c->since_ms >= d->cfg.hello_timeout_s * 1000) {
			d->cnt.conns_timed_out++;
			log_info("%s: no hello within %llu s (limits.hello_timeout); closing", c->peer.desc,
			         (unsigned long long)d->cfg.hello_timeout_s);
			conn_send_error(c, 0, MSG_E_BAD_REQUEST, "no hello within %llu s "
			                "(limits.hello_timeout); closing the connection",
			                (unsigned long long)d->cfg.hello_timeout_s);
			conn_finish(c, "no hello in time");
		} else if (!c->finishing && s->role != SESSION_ROLE_NONE &&
		           s->role != MSG_ROLE_AGENT &&
		           now - c->active_ms >= d->cfg.idle_timeout_s * 1000 && !session_waits(s)) {
			/* a client (ctl, dyno) that asks nothing and waits for nothing:
			 * registered agents idle by design and are never closed for it */
			d->cnt.conns_timed_out++;
			log_info("%s: idle for %llu s (limits.idle_timeout); closing", c->peer.desc,
			         (unsigned long long)((now - c->active_ms) / 1000));
			conn_send_error(c, 0, MSG_E_LIMIT, "idle for %llu s (limits.idle_timeout); "
			                "closing the connection",
			                (unsigned long long)d->cfg.idle_timeout_s);
			conn_finish(c, "idle");
		} else {
			conn_deadline(c, now);
		}
	}
}
