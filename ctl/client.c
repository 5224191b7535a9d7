/*
 * client: gprofctl's connections to many daemons on one libuv loop
 * (ctl.h). Each host: resolve (TCP) -> connect -> hello -> auth when asked
 * -> ready -> the command's callbacks -> done or failed -> close.
 * With --tls a TCP connection's bytes pass through a TLS session
 * (tlsio.h): its handshake starts at connect, and the hello waits inside
 * it until the daemon's certificate has been checked.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>


#include "ctl.h"
#include "hmac.h"
#include "tlsio.h"

enum { HS_RESOLVING, HS_CONNECTING, HS_HELLO, HS_AUTH, HS_READY, HS_CLOSED };

static char read_buf[256 * 1024];

static void on_closed(uv_handle_t *h)
{
	(void)h;
}

static void finish_host(struct host *h)
{
	if (h->state == HS_CLOSED)
		return;
	h->state = HS_CLOSED;
	if (h->handle_open && !uv_is_closing(&h->u.h)) {
		uv_read_stop(&h->u.s);
		uv_close(&h->u.h, on_closed);
	}
	if (--h->cl->remaining == 0) {
		uv_close((uv_handle_t *)&h->cl->timer, on_closed);
		if (h->cl->ops->finished)
			h->cl->ops->finished(h->cl);
	}
}

void host_done(struct host *h)
{
	h->done = true;
	finish_host(h);
}

void host_fail(struct host *h, const char *fmt, ...)
{
	va_list ap;

	if (h->state == HS_CLOSED)
		return;
	va_start(ap, fmt);
	vsnprintf(h->error, sizeof(h->error), fmt, ap);
	va_end(ap);
	h->cl->ops->failed(h, h->error);
	finish_host(h);
}

struct wreq {
	uv_write_t req;
	uv_buf_t buf;
};

static void on_written(uv_write_t *req, int status)
{
	struct wreq *w = req->data;
	struct host *h = (struct host *)req->handle->data;

	free(w->buf.base);
	free(w);
	if (status < 0 && status != UV_ECANCELED && h->state != HS_CLOSED) {
		/* A daemon that refused us (a limit, an identity it could not
		 * take) said why before it closed: read that first; the end of
		 * the stream reports this error if nothing came. */
		if (h->send_error[0] == 0)
			snprintf(h->send_error, sizeof(h->send_error), "%s", uv_strerror(status));
	}
}

/* Writes the bytes of b as they are (ciphertext under TLS), taking them. */
static int send_raw(struct host *h, struct pbuf *b)
{
	struct wreq *w;
	int r;

	if (b->len == 0) {
		pbuf_deinit(b);
		return 0;
	}
	w = malloc(sizeof(*w));
	if (w == NULL) {
		pbuf_deinit(b);
		return -ENOMEM;
	}
	w->buf = uv_buf_init((char *)b->data, (unsigned)b->len);
	b->data = NULL;
	b->len = b->cap = 0;
	w->req.data = w;
	r = uv_write(&w->req, &h->u.s, &w->buf, 1, on_written);
	if (r < 0) {
		free(w->buf.base);
		free(w);
		host_fail(h, "sending failed: %s", uv_strerror(r));
	}
	return r;
}

int host_send(struct host *h, struct msg *m)
{
	struct perr err;
	struct pbuf b, out;
	int r;

	if (h->state == HS_CLOSED)
		return -EPIPE;
	if (m->id == 0 && msg_type_is_request(m->type))
		m->id = h->next_id++;
	pbuf_init(&b, 0);
	r = msg_encode(&b, m, &err);
	if (r < 0) {
		pbuf_deinit(&b);
		host_fail(h, "cannot encode %s: %s", msg_type_name(m->type), err.msg);
		return r;
	}
	if (h->tls == NULL)
		return send_raw(h, &b);
	pbuf_init(&out, 0);
	r = tlsio_write(h->tls, b.data, b.len, &out, &err);
	pbuf_deinit(&b);
	if (r < 0) {
		pbuf_deinit(&out);
		host_fail(h, "%s", err.msg);
		return r;
	}
	return send_raw(h, &out);
}

static void send_hello(struct host *h)
{
	struct msg m;

	msg_init(&m, MSG_HELLO, 0);
	m.u.hello.proto_min = GPROF_PROTO_MIN;
	m.u.hello.proto_max = GPROF_PROTO_MAX;
	m.u.hello.role = MSG_ROLE_CTL;
	m.u.hello.software = "gprofctl " GPROF_VERSION;
	h->state = HS_HELLO;
	host_send(h, &m);
}

