/*
 * capture.c: one burst at a time, driven by the agent thread: from
 * capture_start to the uploaded file. Called by link.c (the loop that owns
 * the agent thread and the daemon connection); it drives rec.c, gpu.c and
 * writer.c below it and reports back only through the callbacks link.c
 * gave it (capture_init: a status, the upload), never calling up.
 *
 * Starts from the daemon are queued by link.c as they arrive and taken
 * here, in order, by capture_tick on the agent thread's main loop, never
 * from inside another command (a cancel only marks the burst ended or
 * drops the queued start; capture_tick finishes the burst): they can
 * arrive while this thread is in the middle of a burst's end (waiting for
 * the upload's reply, say), and the next request of a back-to-back series
 * routinely does. The queue is bounded (CMDQ_MAX); a start past it is
 * refused with the reason.
 *
 * A burst's phases (`phase`, touched only by the agent thread):
 *   IDLE -> begin: window fixed, CUPTI enabled if the request wants GPU
 *           activities (enabling ahead of an iteration boundary keeps the
 *           expensive first enable off the captured iterations), then
 *   WAIT_TIME (a wall-clock start) or ARMED (iteration mode: rec.c opens
 *           the window on an application thread at the boundary; while
 *           either lasts, what CUPTI records is shed every 20 ms) or
 *   OPEN    (recording; ends by rec_end: the N-th boundary, the duration
 *           timer here, the byte limit, or a cancel), then
 *   finish: CUPTI drained, harvested and released (gpu.c), the trace
 *           written (writer.c) into a file with no name (scratch.c),
 *           uploaded from its descriptor (out.upload), the descriptor
 *           closed (the file is gone); back to IDLE, and the next queued
 *           command.
 *           A memory-snapshot burst (memsnap.c) has no CUPTI and no CPU
 *           events: its end waits (capture_timeout_ms) until the job's
 *           Python has written the snapshot, which is uploaded instead.
 * Every accepted start ends in exactly one final status: uploaded (the
 * daemon then says done), failed with a reason, or cancelled.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"
#include "gpu.h"
#include "memsnap.h"
#include "msg.h"
#include "ops.h"
#include "rec.h"
#include "scratch.h"
#include "state.h"
#include "writer.h"

enum phase { P_IDLE, P_WAIT_TIME, P_ARMED, P_OPEN };
/* how often, while CUPTI is on and the window not open yet, what CUPTI
 * recorded meanwhile is shed (gpu_shed): a buffer is 4 MB, and a fast loop
 * fills one in some 20 ms at most */
#define SHED_EVERY_NS (20u * 1000 * 1000)
static enum phase phase;
static bool gpu_on;
/* Said with the writing and uploading statuses, so the daemon's record of
 * the process and gprofctl's summary carry it: every option or activity
 * asked for and not honoured, by name and why (memset beside memcpy, CPU
 * only, a CUPTI kind refused, PyTorch operators and their options: ops.c's
 * notes), and a cut. */
static char note[1400];
static struct capture_out out; /* capture_init */
static int64_t asked; /* the burst's request options (MSG_OPT_*), named if not honoured */
static bool ops_off;  /* GPROF_TORCH_OPS=off refused the burst's operators (said at begin) */

/* A start as queued: its strings copied out of the decoded message.
 * Cancels are not queued: capture_queue_cancel applies them at once. */
struct cmd {
	char trace_id[MSG_TRACE_ID_MAX + 1];
	struct msg_window win;       /* iteration_range unused: the name is in range */
	char range[AGENT_NAME_MAX + 1];
	int64_t max_bytes;
};
#define CMDQ_MAX 8
static struct cmd cmdq[CMDQ_MAX];
static unsigned cmdq_head, cmdq_len;

void capture_init(const struct capture_out *o)
{
	out = *o;
}

/* A capture_status to the daemon, through what capture_init was given. */
static void status(const char *trace_id, int state, const char *reason, int64_t events,
                   int64_t dropped, int64_t bytes)
{
	out.status(out.ctx, trace_id, state, reason, events, dropped, bytes);
}

