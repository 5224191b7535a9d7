/*
 * bus: the sessions above the transport. It accepts a connection into a
 * new session (admission: the connection limits, the identity a loopback
 * client must have), routes each frame the conn delivers (a chunk to its
 * upload, a Dynolog request to dynorpc.c, a native message, once
 * validated by proto/, to the handler table), detaches a session from
 * everything when its conn closes, frees it in the close callback, and
 * enforces the session's deadlines (hello, idle). Called by server.c
 * (accept) and main.c (deadlines every second, shutdown).
 *
 * It is the one place that knows both a conn and what lies above it:
 * conn.c reports to it only through the struct conn_ops it gives at
 * accept. Ownership of the session: session.h.
 */
#ifndef GPROFD_BUS_H
#define GPROFD_BUS_H

#include <stdbool.h>

#include <uv.h>

#include "daemon.h"

/* What the listener a connection came from is (server.c says): */
#define BUS_TCP 1u        /* TCP, not the Unix socket */
#define BUS_TLS 2u        /* the tls.listen port */
#define BUS_TLS_SERVED 4u /* the daemon has a tls.listen port (a hint in errors) */
/* Accepts one connection from a listener into a new session, charging
 * what it holds to its user's share (conn.h: refused when that share or
 * the daemon's total is already at its budget); on the TLS listener
 * (BUS_TLS in how) its bytes go through a TLS session made from d->tls.
 * 0 or a negative code. */
int bus_accept(struct daemon *d, uv_stream_t *listener, unsigned how);
/* Gives freed connection memory back to the system after a burst
 * (malloc_trim, counted in heap_trims), then closes the sessions past a
 * deadline: no hello within
 * limits.hello_timeout; a client (not an agent) that has neither sent a
 * frame nor had a reply written for limits.idle_timeout and follows no
 * trace, downloads nothing; then each conn's own (conn_deadline). main.c
 * calls it every second (deadline_timer). */
void bus_deadlines(struct daemon *d);
/* Closes every session (shutdown). */
void bus_close_all(struct daemon *d);

#endif
