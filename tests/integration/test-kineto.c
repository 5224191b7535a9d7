/*
 * Integration tests of the Kineto IPC service: an emulated PyTorch Kineto
 * client, written from shared/DYNOLOG_COMPAT.md, sends the exact datagrams
 * (its own address in the same mode, "req" with its pid and ancestors);
 * the daemon registers it, hands over a one-shot config only when it is
 * not busy, collects the trace file the client writes, and forgets a
 * client that falls silent. Both socket modes; malformed datagrams; 64
 * clients polling at once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <zlib.h>

#include "harness.h"
#include "kipc.h"

static struct td D;
static char abstract_name[64];

/* A daemon serving Kineto in directory mode, with more kineto: options
 * (YAML lines, indented). The socket lives in the daemon's own test
 * directory (made by td_start), known only after mkdtemp: start with a
 * placeholder, then restart. */
static int setup_dir_with(const char *more)
{
	char yaml[700], tdir[300];

	if (td_start(&D, "kineto:\n  enabled: false\n", NULL) < 0)
		return -1;
	td_stop(&D);
	snprintf(tdir, sizeof(tdir), "%s/ktrace", D.dir);
	snprintf(yaml, sizeof(yaml), "kineto:\n  socket_dir: %s\n  trace_dir: %s\n%s", D.dir,
	         tdir, more);
	return td_restart(&D, yaml, NULL);
}

static int setup_dir(void **state)
{
	(void)state;
	return setup_dir_with("");
}

static int setup_dir_expiring(void **state)
{
	(void)state;
	return setup_dir_with("  expiry: 1s\n");
}

static int setup_abstract(void **state)
{
	char yaml[300];

	(void)state;
	snprintf(abstract_name, sizeof(abstract_name), "gprofd-test-%d", (int)getpid());
	snprintf(yaml, sizeof(yaml), "kineto:\n  socket_name: %s\n", abstract_name);
	return td_start(&D, yaml, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return td_finish(&D);
}

static size_t count_kineto(const char *job)
{
	struct tc c;
	struct msg m, r;
	size_t i, n = 0;

	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_PROCESS_LIST, 0);
	tc_call(&c, &m, &r);
	for (i = 0; i < r.u.process_list_reply.procs.n; i++) {
		const struct msg_proc_info *p = &r.u.process_list_reply.procs.v[i];

		if (p->kind == MSG_KIND_KINETO && (!job || (p->job_id && strcmp(p->job_id, job) == 0)))
			n++;
	}
	msg_deinit(&r);
	tc_close(&c);
	return n;
}

static void test_register_and_expire(void **state)
{
	struct kc k;
	char cfg[4096];
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 1234, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0); /* nothing to do */
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_PROCESS_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.process_list_reply.procs.n, 1);
	assert_int_equal(r.u.process_list_reply.procs.v[0].pid, getpid());
	assert_int_equal(r.u.process_list_reply.procs.v[0].kind, MSG_KIND_KINETO);
	assert_string_equal(r.u.process_list_reply.procs.v[0].job_id, "1234");
	assert_int_equal(r.u.process_list_reply.procs.v[0].ppids.v[0], getppid());
	msg_deinit(&r);
	tc_close(&c);
	/* silence: forgotten after kineto.expiry (1 s here) */
	assert_true(td_wait_log(&D, "silent for 1 s: forgotten", NULL));
	assert_int_equal(count_kineto(NULL), 0);
	kc_close(&k);
}

/* Writes a trace the way Kineto does: ACTIVITIES_LOG_FILE with _<pid>
 * inserted before .pt.trace.json, written to .tmp and renamed. */
