/*
 * conn: see conn.h. Called by its owner (bus.c, handlers through their
 * session, and the modules that send to a conn they were given:
 * agentcap.c to agents, trace.c to followers, download.c, upload.c,
 * metrics.c) and by libuv.
 *
 * Memory per connection is bounded by construction: the bytes a reply
 * costs (its buffer's capacity plus its write request) are counted in
 * c->queued, and reading stops while more than CONN_BACKLOG_BYTES of
 * replies wait unread, so a client that pipelines requests and never reads
 * the answers stalls itself instead of growing the daemon (issue 23,
 * case 9). The frames that remain of the read that crossed the mark are
 * not handled then but kept as they came (c->stash, at most one read) and
 * handled, in order, once the replies are read: before, one 64 KiB read of
 * 1,500 small requests queued 3.8 MB of replies, 300 such connections of
 * one user 1 GB (issue 43, item 2). What every conn holds (c->held) is
 * charged to its owner's share and the daemon's total, whose budgets
 * (limits.connection_memory{,_per_uid}) close the conn that would pass
 * them; the hard cap per conn, limits.write_queue_bytes, counts a drop.
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "log.h"
#include "tlsio.h"

struct wreq {
	uv_write_t req;
	struct conn *c;
	uv_buf_t buf;
	size_t cost;  /* what it holds: counted in c->queued */
};

/* Replies waiting to be read past which the connection is not read. */
#define CONN_BACKLOG_BYTES (256u * 1024)
/* A reply this small to a conn with nothing queued goes even past the
 * budgets: the one error that says why a conn is refused or closed (at
 * most this much per conn, and counted). */
#define CONN_GRACE_BYTES 4096u

const char *conn_over_budget(const struct conn_share *share, const struct config *cfg,
                             const struct counters *cnt, uint64_t n)
{
	uint64_t per = cfg->max_conn_memory_per_uid ? cfg->max_conn_memory_per_uid :
	               cfg->max_conn_memory / 8;

	if (cnt->conn_bytes + n > cfg->max_conn_memory)
		return "limits.connection_memory";
	if (share != NULL && !share->unbounded && share->bytes + n > per)
		return "limits.connection_memory_per_uid";
	return NULL;
}

/* Brings what c is charged for to what it holds now. */
static void account(struct conn *c)
{
	size_t now = c->fixed + c->queued + c->dec.buf_cap + c->stash.cap +
	             (c->tls != NULL ? CONN_TLS_BYTES : 0);

	if (c->share == NULL || now == c->held)
		return;
	c->cnt->conn_bytes = c->cnt->conn_bytes - c->held + now;
	c->share->bytes = c->share->bytes - c->held + now;
	c->held = now;
	if (c->cnt->conn_bytes > c->cnt->conn_bytes_high)
		c->cnt->conn_bytes_high = c->cnt->conn_bytes;
	if (c->cnt->conn_bytes > c->cnt->conn_bytes_peak)
		c->cnt->conn_bytes_peak = c->cnt->conn_bytes;
}

void conn_charge(struct conn *c, struct conn_share *share)
{
	c->share = share;
	share->conns++;
	account(c);
}

/* c passed a budget growing (why); closed, said and counted. */
static void over_budget(struct conn *c, const char *why)
{
	c->cnt->conns_memory_closed++;
	log_warn("%s: its connections hold %llu bytes, the daemon's %llu (%s); closing this one",
	         c->peer.desc, (unsigned long long)c->share->bytes,
	         (unsigned long long)c->cnt->conn_bytes, why);
	conn_close(c, why);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Reads from c exactly when nothing holds it: upload backpressure (paused),
 * its own unread replies (backlogged) or frames read before them, or its
 * end (finishing, closing). */
static void reading_update(struct conn *c)
{
	bool want = !c->paused && !c->backlogged && !c->finishing && !c->closing &&
	            c->stash_at == c->stash.len;

	if (want == c->reading)
		return;
	c->reading = want;
	if (want)
		uv_read_start(&c->u.s, on_alloc, on_read);
	else
		uv_read_stop(&c->u.s);
}

/* Every read lands here and is consumed before read_cb returns, so one
 * buffer serves all connections. */
static char read_buf[64 * 1024];

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	buf->base = read_buf;
	buf->len = sizeof(read_buf);
}

/* libuv has called back every write: the owner may free c now. */
static void on_closed(uv_handle_t *h)
{
	struct conn *c = h->data;

	frame_decoder_deinit(&c->dec);
	tlsio_free(c->tls);
	c->tls = NULL;
	pbuf_deinit(&c->stash);
	c->fixed = 0;
	account(c); /* nothing left: c->held is 0 */
	c->ops->closed(c);
}

