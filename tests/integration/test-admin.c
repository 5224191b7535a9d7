/*
 * Integration tests of operating the daemon: SIGHUP reload (good and bad
 * files, files cut short, and a storm of them while traces run), retention by size, the configured limits (connections, pending
 * traces, frame size, trace size, write queue), and a store that survives
 * a restart while crash leftovers do not.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "harness.h"

static struct td D;

static int teardown(void **state)
{
	(void)state;
	return td_finish(&D);
}

static void write_config(const char *yaml)
{
	char path[400];
	FILE *f;

	snprintf(path, sizeof(path), "%s/gprofd.yaml", D.dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(yaml, f);
	fclose(f);
}

static int64_t registered_heartbeat(void)
{
	struct tc c;
	struct msg m, r;
	int64_t hb;

	assert_int_equal(tc_connect_unix(&c, D.sock), 0);
	assert_int_equal(tc_hello(&c, MSG_ROLE_AGENT), 0);
	msg_init(&m, MSG_REGISTER, 0);
	m.u.reg.pid = getpid();
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_REGISTER_REPLY);
	hb = r.u.register_reply.heartbeat_ms;
	msg_deinit(&r);
	tc_close(&c);
	return hb;
}

static void test_reload(void **state)
{
	size_t at = 0;

	(void)state;
	assert_int_equal(td_start(&D, "heartbeat_interval: 1s\n", NULL), 0);
	assert_int_equal(registered_heartbeat(), 1000);
	/* a good file takes effect */
	write_config("heartbeat_interval: 2500ms\n");
	td_signal(&D, SIGHUP);
	assert_true(td_wait_log(&D, "configuration reloaded", &at));
	assert_int_equal(registered_heartbeat(), 2500);
	/* a bad file is refused with file:line, and the old config stays */
	write_config("heartbeat_interval: 3s\nlimits:\n  connections: lots\n");
	td_signal(&D, SIGHUP);
	assert_true(td_wait_log(&D, "reload failed, keeping the old configuration", &at));
	assert_true(td_wait_log(&D, "gprofd.yaml:3: limits.connections: \"lots\" is not a number", NULL));
	assert_int_equal(registered_heartbeat(), 2500);
}