bool capture_busy(void)
{
	return phase != P_IDLE || cmdq_len > 0;
}

/* What asked for PyTorch operators in this burst, for a note: the request's
 * options by gprofctl's flags, and the job's own GPROF_TORCH_OPS and
 * GPROF_TORCH_OPTS; "" when nothing did (the default's need no note). */
static void asked_names(char *buf, size_t n)
{
	const char *ops = getenv("GPROF_TORCH_OPS"), *opts = getenv("GPROF_TORCH_OPTS");
	size_t len = msg_options_flags(asked, buf, n);

	if (ops != NULL && *ops && strcmp(ops, "off") != 0 && len < n)
		len += (size_t)snprintf(buf + len, n - len, "%sGPROF_TORCH_OPS=%.40s",
		                        len ? ", " : "", ops);
	if (opts != NULL && *opts && len < n)
		snprintf(buf + len, n - len, "%sGPROF_TORCH_OPTS=%.60s", len ? ", " : "", opts);
}

/* Appends to the note, "; "-separated. */
static void add_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	agent_note_add(note, sizeof(note), fmt, ap);
	va_end(ap);
}

static void open_now(uint64_t now)
{
	atomic_store(&A.t_start, now);
	atomic_store(&A.rec_on, 1);
}

static bool memset_allowed(void)
{
	const char *v = getenv("GPROF_CUPTI_MEMSET_WITH_MEMCPY");

	return v != NULL && strcmp(v, "1") == 0;
}

/* The agent's own cap on a burst's memory: GPROF_AGENT_MAX_MB (1 MB to
 * 1 TB), else AGENT_DEFAULT_MAX_BYTES. A request (the daemon's
 * limits.trace_bytes, a limit on the file) gets no more than this. */
static uint64_t memory_cap(void)
{
	const char *v = getenv("GPROF_AGENT_MAX_MB");
	unsigned long long mb;
	char *end;

	if (v == NULL || !*v)
		return AGENT_DEFAULT_MAX_BYTES;
	errno = 0;
	mb = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || mb < 1 || mb > (1ull << 20)) {
		agent_log("GPROF_AGENT_MAX_MB=%s is not a number of MB from 1 to 1048576: "
		          "the cap stays %llu MB", v, AGENT_DEFAULT_MAX_BYTES >> 20);
		return AGENT_DEFAULT_MAX_BYTES;
	}
	return (uint64_t)mb << 20;
}

