/*
 * test-engine: the daemon's engine (registry.c, trace.c, store.c,
 * deliver.c) on its own, with no daemon process, no socket and no agent:
 * its processes are captured through a stand-in back end (sim, below: a
 * third implementation of backend.h, which proves that one needs no
 * engine file), and the test plays the back end's part, moving each
 * process through its states and handing over files by deliver_file.
 *
 * Every assertion is on what the engine itself records: states, reasons,
 * the counters of struct counters, the files and manifests in the store,
 * and the calls the engine made into the back end. Time is the loop's: a
 * timeout is a 1 ms trace timeout run out on the loop, never a sleep.
 *
 * The transport is stubbed (conn_send_msg, conn_fileno; the engine sends
 * only to followers), as are the /proc lookups of peer.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend.h"
#include "conn.h"
#include "deliver.h"
#include "log.h"
#include "peer.h"
#include "registry.h"
#include "store.h"
#include "trace.h"

/* ---- stand-ins for what the engine reaches below or beside it ---- */

static int sent;

int conn_send_msg(struct conn *c, const struct msg *m)
{
	(void)c;
	(void)m;
	sent++;
	return 0;
}

int conn_fileno(const struct conn *c)
{
	(void)c;
	return -1;
}

unsigned long long peer_start_time(pid_t pid)
{
	(void)pid;
	return 0;
}

int peer_unix_alive(int fd)
{
	(void)fd;
	return -1;
}

/* ---- the stand-in back end: counts what the engine asks of it ---- */

static struct {
	int starts, cancels, forgets, timeouts;
	char cancel_why[128];
	bool refuse;
} sim;

static const char *sim_refuse(const struct trace *t)
{
	(void)t;
	return sim.refuse ? "sim cannot do that; use another back end" : NULL;
}

/* A real back end would send or hand over a config here; this one only
 * says the process waits for its window. */
static void sim_start(struct trace *t, struct tproc *tp)
{
	sim.starts++;
	trace_set_state(t, tp, MSG_TS_WAITING, NULL);
}

static void sim_cancel(struct trace *t, struct tproc *tp, const char *why)
{
	(void)t;
	assert_non_null(tp->proc);
	sim.cancels++;
	snprintf(sim.cancel_why, sizeof(sim.cancel_why), "%s", why);
}

static void sim_timed_out(const struct trace *t, const struct tproc *tp, char *why, size_t size)
{
	(void)t;
	sim.timeouts++;
	snprintf(why, size, "sim timed out while %s", msg_tstate_name(tp->state));
}

static void sim_forget(struct proc *p)
{
	sim.forgets++;
	free(p->be_data);
	p->be_data = NULL;
}

static const struct backend sim_backend = {
	.name = "sim",
	.kind = MSG_KIND_AGENT,
	.counts_steps = true,
	.refuse = sim_refuse,
	.start = sim_start,
	.cancel = sim_cancel,
	.timed_out = sim_timed_out,
	.forget = sim_forget,
};

/* ---- the engine on a loop of its own ---- */

struct fix {
	struct daemon d;
	uv_loop_t loop;
	char dir[PATH_MAX];
	struct peer peer;
};

static void on_proc_gone(struct daemon *d, struct proc *p)
{
	trace_proc_gone(d, p);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct perr err;

	assert_non_null(f);
	memset(&sim, 0, sizeof(sim));
	sent = 0;
	uv_loop_init(&f->loop);
	f->d.loop = &f->loop;
	config_defaults(&f->d.cfg);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test-engine.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->d.cfg.state_dir, sizeof(f->d.cfg.state_dir), "%s", f->dir);
	snprintf(f->d.host, sizeof(f->d.host), "testhost");
	f->d.hooks.proc_gone = on_proc_gone;
	assert_int_equal(store_init(&f->d, &err), 0);
	f->peer.known = true;
	f->peer.uid = 1000;
	snprintf(f->peer.desc, sizeof(f->peer.desc), "the test");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	char cmd[PATH_MAX + 16];

	trace_shutdown(&f->d);
	while (f->d.procs != NULL)
		registry_remove(&f->d, f->d.procs);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	store_deinit(&f->d);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* A process of uid 1000 in job "7", captured by the stand-in. */
static struct proc *add(struct fix *f, pid_t pid)
{
	struct proc *p = NULL;

	assert_int_equal(registry_add_client(&f->d, &sim_backend, pid, 1000, "7", NULL, 0, &p), 0);
	p->be_data = malloc(16); /* the back end's own state, freed by its forget */
	return p;
}