static char *run_trace(struct tc *c, const char *job, char *id, size_t idlen)
{
	struct msg m, r;

	m = tc_trace_req(job, 1);
	m.u.trace_start.follow = true;
	tc_call(c, &m, &r);
	snprintf(id, idlen, "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	tc_follow_end(c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	return id;
}

/*
 * A reload storm while traces run: a child rewrites the file (good and bad
 * versions, mostly renamed into place, every 4th written in place so the
 * daemon also reads half-written ones) and sends SIGHUP with no pause,
 * while the parent runs traces back to back until 500 were sent. Every
 * trace completes whole; the daemon answers; the last good file, written
 * whole after the storm, is what stays in effect.
 */
static void test_reload_storm(void **state)
{
	static const char *const good[] = { "heartbeat_interval: 1100ms\nlimits:\n  connections: 900\n",
	                                    "heartbeat_interval: 1200ms\nlog_level: info\n" };
	static const char *const bad[] = { "heartbeat_interval: soon\n", "limits: [\n",
	                                   "limits:\n  connections: -1\n" };
	char path[400], tmp[410], id[64];
	int stop[2], i, st;
	volatile unsigned long *sent;
	size_t at, handled;
	int64_t hb;
	struct agent a;
	struct tc c;
	pid_t child;

	(void)state;
	assert_int_equal(td_start(&D, "heartbeat_interval: 1s\n", NULL), 0);
	assert_int_equal(agent_spawn(&a, D.sock, "storm", 0, 300000), 0);
	tc_ctl(&c, D.sock);
	snprintf(path, sizeof(path), "%s/gprofd.yaml", D.dir);
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	assert_int_equal(pipe(stop), 0);
	/* the child's count, shared: the parent traces until 500 were sent */
	sent = mmap(NULL, sizeof(*sent), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sent != MAP_FAILED);
	*sent = 0;
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char b;

		close(stop[1]);
		fcntl(stop[0], F_SETFL, O_NONBLOCK);
		for (;;) {
			unsigned long n = *sent;
			const char *y = n % 3 == 2 ? bad[n % 5 % 3] : good[n % 2];
			/* mostly whole files (renamed into place, as editors and
			 * config management do), every 4th in place (torn reads) */
			bool whole = n % 4 != 3;
			FILE *f = fopen(whole ? tmp : path, "w");

			if (f) {
				fputs(y, f);
				fclose(f);
				if (whole)
					rename(tmp, path);
			}
			td_signal(&D, SIGHUP);
			__atomic_store_n(sent, n + 1, __ATOMIC_RELEASE);
			if (read(stop[0], &b, 1) == 0) /* the parent closed it: done */
				break;
		}
		_exit(0);
	}
	close(stop[0]);
	/* traces back to back (each DONE, or the test fails) until the child
	 * has sent 500 SIGHUPs, 8 traces at least */
	for (i = 0; i < 8 || __atomic_load_n(sent, __ATOMIC_ACQUIRE) < 500; i++)
		run_trace(&c, "storm", id, sizeof(id));
	close(stop[1]);
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the last good file, written whole, is what stays in effect (a
	 * reload of the storm may still log after the mark: wait for ours) */
	write_config("heartbeat_interval: 2700ms\n");
	at = td_log_len(&D);
	td_signal(&D, SIGHUP);
	while ((hb = registered_heartbeat()) != 2700 &&
	       td_wait_log(&D, "configuration reloaded", &at))
		;
	assert_int_equal(hb, 2700);
	/* the daemon reloaded, refused the bad and torn files, and lives;
	 * signals that came together count once */
	handled = td_log_count(&D, "configuration reloaded") +
	          td_log_count(&D, "reload failed, keeping the old configuration");
	print_message("reload storm: %lu SIGHUPs sent during %d traces, %zu reloads (%zu applied, "
	              "%zu refused)\n", *sent, i, handled, td_log_count(&D, "configuration reloaded"),
	              td_log_count(&D, "reload failed, keeping the old configuration"));
	assert_true(handled >= 2 && handled <= *sent + 1);
	munmap((void *)sent, sizeof(*sent));
	agent_stop(&a);
	tc_close(&c);
}

static void test_retention_by_size(void **state)
{
	char first[64], second[64], path[600];
	struct agent a;
	struct stat st;
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(td_start(&D, "retention:\n  max_bytes: 1M\n", NULL), 0);
	assert_int_equal(agent_spawn(&a, D.sock, "ret", 0, 700000), 0);
	tc_ctl(&c, D.sock);
	run_trace(&c, "ret", first, sizeof(first));
	run_trace(&c, "ret", second, sizeof(second));
	assert_true(td_wait_log(&D, "retention: deleting trace", NULL));
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_list_reply.traces.n, 1);
	assert_string_equal(r.u.trace_list_reply.traces.v[0].trace_id, second);
	msg_deinit(&r);
	snprintf(path, sizeof(path), "%s/traces/%s", D.state, first);
	assert_int_not_equal(stat(path, &st), 0);
	agent_stop(&a);
	tc_close(&c);
}