/* IDLE -> WAIT_TIME | ARMED | OPEN, or a failed status. */
static void begin(const struct cmd *c)
{
	const struct msg_window *w = &c->win;
	char why[300];
	int64_t want_gpu = w->activities & ~(int64_t)MSG_ACT_NVTX;

	memset(&A.win, 0, sizeof(A.win));
	snprintf(A.win.trace_id, sizeof(A.win.trace_id), "%s", c->trace_id);
	A.win.iterations = w->iterations;
	A.win.duration_ms = w->duration_ms;
	A.win.roundup = w->iteration_roundup;
	A.win.start_iter = (uint64_t)w->start_iteration;
	A.win.activities = w->activities;
	A.win.start_at_ns = (uint64_t)w->start_at_us * 1000u;
	A.win.memory = w->memory_snapshot;
	A.win.max_bytes = memory_cap();
	if (c->max_bytes > 0 && (uint64_t)c->max_bytes < A.win.max_bytes)
		A.win.max_bytes = (uint64_t)c->max_bytes;
	A.win.cpu_bytes = A.win.max_bytes;
	atomic_fetch_add(&A.gen, 1);
	atomic_store(&A.bytes, 0);
	atomic_store(&A.dropped, 0);
	atomic_store(&A.arena_used, 0);
	atomic_store(&A.t_start, 0);
	atomic_store(&A.t_end, 0);
	atomic_store(&A.end_reason, END_NONE);
	atomic_store(&A.win_steps, 0);
	atomic_store(&A.prev_step_ns, 0);
	note[0] = '\0';

	/* CUPTI 13.0 crashed jobs with memcpy and memset both on (about one
	 * burst in 130 of a copy-heavy loop, inside libcupti: docs/AGENT.md):
	 * memset is left out, saying so, unless the job's owner allows it. */
	if ((want_gpu & MSG_ACT_MEMCPY) && (want_gpu & MSG_ACT_MEMSET) && !memset_allowed()) {
		want_gpu &= ~(int64_t)MSG_ACT_MEMSET;
		A.win.activities &= ~(int64_t)MSG_ACT_MEMSET;
		snprintf(note, sizeof(note), "memset left out: with memcpy on too, CUPTI 13.0 "
		         "crashes jobs (docs/AGENT.md); GPROF_CUPTI_MEMSET_WITH_MEMCPY=1 in the "
		         "job's environment allows it");
	}
	gpu_on = false;
	if (A.win.memory) {
		/* PyTorch records the allocator's history (memsnap.c): no CUPTI,
		 * and no CPU events, only the window's steps */
		if (memsnap_begin(c->trace_id, why, sizeof(why)) < 0) {
			agent_log("trace %s refused: %s", c->trace_id, why);
			status(c->trace_id, MSG_TS_FAILED, why, 0, 0, 0);
			return;
		}
		want_gpu = 0;
		note[0] = '\0';
		if (w->options != 0) {
			char names[160];

			msg_options_flags(w->options, names, sizeof(names));
			add_note("%s asked for, not recorded: a memory snapshot records the "
			         "allocator's history, not operators", names);
		}
	}
	if (want_gpu) {
		if (gpu_usable(why, sizeof(why))) {
			/* one budget: half for CUPTI's buffers (gpu.c counts them),
			 * half for the CPU side, which then also holds the range
			 * index the GPU projection needs (rec.c charges it) */
			if (gpu_start(want_gpu, A.win.max_bytes / 2, why, sizeof(why)) < 0) {
				agent_log("trace %s refused: %s", c->trace_id, why);
				status(c->trace_id, MSG_TS_FAILED, why, 0, 0, 0);
				return;
			}
			gpu_on = true;
			A.win.cpu_bytes = A.win.max_bytes - A.win.max_bytes / 2;
			A.win.index = true;
			/* an activity CUPTI would not turn on is named */
			gpu_left_out(why, sizeof(why));
			if (why[0])
				add_note("%s", why);
		} else {
			char acts[160];

			msg_activities_format(want_gpu, acts, sizeof(acts));
			add_note("CPU only (%s): NVTX ranges and iterations; %s not recorded", why,
			         acts);
		}
	}
	/* the CPU side's address space, before anything can record */
	if (!A.win.memory && rec_arena_new(A.win.cpu_bytes) < 0) {
		agent_log("trace %s: cannot reserve %llu MB for CPU events: none recorded",
		          c->trace_id, (unsigned long long)(A.win.cpu_bytes >> 20));
		snprintf(note + strlen(note), sizeof(note) - strlen(note), "%sno CPU events (no "
		         "memory for them)", note[0] ? "; " : "");
	}
	/* PyTorch operators: the Python helper polls these at each step; the
	 * job's owner may have turned them off, and what was asked is named */
	asked = w->options;
	ops_off = false;
	if (!A.win.memory) {
		char names[160], text[300];

		A.win.torch_opts = ops_opts(w->options);
		ops_off = !ops_begin(w->options);
		if (ops_off && msg_options_flags(w->options, names, sizeof(names)) > 0) {
			snprintf(text, sizeof(text), "%.160s asked for, not recorded: GPROF_TORCH_OPS=off "
			         "in the job's environment", names);
			ops_add_note(text); /* the trace's note, and so the status's */
		}
	}
	/* The range name is published last: rec.c reads it once armed. */
	snprintf(A.win.iter_range, sizeof(A.win.iter_range), "%s", c->range);
	/* The daemon chose the step every rank begins on; a process already
	 * past it begins on its next multiple of the roundup instead, and
	 * says so (its iteration numbers will not match the others'). */
	if (A.win.start_iter > 0 && A.win.start_iter <= atomic_load(&A.steps) &&
	    !c->range[0]) {
		snprintf(note + strlen(note), sizeof(note) - strlen(note), "%sstep %llu, where the "
		         "job's processes were to begin together, had passed here (at step %llu): "
		         "began at the next multiple of %lld", note[0] ? "; " : "",
		         (unsigned long long)A.win.start_iter,
		         (unsigned long long)atomic_load(&A.steps), (long long)A.win.roundup);
		A.win.start_iter = 0;
	}
	if (w->iterations > 0) {
		phase = P_ARMED;
		atomic_store(&A.armed_ns, agent_now_ns());
		atomic_store(&A.armed, 1);
		status(c->trace_id, MSG_TS_WAITING, NULL, 0, 0, 0);
	} else if (A.win.start_at_ns > agent_now_ns()) {
		phase = P_WAIT_TIME;
		status(c->trace_id, MSG_TS_WAITING, NULL, 0, 0, 0);
	} else {
		phase = P_OPEN;
		open_now(agent_now_ns());
		status(c->trace_id, MSG_TS_CAPTURING, NULL, 0, 0, 0);
	}
	agent_log("trace %s: %s %lld, gpu %s", c->trace_id,
	          w->iterations > 0 ? "iterations" : "duration ms",
	          (long long)(w->iterations > 0 ? w->iterations : w->duration_ms),
	          gpu_on ? "on" : "off");
}

