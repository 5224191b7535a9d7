/*
 * bus: see bus.h. The session's side of the conn callbacks is here, in
 * the order a session lives them: accept (admission), frame (routing),
 * writable, gone (detach), closed (free); then the deadlines.
 *
 * Memory: each session's conn is charged to its owner's share (struct
 * conn_share, one per uid with a connection, freed with its last), so the
 * connections of one user together stay within
 * limits.connection_memory_per_uid and all within limits.connection_memory
 * (conn.c closes the one that grows past them; a new one is refused here).
 * Once a second, when what they hold fell by BUS_TRIM_BYTES from its
 * highest since the last time, the freed heap is given back (malloc_trim):
 * glibc returns only the top of its heap by itself, and the replies of a
 * few hundred connections that never read them, freed when they close,
 * stayed resident until the daemon restarted (issue 43, item 2).
 */
#include <errno.h>
#include <malloc.h>
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

/* Connection memory freed since its highest past which the heap is
 * trimmed (bus_deadlines). */
#define BUS_TRIM_BYTES (1u << 20)

/* c no longer counts in its share (c->held is 0): the last of an owner's
 * conns frees the share. */
static void share_release(struct daemon *d, struct conn *c)
{
	struct conn_share **pp, *sh = c->share;

	c->share = NULL;
	if (sh == NULL || --sh->conns > 0)
		return;
	for (pp = &d->shares; *pp != NULL; pp = &(*pp)->next)
		if (*pp == sh) {
			*pp = sh->next;
			break;
		}
	free(sh);
}

/* The share of peer's owner (made if it has none): a known uid's own, or
 * the one every peer with no known uid has together; root's is bounded
 * only by the daemon's total. NULL when out of memory. */
static struct conn_share *share_of(struct daemon *d, const struct peer *peer)
{
	struct conn_share *sh;

	for (sh = d->shares; sh != NULL; sh = sh->next)
		if (sh->known == peer->known && (!peer->known || sh->uid == peer->uid))
			return sh;
	sh = calloc(1, sizeof(*sh));
	if (sh == NULL)
		return NULL;
	sh->known = peer->known;
	sh->uid = peer->known ? peer->uid : (uid_t)-1;
	sh->unbounded = peer->known && peer->uid == 0;
	sh->next = d->shares;
	d->shares = sh;
	return sh;
}

/* libuv has let go of s's conn: s is freed here and only here. */
static void on_closed(struct conn *c)
{
	struct session *s = session_of(c);

	share_release(s->d, c);
	free(s);
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

int bus_accept(struct daemon *d, uv_stream_t *listener, unsigned how)
{
	bool tcp = how & BUS_TCP, tls = how & BUS_TLS;
	char text[256];
	struct conn_share *share;
	struct session *o;
	const char *over;
	size_t mine = 0, most;
	struct session *s = calloc(1, sizeof(*s));
	struct peer *peer;
	int r;

	if (s == NULL)
		return UV_ENOMEM;
	s->d = d;
	s->role = SESSION_ROLE_NONE;
	r = conn_init(&s->conn, d->loop, tcp, &d->cfg, &d->cnt, &session_ops, s, sizeof(*s));
	if (r < 0) {
		free(s);
		return r;
	}
	s->next = d->sessions;
	if (d->sessions)
		d->sessions->prev = s;
	d->sessions = s;
	d->nconns++;
	r = conn_accept(&s->conn, listener, how & BUS_TLS_SERVED);
	if (r < 0)
		return r; /* closing: on_gone unlinks s, on_closed frees it */
	peer = conn_peer(&s->conn);
	share = share_of(d, peer);
	if (share == NULL) {
		conn_close(&s->conn, "out of memory");
		return UV_ENOMEM;
	}
	conn_charge(&s->conn, share);
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
	most = d->cfg.max_connections_per_uid ? d->cfg.max_connections_per_uid :
	       d->cfg.max_connections / 8 ? d->cfg.max_connections / 8 : 1;
	if (mine >= most) {
		if (peer->known)
			snprintf(text, sizeof(text), "uid %u has %zu connections open, and may have "
			         "%zu (limits.connections_per_uid); close some (a gprofctl left "
			         "running?) or ask the administrator to raise it", (unsigned)peer->uid,
			         mine, most);
		else
			snprintf(text, sizeof(text), "%zu unauthenticated connections are open, and "
			         "%zu may be (limits.connections_per_uid); try again later", mine, most);
		refuse(s, MSG_E_LIMIT, "per-user connection limit", text);
		return 0;
	}
	/* what this user's connections hold (replies they have not read) may
	 * not grow by another one, nor may every connection's */
	if ((over = conn_over_budget(share, &d->cfg, &d->cnt, 0)) != NULL) {
		d->cnt.conns_memory_refused++;
		snprintf(text, sizeof(text), "%s connections hold %llu bytes (%s; the daemon's "
		         "hold %llu); read the replies of those open, or close some, and try again",
		         peer->known ? "this user's" : "unidentified", (unsigned long long)share->bytes,
		         over, (unsigned long long)d->cnt.conn_bytes);
		refuse(s, MSG_E_LIMIT, "connection memory", text);
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

/* Gives the heap's free pages back once the connections' memory fell by
 * BUS_TRIM_BYTES from its highest since the last time (their own count,
 * not the resident size: a trim walks the heap under its lock, so it runs
 * after a burst was freed, not every second). */
static void trim_heap(struct daemon *d)
{
	struct counters *k = &d->cnt;

	if (k->conn_bytes_high - k->conn_bytes < BUS_TRIM_BYTES)
		return;
	malloc_trim(0);
	k->heap_trims++;
	k->conn_bytes_high = k->conn_bytes;
}

void bus_deadlines(struct daemon *d)
{
	uint64_t now = uv_now(d->loop);
	struct session *s, *next;
	struct conn *c;

	trim_heap(d);
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
