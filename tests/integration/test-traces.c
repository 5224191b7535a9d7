/*
 * Integration tests of gprofctl's stored-trace commands and of its one
 * JSON interface (issue 26): the real gprofctl against real daemons on
 * loopback, with forked fake agents (tests/integration/harness.h).
 *
 *   traces/fetch/delete  across two hosts, by id, by job and by age; a
 *                        second real user (nobody) sees and deletes only
 *                        its own traces, root's stay.
 *   --json               after the command on every command, one object
 *                        each, an unknown rank null (never -1); in metrics
 *                        labels an empty rank, never rank="-1".
 *   errors               a peer that is not gprofd, a port out of range,
 *                        an output directory that cannot be written, no
 *                        host reachable, a number beyond int64, a missing
 *                        agent: each says what happened and what to do.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
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
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness.h"

static char out[8 << 20], err[1 << 16]; /* the paged list prints about 2.5 MB */

/* Runs gprofctl with args (NULL-terminated) as uid (-1: as this process),
 * stdout into out and stderr into err. Returns its exit status. */
static int run_as(uid_t uid, gid_t gid, const char *const *args)
{
	const char *argv[64];
	int po[2], pe[2], n = 0, status;
	size_t lo = 0, le = 0;
	ssize_t r;
	pid_t pid;

	argv[n++] = GPROFCTL_PATH;
	while (*args && n < 62)
		argv[n++] = *args++;
	argv[n] = NULL;
	if (pipe(po) != 0 || pipe(pe) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (uid != (uid_t)-1 && (setgid(gid) != 0 || setuid(uid) != 0))
			_exit(100);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	/* stderr is small: read it after stdout ends (gprofctl writes both) */
	while ((r = read(po[0], out + lo, sizeof(out) - 1 - lo)) > 0)
		lo += (size_t)r;
	while ((r = read(pe[0], err + le, sizeof(err) - 1 - le)) > 0)
		le += (size_t)r;
	out[lo] = 0;
	err[le] = 0;
	close(po[0]);
	close(pe[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_ctl(const char *const *args)
{
	return run_as((uid_t)-1, (gid_t)-1, args);
}

/* stdout as JSON (the caller deletes it); fails the test when it is not. */
static cJSON *json_out(void)
{
	cJSON *root = cJSON_Parse(out);

	if (root == NULL)
		fail_msg("not JSON: %s (stderr: %s)", out, err);
	return root;
}

static int num(const cJSON *o, const char *key)
{
	return (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, key));
}

static void rm_rf(const char *dir)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* Traces job on the daemon at sock with trace id id, into dir: exit 0. */
static void take(const char *sock, const char *job, const char *id, const char *dir)
{
	const char *args[] = { "--socket", sock, "trace", "--job", job, "--iterations", "1",
	                       "--trace-id", id, "--output-dir", dir, NULL };

	assert_int_equal(run_ctl(args), 0);
}

/* The trace ids `traces --json` (given after the command) lists, joined by
 * spaces in listing order, into ids: 0, or -1 (no cmocka assertion, so a
 * forked child may call it). */
static int list_ids(const char *const *hosts, const char *extra1, const char *extra2,
                    char *ids, size_t size)
{
	const char *args[20];
	cJSON *root, *t;
	size_t len = 0;
	int n = 0;

	while (*hosts)
		args[n++] = *hosts++;
	args[n++] = "traces";
	if (extra1)
		args[n++] = extra1;
	if (extra2)
		args[n++] = extra2;
	args[n++] = "--json";
	args[n] = NULL;
	ids[0] = 0;
	if (run_ctl(args) != 0 || (root = cJSON_Parse(out)) == NULL)
		return -1;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "traces"))
		len += (size_t)snprintf(ids + len, size - len, "%s%s", len ? " " : "",
		                        cJSON_GetStringValue(cJSON_GetObjectItem(t, "trace_id")));
	cJSON_Delete(root);
	return 0;
}

static void listed(const char *const *hosts, const char *extra1, const char *extra2, char *ids,
                   size_t size)
{
	if (list_ids(hosts, extra1, extra2, ids, size) < 0)
		fail_msg("gprofctl traces failed: %s %s", out, err);
}

/* Two hosts: job ja has rank 0 on one and rank 1 on the other, job jb one
 * process of unknown rank on the first. traces lists all three stored
 * traces with job, processes, ranks (none known: []) and size; filters by
 * job and age; fetch --job gets ja's two files; delete --job removes ja's
 * and leaves jb's. */
static void test_traces_fetch_delete(void **state)
{
	struct td d1, d2;
	struct agent a0, a1, b;
	char outdir[] = "/tmp/gprofctl-tr-XXXXXX", dir[300], h1[64], h2[64], ids[512];
	const char *hosts[] = { "--host", h1, "--host", h2, NULL };
	cJSON *root, *t;
	struct stat st;
	int seen = 0;

	(void)state;
	assert_non_null(mkdtemp(outdir));
	assert_int_equal(td_start(&d1, NULL, NULL), 0);
	assert_int_equal(td_start(&d2, NULL, NULL), 0);
	snprintf(h1, sizeof(h1), "127.0.0.1:%d", d1.port);
	snprintf(h2, sizeof(h2), "127.0.0.1:%d", d2.port);
	assert_int_equal(agent_spawn(&a0, d1.sock, "ja", 0, 3000), 0);
	assert_int_equal(agent_spawn(&a1, d2.sock, "ja", 1, 4000), 0);
	assert_int_equal(agent_spawn(&b, d1.sock, "jb", -1, 500), 0);
	take(d1.sock, "ja", "ja-1", outdir);
	take(d2.sock, "ja", "ja-1", outdir);
	take(d1.sock, "jb", "jb-1", outdir);

	{
		const char *args[] = { "--host", h1, "--host", h2, "traces", "--json", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = json_out();
	assert_int_equal(num(root, "exit"), 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "hosts")), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "traces")), 3);
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "traces")) {
		const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(t, "trace_id"));
		const char *host = cJSON_GetStringValue(cJSON_GetObjectItem(t, "host"));
		cJSON *ranks = cJSON_GetObjectItem(t, "ranks");
		cJSON *file = cJSON_GetArrayItem(cJSON_GetObjectItem(t, "files"), 0);

		assert_int_equal(num(t, "processes"), 1);
		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t, "state")), "done");
		assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "created_us")) > 1e15);
		if (strcmp(id, "jb-1") == 0) {
			/* the unknown rank: no rank listed, null in the file, never -1 */
			assert_string_equal(host, h1);
			assert_string_equal(cJSON_GetStringValue(cJSON_GetArrayItem(
				cJSON_GetObjectItem(t, "jobs"), 0)), "jb");
			assert_int_equal(cJSON_GetArraySize(ranks), 0);
			assert_true(cJSON_IsNull(cJSON_GetObjectItem(file, "rank")));
			assert_int_equal(num(t, "bytes"), 500);
		} else {
			int rank = strcmp(host, h1) == 0 ? 0 : 1;

			assert_string_equal(id, "ja-1");
			assert_int_equal(cJSON_GetNumberValue(cJSON_GetArrayItem(ranks, 0)), rank);
			assert_int_equal(num(t, "bytes"), rank ? 4000 : 3000);
		}
		seen++;
	}
	assert_int_equal(seen, 3);
	cJSON_Delete(root);
	/* the text table: the rank range, "-" for none, never -1 */
	{
		const char *args[] = { "--host", h1, "traces", NULL };

		assert_int_equal(run_ctl(args), 0);
		assert_non_null(strstr(out, "jb-1"));
		assert_null(strstr(out, " -1 "));
	}
	/* the wire: the daemon filters by job and pages from an offset */
	{
		struct tc c;
		struct msg m, r;

		tc_ctl(&c, d1.sock);
		msg_init(&m, MSG_TRACE_LIST, 0);
		m.u.trace_ref.job_id = "jb";
		tc_call(&c, &m, &r);
		assert_int_equal(r.u.trace_list_reply.traces.n, 1);
		assert_int_equal(r.u.trace_list_reply.total, 1);
		assert_string_equal(r.u.trace_list_reply.traces.v[0].files.v[0].job_id, "jb");
		assert_int_equal(r.u.trace_list_reply.traces.v[0].uid, (int64_t)getuid());
		msg_deinit(&r);
		msg_init(&m, MSG_TRACE_LIST, 0);
		m.u.trace_ref.offset = 1;
		tc_call(&c, &m, &r);
		assert_int_equal(r.u.trace_list_reply.total, 2);
		assert_int_equal(r.u.trace_list_reply.traces.n, 1);
		assert_int_equal(r.u.trace_list_reply.next_offset, 0);
		assert_string_equal(r.u.trace_list_reply.traces.v[0].trace_id, "ja-1"); /* older */
		msg_deinit(&r);
		tc_close(&c);
	}
	listed(hosts, "--job", "jb", ids, sizeof(ids));
	assert_string_equal(ids, "jb-1");
	listed(hosts, "--since", "1h", ids, sizeof(ids));
	assert_int_equal(strlen(ids), strlen("jb-1 ja-1 ja-1"));
	listed(hosts, "--older-than", "1h", ids, sizeof(ids));
	assert_string_equal(ids, "");

	/* fetch by job, from both hosts */
	snprintf(dir, sizeof(dir), "%s/again", outdir);
	{
		const char *args[] = { "--host", h1, "--host", h2, "fetch", "--job", "ja",
		                       "--output-dir", dir, "--json", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = json_out();
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "files")), 2);
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "files")) {
		const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(t, "path"));

		assert_non_null(path);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, num(t, "rank") ? 4000 : 3000);
	}
	assert_int_equal(num(root, "exit"), 0);
	cJSON_Delete(root);
	/* no such job: exit 2, said */
	{
		const char *args[] = { "--host", h1, "fetch", "--job", "nojob", "--output-dir", dir,
		                       NULL };

		assert_int_equal(run_ctl(args), 2);
		assert_non_null(strstr(err, "no host has a stored trace of job nojob"));
	}

	/* delete by job: ja's two traces go, jb's stays */
	{
		const char *args[] = { "--host", h1, "--host", h2, "delete", "--job", "ja", "--json",
		                       NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = json_out();
	assert_int_equal(num(root, "traces"), 2);
	assert_int_equal(num(root, "bytes"), 7000);
	cJSON_Delete(root);
	listed(hosts, NULL, NULL, ids, sizeof(ids));
	assert_string_equal(ids, "jb-1");
	/* and by id */
	{
		const char *args[] = { "--host", h1, "delete", "jb-1", NULL };

		assert_int_equal(run_ctl(args), 0);
		assert_non_null(strstr(out, "jb-1 deleted"));
		assert_int_equal(run_ctl(args), 2);
	}
	agent_stop(&a0);
	agent_stop(&a1);
	agent_stop(&b);
	assert_int_equal(td_finish(&d1), 0);
	assert_int_equal(td_finish(&d2), 0);
	rm_rf(outdir);
}

/* More stored traces than one frame holds (300 manifests of 20 files with
 * long names, about 1.7 MB of list): the daemon answers in pages and
 * gprofctl asks for each, so every trace is listed once, newest first,
 * and the job filter works across pages too. The store is written as the
 * daemon writes it, then loaded by a restart. */
static void test_traces_paged(void **state)
{
	enum { N = 300, FILES = 20 };
	char path[600], name[200];
	struct td d;
	cJSON *root, *t;
	int64_t now_us = (int64_t)time(NULL) * 1000000;
	int i, k, n = 0, last = -1;

	(void)state;
	assert_int_equal(td_start(&d, NULL, NULL), 0);
	assert_int_equal(td_stop(&d), 0);
	memset(name, 'f', 140);
	name[140] = 0;
	for (i = 0; i < N; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/traces/p-%05d", d.state, i);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/traces/p-%05d/manifest.json", d.state, i);
		f = fopen(path, "w");
		assert_non_null(f);
		fprintf(f, "{\"trace_id\":\"p-%05d\",\"owner_uid\":0,\"created_us\":%lld,"
		        "\"state\":\"done\",\"files\":[", i, (long long)(now_us - N + i));
		for (k = 0; k < FILES; k++)
			fprintf(f, "%s{\"name\":\"%s%02d.gz\",\"bytes\":1,\"pid\":%d,\"rank\":%d,"
			        "\"host\":\"h\",\"job_id\":\"%s\"}", k ? "," : "", name, k, 100 + k, k,
			        i % 2 ? "odd" : "even");
		fprintf(f, "]}");
		fclose(f);
		/* the files it lists, as the daemon keeps them (a start-up
		 * drops a manifest's entry whose file is gone) */
		for (k = 0; k < FILES; k++) {
			snprintf(path, sizeof(path), "%s/traces/p-%05d/%s%02d.gz", d.state, i, name, k);
			f = fopen(path, "w");
			assert_non_null(f);
			fputc('x', f);
			fclose(f);
		}
	}
	assert_int_equal(td_restart(&d, NULL, NULL), 0);
	{
		const char *args[] = { "--socket", d.sock, "traces", "--json", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = json_out();
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "traces")) {
		k = atoi(cJSON_GetStringValue(cJSON_GetObjectItem(t, "trace_id")) + 2);
		assert_true(last < 0 || k == last - 1);
		assert_int_equal(num(t, "processes"), FILES);
		last = k;
		n++;
	}
	assert_int_equal(n, N);
	cJSON_Delete(root);
	{
		const char *args[] = { "--socket", d.sock, "traces", "--job", "odd", "--json", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = json_out();
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "traces")), N / 2);
	cJSON_Delete(root);
	/* the daemon paged: more than one page for the whole list */
	{
		struct tc c;
		struct msg m, r;

		tc_ctl(&c, d.sock);
		msg_init(&m, MSG_TRACE_LIST, 0);
		tc_call(&c, &m, &r);
		assert_int_equal(r.u.trace_list_reply.total, N);
		assert_true(r.u.trace_list_reply.traces.n < N);
		assert_int_equal(r.u.trace_list_reply.next_offset, r.u.trace_list_reply.traces.n);
		msg_deinit(&r);
		tc_close(&c);
	}
	assert_int_equal(td_finish(&d), 0);
}

