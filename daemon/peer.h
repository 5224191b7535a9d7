/*
 * peer: who is on the other end of a connection, and what it may do.
 *
 * Unix sockets carry kernel-verified credentials (SO_PEERCRED). A TCP
 * connection from loopback is mapped to the uid that owns the client's
 * socket, looked up in /proc/net/tcp{,6} by its address and port (as
 * identd does), so `dyno` on the same host acts with its user's rights.
 * A TCP client that proved it holds the auth token is an administrator.
 */
#ifndef GPROFD_PEER_H
#define GPROFD_PEER_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

struct peer {
	bool known;      /* uid is trustworthy */
	uid_t uid;
	gid_t gid;
	pid_t pid;       /* Unix peers only; 0 otherwise */
	bool admin;      /* root, admin_group member, or token holder */
	char desc[96];   /* for logs: "uid 1000 pid 4242" / "127.0.0.1:51234" */
};

/* Fills p from a Unix socket's SO_PEERCRED. 0 or -errno. */
int peer_from_unix(struct peer *p, int fd, const char *admin_group);

/* Fills p for a TCP connection; finds the uid of loopback peers when
 * loopback_identity is set. */
void peer_from_tcp(struct peer *p, int fd, const char *admin_group, bool loopback_identity);

/* May p act on things (processes, traces) that belong to uid? */
static inline bool peer_may(const struct peer *p, uid_t uid)
{
	return p->admin || (p->known && p->uid == uid);
}

/* Reads up to max ancestor pids of pid from /proc (nearest first).
 * Returns how many. */
int peer_ancestors(pid_t pid, int32_t *out, int max);

#endif
