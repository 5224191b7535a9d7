/*
 * peer: see peer.h. A loopback TCP client is identified once, at accept,
 * by the client socket that is the exact mirror of ours (its source is our
 * peer, its destination is us), and only while that socket is a full
 * socket some process still holds (inode not 0). A socket its owner has
 * closed becomes a timewait "minisock" that the kernel reports as uid 0
 * with inode 0: taking that as the owner made any user root (issue 23,
 * case 1), so it is refused instead.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer.h"

/* gid: the peer's primary group, or (gid_t)-1 for its account's (looked up
 * here, and only here: with no admin_group, or for root, no account is
 * read for a connection). */
static bool in_admin_group(uid_t uid, gid_t gid, const char *group)
{
	struct group *gr;
	struct passwd *pw;
	char **m;

	if (group == NULL || *group == 0)
		return false;
	gr = getgrnam(group);
	if (gr == NULL)
		return false;
	if (gid != (gid_t)-1 && gid == gr->gr_gid)
		return true;
	pw = getpwuid(uid);
	if (pw == NULL)
		return false;
	if (gid == (gid_t)-1 && pw->pw_gid == gr->gr_gid)
		return true;
	for (m = gr->gr_mem; *m != NULL; m++)
		if (strcmp(*m, pw->pw_name) == 0)
			return true;
	return false;
}

int peer_from_unix(struct peer *p, int fd, const char *admin_group)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	memset(p, 0, sizeof(*p));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return -errno;
	p->resolved = true;
	p->known = true;
	p->uid = cred.uid;
	p->gid = cred.gid;
	p->pid = cred.pid;
	p->admin = cred.uid == 0 || in_admin_group(cred.uid, cred.gid, admin_group);
	snprintf(p->desc, sizeof(p->desc), "uid %u pid %d", (unsigned)cred.uid, (int)cred.pid);
	return 0;
}

bool peer_tcp_line_uid(const char *line, const char *local, int lport, const char *remote,
                       int rport, uid_t *uid)
{
	char l[64], r[64];
	unsigned lp, rp, u;
	unsigned long inode;

	/* sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode */
	if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %63[0-9A-Fa-f]:%x %*s %*s %*s %*s %u %*d %lu",
	           l, &lp, r, &rp, &u, &inode) != 6)
		return false;
	if ((int)lp != lport || (int)rp != rport || strcasecmp(l, local) != 0 ||
	    strcasecmp(r, remote) != 0 || inode == 0)
		return false;
	*uid = (uid_t)u;
	return true;
}

/* Looks for the live socket (local, lport) -> (remote, rport) in one of the
 * kernel's socket tables, spelled as that table prints addresses. */
static bool lookup_table(const char *table, const char *local, int lport, const char *remote,
                         int rport, uid_t *uid)
{
	char line[512];
	bool found = false;
	FILE *f = fopen(table, "re");

	if (f == NULL)
		return false;
	if (fgets(line, sizeof(line), f) == NULL) { /* header */
		fclose(f);
		return false;
	}
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = peer_tcp_line_uid(line, local, lport, remote, rport, uid);
	fclose(f);
	return found;
}

/* The sock_diag socket, opened at the first lookup and kept: one socket()
 * and close() fewer for every loopback connection accepted (issue 25: the
 * identification of each connection of an accept batch is paid before any
 * of their requests is read, and was most of gprofd's 8-client tail above
 * Dynolog's). Loop thread only; dropped on any error, reopened next time. */
static int diag_fd = -1;
static uint32_t diag_seq;

static void diag_drop(void)
{
	if (diag_fd >= 0)
		close(diag_fd);
	diag_fd = -1;
}

/* Asks the kernel for the client's own socket (source = the peer's
 * address, destination = ours) and its owner. true only when found and
 * still held by a process: a timewait or orphaned socket (inode 0) has no
 * owner, whatever uid the kernel prints for it. */
