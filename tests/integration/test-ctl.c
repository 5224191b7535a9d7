/*
 * Integration tests of gprofctl: the real binary against real daemons on
 * loopback, with forked fake agents uploading known bytes. Covers the
 * fan-out to 16 daemons, a host that is unreachable, one that never
 * finishes, one where nothing matched (each reported, with the exit
 * statuses of gprofctl(1)), --json, SLURM host expansion through a fake
 * scontrol/squeue, fetch, token authentication, launch and usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness.h"

#define NHOSTS 16

static char out[1 << 20];

/* Runs gprofctl with args (NULL-terminated); stdout into out. Returns its
 * exit status. */
static int run_ctl(const char *const *args)
{
	const char *argv[64];
	int pipefd[2], n = 0, status;
	size_t len = 0;
	ssize_t r;
	pid_t pid;

	argv[n++] = GPROFCTL_PATH;
	while (*args && n < 62)
		argv[n++] = *args++;
	argv[n] = NULL;
	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	while ((r = read(pipefd[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = 0;
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int closed_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	port = ntohs(sa.sin_port);
	close(fd); /* nothing listens there now */
	return port;
}

static char *host_arg(int port)
{
	char *s = malloc(32);

	snprintf(s, 32, "127.0.0.1:%d", port);
	return s;
}

static void check_file(const char *path, size_t size)
{
	struct stat st;
	FILE *f;
	size_t i;
	int c;

	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, size);
	f = fopen(path, "rb");
	assert_non_null(f);
	for (i = 0; (c = fgetc(f)) != EOF; i++)
		if ((uint8_t)c != agent_byte(i))
			fail_msg("%s: byte %zu differs", path, i);
	fclose(f);
}

static void test_trace_16_hosts(void **state)
{
	struct td d[NHOSTS];
	struct agent a[NHOSTS];
	const char *args[80];
	char outdir[] = "/tmp/gprofctl-out-XXXXXX";
	cJSON *root, *hosts, *h, *p;
	int i, n = 0;

	(void)state;
	assert_non_null(mkdtemp(outdir));
	for (i = 0; i < NHOSTS; i++) {
		assert_int_equal(td_start(&d[i], NULL, NULL), 0);
		assert_int_equal(agent_spawn(&a[i], d[i].sock, "fleet", i, 100000 + (size_t)i), 0);
	}
	for (i = 0; i < NHOSTS; i++) {
		args[n++] = "--host";
		args[n++] = host_arg(d[i].port);
	}
	args[n++] = "--json";
	args[n++] = "trace";
	args[n++] = "--job";
	args[n++] = "fleet";
	args[n++] = "--iterations";
	args[n++] = "2";
	args[n++] = "--trace-id";
	args[n++] = "fleet-0001";
	args[n++] = "--output-dir";
	args[n++] = outdir;
	args[n] = NULL;
	assert_int_equal(run_ctl(args), 0);
	root = cJSON_Parse(out);
	assert_non_null(root);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(root, "trace_id")), "fleet-0001");
	assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "matched")), NHOSTS);
	assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "delivered")), NHOSTS);
	hosts = cJSON_GetObjectItem(root, "hosts");
	assert_int_equal(cJSON_GetArraySize(hosts), NHOSTS);
	cJSON_ArrayForEach(h, hosts) {
		p = cJSON_GetArrayItem(cJSON_GetObjectItem(h, "processes"), 0);
		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p, "state")), "delivered");
		/* rank i uploaded 100000 + i bytes of the known pattern */
		check_file(cJSON_GetStringValue(cJSON_GetObjectItem(p, "file")),
		           100000 + (size_t)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "rank")));
		assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(p, "file")),
		                       "/fleet-0001/"));
	}
	cJSON_Delete(root);
	/* fetch it again from every host into a fresh directory */
	{
		char dir2[300];
		const char *fargs[80];
		int k = 0;

		snprintf(dir2, sizeof(dir2), "%s/again", outdir);
		for (i = 0; i < NHOSTS; i++) {
			fargs[k++] = "--host";
			fargs[k++] = args[2 * i + 1];
		}
		fargs[k++] = "fetch";
		fargs[k++] = "fleet-0001";
		fargs[k++] = "--output-dir";
		fargs[k++] = dir2;
		fargs[k] = NULL;
		assert_int_equal(run_ctl(fargs), 0);
		assert_int_equal((int)(strstr(out, "FAILED") == NULL), 1);
	}
	for (i = 0; i < NHOSTS; i++) {
		agent_stop(&a[i]);
		assert_int_equal(td_stop(&d[i]), 0);
		td_cleanup(&d[i]);
		free((char *)args[2 * i + 1]);
	}
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", outdir);
		assert_int_equal(system(cmd), 0);
	}
}