/* A trace of every process of job "7", by time. */
static struct trace *start(struct fix *f, bool queue, int *code, struct perr *err)
{
	struct msg_trace_start req = { 0 };

	req.job_id = "7";
	req.process_limit = 100;
	req.timeout_ms = 60000;
	req.win.duration_ms = 100;
	return trace_create(&f->d, &f->peer, &req, queue, code, err);
}

/* Runs the loop until the store's writer has nothing left. */
static void drain(struct fix *f)
{
	while (!store_idle(&f->d))
		uv_run(&f->loop, UV_RUN_ONCE);
}

/* ---- a delivery, as a back end hands one over ---- */

struct got {
	struct delivery dl;
	int calls, result, code;
	char why[256];
	bool gone;
};

static void got_done(struct delivery *dl, struct tproc *tp, int result, int code,
                     const char *why)
{
	struct got *g = (struct got *)(void *)dl;

	g->calls++;
	g->result = result;
	g->code = code;
	snprintf(g->why, sizeof(g->why), "%s", why ? why : "");
	/* acknowledged before done, never after: the part is still running */
	if (result == 0)
		assert_int_not_equal(tp->state, MSG_TS_DONE);
}

static bool got_gone(struct delivery *dl)
{
	return ((struct got *)(void *)dl)->gone;
}

/* Writes a file of n bytes where a producer would, and delivers it. */
static void deliver(struct fix *f, struct trace *t, pid_t pid, struct got *g, size_t n)
{
	char tmp[PATH_MAX];
	FILE *fp;

	memset(g, 0, sizeof(*g));
	g->dl.d = &f->d;
	snprintf(g->dl.trace_id, sizeof(g->dl.trace_id), "%s", t->id);
	g->dl.pid = pid;
	snprintf(g->dl.name, sizeof(g->dl.name), "testhost_%d.1.pt.trace.json.gz", (int)pid);
	g->dl.bytes = (int64_t)n;
	g->dl.done = got_done;
	g->dl.abandoned = got_gone;
	assert_int_equal(store_mkdir(&f->d, t->id), 0);
	store_path(&f->d, t->id, g->dl.name, tmp, sizeof(tmp));
	strcat(tmp, ".tmp");
	fp = fopen(tmp, "w");
	assert_non_null(fp);
	while (n-- > 0)
		fputc('x', fp);
	fclose(fp);
	deliver_file(&g->dl, tmp);
}

static bool exists(struct fix *f, const char *id, const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	store_path(&f->d, id, name, path, sizeof(path));
	return stat(path, &st) == 0;
}

/* ---- the registry ---- */

static void test_registry(void **state)
{
	struct fix *f = *state;
	struct proc *p = add(f, 100), *q = add(f, 101), *r = NULL;
	int64_t pids[1] = { 101 };
	char hint[512];

	assert_ptr_equal(registry_find(&f->d, 100), p);
	assert_ptr_equal(registry_find_live(&f->d, 101, 1000), q);
	assert_int_equal(f->d.nprocs, 2);
	assert_string_equal(p->version, "sim");
	assert_int_equal(p->rank, -1);
	assert_true(registry_match(p, "7", NULL, 0));
	assert_false(registry_match(p, "8", NULL, 0));
	assert_false(registry_match(p, NULL, pids, 1));
	assert_true(registry_match(q, NULL, pids, 1));
	/* the limit refuses, and counts */
	f->d.cfg.max_processes = 2;
	assert_int_equal(registry_add_client(&f->d, &sim_backend, 102, 1000, "", NULL, 0, &r),
	                 -ENOSPC);
	assert_int_equal(f->d.cnt.processes_refused, 1);
	/* a pid now another user's: the registration is dropped, its back end told */
	assert_null(registry_find_live(&f->d, 101, 2000));
	assert_int_equal(sim.forgets, 1);
	assert_null(registry_find(&f->d, 101));
	registry_describe(&f->d, 1000, false, hint, sizeof(hint));
	assert_non_null(strstr(hint, "pid 100"));
	registry_describe(&f->d, 2000, false, hint, sizeof(hint));
	assert_non_null(strstr(hint, "processes of other users are"));
	registry_remove(&f->d, p);
	assert_int_equal(sim.forgets, 2);
	assert_int_equal(f->d.nprocs, 0);
	assert_int_equal(f->d.cnt.proc_bytes, 0);
}

/* ---- the trace state machine ---- */

/* matched -> waiting (start) -> capturing -> writing -> uploading ->
 * delivered -> done; the trace ends done and is stored. */
