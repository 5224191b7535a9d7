/*
 * gprofd: the per-host daemon (docs/ARCHITECTURE.md, gprofd(8)).
 *
 * main owns the struct daemon and the loop. Start-up: embedded defaults,
 * then the YAML file (--config, else the default path, which may be
 * absent), then flags; check; load the auth token; open the trace store;
 * listen; tell systemd READY=1. Signals:
 *   SIGHUP           reload the file (a bad or incomplete file keeps the
 *                    old config, and so does a missing one the running
 *                    config came from)
 *   SIGINT, SIGTERM  stop accepting, give uploads in flight STOP_GRACE_MS to
 *                    finish, fail what is left, close every handle, exit 0.
 * The loop must close with no handle left open: a leak of a handle is a
 * bug, reported and turned into exit status 1.
 *
 * Floor: the top; nobody calls it. It installs the engines' upward calls
 * (d->hooks, install_hooks) before anything runs, and drives the others:
 * server (listen), bus (deadlines, shutdown), store, kineto, metrics.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <uv.h>

#include "clock.h"
#include "auth.h"
#include "bus.h"
#include "component.h"
#include "daemon.h"
#include "kineto.h"
#include "log.h"
#include "metrics.h"
#include "sdnotify.h"
#include "server.h"
#include "session.h"
#include "store.h"
#include "tlsio.h"
#include "trace.h"

#define STOP_GRACE_MS 10000
#define RETENTION_PERIOD_MS (3600 * 1000)

/* Flags given on the command line, re-applied over the file on reload. */
struct flag {
	const char *option;
	const char *value;
};
static struct flag flags[16];
static int nflags;
static bool verbose;
/* The file: given with --config (then it must exist), else the default
 * path, read when it is there. config_from_file: the running configuration
 * came from it, so a reload that finds it gone keeps that configuration
 * rather than fall back to the defaults (which could, say, shorten the
 * retention and delete traces). */
static char default_path[PATH_MAX];
static bool config_explicit;
static bool config_from_file;

static void usage(FILE *f)
{
	config_default_path(default_path, sizeof(default_path));
	fprintf(f,
	        "usage: gprofd [--config FILE] [--check-config] [--dump-config]\n"
	        "              [--socket PATH] [--tcp ADDR:PORT|off] [--metrics ADDR:PORT|off]\n"
	        "              [--state-dir DIR] [-v] [--version] [--help]\n"
	        "Runs the gprofd GPU profiling daemon in the foreground.\n"
	        "  --config FILE    YAML configuration (default: %s if it exists,\n"
	        "                   else embedded defaults)\n"
	        "  --check-config   validate the configuration and exit\n"
	        "  --dump-config    print the effective configuration and exit\n"
	        "  --socket PATH    Unix socket (default $GPROF_SOCKET, else /run/gprofd/gprofd.sock\n"
	        "                   as root, $XDG_RUNTIME_DIR/gprofd/gprofd.sock otherwise)\n"
	        "  --tcp ADDR:PORT  TCP address for gprofctl and dyno, or off (127.0.0.1:1778)\n"
	        "  --metrics ADDR   Prometheus address, or off (127.0.0.1:9773)\n"
	        "  --state-dir DIR  where traces are stored (/var/lib/gprofd as root,\n"
	        "                   $XDG_STATE_HOME/gprofd or ~/.local/state/gprofd otherwise)\n"
	        "  -v, --verbose    log debug messages\n"
	        "See gprofd(8).\n", default_path[0] ? default_path : "none");
}

/* Builds the configuration from its three sources. The file at path may be
 * absent unless must_exist; *from_file says whether it was read. */
static int build_config(struct config *c, const char *path, bool must_exist, bool *from_file,
                        struct perr *err)
{
	int i, r;

