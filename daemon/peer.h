/*
 * peer: who is on the other end of a connection, and what it may do.
 *
 * Unix sockets carry kernel-verified credentials (SO_PEERCRED), read at
 * accept. A TCP connection from loopback is mapped to the uid that owns
 * the client's socket (as identd does), so `dyno` on the same host acts
 * with its user's rights. That lookup is made once, at accept, before a
 * byte is read (peer_resolve): the client's socket must then still be
 * held by a process. Looked up later, a client that had sent its request
 * and closed left only a timewait socket, which the kernel reports as
 * uid 0 (issue 23, case 1). It asks the kernel for the one socket by its
 * address pair (sock_diag netlink), and reads /proc/net/tcp{,6} (the same
 * address pair, the same liveness test) only where netlink is unavailable.
 * A TCP client that proved it holds the auth token is an administrator.
 *
 * Floor: a leaf. Owns nothing; struct peer lives in its conn. Called by
 * conn.c (identity at accept), the handlers and metrics.c (peer_may),
 * registry.c and kineto.c (/proc lookups).
 */
#ifndef GPROFD_PEER_H
#define GPROFD_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

/* A TCP peer's address: IPv4 or IPv6, the only families TCP has (28
 * bytes; sockaddr_storage is 128, and every connection holds two, an
 * agent's Unix one too: 200 bytes more per registered process, issue 25). */
union peer_addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

struct peer {
	bool resolved;   /* identity looked up (always, for Unix peers) */
	bool known;      /* uid is trustworthy */
	uid_t uid;
	gid_t gid;       /* Unix peers (SO_PEERCRED); (gid_t)-1 for TCP ones */
	pid_t pid;       /* Unix peers only; 0 otherwise */
	bool admin;      /* root, admin_group member, or token holder */
	char desc[96];   /* for logs: "uid 1000 pid 4242" / "127.0.0.1:51234" */
	/* TCP peers, until resolved */
	union peer_addr remote, local;
	const char *admin_group;  /* borrowed from the daemon's config */
	bool loopback_identity;
};

/* Fills p from a Unix socket's SO_PEERCRED. 0 or -errno. */
int peer_from_unix(struct peer *p, int fd, const char *admin_group);

/* Fills p for a TCP connection; its identity is looked up by peer_resolve,
 * which the caller makes at once. admin_group must outlive p. */
void peer_from_tcp(struct peer *p, int fd, const char *admin_group, bool loopback_identity);
/* Looks up a TCP peer's uid (loopback only, when loopback_identity is on):
 * the owner of the client's socket, while a process still holds it.
 * 0 when known; -ENOENT when it cannot be (not loopback, identity off, or
 * no live socket: the client closed, or the socket is not a local one). */
int peer_resolve(struct peer *p);
/* Is p's address a loopback one? */
bool peer_is_loopback(const struct peer *p);

/* May p act on things (processes, traces) that belong to uid? */
static inline bool peer_may(const struct peer *p, uid_t uid)
{
	return p->admin || (p->known && p->uid == uid);
}

/* Is the process that connected Unix socket fd alive, that process and
 * not another given its pid since? 1 yes, 0 no, -1 unknown (a kernel
 * before 6.5, without SO_PEERPIDFD). */
int peer_unix_alive(int fd);

/* When pid started (clock ticks since boot, /proc/<pid>/stat field 22):
 * with the pid, the identity of one process over time, since pids are
 * reused. 0 when the process is gone (or unreadable). */
unsigned long long peer_start_time(pid_t pid);
/* That field of one /proc/<pid>/stat line, or 0. */
unsigned long long peer_stat_start(const char *line);

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
 * -1; the owner of the socket (local, lport) -> (remote, rport) on a
 * /proc/net/tcp line (true when it is that socket and a process holds it:
 * inode not 0); the inode of an abstract socket named
 * "\0name\0" on a /proc/net/unix line, or 0. */
int peer_stat_ppid(const char *line);
bool peer_tcp_line_uid(const char *line, const char *local, int lport, const char *remote,
                       int rport, uid_t *uid);
unsigned long peer_unix_line_inode(const char *line, const char *name);

#endif
