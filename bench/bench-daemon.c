/*
 * bench-daemon: the daemon's footprint and request path, measured against
 * a real gprofd started on a private socket and an ephemeral loopback port.
 *
 *   idle         RSS after start-up, and CPU share over IDLE seconds
 *   registry     RSS growth per registered process (K forked agents that
 *                register over the Unix socket and stay connected), then
 *                getStatus latency on a kept connection while they are
 *                (limits.connections is raised to 100,000 for it)
 *   getStatus    Dynolog's getStatus, as dyno sends it: latency over a new
 *                TCP connection per request, and over one kept connection
 *                (median and p99 of N requests)
 *   throughput   requests/s with C concurrent clients on kept connections
 *
 * Usage: bench-daemon GPROFD [IDLE_SECONDS=60] [K=1000] [N=5000] [C=64]
 * Timings on a shared machine vary: run it on an idle one, and read the
 * medians (docs/BENCHMARKS.md records them).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "msg.h"

static char dir[64], sock[128], logpath[128];
static int port;
static pid_t daemon_pid;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL || fgets(buf, sizeof(buf), f) == NULL) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	p = strrchr(buf, ')');
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void start_daemon(const char *gprofd)
{
	char line[512];
	FILE *f;
	int i;

	snprintf(dir, sizeof(dir), "/tmp/gprofd-bench-XXXXXX");
	if (mkdtemp(dir) == NULL)
		exit(1);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	daemon_pid = fork();
	if (daemon_pid == 0) {
		char state[128];

		snprintf(state, sizeof(state), "%s/state", dir);
		if (freopen(logpath, "w", stderr) == NULL)
			_exit(126);
		char cfg[128];
		FILE *c;

		/* room for the registry phase's K connections (issue 15 asks 10,000) */
		snprintf(cfg, sizeof(cfg), "%s/gprofd.yaml", dir);
		if ((c = fopen(cfg, "w")) == NULL || fputs("limits:\n  connections: 100000\n", c) < 0 ||
		    fclose(c) != 0)
			_exit(126);
		execl(gprofd, gprofd, "--socket", sock, "--tcp", "127.0.0.1:0", "--state-dir", state,
		      "--config", cfg, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 2000 && port == 0; i++) {
		f = fopen(logpath, "r");
		while (f && fgets(line, sizeof(line), f)) {
			char *p = strstr(line, "tcp port ");

			if (p)
				port = atoi(p + 9);
		}
		if (f)
			fclose(f);
		if (port == 0)
			poll(NULL, 0, 5); /* a benchmark may wait; tests never do */
	}
	if (port == 0) {
		fprintf(stderr, "gprofd did not start; see %s\n", logpath);
		exit(1);
	}
}