static void write_like_kineto(const char *cfg, const char *json, char *where, size_t size)
{
	const char *p = strstr(cfg, "ACTIVITIES_LOG_FILE="), *nl, *suffix;
	char file[512], tmp[600];
	FILE *f;

	assert_non_null(p);
	p += strlen("ACTIVITIES_LOG_FILE=");
	nl = strchr(p, '\n');
	snprintf(file, sizeof(file), "%.*s", (int)(nl - p), p);
	suffix = strstr(file, ".pt.trace.json");
	assert_non_null(suffix);
	snprintf(where, size, "%.*s_%d.pt.trace.json", (int)(suffix - file), file, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", where);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(json, f);
	fclose(f);
	assert_int_equal(rename(tmp, where), 0);
}

/* Asserts that no line of a config has two '=' (Kineto would reject all). */
static void assert_one_eq_per_line(const char *cfg)
{
	const char *line = cfg, *nl;

	for (; line && *line; line = nl ? nl + 1 : NULL) {
		const char *eq = strchr(line, '=');

		nl = strchr(line, '\n');
		assert_non_null(eq);
		assert_true(strchr(eq + 1, '=') == NULL || (nl && strchr(eq + 1, '=') > nl));
	}
}

/* A trace shaped like Kineto's with `steps` optimizer steps of this
 * process, 100 us apart, plus a GPU row's copy of one (which does not
 * count), written where cfg says. */
static void write_steps(const char *cfg, int steps, char *where, size_t size)
{
	char doc[4096];
	int n, i;

	n = snprintf(doc, sizeof(doc), "{\"schemaVersion\": 1, \"traceEvents\": [\n"
	             "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": %d, "
	             "\"tid\": 5, \"ts\": 100.000, \"dur\": 10.000},\n"
	             "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": "
	             "\"Optimizer.step#SGD.step\", \"pid\": 0, \"tid\": 7, \"ts\": 160.000, "
	             "\"dur\": 20.000, \"args\": {}}", (int)getpid());
	for (i = 0; i < steps; i++)
		n += snprintf(doc + n, sizeof(doc) - (size_t)n, ",\n{\"ph\": \"X\", \"cat\": "
		              "\"user_annotation\", \"name\": \"Optimizer.step#SGD.step\", \"pid\": %d, "
		              "\"tid\": 5, \"ts\": %d.000, \"dur\": 20.000, \"args\": {}}",
		              (int)getpid(), 150 + 100 * i);
	snprintf(doc + n, sizeof(doc) - (size_t)n, "\n], \"traceName\": \"x\"}\n");
	write_like_kineto(cfg, doc, where, size);
}

/* The stored file of a finished trace, read whole. */
static cJSON *stored_doc(const char *trace_id, const char *file)
{
	char path[700], text[8192];
	gzFile gz;
	int n;

	snprintf(path, sizeof(path), "%s/traces/%s/%s", D.state, trace_id, file);
	gz = gzopen(path, "rb");
	assert_non_null(gz);
	n = gzread(gz, text, sizeof(text) - 1);
	gzclose(gz);
	assert_true(n > 0);
	text[n] = 0;
	return cJSON_Parse(text);
}

static void test_delivery_and_collection(void **state)
{
	static const char json[] = "{\"schemaVersion\": 1, \"traceEvents\": [], \"trace_id\": \"x\"}\n";
	char cfg[4096], again[4096], id[64], stored[700], where[600], back[256];
	struct kc k;
	struct tc c;
	struct msg m, r;
	gzFile gz;
	int n;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 77, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("77", 0);
	m.u.trace_start.win.duration_ms = 250;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 1);
	assert_int_equal(r.u.trace_start_reply.procs.v[0].kind, MSG_KIND_KINETO);
	/* waiting for the client's next poll */
	assert_int_equal(r.u.trace_start_reply.procs.v[0].state, MSG_TS_WAITING);
	snprintf(id, sizeof(id), "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	/* busy (type 0), and events free but activities busy (type 1): the
	 * config stays pending */
	assert_int_equal(kc_poll(&k, 0, 77, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	assert_int_equal(kc_poll(&k, 1, 77, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	n = kc_poll(&k, 2, 77, cfg, sizeof(cfg), TD_TIMEOUT_MS);
	assert_true(n > 0);
	assert_non_null(strstr(cfg, "ACTIVITIES_LOG_FILE="));
	assert_non_null(strstr(cfg, "\nPROFILE_START_TIME=0\n"));
	assert_non_null(strstr(cfg, "\nACTIVITIES_DURATION_MSECS=250\n"));
	{
		char want[100];

		snprintf(want, sizeof(want), "REQUEST_TRACE_ID=%s", id);
		assert_non_null(strstr(cfg, want));
	}
	assert_one_eq_per_line(cfg);
	assert_int_equal(tc_recv_type(&c, MSG_TRACE_PROGRESS, &r), 0);
	assert_int_equal(r.u.trace_info.procs.v[0].state, MSG_TS_CAPTURING);
	msg_deinit(&r);
	assert_int_equal(kc_poll(&k, 3, 77, back, sizeof(back), TD_TIMEOUT_MS), 0); /* one-shot */
	/* Kineto writes its file; the daemon collects it */
	write_like_kineto(cfg, json, where, sizeof(where));
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	assert_int_equal(r.u.trace_info.procs.v[0].state, MSG_TS_DONE);
	assert_null(r.u.trace_info.procs.v[0].reason);
	snprintf(stored, sizeof(stored), "%s/traces/%s/%s", D.state, id, r.u.trace_info.procs.v[0].file);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].file, ".pt.trace.json.gz"));
	msg_deinit(&r);
	gz = gzopen(stored, "rb");
	assert_non_null(gz);
	n = gzread(gz, back, sizeof(back) - 1);
	gzclose(gz);
	assert_int_equal(n, (int)strlen(json));
	back[n] = 0;
	assert_string_equal(back, json);
	/* the client's file and directory are gone */
	{
		struct stat st;

		assert_int_not_equal(stat(where, &st), 0);
	}

	/* An iteration request: no duration, so a Kineto that has counted no
	 * step yet drops it; offered again at every free poll until taken. */
	m = tc_trace_req("77", 2);
	m.u.trace_start.win.iteration_roundup = 5;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	n = kc_poll(&k, 3, 77, cfg, sizeof(cfg), TD_TIMEOUT_MS);
	assert_true(n > 0);
	assert_non_null(strstr(cfg, "\nPROFILE_START_ITERATION=0\n"));
	assert_non_null(strstr(cfg, "\nPROFILE_START_ITERATION_ROUNDUP=5\n"));
	assert_non_null(strstr(cfg, "\nACTIVITIES_ITERATIONS=2\n"));
	assert_non_null(strstr(cfg, "\nACTIVITIES_DURATION_MSECS=0"));
	assert_one_eq_per_line(cfg);
	assert_int_equal(kc_poll(&k, 3, 77, again, sizeof(again), TD_TIMEOUT_MS), n);
	assert_string_equal(again, cfg);
	/* busy: Kineto took it; never offered again */
	assert_int_equal(kc_poll(&k, 1, 77, back, sizeof(back), TD_TIMEOUT_MS), 0);
	assert_int_equal(kc_poll(&k, 3, 77, back, sizeof(back), TD_TIMEOUT_MS), 0);
	write_steps(cfg, 2, where, sizeof(where));
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.procs.v[0].state, MSG_TS_DONE);
	assert_null(r.u.trace_info.procs.v[0].reason);
	/* the stored file gained ProfilerStep#0 [100, 170] and #1 [170, 270]
	 * on the training thread, and is still one valid JSON document */
	{
		cJSON *doc = stored_doc(r.u.trace_info.trace_id, r.u.trace_info.procs.v[0].file), *e;
		int steps = 0;

		assert_non_null(doc);
		cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents")) {
			const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));

			if (nm && strncmp(nm, "ProfilerStep#", 13) == 0) {
				double ts = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "ts"));
				double dur = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "dur"));

				assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "tid")), 5);
				assert_true(steps == 0 ? ts == 100.0 && dur == 70.0 : ts == 170.0 && dur == 100.0);
				steps++;
			}
		}
		assert_int_equal(steps, 2);
		cJSON_Delete(doc);
	}
	msg_deinit(&r);

	/* Taken and done between two polls (the client never looked busy):
	 * the file is there, so the config is not offered again. The file has
	 * 1 step where 3 were asked: said in the status. */
	m = tc_trace_req("77", 3);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_true(kc_poll(&k, 3, 77, cfg, sizeof(cfg), TD_TIMEOUT_MS) > 0);
	write_steps(cfg, 1, where, sizeof(where));
	assert_int_equal(kc_poll(&k, 3, 77, back, sizeof(back), TD_TIMEOUT_MS), 0);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.procs.v[0].state, MSG_TS_DONE);
	assert_non_null(r.u.trace_info.procs.v[0].reason);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason,
	                       "the trace holds 1 optimizer steps, 3 were asked for"));
	msg_deinit(&r);
	tc_close(&c);
	kc_close(&k);
}