void capture_queue_start(const struct msg_capture_start *cs)
{
	struct cmd *c;

	if (cmdq_len == CMDQ_MAX) {
		status(cs->trace_id, MSG_TS_FAILED, "busy: this process already has "
		       "8 trace requests waiting; ask again when they are done", 0, 0, 0);
		return;
	}
	c = &cmdq[(cmdq_head + cmdq_len++) % CMDQ_MAX];
	memset(c, 0, sizeof(*c));
	snprintf(c->trace_id, sizeof(c->trace_id), "%s", cs->trace_id);
	c->win = cs->win;
	c->win.iteration_range = NULL;
	if (cs->win.iteration_range)
		snprintf(c->range, sizeof(c->range), "%s", cs->win.iteration_range);
	c->max_bytes = cs->max_bytes;
	if (phase != P_IDLE) {
		char why[160];

		snprintf(why, sizeof(why), "queued behind trace %s in this process", A.win.trace_id);
		status(c->trace_id, MSG_TS_WAITING, why, 0, 0, 0);
	}
	agent_wake();
}

void capture_queue_cancel(const char *trace_id, const char *why)
{
	unsigned i, j;

	/* a queued start that has not begun just goes (the daemon has already
	 * given it its final state) */
	for (i = 0; i < cmdq_len; i++) {
		struct cmd *c = &cmdq[(cmdq_head + i) % CMDQ_MAX];

		if (strcmp(c->trace_id, trace_id) != 0)
			continue;
		for (j = i; j + 1 < cmdq_len; j++)
			cmdq[(cmdq_head + j) % CMDQ_MAX] = cmdq[(cmdq_head + j + 1) % CMDQ_MAX];
		cmdq_len--;
		agent_log("trace %s cancelled before it began: %s", trace_id, why ? why : "");
		return;
	}
	if (phase != P_IDLE && strcmp(trace_id, A.win.trace_id) == 0) {
		agent_log("trace %s cancelled: %s", trace_id, why ? why : "");
		rec_end(END_CANCEL); /* capture_tick finishes it */
	}
}