static int tcp_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One getStatus exchange on fd, as dyno does it. */
static void get_status(int fd)
{
	static const char req[] = "\x12\0\0\0{\"fn\":\"getStatus\"}";
	char buf[64];
	size_t got = 0;
	ssize_t n;

	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		exit(1);
	while (got < 4 + 12) {
		n = read(fd, buf + got, sizeof(buf) - got);
		if (n <= 0) {
			fprintf(stderr, "getStatus: short reply\n");
			exit(1);
		}
		got += (size_t)n;
	}
	if (memcmp(buf + 4, "{\"status\":1}", 12) != 0)
		exit(1);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void latency(int n, int kept)
{
	double *t = malloc(sizeof(double) * (size_t)n), t0;
	int i, fd = kept ? tcp_connect() : -1;

	for (i = 0; i < n; i++) {
		t0 = now_s();
		if (!kept)
			fd = tcp_connect();
		get_status(fd);
		if (!kept)
			close(fd);
		t[i] = (now_s() - t0) * 1e6;
	}
	if (kept)
		close(fd);
	qsort(t, (size_t)n, sizeof(double), cmp);
	printf("getStatus %-22s median %7.1f us   p99 %7.1f us   (%d requests)\n",
	       kept ? "over one connection" : "new TCP connection", t[n / 2],
	       t[(int)(n * 0.99)], n);
	free(t);
}

static atomic_long done;
static atomic_int stop_flag;

static void *client(void *arg)
{
	int fd = tcp_connect();

	(void)arg;
	while (!atomic_load(&stop_flag)) {
		get_status(fd);
		atomic_fetch_add(&done, 1);
	}
	close(fd);
	return NULL;
}

static void throughput(int clients, double secs)
{
	pthread_t *th = malloc(sizeof(*th) * (size_t)clients);
	double t0;
	int i;

	for (i = 0; i < clients; i++)
		pthread_create(&th[i], NULL, client, NULL);
	t0 = now_s();
	poll(NULL, 0, (int)(secs * 1000));
	atomic_store(&stop_flag, 1);
	for (i = 0; i < clients; i++)
		pthread_join(th[i], NULL);
	printf("throughput %d clients, kept connections: %.0f requests/s over %.1f s\n", clients,
	       (double)atomic_load(&done) / (now_s() - t0), now_s() - t0);
	free(th);
}

/* A registered agent process: connects, says hello, registers, then waits
 * for its pipe to close. */
static void agent(int ready, int hold)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct pbuf b;
	struct msg m;
	char buf[512], byte = 1;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		_exit(1);
	pbuf_init(&b, 0);
	msg_init(&m, MSG_HELLO, 1);
	m.u.hello.proto_min = m.u.hello.proto_max = 1;
	m.u.hello.role = MSG_ROLE_AGENT;
	m.u.hello.software = "bench-agent";
	msg_encode(&b, &m, NULL);
	msg_init(&m, MSG_REGISTER, 2);
	m.u.reg.pid = getpid();
	m.u.reg.job_id = "bench-job-1234";
	m.u.reg.rank = 7;
	m.u.reg.host = "bench-host";
	m.u.reg.name = "python3";
	m.u.reg.version = "0.1.0";
	msg_encode(&b, &m, NULL);
	if (write(fd, b.data, b.len) != (ssize_t)b.len)
		_exit(2);
	/* both replies (hello_reply, register_reply) */
	{
		size_t got = 0;
		int frames = 0;

		while (frames < 2) {
			ssize_t n = read(fd, buf + got, sizeof(buf) - got);
			uint32_t len;

			if (n <= 0)
				_exit(3);
			got += (size_t)n;
			while (got >= 4) {
				memcpy(&len, buf, 4);
				if (got < 4 + len)
					break;
				memmove(buf, buf + 4 + len, got - 4 - len);
				got -= 4 + len;
				frames++;
			}
		}
	}
	if (write(ready, &byte, 1) != 1)
		_exit(4);
	while (read(hold, &byte, 1) > 0)
		;
	_exit(0);
}

static void latency(int n, int kept);

static void registry(int k, int n)
{
	int ready[2], hold[2], i;
	long before, after;
	char byte;
	pid_t *pids = malloc(sizeof(pid_t) * (size_t)k);

	if (pipe(ready) != 0 || pipe(hold) != 0)
		exit(1);
	before = pid_rss_kb(daemon_pid);
	for (i = 0; i < k; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(ready[0]);
			close(hold[1]);
			agent(ready[1], hold[0]);
		}
	}
	close(hold[0]);
	close(ready[1]);
	for (i = 0; i < k; i++)
		if (read(ready[0], &byte, 1) != 1) {
			fprintf(stderr, "an agent did not register\n");
			exit(1);
		}
	after = pid_rss_kb(daemon_pid);
	printf("registry   %d processes registered: RSS %ld -> %ld kB, %.0f bytes per process\n", k,
	       before, after, (double)(after - before) * 1024.0 / k);
	/* the daemon responsive with K connections open and K processes registered */
	latency(n, 1);
	close(hold[1]);
	for (i = 0; i < k; i++)
		waitpid(pids[i], NULL, 0);
	close(ready[0]);
	free(pids);
}

int main(int argc, char **argv)
{
	int idle = argc > 2 ? atoi(argv[2]) : 60;
	int k = argc > 3 ? atoi(argv[3]) : 1000;
	int n = argc > 4 ? atoi(argv[4]) : 5000;
	int c = argc > 5 ? atoi(argv[5]) : 64;
	double c0, c1;
	char cmd[200];

	if (argc < 2) {
		fprintf(stderr, "usage: bench-daemon GPROFD [IDLE_SECONDS] [K] [N] [C]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	start_daemon(argv[1]);
	printf("idle       RSS after start-up: %ld kB\n", pid_rss_kb(daemon_pid));
	c0 = cpu_s(daemon_pid);
	poll(NULL, 0, idle * 1000);
	c1 = cpu_s(daemon_pid);
	printf("idle       CPU over %d s: %.3f s = %.4f%% of one core; RSS %ld kB\n", idle, c1 - c0,
	       (c1 - c0) / idle * 100.0, pid_rss_kb(daemon_pid));
	latency(n, 0);
	latency(n * 4, 1);
	throughput(c, 5.0);
	registry(k, n);
	printf("after      RSS %ld kB\n", pid_rss_kb(daemon_pid));
	kill(daemon_pid, SIGTERM);
	waitpid(daemon_pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