static void test_trace_done(void **state)
{
	struct fix *f = *state;
	struct proc *p = add(f, 100);
	struct perr err;
	struct trace *t;
	struct tproc *tp;
	struct got g;
	struct stored *s;
	int code = -1;

	t = start(f, true, &code, &err);
	assert_non_null(t);
	assert_int_equal(sim.starts, 1);
	tp = trace_tproc(t, 100);
	assert_int_equal(tp->state, MSG_TS_WAITING);
	assert_ptr_equal(tp->be, &sim_backend);
	assert_ptr_equal(p->busy, t);
	assert_int_equal(f->d.pending_traces, 1);
	trace_set_state(t, tp, MSG_TS_CAPTURING, NULL);
	trace_set_state(t, tp, MSG_TS_WRITING, NULL);
	trace_set_state(t, tp, MSG_TS_UPLOADING, NULL);
	deliver(f, t, 100, &g, 1234);
	assert_int_equal(g.calls, 0);      /* not before its manifest is on disk */
	assert_true(tp->recording);
	drain(f);
	assert_int_equal(g.calls, 1);
	assert_int_equal(g.result, 0);
	assert_int_equal(tp->state, MSG_TS_DONE);
	assert_int_equal(tp->stored_bytes, 1234);
	assert_int_equal(tp->bytes, 1234);
	assert_true(t->finished);
	assert_int_equal(t->state, MSG_TRACE_DONE);
	assert_null(p->busy);
	assert_int_equal(f->d.pending_traces, 0);
	assert_int_equal(f->d.cnt.traces_ended[MSG_TRACE_DONE], 1);
	s = store_find(&f->d, t->id);
	assert_non_null(s);
	assert_int_equal(s->nfiles, 1);
	assert_int_equal(s->bytes, 1234);
	assert_true(exists(f, t->id, g.dl.name));
	assert_true(exists(f, t->id, "manifest.json"));
	/* an ended part takes no state any more */
	trace_set_state(t, tp, MSG_TS_FAILED, "late");
	assert_int_equal(tp->state, MSG_TS_DONE);
	/* nor a cancel: 0 cancelled, and it keeps its state */
	assert_int_equal(trace_cancel(&f->d, t, "late"), 0);
	assert_int_equal(t->state, MSG_TRACE_DONE);
	assert_int_equal(sim.cancels, 0);
	store_delete(&f->d, s);
	assert_null(store_find(&f->d, t->id));
	assert_false(exists(f, t->id, g.dl.name));
}

/* The refusals of trace_create, each with its code and counter. */
static void test_trace_refusals(void **state)
{
	struct fix *f = *state;
	struct msg_trace_start req = { 0 };
	struct perr err;
	int code = -1;

	/* nothing registered: not found, with a hint */
	assert_null(start(f, true, &code, &err));
	assert_int_equal(code, MSG_E_NOT_FOUND);
	assert_non_null(strstr(err.msg, "no traceable process of yours"));
	/* another user's process is not matched */
	assert_int_equal(registry_add_client(&f->d, &sim_backend, 200, 2000, "7", NULL, 0,
	                                     &(struct proc *){ NULL }), 0);
	assert_null(start(f, true, &code, &err));
	assert_int_equal(code, MSG_E_NOT_FOUND);
	assert_int_equal(sim.starts, 0);
	add(f, 100);
	/* an id already used */
	req.job_id = "7";
	req.process_limit = 1;
	req.timeout_ms = 60000;
	req.trace_id = "same";
	assert_non_null(trace_create(&f->d, &f->peer, &req, true, &code, &err));
	assert_null(trace_create(&f->d, &f->peer, &req, true, &code, &err));
	assert_int_equal(code, MSG_E_BUSY);
	/* the pending limit */
	f->d.cfg.max_pending_traces = 1;
	assert_null(start(f, true, &code, &err));
	assert_int_equal(code, MSG_E_LIMIT);
	assert_int_equal(f->d.cnt.traces_refused, 1);
	assert_int_equal(sim.starts, 1);
}

/* A back end that cannot honour the request: the part fails with its
 * words, and it is never started. */
static void test_trace_backend_refuses(void **state)
{
	struct fix *f = *state;
	struct perr err;
	struct trace *t;
	int code;

	add(f, 100);
	sim.refuse = true;
	t = start(f, true, &code, &err);
	assert_non_null(t);
	assert_int_equal(sim.starts, 0);
	assert_int_equal(t->tp[0].state, MSG_TS_FAILED);
	assert_string_equal(t->tp[0].reason, "sim cannot do that; use another back end");
	assert_true(t->finished);
	assert_int_equal(t->state, MSG_TRACE_FAILED);
	assert_null(registry_find(&f->d, 100)->busy);
	assert_null(store_find(&f->d, t->id)); /* nothing delivered, nothing kept */
}