static void session(struct host *h, const struct msg *m)
{
	struct client *cl = h->cl;
	struct msg a;

	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return;
	}
	if (h->state == HS_HELLO && m->type == MSG_HELLO_REPLY) {
		/* reports name a TCP host as the user did; the local daemon by its name */
		if (h->local)
			snprintf(h->label, sizeof(h->label), "%s", m->u.hello_reply.host);
		if (m->u.hello_reply.auth == MSG_AUTH_NONE) {
			h->state = HS_READY;
			cl->ops->ready(h);
			return;
		}
		if (cl->token_len == 0) {
			host_fail(h, "the daemon requires authentication: give --token-file "
			          "(the daemon's auth_token_file)");
			return;
		}
		{
			char proof[HMAC_PROOF_LEN + 1];

			hmac_proof(cl->token, cl->token_len, m->u.hello_reply.nonce, proof);
			msg_init(&a, MSG_AUTH, 0);
			a.u.auth.proof = proof;
			h->state = HS_AUTH;
			host_send(h, &a);
		}
		return;
	}
	if (h->state == HS_AUTH && m->type == MSG_AUTH_REPLY) {
		h->state = HS_READY;
		cl->ops->ready(h);
		return;
	}
	host_fail(h, "unexpected %s during the handshake", msg_type_name(m->type));
}

/* Where h is, for errors: "the socket PATH" or "HOST port N". */
static void where(const struct host *h, char *out, size_t size)
{
	if (h->local)
		snprintf(out, size, "the socket %s", h->name);
	else
		snprintf(out, size, "%s port %d", h->name, h->port);
}

/* Bytes that are not gprofd's framing before the handshake is over: the
 * peer is some other server (an HTTP server answers "HTTP/1.1 400", which
 * read as a frame length is 1.3 GB). Says so, with the first bytes it
 * sent, rather than a frame limit the user never set. */
static void not_gprofd(struct host *h, const char *data, size_t n)
{
	char first[40], at[300];
	size_t i, k = 0;

	for (i = 0; i < n && k < 24; i++)
		first[k++] = data[i] >= 0x20 && data[i] < 0x7f ? data[i] : '.';
	first[k] = 0;
	where(h, at, sizeof(at));
	host_fail(h, "%s is not a gprofd daemon: it answered \"%s\"%s. Give the daemon's "
	          "address: its tcp port (default %d; not the metrics port) or its socket "
	          "(--socket)", at, first, strncmp(first, "HTTP/", 5) == 0 ? " (an HTTP server)" :
	          n > 0 && (data[0] == 0x15 || data[0] == 0x16) ? " (a TLS server: add --tls)" :
	          "", CTL_PORT_DEFAULT);
}

static int on_frame(void *ud, const struct frame *f)
{
	struct host *h = ud;
	struct perr err;
	struct msg m;

	if (h->state == HS_CLOSED)
		return -EPIPE;
	if (f->kind == FRAME_CHUNK) {
		if (h->state == HS_READY && h->cl->ops->chunk)
			h->cl->ops->chunk(h, f);
		return h->state == HS_CLOSED ? -EPIPE : 0;
	}
	if (msg_decode(&m, (const char *)f->data, f->len, &err) < 0) {
		if (h->state == HS_HELLO)
			not_gprofd(h, (const char *)f->data, f->len);
		else
			host_fail(h, "bad message from the daemon: %s", err.msg);
		msg_deinit(&m);
		return -EPROTO;
	}
	if (h->state != HS_READY)
		session(h, &m);
	else
		h->cl->ops->message(h, &m);
	msg_deinit(&m);
	return h->state == HS_CLOSED ? -EPIPE : 0;
}

static void on_alloc(uv_handle_t *hd, size_t sz, uv_buf_t *buf)
{
	(void)hd;
	(void)sz;
	buf->base = read_buf;
	buf->len = sizeof(read_buf);
}

/* Plaintext from the daemon, straight from the socket or out of TLS. */
static int on_plain(void *ud, const char *data, size_t n)
{
	struct host *h = ud;
	struct perr err;

	if (frame_decoder_feed(&h->dec, data, n, on_frame, h, &err) < 0 &&
	    h->state != HS_CLOSED) {
		if (h->state == HS_HELLO)
			not_gprofd(h, data, n);
		else
			host_fail(h, "bad data from the daemon: %s", err.msg);
	}
	return h->state == HS_CLOSED ? -EPIPE : 0;
}