	config_defaults(c);
	*from_file = false;
	if (path != NULL) {
		r = config_load(c, path, err);
		if (r == -ENOENT && must_exist && !config_explicit)
			return perr_set(err, r, "%s is gone, and the running configuration came from "
			                "it (to return to the defaults, write {} there)", path);
		if (r < 0 && (r != -ENOENT || must_exist))
			return r;
		*from_file = r == 0;
	}
	for (i = 0; i < nflags; i++) {
		r = config_set(c, flags[i].option, flags[i].value, err);
		if (r < 0)
			return r;
	}
	if (verbose)
		c->log_level = LOG_DEBUG;
	return config_check(c, err);
}

static int load_token(struct daemon *d, const struct config *c, struct perr *err)
{
	if (c->auth_token_file[0] == 0) {
		d->token_len = 0;
		return 0;
	}
	return auth_load_token(c->auth_token_file, d->token, sizeof(d->token), &d->token_len, err);
}

/* The TLS listener's certificates, read now (tls.listen off: none). */
static int load_tls(const struct config *c, struct tls_ctx **out, struct perr *err)
{
	struct stat st;

	*out = NULL;
	if (strcmp(c->tls_listen, "off") == 0)
		return 0;
	/* as sshd with its host keys: a private key others can read is refused
	 * (group-readable is allowed: ssl-cert and the like) */
	if (stat(c->tls_key, &st) == 0 && (st.st_mode & 0007))
		return perr_set(err, -EPERM, "tls.key %s is readable by other users (mode %03o): "
		                "chmod o-rwx it (600, or 640 for a group such as ssl-cert)",
		                c->tls_key, (unsigned)(st.st_mode & 0777));
	return tls_server_ctx(out, c->tls_cert, c->tls_key, c->tls_client_ca, err);
}

static void on_handle_closed(uv_handle_t *h)
{
	(void)h;
}

/* Last step of a stop: everything is closed but the daemon's own handles. */
static void stop_finish(struct daemon *d)
{
	trace_shutdown(d);
	uv_close((uv_handle_t *)&d->sigint, on_handle_closed);
	uv_close((uv_handle_t *)&d->sigterm, on_handle_closed);
	uv_close((uv_handle_t *)&d->sighup, on_handle_closed);
	/* Closing the handles restored the default actions: a repeated
	 * SIGTERM during the last steps must not kill a clean exit. */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	uv_close((uv_handle_t *)&d->retention_timer, on_handle_closed);
	uv_close((uv_handle_t *)&d->deadline_timer, on_handle_closed);
	uv_close((uv_handle_t *)&d->stop_timer, on_handle_closed);
	uv_close((uv_handle_t *)&d->reload_timer, on_handle_closed);
}

static void on_deadlines(uv_timer_t *t)
{
	bus_deadlines(t->data);
	component_scan(t->data); /* what /metrics says of the parts, each second */
}

static bool uploads_in_flight(struct daemon *d)
{
	struct session *s;

	for (s = d->sessions; s != NULL; s = s->next)
		if (s->uploads != NULL)
			return true;
	return false;
}

static void on_stop_check(uv_timer_t *t)
{
	struct daemon *d = t->data;
	static int64_t waited;

	waited += 100;
	if (uploads_in_flight(d) && waited < STOP_GRACE_MS)
		return;
	if (uploads_in_flight(d))
		log_warn("stopping with uploads still in flight; they are marked failed");
	uv_timer_stop(t);
	bus_close_all(d);
	stop_finish(d);
}

static void daemon_stop(struct daemon *d)
{
	struct session *s, *next;

	if (d->stopping)
		return;
	d->stopping = true;
	sdnotify_send("STOPPING=1");
	server_stop(d->server);
	kineto_stop(d);
	metrics_stop(d);
	/* Connections without uploads go now; uploads get a grace period. */
	for (s = d->sessions; s != NULL; s = next) {
		next = s->next;
		if (s->uploads == NULL)
			conn_close(&s->conn, "daemon stopping");
	}
	uv_timer_start(&d->stop_timer, on_stop_check, 0, 100);
}

/*
 * Every connection is a descriptor, and the soft limit a shell or a
 * container hands down is often 1,024: lift it to what limits.connections
 * needs (plus room for the store, the metrics server and Kineto's files), as
 * far as the hard limit allows, and say so when that is not far enough.
 */
