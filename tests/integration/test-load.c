/*
 * Load (issue 15): the daemon under 10,000 registered processes, each with
 * its connection open, and under a crowd of slow and stalled clients.
 * What must hold is behaviour and bounded memory, not speed (benchmarks
 * time things: bench/bench-daemon): every process registers and is
 * counted, requests are answered meanwhile, memory per process and per
 * stalled client is bounded, every stalled client is evicted at its
 * deadline, and the daemon exits cleanly afterwards.
 *
 * LOAD_PROCESSES (default 10000; 1000 in the sanitizer build) sets the
 * number of processes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static struct td D;

/*
 * Under AddressSanitizer each forked agent copies the sanitizer's shadow
 * mappings (10,000 forks took 106 s there, against 7 s). That build checks
 * the same paths with 1,000 processes; the normal build runs the 10,000
 * (so does valgrind's run). Memory is bounded by what the daemon counts it
 * holds (the status reply's conn_bytes, proc_bytes), the same in every
 * build.
 */
#ifdef __SANITIZE_ADDRESS__
#define DEFAULT_PROCESSES 1000
#else
#define DEFAULT_PROCESSES 10000
#endif

/* The daemon under valgrind (tests/valgrind.sh: $GPROFD_WRAPPER)? */
static bool wrapped(void)
{
	const char *w = getenv("GPROFD_WRAPPER");

	return w != NULL && *w != '\0';
}

static int teardown(void **state)
{
	(void)state;
	return td_finish(&D);
}

static struct msg status(struct tc *c)
{
	struct msg m, r;

	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(c, &m, &r);
	assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
	return r;
}

static double counter(const struct msg *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->u.daemon_status_reply.counters.n; i++)
		if (strcmp(r->u.daemon_status_reply.counters.names[i], name) == 0)
			return r->u.daemon_status_reply.counters.values[i];
	return -1;
}

/* This process holds one descriptor per agent: room for them. */
static void room_for(int n)
{
	struct rlimit rl;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < (rlim_t)n + 256) {
		rl.rlim_cur = (rlim_t)n + 256;
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur; /* root may */
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			fail_msg("cannot raise the descriptor limit to the %d this test needs (%s): "
			         "run it as root or raise ulimit -Hn", n + 256, strerror(errno));
	}
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* GET /metrics from the daemon's metrics port: the status line's code,
 * and whether the body has gprofd's own metrics. */
static int scrape(int port, bool *ours)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	static char buf[1 << 20];
	size_t got = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), code = 0;

	*ours = false;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		close(fd);
		return -1;
	}
	while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	sscanf(buf, "HTTP/%*s %d", &code);
	*ours = strstr(buf, "gprofd_daemon_cpu_seconds_total") != NULL;
	return code;
}

/* The port gprofd logged for its metrics endpoint. */
static int metrics_port(void)
{
	size_t at = 0;
	int port = 0;

	assert_true(td_wait_log(&D, "metrics on http://127.0.0.1:", &at));
	pthread_mutex_lock(&D.mu);
	sscanf(D.log + at, "%d", &port);
	pthread_mutex_unlock(&D.mu);
	return port;
}

/* How many processes `gprofctl --json list` prints. */
static int count_listed(void)
{
	char cmd[700];
	FILE *f;
	char line[4096];
	int pids = 0;

	/* gprofctl gives up on a host after 30 s by default; 10,000 processes
	 * listed on a loaded machine took longer (CI beside two CPU hogs):
	 * an hour, a hang guard only */
	snprintf(cmd, sizeof(cmd), "%s --socket %s --timeout 3600 --json list", GPROFCTL_PATH,
	         D.sock);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "\"pid\":"))
			pids++;
	assert_int_equal(pclose(f), 0);
	return pids;
}

/* 10,000 processes register, each keeping its connection: all counted,
 * the daemon answers meanwhile, memory per process bounded; they all go
 * and the registry is empty again. The daemon lifts its own descriptor
 * limit to what limits.connections needs. */