static void on_cipher(struct host *h, const char *data, size_t n)
{
	struct perr err;
	struct pbuf out;
	int r;

	pbuf_init(&out, 0);
	r = tlsio_feed(h->tls, data, n, on_plain, h, &out, &err);
	if (h->state != HS_CLOSED)
		send_raw(h, &out);
	else
		pbuf_deinit(&out);
	if (r == 1)
		host_fail(h, "the daemon closed the connection");
	else if (r == -EPROTONOSUPPORT)
		host_fail(h, "%s:%d does not speak TLS: is it the daemon's plain tcp port? (TLS "
		          "is served on its tls.listen address; drop --tls for the other)", h->name,
		          h->port);
	else if (r < 0 && r != -EPIPE)
		host_fail(h, "%s:%d: %s", h->name, h->port, err.msg);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct host *h = s->data;

	if (n == 0)
		return;
	if (n < 0) {
		if (h->tls != NULL && !tlsio_handshake_done(h->tls) && h->state != HS_CLOSED) {
			host_fail(h, "%s:%d closed the connection during the TLS handshake (does it "
			          "serve TLS there, and does it ask for a client certificate "
			          "(--tls-cert)? its log says why)", h->name, h->port);
			return;
		}
		if (h->state == HS_HELLO && !h->send_error[0]) {
			char at[300];

			where(h, at, sizeof(at));
			host_fail(h, "%s closed the connection without answering gprofd's hello: is "
			          "it gprofd? (its tcp port, default %d; or its socket, --socket)", at,
			          CTL_PORT_DEFAULT);
			return;
		}
		if (h->send_error[0])
			host_fail(h, "sending failed: %s (the daemon closed the connection)",
			          h->send_error);
		else
			host_fail(h, n == UV_EOF ? "the daemon closed the connection" :
			          "connection lost: %s", uv_strerror((int)n));
		return;
	}
	if (h->tls != NULL)
		on_cipher(h, buf->base, (size_t)n);
	else
		on_plain(h, buf->base, (size_t)n);
}

static void on_connect(uv_connect_t *req, int status)
{
	struct host *h = req->data;

	if (status < 0) {
		if (h->local)
			host_fail(h, "cannot connect to %s: %s (is gprofd running? --socket names its "
			          "socket)", h->name, uv_strerror(status));
		else
			host_fail(h, "cannot connect to %s port %d: %s (is gprofd listening there? "
			          "its tcp address, default port %d)", h->name, h->port,
			          uv_strerror(status), CTL_PORT_DEFAULT);
		return;
	}
	if (h->state == HS_CLOSED)
		return;
	uv_read_start(&h->u.s, on_alloc, on_read);
	if (!h->local && h->cl->tls != NULL) {
		struct perr err;
		struct pbuf out;

		pbuf_init(&out, 0);
		h->tls = tlsio_new(h->cl->tls, h->name, &out, &err);
		if (h->tls == NULL) {
			pbuf_deinit(&out);
			host_fail(h, "%s", err.msg);
			return;
		}
		if (send_raw(h, &out) < 0)
			return;
	}
	send_hello(h);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct host *h = req->data;
	int r;

	if (status < 0) {
		host_fail(h, "cannot resolve %s: %s", h->name, uv_strerror(status));
		uv_freeaddrinfo(res);
		return;
	}
	if (h->state == HS_CLOSED) {
		uv_freeaddrinfo(res);
		return;
	}
	uv_tcp_init(&h->cl->loop, &h->u.tcp);
	h->handle_open = true;
	h->u.h.data = h;
	uv_tcp_nodelay(&h->u.tcp, 1);
	h->state = HS_CONNECTING;
	h->creq.data = h;
	r = uv_tcp_connect(&h->creq, &h->u.tcp, res->ai_addr, on_connect);
	uv_freeaddrinfo(res);
	if (r < 0)
		host_fail(h, "cannot connect to %s port %d: %s", h->name, h->port, uv_strerror(r));
}