int capture_timeout_ms(void)
{
	uint64_t now = agent_now_ns(), due;
	int wait;

	if (phase == P_IDLE && cmdq_len > 0)
		return 0;
	if (phase != P_IDLE && A.win.memory && memsnap_pending(now, &wait))
		return wait;
	if (phase == P_WAIT_TIME)
		due = A.win.start_at_ns;
	else if (phase == P_ARMED && gpu_on)
		due = now + SHED_EVERY_NS;
	else if (phase == P_OPEN && A.win.duration_ms > 0 && atomic_load(&A.end_reason) == END_NONE)
		due = atomic_load(&A.t_start) + (uint64_t)A.win.duration_ms * 1000000u;
	else
		return -1;
	if (gpu_on && phase == P_WAIT_TIME && due > now + SHED_EVERY_NS)
		due = now + SHED_EVERY_NS;
	return due <= now ? 0 : (int)((due - now + 999999) / 1000000);
}

/* The daemon did not take the burst's file (fd): a named copy stays
 * (scratch_keep), so the data is not lost. */
static void keep(int fd, const char *what, const char *suffix)
{
	char path[600];
	int r = scratch_keep(fd, A.win.trace_id, suffix, path, sizeof(path));

	if (r == 0)
		agent_log("trace %s: %s kept at %s: the daemon is unreachable", A.win.trace_id,
		          what, path);
	else
		agent_log("trace %s: the daemon is unreachable, and the %s cannot be kept (%s): "
		          "lost", A.win.trace_id, what, strerror(-r));
}

/* The end of a memory-snapshot burst: the file Python wrote is uploaded
 * as the burst's file (memsnap.c), or the reason there is none is said. */
static void finish_memory(void)
{
	char why[400];
	int64_t sent = 0;
	struct stat st;
	int fd = memsnap_finish(why, sizeof(why));

	if (fd < 0) {
		agent_log("trace %s: %s", A.win.trace_id, why);
		status(A.win.trace_id, MSG_TS_FAILED, why, 0, 0, 0);
		return;
	}
	if (note[0]) {
		char said[sizeof(note) + 32];

		snprintf(said, sizeof(said), "memory snapshot; %s", note);
		status(A.win.trace_id, MSG_TS_UPLOADING, said, 0, 0,
		       fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0);
	} else
		status(A.win.trace_id, MSG_TS_UPLOADING, "memory snapshot", 0, 0,
		       fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0);
	if (out.upload(out.ctx, A.win.trace_id, fd, MSG_FMT_MEMORY_SNAPSHOT, &sent) == 0)
		agent_log("trace %s: memory snapshot delivered, %lld bytes", A.win.trace_id,
		          (long long)sent);
	else
		keep(fd, "memory snapshot", ".memory.pickle");
	close(fd); /* the file goes with it */
}