static int setup_dir_short_wait(void **state)
{
	(void)state;
	return setup_dir_with("  step_wait: 1s\n");
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A process that polls but never steps: the iteration config is offered
 * until kineto.step_wait (1 s here), then the duration fallback once; the
 * capture by time it makes is collected and the status says why. */
static void test_iteration_fallback(void **state)
{
	char cfg[4096], first[4096], where[600];
	struct timespec pause = { 0, 20 * 1000000 }; /* Kineto's poll interval, shortened */
	int64_t t0;
	struct kc k;
	struct tc c;
	struct msg m, r;
	int offers = 0;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 66, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("66", 4);
	m.u.trace_start.follow = true;
	t0 = mono_ms();
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_true(kc_poll(&k, 3, 66, first, sizeof(first), TD_TIMEOUT_MS) > 0);
	assert_non_null(strstr(first, "\nACTIVITIES_DURATION_MSECS=0"));
	for (;;) {
		assert_true(kc_poll(&k, 3, 66, cfg, sizeof(cfg), TD_TIMEOUT_MS) > 0);
		if (strcmp(cfg, first) != 0)
			break;
		offers++; /* (a daemon that never falls back: meson's timeout) */
		nanosleep(&pause, NULL);
	}
	/* the same config with a duration, not before step_wait: an ordering,
	 * which load cannot break (t0 is taken before the request is sent, so
	 * the daemon's clock starts after it, and a slow machine only adds) */
	assert_true(offers > 0);
	assert_true(mono_ms() - t0 >= 1000);
	assert_non_null(strstr(cfg, "\nACTIVITIES_ITERATIONS=4\n"));
	assert_non_null(strstr(cfg, "\nACTIVITIES_DURATION_MSECS=500"));
	assert_one_eq_per_line(cfg);
	assert_int_equal(kc_poll(&k, 3, 66, first, sizeof(first), TD_TIMEOUT_MS), 0); /* one-shot */
	write_steps(cfg, 0, where, sizeof(where));
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.procs.v[0].state, MSG_TS_DONE);
	assert_non_null(r.u.trace_info.procs.v[0].reason);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason,
	                       "reported no optimizer step to Kineto in 1 s (kineto.step_wait"));
	msg_deinit(&r);
	tc_close(&c);
	kc_close(&k);
}