void conn_close(struct conn *c, const char *why)
{
	if (c->closing)
		return;
	c->closing = true;
	log_debug("connection %s closed: %s", c->peer.desc, why);
	c->ops->gone(c, why);
	uv_close(&c->u.h, on_closed);
}

static int send_raw(struct conn *c, struct pbuf *b);
static void stash_deliver(struct conn *c);

void conn_finish(struct conn *c, const char *why)
{
	if (c->closing || c->finishing)
		return;
	if (c->tls != NULL && tlsio_handshake_done(c->tls)) {
		struct pbuf out;

		pbuf_init(&out, 0);
		tlsio_close(c->tls, &out);
		send_raw(c, &out);
		if (c->closing)
			return;
	}
	c->finishing = true;
	c->finish_ms = uv_now(c->u.h.loop);
	reading_update(c);
	log_debug("connection %s finishing: %s", c->peer.desc, why);
	if (c->queued == 0)
		conn_close(c, why);
}

static void on_written(uv_write_t *req, int status)
{
	struct wreq *w = req->data;
	struct conn *c = w->c;

	c->queued -= w->cost;
	free(w->buf.base);
	free(w);
	c->active_ms = uv_now(c->u.h.loop);
	if (status < 0) {
		conn_close(c, uv_strerror(status));
		return;
	}
	if (c->finishing && c->queued == 0) {
		conn_close(c, "finished");
		return;
	}
	if (c->backlogged && c->queued <= CONN_BACKLOG_BYTES / 2) {
		c->backlogged = false;
		stash_deliver(c);
		if (c->closing)
			return;
		reading_update(c);
	}
	account(c);
	if (!c->closing)
		c->ops->writable(c);
}

/* Queues the bytes of b as they are (ciphertext on a TLS connection). */
static int send_raw(struct conn *c, struct pbuf *b)
{
	struct wreq *w;
	size_t cost;
	int r;

	if (c->closing || b->len == 0) {
		pbuf_deinit(b);
		return c->closing ? -EPIPE : 0;
	}
	/* what the reply holds until written, not only what it says */
	cost = b->cap + sizeof(*w);
	if (c->queued + cost > c->cfg->max_write_queue_bytes) {
		c->cnt->write_queue_drops++;
		log_warn("%s: %zu bytes queued and not read; disconnecting (limits.write_queue_bytes)",
		         c->peer.desc, c->queued + cost);
		pbuf_deinit(b);
		conn_close(c, "write queue full");
		return -ENOBUFS;
	}
	if (c->share != NULL && !(c->queued == 0 && cost <= CONN_GRACE_BYTES)) {
		const char *why = conn_over_budget(c->share, c->cfg, c->cnt, cost);

		if (why != NULL) {
			pbuf_deinit(b);
			over_budget(c, why);
			return -ENOBUFS;
		}
	}
	w = malloc(sizeof(*w));
	if (w == NULL) {
		pbuf_deinit(b);
		conn_close(c, "out of memory");
		return -ENOMEM;
	}
	w->c = c;
	w->req.data = w;
	w->cost = cost;
	w->buf = uv_buf_init((char *)b->data, (unsigned)b->len);
	b->data = NULL; /* transferred */
	b->len = b->cap = 0;
	c->queued += cost;
	account(c);
	r = uv_write(&w->req, &c->u.s, &w->buf, 1, on_written);
	if (r < 0) {
		c->queued -= cost;
		account(c);
		free(w->buf.base);
		free(w);
		conn_close(c, uv_strerror(r));
		return r;
	}
	if (!c->backlogged && c->queued > CONN_BACKLOG_BYTES && !c->streaming) {
		/* said once, and only when the kernel holds no more of it either */
		if (!c->told_backlog && uv_stream_get_write_queue_size(&c->u.s) > 0)
			log_info("%s: %zu bytes of replies not read; its requests are not read until "
			         "it reads them", c->peer.desc, c->queued);
		c->told_backlog = c->told_backlog || uv_stream_get_write_queue_size(&c->u.s) > 0;
		c->backlogged = true;
		c->cnt->conns_backlogged++;
		reading_update(c);
	}
	return 0;
}