static void on_timeout(uv_timer_t *t)
{
	struct client *cl = t->data;
	size_t i;

	for (i = 0; i < cl->n; i++) {
		struct host *h = &cl->hosts[i];
		char at[300];

		if (h->state == HS_HELLO) {
			/* connected, but nothing that speaks gprofd's protocol answered */
			where(h, at, sizeof(at));
			host_fail(h, "%s did not answer gprofd's hello within %.0f s: is it gprofd? "
			          "(its tcp port, default %d; or its socket, --socket)", at,
			          cl->o->timeout_s, CTL_PORT_DEFAULT);
		} else if (h->state != HS_CLOSED)
			host_fail(h, "timed out after %.0f s (raise --timeout)", cl->o->timeout_s);
	}
}

int client_init(struct client *cl, const struct opts *o, const struct client_ops *ops)
{
	size_t i, n = o->nhosts ? o->nhosts : 1;

	memset(cl, 0, sizeof(*cl));
	cl->o = o;
	cl->ops = ops;
	if (o->token_file != NULL) {
		FILE *f = fopen(o->token_file, "r");
		size_t len;

		if (f == NULL) {
			fprintf(stderr, "gprofctl: --token-file %s: %s\n", o->token_file, strerror(errno));
			return -1;
		}
		len = fread(cl->token, 1, sizeof(cl->token) - 1, f);
		fclose(f);
		while (len > 0 && (cl->token[len - 1] == '\n' || cl->token[len - 1] == '\r'))
			len--;
		cl->token_len = len;
	}
	if (o->tls) {
		struct perr err;

		if (o->nhosts == 0) {
			fprintf(stderr, "gprofctl: --tls is for daemons reached over TCP (--host, "
			        "--hostfile, --slurm-job); the local socket needs none\n");
			return -1;
		}
		if (tls_client_ctx(&cl->tls, o->tls_ca, o->tls_cert, o->tls_key, &err) < 0) {
			fprintf(stderr, "gprofctl: %s\n", err.msg);
			return -1;
		}
	}
	cl->hosts = calloc(n, sizeof(*cl->hosts));
	if (cl->hosts == NULL)
		return -1;
	uv_loop_init(&cl->loop);
	cl->n = n;
	for (i = 0; i < n; i++) {
		struct host *h = &cl->hosts[i];

		h->cl = cl;
		h->next_id = 1;
		frame_decoder_init(&h->dec, 16u << 20, 16u << 20);
		/* downloads go straight to their files: no chunk is reassembled */
		frame_decoder_stream_chunks(&h->dec, true);
		if (o->nhosts == 0) {
			h->local = true;
			snprintf(h->name, sizeof(h->name), "%s", o->socket);
			snprintf(h->label, sizeof(h->label), "localhost");
		} else {
			const char *spec = o->hosts[i];

			/* checked by hosts_add: the port is 1..65535 or absent */
			hosts_parse(spec, h->name, sizeof(h->name), &h->port);
			if (h->port == 0)
				h->port = o->port;
			snprintf(h->label, sizeof(h->label), "%s", spec);
		}
	}
	return 0;
}

void client_run(struct client *cl)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	char port[16];
	size_t i;
	int r;

	uv_timer_init(&cl->loop, &cl->timer);
	cl->timer.data = cl;
	cl->remaining = cl->n;
	uv_timer_start(&cl->timer, on_timeout, (uint64_t)(cl->o->timeout_s * 1000), 0);
	for (i = 0; i < cl->n; i++) {
		struct host *h = &cl->hosts[i];

		if (h->local) {
			uv_pipe_init(&cl->loop, &h->u.pipe, 0);
			h->handle_open = true;
			h->u.h.data = h;
			h->state = HS_CONNECTING;
			h->creq.data = h;
			uv_pipe_connect(&h->creq, &h->u.pipe, h->name, on_connect);
			continue;
		}
		snprintf(port, sizeof(port), "%d", h->port);
		h->state = HS_RESOLVING;
		h->gai.data = h;
		r = uv_getaddrinfo(&cl->loop, &h->gai, on_resolved, h->name, port, &hints);
		if (r < 0)
			host_fail(h, "cannot resolve %s (port %d): %s", h->name, h->port,
			          uv_strerror(r));
	}
	uv_run(&cl->loop, UV_RUN_DEFAULT);
}

void client_deinit(struct client *cl)
{
	size_t i;

	for (i = 0; i < cl->n; i++) {
		frame_decoder_deinit(&cl->hosts[i].dec);
		tlsio_free(cl->hosts[i].tls);
	}
	uv_loop_close(&cl->loop);
	free(cl->hosts);
	tls_ctx_unref(cl->tls);
}
