/*
 * conn: the transport of one client connection (agent, gprofctl, dyno,
 * test client) on the Unix socket, TCP or TLS. It knows bytes, frames,
 * its peer's identity (peer.h), a write queue, TLS, its deadlines and its
 * close; it knows nothing of sessions, roles, processes or traces. Its
 * owner (bus.c, through struct session) hears from it only through the
 * callbacks it gave at conn_init (struct conn_ops).
 *
 * Data flow: libuv read -> (TLS session, on tls.listen) -> frame decoder
 * -> ops->frame, one whole frame at a time. Out: conn_send takes the bytes
 * of one or more frames (conn_send_msg and conn_send_error encode them
 * with proto/), encrypts them on a TLS connection, and queues them on
 * libuv, counting what they hold (c->queued): a peer with more than
 * 256 KiB of replies unread is not read until it reads them (the rest of
 * the read that crossed the mark waits in c->stash, unparsed), and one past
 * limits.write_queue_bytes is disconnected.
 *
 * Memory: every byte a conn holds is counted once, in c->held (its
 * owner's struct, its replies queued, its decoder's buffer, its stash, its
 * TLS session), and charged to the daemon's total (counters.h conn_bytes)
 * and to its owner's share (struct conn_share: every conn of one uid
 * together). A reply or a frame that would take the share past
 * limits.connection_memory_per_uid, or the total past
 * limits.connection_memory, closes the conn that grows, with a log line
 * and a count (conns_memory_closed); bus.c refuses a new conn at accept on
 * the same budgets (conns_memory_refused). A closed conn's count is 0
 * before ops->closed.
 *
 * Life cycle and ownership, libuv's handle model: the owner embeds the
 * conn (or allocates it) and the conn never frees itself. conn_init makes
 * the handle; from then on the memory may be released only in
 * ops->closed, which libuv's close callback calls after every pending
 * write has been called back. conn_close (the owner's, or the transport's
 * own on an error, a limit or the peer's end) calls ops->gone at once,
 * exactly once, so the owner detaches everything that points at the conn
 * before anything can use it again; after gone, no callback but closed
 * comes. Callbacks are never made from inside conn_send, so a sender may
 * use the conn after its call returns (c->closing says whether it is
 * being closed).
 *
 * Fields are read by the owner (the public part, like uv_stream_t's); only
 * conn.c writes them, except peer, which the session upgrades after a
 * token proof.
 */
#ifndef GPROFD_CONN_H
#define GPROFD_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "counters.h"
#include "frame.h"
#include "msg.h"
#include "peer.h"

struct conn;
struct tls_ctx;

/* What the conns of one owner hold together: bus.c keeps one per uid with
 * a conn open (and one for every peer with no known uid), and hands it to
 * each of that owner's conns (conn_charge); conn.c adds and takes away
 * each conn's bytes. */
struct conn_share {
	struct conn_share *next;  /* bus.c's list */
	bool known;
	uid_t uid;
	size_t conns;             /* conns charged to it, open or closing */
	uint64_t bytes;           /* what they hold (the sum of their c->held) */
	bool unbounded;           /* root's: only the daemon's total bounds it */
};

/* What a TLS session holds, counted per TLS conn: OpenSSL's state, its
 * buffers released between records (docs/BENCHMARKS.md: 17.4 kB measured
 * per open connection). */
#define CONN_TLS_BYTES (18u * 1024)

/* What a conn tells its owner; each on the loop, never from conn_send. */
struct conn_ops {
	/* A whole frame arrived (valid during the call only). 0 to go on; a
	 * negative code stops reading this batch (the owner finished or
	 * closed the conn, or a chunk was refused). */
	int (*frame)(struct conn *c, const struct frame *f);
	/* The conn is closing (why: for the log): detach everything that
	 * points at it. Called once; the memory stays valid until closed. */
	void (*gone)(struct conn *c, const char *why);
	/* libuv has let go of the conn: the owner frees it here, and only here. */
	void (*closed)(struct conn *c);
	/* A write completed and the conn is open: the queue has room again
	 * (a download reads its next block). */
	void (*writable)(struct conn *c);
};