/* Until every process host d lists has reported steps (heartbeats). */
static void wait_steps(struct td *d, size_t n)
{
	struct tc c;
	struct msg m, r;
	size_t i, stepped = 0;
	int tries;

	tc_ctl(&c, d->sock);
	for (tries = 0; tries < 10000 && stepped < n; tries++) {
		msg_init(&m, MSG_PROCESS_LIST, 0);
		tc_call(&c, &m, &r);
		for (i = 0, stepped = 0; i < r.u.process_list_reply.procs.n; i++)
			stepped += r.u.process_list_reply.procs.v[i].steps > 0;
		msg_deinit(&r);
	}
	assert_int_equal(stepped, n);
	tc_close(&c);
}

/* A fleet job: 8 hosts x 8 ranks, each host's ranks started by a launcher
 * registered there (this process: the fake agents are its children). One
 * request: exit 0, 64 rank files with their bytes and ranks in their names,
 * 8 launchers reported as left out, and every host told to begin on the
 * same step, past the most advanced rank anywhere (the ranks report
 * 1000 + 3 x rank steps: rank 63's 1189 makes it 1200, where each host
 * alone would have chosen its own). */
static void test_trace_8_hosts_8_ranks(void **state)
{
	enum { H = 8, R = 8 };
	struct td d[H];
	struct agent a[H][R];
	struct tc me[H];
	const char *args[40];
	char outdir[] = "/tmp/gprofctl-out-XXXXXX", cmd[400];
	cJSON *root, *h, *p;
	int i, k, n = 0, delivered = 0, skipped = 0;

	(void)state;
	assert_non_null(mkdtemp(outdir));
	agent_spawn_steps = 1000;
	for (i = 0; i < H; i++) {
		assert_int_equal(td_start(&d[i], NULL, NULL), 0);
		tc_agent(&me[i], d[i].sock, "fleet64");
		for (k = 0; k < R; k++)
			assert_int_equal(agent_spawn(&a[i][k], d[i].sock, "fleet64", i * R + k,
			                             20000 + (size_t)(i * R + k)), 0);
		args[n++] = "--host";
		args[n++] = host_arg(d[i].port);
		wait_steps(&d[i], R);
	}
	agent_spawn_steps = 0;
	args[n++] = "--json";
	args[n++] = "trace";
	args[n++] = "--job";
	args[n++] = "fleet64";
	args[n++] = "--iterations";
	args[n++] = "3";
	args[n++] = "--output-dir";
	args[n++] = outdir;
	args[n] = NULL;
	assert_int_equal(run_ctl(args), 0);
	root = cJSON_Parse(out);
	assert_non_null(root);
	assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "matched")), H * R);
	assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "delivered")), H * R);
	assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "skipped")), H);
	cJSON_ArrayForEach(h, cJSON_GetObjectItem(root, "hosts")) {
		cJSON_ArrayForEach(p, cJSON_GetObjectItem(h, "processes")) {
			const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(p, "state"));
			int rank = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "rank"));
			char want[32];

			if (strcmp(st, "skipped") == 0) {
				assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "pid")),
				                 getpid());
				skipped++;
				continue;
			}
			assert_string_equal(st, "delivered");
			snprintf(want, sizeof(want), "_rank%d.", rank);
			assert_non_null(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(p, "file")),
			                       want));
			check_file(cJSON_GetStringValue(cJSON_GetObjectItem(p, "file")),
			           20000 + (size_t)rank);
			delivered++;
		}
	}
	assert_int_equal(delivered, H * R);
	assert_int_equal(skipped, H);
	cJSON_Delete(root);
	for (i = 0; i < H; i++)
		assert_true(td_wait_log(&d[i], "every process begins at step 1200\n", NULL));
	for (i = 0; i < H; i++) {
		for (k = 0; k < R; k++)
			agent_stop(&a[i][k]);
		tc_close(&me[i]);
		assert_int_equal(td_stop(&d[i]), 0);
		td_cleanup(&d[i]);
		free((char *)args[2 * i + 1]);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", outdir);
	assert_int_equal(system(cmd), 0);
}

