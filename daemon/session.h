/*
 * session: what the daemon knows about one client above its transport:
 * who it is (role, authentication), what it holds (its registered
 * process, uploads, download), and the daemon it talks to. A plain
 * struct; its life is bus.c's, and its readers are the handlers
 * (handler.c, hsession.c, hagent.c, htrace.c, hinfo.c), upload.c,
 * download.c and dynorpc.c.
 *
 * Ownership, libuv's model (conn.h): the daemon's bus owns every session
 * (d->sessions), allocated at accept (bus_accept) with its conn embedded.
 * When the conn closes, bus.c is called back at once (gone): it unlinks
 * the session and detaches everything that points at it or its conn, in
 * this order: the registered process (registry_remove, which clears
 * s->proc through proc->ref), its uploads (failed; freed when their file
 * operation comes back), its download (freed when its read comes back),
 * the traces it follows. Then, in libuv's close callback (closed), bus.c
 * frees the session, and nothing else ever does.
 *
 * The engines below (registry, trace, store, kineto, metrics) never see a
 * session: they hold and send to its conn (proc->conn, trace followers).
 */
#ifndef GPROFD_SESSION_H
#define GPROFD_SESSION_H

#include <stdbool.h>

#include "conn.h"
#include "daemon.h"

#define SESSION_ROLE_NONE (-1)
#define SESSION_ROLE_DYNO 100

struct proc;
struct upload;
struct download;

struct session {
	struct conn conn;          /* its transport, embedded: freed with the session */
	struct daemon *d;
	struct session *next, *prev; /* d->sessions */
	int role;                  /* SESSION_ROLE_NONE until hello, MSG_ROLE_*, SESSION_ROLE_DYNO */
	bool need_auth;            /* TCP from elsewhere with a token configured */
	bool authed;
	char nonce[65];
	struct proc *proc;         /* the process this agent registered (the registry's;
	                            * cleared by registry_remove through proc->ref) */
	struct upload *uploads;    /* owned (upload.c) */
	struct download *download; /* owned (download.c); at most one */
};

/* The session a conn of the bus belongs to. */
static inline struct session *session_of(struct conn *c)
{
	return c->data;
}

#endif