static void test_ten_thousand_processes(void **state)
{
	/* valgrind runs the daemon some 30 times slower and keeps the
	 * descriptor limit the daemon started with: there 1,000, and the
	 * lifting of the limit is left to the unwrapped runs */
	const char *env = getenv("LOAD_PROCESSES");
	int n = env ? atoi(env) : wrapped() ? 1000 : DEFAULT_PROCESSES, i;
	struct agents a;
	double held0, held1, t0;
	struct tc c;
	struct msg r;

	(void)state;
	assert_true(n > 0);
	/* the daemon starts with the soft limit a login shell hands down */
	{
		struct rlimit rl, low;

		assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
		low = rl;
		low.rlim_cur = wrapped() ? rl.rlim_cur : 1024;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
		/* the test's own connection idles while the agents register,
		 * which a loaded 2-core machine stretched past the default 300 s
		 * (the daemon then closed it, as it should) */
		assert_int_equal(td_start(&D, "limits:\n  connections: 20000\n"
		                          "  idle_timeout: 3600s\n"
		                          "metrics: 127.0.0.1:0\n", NULL), 0);
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	tc_ctl(&c, D.sock);
	r = status(&c);
	held0 = counter(&r, "conn_bytes") + counter(&r, "proc_bytes");
	msg_deinit(&r);
	t0 = mono_s();
	if ((i = agents_spawn(&a, n, D.sock, "load", 0)) != n)
		fail_msg("%d of %d agents registered", i, n);
	r = status(&c);
	assert_int_equal(r.u.daemon_status_reply.processes, n);
	held1 = counter(&r, "conn_bytes") + counter(&r, "proc_bytes");
	msg_deinit(&r);
	print_message("%d processes registered in %.1f s; the daemon holds %.0f -> %.0f bytes for "
	              "connections and processes (%.0f bytes a process)\n", n, mono_s() - t0, held0,
	              held1, (held1 - held0) / n);
	/* memory per registered process bounded, by the daemon's own count
	 * (its connection and registry entry: 1.2 KB); the resident size is
	 * bench/footprint.py's */
	assert_true(held0 > 0 && (held1 - held0) / n < 4096);
	/* the list of all of them is served, in pages of one frame each */
	{
		int64_t offset = 0, seen = 0, pages = 0;
		struct msg m;

		do {
			msg_init(&m, MSG_PROCESS_LIST, 0);
			m.u.process_list.offset = offset;
			tc_call(&c, &m, &r);
			assert_int_equal(r.type, MSG_PROCESS_LIST_REPLY);
			assert_int_equal(r.u.process_list_reply.total, n);
			assert_true(r.u.process_list_reply.procs.n > 0);
			seen += (int64_t)r.u.process_list_reply.procs.n;
			offset = r.u.process_list_reply.next_offset;
			assert_true(offset == 0 || offset == seen);
			pages++;
			msg_deinit(&r);
		} while (offset > 0);
		assert_int_equal(seen, n);
		print_message("process list: %d processes in %lld pages\n", n, (long long)pages);
		/* and gprofctl reads every page */
		assert_int_equal(count_listed(), n);
	}
	/* Prometheus is served meanwhile, though the scrape's socket is past
	 * the first 1,024 descriptors */
	{
		bool ours;

		assert_int_equal(scrape(metrics_port(), &ours), 200);
		assert_true(ours);
	}
	agents_stop(&a);
	/* every connection closed by its process's exit: the registry empties
	 * (each status is a round trip; how soon depends on the machine's load,
	 * so meson's timeout is the only hang guard) */
	for (;;) {
		int64_t left;

		r = status(&c);
		left = r.u.daemon_status_reply.processes;
		msg_deinit(&r);
		if (left == 0)
			break;
	}
	tc_close(&c);
}

/* 1,000 clients that never say hello and 1,000 that said hello and left a
 * frame unfinished: a client that behaves is served meanwhile, memory
 * stays bounded, and every stalled one is told why (or closed) at its
 * deadline. */
static void test_many_stalled_clients(void **state)
{
	enum { SILENT = 1000, HALF = 1000, N = SILENT + HALF };
	static const uint8_t half_header[3] = { 0, 0, 0 };
	struct tc *c = calloc(N, sizeof(*c)), ok;
	double held0, held1;
	struct msg r;
	int i, open_left = N;
	struct pollfd *pf = calloc(N, sizeof(*pf));

	(void)state;
	assert_non_null(c);
	assert_non_null(pf);
	room_for(N);
	assert_int_equal(td_start(&D, "limits:\n  connections: 5000\n  hello_timeout: 2s\n"
	                          "  frame_timeout: 2s\n", NULL), 0);
	tc_ctl(&ok, D.sock);
	r = status(&ok);
	held0 = counter(&r, "conn_bytes");
	msg_deinit(&r);
	for (i = 0; i < N; i++) {
		assert_int_equal(tc_connect_unix(&c[i], D.sock), 0);
		if (i >= SILENT) {
			assert_int_equal(tc_hello(&c[i], MSG_ROLE_CTL), 0);
			assert_int_equal(tc_send_raw(&c[i], half_header, sizeof(half_header)), 0);
		}
	}
	/* held open: the well-behaved client is served (how many stalled ones
	 * reached their 2 s deadline while the others connected depends on the
	 * machine's load: the count at the end is what is asserted) */
	r = status(&ok);
	held1 = counter(&r, "conn_bytes");
	print_message("%lld stalled clients timed out while the others connected\n",
	              (long long)counter(&r, "conns_timed_out"));
	msg_deinit(&r);
	print_message("%d stalled clients: connections hold %.0f -> %.0f bytes (%.0f each)\n", N,
	              held0, held1, (held1 - held0) / N);
	/* what each holds, by the daemon's count: its state, no buffer for a
	 * frame whose header is not even whole */
	assert_true(held0 > 0 && (held1 - held0) / N < 4096);
	/* each is closed at its deadline: read until EOF on every one */
	for (i = 0; i < N; i++) {
		pf[i].fd = c[i].fd;
		pf[i].events = POLLIN;
	}
	while (open_left > 0) { /* (a client never closed: meson's timeout) */
		int k = poll(pf, N, 1000);

		assert_true(k >= 0 || errno == EINTR);
		for (i = 0; i < N && k > 0; i++) {
			char buf[4096];
			ssize_t got;

			if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			got = read(pf[i].fd, buf, sizeof(buf)); /* the error reply, then EOF */
			if (got <= 0) {
				pf[i].fd = -1;
				open_left--;
			}
		}
	}
	r = status(&ok);
	assert_true(counter(&r, "conns_timed_out") == N);
	msg_deinit(&r);
	for (i = 0; i < N; i++)
		tc_close(&c[i]);
	tc_close(&ok);
	free(c);
	free(pf);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_ten_thousand_processes, teardown),
		cmocka_unit_test_teardown(test_many_stalled_clients, teardown),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