static void test_symlink_not_followed(void **state)
{
	char cfg[4096], where[600], tmp[700];
	struct kc k;
	struct tc c;
	struct msg m, r;
	const char *p;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 88, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("88", 0);
	m.u.trace_start.win.duration_ms = 100;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_true(kc_poll(&k, 3, 88, cfg, sizeof(cfg), TD_TIMEOUT_MS) > 0);
	/* instead of a trace, a link to a file the user wants to read */
	p = strstr(cfg, "ACTIVITIES_LOG_FILE=") + strlen("ACTIVITIES_LOG_FILE=");
	snprintf(where, sizeof(where), "%.*s_%d.pt.trace.json",
	         (int)(strstr(p, ".pt.trace.json") - p), p, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", where);
	assert_int_equal(symlink("/etc/passwd", tmp), 0);
	assert_int_equal(rename(tmp, where), 0);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_FAILED);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason, "cannot read the trace"));
	msg_deinit(&r);
	unlink(where);
	tc_close(&c);
	kc_close(&k);
}

static void test_malformed_dropped(void **state)
{
	uint8_t buf[128];
	struct kc k;
	char cfg[256];
	struct tc c;
	struct msg m, r;
	size_t i;
	uint64_t size;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	memset(buf, 0, sizeof(buf));
	sendto(k.fd, buf, 20, 0, (struct sockaddr *)&k.daemon, k.dlen);     /* short */
	size = 99;
	memcpy(buf, &size, 8);
	memcpy(buf + 8, "req", 3);
	sendto(k.fd, buf, 60, 0, (struct sockaddr *)&k.daemon, k.dlen);     /* size lies */
	size = 16;
	memcpy(buf, &size, 8);
	memcpy(buf + 8, "hello", 5);
	sendto(k.fd, buf, 56, 0, (struct sockaddr *)&k.daemon, k.dlen);     /* unknown type */
	/* a good poll is still answered */
	assert_int_equal(kc_poll(&k, 3, 5, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&c, &m, &r);
	for (i = 0; i < r.u.daemon_status_reply.counters.n; i++)
		if (strcmp(r.u.daemon_status_reply.counters.names[i], "kineto_malformed") == 0)
			assert_true(r.u.daemon_status_reply.counters.values[i] == 3);
	msg_deinit(&r);
	tc_close(&c);
	kc_close(&k);
}

/* 64 clients poll at the same instant: every one is answered (Kineto waits
 * about 90 ms; the latency figure is bench material, the test checks that
 * none is dropped). */
static void test_64_clients_at_once(void **state)
{
	int go[2], i, status, answered = 0;
	pid_t pids[64];
	char byte;

	(void)state;
	assert_int_equal(pipe(go), 0);
	for (i = 0; i < 64; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct kc k;
			char cfg[256];

			close(go[1]);
			if (kc_open(&k, D.dir, "dynolog") != 0)
				_exit(2);
			if (read(go[0], &byte, 1) != 0) /* wait for the pipe to close: all at once */
				_exit(3);
			_exit(kc_poll(&k, 3, 640, cfg, sizeof(cfg), TD_TIMEOUT_MS) == 0 ? 0 : 1);
		}
	}
	close(go[0]);
	close(go[1]); /* go */
	for (i = 0; i < 64; i++) {
		waitpid(pids[i], &status, 0);
		answered += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	assert_int_equal(answered, 64);
}

static void test_abstract_namespace(void **state)
{
	struct kc k;
	char cfg[256];

	(void)state;
	assert_int_equal(kc_open(&k, NULL, abstract_name), 0);
	assert_int_equal(kc_poll(&k, 3, 9, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	assert_int_equal(count_kineto("9"), 1);
	kc_close(&k);
}

/* ---- a client-controlled file type: FIFOs (issue 23, 2) ---- */

#define FIFO_CLIENTS 5  /* one more than libuv's four pool threads */

/* A daemon on an abstract socket (other users' clients need no file
 * access) with its trace directory under the test's directory. */
static int setup_abstract_private(void **state)
{
	char yaml[700];

	(void)state;
	if (td_start(&D, "kineto:\n  enabled: false\n", NULL) < 0)
		return -1;
	td_stop(&D);
	snprintf(abstract_name, sizeof(abstract_name), "gprofd-test-%d", (int)getpid());
	snprintf(yaml, sizeof(yaml), "kineto:\n  socket_name: %s\n  trace_dir: %s/ktrace\n",
	         abstract_name, D.dir);
	return td_restart(&D, yaml, NULL);
}

/* Waits (10 s at most: a safety net) for the daemon to exit; true if it
 * did. */
static bool exits_within(pid_t pid, int ms)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	bool gone;

	if (fd < 0)
		return false;
	gone = poll(&p, 1, ms) == 1;
	close(fd);
	return gone;
}

static int teardown_stopped(void **state)
{
	(void)state;
	if (D.pid > 0) {
		kill(D.pid, SIGKILL);
		td_reap(&D, false);
	}
	td_cleanup(&D);
	return 0;
}

/* A Kineto client of user nobody that, given its config, puts a FIFO
 * where its trace should be, and keeps it (never opens it) until hold's
 * end closes. ctl carries one "go" byte per client: a client done with
 * its own must not read the others' (it waits on hold instead). */
static void fifo_client(int ready, int ctl, int hold)
{
	struct passwd *pw = getpwnam("nobody");
	char cfg[4096], where[600];
	const char *p;
	struct kc k;
	char b;
	int i, n = 0;

	if (pw == NULL || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
		_exit(2);
	if (kc_open(&k, NULL, abstract_name) != 0 || kc_poll(&k, 3, 555, cfg, sizeof(cfg), TD_TIMEOUT_MS))
		_exit(3);
	if (write(ready, "r", 1) != 1 || read(ctl, &b, 1) != 1) /* the trace started */
		_exit(4);
	for (i = 0; i < 100 && n <= 0; i++)
		n = kc_poll(&k, 3, 555, cfg, sizeof(cfg), TD_TIMEOUT_MS);
	if (n <= 0 || (p = strstr(cfg, "ACTIVITIES_LOG_FILE=")) == NULL)
		_exit(5);
	p += strlen("ACTIVITIES_LOG_FILE=");
	snprintf(where, sizeof(where), "%.*s_%d.pt.trace.json",
	         (int)(strstr(p, ".pt.trace.json") - p), p, (int)getpid());
	if (mkfifo(where, 0600) != 0 || write(ready, "f", 1) != 1)
		_exit(6);
	while (read(hold, &b, 1) > 0)
		;
	kc_close(&k);
	_exit(0);
}

/* A second ordinary user for the victim's side: made when absent, as an
 * ordinary system user would be. NULL when it cannot be. */
static struct passwd *victim_user(void)
{
	struct passwd *pw = getpwnam("gprofd-test-b");

	if (pw == NULL && system("useradd --system --no-create-home --shell /usr/sbin/nologin "
	                         "gprofd-test-b >/dev/null 2>&1") == 0)
		pw = getpwnam("gprofd-test-b");
	return pw;
}

/* A Kineto client of user pw that writes a real trace when its config
 * comes (after "go" on ctl); exits 0 once written. */
static void victim_client(const struct passwd *pw, int ready, int ctl)
{
	static const char json[] = "{\"schemaVersion\": 1, \"traceEvents\": []}\n";
	char cfg[4096], where[600], tmp[700];
	const char *p;
	struct kc k;
	FILE *f;
	char b;
	int i, n = 0;

	if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
		_exit(2);
	if (kc_open(&k, NULL, abstract_name) != 0 || kc_poll(&k, 3, 556, cfg, sizeof(cfg), TD_TIMEOUT_MS))
		_exit(3);
	if (write(ready, "r", 1) != 1 || read(ctl, &b, 1) != 1)
		_exit(4);
	for (i = 0; i < 100 && n <= 0; i++)
		n = kc_poll(&k, 3, 556, cfg, sizeof(cfg), TD_TIMEOUT_MS);
	if (n <= 0 || (p = strstr(cfg, "ACTIVITIES_LOG_FILE=")) == NULL)
		_exit(5);
	p += strlen("ACTIVITIES_LOG_FILE=");
	snprintf(where, sizeof(where), "%.*s_%d.pt.trace.json",
	         (int)(strstr(p, ".pt.trace.json") - p), p, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", where);
	if ((f = fopen(tmp, "w")) == NULL || fputs(json, f) < 0 || fclose(f) != 0 ||
	    rename(tmp, where) != 0)
		_exit(6);
	kc_close(&k);
	_exit(0);
}

/* Five Kineto clients of user nobody make their trace files FIFOs; each is
 * refused at once as not a regular file, root's agent trace is delivered
 * right after, and SIGTERM stops the daemon cleanly. Before: the daemon
 * opened each FIFO for reading on libuv's thread pool and blocked there for
 * good; with all four pool threads held every upload timed out and SIGTERM
 * no longer stopped the daemon. */
static void test_fifo_does_not_wedge(void **state)
{
	int ready[2], ctl[2], hold[2], vready[2], vctl[2], i, status;
	pid_t kids[FIFO_CLIENTS], victim;
	struct passwd *vpw;
	struct agent a;
	struct tc c;
	struct msg m, r;
	char b;

	(void)state;
	if (getpwnam("nobody") == NULL)
		fail_msg("no user nobody: this root-only case needs it");
	vpw = victim_user();
	assert_non_null(vpw);
	/* the victim, user gprofd-test-b, registered first */
	assert_int_equal(pipe(vready), 0);
	assert_int_equal(pipe(vctl), 0);
	victim = fork();
	assert_true(victim >= 0);
	if (victim == 0) {
		close(vready[0]);
		close(vctl[1]);
		victim_client(vpw, vready[1], vctl[0]);
	}
	close(vready[1]);
	close(vctl[0]);
	assert_int_equal(read(vready[0], &b, 1), 1);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(ctl), 0);
	assert_int_equal(pipe(hold), 0);
	for (i = 0; i < FIFO_CLIENTS; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			close(ready[0]);
			close(ctl[1]);
			close(hold[1]);
			fifo_client(ready[1], ctl[0], hold[0]);
		}
	}
	close(ready[1]);
	close(ctl[0]);
	close(hold[0]);
	for (i = 0; i < FIFO_CLIENTS; i++)
		assert_int_equal(read(ready[0], &b, 1), 1);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("555", 0);
	m.u.trace_start.win.duration_ms = 100;
	m.u.trace_start.timeout_ms = 8000;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, FIFO_CLIENTS);
	msg_deinit(&r);
	assert_int_equal(write(ctl[1], "ggggg", FIFO_CLIENTS), FIFO_CLIENTS);
	for (i = 0; i < FIFO_CLIENTS; i++) {
		assert_int_equal(read(ready[0], &b, 1), 1);
		assert_int_equal(b, 'f');
	}
	tc_follow_end(&c, &r);
	for (i = 0; i < FIFO_CLIENTS; i++) {
		fprintf(stderr, "pid %d: %s\n", (int)r.u.trace_info.procs.v[i].pid,
		        r.u.trace_info.procs.v[i].reason);
		assert_int_equal(r.u.trace_info.procs.v[i].state, MSG_TS_FAILED);
		assert_non_null(strstr(r.u.trace_info.procs.v[i].reason, "not a regular file"));
	}
	msg_deinit(&r);
	/* another user's Kineto trace, and root's agent upload, go through the
	 * same thread pool */
	m = tc_trace_req("556", 0);
	m.u.trace_start.win.duration_ms = 100;
	m.u.trace_start.timeout_ms = 8000;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_start_reply.procs.n, 1);
	assert_int_equal(r.u.trace_start_reply.procs.v[0].pid, victim);
	msg_deinit(&r);
	assert_int_equal(write(vctl[1], "g", 1), 1);
	tc_follow_end(&c, &r);
	if (r.u.trace_info.procs.v[0].reason)
		fprintf(stderr, "user gprofd-test-b: %s\n", r.u.trace_info.procs.v[0].reason);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	assert_int_equal(waitpid(victim, &status, 0), victim);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(vctl[1]);
	close(vready[0]);
	assert_int_equal(agent_spawn(&a, D.sock, "victim", 0, 256 << 10), 0);
	m = tc_trace_req("victim", 1);
	m.u.trace_start.timeout_ms = 8000;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	if (r.u.trace_info.procs.v[0].reason)
		fprintf(stderr, "victim: %s\n", r.u.trace_info.procs.v[0].reason);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	tc_close(&c);
	agent_stop(&a);
	/* and SIGTERM still stops it, with every handle closed */
	td_signal(&D, SIGTERM);
	assert_true(exits_within(D.pid, 10000));
	assert_int_equal(td_reap(&D, false), 0);
	close(ctl[1]);
	close(hold[1]);
	for (i = 0; i < FIFO_CLIENTS; i++)
		waitpid(kids[i], NULL, 0);
	close(ready[0]);
}