struct conn {
	union {
		uv_handle_t h;
		uv_stream_t s;
		uv_pipe_t pipe;
		uv_tcp_t tcp;
	} u;
	void *data;          /* the owner's (its session) */
	const struct conn_ops *ops;
	const struct config *cfg;  /* the daemon's, read at each use (a reload changes it) */
	struct counters *cnt;      /* the daemon's */
	struct frame_decoder dec;
	bool tcp;
	bool tls_served;     /* the daemon has a tls.listen port (for a hint) */
	struct peer peer;
	size_t queued;       /* bytes handed to libuv, not yet written */
	size_t fixed;        /* the owner's struct that embeds the conn (conn_init) */
	size_t held;         /* what c holds, as charged to share and the total */
	struct conn_share *share; /* its owner's (conn_charge); NULL before */
	struct pbuf stash;   /* frames read past the backlog mark, as they came */
	size_t stash_at;     /* the next of them to deliver */
	bool closing;
	bool finishing;      /* stop reading; close once the queue is written */
	bool paused;         /* reading stopped by the owner (upload backpressure) */
	bool backlogged;     /* reading stopped: too many of its replies unread */
	bool told_backlog;   /* logged once per connection */
	bool reading;        /* uv_read_start is in effect */
	bool greeted;        /* the peer's session began (conn_greeted) */
	bool streaming;      /* the owner streams a file and bounds the queue itself */
	uint64_t since_ms;   /* accepted (uv_now) */
	uint64_t active_ms;  /* last frame received or write completed, for limits.idle_timeout */
	uint64_t finish_ms;  /* conn_finish was called (uv_now), for limits.frame_timeout */
	uint64_t frame_ms;   /* the frame being read began (0: none), for limits.frame_timeout */
	struct tlsio *tls;   /* a connection to tls.listen: every byte passes through it */
};

/* Makes c's handle on loop (a TCP or a Unix stream) and its frame decoder
 * (cfg's limits); fixed is the size of the owner's struct that holds c,
 * counted as c's from conn_charge on. 0, or a negative uv error: then
 * nothing was made and the owner frees c at once; after 0 it is freed only
 * in ops->closed. */
int conn_init(struct conn *c, uv_loop_t *loop, bool tcp, const struct config *cfg,
              struct counters *cnt, const struct conn_ops *ops, void *data, size_t fixed);
/* Charges what c holds to share (its owner's, which must outlive c's
 * closed callback) and the daemon's total from now on. */
void conn_charge(struct conn *c, struct conn_share *share);
/* Would n more bytes take share past its budget, or the daemon's total
 * past limits.connection_memory? The reason, for a log line, or NULL. */
const char *conn_over_budget(const struct conn_share *share, const struct config *cfg,
                             const struct counters *cnt, uint64_t n);
/* Accepts one connection from listener into c and identifies its peer,
 * before a byte is read: SO_PEERCRED on Unix, the owner of the client's
 * socket on loopback TCP (peer_resolve; c->peer.known says whether it
 * was found). 0, or a negative code: c is then closing (gone, then
 * closed, will come). */
int conn_accept(struct conn *c, uv_stream_t *listener, bool tls_served);
/* c is a tls.listen connection: every byte from now on passes through a
 * TLS session made from ctx (its handshake first). 0 or -ENOMEM with err. */
int conn_start_tls(struct conn *c, struct tls_ctx *ctx, struct perr *err);
/* Starts reading. 0 or a negative uv error. */
int conn_start(struct conn *c);

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

/* c's peer, identified at accept (peer.h). */
static inline struct peer *conn_peer(struct conn *c)
{
	return &c->peer;
}

/* The peer began its session (a hello, a Dynolog request): its bytes are
 * no longer looked at as a possible TLS handshake on the plain port. */
void conn_greeted(struct conn *c);
/* The owner streams a file on c (a download) and keeps the queue bounded
 * itself: its chunks do not stop c being read. */
void conn_streaming(struct conn *c, bool on);
/* Upload backpressure: stop and restart reading from c. */
void conn_pause(struct conn *c);
void conn_resume(struct conn *c);
/* Takes the buffer that holds the chunk frame being delivered to
 * ops->frame (f->buffered), so it is kept without a copy; free() it. */
void *conn_steal_frame(struct conn *c);
/* c's descriptor, or -1. */
int conn_fileno(const struct conn *c);

/* c's own deadlines at time now (uv_now): a frame begun and not complete
 * within limits.frame_timeout (not counting time the owner paused it), or
 * a conn being finished whose last replies are not read within
 * limits.frame_timeout, is closed. The owner calls it every second for
 * each conn whose own deadlines (bus.c: hello, idle) did not act. */
void conn_deadline(struct conn *c, uint64_t now);

#endif
