/*
 * harness: what the integration tests drive the real gprofd with.
 *
 *   td_*  one daemon in a private temporary directory, on a private socket
 *         and an ephemeral loopback port. A thread reads its log (stderr)
 *         into memory, so tests wait for log lines instead of sleeping.
 *   tc_*  a blocking client built on proto/: connect, send messages and
 *         raw bytes, receive frames with a timeout (a safety net against a
 *         hung test, never a synchronisation).
 *   agent a forked fake agent process: registers (with its own pid, so
 *         peer credentials are real), answers capture_start by uploading a
 *         trace of a given size, and exits when its parent closes a pipe.
 *   kc_*  this process as a Kineto client (shared/DYNOLOG_COMPAT.md 2):
 *         its datagram socket, and one poll for a config.
 *   td_main  a test file's main(): its cases in two groups, the plain
 *         ones and those that need root, which meson runs as two tests.
 */
#ifndef GPROF_HARNESS_H
#define GPROF_HARNESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"
#include "msg.h"

#define TD_TIMEOUT_MS 20000

struct td {
	const char *wrapper; /* when set, run `wrapper gprofd ARGS...` */
	pid_t pid;
	char dir[256];
	char sock[300];
	char state[300];
	int port;
	int tls_port;        /* tls.listen's port when the config sets one, else 0 */
	int logfd;
	pthread_t reader;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *log;
	size_t loglen, logcap;
	bool eof;
};

/* Starts gprofd with --socket/--tcp 127.0.0.1:0/--state-dir in a fresh
 * directory plus extra arguments (NULL-terminated), and waits until it
 * logs that it is running. config_yaml, when not NULL, is written to
 * <dir>/gprofd.yaml and passed with --config. Returns 0 or -1. */
int td_start(struct td *t, const char *config_yaml, const char *const *extra);
/* As td_start, with gprofd started through wrapper (which must exec it
 * in place, so t->pid stays the daemon's pid). */
int td_start_wrapped(struct td *t, const char *wrapper, const char *config_yaml,
                     const char *const *extra);
/* Reuses t->dir and t->state (the store survives); same as td_start. */
int td_restart(struct td *t, const char *config_yaml, const char *const *extra);
/* SIGTERM, wait; returns the exit status (-1 on signal or timeout). */
int td_stop(struct td *t);
/* Waits for the daemon to exit (sending SIGTERM first when term is set:
 * td_stop); for a daemon already stopping, since a second SIGTERM forces
 * it out at once. Returns as td_stop. */
int td_reap(struct td *t, bool term);
/* Removes the directory. */
void td_cleanup(struct td *t);
/* A test's teardown: stops the daemon, removes its directory; 0 when it
 * exited cleanly (status 0: no handle left open, no leak under ASan),
 * else -1 with the status on stderr. */
int td_finish(struct td *t);
/* Waits until the log contains needle (after offset *from, when given;
 * *from is advanced past the match). true if found within the timeout. */
bool td_wait_log(struct td *t, const char *needle, size_t *from);
/* The resident memory of any process (VmRSS), in kB; -1 if unreadable. */
long pid_rss_kb(pid_t pid);
size_t td_log_len(struct td *t);
/* How many times needle is in the log now (no waiting). */
size_t td_log_count(struct td *t, const char *needle);
void td_signal(struct td *t, int sig);

struct tc {
	int fd;
	struct frame_decoder dec;
	/* received frames not yet consumed */
	struct rframe *head, *tail;
	uint64_t next_id;
};

struct rframe {
	struct rframe *next;
	enum frame_kind kind;
	uint32_t transfer;
	uint64_t offset;
	size_t len;
	uint8_t data[];
};

int tc_connect_unix(struct tc *c, const char *path);
int tc_connect_tcp(struct tc *c, int port);
void tc_close(struct tc *c);
int tc_send_raw(struct tc *c, const void *p, size_t n);
/* Encodes and sends m; sets m->id to a fresh id for requests when 0. */
int tc_send(struct tc *c, struct msg *m);
/* Next frame (caller frees), or NULL on timeout/EOF. */
struct rframe *tc_recv_frame(struct tc *c, int timeout_ms);
/* One request in Dynolog's RPC, the exact bytes the dyno client sends
 * (a native-endian int32 length, then the JSON) on a fresh TCP connection
 * to port; the reply's text (caller frees). Fails the test on no reply. */
