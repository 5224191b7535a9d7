/*
 * daemon: the root object of gprofd. One exists per process, owned by
 * main.c; every other daemon module gets a pointer to it and owns only
 * its own part:
 *
 *   server   listening sockets; accepts connections      (server.c, opaque)
 *   sessions client connections: each a session (bus.c, session.h)
 *            holding its transport (conn.c), uploads, download
 *   registry traceable processes, each with its capture
 *            back end (backend.h)                         (registry.c)
 *   traces   traces in progress and recently finished    (trace.c)
 *   store    trace files on disk, retention: opaque,
 *            d->store (store.h)                           (store.c)
 *   kineto   the Kineto service: opaque, d->kineto        (kineto.c)
 *   metrics  sampling, history, /metrics: opaque,
 *            d->metrics                                   (metrics.c)
 *
 * All of it runs on one libuv loop thread, except:
 *   - file work on libuv's thread pool: the uploads' writes (upload.c),
 *     downloads' reads (download.c), the store's jobs (store.c), Kineto's
 *     ingest, which also compresses (kingest.c), statfs (component.c); each
 *     owns its request until its callback comes back to the loop;
 *   - the metrics' own threads (metrics.c): the sampler (/proc, NVML:
 *     mhost.c, mgpu.c), NVML's Xid event waiter (mgpu.c) and libmicrohttpd's
 *     thread serving /metrics. They share with the loop only struct
 *     metrics (under its lock) and the component table (d->comp, under
 *     its own: component.h); no other part of struct daemon.
 *
 * Floor: the root object, below every module but the leaves; no .c of
 * its own. d->hooks.proc_gone is the one upward call left (see there).
 */
#ifndef GPROFD_DAEMON_H
#define GPROFD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "counters.h"

struct session;
struct conn_share;
struct proc;
struct trace;
struct tproc;
struct store;
struct kineto;
struct tls_ctx;
struct server;
struct metrics;

struct components;

struct daemon {
	uv_loop_t *loop;
	struct config cfg;
	const char *config_path;   /* the file (may be absent); NULL: none */
	char host[256];
	int64_t started_us;
	bool stopping;

	/* server.c: the listeners (opaque) */
	struct server *server;
	/* main.c loads these; bus.c and hsession.c use them */
	struct tls_ctx *tls;       /* tls.cert/key/client_ca; NULL: TLS off. Replaced on
	                            * reload; sessions keep the one they began with */
	char token[512];           /* auth token file contents */
	size_t token_len;

	/* bus.c */
	struct session *sessions;  /* every client connection's session */
	size_t nconns;             /* how many */
	struct conn_share *shares; /* what each owner's connections hold (conn.h) */

	/* registry.c */
	struct proc *procs;
	size_t nprocs;

	/* trace.c */
	struct trace *traces;
	size_t pending_traces;

	/* store.c (opaque: store.h) */
	struct store *store;
	uv_timer_t retention_timer;
	uv_timer_t deadline_timer;  /* conn_deadlines, every second */

	/* kineto.c (opaque: kineto.h) */
	struct kineto *kineto;
	bool kineto_passed;        /* server.c found Kineto's socket among those
	                            * systemd passed: kineto_passed_fd, for kineto.c */
	int kineto_passed_fd;

	/* metrics.c (opaque) */
	struct metrics *metrics;

	/* The engines' upward call. The registry tells the floors above it
	 * through this, never by including their headers, so the include graph
	 * of daemon/ stays a DAG (docs/ARCHITECTURE.md, .ci/include-cycles.py).
	 * main.c installs it before the loop runs; it is never NULL. (Capture
	 * back ends are reached through their own table, backend.h; the store
	 * knows a running trace's directory itself.) */
	struct daemon_hooks {
		/* registry -> trace, metrics: p is removed and about to be freed */
		void (*proc_gone)(struct daemon *d, struct proc *p);
	} hooks;

	uv_signal_t sigint, sigterm, sighup;
	uv_timer_t stop_timer;
	uv_timer_t reload_timer;   /* SIGHUP: a reload at the next loop turn (coalesced) */
	struct counters cnt;
	struct components *comp;   /* component.c: what each part is doing (it owns it) */
};

#endif