/* Two real users: root and nobody each trace a job of their own. nobody's
 * traces lists only its own, cannot fetch or delete root's (exit 2, root's
 * trace still there), deletes its own; root sees both and keeps its own. */
static void test_delete_own_only(void **state)
{
	struct passwd *pw = getpwnam("nobody");
	char outdir[] = "/tmp/gprofctl-own-XXXXXX", ids[512];
	struct td d;
	struct agent a;
	pid_t pid;
	int status;

	(void)state;
	assert_non_null(pw);
	assert_non_null(mkdtemp(outdir));
	assert_int_equal(chown(outdir, pw->pw_uid, pw->pw_gid), 0);
	assert_int_equal(td_start(&d, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&a, d.sock, "rootjob", 0, 1000), 0);
	take(d.sock, "rootjob", "root-1", outdir);
	pid = fork();
	if (pid == 0) {
		/* nobody: its own agent, its own trace, through gprofctl */
		struct agent mine;
		const char *self[] = { "--socket", d.sock, NULL };
		int code = 0;

		if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
			_exit(100);
		if (agent_spawn(&mine, d.sock, "nobodyjob", 0, 700) != 0)
			_exit(101);
		{
			const char *args[] = { "--socket", d.sock, "trace", "--job", "nobodyjob",
			                       "--iterations", "1", "--trace-id", "nobody-1",
			                       "--output-dir", outdir, NULL };

			if (run_ctl(args) != 0)
				code = 1;
		}
		if (list_ids(self, NULL, NULL, ids, sizeof(ids)) < 0 || strcmp(ids, "nobody-1") != 0)
			code = 2;
		{
			const char *args[] = { "--socket", d.sock, "delete", "root-1", NULL };

			if (run_ctl(args) != 2 || !strstr(err, "that you may delete"))
				code = 3;
		}
		{
			const char *args[] = { "--socket", d.sock, "fetch", "root-1", "--output-dir",
			                       outdir, NULL };

			if (run_ctl(args) != 2)
				code = 4;
		}
		{
			const char *args[] = { "--socket", d.sock, "delete", "nobody-1", NULL };

			if (run_ctl(args) != 0)
				code = 5;
		}
		agent_stop(&mine);
		_exit(code);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	{
		const char *self[] = { "--socket", d.sock, NULL };

		listed(self, NULL, NULL, ids, sizeof(ids));
		assert_string_equal(ids, "root-1");
	}
	agent_stop(&a);
	assert_int_equal(td_finish(&d), 0);
	rm_rf(outdir);
}

/* --json after the command on every command: one JSON object each, with
 * "hosts" and "exit" where daemons answer; a process of unknown rank is
 * null in list and trace, and launch's note is JSON on stderr. */
static void test_json_after_command(void **state)
{
	char outdir[] = "/tmp/gprofctl-js-XXXXXX";
	struct td d;
	struct agent a;
	cJSON *root, *p;
	const char *cmds[][4] = {
		{ "status", NULL }, { "list", NULL }, { "traces", NULL }, { "metrics", NULL },
		{ "cancel", "none-1", NULL }, { "fetch", "none-1", NULL },
		{ "delete", "none-1", NULL },
	};
	size_t i;

	(void)state;
	assert_non_null(mkdtemp(outdir));
	assert_int_equal(td_start(&d, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&a, d.sock, "nr", -1, 100), 0);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const char *args[10] = { "--socket", d.sock, cmds[i][0] };
		int n = 3, code;

		if (cmds[i][1])
			args[n++] = cmds[i][1];
		args[n++] = "--json";
		args[n] = NULL;
		code = run_ctl(args);
		root = json_out();
		assert_true(cJSON_IsArray(cJSON_GetObjectItem(root, "hosts")));
		assert_int_equal(num(root, "exit"), code);
		cJSON_Delete(root);
	}
	{
		const char *args[] = { "--socket", d.sock, "list", "--json", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = json_out();
	p = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "processes"), 0);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(p, "rank")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(p, "world_size")));
	cJSON_Delete(root);
	/* and the daemon's log says so in words */
	assert_true(td_wait_log(&d, "job nr, no rank)", NULL));
	assert_int_equal(td_log_count(&d, "rank -1"), 0);
	{
		const char *args[] = { "--socket", d.sock, "trace", "--job", "nr", "--iterations", "1",
		                       "--output-dir", outdir, "--json", NULL };

		assert_int_equal(run_ctl(args), 0);
	}
	root = json_out();
	p = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root,
	                       "hosts"), 0), "processes"), 0);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p, "state")), "delivered");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(p, "rank")));
	cJSON_Delete(root);
	{
		const char *args[] = { "help", "--json", NULL };

		assert_int_equal(run_ctl(args), 0);
		root = json_out();
		assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(root, "commands")) >= 10);
		cJSON_Delete(root);
	}
	{
		/* launch: stdout is the command's; the generated job id is JSON on stderr */
		const char *args[] = { "launch", "--json", "--agent", GPROFCTL_PATH, "--", "sh", "-c",
		                       "echo $GPROF_JOB_ID", NULL };

		unsetenv("GPROF_JOB_ID");
		unsetenv("SLURM_JOB_ID");
		assert_int_equal(run_ctl(args), 0);
		root = cJSON_Parse(err);
		assert_non_null(root);
		assert_non_null(strstr(out, cJSON_GetStringValue(cJSON_GetObjectItem(root, "job_id"))));
		cJSON_Delete(root);
	}
	agent_stop(&a);
	assert_int_equal(td_finish(&d), 0);
	rm_rf(outdir);
}