/* ---- a squatted kineto.trace_dir (issue 23, 15) ---- */

/* kineto.trace_dir already made by another user (as anyone can make
 * /tmp/gprofd-kineto first): the daemon says so, uses a private directory
 * beside it, and Kineto traces are delivered. Before: every Kineto trace
 * failed ("is not a directory owned by gprofd"). */
static void test_squatted_trace_dir(void **state)
{
	static const char json[] = "{\"schemaVersion\": 1, \"traceEvents\": []}\n";
	char cfg[4096], where[600], yaml[700], squat[400];
	struct passwd *pw = getpwnam("nobody");
	struct stat st;
	struct kc k;
	struct tc c;
	struct msg m, r;

	(void)state;
	if (pw == NULL)
		fail_msg("no user nobody: this root-only case needs it");
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\n", NULL), 0);
	td_stop(&D);
	snprintf(squat, sizeof(squat), "%s/squat", D.dir);
	assert_int_equal(mkdir(squat, 0777), 0);
	assert_int_equal(chown(squat, pw->pw_uid, pw->pw_gid), 0);
	snprintf(yaml, sizeof(yaml), "kineto:\n  socket_dir: %s\n  trace_dir: %s\n", D.dir, squat);
	assert_int_equal(td_restart(&D, yaml, NULL), 0);
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 99, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("99", 0);
	m.u.trace_start.win.duration_ms = 100;
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_true(kc_poll(&k, 3, 99, cfg, sizeof(cfg), TD_TIMEOUT_MS) > 0);
	/* not under the squatter's directory */
	assert_null(strstr(cfg, "/squat/"));
	assert_non_null(strstr(cfg, "/squat."));
	write_like_kineto(cfg, json, where, sizeof(where));
	tc_follow_end(&c, &r);
	if (r.u.trace_info.procs.v[0].reason)
		fprintf(stderr, "reason: %s\n", r.u.trace_info.procs.v[0].reason);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	assert_true(td_log_count(&D, "is not gprofd's") > 0);
	/* the squatter's directory was left as it was, unused */
	assert_int_equal(lstat(squat, &st), 0);
	assert_int_equal(st.st_uid, pw->pw_uid);
	tc_close(&c);
	kc_close(&k);
}