/* A cancel reaches the back end of every unfinished part, and the trace
 * ends cancelled even though one part had delivered. */
static void test_trace_cancel(void **state)
{
	struct fix *f = *state;
	struct perr err;
	struct trace *t;
	struct got g;
	int code;

	add(f, 100);
	add(f, 101);
	t = start(f, true, &code, &err);
	assert_int_equal(t->n, 2);
	deliver(f, t, 100, &g, 10);
	drain(f);
	assert_int_equal(trace_tproc(t, 100)->state, MSG_TS_DONE);
	/* its manifest job has ended while the trace runs on: the directory
	 * is still in use, and keeps the file */
	assert_true(exists(f, t->id, g.dl.name));
	assert_int_equal(trace_cancel(&f->d, t, "stop it"), 1);
	assert_int_equal(sim.cancels, 1);
	assert_string_equal(sim.cancel_why, "stop it");
	assert_int_equal(trace_tproc(t, 101)->state, MSG_TS_CANCELLED);
	assert_string_equal(trace_tproc(t, 101)->reason, "stop it");
	assert_int_equal(t->state, MSG_TRACE_CANCELLED);
	drain(f);
	assert_non_null(store_find(&f->d, t->id)); /* what was delivered stays */
	assert_true(exists(f, t->id, g.dl.name));
	/* a file that comes after its part was cancelled is not stored */
	deliver(f, t, 101, &g, 10);
	assert_int_equal(g.calls, 1);
	assert_int_equal(g.code, MSG_E_NOT_FOUND);
	assert_false(exists(f, t->id, g.dl.name));
}

/* The timeout: the back end says why in its own words and is told to
 * cancel; the trace fails. */
static void test_trace_timeout(void **state)
{
	struct fix *f = *state;
	struct msg_trace_start req = { 0 };
	struct perr err;
	struct trace *t;
	int code;

	add(f, 100);
	req.job_id = "7";
	req.process_limit = 1;
	req.timeout_ms = 1;
	t = trace_create(&f->d, &f->peer, &req, true, &code, &err);
	assert_non_null(t);
	while (!t->finished)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_int_equal(sim.timeouts, 1);
	assert_int_equal(sim.cancels, 1);
	assert_string_equal(sim.cancel_why, "trace timed out");
	assert_string_equal(t->tp[0].reason, "sim timed out while waiting");
	assert_int_equal(t->state, MSG_TRACE_FAILED);
}

/* A busy process: a dyno request fails at once; a gprofctl one waits,
 * and begins when the process's current trace ends. */
static void test_trace_busy_queue(void **state)
{
	struct fix *f = *state;
	struct proc *p = add(f, 100);
	struct trace *a, *b, *c;
	struct perr err;
	int code;

	a = start(f, true, &code, &err);
	b = start(f, false, &code, &err);
	assert_non_null(b);
	assert_int_equal(b->tp[0].state, MSG_TS_FAILED);
	assert_non_null(strstr(b->tp[0].reason, "busy: already capturing trace"));
	c = start(f, true, &code, &err);
	assert_int_equal(c->tp[0].state, MSG_TS_MATCHED);
	assert_true(c->tp[0].queued);
	assert_non_null(strstr(c->tp[0].reason, "queued: the process is capturing trace"));
	assert_int_equal(sim.starts, 1);
	trace_set_state(a, &a->tp[0], MSG_TS_FAILED, "the capture failed");
	assert_int_equal(a->state, MSG_TRACE_FAILED);
	assert_int_equal(sim.starts, 2);
	assert_ptr_equal(p->busy, c);
	assert_false(c->tp[0].queued);
	assert_int_equal(c->tp[0].state, MSG_TS_WAITING);
}

/* The process goes mid-capture: its part fails, its back end forgets it,
 * and a file it delivers later is refused. */
