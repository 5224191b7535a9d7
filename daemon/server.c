/*
 * server: see server.h. struct server is defined here only: its three
 * listening handles are closed by server_stop and freed by server_free
 * once the loop has run their close callbacks (main.c frees it after the
 * loop ends). kineto_passed_fd stays in struct daemon: server.c only
 * hands systemd's datagram socket to kineto.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>


#include "bus.h"
#include "log.h"
#include "sdnotify.h"
#include "server.h"

struct server {
	struct daemon *d;
	uv_pipe_t unix_listener;
	uv_tcp_t tcp_listener;
	uv_tcp_t tls_listener;
	bool unix_open, tcp_open, tls_open; /* initialised: uv_close is owed */
	bool unix_created;         /* we bound the socket file, so we remove it */
	int tcp_port;              /* the bound port (tcp may ask for 0) */
	int tls_port;
};

/* What every connection is told of the daemon's listeners: whether a
 * tls.listen port is open (a hint for a TLS hello sent in the clear). */
static unsigned served(const struct server *sv)
{
	return sv->tls_open ? BUS_TLS_SERVED : 0;
}

static void on_unix_conn(uv_stream_t *s, int status)
{
	struct server *sv = s->data;

	if (status < 0) {
		log_warn("accept on the Unix socket: %s", uv_strerror(status));
		return;
	}
	bus_accept(sv->d, s, served(sv));
}

static void on_tcp_conn(uv_stream_t *s, int status)
{
	struct server *sv = s->data;

	if (status < 0) {
		log_warn("accept on TCP: %s", uv_strerror(status));
		return;
	}
	bus_accept(sv->d, s, BUS_TCP | served(sv));
}

static void on_tls_conn(uv_stream_t *s, int status)
{
	struct server *sv = s->data;

	if (status < 0) {
		log_warn("accept on the TLS listener: %s", uv_strerror(status));
		return;
	}
	bus_accept(sv->d, s, BUS_TCP | BUS_TLS | served(sv));
}

/* Is a daemon already answering on path? */
static bool socket_alive(const char *path)
{
	struct sockaddr_un sa;
	int fd, r;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return r == 0;
}