/* The private directory beside a squatted kineto.trace_dir goes with the
 * daemon, even when it stops while a Kineto client holds a trace in it
 * (issue 43, case 7). Before: the client's directory stayed, and the
 * private directory with it, one more at every start. */
static void test_fallback_dir_removed_at_stop(void **state)
{
	char cfg[4096], yaml[700], squat[400], base[600];
	struct passwd *pw = getpwnam("nobody");
	const char *p;
	struct stat st;
	struct kc k;
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_non_null(pw); /* a root case (kineto-root): the user nobody */
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\n", NULL), 0);
	td_stop(&D);
	snprintf(squat, sizeof(squat), "%s/squat", D.dir);
	assert_int_equal(mkdir(squat, 0777), 0);
	assert_int_equal(chown(squat, pw->pw_uid, pw->pw_gid), 0);
	snprintf(yaml, sizeof(yaml), "kineto:\n  socket_dir: %s\n  trace_dir: %s\n", D.dir, squat);
	assert_int_equal(td_restart(&D, yaml, NULL), 0);
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 98, cfg, sizeof(cfg), 2000), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("98", 0);
	m.u.trace_start.win.duration_ms = 60000;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_true(kc_poll(&k, 3, 98, cfg, sizeof(cfg), 2000) > 0);
	/* ACTIVITIES_LOG_FILE=<squat>.XXXXXX/<trace>-<pid>/kineto... */
	p = strstr(cfg, "/squat.");
	assert_non_null(p);
	snprintf(base, sizeof(base), "%s%.*s", D.dir, (int)(strchr(p + 1, '/') - p), p);
	assert_int_equal(lstat(base, &st), 0);
	tc_close(&c);
	assert_int_equal(td_stop(&D), 0); /* the trace still runs */
	assert_int_equal(lstat(base, &st), -1);
	assert_int_equal(errno, ENOENT);
	kc_close(&k);
}