static void test_trace_proc_gone(void **state)
{
	struct fix *f = *state;
	struct proc *p = add(f, 100);
	struct perr err;
	struct trace *t;
	struct got g;
	int code;

	add(f, 101);
	t = start(f, true, &code, &err);
	trace_set_state(t, trace_tproc(t, 100), MSG_TS_UPLOADING, NULL);
	registry_remove(&f->d, p);
	assert_int_equal(sim.forgets, 1);
	assert_null(trace_tproc(t, 100)->proc);
	assert_int_equal(trace_tproc(t, 100)->state, MSG_TS_FAILED);
	assert_string_equal(trace_tproc(t, 100)->reason,
	                    "the agent disconnected during the upload");
	assert_false(t->finished);
	/* the other part delivers: the trace ends partial */
	deliver(f, t, 101, &g, 5);
	drain(f);
	assert_int_equal(t->state, MSG_TRACE_PARTIAL);
	assert_int_equal(f->d.cnt.traces_ended[MSG_TRACE_PARTIAL], 1);
}

/* ---- the one deliver path ---- */

/* A file its producer gave up while its manifest was written is removed,
 * and its part fails. */
static void test_deliver_abandoned(void **state)
{
	struct fix *f = *state;
	struct perr err;
	struct trace *t;
	struct got g;
	int code;

	add(f, 100);
	t = start(f, true, &code, &err);
	deliver(f, t, 100, &g, 7);
	g.gone = true;
	drain(f);
	assert_int_equal(g.calls, 1);
	assert_true(g.result < 0);
	assert_false(exists(f, t->id, g.dl.name));
	assert_int_equal(t->tp[0].state, MSG_TS_FAILED);
	assert_int_equal(t->tp[0].file[0], 0);
	assert_int_equal(t->tp[0].stored_bytes, 0);
	assert_int_equal(t->state, MSG_TRACE_FAILED);
}

/* A file that cannot be renamed into the store: the producer hears why
 * (I/O), the part fails with the same words. */
static void test_deliver_rename_fails(void **state)
{
	struct fix *f = *state;
	struct perr err;
	struct trace *t;
	struct got g;
	int code;

	add(f, 100);
	t = start(f, true, &code, &err);
	memset(&g, 0, sizeof(g));
	g.dl.d = &f->d;
	snprintf(g.dl.trace_id, sizeof(g.dl.trace_id), "%s", t->id);
	g.dl.pid = 100;
	snprintf(g.dl.name, sizeof(g.dl.name), "x.pt.trace.json.gz");
	g.dl.done = got_done;
	deliver_file(&g.dl, "/nonexistent/x.tmp");
	assert_int_equal(g.calls, 1);
	assert_int_equal(g.result, -ENOENT);
	assert_int_equal(g.code, MSG_E_IO);
	assert_string_equal(g.why, "cannot store the file: No such file or directory");
	assert_int_equal(t->tp[0].state, MSG_TS_FAILED);
	assert_string_equal(t->tp[0].reason, g.why);
	/* a file for a process the trace does not have is refused too */
	g.dl.pid = 999;
	deliver_file(&g.dl, "/nonexistent/x.tmp");
	assert_int_equal(g.calls, 2);
	assert_int_equal(g.code, MSG_E_NOT_FOUND);
}

/* ---- the store ---- */

/* One daemon per state directory: a second store on it is refused,
 * naming the holder, and changes nothing. */
static void test_store_locked(void **state)
{
	struct fix *f = *state;
	struct daemon d2;
	struct perr err;

	memset(&d2, 0, sizeof(d2));
	d2.loop = &f->loop;
	d2.cfg = f->d.cfg;
	d2.hooks = f->d.hooks;
	assert_int_equal(store_init(&d2, &err), -EBUSY);
	assert_non_null(strstr(err.msg, "pid"));
	store_deinit(&d2);
}

/* A trace the store recorded is found again by a store started anew on
 * the same directory (a restart), its file listed. */
static void test_store_reload(void **state)
{
	struct fix *f = *state;
	struct perr err;
	struct trace *t;
	struct got g;
	char id[TRACE_ID_LEN];
	int code;

	add(f, 100);
	t = start(f, true, &code, &err);
	deliver(f, t, 100, &g, 99);
	drain(f);
	snprintf(id, sizeof(id), "%s", t->id);
	store_deinit(&f->d);
	assert_int_equal(store_init(&f->d, &err), 0);
	assert_non_null(store_find(&f->d, id));
	assert_int_equal(store_find(&f->d, id)->nfiles, 1);
	assert_non_null(store_file(store_find(&f->d, id), g.dl.name));
	assert_int_equal(store_file(store_find(&f->d, id), g.dl.name)->bytes, 99);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_registry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_done, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_backend_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_busy_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_proc_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deliver_abandoned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deliver_rename_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_locked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_reload, setup, teardown),
	};

	log_level = -1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
