/*
 * link.c: the agent thread, started by agent.c. It connects to the daemon's
 * Unix socket, says hello and registers, then waits for commands
 * (capture_start, capture_cancel) while sending heartbeats; bursts run on
 * this thread (capture.c, which reports through the status and upload
 * callbacks given here, capture_init). When the daemon goes away it reconnects with backoff
 * (0.1 s doubling to 5 s); with no daemon at all it just keeps trying,
 * quietly, and the program runs as if the agent were absent.
 *
 * The socket is blocking with send/receive timeouts, used only here, so
 * no application thread ever waits on it. Frames go through proto/ (the
 * one implementation of the protocol); replies are matched by id while
 * events that arrive in between are handled as they come.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>

#include "capture.h"
#include "frame.h"
#include "fsutil.h"
#include "gpu.h"
#include "link.h"
#include "msg.h"
#include "state.h"

struct link {
	int fd;
	struct frame_decoder dec;
	uint64_t next_id;
	int64_t heartbeat_ms;
	uint64_t want_id;      /* the reply being waited for */
	int got;               /* 0 waiting, 1 reply, -1 error reply */
	char err[256];
	int64_t hb_reply;      /* register_reply.heartbeat_ms */
	int told;              /* early heartbeats sent on this connection (early_steps) */
	uint32_t transfer;
};