/* The step-time series of a process with no rank: rank="" (no label, to
 * Prometheus), never rank="-1"; a ranked one keeps its rank. Polls
 * gprofctl metrics until a sample holds both processes (100 ms sampling). */
static void test_metrics_rank_label(void **state)
{
	struct td d;
	struct agent a, b;
	char want_a[160], want_b[160];
	int tries;

	(void)state;
	assert_int_equal(td_start(&d, "metrics: 127.0.0.1:0\nsampling:\n  interval: 100ms\n", NULL),
	                 0);
	agent_spawn_steps = 5;
	assert_int_equal(agent_spawn(&a, d.sock, "mlab", -1, 100), 0);
	assert_int_equal(agent_spawn(&b, d.sock, "mlab", 2, 100), 0);
	agent_spawn_steps = 0;
	snprintf(want_a, sizeof(want_a), "gprofd_process_steps_total{job=\\\"mlab\\\",rank=\\\"\\\","
	         "pid=\\\"%d\\\"", (int)a.pid);
	snprintf(want_b, sizeof(want_b), "gprofd_process_steps_total{job=\\\"mlab\\\",rank=\\\"2\\\","
	         "pid=\\\"%d\\\"", (int)b.pid);
	for (tries = 0; tries < 3000; tries++) {
		const char *args[] = { "--socket", d.sock, "metrics", "--json", NULL };
		int rc = run_ctl(args);

		/* the sampler's first cycle may come after the agents (NVML
		 * loads first): "no sample yet" is asked again */
		if (rc != 0 && strstr(out, "no sample yet") != NULL)
			continue;
		assert_int_equal(rc, 0);
		if (strstr(out, want_a) && strstr(out, want_b))
			break;
	}
	assert_non_null(strstr(out, want_a));
	assert_non_null(strstr(out, want_b));
	assert_null(strstr(out, "rank=\\\"-1"));
	agent_stop(&a);
	agent_stop(&b);
	assert_int_equal(td_finish(&d), 0);
}