int conn_send(struct conn *c, struct pbuf *b)
{
	struct perr err;
	struct pbuf out;
	int r;

	if (c->tls == NULL || c->closing || b->len == 0)
		return send_raw(c, b);
	/* the records add 22-29 bytes per 16 KiB */
	pbuf_init(&out, b->len + b->len / 64 + 64 * 1024);
	r = tlsio_write(c->tls, b->data, b->len, &out, &err);
	pbuf_deinit(b);
	if (r < 0) {
		pbuf_deinit(&out);
		log_info("%s: %s; closing the connection", c->peer.desc, err.msg);
		conn_close(c, err.msg);
		return r;
	}
	return send_raw(c, &out);
}

int conn_send_msg(struct conn *c, const struct msg *m)
{
	struct perr err;
	struct pbuf b;
	int r;

	pbuf_init(&b, 0);
	r = msg_encode(&b, m, &err);
	if (r < 0) {
		log_err("cannot encode %s for %s: %s", msg_type_name(m->type), c->peer.desc,
		        err.msg);
		pbuf_deinit(&b);
		/* a reply that cannot go: the request is answered all the same */
		if (m->id != 0 && m->type != MSG_ERROR)
			conn_send_error(c, m->id, MSG_E_INTERNAL, "the reply (%s) could not be sent: %s",
			                msg_type_name(m->type), err.msg);
		return r;
	}
	return conn_send(c, &b);
}

void conn_send_error(struct conn *c, uint64_t id, enum msg_errcode code, const char *fmt, ...)
{
	char text[1024];
	struct pbuf b;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	pbuf_init(&b, 0);
	if (msg_encode_error(&b, id, code, "%s", text) == 0)
		conn_send(c, &b);
	else
		pbuf_deinit(&b);
}

