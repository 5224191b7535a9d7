/*
 * peer: see peer.h. The /proc/net/tcp lookup matches the client's
 * (address, port) against the "local_address" column of the socket table,
 * whose owner column is the uid that created the client socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer.h"

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
	if (gid == gr->gr_gid)
		return true;
	pw = getpwuid(uid);
	if (pw == NULL)
		return false;
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
	p->known = true;
	p->uid = cred.uid;
	p->gid = cred.gid;
	p->pid = cred.pid;
	p->admin = cred.uid == 0 || in_admin_group(cred.uid, cred.gid, admin_group);
	snprintf(p->desc, sizeof(p->desc), "uid %u pid %d", (unsigned)cred.uid, (int)cred.pid);
	return 0;
}

/* Looks for the socket whose local address is (addr, port) in one of the
 * kernel's socket tables. hexaddr is the address as that table prints it. */
static bool lookup_table(const char *table, const char *hexaddr, int port, uid_t *uid)
{
	char line[512], local[64];
	unsigned lport, u;
	bool found = false;
	FILE *f = fopen(table, "r");

	if (f == NULL)
		return false;
	if (fgets(line, sizeof(line), f) == NULL) { /* header */
		fclose(f);
		return false;
	}
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		/* sl local_address rem_address st tx:rx tr:when retrnsmt uid */
		if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x %*s %*s %*s %*s %*s %u",
		           local, &lport, &u) != 3)
			continue;
		if ((int)lport == port && strcasecmp(local, hexaddr) == 0) {
			*uid = (uid_t)u;
			found = true;
		}
	}
	fclose(f);
	return found;
}

void peer_from_tcp(struct peer *p, int fd, const char *admin_group, bool loopback_identity)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "?", hex[40];
	int port = 0;
	uid_t uid;

	memset(p, 0, sizeof(*p));
	if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
		snprintf(p->desc, sizeof(p->desc), "tcp peer (unknown)");
		return;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		port = ntohs(in->sin_port);
		/* /proc/net/tcp prints the 32-bit address in host order */
		snprintf(hex, sizeof(hex), "%08X", (unsigned)in->sin_addr.s_addr);
		if (loopback_identity && (ntohl(in->sin_addr.s_addr) >> 24) == 127 &&
		    lookup_table("/proc/net/tcp", hex, port, &uid))
			p->known = true;
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		const uint32_t *w = (const uint32_t *)(const void *)&in6->sin6_addr;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		port = ntohs(in6->sin6_port);
		snprintf(hex, sizeof(hex), "%08X%08X%08X%08X", (unsigned)w[0],
		         (unsigned)w[1], (unsigned)w[2], (unsigned)w[3]);
		if (loopback_identity &&
		    (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) &&
		    lookup_table("/proc/net/tcp6", hex, port, &uid))
			p->known = true;
	}
	if (p->known) {
		p->uid = uid;
		p->gid = (gid_t)-1;
		{
			struct passwd *pw = getpwuid(uid);

			if (pw != NULL)
				p->gid = pw->pw_gid;
		}
		p->admin = uid == 0 || in_admin_group(uid, p->gid, admin_group);
		snprintf(p->desc, sizeof(p->desc), "%s:%d (uid %u)", ip, port, (unsigned)uid);
	} else
		snprintf(p->desc, sizeof(p->desc), "%s:%d", ip, port);
}

int peer_ancestors(pid_t pid, int32_t *out, int max)
{
	char path[64], buf[512], *close;
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
		/* the command name may hold spaces and parentheses: skip to the last ')' */
		close = strrchr(buf, ')');
		if (close == NULL || sscanf(close + 1, " %*c %d", &ppid) != 1 || ppid <= 0)
			break;
		out[n++] = ppid;
		pid = ppid;
	}
	return n;
}