static bool diag_uid(const union peer_addr *remote, const union peer_addr *local, uid_t *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr h;
		char buf[1024];
	} rep;
	bool found = false, done = false;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.nlh.nlmsg_seq = ++diag_seq;
	req.r.sdiag_family = (uint8_t)remote->sa.sa_family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (remote->sa.sa_family == AF_INET) {
		const struct sockaddr_in *r4 = &remote->in, *l4 = &local->in;

		req.r.id.idiag_sport = r4->sin_port;
		req.r.id.idiag_dport = l4->sin_port;
		memcpy(req.r.id.idiag_src, &r4->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &l4->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *r6 = &remote->in6, *l6 = &local->in6;

		req.r.id.idiag_sport = r6->sin6_port;
		req.r.id.idiag_dport = l6->sin6_port;
		memcpy(req.r.id.idiag_src, &r6->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &l6->sin6_addr, 16);
	}
	if (diag_fd < 0)
		diag_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (diag_fd < 0)
		return false;
	if (send(diag_fd, &req, sizeof(req), 0) != (ssize_t)sizeof(req)) {
		diag_drop();
		return false;
	}
	/* The kernel answers within send(): the reply (the socket, or an error
	 * such as ENOENT) is queued already. A reply to an earlier request (its
	 * sequence number) is skipped, so none is ever taken for this one. */
	while (!done && (n = recv(diag_fd, rep.buf, sizeof(rep.buf), MSG_DONTWAIT)) > 0) {
		const struct nlmsghdr *h;
		size_t left = (size_t)n;

		for (h = &rep.h; !done && NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != req.nlh.nlmsg_seq)
				continue;
			done = true;
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
			    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
				const struct inet_diag_msg *m = NLMSG_DATA(h);

				if (m->idiag_inode != 0) {
					*uid = m->idiag_uid;
					found = true;
				}
			}
		}
	}
	if (!done)
		diag_drop(); /* no answer where one was due: start afresh */
	return found;
}

static bool is_loopback(const union peer_addr *ss)
{
	if (ss->sa.sa_family == AF_INET)
		return (ntohl(ss->in.sin_addr.s_addr) >> 24) == 127;
	if (ss->sa.sa_family == AF_INET6) {
		const struct in6_addr *a = &ss->in6.sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* The /proc/net/tcp spelling of a socket's address, for the fallback. */
static void proc_hex(const union peer_addr *ss, char *hex, size_t size, int *port)
{
	if (ss->sa.sa_family == AF_INET) {
		const struct sockaddr_in *in = &ss->in;

		/* the 32-bit address as the kernel prints it: host order */
		snprintf(hex, size, "%08X", (unsigned)in->sin_addr.s_addr);
		*port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = &ss->in6;
		uint32_t w[4];

		memcpy(w, &in6->sin6_addr, 16);
		snprintf(hex, size, "%08X%08X%08X%08X", (unsigned)w[0], (unsigned)w[1],
		         (unsigned)w[2], (unsigned)w[3]);
		*port = ntohs(in6->sin6_port);
	}
}

void peer_from_tcp(struct peer *p, int fd, const char *admin_group, bool loopback_identity)
{
	socklen_t len = sizeof(p->remote);
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	memset(p, 0, sizeof(*p));
	p->admin_group = admin_group;
	p->loopback_identity = loopback_identity;
	if (getpeername(fd, &p->remote.sa, &len) != 0) {
		p->resolved = true;
		snprintf(p->desc, sizeof(p->desc), "tcp peer (unknown)");
		return;
	}
	len = sizeof(p->local);
	getsockname(fd, &p->local.sa, &len);
	if (p->remote.sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &p->remote.in.sin_addr, ip, sizeof(ip));
		port = ntohs(p->remote.in.sin_port);
	} else if (p->remote.sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &p->remote.in6.sin6_addr, ip, sizeof(ip));
		port = ntohs(p->remote.in6.sin6_port);
	}
	snprintf(p->desc, sizeof(p->desc), "%s:%d", ip, port);
}

/* An IPv4 address that reached an IPv6 listener (::ffff:a.b.c.d) as the
 * IPv4 address it is: the client's socket is an IPv4 one. */