/* Writes v little-endian at p. */
static void put_word(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* Keeps f, as it came on the wire (a JSON frame's header and text; a
 * chunk's header, its transfer and offset, and its data), to be handled
 * once c's replies are read: so the stash holds no more than the read it
 * came in. 0 or -ENOMEM (c is then closing). */
static int stash_frame(struct conn *c, const struct frame *f)
{
	uint8_t h[FRAME_CHUNK_PREFIX] = { 0 };
	uint32_t word = (uint32_t)f->len;
	uint64_t off = htole64(f->offset);
	size_t n = FRAME_HDR_SIZE;

	if (c->stash_at == c->stash.len) { /* empty: start afresh */
		c->stash.len = 0;
		c->stash_at = 0;
	}
	if (f->kind == FRAME_CHUNK) {
		word = FRAME_CHUNK_BIT | (uint32_t)(FRAME_CHUNK_HDR_SIZE + f->len);
		put_word(h + 4, f->transfer);
		memcpy(h + 12, &off, 8);
		n = FRAME_CHUNK_PREFIX;
	}
	put_word(h, word);
	if (pbuf_append(&c->stash, h, n) < 0 || pbuf_append(&c->stash, f->data, f->len) < 0) {
		conn_close(c, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* The next frame kept in c's stash, into f (pointing into the stash). */
static void stash_next(struct conn *c, struct frame *f)
{
	const uint8_t *p = c->stash.data + c->stash_at;
	uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	             (uint32_t)p[3] << 24;

	memset(f, 0, sizeof(*f));
	if (h & FRAME_CHUNK_BIT) {
		f->kind = FRAME_CHUNK;
		f->transfer = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
		              (uint32_t)p[7] << 24;
		memcpy(&f->offset, p + 12, 8);
		f->offset = le64toh(f->offset);
		f->len = (h & ~FRAME_CHUNK_BIT) - FRAME_CHUNK_HDR_SIZE;
		f->data = p + FRAME_CHUNK_PREFIX;
		c->stash_at += FRAME_CHUNK_PREFIX + f->len;
	} else {
		f->kind = FRAME_JSON;
		f->len = h;
		f->data = p + FRAME_HDR_SIZE;
		c->stash_at += FRAME_HDR_SIZE + f->len;
	}
}

/* Hands the owner the frames kept while c's replies waited, in the order
 * they came, until c is backlogged again or ends; an emptied stash is
 * freed. A frame the owner refuses ends c as a refused one read would. */
static void stash_deliver(struct conn *c)
{
	struct frame f;
	int r;

	while (c->stash_at < c->stash.len && !c->backlogged && !c->closing && !c->finishing) {
		stash_next(c, &f);
		r = c->ops->frame(c, &f);
		if (r < 0 && !c->closing && !c->finishing)
			conn_finish(c, "a frame was refused");
	}
	if (c->stash_at == c->stash.len && c->stash.cap > 0) {
		pbuf_deinit(&c->stash);
		c->stash_at = 0;
	}
	account(c);
}

static int on_frame(void *ud, const struct frame *f)
{
	struct conn *c = ud;

	c->cnt->frames_in++;
	c->active_ms = uv_now(c->u.h.loop);
	/* past the backlog mark, and after any frame kept then: kept */
	if (c->backlogged || c->stash_at < c->stash.len)
		return stash_frame(c, f);
	return c->ops->frame(c, f);
}

/* Plaintext from the peer, straight from the socket or out of TLS. */
static int on_plain(void *ud, const char *data, size_t n)
{
	struct conn *c = ud;
	struct perr err;
	int r;

	size_t before = c->held;

	r = frame_decoder_feed(&c->dec, data, n, on_frame, c, &err);
	if (!frame_decoder_partial(&c->dec))
		c->frame_ms = 0;
	else if (c->frame_ms == 0)
		c->frame_ms = uv_now(c->u.h.loop);
	if (!c->closing) {
		const char *why;

		/* a partial frame's buffer, frames kept: charged as they grow */
		account(c);
		if (c->held > before && c->share != NULL &&
		    (why = conn_over_budget(c->share, c->cfg, c->cnt, 0)) != NULL) {
			over_budget(c, why);
			return -EPIPE;
		}
	}
	if (r < 0 && !c->closing && !c->finishing) {
		c->cnt->bad_frames++;
		log_info("%s: %s; closing the connection", c->peer.desc, err.msg);
		conn_send_error(c, 0, r == -EMSGSIZE ? MSG_E_LIMIT : MSG_E_BAD_REQUEST,
		                "%s; closing the connection", err.msg);
		conn_finish(c, err.msg);
	}
	return c->closing || c->finishing ? -EPIPE : 0;
}

/* Ciphertext from a TLS peer. A failed handshake is logged and counted;
 * a peer that does not speak TLS at all (gprofctl without --tls, dyno) is
 * told so in its own framing before the connection closes. */
static void on_cipher(struct conn *c, const char *data, size_t n)
{
	bool was_done = tlsio_handshake_done(c->tls);
	struct perr err;
	struct pbuf out;
	int r;

	pbuf_init(&out, 0);
	r = tlsio_feed(c->tls, data, n, on_plain, c, &out, &err);
	if (out.len > 0 && !c->closing)
		send_raw(c, &out);
	else
		pbuf_deinit(&out);
	if (!was_done && tlsio_handshake_done(c->tls) && !c->closing)
		log_debug("%s: %s", c->peer.desc, tlsio_describe(c->tls));
	if (r == 1) {
		conn_close(c, "peer closed");
	} else if (r < 0 && r != -EPIPE && !c->closing && !c->finishing) {
		c->cnt->tls_failures++;
		log_info("%s: %s; closing the connection", c->peer.desc, err.msg);
		tlsio_free(c->tls); /* nothing more goes out encrypted */
		c->tls = NULL;
		account(c);
		if (r == -EPROTONOSUPPORT) /* now in the peer's own, plain framing */
			conn_send_error(c, 0, MSG_E_BAD_REQUEST, "this port speaks TLS (tls.listen): "
			                "use gprofctl --tls, or the daemon's plain tcp port");
		conn_finish(c, err.msg);
	}
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *c = s->data;

	if (nread == 0)
		return;
	if (nread < 0) {
		conn_close(c, nread == UV_EOF ? (frame_decoder_partial(&c->dec) ?
		           "peer closed in the middle of a frame" : "peer closed") :
		           uv_strerror((int)nread));
		return;
	}
	if (c->tls != NULL) {
		on_cipher(c, buf->base, (size_t)nread);
		return;
	}
	/* A TLS ClientHello (record type 22, version 3.x, handshake type 1 at
	 * byte 5) as the first bytes on the plain port: say where TLS is served,
	 * instead of waiting for a frame that never comes. No JSON frame has a
	 * control character at byte 5, so no request is mistaken for one. */
	if (c->tcp && !c->greeted && !frame_decoder_partial(&c->dec) &&
	    nread >= 6 && buf->base[0] == 22 && buf->base[1] == 3 && buf->base[5] == 1) {
		c->cnt->tls_failures++;
		log_info("%s: a TLS handshake on the plain tcp port (TLS is served on tls.listen%s); "
		         "closing", c->peer.desc, c->tls_served ? "" : ", which is off");
		/* the client reads this as "not TLS", and says so */
		conn_send_error(c, 0, MSG_E_BAD_REQUEST, "this is gprofd's plain tcp port; TLS is "
		                "served on tls.listen");
		conn_finish(c, "TLS on the plain port");
		return;
	}
	on_plain(c, buf->base, (size_t)nread);
}

void conn_pause(struct conn *c)
{
	if (!c->paused && !c->closing) {
		c->paused = true;
		reading_update(c);
	}
}

void conn_resume(struct conn *c)
{
	if (c->paused && !c->closing && !c->finishing) {
		c->paused = false;
		if (c->frame_ms)
			c->frame_ms = uv_now(c->u.h.loop); /* the pause was ours */
		reading_update(c);
	}
}

void conn_greeted(struct conn *c)
{
	c->greeted = true;
}

void conn_streaming(struct conn *c, bool on)
{
	c->streaming = on;
}

void *conn_steal_frame(struct conn *c)
{
	return frame_decoder_steal(&c->dec);
}

int conn_fileno(const struct conn *c)
{
	uv_os_fd_t fd;

	return uv_fileno(&c->u.h, &fd) == 0 ? fd : -1;
}

void conn_deadline(struct conn *c, uint64_t now)
{
	uint64_t limit = c->cfg->frame_timeout_s * 1000;

	if (c->closing)
		return;
	if (c->finishing) {
		/* its last replies (the reason it is closed) wait for it to read
		 * them; a client that never does is cut, or it would hold its
		 * slot and its replies for ever */
		if (now - c->finish_ms >= limit) {
			c->cnt->conns_timed_out++;
			log_info("%s: its last %zu bytes not read within %llu s "
			         "(limits.frame_timeout); cut", c->peer.desc, c->queued,
			         (unsigned long long)c->cfg->frame_timeout_s);
			conn_close(c, "last replies not read in time");
		}
		return;
	}
	if (c->frame_ms && !c->paused && !c->backlogged && now - c->frame_ms >= limit) {
		c->cnt->conns_timed_out++;
		log_info("%s: a frame begun %llu s ago is still incomplete "
		         "(limits.frame_timeout); closing", c->peer.desc,
		         (unsigned long long)((now - c->frame_ms) / 1000));
		conn_close(c, "frame not complete in time");
	}
}

int conn_init(struct conn *c, uv_loop_t *loop, bool tcp, const struct config *cfg,
              struct counters *cnt, const struct conn_ops *ops, void *data, size_t fixed)
{
	int r;

	memset(c, 0, sizeof(*c));
	c->tcp = tcp;
	c->cfg = cfg;
	c->cnt = cnt;
	c->ops = ops;
	c->data = data;
	c->fixed = fixed;
	c->since_ms = c->active_ms = uv_now(loop);
	if (tcp)
		r = uv_tcp_init(loop, &c->u.tcp);
	else
		r = uv_pipe_init(loop, &c->u.pipe, 0);
	if (r < 0)
		return r;
	c->u.h.data = c;
	frame_decoder_init(&c->dec, cfg->max_frame_bytes, cfg->max_chunk_bytes);
	pbuf_init(&c->stash, SIZE_MAX); /* bounded by a read, and counted */
	return 0;
}

int conn_accept(struct conn *c, uv_stream_t *listener, bool tls_served)
{
	uv_os_fd_t fd;
	int r;

	c->tls_served = tls_served;
	r = uv_accept(listener, &c->u.s);
	if (r < 0) {
		conn_close(c, uv_strerror(r));
		return r;
	}
	uv_fileno(&c->u.h, &fd);
	if (c->tcp) {
		peer_from_tcp(&c->peer, fd, c->cfg->admin_group, c->cfg->loopback_identity != 0);
		uv_tcp_nodelay(&c->u.tcp, 1);
		/* The identity is taken now, before a byte is read, from the
		 * client's socket while the client holds it (peer.h); whether a
		 * peer with none may stay is the owner's decision. */
		peer_resolve(&c->peer);
	} else if (peer_from_unix(&c->peer, fd, c->cfg->admin_group) < 0) {
		conn_close(c, "no peer credentials");
		return UV_EPERM;
	}
	return 0;
}

int conn_start_tls(struct conn *c, struct tls_ctx *ctx, struct perr *err)
{
	c->tls = tlsio_new(ctx, NULL, NULL, err);
	account(c);
	return c->tls != NULL ? 0 : -ENOMEM;
}

int conn_start(struct conn *c)
{
	c->reading = true;
	return uv_read_start(&c->u.s, on_alloc, on_read);
}