static void test_limits(void **state)
{
	struct tc c[3], extra, ag;
	struct msg m, r;
	char *big;
	int i;

	(void)state;
	assert_int_equal(td_start(&D, "limits:\n  connections: 3\n  pending_traces: 1\n"
	                          "  frame_bytes: 4K\n", NULL), 0);
	/* connections: the fourth is told why and closed */
	for (i = 0; i < 3; i++)
		tc_ctl(&c[i], D.sock);
	assert_int_equal(tc_connect_unix(&extra, D.sock), 0);
	assert_int_equal(tc_recv(&extra, &r), 0);
	assert_int_equal(r.type, MSG_ERROR);
	assert_int_equal(r.u.error.code, MSG_E_LIMIT);
	assert_non_null(strstr(r.u.error.message, "limits.connections"));
	msg_deinit(&r);
	assert_true(tc_closed(&extra));
	tc_close(&extra);
	tc_close(&c[2]);
	/* pending traces: an agent that never answers holds the only slot */
	assert_true(td_wait_log(&D, "closed: peer closed", NULL));
	tc_agent(&ag, D.sock, "lim");
	m = tc_trace_req("lim", 1);
	tc_call(&c[0], &m, &r);
	assert_int_equal(r.type, MSG_TRACE_START_REPLY);
	msg_deinit(&r);
	m = tc_trace_req("lim", 1);
	tc_expect_error(&c[0], &m, MSG_E_LIMIT, "limits.pending_traces");
	/* frame size: a 5 KiB message is refused and costs its connection */
	big = malloc(5000);
	memset(big, ' ', 5000);
	memcpy(big, "\x84\x13\0\0{\"type\":\"daemon_status\",\"id\":1}", 35);
	big[4999] = ' ';
	assert_int_equal(tc_send_raw(&c[1], big, 5000), 0);
	free(big);
	assert_int_equal(tc_recv(&c[1], &r), 0);
	assert_int_equal(r.u.error.code, MSG_E_LIMIT);
	msg_deinit(&r);
	assert_true(tc_closed(&c[1]));
	tc_close(&c[1]);
	/* the daemon carries on */
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&c[0], &m, &r);
	assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
	assert_int_equal(r.u.daemon_status_reply.pending_traces, 1);
	msg_deinit(&r);
	tc_close(&ag);
	tc_close(&c[0]);
}

static void test_trace_size_limit(void **state)
{
	struct agent a;
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(td_start(&D, "limits:\n  trace_bytes: 1M\n", NULL), 0);
	assert_int_equal(agent_spawn(&a, D.sock, "huge", 0, 1500000), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("huge", 1);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_FAILED);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason, "limits.trace_bytes"));
	msg_deinit(&r);
	agent_stop(&a);
	tc_close(&c);
}

static void test_write_queue_limit(void **state)
{
	struct agent a;
	struct tc c, slow;
	struct msg m, r;
	char id[64], file[160];

	(void)state;
	assert_int_equal(td_start(&D, "limits:\n  write_queue_bytes: 64K\n", NULL), 0);
	assert_int_equal(agent_spawn(&a, D.sock, "wq", 0, 8u << 20), 0);
	tc_ctl(&c, D.sock);
	run_trace(&c, "wq", id, sizeof(id));
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	snprintf(file, sizeof(file), "%s", r.u.trace_list_reply.traces.v[0].files.v[0].name);
	msg_deinit(&r);
	/* a client that asks for 8 MiB and never reads is dropped */
	tc_ctl(&slow, D.sock);
	msg_init(&m, MSG_TRACE_DOWNLOAD, 0);
	m.u.trace_download.trace_id = id;
	m.u.trace_download.file = file;
	m.id = 9;
	assert_int_equal(tc_send(&slow, &m), 0);
	assert_true(td_wait_log(&D, "disconnecting (limits.write_queue_bytes)", NULL));
	/* others are unaffected */
	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.type, MSG_DAEMON_STATUS_REPLY);
	msg_deinit(&r);
	tc_close(&slow);
	agent_stop(&a);
	tc_close(&c);
}

/* A daemon_status counter by name (-1 if absent). */
static double counter(struct tc *c, const char *name)
{
	struct msg m, r;
	double v = -1;
	size_t i;

	msg_init(&m, MSG_DAEMON_STATUS, 0);
	tc_call(c, &m, &r);
	for (i = 0; i < r.u.daemon_status_reply.counters.n; i++)
		if (strcmp(r.u.daemon_status_reply.counters.names[i], name) == 0)
			v = r.u.daemon_status_reply.counters.values[i];
	msg_deinit(&r);
	return v;
}

/* Slow and stalled clients (issue 15): one that never says hello, and one
 * that begins a frame and never finishes it, are closed at their
 * deadlines; one that said hello and stays quiet (an idle agent, a
 * follower) is not. */