static void unmap(const union peer_addr *in, union peer_addr *out)
{
	const struct sockaddr_in6 *in6 = &in->in6;
	struct sockaddr_in *in4 = &out->in;

	*out = *in;
	if (in->sa.sa_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return;
	memset(out, 0, sizeof(*out));
	in4->sin_family = AF_INET;
	in4->sin_port = in6->sin6_port;
	memcpy(&in4->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
}

int peer_resolve(struct peer *p)
{
	union peer_addr remote, local;
	char lhex[40], rhex[40];
	uid_t uid;
	int lport, rport;

	if (p->resolved)
		return p->known ? 0 : -ENOENT;
	p->resolved = true;
	if (!p->loopback_identity || !is_loopback(&p->remote))
		return -ENOENT;
	unmap(&p->remote, &remote);
	unmap(&p->local, &local);
	if (!diag_uid(&remote, &local, &uid)) {
		/* the client's socket: local = our peer, remote = us */
		proc_hex(&remote, lhex, sizeof(lhex), &lport);
		proc_hex(&local, rhex, sizeof(rhex), &rport);
		if (!lookup_table(remote.sa.sa_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6",
		                  lhex, lport, rhex, rport, &uid))
			return -ENOENT;
	}
	p->known = true;
	p->uid = uid;
	p->gid = (gid_t)-1; /* not looked up: only admin_group needs it */
	p->admin = uid == 0 || in_admin_group(uid, (gid_t)-1, p->admin_group);
	snprintf(p->desc + strlen(p->desc), sizeof(p->desc) - strlen(p->desc), " (uid %u)",
	         (unsigned)uid);
	return 0;
}

bool peer_is_loopback(const struct peer *p)
{
	return is_loopback(&p->remote);
}

int peer_stat_ppid(const char *line)
{
	/* the command name may hold spaces and parentheses: skip to the last ')' */
	const char *close = strrchr(line, ')');
	int ppid;

	if (close == NULL || sscanf(close + 1, " %*c %d", &ppid) != 1 || ppid <= 0)
		return -1;
	return ppid;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

int peer_unix_alive(int fd)
{
	struct pollfd p = { .events = POLLIN };
	socklen_t len = sizeof(p.fd);
	int r;

	/* a pidfd of the very process that connected (the socket keeps its
	 * struct pid), whatever has since been given its pid number */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &p.fd, &len) != 0)
		return errno == ENOPROTOOPT || errno == EOPNOTSUPP ? -1 : 0;
	r = poll(&p, 1, 0); /* readable once it has exited */
	close(p.fd);
	return r == 0 ? 1 : r == 1 ? 0 : -1;
}

unsigned long long peer_stat_start(const char *line)
{
	const char *close = strrchr(line, ')');
	unsigned long long start;

	/* after the name: fields 3 (state) .. 21, then 22, starttime */
	if (close == NULL || sscanf(close + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
	                            "%*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

unsigned long long peer_start_time(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	return ok ? peer_stat_start(buf) : 0;
}

int peer_ancestors(pid_t pid, int32_t *out, int max)
{
	char path[64], buf[512];
	int n = 0, ppid;
	FILE *f;

	while (n < max && pid > 1) {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "r");
		if (f == NULL)
			break;
		if (fgets(buf, sizeof(buf), f) == NULL) {
			fclose(f);
			break;
		}
		fclose(f);
		if ((ppid = peer_stat_ppid(buf)) < 0)
			break;
		out[n++] = ppid;
		pid = ppid;
	}
	return n;
}

/* The inode of the socket bound to "\0name\0" (Kineto's address: the
 * trailing NUL is part of it), from /proc/net/unix, which shows NULs as
 * '@'; 0 if none. */
unsigned long peer_unix_line_inode(const char *line, const char *name)
{
	char path[256];
	unsigned long inode;
	size_t n = strlen(name);

	/* Num RefCount Protocol Flags Type St Inode Path */
	if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %255s", &inode, path) == 2 &&
	    path[0] == '@' && strncmp(path + 1, name, n) == 0 && strcmp(path + 1 + n, "@") == 0)
		return inode;
	return 0;
}

static unsigned long abstract_inode(const char *name)
{
	char line[512];
	unsigned long found = 0;
	FILE *f = fopen("/proc/net/unix", "re");

	if (f == NULL)
		return 0;
	while (found == 0 && fgets(line, sizeof(line), f) != NULL)
		found = peer_unix_line_inode(line, name);
	fclose(f);
	return found;
}

/* Has process pid a descriptor on socket inode? */
static bool holds(const char *pid, unsigned long inode)
{
	char dir[64], want[64], link[64], target[64];
	struct dirent *e;
	bool yes = false;
	DIR *d;
	ssize_t len;

	snprintf(dir, sizeof(dir), "/proc/%s/fd", pid);
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	if ((d = opendir(dir)) == NULL)
		return false; /* gone, or not ours to see */
	while (!yes && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%.20s", dir, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = '\0';
			yes = strcmp(target, want) == 0;
		}
	}
	closedir(d);
	return yes;
}

void peer_abstract_holders(const char *name, char *out, size_t n)
{
	unsigned long inode = abstract_inode(name);
	struct dirent *e;
	size_t used = 0;
	DIR *d;

	out[0] = '\0';
	if (inode == 0 || (d = opendir("/proc")) == NULL)
		return;
	while ((e = readdir(d)) != NULL && used + 1 < n) {
		char path[64], comm[32] = "?", status[256];
		unsigned uid = 0;
		FILE *f;

		if (!isdigit((unsigned char)e->d_name[0]) || !holds(e->d_name, inode))
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/comm", e->d_name);
		if ((f = fopen(path, "re")) != NULL) {
			if (fgets(comm, sizeof(comm), f) != NULL)
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		snprintf(path, sizeof(path), "/proc/%.20s/status", e->d_name);
		if ((f = fopen(path, "re")) != NULL) {
			while (fgets(status, sizeof(status), f) != NULL)
				if (sscanf(status, "Uid: %u", &uid) == 1)
					break;
			fclose(f);
		}
		used += (size_t)snprintf(out + used, n - used, "%spid %s (%s, uid %u)",
		                         used ? ", " : "", e->d_name, comm, uid);
		if (used >= n)
			used = n - 1;
	}
	closedir(d);
}