static void raise_nofile(const struct config *c)
{
	rlim_t want = (rlim_t)c->max_connections + 256;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < want)
		log_warn("limits.connections is %llu, but this process may open only %llu descriptors "
		         "(its hard limit): connections past about %llu will be refused; raise the hard "
		         "limit (LimitNOFILE= in the unit, ulimit -Hn) or lower limits.connections",
		         (unsigned long long)c->max_connections, (unsigned long long)rl.rlim_cur,
		         (unsigned long long)(rl.rlim_cur > 256 ? rl.rlim_cur - 256 : 0));
}

static void daemon_reload(struct daemon *d)
{
	struct tls_ctx *tls = NULL;
	struct config c;
	struct perr err;
	bool from_file;

	sdnotify_send("RELOADING=1");
	if (build_config(&c, d->config_path, config_explicit || config_from_file, &from_file,
	                 &err) < 0 ||
	    (server_tls_port(d->server) >= 0 && load_tls(&c, &tls, &err) < 0) || load_token(d, &c, &err) < 0) {
		log_err("reload failed, keeping the old configuration: %s", err.msg);
		tls_ctx_unref(tls);
		sdnotify_send("READY=1");
		return;
	}
	if (strcmp(c.tls_listen, d->cfg.tls_listen) != 0)
		log_warn("reload: tls.listen changes take effect at the next start");
	/* new certificates serve new connections; open ones keep theirs */
	if (tls != NULL) {
		tls_ctx_unref(d->tls);
		d->tls = tls;
	}
	snprintf(c.tls_listen, sizeof(c.tls_listen), "%s", d->cfg.tls_listen);
	if (strcmp(c.socket_path, d->cfg.socket_path) != 0 || strcmp(c.tcp, d->cfg.tcp) != 0 ||
	    strcmp(c.state_dir, d->cfg.state_dir) != 0 || c.kineto_enabled != d->cfg.kineto_enabled ||
	    strcmp(c.kineto_socket_name, d->cfg.kineto_socket_name) != 0 ||
	    strcmp(c.kineto_socket_dir, d->cfg.kineto_socket_dir) != 0)
		log_warn("reload: socket, tcp, state_dir and kineto socket changes take effect at the "
		         "next start");
	/* the sockets and the store stay as they are: the running values stay */
	snprintf(c.socket_path, sizeof(c.socket_path), "%s", d->cfg.socket_path);
	snprintf(c.tcp, sizeof(c.tcp), "%s", d->cfg.tcp);
	snprintf(c.state_dir, sizeof(c.state_dir), "%s", d->cfg.state_dir);
	c.kineto_enabled = d->cfg.kineto_enabled;
	snprintf(c.kineto_socket_name, sizeof(c.kineto_socket_name), "%s", d->cfg.kineto_socket_name);
	snprintf(c.kineto_socket_dir, sizeof(c.kineto_socket_dir), "%s", d->cfg.kineto_socket_dir);
	d->cfg = c;
	config_from_file = from_file;
	log_init((int)c.log_level);
	raise_nofile(&d->cfg);
	if (from_file)
		log_info("configuration reloaded from %s", d->config_path);
	else
		log_info("configuration reloaded: no file at %s, embedded defaults and flags",
		         d->config_path ? d->config_path : "(no default path)");
	store_retain(d);
	sdnotify_send("READY=1");
}

static void on_reload_timer(uv_timer_t *t)
{
	daemon_reload(t->data);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	if (signum == SIGHUP) {
		/* one reload per loop turn however many SIGHUPs came meanwhile
		 * (libuv calls back once per signal delivered): it reads the
		 * file as it is then, so nothing is lost, and a storm of them
		 * cannot starve connections and traces */
		if (!d->stopping && !uv_is_active((uv_handle_t *)&d->reload_timer))
			uv_timer_start(&d->reload_timer, on_reload_timer, 0, 0);
		return;
	}
	log_info("signal %d: stopping", signum);
	daemon_stop(d);
}

static void on_retention(uv_timer_t *t)
{
	store_retain(t->data);
}

