/*
 * Integration tests of the store's integrity under attack and faults
 * (issues 23 and 26): one gprofd per state directory (a second refuses at
 * once, naming the first's pid, and touches nothing: the upload in flight
 * survives); one upload per process and trace, and one count of the bytes
 * on disk (many transfers for one trace, and an agent's lying byte count,
 * do not get past limits.trace_bytes and retention.max_bytes); nothing
 * acknowledged is removed at the next start, whether the daemon was killed
 * (SIGKILL) or could not write the trace's last manifest (a full disk);
 * gprofctl fetch writes traces 0600 whatever the umask.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
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

/* ---- helpers ---- */

static void begin(struct tc *ag, const char *id, uint32_t transfer, uint64_t *req_id);
static bool send_bytes(struct tc *ag, uint32_t transfer, size_t from, size_t to);
static int end(struct tc *ag, uint32_t transfer, size_t bytes, int *refused);

/* A process registered with job, in a child (tc_agent sends no parent pids,
 * so this process is no launcher of it). With bytes 0 it never answers: it
 * keeps a trace of several processes running after the others ended; else
 * it uploads bytes of content at its capture_start. */
struct idle {
	pid_t pid;
	int ctl;
};

static void idle_spawn_uploading(struct idle *a, const char *job, size_t bytes)
{
	int ready[2], ctl[2];
	char b;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(ctl), 0);
	a->pid = fork();
	assert_true(a->pid >= 0);
	if (a->pid == 0) {
		struct tc c;
		struct msg r;

		close(ready[0]);
		close(ctl[1]);
		tc_agent(&c, D.sock, job);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		if (bytes > 0) {
			if (tc_recv_type(&c, MSG_CAPTURE_START, &r) != 0)
				_exit(2);
			begin(&c, r.u.capture_start.trace_id, 1, NULL);
			msg_deinit(&r);
			if (!send_bytes(&c, 1, 0, bytes) || end(&c, 1, bytes, NULL) !=
			    MSG_UPLOAD_END_REPLY)
				_exit(3);
		}
		while (read(ctl[0], &b, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(ctl[0]);
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	a->ctl = ctl[1];
}

static void idle_spawn(struct idle *a, const char *job)
{
	idle_spawn_uploading(a, job, 0);
}

static void idle_stop(struct idle *a)
{
	close(a->ctl);
	waitpid(a->pid, NULL, 0);
}

/* Starts a trace of job (following it) and waits for capture_start on the
 * bare agent ag; the trace id goes to id. */
static void start_trace(struct tc *c, struct tc *ag, const char *job, char *id, size_t size)
{
	struct msg m, r;

	tc_ctl(c, D.sock);
	m = tc_trace_req(job, 1);
	m.u.trace_start.follow = true;
	tc_call(c, &m, &r);
	assert_int_equal(r.type, MSG_TRACE_START_REPLY);
	snprintf(id, size, "%s", r.u.trace_start_reply.trace_id);
	msg_deinit(&r);
	assert_int_equal(tc_recv_type(ag, MSG_CAPTURE_START, &r), 0);
	msg_deinit(&r);
}

static void begin(struct tc *ag, const char *id, uint32_t transfer, uint64_t *req_id)
{
	struct msg m;

	msg_init(&m, MSG_UPLOAD_BEGIN, 0);
	m.u.upload_begin.trace_id = id;
	m.u.upload_begin.transfer = transfer;
	assert_int_equal(tc_send(ag, &m), 0);
	if (req_id != NULL)
		*req_id = m.id;
}

/* Sends bytes [from, to) of agent_byte's content as chunks of transfer;
 * false when the daemon has closed the connection. */
static bool send_bytes(struct tc *ag, uint32_t transfer, size_t from, size_t to)
{
	static uint8_t buf[64 << 10];
	struct pbuf b;
	bool ok = true;
	size_t i, n;

	while (ok && from < to) {
		n = to - from < sizeof(buf) ? to - from : sizeof(buf);
		for (i = 0; i < n; i++)
			buf[i] = agent_byte(from + i);
		pbuf_init(&b, 0);
		frame_encode_chunk(&b, transfer, from, buf, n);
		ok = tc_send_raw(ag, b.data, b.len) == 0;
		pbuf_deinit(&b);
		from += n;
	}
	return ok;
}

static uint32_t content_crc(size_t bytes)
{
	uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
	uint8_t x;
	size_t i;

	for (i = 0; i < bytes; i++) {
		x = agent_byte(i);
		crc = (uint32_t)crc32(crc, &x, 1);
	}
	return crc;
}

/* upload_end of transfer with bytes of content; receives until its
 * reply. Errors answering other requests on the way (ids in others) are
 * counted in *refused when their code is busy. Returns the reply's type,
 * or -1 when the connection closed first. */
static int end(struct tc *ag, uint32_t transfer, size_t bytes, int *refused)
{
	struct msg m, r;
	int type;

	msg_init(&m, MSG_UPLOAD_END, 0);
	m.u.upload_end.transfer = transfer;
	m.u.upload_end.bytes = (int64_t)bytes;
	m.u.upload_end.crc32 = content_crc(bytes);
	if (tc_send(ag, &m) != 0)
		return -1;
	for (;;) {
		if (tc_recv(ag, &r) != 0)
			return -1;
		if (r.type == MSG_ERROR && r.id != m.id && r.u.error.code == MSG_E_BUSY &&
		    refused != NULL)
			(*refused)++;
		if (r.id == m.id) {
			type = r.type;
			if (type == MSG_ERROR)
				fprintf(stderr, "upload_end %u: %s\n", transfer, r.u.error.message);
			msg_deinit(&r);
			return type;
		}
		msg_deinit(&r);
	}
}

/* The data files in a trace's directory: how many, and their bytes. */
static int files_on_disk(const char *id, uint64_t *bytes)
{
	char path[600], sub[900];
	struct dirent *e;
	struct stat st;
	DIR *dh;
	int n = 0;

	*bytes = 0;
	snprintf(path, sizeof(path), "%s/traces/%s", D.state, id);
	dh = opendir(path);
	if (dh == NULL)
		return 0;
	while ((e = readdir(dh)) != NULL) {
		if (strstr(e->d_name, ".pt.trace.json.gz") == NULL)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (stat(sub, &st) == 0) {
			n++;
			*bytes += (uint64_t)st.st_size;
		}
	}
	closedir(dh);
	return n;
}

/* Asserts that the stored file path holds exactly bytes of agent_byte's
 * content. */
static void assert_content(const char *path, size_t bytes)
{
	uint8_t buf[64 << 10];
	size_t at = 0, i;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (i = 0; i < (size_t)n; i++)
			assert_int_equal(buf[i], agent_byte(at + i));
		at += (size_t)n;
	}
	close(fd);
	assert_int_equal(at, bytes);
}

/* The trace list's entry for id (msg_deinit r): asserts there is one. */
static const struct msg_trace_summary *listed(struct msg *r, const char *id)
{
	struct tc c;
	struct msg m;
	size_t i;

	tc_ctl(&c, D.sock);
	msg_init(&m, MSG_TRACE_LIST, 0);
	tc_call(&c, &m, r);
	tc_close(&c);
	for (i = 0; i < r->u.trace_list_reply.traces.n; i++)
		if (strcmp(r->u.trace_list_reply.traces.v[i].trace_id, id) == 0)
			return &r->u.trace_list_reply.traces.v[i];
	fail_msg("trace %s is not listed", id);
	return NULL;
}

/* Runs gprofctl with args (NULL-terminated) under umask mask; its exit
 * status. */
static int ctl(mode_t mask, const char *const *args)
{
	const char *argv[16];
	int n = 0, status;
	pid_t pid;

	argv[n++] = GPROFCTL_PATH;
	argv[n++] = "--socket";
	argv[n++] = D.sock;
	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		umask(mask);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- one gprofd per state directory (issue 26, 1) ---- */

/* A second gprofd on the same state directory (another socket, no TCP)
 * while an upload is in flight: it refuses at once naming the first's pid,
 * removes nothing, and the upload ends stored and downloadable. Before the
 * lock it removed the upload's directory as "unfinished", ran beside the
 * first, and the first's upload failed ("cannot store the file"). */
static void test_second_daemon_refused(void **state)
{
	char id[64], cmd[1400], out[2000], want[64], path[900], fetched[900];
	struct tc c, ag;
	struct msg r;
	uint64_t bytes;
	size_t n;
	FILE *p;
	int status;

	(void)state;
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\n", NULL), 0);
	tc_agent(&ag, D.sock, "lock");
	start_trace(&c, &ag, "lock", id, sizeof(id));
	begin(&ag, id, 1, NULL);
	assert_true(send_bytes(&ag, 1, 0, 100000));
	/* the daemon has begun it: the process is uploading */
	for (;;) {
		assert_int_equal(tc_recv_type(&c, MSG_TRACE_PROGRESS, &r), 0);
		if (r.u.trace_info.procs.v[0].state == MSG_TS_UPLOADING) {
			msg_deinit(&r);
			break;
		}
		msg_deinit(&r);
	}
	/* `timeout` ends a second daemon that ran instead of refusing */
	snprintf(cmd, sizeof(cmd), "timeout 10 %s --socket %s/second.sock --tcp off --metrics off "
	         "--state-dir %s --config %s/gprofd.yaml 2>&1", GPROFD_PATH, D.dir, D.state, D.dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	status = pclose(p);
	fprintf(stderr, "second gprofd said: %s", out);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	snprintf(want, sizeof(want), "another gprofd (pid %d)", (int)D.pid);
	assert_non_null(strstr(out, want));
	assert_null(strstr(out, "removing"));
	/* nothing changed: the first's upload goes on and is stored */
	assert_true(send_bytes(&ag, 1, 100000, 200000));
	assert_int_equal(end(&ag, 1, 200000, NULL), MSG_UPLOAD_END_REPLY);
	tc_follow_end(&c, &r);
	assert_int_equal(r.u.trace_info.state, MSG_TRACE_DONE);
	snprintf(path, sizeof(path), "%s/traces/%s/%s", D.state, id,
	         r.u.trace_info.procs.v[0].file);
	snprintf(fetched, sizeof(fetched), "%s/out/%s/%s", D.dir, id,
	         r.u.trace_info.procs.v[0].file);
	msg_deinit(&r);
	assert_content(path, 200000);
	assert_int_equal(files_on_disk(id, &bytes), 1);
	/* and downloadable with the real gprofctl */
	snprintf(cmd, sizeof(cmd), "%s/out", D.dir);
	{
		const char *args[] = { "fetch", id, "--output-dir", cmd, NULL };

		assert_int_equal(ctl(022, args), 0);
	}
	assert_content(fetched, 200000);
	tc_close(&c);
	tc_close(&ag);
}

/* ---- one upload and one count of bytes per process (issue 23, 3) ---- */

#define PIECE 900000

/* One process opens five transfers for one trace (another process keeps
 * the trace running) and sends each nearly limits.trace_bytes; then lies
 * about its bytes in a capture_status. Only the first transfer is
 * accepted, and the bytes on disk are the bytes the daemon counts. Before:
 * all five were renamed into the store (4.5 MB on disk, past
 * retention.max_bytes) while the books counted one, and then none. */
static void test_one_upload_per_process(void **state)
{
	char id[64];
	struct tc c, ag;
	struct msg m, r;
	struct idle other;
	uint64_t bytes;
	int refused = 0, k, files;
	const struct msg_trace_summary *s;

	(void)state;
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\nlimits:\n  trace_bytes: 1M\n"
	                          "retention:\n  max_bytes: 2M\n", NULL), 0);
	tc_agent(&ag, D.sock, "acct");
	idle_spawn(&other, "acct");
	start_trace(&c, &ag, "acct", id, sizeof(id));
	for (k = 1; k <= 5; k++)
		begin(&ag, id, (uint32_t)k, NULL);
	assert_true(send_bytes(&ag, 1, 0, PIECE));
	assert_int_equal(end(&ag, 1, PIECE, &refused), MSG_UPLOAD_END_REPLY);
	/* the agent's word on its bytes does not change what is counted */
	msg_init(&m, MSG_CAPTURE_STATUS, 0);
	m.u.capture_status.trace_id = id;
	m.u.capture_status.state = MSG_TS_UPLOADING;
	m.u.capture_status.bytes = 0;
	assert_int_equal(tc_send(&ag, &m), 0);
	/* the refused transfers: their chunks close the connection (a chunk
	 * for a transfer that is not open) */
	for (k = 2; k <= 5; k++)
		if (!send_bytes(&ag, (uint32_t)k, 0, PIECE) || end(&ag, (uint32_t)k, PIECE, NULL) < 0)
			break;
	tc_close(&ag);
	msg_init(&m, MSG_TRACE_CANCEL, 0);
	m.u.trace_ref.trace_id = id;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	tc_close(&c);
	idle_stop(&other);
	files = files_on_disk(id, &bytes);
	s = listed(&r, id);
	fprintf(stderr, "on disk: %d files, %llu bytes; counted: %zu files, %lld bytes\n", files,
	        (unsigned long long)bytes, s->files.n, (long long)(s->files.n ?
	        s->files.v[0].bytes : 0));
	assert_int_equal(files, 1);
	assert_int_equal(bytes, PIECE);
	assert_int_equal(s->files.n, 1);
	assert_int_equal(s->files.v[0].bytes, PIECE);
	msg_deinit(&r);
	assert_int_equal(refused, 4); /* each said why */
}

/* An agent reports its own part failed while its upload is in flight, then
 * completes the upload; the trace runs on (a second process delivered, a
 * third never does). The file is not stored. Before: it was renamed into
 * the store although its process had failed, so its bytes sat on disk,
 * listed nowhere and counted by nothing. */
static void test_ended_part_stores_nothing(void **state)
{
	char id[64];
	struct tc c, ag;
	struct msg m, r;
	struct idle other, fake;
	uint64_t bytes;
	const struct msg_trace_summary *s;
	int files, done = 0, reply;
	size_t i;

	(void)state;
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\n", NULL), 0);
	tc_agent(&ag, D.sock, "ended");
	idle_spawn(&other, "ended");
	idle_spawn_uploading(&fake, "ended", 5000);
	start_trace(&c, &ag, "ended", id, sizeof(id));
	/* the fake agent has delivered */
	while (!done) {
		assert_int_equal(tc_recv_type(&c, MSG_TRACE_PROGRESS, &r), 0);
		for (i = 0; i < r.u.trace_info.procs.n; i++)
			if (r.u.trace_info.procs.v[i].pid == fake.pid &&
			    r.u.trace_info.procs.v[i].state == MSG_TS_DONE)
				done = 1;
		msg_deinit(&r);
	}
	begin(&ag, id, 1, NULL);
	assert_true(send_bytes(&ag, 1, 0, 300000));
	msg_init(&m, MSG_CAPTURE_STATUS, 0);
	m.u.capture_status.trace_id = id;
	m.u.capture_status.state = MSG_TS_FAILED;
	m.u.capture_status.reason = "the agent gave up";
	assert_int_equal(tc_send(&ag, &m), 0);
	reply = end(&ag, 1, 300000, NULL);
	tc_close(&ag);
	msg_init(&m, MSG_TRACE_CANCEL, 0);
	m.u.trace_ref.trace_id = id;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	tc_close(&c);
	idle_stop(&fake); /* first: forked last, it holds a copy of other's pipe */
	idle_stop(&other);
	files = files_on_disk(id, &bytes);
	s = listed(&r, id);
	fprintf(stderr, "on disk: %d files, %llu bytes; listed: %zu files\n", files,
	        (unsigned long long)bytes, s->files.n);
	assert_int_equal(s->files.n, 1);
	assert_int_equal(files, 1);
	assert_int_equal(bytes, (uint64_t)s->files.v[0].bytes);
	msg_deinit(&r);
	assert_int_equal(reply, MSG_ERROR); /* the agent heard it was not stored */
}

/* ---- nothing acknowledged is removed (issue 23, 4 and 5) ---- */

/* Two processes; the first's file is acknowledged (its upload_end
 * answered, its state done); the second never delivers. */
static void acknowledged_one(struct tc *c, struct idle *other, const char *job, char *id,
                             size_t size, size_t bytes)
{
	struct tc ag;
	struct msg r;

	tc_agent(&ag, D.sock, job);
	idle_spawn(other, job);
	start_trace(c, &ag, job, id, size);
	begin(&ag, id, 1, NULL);
	assert_true(send_bytes(&ag, 1, 0, bytes));
	assert_int_equal(end(&ag, 1, bytes, NULL), MSG_UPLOAD_END_REPLY);
	for (;;) {
		assert_int_equal(tc_recv_type(c, MSG_TRACE_PROGRESS, &r), 0);
		if (r.u.trace_info.procs.v[0].state == MSG_TS_DONE ||
		    r.u.trace_info.procs.v[1].state == MSG_TS_DONE) {
			msg_deinit(&r);
			break;
		}
		msg_deinit(&r);
	}
	tc_close(&ag);
}

/* Checks, after a restart, that id is listed partial with its one
 * acknowledged file whole. */
static void assert_kept(const char *id, size_t bytes)
{
	const struct msg_trace_summary *s;
	char path[900];
	struct msg r;

	assert_int_equal(td_log_count(&D, "removing unfinished trace directory"), 0);
	s = listed(&r, id);
	assert_int_equal(s->state, MSG_TRACE_PARTIAL);
	assert_int_equal(s->files.n, 1);
	assert_int_equal(s->files.v[0].bytes, (int64_t)bytes);
	snprintf(path, sizeof(path), "%s/traces/%s/%s", D.state, id, s->files.v[0].name);
	msg_deinit(&r);
	assert_content(path, bytes);
}

/* kill -9 of the daemon while a trace runs with one file acknowledged:
 * the next start keeps it (the trace partial). Before: "removing
 * unfinished trace directory", the acknowledged file with it. */
static void test_kill9_keeps_acknowledged(void **state)
{
	struct idle other;
	char id[64];
	struct tc c;

	(void)state;
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\n", NULL), 0);
	acknowledged_one(&c, &other, "k9", id, sizeof(id), 300000);
	td_signal(&D, SIGKILL);
	td_reap(&D, false);
	tc_close(&c);
	idle_stop(&other);
	assert_int_equal(td_restart(&D, "kineto:\n  enabled: false\n", NULL), 0);
	assert_true(td_wait_log(&D, "was interrupted", NULL));
	assert_kept(id, 300000);
}

static int teardown_unmounted(void **state)
{
	(void)state;
	td_cleanup(&D);
	return 0;
}

/* The trace's last manifest cannot be written (the disk filled after its
 * first process was acknowledged done): the next start keeps that file.
 * Before: "cannot write its manifest; it will be removed at the next
 * start", and it was. The state directory is a 1 MiB tmpfs mounted in
 * this test's own mount namespace, so it outlives a restart. */
static void test_full_disk_keeps_acknowledged(void **state)
{
	static char fill[64 << 10];
	char path[600];
	struct idle other;
	char id[64];
	struct tc c;
	struct msg m, r;
	int fd;

	(void)state;
	assert_int_equal(unshare(CLONE_NEWNS), 0);
	assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\n", NULL), 0);
	assert_int_equal(td_stop(&D), 0);
	assert_int_equal(mount("gprofd-test", D.state, "tmpfs", 0, "size=1m,mode=0700"), 0);
	assert_int_equal(td_restart(&D, "kineto:\n  enabled: false\n", NULL), 0);
	acknowledged_one(&c, &other, "full", id, sizeof(id), 200000);
	/* the disk fills */
	snprintf(path, sizeof(path), "%s/filler", D.state);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	memset(fill, 'x', sizeof(fill));
	while (write(fd, fill, sizeof(fill)) > 0)
		;
	while (write(fd, fill, 1) > 0)
		;
	close(fd);
	/* the trace ends; its last manifest cannot be written */
	msg_init(&m, MSG_TRACE_CANCEL, 0);
	m.u.trace_ref.trace_id = id;
	tc_call(&c, &m, &r);
	msg_deinit(&r);
	assert_true(td_wait_log(&D, "manifest (No space left on device)", NULL));
	tc_close(&c);
	idle_stop(&other);
	unlink(path);
	assert_int_equal(td_stop(&D), 0);
	assert_int_equal(td_restart(&D, "kineto:\n  enabled: false\n", NULL), 0);
	assert_kept(id, 200000);
	assert_int_equal(td_stop(&D), 0);
	assert_int_equal(umount2(D.state, MNT_DETACH), 0);
}

/* ---- gprofctl writes what it downloads 0600 (issue 23, 15) ---- */

static void test_fetch_private(void **state)
{
	char id[64], dir[600], path[900];
	struct tc c, ag;
	struct msg r;
	struct stat st;

	(void)state;
	assert_int_equal(td_start(&D, "kineto:\n  enabled: false\n", NULL), 0);
	tc_agent(&ag, D.sock, "mode");
	start_trace(&c, &ag, "mode", id, sizeof(id));
	begin(&ag, id, 1, NULL);
	assert_true(send_bytes(&ag, 1, 0, 1000));
	assert_int_equal(end(&ag, 1, 1000, NULL), MSG_UPLOAD_END_REPLY);
	tc_follow_end(&c, &r);
	snprintf(dir, sizeof(dir), "%s/out", D.dir);
	snprintf(path, sizeof(path), "%s/%s/%s", dir, id, r.u.trace_info.procs.v[0].file);
	msg_deinit(&r);
	{
		const char *args[] = { "fetch", id, "--output-dir", dir, NULL };

		assert_int_equal(ctl(022, args), 0);
	}
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	tc_close(&c);
	tc_close(&ag);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_second_daemon_refused, teardown),
		cmocka_unit_test_teardown(test_one_upload_per_process, teardown),
		cmocka_unit_test_teardown(test_ended_part_stores_nothing, teardown),
		cmocka_unit_test_teardown(test_kill9_keeps_acknowledged, teardown),
		cmocka_unit_test_teardown(test_fetch_private, teardown),
	};
	/* mounting needs root (meson's store-root); last in its process: it
	 * moves this process into a mount namespace of its own */
	const struct CMUnitTest root_tests[] = {
		cmocka_unit_test_teardown(test_full_disk_keeps_acknowledged, teardown_unmounted),
	};
	signal(SIGPIPE, SIG_IGN);
	return td_main(argc, argv, tests, TD_NELEM(tests), root_tests, TD_NELEM(root_tests));
}