char *tc_dyno_call(int port, const char *body);
/* Next JSON frame decoded into m (msg_deinit it), skipping nothing.
 * 0, -ETIMEDOUT, -EPIPE (closed), or the decode error. */
int tc_recv(struct tc *c, struct msg *m);
/* Receives until a message of type t arrives (others are dropped). */
int tc_recv_type(struct tc *c, enum msg_type t, struct msg *m);
/* True when the daemon closed the connection (EOF within the timeout). */
bool tc_closed(struct tc *c);
/* hello with role; 0 when hello_reply came. */
int tc_hello(struct tc *c, int role);

/* cmocka-asserting helpers for tests: connect and say hello as ctl; send a
 * request and receive its reply (skipping interleaved events); expect an
 * error reply with code whose message contains needle (NULL: any). */
void tc_ctl(struct tc *c, const char *sock);
void tc_call(struct tc *c, struct msg *req, struct msg *r);
void tc_expect_error(struct tc *c, struct msg *req, enum msg_errcode code, const char *needle);
/* Receives trace_progress events until the trace has ended; r holds the
 * last one (msg_deinit it). */
void tc_follow_end(struct tc *c, struct msg *r);
/* Connects as a bare agent (this process's pid) registered with job_id;
 * it answers nothing by itself. */
void tc_agent(struct tc *c, const char *sock, const char *job_id);
/* A trace_start for job (NULL: none) over n iterations. */
struct msg tc_trace_req(const char *job, int iterations);

struct agent {
	pid_t pid;
	int ctl;   /* write end: closing it ends the agent */
};
/* Forks an agent that registers with job_id and rank; each capture_start
 * is answered by an upload of trace_bytes bytes (0: it reports failed with
 * a reason instead). Returns 0 once the agent has registered. */
int agent_spawn(struct agent *a, const char *sock, const char *job_id, int rank,
                size_t trace_bytes);
/* When > 0, agents spawned from now on report, in a heartbeat right after
 * registering, that they have made this many steps plus 3 x their rank. */
extern int64_t agent_spawn_steps;
/* n agents at once (ranks 0..n-1), sharing one ready and one control
 * pipe, so this process holds no descriptor per agent: the number that
 * registered (all forked before any is waited for). agents_stop ends and
 * reaps them all. */
struct agents {
	pid_t *pids;
	int n;
	int ctl;
};
int agents_spawn(struct agents *g, int n, const char *sock, const char *job_id,
                 size_t trace_bytes);
void agents_stop(struct agents *g);
void agent_stop(struct agent *a);

/* The deterministic content fake agents upload: byte i of any trace. */
static inline uint8_t agent_byte(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 9));
}

#include <sys/un.h>

struct kc {
	int fd;
	struct sockaddr_un daemon;
	socklen_t dlen;
	char path[108];
};
/* Opens a client socket like Kineto's: bound to dynoconfigclient<id> in
 * the daemon's mode (dir: a file; NULL: the abstract namespace) and aimed
 * at the daemon's name. 0, or -1 with errno. */
int kc_open(struct kc *k, const char *dir, const char *name);
void kc_close(struct kc *k);
/* One poll: "req" of this type with this process and its parent; returns
 * the config's length (0: nothing to do) and copies it into config, or -1. */
int kc_poll(struct kc *k, int type, int64_t job, char *config, size_t cap, int timeout_ms);

/*
 * A test file's main(): runs one of its two groups of cases, chosen by the
 * first argument. `plain` runs by default; `root` (the cases that act as
 * other users or mount filesystems) runs with --root, and exits 77 (meson's
 * SKIP) as a whole when this process is not root, so that a case that
 * could not run is never counted as passed while the cases that did run
 * still count (meson registers NAME and NAME-root: tests/integration/
 * meson.build). An empty group exits 77 too. The next argument, if any, is
 * a cmocka name filter. Returns what main() returns.
 */
struct CMUnitTest;
int td_main(int argc, char **argv, const struct CMUnitTest *plain, size_t nplain,
            const struct CMUnitTest *root, size_t nroot);
#define TD_NELEM(a) (sizeof(a) / sizeof((a)[0]))

#endif
