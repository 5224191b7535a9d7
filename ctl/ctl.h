/*
 * gprofctl: shared declarations.
 *
 * Data flow: main.c parses the global options, builds the host list
 * (hosts.c) and runs one command from its table. A command creates a
 * client (client.c): one libuv loop, one connection per host (Unix socket
 * for the local daemon, TCP otherwise), each going connect -> hello ->
 * auth (when the daemon asks) -> ready, after which the command's
 * callbacks send requests and handle replies, events and chunk frames.
 * Downloads go through sinks (sink.c): a temporary file renamed into place
 * only when size and CRC-32 match, so a partial download never remains.
 *
 * Ownership: the client owns its hosts and their handles; a host's
 * command state (h->ud) belongs to the command. Everything is released by
 * client_run returning, after every handle has closed.
 */
#ifndef GPROFCTL_CTL_H
#define GPROFCTL_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "frame.h"
#include "msg.h"

#define CTL_PORT_DEFAULT 1778
#define CTL_TLS_PORT_DEFAULT 1779 /* with --tls (gprofd's tls.listen, by convention) */

/* Exit statuses (gprofctl(1)). */
enum {
	EXIT_OK = 0,        /* every matched process delivered */
	EXIT_FAILED = 1,    /* some process or host failed */
	EXIT_NOMATCH = 2,   /* nothing matched on any host */
	EXIT_USAGE = 3,     /* usage error, or no host reachable */
	EXIT_DEGRADED = 4,  /* status: every host answered, but a part of one is down */
	EXIT_CANCELLED = 5, /* trace: cancelled (gprofctl cancel, an interrupt) before every
	                     * process delivered, and none failed otherwise */
};

struct opts {
	const char **hosts;      /* host[:port] names; none = the local socket */
	size_t nhosts;
	const char *socket;      /* local daemon socket */
	int port;
	const char *token_file;
	bool tls;                /* TCP hosts over TLS */
	const char *tls_ca, *tls_cert, *tls_key;
	bool json;
	double timeout_s;        /* connection and command timeout */
};

struct host;
struct client;
struct tls_ctx;
struct tlsio;

struct client_ops {
	/* The host is connected and authenticated: send requests. */
	void (*ready)(struct host *h);
	/* A message for this host (replies and events). */
	void (*message)(struct host *h, const struct msg *m);
	/* A chunk frame. */
	void (*chunk)(struct host *h, const struct frame *f);
	/* The host failed (unreachable, refused, lost): why is for people. */
	void (*failed)(struct host *h, const char *why);
	/* Every host is done or failed (optional): close the command's handles. */
	void (*finished)(struct client *cl);
};

struct host {
	struct client *cl;
	char name[256];          /* as the user gave it */
	char label[256];         /* what reports show (the daemon's host name once known) */
	bool local;              /* Unix socket */
	int port;
	union {
		uv_handle_t h;
		uv_stream_t s;
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} u;
	bool handle_open;
	uv_connect_t creq;
	uv_getaddrinfo_t gai;
	struct frame_decoder dec;
	int state;               /* HS_* in client.c */
	bool done;               /* the command is finished with this host */
	char error[512];
	char send_error[128];    /* a write failed; reported at the end of the stream */
	uint64_t next_id;
	void *ud;                /* the command's per-host state */
	struct tlsio *tls;       /* --tls: the session every byte passes through */
};

struct client {
	uv_loop_t loop;
	struct host *hosts;
	size_t n;
	const struct opts *o;
	const struct client_ops *ops;
	char token[512];
	size_t token_len;
	struct tls_ctx *tls;     /* --tls: CA, client certificate */
	uv_timer_t timer;
	size_t remaining;        /* hosts not done */
	void *ud;
};

/* Sets up a client for the hosts of o (or the local socket), with its loop
 * ready for the command's own handles. 0, or an error printed to stderr
 * (a token file that cannot be read). */
int client_init(struct client *cl, const struct opts *o, const struct client_ops *ops);
/* Connects to every host and runs until each host is done or failed, or
 * the timeout passes (hosts still busy then fail with "timed out"). */
void client_run(struct client *cl);
void client_deinit(struct client *cl);

/* Sends m to h (a fresh id for requests). 0 or negative. */
int host_send(struct host *h, struct msg *m);
/* The command is finished with h: close its connection. */
void host_done(struct host *h);
/* Marks h failed with why and closes it. */
void host_fail(struct host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* hosts.c: fills o->hosts from --host, --hostfile and --slurm-job; each
 * HOST[:PORT] is checked as it is added (an error printed, -EINVAL). */
int hosts_add(struct opts *o, const char *spec);
/* Splits HOST, HOST:PORT, [V6ADDR]:PORT or a bare IPv6 address into name
 * and port (0: none given). 0, or -EINVAL for a port that is not 1..65535. */
int hosts_parse(const char *spec, char *name, size_t size, int *port);
int hosts_from_file(struct opts *o, const char *path);
int hosts_from_slurm(struct opts *o, const char *job);
void hosts_free(struct opts *o);

/* sink.c: one file being downloaded. */
struct sink {
	char tmp[4096];
	char path[4096];
	FILE *f;
	bool unnamed;    /* an O_TMPFILE: nothing in the directory until finished */
	uint32_t transfer;
	uint64_t bytes, expected;
	uint32_t crc;
};
int sink_open(struct sink *s, const char *dir, const char *name, uint32_t transfer,
              uint64_t expected, char *err, size_t errlen);
int sink_write(struct sink *s, const struct frame *f, char *err, size_t errlen);
/* Verifies the end message and renames into place; on any failure the
 * temporary file is removed. */
int sink_finish(struct sink *s, const struct msg_download_end *e, char *err, size_t errlen);
void sink_abort(struct sink *s);

/* Commands: each returns the exit status. */
int cmd_status(struct opts *o, int argc, char **argv);
int cmd_metrics(struct opts *o, int argc, char **argv);
int cmd_list(struct opts *o, int argc, char **argv);
int cmd_trace(struct opts *o, int argc, char **argv);
int cmd_fetch(struct opts *o, int argc, char **argv);
int cmd_traces(struct opts *o, int argc, char **argv);
int cmd_delete(struct opts *o, int argc, char **argv);
int cmd_cancel(struct opts *o, int argc, char **argv);
int cmd_launch(struct opts *o, int argc, char **argv);
int cmd_report(struct opts *o, int argc, char **argv);

#endif