static void test_slow_clients(void **state)
{
	struct tc silent, trickle, idle;
	struct msg r;
	static const uint8_t half_header[3] = { 0, 0, 0 };

	(void)state;
	assert_int_equal(td_start(&D, "limits:\n  hello_timeout: 1s\n  frame_timeout: 1s\n", NULL), 0);
	tc_ctl(&idle, D.sock);
	assert_int_equal(tc_connect_unix(&silent, D.sock), 0);
	tc_ctl(&trickle, D.sock);
	assert_int_equal(tc_send_raw(&trickle, half_header, sizeof(half_header)), 0);
	/* the silent one is told why, then closed */
	assert_int_equal(tc_recv(&silent, &r), 0);
	assert_int_equal(r.type, MSG_ERROR);
	assert_non_null(strstr(r.u.error.message, "no hello within 1 s (limits.hello_timeout)"));
	msg_deinit(&r);
	assert_true(tc_closed(&silent));
	assert_true(tc_closed(&trickle));
	assert_true(td_wait_log(&D, "is still incomplete (limits.frame_timeout); closing", NULL));
	/* more than a second has passed: the quiet client that said hello is served */
	assert_true(counter(&idle, "conns_timed_out") == 2);
	tc_close(&silent);
	tc_close(&trickle);
	tc_close(&idle);
}

static void test_restart_keeps_store(void **state)
{
	char id[64], leftover[600], path[600];
	struct agent a;
	struct stat st;
	struct tc c;
	struct msg m, r;
	FILE *f;

	(void)state;
	assert_int_equal(td_start(&D, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&a, D.sock, "keep", 0, 4096), 0);
	tc_ctl(&c, D.sock);
	run_trace(&c, "keep", id, sizeof(id));
	tc_close(&c);
	agent_stop(&a);
	assert_int_equal(td_stop(&D), 0);
	/* a crash leftover: a trace directory with no manifest */
	snprintf(leftover, sizeof(leftover), "%s/traces/20260101T000000Z-dead00", D.state);
	assert_int_equal(mkdir(leftover, 0700), 0);
	snprintf(path, sizeof(path), "%s/x.pt.trace.json.gz.tmp", leftover);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(td_restart(&D, NULL, NULL), 0);
	assert_true(td_wait_log(&D, "removing unfinished trace directory", NULL));
	assert_int_not_equal(stat(leftover, &st), 0);
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_list_reply.traces.n, 1);
	assert_string_equal(r.u.trace_list_reply.traces.v[0].trace_id, id);
	assert_int_equal(r.u.trace_list_reply.traces.v[0].files.v[0].bytes, 4096);
	msg_deinit(&r);
	tc_close(&c);
}

/* Rewrites a stored trace's manifest (the daemon stopped) so that it says
 * the trace was made `ago` seconds before it was. */
static void backdate(const char *id, double ago)
{
	char path[600], *text, *p, *end, *out;
	double us;
	long n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/traces/%s/manifest.json", D.state, id);
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	p = strstr(text, "\"created_us\":");
	assert_non_null(p);
	p += strlen("\"created_us\":");
	out = calloc(1, (size_t)n + 64);
	us = strtod(p, &end);
	assert_true(us > 1e15);
	sprintf(out, "%.*s%.0f%s", (int)(p - text), text, us - ago * 1e6, end);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(out, f);
	fclose(f);
	free(out);
	free(text);
}

/* Retention by age: a trace whose manifest says it is a year old is
 * deleted when the daemon starts; a fresh one stays. */
static void test_retention_by_age(void **state)
{
	char old[64], fresh[64];
	struct agent a;
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(td_start(&D, "retention:\n  max_age: 1d\n", NULL), 0);
	assert_int_equal(agent_spawn(&a, D.sock, "age", 0, 1000), 0);
	tc_ctl(&c, D.sock);
	run_trace(&c, "age", old, sizeof(old));
	run_trace(&c, "age", fresh, sizeof(fresh));
	tc_close(&c);
	agent_stop(&a);
	assert_int_equal(td_stop(&D), 0);
	backdate(old, 365.0 * 86400);
	assert_int_equal(td_restart(&D, "retention:\n  max_age: 1d\n", NULL), 0);
	assert_true(td_wait_log(&D, "older than retention.max_age", NULL));
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_list_reply.traces.n, 1);
	assert_string_equal(r.u.trace_list_reply.traces.v[0].trace_id, fresh);
	msg_deinit(&r);
	tc_close(&c);
}