static void test_trace_failures_reported(void **state)
{
	struct td ok, empty, stuck;
	struct agent a;
	struct tc ag;
	char outdir[] = "/tmp/gprofctl-out-XXXXXX", *hok, *hbad, *hempty, *hstuck;
	int rc;

	(void)state;
	assert_non_null(mkdtemp(outdir));
	assert_int_equal(td_start(&ok, NULL, NULL), 0);
	assert_int_equal(td_start(&empty, NULL, NULL), 0);
	assert_int_equal(td_start(&stuck, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&a, ok.sock, "mix", 0, 5000), 0);
	tc_agent(&ag, stuck.sock, "mix"); /* registered, never answers */
	hok = host_arg(ok.port);
	hbad = host_arg(closed_port());
	hempty = host_arg(empty.port);
	hstuck = host_arg(stuck.port);
	{
		const char *args[] = { "--host", hok, "--host", hbad, "--host", hempty, "--host", hstuck,
		                       "trace", "--job", "mix", "--duration-ms", "100",
		                       "--timeout", "2", "--output-dir", outdir, NULL };

		rc = run_ctl(args);
	}
	assert_int_equal(rc, 1);
	assert_non_null(strstr(out, "1 of 2 matched processes delivered"));
	assert_non_null(strstr(out, "connection refused"));                /* unreachable */
	assert_non_null(strstr(out, "nothing matched: no traceable process")); /* empty host */
	assert_non_null(strstr(out, "timed out after 2 s"));                /* stuck host */
	tc_close(&ag);
	agent_stop(&a);
	assert_int_equal(td_stop(&ok), 0);
	assert_int_equal(td_stop(&empty), 0);
	assert_int_equal(td_stop(&stuck), 0);
	td_cleanup(&ok);
	td_cleanup(&empty);
	td_cleanup(&stuck);
	free(hok);
	free(hbad);
	free(hempty);
	free(hstuck);
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", outdir);
		assert_int_equal(system(cmd), 0);
	}
}

static void test_nothing_matched_exit_2(void **state)
{
	struct td d;
	struct agent a;

	(void)state;
	assert_int_equal(td_start(&d, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&a, d.sock, "real-job", 0, 100), 0);
	{
		const char *args[] = { "--socket", d.sock, "trace", "--job", "typo-job",
		                       "--iterations", "1", "--output-dir", "/tmp/gprofctl-unused", NULL };

		assert_int_equal(run_ctl(args), 2);
	}
	/* the user sees the jobs that are registered */
	assert_non_null(strstr(out, "job real-job: 1 process"));
	agent_stop(&a);
	assert_int_equal(td_stop(&d), 0);
	td_cleanup(&d);
}

static void test_status_list_json(void **state)
{
	struct td d;
	struct agent a;
	cJSON *root, *procs;
	char *h;

	(void)state;
	assert_int_equal(td_start(&d, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&a, d.sock, "lj", 3, 100), 0);
	h = host_arg(d.port);
	{
		const char *args[] = { "--host", h, "--json", "status", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = cJSON_Parse(out);
	assert_non_null(root);
	assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(
		cJSON_GetArrayItem(cJSON_GetObjectItem(root, "hosts"), 0), "processes")), 1);
	cJSON_Delete(root);
	{
		const char *args[] = { "--socket", d.sock, "--json", "list", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = cJSON_Parse(out);
	assert_non_null(root);
	procs = cJSON_GetObjectItem(root, "processes");
	assert_int_equal(cJSON_GetArraySize(procs), 1);
	assert_int_equal(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(procs, 0), "pid")),
	                 a.pid);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(procs, 0), "job")),
	                    "lj");
	cJSON_Delete(root);
	{
		const char *args[] = { "--socket", d.sock, "list", NULL };

		assert_int_equal(run_ctl(args), 0);
		assert_non_null(strstr(out, "lj"));
	}
	agent_stop(&a);
	assert_int_equal(td_stop(&d), 0);
	td_cleanup(&d);
	free(h);
}

