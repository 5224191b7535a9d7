/*
 * server: the daemon's listening sockets. Both come from systemd when it
 * passes them (socket activation: gprofd.socket); otherwise the daemon
 * binds them itself:
 *   - the Unix socket, mode 0666 (agents of every user connect; each
 *     connection is identified by its peer credentials), in a directory
 *     created 0755; a stale socket file is replaced, a live one is an error;
 *   - TCP on the configured address ("off" disables it; port 0 picks one);
 *   - TLS (tls.listen): bound by the daemon only, never passed by systemd,
 *     and only when d->tls holds the certificates (main.c loads them).
 *
 * Floor: the top of the connection stack, with main.c. An opaque object
 * (struct server, defined in server.c) owning the listening handles; the
 * daemon holds a pointer (d->server). Called by main.c (new, start, stop,
 * free; the bound ports, for its log line and, through
 * component_listeners, gprofctl status); it calls nothing that calls it
 * back (.ci/symbol-cycles.py): each accepted connection goes to bus_accept (bus.h),
 * told which listener it came from. A systemd-passed Kineto datagram
 * socket is handed on in d->kineto_passed_fd (kineto.c takes it).
 */
#ifndef GPROFD_SERVER_H
#define GPROFD_SERVER_H

#include "daemon.h"
#include "perr.h"

struct server;

/* A server of d with no listener yet; NULL when out of memory. */
struct server *server_new(struct daemon *d);
/* Opens the listeners (systemd's, else its own). 0, or a negative code
 * with err saying what to change; on failure server_stop still closes
 * what was opened. */
int server_start(struct server *sv, struct perr *err);
/* Stops accepting and closes the listeners (removing a socket file the
 * daemon created); their handles close on the loop. NULL: nothing. */
void server_stop(struct server *sv);
/* Frees sv once the loop has run the close callbacks of server_stop. */
void server_free(struct server *sv);
/* Is the Unix socket open? */
bool server_unix_open(const struct server *sv);
/* The bound TCP and tls.listen ports; -1 where that listener is off. */
int server_tcp_port(const struct server *sv);
int server_tls_port(const struct server *sv);

#endif
