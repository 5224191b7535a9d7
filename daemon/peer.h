/*
 * peer: who is on the other end of a connection, and what it may do.
 *
 * Unix sockets carry kernel-verified credentials (SO_PEERCRED), read at
 * accept. A TCP connection from loopback is mapped to the uid that owns
 * the client's socket (as identd does), so `dyno` on the same host acts
 * with its user's rights. That lookup is made only when a request needs
 * the identity (peer_resolve): a getStatus never pays for it. It asks the
 * kernel for the one socket by its address pair (sock_diag netlink), and
 * reads /proc/net/tcp{,6} only where netlink is unavailable.
 * A TCP client that proved it holds the auth token is an administrator.
 */
#ifndef GPROFD_PEER_H
#define GPROFD_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

struct peer {
	bool resolved;   /* identity looked up (always, for Unix peers) */
	bool known;      /* uid is trustworthy */
	uid_t uid;
	gid_t gid;
	pid_t pid;       /* Unix peers only; 0 otherwise */
	bool admin;      /* root, admin_group member, or token holder */
	char desc[96];   /* for logs: "uid 1000 pid 4242" / "127.0.0.1:51234" */
	/* TCP peers, until resolved */
	struct sockaddr_storage remote, local;
	const char *admin_group;  /* borrowed from the daemon's config */
	bool loopback_identity;
};

/* Fills p from a Unix socket's SO_PEERCRED. 0 or -errno. */
int peer_from_unix(struct peer *p, int fd, const char *admin_group);

/* Fills p for a TCP connection; its identity is looked up later, by
 * peer_resolve. admin_group must outlive p. */
void peer_from_tcp(struct peer *p, int fd, const char *admin_group, bool loopback_identity);
/* Looks up a TCP peer's uid (loopback only, when loopback_identity is on);
 * no-op once resolved. Returns p. */
struct peer *peer_resolve(struct peer *p);

/* May p act on things (processes, traces) that belong to uid? */
static inline bool peer_may(const struct peer *p, uid_t uid)
{
	return p->admin || (p->known && p->uid == uid);
}

/* Reads up to max ancestor pids of pid from /proc (nearest first).
 * Returns how many. */
int peer_ancestors(pid_t pid, int32_t *out, int max);

/* Who holds the abstract Unix socket "\0name\0", Kineto's address for
 * name (kipc_addr_abstract) (another daemon, or a local
 * user squatting on it): "pid P (COMM, uid U)" for each process with it
 * open, as far as /proc shows them (all of them to root), into out; ""
 * when nobody could be named. */
void peer_abstract_holders(const char *name, char *out, size_t n);

/* The line parsers behind the above, one line of /proc text each (the
 * fuzz target calls them): the parent pid in a /proc/<pid>/stat line, or
 * -1; the owner of the socket at (hexaddr, port) on a /proc/net/tcp line
 * (true when it is that socket); the inode of an abstract socket named
 * "\0name\0" on a /proc/net/unix line, or 0. */
int peer_stat_ppid(const char *line);
bool peer_tcp_line_uid(const char *line, const char *hexaddr, int port, uid_t *uid);
unsigned long peer_unix_line_inode(const char *line, const char *name);

#endif