/* ---- a client-controlled count: entries in its directory (issue 23) ---- */

#define STUFFED 20000
#define STUFF_POLLS 1000

/* A client takes an iteration config, puts 20,000 entries in its trace
 * directory and then polls as if it had dropped the config: each poll is
 * answered without reading the directory. Before: each poll read the whole
 * directory on the loop thread (looking for Kineto's file), so one user's
 * polls held every other client and request: 1,000 polls took seconds
 * instead of milliseconds (bench/bench-kineto times polls). What is
 * asserted is what the kernel counts, whatever the load: a listing of the
 * directory moves its access time (relatime: its entries changed since it
 * was last read), and the polls must not move it. */
static void test_stuffed_dir_costs_nothing(void **state)
{
	char cfg[4096], dir[600], path[700];
	const char *p;
	struct stat before, after;
	DIR *dh;
	struct kc k;
	struct tc c;
	struct msg m, r;
	int i, fd;

	(void)state;
	assert_int_equal(kc_open(&k, D.dir, "dynolog"), 0);
	assert_int_equal(kc_poll(&k, 3, 44, cfg, sizeof(cfg), TD_TIMEOUT_MS), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("44", 3);
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_true(kc_poll(&k, 3, 44, cfg, sizeof(cfg), TD_TIMEOUT_MS) > 0);
	p = strstr(cfg, "ACTIVITIES_LOG_FILE=") + strlen("ACTIVITIES_LOG_FILE=");
	snprintf(dir, sizeof(dir), "%.*s", (int)(strstr(p, "/kineto.pt.trace.json") - p), p);
	for (i = 0; i < STUFFED; i++) {
		snprintf(path, sizeof(path), "%s/junk%d", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	assert_int_equal(stat(dir, &before), 0);
	/* a listing would show: the entries are newer than the last read */
	assert_true(before.st_atim.tv_sec < before.st_mtim.tv_sec ||
	            (before.st_atim.tv_sec == before.st_mtim.tv_sec &&
	             before.st_atim.tv_nsec <= before.st_mtim.tv_nsec));
	for (i = 0; i < STUFF_POLLS; i++)
		assert_true(kc_poll(&k, 3, 44, cfg, sizeof(cfg), TD_TIMEOUT_MS) > 0); /* offered again */
	assert_int_equal(stat(dir, &after), 0);
	if (after.st_atim.tv_sec != before.st_atim.tv_sec ||
	    after.st_atim.tv_nsec != before.st_atim.tv_nsec)
		fail_msg("%d polls read the client's directory of %d entries", STUFF_POLLS, STUFFED);
	/* and the probe sees a listing on this filesystem (not noatime) */
	dh = opendir(dir);
	assert_non_null(dh);
	assert_non_null(readdir(dh));
	closedir(dh);
	assert_int_equal(stat(dir, &after), 0);
	if (after.st_atim.tv_sec == before.st_atim.tv_sec &&
	    after.st_atim.tv_nsec == before.st_atim.tv_nsec)
		fail_msg("%s: this filesystem does not record a directory's reads (noatime?): "
		         "run it where /tmp does", dir);
	tc_close(&c);
	kc_close(&k);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_register_and_expire, setup_dir_expiring, teardown),
		cmocka_unit_test_setup_teardown(test_delivery_and_collection, setup_dir, teardown),
		cmocka_unit_test_setup_teardown(test_iteration_fallback, setup_dir_short_wait, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_not_followed, setup_dir, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_dropped, setup_dir, teardown),
		cmocka_unit_test_setup_teardown(test_64_clients_at_once, setup_dir, teardown),
		cmocka_unit_test_setup_teardown(test_abstract_namespace, setup_abstract, teardown),
		cmocka_unit_test_setup_teardown(test_stuffed_dir_costs_nothing, setup_dir, teardown),
	};
	/* other users (nobody, a second one) need root (meson's kineto-root) */
	const struct CMUnitTest root_tests[] = {
		cmocka_unit_test_setup_teardown(test_fifo_does_not_wedge, setup_abstract_private,
		                                teardown_stopped),
		cmocka_unit_test_teardown(test_squatted_trace_dir, teardown),
		cmocka_unit_test_teardown(test_fallback_dir_removed_at_stop, teardown_stopped),
	};
	signal(SIGPIPE, SIG_IGN);
	return td_main(argc, argv, tests, TD_NELEM(tests), root_tests, TD_NELEM(root_tests));
}
