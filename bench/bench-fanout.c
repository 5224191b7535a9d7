/*
 * bench-fanout: gprofctl trace across N daemons on loopback, each with one
 * agent handing over a 1 MB trace: wall time from the command's start to
 * its exit, when the last trace is on disk (verified). N = 16, 64, 256 by
 * default; REPS runs each, median reported.
 *
 * Usage: bench-fanout [REPS=3] [N...]
 * Daemons and agents are started before the clock starts; what is timed is
 * exactly what a user waits for.
 * FANOUT_TLS=DIR: the same over TLS (gprofctl --tls to each daemon's
 * tls.listen), with DIR/server.crt, DIR/server.key (for 127.0.0.1) and
 * DIR/ca.crt; interleaved with plain runs, both reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define TRACE_BYTES (1u << 20)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static const char *tls_dir;

static double run_once(int n, struct td *d, int rep, bool tls)
{
	static char ca[512];
	char **argv = calloc((size_t)(2 * n + 20), sizeof(char *)), id[64], dir[64], cmd[128];
	int i, k = 0, status;
	double t0, t;
	pid_t pid;

	argv[k++] = GPROFCTL_PATH;
	for (i = 0; i < n; i++) {
		argv[k++] = "--host";
		argv[k] = malloc(32);
		snprintf(argv[k++], 32, "127.0.0.1:%d", tls ? d[i].tls_port : d[i].port);
	}
	if (tls) {
		snprintf(ca, sizeof(ca), "%s/ca.crt", tls_dir);
		argv[k++] = "--tls";
		argv[k++] = "--tls-ca";
		argv[k++] = ca;
	}
	snprintf(id, sizeof(id), "fanout-%d-%d%s", n, rep, tls ? "-tls" : "");
	snprintf(dir, sizeof(dir), "/tmp/gprof-fanout-%d", (int)getpid());
	argv[k++] = "trace";
	argv[k++] = "--job";
	argv[k++] = "bench";
	argv[k++] = "--iterations";
	argv[k++] = "1";
	argv[k++] = "--trace-id";
	argv[k++] = id;
	argv[k++] = "--output-dir";
	argv[k++] = dir;
	argv[k] = NULL;
	t0 = now_s();
	pid = fork();
	if (pid == 0) {
		if (freopen("/dev/null", "w", stdout) == NULL || freopen("/dev/null", "w", stderr) == NULL)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	t = now_s() - t0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "gprofctl failed (status %d) with %d hosts\n", status, n);
		exit(1);
	}
	snprintf(cmd, sizeof(cmd), "test $(ls %s/%s | wc -l) -eq %d && rm -rf %s", dir, id, n, dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "not every trace arrived\n");
		exit(1);
	}
	for (i = 0; i < n; i++)
		free(argv[2 + 2 * i]);
	free(argv);
	return t;
}

static void report(const char *what, int n, double *t, int reps)
{
	qsort(t, (size_t)reps, sizeof(double), cmp);
	printf("fan-out %4d hosts x 1 MB%s: median %.3f s (min %.3f, max %.3f; %d runs), "
	       "%.1f MB/s\n", n, what, t[reps / 2], t[0], t[reps - 1], reps,
	       n * (double)TRACE_BYTES / 1e6 / t[reps / 2]);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 3, sizes[8] = { 16, 64, 256 }, nsizes = 3, s, i, r;
	char config[2048];
	struct rlimit rl;

	tls_dir = getenv("FANOUT_TLS");
	if (tls_dir != NULL)
		snprintf(config, sizeof(config), "log_level: warning\ntls:\n  listen: 127.0.0.1:0\n"
		         "  cert: %s/server.crt\n  key: %s/server.key\n", tls_dir, tls_dir);
	else
		snprintf(config, sizeof(config), "log_level: warning\n");

	if (argc > 2) {
		nsizes = 0;
		for (i = 2; i < argc && nsizes < 8; i++)
			sizes[nsizes++] = atoi(argv[i]);
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	for (s = 0; s < nsizes; s++) {
		int n = sizes[s];
		struct td *d = calloc((size_t)n, sizeof(*d));
		struct agent *a = calloc((size_t)n, sizeof(*a));
		double *t = calloc((size_t)reps, sizeof(double));
		double *tt = calloc((size_t)reps, sizeof(double));

		for (i = 0; i < n; i++) {
			if (td_start(&d[i], config, NULL) != 0 || (tls_dir && d[i].tls_port == 0) ||
			    agent_spawn(&a[i], d[i].sock, "bench", i, TRACE_BYTES) != 0) {
				fprintf(stderr, "could not start daemon/agent %d\n", i);
				return 1;
			}
		}
		for (r = 0; r < reps; r++) {
			t[r] = run_once(n, d, r, false);
			if (tls_dir)
				tt[r] = run_once(n, d, r, true);
		}
		report("", n, t, reps);
		if (tls_dir)
			report(" over TLS", n, tt, reps);
		for (i = 0; i < n; i++) {
			agent_stop(&a[i]);
			td_stop(&d[i]);
			td_cleanup(&d[i]);
		}
		free(d);
		free(a);
		free(t);
		free(tt);
	}
	return 0;
}