static int send_all(struct link *l, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t w = send(l->fd, b, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int send_msg(struct link *l, struct msg *m)
{
	struct pbuf b;
	struct perr err;
	int r;

	if (l->fd < 0)
		return -ENOTCONN;
	pbuf_init(&b, 0);
	r = msg_encode(&b, m, &err);
	if (r == 0)
		r = send_all(l, b.data, b.len);
	else
		agent_log("cannot encode %s: %s", msg_type_name(m->type), err.msg);
	pbuf_deinit(&b);
	return r;
}

/* capture_out.status: a burst's capture_status, sent as it is. */
static void link_status(void *ctx, const char *trace_id, int state, const char *reason,
                        int64_t events, int64_t dropped, int64_t bytes)
{
	struct link *l = ctx;
	struct msg m;

	msg_init(&m, MSG_CAPTURE_STATUS, 0);
	m.u.capture_status.trace_id = trace_id;
	m.u.capture_status.state = state;
	m.u.capture_status.reason = reason;
	m.u.capture_status.events = events;
	m.u.capture_status.dropped = dropped;
	m.u.capture_status.bytes = bytes;
	send_msg(l, &m);
}

static void dispatch(struct link *l, struct msg *m)
{
	if (l->want_id != 0 && m->id == l->want_id) {
		if (m->type == MSG_ERROR) {
			snprintf(l->err, sizeof(l->err), "%s: %s", msg_errcode_name(m->u.error.code),
			         m->u.error.message ? m->u.error.message : "");
			l->got = -1;
		} else {
			if (m->type == MSG_REGISTER_REPLY)
				l->hb_reply = m->u.register_reply.heartbeat_ms;
			l->got = 1;
		}
		return;
	}
	/* queued, never run from here: this may be a reply wait inside a burst */
	if (m->type == MSG_CAPTURE_START)
		capture_queue_start(&m->u.capture_start);
	else if (m->type == MSG_CAPTURE_CANCEL)
		capture_queue_cancel(m->u.capture_cancel.trace_id, m->u.capture_cancel.reason);
	else if (m->type == MSG_ERROR)
		agent_log("daemon: %s", m->u.error.message ? m->u.error.message : "error");
}

static int on_frame(void *ud, const struct frame *f)
{
	struct link *l = ud;
	struct perr err;
	struct msg m;

	if (f->kind != FRAME_JSON)
		return 0; /* the daemon sends agents no chunks */
	if (msg_decode(&m, (const char *)f->data, f->len, &err) < 0) {
		agent_log("bad message from the daemon: %s", err.msg);
		return 0;
	}
	dispatch(l, &m);
	msg_deinit(&m);
	return 0;
}

static void disconnect(struct link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	frame_decoder_deinit(&l->dec);
}

/* Reads what is there (waiting at most timeout_ms for it) and handles it.
 * 0, or a negative code when the connection is gone. */
static int pump(struct link *l, int timeout_ms)
{
	struct pollfd p = { .fd = l->fd, .events = POLLIN };
	uint8_t buf[65536];
	struct perr err;
	ssize_t n;
	int r;

	if (l->fd < 0)
		return -ENOTCONN;
	r = poll(&p, 1, timeout_ms);
	if (r <= 0)
		return r < 0 && errno != EINTR ? -errno : 0;
	n = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		disconnect(l);
		return -ECONNRESET;
	}
	if (n > 0 && frame_decoder_feed(&l->dec, buf, (size_t)n, on_frame, l, &err) < 0) {
		agent_log("dropping the daemon connection: %s", err.msg);
		disconnect(l);
		return -EBADMSG;
	}
	return 0;
}

/* Sends a request and waits (at most timeout_ms) for its reply. */
static int call(struct link *l, struct msg *m, int timeout_ms)
{
	uint64_t deadline = agent_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int r;

	m->id = l->next_id++;
	l->want_id = m->id;
	l->got = 0;
	if ((r = send_msg(l, m)) < 0)
		goto out;
	while (l->got == 0) {
		uint64_t now = agent_now_ns();

		if (now >= deadline) {
			r = -ETIMEDOUT;
			goto out;
		}
		if ((r = pump(l, (int)((deadline - now) / 1000000u) + 1)) < 0)
			goto out;
	}
	r = l->got > 0 ? 0 : -EPROTO;
out:
	l->want_id = 0;
	return r;
}

/* The process's ancestors, parent first, up to max, stopping before init:
 * the daemon tells a launcher (torchrun, mp.spawn's parent) by them, and
 * a wrapper shell between launcher and rank must not hide it. */
static size_t ancestors(int64_t *out, size_t max)
{
	pid_t p = getppid();
	size_t n = 0;

	while (p > 1 && n < max) {
		char path[64], buf[512], *rp;
		long long pp;
		ssize_t len;
		int fd;

		out[n++] = p;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			break;
		buf[len] = '\0';
		/* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
		rp = strrchr(buf, ')');
		if (rp == NULL || sscanf(rp + 1, " %*c %lld", &pp) != 1)
			break;
		p = (pid_t)pp;
	}
	return n;
}

static int connect_daemon(struct link *l)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	char pbuf[256];
	const char *path = fsutil_client_socket(pbuf, sizeof(pbuf));
	struct msg m;
	int64_t ppids[8];
	size_t nppid = 0;
	int caps = MSG_CAP_STEPS, r;
	char why[200];

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return -errno;
	if (connect(l->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(l->fd);
		l->fd = -1;
		return r;
	}
	setsockopt(l->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	frame_decoder_init(&l->dec, FRAME_MAX_JSON_DEFAULT, FRAME_MAX_CHUNK_DEFAULT);

	msg_init(&m, MSG_HELLO, 0);
	m.u.hello.proto_min = GPROF_PROTO_MIN;
	m.u.hello.proto_max = GPROF_PROTO_MAX;
	m.u.hello.role = MSG_ROLE_AGENT;
	m.u.hello.software = "libgprof_agent " GPROF_VERSION;
	if ((r = call(l, &m, 5000)) < 0)
		goto fail;

	nppid = ancestors(ppids, sizeof(ppids) / sizeof(ppids[0]));
	if (gpu_usable(why, sizeof(why)))
		caps |= MSG_CAP_CUPTI;
	if (A.nvtx_attached || getenv("NVTX_INJECTION64_PATH"))
		caps |= MSG_CAP_NVTX;
	msg_init(&m, MSG_REGISTER, 0);
	m.u.reg.pid = A.pid;
	m.u.reg.ppids.v = ppids;
	m.u.reg.ppids.n = nppid;
	m.u.reg.job_id = A.job_id[0] ? A.job_id : NULL;
	m.u.reg.rank = A.rank;
	m.u.reg.local_rank = A.local_rank;
	m.u.reg.world_size = A.world_size;
	m.u.reg.host = A.host;
	m.u.reg.caps = caps;
	m.u.reg.version = GPROF_VERSION;
	{
		char comm[32] = "";
		int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			ssize_t n = read(fd, comm, sizeof(comm) - 1);

			close(fd);
			if (n > 0) {
				comm[n] = '\0';
				comm[strcspn(comm, "\n")] = '\0';
				m.u.reg.name = comm;
			}
		}
		r = call(l, &m, 5000);
	}
	if (r < 0)
		goto fail;
	l->heartbeat_ms = l->hb_reply > 0 ? l->hb_reply : 5000;
	agent_log("registered with the daemon at %s (%s)", path,
	          caps & MSG_CAP_CUPTI ? "CUPTI usable" : why);
	return 0;
fail:
	agent_log("daemon at %s: %s", path, r == -EPROTO ? l->err : strerror(-r));
	disconnect(l);
	return r;
}

static void heartbeat(struct link *l)
{
	uint64_t d[64], last = atomic_load(&A.last_step_dur_ns);
	unsigned n = atomic_load(&A.step_i), i, j;
	struct msg m;

	if (n > 64)
		n = 64;
	for (i = 0; i < n; i++) { /* insertion sort of at most 64 durations */
		uint64_t v = A.step_durs[i];

		for (j = i; j > 0 && d[j - 1] > v; j--)
			d[j] = d[j - 1];
		d[j] = v;
	}
	msg_init(&m, MSG_HEARTBEAT, 0);
	m.u.heartbeat.steps = (int64_t)atomic_load(&A.steps);
	m.u.heartbeat.last_step_us = (int64_t)(last / 1000u);
	m.u.heartbeat.median_step_us = n ? (int64_t)(d[n / 2] / 1000u) : 0;
	send_msg(l, &m);
}

/* capture_out.upload: the trace file (or memory snapshot: format), read
 * from fd from its start, in chunk frames; 0 once the daemon has it. */
static int link_upload(void *ctx, const char *trace_id, int fd, int format, int64_t *bytes)
{
	struct link *l = ctx;
	static uint8_t buf[1u << 20];
	uint8_t prefix[FRAME_CHUNK_PREFIX];
	uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
	uint64_t off = 0;
	struct msg m;
	int r = 0;

	*bytes = 0;
	if (l->fd < 0)
		return -ENOTCONN;
	/* the step count now, ahead of the upload whose end frees this
	 * process for its next trace: a trace held for several ranks (daemon
	 * trace.h) picks their common step from it, and a count up to a
	 * heartbeat old (the burst's steps not in it) gave a step already
	 * passed, each rank then beginning on its own */
	heartbeat(l);
	msg_init(&m, MSG_UPLOAD_BEGIN, 0);
	m.u.upload_begin.trace_id = trace_id;
	m.u.upload_begin.transfer = ++l->transfer;
	m.u.upload_begin.format = format;
	if ((r = send_msg(l, &m)) < 0)
		goto out;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		frame_chunk_prefix(prefix, l->transfer, off, (size_t)n);
		if ((r = send_all(l, prefix, sizeof(prefix))) < 0 ||
		    (r = send_all(l, buf, (size_t)n)) < 0)
			goto out;
		crc = (uint32_t)crc32(crc, buf, (uInt)n);
		off += (uint64_t)n;
	}
	msg_init(&m, MSG_UPLOAD_END, 0);
	m.u.upload_end.transfer = l->transfer;
	m.u.upload_end.bytes = (int64_t)off;
	m.u.upload_end.crc32 = crc;
	r = call(l, &m, 60000);
	if (r == -EPROTO)
		agent_log("upload of %s refused: %s", trace_id, l->err);
	*bytes = (int64_t)off;
out:
	return r;
}