/* OPEN (ended) | ARMED | WAIT_TIME (cancelled) -> IDLE */
static void finish(void)
{
	int why_end = atomic_load(&A.end_reason);
	struct trace_result res = { 0 };
	char why[300];
	int64_t sent = 0;
	int fd = -1, r;

	atomic_store(&A.rec_on, 0);
	atomic_store(&A.armed, 0);
	/* from here on nothing in the process records for this burst */
	phase = P_IDLE;
	if (gpu_on)
		gpu_stop();
	if (why_end == END_CANCEL || why_end == END_EXIT) {
		if (A.win.memory)
			memsnap_discard();
		gpu_reset();
		goto out;
	}
	if (A.win.memory) {
		finish_memory();
		goto out;
	}
	/* the job's own operators, from its profiler's file (ops.c); asked
	 * for and no helper took the window: named in the trace's note
	 * (ops.c's gprof_note) and, with all of that note, in the status,
	 * which gprofctl's summary shows */
	if (!ops_collect(atomic_load(&A.t_start), atomic_load(&A.t_end)) && !ops_off) {
		char names[200], text[400];

		asked_names(names, sizeof(names));
		snprintf(text, sizeof(text), "%s asked for, not recorded: no PyTorch helper took this "
		         "window (python/gprof_agent, GPROF_TORCH_STEPS=1: it starts at an optimizer "
		         "step; gprofctl launch sets it)", names);
		if (names[0])
			ops_add_note(text);
	}
	if (ops_note()[0])
		add_note("%s", ops_note());
	if (why_end == END_CUT || (gpu_on && gpu_cut()))
		add_note("trace cut at the %llu MB limit", (unsigned long long)(A.win.max_bytes >> 20));
	status(A.win.trace_id, MSG_TS_WRITING, note[0] ? note : NULL, 0, 0, 0);
	/* a file with no name: nobody can take it first, and it goes with
	 * the process, whenever that ends (scratch.c) */
	if ((fd = scratch_new(why, sizeof(why))) < 0) {
		status(A.win.trace_id, MSG_TS_FAILED, why, 0, 0, 0);
		gpu_reset();
		goto out;
	}
	r = writer_write(fd, &res, why, sizeof(why));
	rec_arena_free(); /* written: its memory goes back before the upload's */
	gpu_reset();
	if (r < 0) {
		status(A.win.trace_id, MSG_TS_FAILED, why, 0, 0, 0);
		goto out;
	}
	status(A.win.trace_id, MSG_TS_UPLOADING, note[0] ? note : NULL,
	       (int64_t)res.events, (int64_t)res.dropped, (int64_t)res.bytes);
	if (out.upload(out.ctx, A.win.trace_id, fd, MSG_FMT_TRACE, &sent) == 0)
		agent_log("trace %s delivered: %llu events, %llu bytes, %llu dropped", A.win.trace_id,
		          (unsigned long long)res.events, (unsigned long long)sent,
		          (unsigned long long)res.dropped);
	else
		keep(fd, "trace", ".pt.trace.json.gz");
out:
	if (fd >= 0)
		close(fd);
	/* whatever was not written (a cancel, a failure) goes with the arena,
	 * so the next burst starts with nothing charged */
	{
		size_t ntk = 0;
		struct taken *tk = rec_take(&ntk);

		rec_free(tk, ntk);
		rec_arena_free();
	}
	ops_cancel();
	A.win.iter_range[0] = '\0';
}

void capture_tick(void)
{
	uint64_t now = agent_now_ns();

	if (phase == P_WAIT_TIME && now >= A.win.start_at_ns &&
	    atomic_load(&A.end_reason) == END_NONE) {
		phase = P_OPEN;
		open_now(now);
		status(A.win.trace_id, MSG_TS_CAPTURING, NULL, 0, 0, 0);
	}
	if (phase == P_ARMED && atomic_load(&A.t_start) != 0) {
		phase = P_OPEN; /* an application thread opened it at a boundary */
		status(A.win.trace_id, MSG_TS_CAPTURING, NULL, 0, 0, 0);
	}
	/* CUPTI is on ahead of the window: what it gave back meanwhile is
	 * not the window's, and goes before it fills the burst's budget */
	if (gpu_on && (phase == P_ARMED || phase == P_WAIT_TIME))
		gpu_shed();
	if (phase == P_OPEN && A.win.duration_ms > 0 && atomic_load(&A.end_reason) == END_NONE) {
		uint64_t end = atomic_load(&A.t_start) + (uint64_t)A.win.duration_ms * 1000000u;

		if (now >= end) {
			uint64_t zero = 0;

			atomic_compare_exchange_strong(&A.t_end, &zero, end);
			rec_end(END_DONE);
		}
	}
	/* a memory snapshot is written by the job's Python after the end */
	if (phase != P_IDLE && atomic_load(&A.end_reason) != END_NONE &&
	    !(A.win.memory && memsnap_pending(now, NULL)))
		finish();
	/* the next request, once this one is over */
	while (phase == P_IDLE && cmdq_len > 0) {
		struct cmd c = cmdq[cmdq_head];

		cmdq_head = (cmdq_head + 1) % CMDQ_MAX;
		cmdq_len--;
		begin(&c);
	}
}