/* A port that speaks HTTP, as a metrics port or a web server does:
 * answers anything with a 400 and closes. The child serves one client. */
static pid_t http_server(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), c;
	pid_t pid;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	getsockname(fd, (struct sockaddr *)&sa, &len);
	*port = ntohs(sa.sin_port);
	pid = fork();
	if (pid == 0) {
		static const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
		char buf[512];

		c = accept(fd, NULL, NULL);
		if (read(c, buf, sizeof(buf)) < 0)
			_exit(1);
		if (write(c, reply, sizeof(reply) - 1) < 0)
			_exit(1);
		close(c);
		_exit(0);
	}
	close(fd);
	return pid;
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
	close(fd);
	return port;
}

/* A peer that is not gprofd (here an HTTP server, as a metrics port or a
 * web server is) is named as such, not as a frame over a size limit. */
static void test_error_not_gprofd(void **state)
{
	char host[64];
	int port, status;
	pid_t srv;

	(void)state;
	srv = http_server(&port);
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	{
		const char *args[] = { "--host", host, "status", NULL };

		assert_int_equal(run_ctl(args), 3);
		assert_non_null(strstr(out, "is not a gprofd daemon"));
		assert_non_null(strstr(out, "HTTP"));
		assert_null(strstr(out, "exceeds the limit"));
	}
	waitpid(srv, &status, 0);
}