/* How many traces the daemon has stored. */
static size_t stored_traces(void)
{
	struct msg m, r;
	struct tc c;
	size_t n;

	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	n = r.u.trace_list_reply.traces.n;
	msg_deinit(&r);
	tc_close(&c);
	return n;
}

/* Sends SIGHUP and waits for that reload's outcome: true when it applied
 * the file, false when it refused it. */
static bool reload(void)
{
	size_t ok = td_log_count(&D, "configuration reloaded");
	size_t refused = td_log_count(&D, "reload failed, keeping the old configuration");
	size_t at = td_log_len(&D);

	td_signal(&D, SIGHUP);
	while (td_log_count(&D, "configuration reloaded") == ok &&
	       td_log_count(&D, "reload failed, keeping the old configuration") == refused)
		assert_true(td_wait_log(&D, "reload", &at));
	return td_log_count(&D, "configuration reloaded") > ok;
}

/*
 * Issue 23: a reload that finds the file cut short (emptied by a writer
 * between its truncate and its write, or ending mid-line) refuses it and
 * keeps the running configuration. Applying it would have put the default
 * retention (7 days) or 300 seconds in place of 300 days, and deleted a
 * trace 10 days old. A file that says nothing on purpose ({}) is applied,
 * and then the defaults delete that trace.
 */
static void test_reload_refuses_cut_file(void **state)
{
	static const char cfg[] = "retention:\n  max_age: 300d\n";
	struct agent a;
	struct tc c;
	char id[64];

	(void)state;
	assert_int_equal(td_start(&D, cfg, NULL), 0);
	assert_int_equal(agent_spawn(&a, D.sock, "cut", 0, 1000), 0);
	tc_ctl(&c, D.sock);
	run_trace(&c, "cut", id, sizeof(id));
	tc_close(&c);
	agent_stop(&a);
	assert_int_equal(td_stop(&D), 0);
	backdate(id, 10.0 * 86400);
	assert_int_equal(td_restart(&D, cfg, NULL), 0);
	assert_int_equal(stored_traces(), 1);
	/* emptied */
	write_config("");
	assert_false(reload());
	assert_true(td_wait_log(&D, "gprofd.yaml is empty (cut short, or being written?): nothing "
	                        "applied; to leave every option at its default, write {}", NULL));
	assert_int_equal(stored_traces(), 1);
	/* cut mid-line: "300d" read as "300" (seconds) */
	write_config("retention:\n  max_age: 300");
	assert_false(reload());
	assert_true(td_wait_log(&D, "gprofd.yaml: no newline at its end, so it may be cut short",
	                        NULL));
	assert_int_equal(stored_traces(), 1);
	/* every default, on purpose */
	write_config("{}\n");
	assert_true(reload());
	assert_true(td_wait_log(&D, "older than retention.max_age", NULL));
	assert_int_equal(stored_traces(), 0);
}

static void test_disk_full(void **state)
{
	struct agent big, small;
	struct tc c;
	struct msg m, r;

	(void)state;
	assert_int_equal(td_start_wrapped(&D, SMALL_DISK_PATH, NULL, NULL), 0);
	assert_int_equal(agent_spawn(&big, D.sock, "big", 0, 2u << 20), 0);
	tc_ctl(&c, D.sock);
	m = tc_trace_req("big", 1);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_FAILED);
	assert_non_null(strstr(r.u.trace_info.procs.v[0].reason, "disk is full"));
	msg_deinit(&r);
	/* the partial file was removed: 600 KB fits again on the 1 MiB disk */
	assert_int_equal(agent_spawn(&small, D.sock, "small", 0, 600000), 0);
	m = tc_trace_req("small", 1);
	m.u.trace_start.follow = true;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	msg_deinit(&r);
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_list_reply.traces.n, 1);
	msg_deinit(&r);
	agent_stop(&big);
	agent_stop(&small);
	tc_close(&c);
}

