/*
 * sdnotify: systemd's readiness notification and socket activation, through
 * libsystemd loaded only when systemd is actually talking to this process
 * ($NOTIFY_SOCKET or $LISTEN_FDS set). Run by hand or in a container, the
 * daemon never maps libsystemd and its compression libraries (about 1 MB
 * resident); under systemd it uses the library's own code, not a copy.
 *
 * Floor: a leaf. Called by main.c (READY, STOPPING) and server.c (the
 * sockets systemd passes).
 */
#ifndef GPROFD_SDNOTIFY_H
#define GPROFD_SDNOTIFY_H

#include <stdbool.h>

/* sd_notify(0, state), or nothing outside systemd. */
void sdnotify_send(const char *state);
/* sd_listen_fds(1): how many sockets systemd passed (from fd 3), 0 when
 * none. */
int sdnotify_listen_fds(void);
/* sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) and
 * sd_is_socket_inet(fd, AF_UNSPEC, SOCK_STREAM, 1, 0). */
bool sdnotify_is_unix_listener(int fd);
bool sdnotify_is_inet_listener(int fd);
/* sd_is_socket_unix(fd, SOCK_DGRAM, -1, NULL, 0): a Unix datagram socket,
 * such as Kineto's (ListenDatagram=, or any supervisor that passes fds the
 * same way). */
bool sdnotify_is_unix_dgram(int fd);

#endif
