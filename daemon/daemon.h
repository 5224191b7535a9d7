/*
 * daemon: the root object of gprofd. One exists per process, owned by
 * main.c; every other daemon module gets a pointer to it and owns only
 * its own part:
 *
 *   server   listening sockets; accepts connections      (server.c, opaque)
 *   sessions client connections: each a session (bus.c, session.h)
 *            holding its transport (conn.c), uploads, download
 *   registry traceable processes                         (registry.c)
 *   traces   traces in progress and recently finished    (trace.c)
 *   store    trace files on disk, retention              (store.c)
 *   metrics  sampling, history, /metrics                 (metrics.c, opaque)
 *
 * All of it runs on one libuv loop thread, except:
 *   - file work on libuv's thread pool: the uploads' writes (upload.c),
 *     downloads' reads (download.c), the store's jobs (store.c), Kineto's
 *     ingest, which also compresses (kineto.c), statfs (component.c); each
 *     owns its request until its callback comes back to the loop;
 *   - the metrics' own threads (metrics.c): the sampler (/proc, NVML:
 *     mhost.c, mgpu.c), NVML's Xid event waiter (mgpu.c) and libmicrohttpd's
 *     thread serving /metrics. They share with the loop only struct
 *     metrics (under its lock) and the component table (d->comp, under
 *     its own: component.h); no other part of struct daemon.
 *
 * Floor: the root object, below every module but the leaves; no .c of
 * its own. d->hooks are the engines' upward calls (see there).
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
struct stored;
struct sjob;
struct kwatch;
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

	/* store.c */
	int store_lock_fd;         /* holds the flock on <state_dir>/gprofd.lock */
	struct sjob *store_jobs;   /* the writer's queue; the first runs when... */
	bool store_job_running;    /* ...this is set */
	struct stored *stored;     /* newest first */
	uint64_t stored_bytes;
	size_t nstored;
	uv_timer_t retention_timer;
	uv_timer_t deadline_timer;  /* conn_deadlines, every second */

	/* kineto.c */
	int kineto_fd;
	bool kineto_open;
	bool kineto_passed;        /* kineto_passed_fd came from systemd (server.c) */
	int kineto_passed_fd;
	bool kineto_fd_passed;     /* kineto_fd is that socket: never unlinked */
	uv_poll_t kineto_poll;
	uv_timer_t kineto_timer;
	struct kwatch *kwatches;
	char kineto_base[PATH_MAX]; /* where per-trace directories go (kineto.c base_dir) */
	bool kineto_base_private;   /* a mkdtemp directory beside a taken kineto.trace_dir */

	/* metrics.c (opaque) */
	struct metrics *metrics;

	/* The engines' upward calls. An engine tells the one above it through
	 * these, never by including its header, so the include graph of
	 * daemon/ stays a DAG (docs/ARCHITECTURE.md, .ci/include-cycles.py).
	 * main.c installs them before the loop runs; none is ever NULL. */
	struct daemon_hooks {
		/* registry -> trace, metrics: p is removed and about to be freed */
		void (*proc_gone)(struct daemon *d, struct proc *p);
		/* trace -> kineto: leave t's config for tp's Kineto client; withdraw
		 * p's config not yet handed over */
		void (*kineto_capture)(struct daemon *d, struct trace *t, struct tproc *tp);
		void (*kineto_withdraw)(struct proc *p);
		/* store -> trace: is trace id running (its directory in use)? */
		bool (*trace_running)(struct daemon *d, const char *id);
	} hooks;

	uv_signal_t sigint, sigterm, sighup;
	uv_timer_t stop_timer;
	uv_timer_t reload_timer;   /* SIGHUP: a reload at the next loop turn (coalesced) */
	struct counters cnt;
	struct components *comp;   /* component.c: what each part is doing (it owns it) */
};

#endif
