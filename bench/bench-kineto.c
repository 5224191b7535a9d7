/*
 * bench-kineto: N emulated Kineto clients poll gprofd at the same instant
 * (as the ranks of a job do); each times its own round trip (send "req",
 * receive the reply). Kineto's client waits about 90 ms for the reply.
 * ROUNDS rounds; prints, per round, the slowest client, and the median
 * and p99 over all clients and rounds.
 *
 * Usage: bench-kineto [N=64] [ROUNDS=20]
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "kipc.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One client: waits for go, polls once, writes its latency (us) to out. */
static void client(const char *dir, int go, int out, int id)
{
	struct sockaddr_un me, daemon;
	socklen_t mlen, dlen;
	uint8_t buf[1024];
	struct kipc_req r = { 3, 1, 4242, { (int32_t)getpid() } };
	struct pollfd p;
	char name[64], byte;
	double t0, t;
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0), n;

	snprintf(name, sizeof(name), "dynoconfigclient-bench-%d", id);
	kipc_addr_dir(&me, &mlen, dir, name);
	unlink(me.sun_path);
	kipc_addr_dir(&daemon, &dlen, dir, "dynolog");
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, mlen) != 0)
		_exit(2);
	n = kipc_encode_req(buf, sizeof(buf), &r);
	while (read(go, &byte, 1) == 1) { /* one byte per round; EOF ends */
		t0 = now_us();
		sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&daemon, dlen);
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		t = poll(&p, 1, 2000) == 1 && recv(fd, buf + 512, 512, 0) >= 40 ?
		    now_us() - t0 : -1;
		if (write(out, &t, sizeof(t)) != sizeof(t))
			_exit(3);
	}
	unlink(me.sun_path);
	_exit(0);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 64, rounds = argc > 2 ? atoi(argv[2]) : 20;
	int go[2], res[2], i, r, lost = 0;
	double *all = calloc((size_t)(n * rounds), sizeof(double)), *worst = calloc((size_t)rounds, sizeof(double));
	pid_t *pids = calloc((size_t)n, sizeof(pid_t));
	char yaml[512];
	struct td d;

	if (td_start(&d, "kineto:\n  enabled: false\n", NULL) != 0)
		return 1;
	td_stop(&d);
	snprintf(yaml, sizeof(yaml), "log_level: warning\nkineto:\n  socket_dir: %s\n", d.dir);
	if (td_restart(&d, yaml, NULL) != 0)
		return 1;
	if (pipe(go) != 0 || pipe(res) != 0)
		return 1;
	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(go[1]);
			close(res[0]);
			client(d.dir, go[0], res[1], i);
		}
	}
	close(go[0]);
	close(res[1]);
	for (r = 0; r < rounds; r++) {
		char bytes[1024];

		memset(bytes, 1, sizeof(bytes));
		/* all N bytes at once: the clients wake together */
		if (write(go[1], bytes, (size_t)n) != n)
			return 1;
		for (i = 0; i < n; i++) {
			double t;

			if (read(res[0], &t, sizeof(t)) != sizeof(t))
				return 1;
			if (t < 0)
				lost++;
			all[r * n + i] = t < 0 ? 1e9 : t;
			if (all[r * n + i] > worst[r])
				worst[r] = all[r * n + i];
		}
	}
	close(go[1]);
	for (i = 0; i < n; i++)
		waitpid(pids[i], NULL, 0);
	qsort(all, (size_t)(n * rounds), sizeof(double), cmp);
	qsort(worst, (size_t)rounds, sizeof(double), cmp);
	printf("kineto %d clients polling at once, %d rounds: median %.0f us, p99 %.0f us, "
	       "slowest client per round: median %.0f us, max %.0f us; %d unanswered\n", n, rounds,
	       all[n * rounds / 2], all[(int)(n * rounds * 0.99)], worst[rounds / 2],
	       worst[rounds - 1], lost);
	td_stop(&d);
	td_cleanup(&d);
	return lost ? 1 : 0;
}
