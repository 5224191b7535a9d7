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
 * Floor: the top of the connection stack, with main.c. Owns the
 * listening handles (in struct daemon). Called by main.c (start, stop,
 * reload); each accepted connection goes to bus_accept (bus.h).
 */
#ifndef GPROFD_SERVER_H
#define GPROFD_SERVER_H

#include "daemon.h"
#include "perr.h"

int server_start(struct daemon *d, struct perr *err);
/* Stops accepting and closes the listeners (removing a socket file the
 * daemon created). */
void server_stop(struct daemon *d);

#endif