/* SIGTERM with an upload in flight: the upload may still finish, and what
 * it stored is there after a restart. */
static void test_stop_lets_uploads_finish(void **state)
{
	struct tc c, ag;
	struct msg m, r;
	struct pbuf b;
	char id[64];
	uint32_t crc;

	(void)state;
	assert_int_equal(td_start(&D, NULL, NULL), 0);
	tc_agent(&ag, D.sock, "term");
	tc_ctl(&c, D.sock);
	m = tc_trace_req("term", 1);
	tc_call(&c, &m, &r);
	snprintf(id, sizeof(id), "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	tc_close(&c);
	assert_int_equal(tc_recv_type(&ag, MSG_CAPTURE_START, &r), 0);
	msg_deinit(&r);
	msg_init(&m, MSG_UPLOAD_BEGIN, 0);
	m.u.upload_begin.trace_id = id;
	m.u.upload_begin.transfer = 1;
	assert_int_equal(tc_send(&ag, &m), 0);
	pbuf_init(&b, 0);
	frame_encode_chunk(&b, 1, 0, "first half ", 11);
	assert_int_equal(tc_send_raw(&ag, b.data, b.len), 0);
	pbuf_deinit(&b);
	td_signal(&D, SIGTERM);
	assert_true(td_wait_log(&D, "signal 15: stopping", NULL));
	pbuf_init(&b, 0);
	frame_encode_chunk(&b, 1, 11, "second half", 11);
	assert_int_equal(tc_send_raw(&ag, b.data, b.len), 0);
	pbuf_deinit(&b);
	crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)"first half second half", 22);
	msg_init(&m, MSG_UPLOAD_END, 0);
	m.u.upload_end.transfer = 1;
	m.u.upload_end.bytes = 22;
	m.u.upload_end.crc32 = crc;
	tc_call(&ag, &m, &r);
	assert_int_equal(r.type, MSG_UPLOAD_END_REPLY);
	msg_deinit(&r);
	assert_true(tc_closed(&ag));
	tc_close(&ag);
	/* already stopping since the SIGTERM above: another would force it */
	assert_int_equal(td_reap(&D, false), 0);
	assert_int_equal(td_restart(&D, NULL, NULL), 0);
	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, &r);
	assert_int_equal(r.u.trace_list_reply.traces.n, 1);
	assert_string_equal(r.u.trace_list_reply.traces.v[0].trace_id, id);
	assert_int_equal(r.u.trace_list_reply.traces.v[0].files.v[0].bytes, 22);
	msg_deinit(&r);
	tc_close(&c);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_reload, teardown),
		cmocka_unit_test_teardown(test_reload_storm, teardown),
		cmocka_unit_test_teardown(test_retention_by_size, teardown),
		cmocka_unit_test_teardown(test_limits, teardown),
		cmocka_unit_test_teardown(test_trace_size_limit, teardown),
		cmocka_unit_test_teardown(test_write_queue_limit, teardown),
		cmocka_unit_test_teardown(test_slow_clients, teardown),
		cmocka_unit_test_teardown(test_restart_keeps_store, teardown),
		cmocka_unit_test_teardown(test_retention_by_age, teardown),
		cmocka_unit_test_teardown(test_reload_refuses_cut_file, teardown),
		cmocka_unit_test_teardown(test_stop_lets_uploads_finish, teardown),
	};
	/* mounting the small disk needs root (meson's admin-root) */
	const struct CMUnitTest root_tests[] = {
		cmocka_unit_test_teardown(test_disk_full, teardown),
	};
	signal(SIGPIPE, SIG_IGN);
	return td_main(argc, argv, tests, TD_NELEM(tests), root_tests, TD_NELEM(root_tests));
}