/* A port out of range is a usage error naming the host given, before any
 * connection; a refused connection names the port. */
static void test_error_port(void **state)
{
	char host[64], want[64];
	int port = closed_port();

	(void)state;
	{
		const char *args[] = { "--host", "127.0.0.1:99999", "status", NULL };

		assert_int_equal(run_ctl(args), 3);
		assert_non_null(strstr(err, "127.0.0.1:99999"));
		assert_non_null(strstr(err, "1 to 65535"));
		assert_null(strstr(out, "cannot connect"));
	}
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	{
		const char *args[] = { "--host", host, "status", NULL };

		assert_int_equal(run_ctl(args), 3);
		snprintf(want, sizeof(want), "port %d", port);
		assert_non_null(strstr(out, want));
	}
}

/* No host reachable is said as such, not as "nothing matched". */
static void test_error_no_host_reachable(void **state)
{
	char outdir[] = "/tmp/gprofctl-er-XXXXXX", host[64];

	(void)state;
	assert_non_null(mkdtemp(outdir));
	snprintf(host, sizeof(host), "127.0.0.1:%d", closed_port());
	{
		const char *args[] = { "--host", host, "trace", "--job", "x", "--iterations", "1",
		                       "--output-dir", outdir, NULL };

		assert_int_equal(run_ctl(args), 3);
		assert_non_null(strstr(out, "no host was reachable"));
		assert_null(strstr(out, "nothing matched"));
	}
	rm_rf(outdir);
}