static int bind_unix(struct server *sv, struct perr *err)
{
	struct daemon *d = sv->d;
	const char *path = d->cfg.socket_path;
	char dir[sizeof(d->cfg.socket_path)], *slash;
	struct stat st;
	mode_t old;
	int r;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			return perr_set(err, -errno, "cannot create %s: %s", dir, strerror(errno));
		/* whoever may write into the directory may put a socket of their
		 * own in gprofd's place (a sticky one like /tmp: only remove
		 * their own names) */
		if (stat(dir, &st) == 0 && ((st.st_uid != geteuid() && st.st_uid != 0) ||
		                            ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))))
			return perr_set(err, -EPERM, "the socket directory %s (uid %u, mode %04o) is "
			                "writable by users other than gprofd's: any of them could put a "
			                "socket of their own in its place; give --socket in a directory "
			                "only gprofd's uid (or root) may write", dir,
			                (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
	if (access(path, F_OK) == 0) {
		if (socket_alive(path))
			return perr_set(err, -EADDRINUSE, "%s: another gprofd is already running "
			                "there (stop it, or use --socket)", path);
		unlink(path);
	}
	r = uv_pipe_init(d->loop, &sv->unix_listener, 0);
	if (r < 0)
		return perr_set(err, r, "uv_pipe_init: %s", uv_strerror(r));
	sv->unix_open = true;
	old = umask(0111); /* the socket file: rw for everyone */
	r = uv_pipe_bind(&sv->unix_listener, path);
	umask(old);
	if (r < 0)
		return perr_set(err, r, "cannot listen on %s: %s", path, uv_strerror(r));
	sv->unix_created = true;
	return 0;
}

/* Binds l to addr (the option `what`); the bound port goes to *bound. */
static int bind_tcp(struct daemon *d, uv_tcp_t *l, bool *open, const char *what,
                    const char *addr, int *bound, struct perr *err)
{
	char host[CONFIG_ADDR_MAX];
	struct sockaddr_storage ss;
	int port, r, len = sizeof(ss);

	if (config_split_addr(addr, host, sizeof(host), &port) < 0)
		return perr_set(err, -EINVAL, "%s: bad address %s", what, addr);
	if (strcmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
	    uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0)
		return perr_set(err, -EINVAL, "%s: %s is not a numeric IPv4 or IPv6 address",
		                what, host);
	r = uv_tcp_init(d->loop, l);
	if (r < 0)
		return perr_set(err, r, "uv_tcp_init: %s", uv_strerror(r));
	*open = true;
	r = uv_tcp_bind(l, (struct sockaddr *)&ss, 0);
	if (r == 0)
		r = uv_tcp_getsockname(l, (struct sockaddr *)&ss, &len);
	if (r < 0)
		return perr_set(err, r, "cannot listen on %s %s: %s", what, addr, uv_strerror(r));
	*bound = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* Takes the sockets systemd passed, if any. Returns how many were taken. */
static int take_activated(struct server *sv, struct perr *err)
{
	struct daemon *d = sv->d;
	int n = sdnotify_listen_fds(), i, fd, r, taken = 0;

	for (i = 0; i < n; i++) {
		fd = 3 + i; /* SD_LISTEN_FDS_START */
		if (sdnotify_is_unix_listener(fd) && !sv->unix_open) {
			r = uv_pipe_init(d->loop, &sv->unix_listener, 0);
			if (r == 0)
				sv->unix_open = true;
			if (r == 0)
				r = uv_pipe_open(&sv->unix_listener, fd);
		} else if (sdnotify_is_inet_listener(fd) && !sv->tcp_open) {
			struct sockaddr_storage ss;
			int len = sizeof(ss);

			r = uv_tcp_init(d->loop, &sv->tcp_listener);
			if (r == 0)
				sv->tcp_open = true;
			if (r == 0)
				r = uv_tcp_open(&sv->tcp_listener, fd);
			if (r == 0 && uv_tcp_getsockname(&sv->tcp_listener, (struct sockaddr *)&ss, &len) == 0)
				sv->tcp_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		} else if (sdnotify_is_unix_dgram(fd) && !d->kineto_passed) {
			/* Kineto's socket: kineto_start checks its name */
			d->kineto_passed = true;
			d->kineto_passed_fd = fd;
			r = 0;
		} else {
			log_warn("ignoring socket %d passed by systemd: not a listening stream "
			         "socket or a Unix datagram socket gprofd can use", fd);
			continue;
		}
		if (r < 0)
			return perr_set(err, r, "socket %d from systemd: %s", fd, uv_strerror(r));
		taken++;
	}
	return taken;
}

struct server *server_new(struct daemon *d)
{
	struct server *sv = calloc(1, sizeof(*sv));

	if (sv != NULL)
		sv->d = d;
	return sv;
}

int server_start(struct server *sv, struct perr *err)
{
	struct daemon *d = sv->d;
	int r, activated;

	activated = take_activated(sv, err);
	if (activated < 0)
		return activated;
	if (!sv->unix_open) {
		r = bind_unix(sv, err);
		if (r < 0)
			return r;
	}
	if (!sv->tcp_open && strcmp(d->cfg.tcp, "off") != 0) {
		r = bind_tcp(d, &sv->tcp_listener, &sv->tcp_open, "tcp", d->cfg.tcp, &sv->tcp_port,
		             err);
		if (r < 0)
			return r;
	}
	if (d->tls != NULL) {
		r = bind_tcp(d, &sv->tls_listener, &sv->tls_open, "tls.listen", d->cfg.tls_listen,
		             &sv->tls_port, err);
		if (r < 0)
			return r;
	}
	sv->unix_listener.data = sv;
	r = uv_listen((uv_stream_t *)&sv->unix_listener, 128, on_unix_conn);
	if (r < 0)
		return perr_set(err, r, "listen on %s: %s", d->cfg.socket_path, uv_strerror(r));
	if (sv->tcp_open) {
		sv->tcp_listener.data = sv;
		r = uv_listen((uv_stream_t *)&sv->tcp_listener, 128, on_tcp_conn);
		if (r < 0)
			return perr_set(err, r, "listen on tcp %s: %s", d->cfg.tcp, uv_strerror(r));
	}
	if (sv->tls_open) {
		sv->tls_listener.data = sv;
		r = uv_listen((uv_stream_t *)&sv->tls_listener, 128, on_tls_conn);
		if (r < 0)
			return perr_set(err, r, "listen on tls.listen %s: %s", d->cfg.tls_listen,
			                uv_strerror(r));
	}
	if (activated)
		log_info("using %d socket%s passed by systemd", activated, activated == 1 ? "" : "s");
	return 0;
}

void server_stop(struct server *sv)
{
	if (sv == NULL)
		return;
	if (sv->unix_open && !uv_is_closing((uv_handle_t *)&sv->unix_listener)) {
		uv_close((uv_handle_t *)&sv->unix_listener, NULL);
		if (sv->unix_created)
			unlink(sv->d->cfg.socket_path);
	}
	if (sv->tcp_open && !uv_is_closing((uv_handle_t *)&sv->tcp_listener))
		uv_close((uv_handle_t *)&sv->tcp_listener, NULL);
	if (sv->tls_open && !uv_is_closing((uv_handle_t *)&sv->tls_listener))
		uv_close((uv_handle_t *)&sv->tls_listener, NULL);
}

void server_free(struct server *sv)
{
	free(sv);
}

bool server_unix_open(const struct server *sv)
{
	return sv != NULL && sv->unix_open;
}

int server_tcp_port(const struct server *sv)
{
	return sv != NULL && sv->tcp_open ? sv->tcp_port : -1;
}

int server_tls_port(const struct server *sv)
{
	return sv != NULL && sv->tls_open ? sv->tls_port : -1;
}
