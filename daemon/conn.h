/*
 * conn: one client connection (agent, gprofctl, dyno, test client) on the
 * Unix socket or TCP.
 *
 * Data flow: libuv read -> (TLS session, on tls.listen) -> frame decoder -> a chunk frame goes to its
 * upload (upload.c); a JSON frame is either a Dynolog request (dynorpc.c)
 * or a native message, validated by proto/ and dispatched through the
 * handler table (handler.c). Replies go out through conn_send, which
 * queues them on libuv and counts the bytes they hold: a peer with more
 * than 256 KiB of replies unread is not read until it reads them, and one
 * past limits.write_queue_bytes is disconnected.
 *
 * Life cycle and ownership: the daemon owns every conn (d->conns). A conn
 * is freed only in its uv_close callback, after libuv has called back
 * every pending write. conn_close first detaches everything that points
 * at the conn (its registered process, uploads, download, trace
 * followers), so nothing can use it after close was requested.
 */
#ifndef GPROFD_CONN_H
#define GPROFD_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "daemon.h"
#include "frame.h"
#include "msg.h"
#include "peer.h"

#define CONN_ROLE_NONE (-1)
#define CONN_ROLE_DYNO 100

struct upload;
struct download;

struct conn {
	union {
		uv_handle_t h;
		uv_stream_t s;
		uv_pipe_t pipe;
		uv_tcp_t tcp;
	} u;
	struct daemon *d;
	struct conn *next, *prev;
	struct frame_decoder dec;
	bool tcp;
	struct peer peer;
	int role;            /* CONN_ROLE_NONE until hello, MSG_ROLE_*, CONN_ROLE_DYNO */
	bool need_auth;      /* TCP from elsewhere with a token configured */
	bool authed;
	char nonce[65];
	size_t queued;       /* bytes handed to libuv, not yet written */
	bool closing;
	bool finishing;      /* stop reading; close once the queue is written */
	bool paused;         /* reading stopped for upload backpressure */
	bool backlogged;     /* reading stopped: too many of its replies unread */
	bool told_backlog;   /* logged once per connection */
	bool reading;        /* uv_read_start is in effect */
	uint64_t since_ms;   /* accepted (uv_now) */
	uint64_t active_ms;  /* last frame received or write completed, for limits.idle_timeout */
	uint64_t finish_ms;  /* conn_finish was called (uv_now), for limits.frame_timeout */
	uint64_t frame_ms;   /* the frame being read began (0: none), for limits.frame_timeout */
	struct proc *proc;   /* the process this agent registered */
	struct upload *uploads;
	struct download *download;
	struct tlsio *tls;   /* a connection to tls.listen: every byte passes through it */
};

/* Accepts one connection from a listener. 0 or a negative uv error. */
int conn_accept(struct daemon *d, uv_stream_t *listener, bool tcp);
/* The same for the TLS listener: the connection's bytes go through a TLS
 * session made from d->tls (its handshake comes first). */
int conn_accept_tls(struct daemon *d, uv_stream_t *listener);

/* Sends the bytes in b, taking its buffer (b is left empty). 0, or
 * -ENOBUFS when the peer's write queue is full (the conn is then closing). */
int conn_send(struct conn *c, struct pbuf *b);
/* Encodes and sends m; an encoding failure is a daemon bug, logged. */
int conn_send_msg(struct conn *c, const struct msg *m);
void conn_send_error(struct conn *c, uint64_t id, enum msg_errcode code,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Starts closing c; safe to call more than once and from c's callbacks. */
void conn_close(struct conn *c, const char *why);
/* Stops reading and closes c once everything queued (say, an error reply
 * that explains why) has been written. */
void conn_finish(struct conn *c, const char *why);
/* Closes every connection (shutdown). */
void conn_close_all(struct daemon *d);

/* c's peer, identified at accept (peer.h). */
static inline struct peer *conn_peer(struct conn *c)
{
	return &c->peer;
}

/* Upload backpressure: stop and restart reading from c. */
void conn_pause(struct conn *c);
/* Closes the connections past a deadline: no hello within
 * limits.hello_timeout; a client (not an agent) that has neither sent a
 * frame nor had a reply written for limits.idle_timeout and follows no
 * trace, downloads nothing; a frame begun and not complete within
 * limits.frame_timeout (not counting time the daemon itself paused the
 * connection); a connection being closed whose last replies are not read
 * within limits.frame_timeout. The daemon calls it every second (deadline_timer). */
void conn_deadlines(struct daemon *d);
void conn_resume(struct conn *c);

#endif
