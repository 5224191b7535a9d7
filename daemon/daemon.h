/*
 * daemon: the root object of gprofd. One exists per process, owned by
 * main.c; every other daemon module gets a pointer to it and owns only
 * its own part:
 *
 *   server   listening sockets; accepts connections      (server.c)
 *   conns    client connections, each owning its decoder, write queue,
 *            uploads and download                       (conn.c)
 *   registry traceable processes                         (registry.c)
 *   traces   traces in progress and recently finished    (trace.c)
 *   store    trace files on disk, retention              (store.c)
 *
 * All of it lives on one libuv loop thread; only file I/O runs on libuv's
 * thread pool, and its callbacks come back to the loop.
 */
#ifndef GPROFD_DAEMON_H
#define GPROFD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "component.h"
#include "config.h"

struct conn;
struct proc;
struct trace;
struct stored;
struct sjob;
struct kwatch;
struct tls_ctx;

/* Counters exported in daemon_status (and, later, as metrics): one per
 * limit and per kind of bad input (STYLE.md rule 4). */
struct counters {
	uint64_t conns_accepted;
	uint64_t conns_refused;       /* limits.connections */
	uint64_t conns_timed_out;     /* limits.hello_timeout, limits.frame_timeout */
	uint64_t frames_in;
	uint64_t bad_frames;          /* framing errors, oversized frames */
	uint64_t bad_messages;        /* failed validation */
	uint64_t write_queue_drops;   /* limits.write_queue_bytes */
	uint64_t processes_refused;   /* limits.processes */
	uint64_t traces_refused;      /* limits.pending_traces */
	uint64_t traces_started;
	uint64_t traces_ended[5];     /* by final MSG_TRACE_* state (DONE..CANCELLED) */
	uint64_t uploads_failed;
	uint64_t dyno_requests;
	uint64_t auth_failures;
	uint64_t tls_failures;        /* handshakes and records refused */
	uint64_t retention_deleted;
	uint64_t kineto_datagrams;
	uint64_t kineto_malformed;    /* datagrams dropped */
	uint64_t kineto_configs;      /* configs delivered */
};

struct daemon {
	uv_loop_t *loop;
	struct config cfg;
	const char *config_path;   /* the file (may be absent); NULL: none */
	char host[256];
	int64_t started_us;
	bool stopping;

	/* server.c */
	uv_pipe_t unix_listener;
	uv_tcp_t tcp_listener;
	bool unix_open, tcp_open;
	int tcp_port;              /* the bound port (tcp may ask for 0) */
	uv_tcp_t tls_listener;
	bool tls_open;
	int tls_port;
	struct tls_ctx *tls;       /* tls.cert/key/client_ca; NULL: TLS off. Replaced on
	                            * reload; sessions keep the one they began with */
	char token[512];           /* auth token file contents */
	size_t token_len;

	/* conn.c */
	struct conn *conns;
	size_t nconns;

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

	/* metrics.c */
	struct metrics *metrics;

	uv_signal_t sigint, sigterm, sighup;
	uv_timer_t stop_timer;
	uv_timer_t reload_timer;   /* SIGHUP: a reload at the next loop turn (coalesced) */
	struct counters cnt;
	struct components comp;    /* component.c: what each part is doing */
};

int64_t daemon_now_us(void);

#endif
