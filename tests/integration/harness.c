/*
 * harness: see harness.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>
#include <zlib.h>

#include "harness.h"
#include "kipc.h"

#ifndef GPROFD_PATH
#error "GPROFD_PATH must name the gprofd binary"
#endif

/* ---- daemon ---- */

static void *reader(void *arg)
{
	struct td *t = arg;
	char buf[4096];
	ssize_t n;

	for (;;) {
		n = read(t->logfd, buf, sizeof(buf));
		pthread_mutex_lock(&t->mu);
		if (n <= 0) {
			t->eof = true;
			pthread_cond_broadcast(&t->cv);
			pthread_mutex_unlock(&t->mu);
			return NULL;
		}
		if (t->loglen + (size_t)n + 1 > t->logcap) {
			t->logcap = (t->logcap + (size_t)n + 1) * 2;
			t->log = realloc(t->log, t->logcap);
		}
		memcpy(t->log + t->loglen, buf, (size_t)n);
		t->loglen += (size_t)n;
		t->log[t->loglen] = 0;
		if (getenv("HARNESS_ECHO"))
			fwrite(buf, 1, (size_t)n, stderr);
		pthread_cond_broadcast(&t->cv);
		pthread_mutex_unlock(&t->mu);
	}
}

static void deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

bool td_wait_log(struct td *t, const char *needle, size_t *from)
{
	struct timespec ts;
	bool found = false;
	char *hit;

	deadline(&ts, TD_TIMEOUT_MS);
	pthread_mutex_lock(&t->mu);
	for (;;) {
		hit = t->log ? strstr(t->log + (from ? *from : 0), needle) : NULL;
		if (hit != NULL) {
			found = true;
			if (from)
				*from = (size_t)(hit - t->log) + strlen(needle);
			break;
		}
		if (t->eof || pthread_cond_timedwait(&t->cv, &t->mu, &ts) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&t->mu);
	return found;
}

size_t td_log_count(struct td *t, const char *needle)
{
	size_t n = 0;
	const char *p;

	pthread_mutex_lock(&t->mu);
	for (p = t->log; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	pthread_mutex_unlock(&t->mu);
	return n;
}

size_t td_log_len(struct td *t)
{
	size_t n;

	pthread_mutex_lock(&t->mu);
	n = t->loglen;
	pthread_mutex_unlock(&t->mu);
	return n;
}

/* Does yaml set the top-level key (given with its colon)? */
static bool has_key(const char *yaml, const char *key)
{
	size_t n = strlen(key);
	const char *p;

	for (p = yaml; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, n) == 0)
			return true;
	return false;
}

static int launch(struct td *t, const char *config_yaml, const char *const *extra)
{
	static int started;
	char yaml[8192];
	const char *argv[56];
	static char wrap[512];
	char cfg[300], *p, *save = NULL;
	int pipefd[2], n = 0, i;
	size_t at = 0;

	snprintf(t->sock, sizeof(t->sock), "%s/gprofd.sock", t->dir);
	snprintf(t->state, sizeof(t->state), "%s/state", t->dir);
	/* $GPROFD_WRAPPER: words put before the daemon (tests/valgrind.sh
	 * runs the suites with the daemon under valgrind this way) */
	if (getenv("GPROFD_WRAPPER") != NULL) {
		snprintf(wrap, sizeof(wrap), "%s", getenv("GPROFD_WRAPPER"));
		for (p = strtok_r(wrap, " ", &save); p != NULL && n < 12; p = strtok_r(NULL, " ", &save))
			argv[n++] = p;
	}
	if (t->wrapper != NULL)
		argv[n++] = t->wrapper;
	argv[n++] = GPROFD_PATH;
	argv[n++] = "--socket";
	argv[n++] = t->sock;
	argv[n++] = "--tcp";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--state-dir";
	argv[n++] = t->state;
	argv[n++] = "-v";
	/* The machine-wide names a test does not set are made its own: the
	 * metrics port (127.0.0.1:9773) and Kineto's @dynolog may be held by
	 * another daemon, which gprofctl status reports as degraded (exit 4). */
	snprintf(yaml, sizeof(yaml), "%s", config_yaml ? config_yaml : "");
	if (!has_key(yaml, "metrics:"))
		snprintf(yaml + strlen(yaml), sizeof(yaml) - strlen(yaml), "metrics: 127.0.0.1:0\n");
	if (!has_key(yaml, "kineto:"))
		snprintf(yaml + strlen(yaml), sizeof(yaml) - strlen(yaml),
		         "kineto:\n  socket_name: gprofd-test-%d-%d\n", (int)getpid(), started++);
	config_yaml = yaml;
	{
		FILE *f;

		snprintf(cfg, sizeof(cfg), "%s/gprofd.yaml", t->dir);
		f = fopen(cfg, "w");
		if (f == NULL)
			return -1;
		fputs(config_yaml, f);
		fclose(f);
		argv[n++] = "--config";
		argv[n++] = cfg;
	}
	for (i = 0; extra && extra[i] && n < 38; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -1;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	t->log = NULL;
	t->loglen = t->logcap = 0;
	t->eof = false;
	t->pid = fork();
	if (t->pid == 0) {
		/* the tests ignore SIGPIPE; the daemon must not inherit that and
		 * pass for it (a shell or container starts it with the default) */
		signal(SIGPIPE, SIG_DFL);
		dup2(pipefd[1], 2);
		execvp(argv[0], (char *const *)argv); /* a wrapper may be a bare name */
		_exit(127);
	}
	close(pipefd[1]);
	t->logfd = pipefd[0];
	pthread_create(&t->reader, NULL, reader, t);
	if (!td_wait_log(t, " running: ", &at))
		return -1;
	pthread_mutex_lock(&t->mu);
	p = strstr(t->log, "tcp port ");
	t->port = p ? atoi(p + 9) : 0;
	p = strstr(t->log, "tls port ");
	t->tls_port = p ? atoi(p + 9) : 0;
	pthread_mutex_unlock(&t->mu);
	return 0;
}

int td_start(struct td *t, const char *config_yaml, const char *const *extra)
{
	memset(t, 0, sizeof(*t));
	t->wrapper = NULL;
	snprintf(t->dir, sizeof(t->dir), "/tmp/gprofd-test-XXXXXX");
	if (mkdtemp(t->dir) == NULL)
		return -1;
	chmod(t->dir, 0755); /* tests connect as other users too */
	return launch(t, config_yaml, extra);
}

int td_start_wrapped(struct td *t, const char *wrapper, const char *config_yaml,
                     const char *const *extra)
{
	memset(t, 0, sizeof(*t));
	t->wrapper = wrapper;
	snprintf(t->dir, sizeof(t->dir), "/tmp/gprofd-test-XXXXXX");
	if (mkdtemp(t->dir) == NULL)
		return -1;
	chmod(t->dir, 0755);
	return launch(t, config_yaml, extra);
}

int td_restart(struct td *t, const char *config_yaml, const char *const *extra)
{
	free(t->log);
	return launch(t, config_yaml, extra);
}

void td_signal(struct td *t, int sig)
{
	int status;

	kill(t->pid, sig);
	/* a stop is complete only when the kernel says the child stopped:
	 * kill() returns while it may still run (another core, a loaded
	 * machine), and a test relying on it stopped would race it */
	if (sig == SIGSTOP)
		while (waitpid(t->pid, &status, WUNTRACED) < 0 && errno == EINTR)
			;
}

int td_stop(struct td *t)
{
	return td_reap(t, true);
}

int td_reap(struct td *t, bool term)
{
	int status = 0;

	if (t->pid <= 0)
		return -1;
	if (term)
		kill(t->pid, SIGTERM);
	/* A daemon that never exits is caught by meson's test timeout. */
	if (waitpid(t->pid, &status, 0) != t->pid)
		status = -1;
	pthread_join(t->reader, NULL);
	close(t->logfd);
	t->pid = 0;
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "gprofd did not exit cleanly (wait status %#x); its log:\n%.*s\n",
		        (unsigned)status, (int)t->loglen, t->log ? t->log : "");
	if (status == -1 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

void td_cleanup(struct td *t)
{
	char cmd[400];

	if (t->pid > 0)
		td_stop(t);
	free(t->log);
	t->log = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", t->dir);
}

int td_finish(struct td *t)
{
	int rc = td_stop(t);

	td_cleanup(t);
	if (rc != 0)
		fprintf(stderr, "gprofd exited with %d\n", rc);
	return rc == 0 ? 0 : -1;
}

/* ---- client ---- */

static void tc_init(struct tc *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->next_id = 1;
	frame_decoder_init(&c->dec, 64u << 20, 64u << 20);
}

int tc_connect_unix(struct tc *c, const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	tc_init(c, fd);
	return 0;
}

int tc_connect_tcp(struct tc *c, int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	tc_init(c, fd);
	return 0;
}

void tc_close(struct tc *c)
{
	struct rframe *f, *next;

	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	for (f = c->head; f != NULL; f = next) {
		next = f->next;
		free(f);
	}
	c->head = c->tail = NULL;
	frame_decoder_deinit(&c->dec);
}

int tc_send_raw(struct tc *c, const void *p, size_t n)
{
	const char *b = p;
	ssize_t w;

	while (n > 0) {
		w = send(c->fd, b, n, MSG_NOSIGNAL);
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

int tc_send(struct tc *c, struct msg *m)
{
	struct perr err;
	struct pbuf b;
	int r;

	if (m->id == 0 && msg_type_is_request(m->type))
		m->id = c->next_id++;
	pbuf_init(&b, 0);
	r = msg_encode(&b, m, &err);
	if (r < 0) {
		fprintf(stderr, "tc_send: %s\n", err.msg);
		pbuf_deinit(&b);
		return r;
	}
	r = tc_send_raw(c, b.data, b.len);
	pbuf_deinit(&b);
	return r;
}

static int queue_frame(void *ud, const struct frame *f)
{
	struct tc *c = ud;
	struct rframe *r = malloc(sizeof(*r) + f->len + 1);

	r->next = NULL;
	r->kind = f->kind;
	r->transfer = f->transfer;
	r->offset = f->offset;
	r->len = f->len;
	memcpy(r->data, f->data, f->len);
	r->data[f->len] = 0;
	if (c->tail)
		c->tail->next = r;
	else
		c->head = r;
	c->tail = r;
	return 0;
}

/* Reads once from the socket (waiting up to ms). 1 read, 0 timeout, -1 EOF. */
static int fill(struct tc *c, int ms)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	char buf[65536];
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	n = recv(c->fd, buf, sizeof(buf), 0);
	if (n <= 0)
		return -1;
	if (frame_decoder_feed(&c->dec, buf, (size_t)n, queue_frame, c, NULL) < 0)
		return -1;
	return 1;
}

struct rframe *tc_recv_frame(struct tc *c, int timeout_ms)
{
	struct rframe *f;

	while (c->head == NULL)
		if (fill(c, timeout_ms) <= 0)
			return NULL;
	f = c->head;
	c->head = f->next;
	if (c->head == NULL)
		c->tail = NULL;
	return f;
}

char *tc_dyno_call(int port, const char *body)
{
	struct rframe *f;
	struct tc c;
	int32_t n = (int32_t)strlen(body);
	char *out;

	assert_int_equal(tc_connect_tcp(&c, port), 0);
	assert_int_equal(tc_send_raw(&c, &n, 4), 0);
	assert_int_equal(tc_send_raw(&c, body, strlen(body)), 0);
	f = tc_recv_frame(&c, TD_TIMEOUT_MS);
	assert_non_null(f);
	out = strndup((char *)f->data, f->len);
	free(f);
	tc_close(&c);
	return out;
}

int tc_recv(struct tc *c, struct msg *m)
{
	struct rframe *f = tc_recv_frame(c, TD_TIMEOUT_MS);
	struct perr err;
	int r;

	memset(m, 0, sizeof(*m));
	if (f == NULL)
		return -ETIMEDOUT;
	if (f->kind != FRAME_JSON) {
		free(f);
		return -EPROTO;
	}
	r = msg_decode(m, (const char *)f->data, f->len, &err);
	if (r < 0)
		fprintf(stderr, "tc_recv: %s: %s\n", err.msg, (const char *)f->data);
	free(f);
	return r;
}

int tc_recv_type(struct tc *c, enum msg_type t, struct msg *m)
{
	int r;

	for (;;) {
		r = tc_recv(c, m);
		if (r < 0 || m->type == t)
			return r;
		if (m->type == MSG_ERROR)
			fprintf(stderr, "tc_recv_type(%s): error %s: %s\n", msg_type_name(t),
			        msg_errcode_name(m->u.error.code), m->u.error.message);
		msg_deinit(m);
	}
}

bool tc_closed(struct tc *c)
{
	int r;

	while ((r = fill(c, TD_TIMEOUT_MS)) > 0)
		;
	return r < 0;
}

int tc_hello(struct tc *c, int role)
{
	struct msg m;
	int r;

	msg_init(&m, MSG_HELLO, 0);
	m.u.hello.proto_min = 1;
	m.u.hello.proto_max = 1;
	m.u.hello.role = role;
	m.u.hello.software = "harness";
	r = tc_send(c, &m);
	if (r < 0)
		return r;
	r = tc_recv(c, &m);
	if (r == 0 && m.type != MSG_HELLO_REPLY)
		r = -EPROTO;
	msg_deinit(&m);
	return r;
}

void tc_ctl(struct tc *c, const char *sock)
{
	struct msg m;
	int r;

	assert_int_equal(tc_connect_unix(c, sock), 0);
	r = tc_hello(c, MSG_ROLE_CTL);
	if (r < 0) {
		/* a daemon that refuses a connection at accept sends why, then
		 * closes: what it said is still there to read (a load test's
		 * first hello once met EPIPE, and nothing said which refusal) */
		print_error("hello to %s failed: %s\n", sock, strerror(-r));
		if (tc_recv(c, &m) == 0) {
			if (m.type == MSG_ERROR)
				print_error("the daemon said: %s\n", m.u.error.message);
			msg_deinit(&m);
		}
	}
	assert_int_equal(r, 0);
}

void tc_call(struct tc *c, struct msg *req, struct msg *r)
{
	int got;

	assert_int_equal(tc_send(c, req), 0);
	for (;;) {
		/* the answer, however long a loaded machine makes the daemon take
		 * (10,000 agents registered beside CPU hogs once kept it past the
		 * 20 s poll): a daemon that died closes the socket, an error at
		 * once; one that never answers is meson's timeout to catch */
		while ((got = tc_recv(c, r)) == -ETIMEDOUT)
			;
		assert_int_equal(got, 0);
		if (r->id == req->id && r->type != MSG_TRACE_PROGRESS)
			return;
		msg_deinit(r);
	}
}

void tc_expect_error(struct tc *c, struct msg *req, enum msg_errcode code, const char *needle)
{
	struct msg r;

	tc_call(c, req, &r);
	if (r.type != MSG_ERROR || r.u.error.code != (int)code ||
	    (needle && strstr(r.u.error.message, needle) == NULL))
		fail_msg("want error %s (%s), got %s %s", msg_errcode_name(code), needle ? needle : "",
		         msg_type_name(r.type), r.type == MSG_ERROR ? r.u.error.message : "");
	msg_deinit(&r);
}

void tc_follow_end(struct tc *c, struct msg *r)
{
	for (;;) {
		assert_int_equal(tc_recv_type(c, MSG_TRACE_PROGRESS, r), 0);
		if (r->u.trace_info.state != MSG_TRACE_RUNNING)
			return;
		msg_deinit(r);
	}
}

void tc_agent(struct tc *c, const char *sock, const char *job_id)
{
	struct msg m, r;

	assert_int_equal(tc_connect_unix(c, sock), 0);
	assert_int_equal(tc_hello(c, MSG_ROLE_AGENT), 0);
	msg_init(&m, MSG_REGISTER, 0);
	m.u.reg.pid = getpid();
	m.u.reg.job_id = job_id;
	tc_call(c, &m, &r);
	assert_int_equal(r.type, MSG_REGISTER_REPLY);
	msg_deinit(&r);
}

struct msg tc_trace_req(const char *job, int iterations)
{
	struct msg m;

	msg_init(&m, MSG_TRACE_START, 0);
	m.u.trace_start.job_id = job;
	m.u.trace_start.win.iterations = iterations;
	return m;
}

/* ---- fake agent ---- */

static int agent_upload(struct tc *c, const char *trace_id, size_t bytes)
{
	static uint32_t transfer = 1;
	uint8_t *buf = malloc(bytes ? bytes : 1);
	uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
	size_t off = 0, n, i;
	struct pbuf b;
	struct msg m;
	int r;

	for (i = 0; i < bytes; i++)
		buf[i] = agent_byte(i);
	msg_init(&m, MSG_UPLOAD_BEGIN, 0);
	m.u.upload_begin.trace_id = trace_id;
	m.u.upload_begin.transfer = transfer;
	tc_send(c, &m);
	while (off < bytes) {
		n = bytes - off < (1u << 20) ? bytes - off : (1u << 20);
		pbuf_init(&b, 0);
		frame_encode_chunk(&b, transfer, off, buf + off, n);
		tc_send_raw(c, b.data, b.len);
		pbuf_deinit(&b);
		crc = (uint32_t)crc32(crc, buf + off, (uInt)n);
		off += n;
	}
	msg_init(&m, MSG_UPLOAD_END, 0);
	m.u.upload_end.transfer = transfer++;
	m.u.upload_end.bytes = (int64_t)bytes;
	m.u.upload_end.crc32 = crc;
	tc_send(c, &m);
	free(buf);
	/* the reply to upload_end: upload_end_reply or an error, by id */
	{
		uint64_t id = m.id;

		for (;;) {
			r = tc_recv(c, &m);
			if (r < 0)
				return r;
			if (m.id == id) {
				r = m.type == MSG_UPLOAD_END_REPLY ? 0 : -EIO;
				msg_deinit(&m);
				return r;
			}
			msg_deinit(&m);
		}
	}
}

int64_t agent_spawn_steps;

static void agent_main(const char *sock, const char *job_id, int rank, size_t trace_bytes,
                       int ready, int ctl)
{
	struct pollfd p[2];
	struct tc c;
	struct msg m;
	char byte = 1;

	if (tc_connect_unix(&c, sock) < 0 || tc_hello(&c, MSG_ROLE_AGENT) < 0)
		_exit(2);
	msg_init(&m, MSG_REGISTER, 0);
	m.u.reg.pid = getpid();
	m.u.reg.job_id = job_id;
	m.u.reg.rank = rank;
	m.u.reg.name = "fake-agent";
	tc_send(&c, &m);
	if (tc_recv_type(&c, MSG_REGISTER_REPLY, &m) < 0)
		_exit(3);
	msg_deinit(&m);
	if (agent_spawn_steps > 0) {
		msg_init(&m, MSG_HEARTBEAT, 0);
		m.u.heartbeat.steps = agent_spawn_steps + 3 * rank;
		tc_send(&c, &m);
	}
	if (write(ready, &byte, 1) != 1)
		_exit(4);
	close(ready);
	for (;;) {
		p[0] = (struct pollfd){ .fd = c.fd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = ctl, .events = POLLIN };
		if (c.head == NULL && poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents)
			_exit(0); /* the test closed our control pipe */
		if (c.head == NULL && fill(&c, 0) < 0)
			_exit(0);
		while (c.head != NULL) {
			if (tc_recv(&c, &m) < 0)
				_exit(5);
			if (m.type == MSG_CAPTURE_START) {
				struct msg s;
				char id[80];

				snprintf(id, sizeof(id), "%s", m.u.capture_start.trace_id);
				msg_init(&s, MSG_CAPTURE_STATUS, 0);
				s.u.capture_status.trace_id = id;
				if (trace_bytes == 0) {
					s.u.capture_status.state = MSG_TS_FAILED;
					s.u.capture_status.reason = "CUPTI is held by another tool (test)";
					tc_send(&c, &s);
				} else {
					s.u.capture_status.state = MSG_TS_CAPTURING;
					tc_send(&c, &s);
					s.u.capture_status.state = MSG_TS_WRITING;
					s.u.capture_status.events = 42;
					tc_send(&c, &s);
					agent_upload(&c, id, trace_bytes);
				}
			}
			msg_deinit(&m);
		}
	}
}

/* Forks an agent that reports on ready and ends when ctl closes (its
 * copies become fds 3 and 4); its pid, or -1. */
static pid_t agent_fork(int ready, int ctl, const char *sock, const char *job_id, int rank,
                        size_t trace_bytes)
{
	pid_t pid = fork();

	if (pid == 0) {
		/* Keep only our two pipe ends: an inherited write end of another
		 * agent's control pipe would keep that agent alive. */
		if (dup2(ready, 3) < 0 || dup2(ctl, 4) < 0)
			_exit(6);
		close_range(5, ~0u, 0);
		agent_main(sock, job_id, rank, trace_bytes, 3, 4);
		_exit(0);
	}
	return pid;
}

int agent_spawn(struct agent *a, const char *sock, const char *job_id, int rank,
                size_t trace_bytes)
{
	int ready[2], ctl[2];
	char byte;

	if (pipe2(ready, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(ctl, O_CLOEXEC) != 0) {
		close(ready[0]);
		close(ready[1]);
		return -1;
	}
	a->pid = agent_fork(ready[1], ctl[0], sock, job_id, rank, trace_bytes);
	close(ready[1]);
	close(ctl[0]);
	a->ctl = ctl[1];
	if (a->pid < 0 || read(ready[0], &byte, 1) != 1) {
		close(ready[0]);
		return -1;
	}
	close(ready[0]);
	return 0;
}

int agents_spawn(struct agents *g, int n, const char *sock, const char *job_id,
                 size_t trace_bytes)
{
	int ready[2], ctl[2], i, got = 0;
	char byte;

	g->n = 0;
	g->ctl = -1;
	if ((g->pids = calloc((size_t)(n > 0 ? n : 1), sizeof(pid_t))) == NULL ||
	    pipe2(ready, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(ctl, O_CLOEXEC) != 0) {
		close(ready[0]);
		close(ready[1]);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if ((g->pids[i] = agent_fork(ready[1], ctl[0], sock, job_id, i, trace_bytes)) < 0)
			break;
		g->n++;
	}
	close(ready[1]);
	close(ctl[0]);
	g->ctl = ctl[1];
	while (got < g->n && read(ready[0], &byte, 1) == 1)
		got++;
	close(ready[0]);
	return got;
}

void agents_stop(struct agents *g)
{
	int i, status;

	if (g->ctl >= 0)
		close(g->ctl);
	g->ctl = -1;
	for (i = 0; i < g->n; i++)
		waitpid(g->pids[i], &status, 0);
	free(g->pids);
	g->pids = NULL;
	g->n = 0;
}

void agent_stop(struct agent *a)
{
	int status;

	close(a->ctl);
	waitpid(a->pid, &status, 0);
}

long pid_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* ---- a Kineto client ---- */

/* Opens a client socket like Kineto's: bound to dynoconfigclient<id> in
 * the daemon's mode (dir: a file; NULL: the abstract namespace). */
int kc_open(struct kc *k, const char *dir, const char *name)
{
	struct sockaddr_un me;
	socklen_t len;
	char cname[64];
	static int seq;

	memset(k, 0, sizeof(*k));
	snprintf(cname, sizeof(cname), "dynoconfigclient%d-%d", (int)getpid(), seq++);
	k->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (k->fd < 0)
		return -1;
	if (dir) {
		kipc_addr_dir(&me, &len, dir, cname);
		unlink(me.sun_path);
		snprintf(k->path, sizeof(k->path), "%s", me.sun_path);
		kipc_addr_dir(&k->daemon, &k->dlen, dir, name);
	} else {
		kipc_addr_abstract(&me, &len, cname);
		kipc_addr_abstract(&k->daemon, &k->dlen, name);
	}
	return bind(k->fd, (struct sockaddr *)&me, len);
}

void kc_close(struct kc *k)
{
	close(k->fd);
	if (k->path[0])
		unlink(k->path);
}

/* One poll: "req" with this process and its parent; returns the config
 * length (0: nothing to do) and copies it into config, or -1. */
int kc_poll(struct kc *k, int type, int64_t job, char *config, size_t cap, int timeout_ms)
{
	struct kipc_req r = { type, 2, job, { (int32_t)getpid(), (int32_t)getppid() } };
	uint8_t buf[KIPC_HDR_SIZE + KIPC_CONFIG_MAX];
	struct pollfd p = { .fd = k->fd, .events = POLLIN };
	enum kipc_kind kind;
	const uint8_t *pl;
	size_t plen;
	ssize_t n;
	int len = kipc_encode_req(buf, sizeof(buf), &r);

	if (sendto(k->fd, buf, (size_t)len, 0, (struct sockaddr *)&k->daemon, k->dlen) != len)
		return -1;
	if (poll(&p, 1, timeout_ms) != 1)
		return -1;
	n = recv(k->fd, buf, sizeof(buf), 0);
	if (n < 0 || kipc_decode_header(buf, (size_t)n, &kind, &pl, &plen, NULL) < 0 ||
	    kind != KIPC_REQ || plen >= cap)
		return -1;
	memcpy(config, pl, plen);
	config[plen] = 0;
	return (int)plen;
}

/* Runs the group of cases the arguments choose (harness.h says how). */
int td_main(int argc, char **argv, const struct CMUnitTest *plain, size_t nplain,
            const struct CMUnitTest *root, size_t nroot)
{
	bool as_root = argc > 1 && strcmp(argv[1], "--root") == 0;
	const struct CMUnitTest *group = as_root ? root : plain;
	size_t n = as_root ? nroot : nplain;
	const char *prog = argv[0];

	if (as_root) {
		argc--;
		argv++;
	}
	if (n == 0) {
		printf("no %s cases in %s: skipped (77)\n", as_root ? "root" : "plain", prog);
		return 77;
	}
	if (as_root && geteuid() != 0) {
		printf("%zu cases need root (other users, mounts): skipped (77); CI runs as root\n", n);
		return 77;
	}
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return _cmocka_run_group_tests(as_root ? "root" : "plain", group, n, NULL, NULL);
}