static void test_slurm_hosts(void **state)
{
	char bin[] = "/tmp/gprofctl-slurm-XXXXXX", path[300], newpath[4200], port[16];
	struct td d;
	FILE *f;

	(void)state;
	assert_int_equal(td_start(&d, NULL, NULL), 0);
	assert_non_null(mkdtemp(bin));
	/* fake SLURM: job 4242 runs on two nodes, both this machine */
	snprintf(path, sizeof(path), "%s/squeue", bin);
	f = fopen(path, "w");
	fputs("#!/bin/sh\n[ \"$3\" = 4242 ] && echo 'localhost,127.0.0.1' && exit 0\nexit 1\n", f);
	fclose(f);
	chmod(path, 0755);
	snprintf(path, sizeof(path), "%s/scontrol", bin);
	f = fopen(path, "w");
	fputs("#!/bin/sh\n[ \"$1 $2\" = 'show hostnames' ] || exit 1\n"
	      "echo \"$3\" | tr ',' '\\n'\n", f);
	fclose(f);
	chmod(path, 0755);
	snprintf(newpath, sizeof(newpath), "%s:%s", bin, getenv("PATH"));
	setenv("PATH", newpath, 1);
	unsetenv("SLURM_JOB_ID");
	snprintf(port, sizeof(port), "%d", d.port);
	{
		const char *args[] = { "--slurm-job", "4242", "--port", port, "status", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	/* two hosts expanded, both answered */
	assert_int_equal((int)(strstr(strstr(out, "0.1.0") + 1, "0.1.0") != NULL), 1);
	{
		const char *args[] = { "--slurm-job", "999", "status", NULL };

		assert_int_equal(run_ctl(args), 3);
	}
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", bin);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(td_stop(&d), 0);
	td_cleanup(&d);
}

static void test_token_auth(void **state)
{
	char dir[] = "/tmp/gprofctl-tok-XXXXXX", tok[300], yaml[400], *h;
	struct td d;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(tok, sizeof(tok), "%s/token", dir);
	f = fopen(tok, "w");
	fputs("a-token-of-enough-length\n", f);
	fclose(f);
	chmod(tok, 0600);
	snprintf(yaml, sizeof(yaml), "auth_token_file: %s\nloopback_identity: false\n", tok);
	assert_int_equal(td_start(&d, yaml, NULL), 0);
	h = host_arg(d.port);
	{
		const char *args[] = { "--host", h, "status", NULL };

		assert_int_equal(run_ctl(args), 3);
		assert_non_null(strstr(out, "--token-file"));
	}
	{
		const char *args[] = { "--host", h, "--token-file", tok, "status", NULL };

		assert_int_equal(run_ctl(args), 0);
		assert_non_null(strstr(out, "0.1.0"));
	}
	assert_int_equal(td_stop(&d), 0);
	td_cleanup(&d);
	unlink(tok);
	rmdir(dir);
	free(h);
}

static void test_launch_and_usage(void **state)
{
	(void)state;
	{
		/* any readable file stands in for the agent: launch checks only
		 * that it is there (a missing one is refused, test-traces.c) */
		const char *args[] = { "launch", "--job", "j77", "--agent", GPROFCTL_PATH, "--",
		                       "sh", "-c", "echo $GPROF_JOB_ID $CUDA_INJECTION64_PATH "
		                       "$NVTX_INJECTION64_PATH", NULL };
		char want[600];

		assert_int_equal(run_ctl(args), 0);
		snprintf(want, sizeof(want), "j77 %s %s\n", GPROFCTL_PATH, GPROFCTL_PATH);
		assert_string_equal(out, want);
	}
	{
		const char *args[] = { "trace", "--iterations", "5", NULL };

		assert_int_equal(run_ctl(args), 3);
	}
	{
		const char *args[] = { "trace", "--job", "1", "--iterations", "5", "--duration-ms",
		                       "5", NULL };

		assert_int_equal(run_ctl(args), 3);
	}
	{
		const char *args[] = { "trace", "--job", "1", "--iterations", "5", "--activities",
		                       "kernel,warp", NULL };

		assert_int_equal(run_ctl(args), 3);
	}
	{
		const char *args[] = { "frobnicate", NULL };

		assert_int_equal(run_ctl(args), 3);
	}
	{
		const char *args[] = { "help", "trace", NULL };

		assert_int_equal(run_ctl(args), 0);
		assert_non_null(strstr(out, "--iteration-roundup"));
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_16_hosts),
		cmocka_unit_test(test_trace_8_hosts_8_ranks),
		cmocka_unit_test(test_trace_failures_reported),
		cmocka_unit_test(test_nothing_matched_exit_2),
		cmocka_unit_test(test_status_list_json),
		cmocka_unit_test(test_slurm_hosts),
		cmocka_unit_test(test_token_auth),
		cmocka_unit_test(test_launch_and_usage),
	};
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