/* registry -> the floors above it: a process is about to be freed. */
static void on_proc_gone(struct daemon *d, struct proc *p)
{
	trace_proc_gone(d, p);
	metrics_proc_gone(d, p);
}

/* Connects the engines' upward calls (daemon.h, struct daemon_hooks). */
static void install_hooks(struct daemon *d)
{
	d->hooks.proc_gone = on_proc_gone;
}

static int run(struct daemon *d)
{
	struct perr err;
	uv_loop_t loop;
	int r;

	/* A peer that closes while a reply is on its way must cost that
	 * connection (EPIPE), never the daemon: SIGPIPE's default kills. */
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&loop);
	d->loop = &loop;
	install_hooks(d);
	d->started_us = clock_now_us();
	if (gethostname(d->host, sizeof(d->host) - 1) != 0)
		snprintf(d->host, sizeof(d->host), "localhost");
	uv_signal_init(&loop, &d->sigint);
	uv_signal_init(&loop, &d->sigterm);
	uv_signal_init(&loop, &d->sighup);
	uv_timer_init(&loop, &d->retention_timer);
	uv_timer_init(&loop, &d->deadline_timer);
	uv_timer_init(&loop, &d->stop_timer);
	uv_timer_init(&loop, &d->reload_timer);
	d->sigint.data = d->sigterm.data = d->sighup.data = d;
	d->retention_timer.data = d->stop_timer.data = d->deadline_timer.data = d;
	d->reload_timer.data = d;
	uv_signal_start(&d->sigint, on_signal, SIGINT);
	uv_signal_start(&d->sigterm, on_signal, SIGTERM);
	uv_signal_start(&d->sighup, on_signal, SIGHUP);

	raise_nofile(&d->cfg);
	r = component_init(d, &err);
	if (r == 0)
		r = store_init(d, &err);
	if (r == 0 && (d->server = server_new(d)) == NULL)
		r = perr_set(&err, -ENOMEM, "out of memory");
	if (r == 0)
		r = server_start(d->server, &err);
	if (r == 0)
		component_listeners(d, server_unix_open(d->server), server_tcp_port(d->server),
		                    server_tls_port(d->server));
	/* Kineto before metrics, so the first sample already says how each
	 * part started (component.c) */
	if (r == 0 && kineto_start(d, &err) < 0) {
		/* PyTorch clients are a feature, not a requirement of the daemon;
		 * but a taken name leaves their jobs untraced: gprofctl status and
		 * gprofd_component_degraded say so, with the holder */
		log_err("%s", err.msg);
		component_set(d, COMP_KINETO, COMP_DOWN, "%s", err.msg);
	}
	if (r == 0)
		component_scan(d);
	if (r == 0 && metrics_start(d, &err) < 0) {
		/* metrics are a feature too: a failure must not stop tracing */
		log_err("%s; metrics off", err.msg);
		component_set(d, COMP_METRICS, COMP_DOWN, "%s; metrics off", err.msg);
	}
	if (r < 0) {
		log_err("%s", err.msg);
		server_stop(d->server);
		stop_finish(d);
		uv_run(&loop, UV_RUN_DEFAULT);
		kineto_free(d);
		server_free(d->server);
		store_deinit(d);
		uv_loop_close(&loop);
		component_deinit(d);
		return 1;
	}
	uv_timer_start(&d->retention_timer, on_retention, RETENTION_PERIOD_MS, RETENTION_PERIOD_MS);
	uv_timer_start(&d->deadline_timer, on_deadlines, 1000, 1000);
	{
		char tcp[32] = "tcp off", tls[32] = "";

		if (server_tcp_port(d->server) >= 0)
			snprintf(tcp, sizeof(tcp), "tcp port %d", server_tcp_port(d->server));
		if (server_tls_port(d->server) >= 0)
			snprintf(tls, sizeof(tls), ", tls port %d", server_tls_port(d->server));
		log_info("gprofd %s running: unix %s, %s%s, traces in %s/traces", GPROF_VERSION,
		         d->cfg.socket_path, tcp, tls, d->cfg.state_dir);
	}
	sdnotify_send("READY=1");
	uv_run(&loop, UV_RUN_DEFAULT);
	kineto_free(d);
	server_free(d->server);
	store_deinit(d);
	r = uv_loop_close(&loop);
	component_deinit(d);
	if (r != 0) {
		log_err("handles left open at exit: %s", uv_strerror(r));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_CONFIG = 256, O_CHECK, O_DUMP, O_SOCKET, O_TCP, O_METRICS, O_STATE, O_VERSION };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, O_CONFIG },
		{ "check-config", no_argument, NULL, O_CHECK },
		{ "dump-config", no_argument, NULL, O_DUMP },
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "tcp", required_argument, NULL, O_TCP },
		{ "metrics", required_argument, NULL, O_METRICS },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, O_VERSION },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct daemon d;
	bool check = false, dump = false;
	struct perr err;
	int c, r;

	/* Trace chunks (up to 4 MiB) come from the heap and are reused, instead
	 * of being mapped, page-faulted and unmapped one by one. */
	mallopt(M_MMAP_THRESHOLD, 8 << 20);
	mallopt(M_TRIM_THRESHOLD, 16 << 20);
	/* One arena for every thread: the sampler's and the HTTP thread's
	 * arenas each kept 100 kB of freed memory resident (a heap other than
	 * the main one gives nothing back below the trim threshold above, and
	 * malloc_trim does not shrink it), half an idle daemon's heap (issue
	 * 25). Their few allocations a second do not contend with the loop's. */
	mallopt(M_ARENA_MAX, 1);

	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case O_CONFIG:
			d.config_path = optarg;
			config_explicit = true;
			break;
		case O_CHECK:
			check = true;
			break;
		case O_DUMP:
			dump = true;
			break;
		case O_SOCKET:
			flags[nflags++] = (struct flag){ "socket", optarg };
			break;
		case O_TCP:
			flags[nflags++] = (struct flag){ "tcp", optarg };
			break;
		case O_METRICS:
			flags[nflags++] = (struct flag){ "metrics", optarg };
			break;
		case O_STATE:
			flags[nflags++] = (struct flag){ "state_dir", optarg };
			break;
		case 'v':
			verbose = true;
			break;
		case O_VERSION:
			printf("gprofd %s\n", GPROF_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (nflags == (int)(sizeof(flags) / sizeof(flags[0]))) {
			fprintf(stderr, "gprofd: too many options\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gprofd: unexpected argument '%s'; see gprofd --help\n",
		        argv[optind]);
		return 2;
	}
	if (!config_explicit) {
		config_default_path(default_path, sizeof(default_path));
		d.config_path = default_path[0] ? default_path : NULL;
	}
	if (build_config(&d.cfg, d.config_path, config_explicit, &config_from_file, &err) < 0) {
		fprintf(stderr, "gprofd: %s\n", err.msg);
		return 1;
	}
	if (load_token(&d, &d.cfg, &err) < 0 || load_tls(&d.cfg, &d.tls, &err) < 0) {
		fprintf(stderr, "gprofd: %s\n", err.msg);
		return 1;
	}
	if (dump) {
		if (config_from_file)
			printf("# from %s, then flags\n", d.config_path);
		else
			printf("# no file at %s: embedded defaults, then flags\n",
			       d.config_path ? d.config_path : "(no default path)");
		config_dump(&d.cfg, stdout);
		return 0;
	}
	if (check) {
		if (config_from_file)
			printf("gprofd: configuration OK: %s\n", d.config_path);
		else
			printf("gprofd: configuration OK (embedded defaults; no file at %s)\n",
			       d.config_path ? d.config_path : "(no default path)");
		return 0;
	}
	log_init((int)d.cfg.log_level);
	if (config_from_file)
		log_info("configuration from %s", d.config_path);
	else
		log_info("no configuration file at %s: embedded defaults",
		         d.config_path ? d.config_path : "(no default path)");
	r = run(&d);
	tls_ctx_unref(d.tls);
	return r;
}