/* An output directory that cannot be made is refused before any capture:
 * no trace starts on the daemon. */
static void test_error_output_dir(void **state)
{
	char outdir[] = "/tmp/gprofctl-er-XXXXXX", probe[400];
	struct td d;
	struct agent a;
	cJSON *root;

	(void)state;
	assert_non_null(mkdtemp(outdir));
	assert_int_equal(td_start(&d, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&a, d.sock, "od", 0, 100), 0);
	snprintf(probe, sizeof(probe), "%s/file", outdir);
	fclose(fopen(probe, "w"));
	snprintf(probe, sizeof(probe), "%s/file/sub", outdir);
	{
		const char *args[] = { "--socket", d.sock, "trace", "--job", "od", "--iterations", "1",
		                       "--output-dir", probe, NULL };

		assert_int_equal(run_ctl(args), 3);
		assert_non_null(strstr(err, "cannot be created"));
		assert_non_null(strstr(err, "nothing was traced"));
		assert_int_equal(td_log_count(&d, " started by "), 0);
	}
	{
		const char *args[] = { "--socket", d.sock, "--json", "status", NULL };

		assert_int_equal(run_ctl(args), 0);
		root = json_out();
		assert_int_equal(num(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "hosts"), 0),
		                     "stored_traces"), 0);
		cJSON_Delete(root);
	}
	agent_stop(&a);
	assert_int_equal(td_finish(&d), 0);
	rm_rf(outdir);
}