/* Waits on the daemon socket (if any) and the wake eventfd. */
static void wait_events(struct link *l, int timeout_ms)
{
	struct pollfd p[2] = { { .fd = A.wake_fd, .events = POLLIN },
	                       { .fd = l->fd, .events = POLLIN } };
	uint64_t v;

	if (poll(p, l->fd >= 0 ? 2 : 1, timeout_ms) <= 0)
		return;
	if (p[0].revents && read(A.wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: another read took it */
	}
	if (l->fd >= 0 && p[1].revents)
		pump(l, 0);
}

static int min_timeout(int a, int b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return a < b ? a : b;
}

/* 0 before the first step, 1 from it, 2 once 9 steps give a median step
 * time: each stage is reported at once, not at the next heartbeat. */
static int early_steps(void)
{
	uint64_t n = atomic_load(&A.steps);

	return n >= 9 ? 2 : n >= 1 ? 1 : 0;
}

void *link_main(void *arg)
{
	struct link l = { .fd = -1, .next_id = 1 };
	uint64_t backoff_ms = 100, next_try = 0, next_hb = 0;
	sigset_t all;

	(void)arg;
	/* The host's signals are not ours; but a fault here (SIGSEGV...) is
	 * the host's business too: left unblocked, its crash handler (Python's
	 * faulthandler, a core dump) sees this thread as it would any other. */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGABRT);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	prctl(PR_SET_NAME, "gprof-agent", 0, 0, 0);
	A.agent_tid = (int)syscall(SYS_gettid);
	/* bursts report through this connection, whichever it is by then */
	capture_init(&(struct capture_out){ link_status, link_upload, &l });
	for (;;) {
		uint64_t now = agent_now_ns() / 1000000u;
		int timeout = -1;

		if (l.fd < 0 && now >= next_try && !capture_busy()) {
			if (connect_daemon(&l) == 0) {
				backoff_ms = 100;
				l.told = 0; /* a new daemon: tell it at once */
				next_hb = now + (uint64_t)l.heartbeat_ms;
			} else {
				next_try = now + backoff_ms;
				backoff_ms = backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
			}
		}
		/* The first step is told at once (rec_step wakes us): a trace
		 * request leaves out processes that never stepped while others
		 * did, and must not take a rank that just began for one. */
		if (l.fd >= 0 && (now >= next_hb || l.told < early_steps())) {
			l.told = early_steps();
			heartbeat(&l);
			next_hb = now + (uint64_t)l.heartbeat_ms;
		}
		capture_tick();
		now = agent_now_ns() / 1000000u;
		if (l.fd >= 0)
			timeout = (int)(next_hb > now ? next_hb - now : 0);
		else if (!capture_busy())
			timeout = (int)(next_try > now ? next_try - now : 0);
		timeout = min_timeout(timeout, capture_timeout_ms());
		wait_events(&l, timeout);
	}
	return NULL;
}