/* A count beyond int64 is echoed as given, with the limit. */
static void test_error_number_range(void **state)
{
	const char *args[] = { "trace", "--job", "od", "--iterations", "99999999999999999999", NULL };

	(void)state;
	assert_int_equal(run_ctl(args), 3);
	assert_non_null(strstr(err, "99999999999999999999 is out of range"));
	assert_non_null(strstr(err, "1000000"));
	assert_null(strstr(err, "9223372036854775807"));
}

/* launch without an agent is an error, and the command does not run. */
static void test_error_launch_no_agent(void **state)
{
	const char *args[] = { "launch", "--agent", "/nope.so", "--", "sh", "-c", "echo ran", NULL };

	(void)state;
	assert_int_equal(run_ctl(args), 3);
	assert_null(strstr(out, "ran"));
	assert_non_null(strstr(err, "no agent at /nope.so"));
	assert_non_null(strstr(err, "--agent"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_traces_fetch_delete),
		cmocka_unit_test(test_traces_paged),
		cmocka_unit_test(test_json_after_command),
		cmocka_unit_test(test_metrics_rank_label),
		cmocka_unit_test(test_error_not_gprofd),
		cmocka_unit_test(test_error_port),
		cmocka_unit_test(test_error_no_host_reachable),
		cmocka_unit_test(test_error_output_dir),
		cmocka_unit_test(test_error_number_range),
		cmocka_unit_test(test_error_launch_no_agent),
	};
	/* a second user (nobody) needs root (meson's traces-root) */
	const struct CMUnitTest root_tests[] = {
		cmocka_unit_test(test_delete_own_only),
	};
	signal(SIGPIPE, SIG_IGN);
	return td_main(argc, argv, tests, TD_NELEM(tests), root_tests, TD_NELEM(root_tests));
}
