/*
 * gprofctl trace: capture a trace on every matching process of every host,
 * follow it live, download each file as soon as it is stored, and end with
 * a summary and an exit status that says whether everything arrived.
 *
 * Every daemon gets the same trace id (made here) and the same start: for
 * iteration traces the next iteration that is a multiple of R (default 10),
 * for duration traces a wall-clock time a second ahead when there are
 * several hosts. Files land in <output-dir>/<trace-id>/ under the daemons'
 * names (<host>_<pid>.<unix-ns>.pt.trace.json.gz).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "ctl.h"
#include "dlq.h"
#include "fmt.h"
#include "fsutil.h"
#include "report_run.h"

struct vproc {
	int64_t pid, rank, bytes;
	int state;
	char reason[1024]; /* why it failed, or the note on what it delivered */
	char file[MSG_NAME_MAX + 1];
	bool queued;
};

struct thost {
	bool sent, replied, ended;
	bool listing, to_start; /* a multi-host iteration trace's first phase */
	char hint[MSG_TEXT_MAX + 1];
	size_t n;
	struct vproc *procs;
	struct dlq q;
};

static struct {
	struct msg_trace_start req;
	int64_t pids[MSG_PIDS_MAX];
	char trace_id[MSG_TRACE_ID_MAX + 1];
	const char *outdir;
	bool tty, json;
	uv_timer_t progress;
	bool progress_on;
	uv_signal_t sigint, sigterm;
	bool cancelling;
	bool announced; /* the trace id was printed: a daemon has the trace */
	struct client *cl;
	/* Iteration traces over several hosts begin on one step everywhere:
	 * first every host's process_list (its processes' step_now), then
	 * trace_start with start_iteration set from the highest. */
	bool sync;
	size_t listed;
	int64_t step_max;
} T;

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: gprofctl [GLOBAL OPTIONS] trace (--job ID | --pid PID...)\n"
	        "                (--iterations N | --duration-ms MS) [--start-at TIME]\n"
	        "                [--iteration-roundup R] [--iteration-range NAME] [--activities LIST] [--process-limit N]\n"
	        "                [--output-dir DIR] [--trace-id ID] [--timeout S]\n"
	        "                [--record-shapes] [--profile-memory] [--with-stack] [--with-flops]\n"
	        "                [--with-modules] [--operators]\n"
	        "Captures a trace on every matching process of every host and downloads\n"
	        "it into DIR/<trace-id>/ (default ./traces).\n"
	        "  --job ID               processes of this job (GPROF_JOB_ID, SLURM_JOB_ID, ...)\n"
	        "  --pid PID              processes with this pid or ancestor (repeatable)\n"
	        "  --iterations N         capture N iterations\n"
	        "  --duration-ms MS       capture for MS milliseconds\n"
	        "  --start-at TIME        now, +SECONDS, or a Unix time (duration traces;\n"
	        "                         default: 1 s ahead with several hosts, else now)\n"
	        "  --iteration-roundup R  start at the next iteration that is a multiple of R\n"
	        "                         (iteration traces; default 10, so ranks start together)\n"
	        "  --iteration-range NAME count iterations as NVTX ranges of this name (agent)\n"
	        "  --activities LIST      kernel,memcpy,memset,cuda_runtime,cuda_driver,sync,\n"
	        "                         overhead,memory,nvtx (default: kernel,memcpy,\n"
	        "                         cuda_runtime,nvtx)\n"
	        "  --process-limit N      at most N processes per host (default 1000)\n"
	        "  --record-shapes        PyTorch operators' input shapes (\"Input Dims\")\n"
	        "  --profile-memory       PyTorch's allocator events ([memory]) per operator\n"
	        "  --with-stack           Python stacks of operators\n"
	        "  --with-flops           estimated FLOPs of matrix and convolution operators\n"
	        "  --with-modules         nn.Module scopes around operators\n"
	        "  --operators            PyTorch operators on the agent path, even before the\n"
	        "                         job's operator observer is built (by default only\n"
	        "                         from a built one; implied by --record-shapes,\n"
	        "                         --with-modules, --profile-memory; Kineto records\n"
	        "                         them always)\n"
	        "                         (these five: as torch.profiler's arguments of the same\n"
	        "                         names; a Kineto client gets them in its config, an agent\n"
	        "                         records what it can and notes what it left out)\n"
	        "  --timeout S            give up after S seconds (default 600)\n"
	        "  --report               then print what the traces say (gprofctl report on them)\n"
	        "  --memory-snapshot      instead of a trace, each PyTorch process records its CUDA\n"
	        "                         caching allocator's history for the window and hands back\n"
	        "                         the snapshot (<host>_<pid>_rank<R>.<ns>.memory.pickle, for\n"
	        "                         gprofctl report and python -m torch.cuda._memory_viz)\n"
	        "A process already capturing takes this trace when that one ends. Interrupting\n"
	        "gprofctl trace cancels the trace on every host. As soon as a daemon has the\n"
	        "trace, its id is printed on stderr (\"gprofctl trace: trace ID started ...\"),\n"
	        "terminal or not, so another command can end it: gprofctl cancel ID.\n"
	        "exit status: 0 every matched process delivered; 1 some did not (the summary says\n"
	        "which and why); 2 nothing matched (each host's registered processes are shown);\n"
	        "3 usage error or no host reachable; 5 cancelled (gprofctl cancel, or an\n"
	        "interrupt) before every process delivered, none failing otherwise.\n");
}

static char rb[24]; /* rank_text's buffer: one rank per printed line */

/* A rank for people: the number, or "-" when the process has none (an
 * unknown rank is never printed as -1). */
static const char *rank_text(int64_t rank, char *buf, size_t size)
{
	if (rank < 0)
		return "-";
	snprintf(buf, size, "%lld", (long long)rank);
	return buf;
}

/* A rank in JSON: the number, or null when unknown. */
static void rank_json(cJSON *o, int64_t rank)
{
	if (rank >= 0)
		jsonint_add(o, "rank", rank);
	else
		cJSON_AddNullToObject(o, "rank");
}

/* A whole number for option opt within lo..hi, as the user wrote it: out
 * of range (beyond int64 too, which strtoll would clamp) is said with the
 * text given and the limit. 0, or -1 with the error printed. */
static int parse_num(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end != 0) {
		fprintf(stderr, "gprofctl trace: %s %s is not a whole number\n", opt, s);
		return -1;
	}
	if (errno == ERANGE || v < lo || v > hi) {
		fprintf(stderr, "gprofctl trace: %s %s is out of range: give %lld to %lld\n", opt, s,
		        (long long)lo, (long long)hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* Whether dir can take the downloads: created if missing, and a file can
 * be made in it. Checked before any capture starts, so a typo does not
 * cost the traces. 0, or -1 with the error printed. */
static int check_outdir(const char *dir)
{
	char probe[4200];
	int r, fd;

	r = fsutil_mkdir_p(dir, 0755);
	if (r < 0) {
		fprintf(stderr, "gprofctl trace: --output-dir %s cannot be created: %s; nothing was "
		        "traced (choose a directory you can write)\n", dir, strerror(-r));
		return -1;
	}
	snprintf(probe, sizeof(probe), "%s/.gprofctl-probe-XXXXXX", dir);
	fd = mkstemp(probe);
	if (fd < 0) {
		fprintf(stderr, "gprofctl trace: --output-dir %s is not writable: %s; nothing was "
		        "traced (choose a directory you can write)\n", dir, strerror(errno));
		return -1;
	}
	close(fd);
	unlink(probe);
	return 0;
}

static const char *state_word(int s)
{
	return msg_tstate_name(s);
}

/* One line of progress: on a terminal redrawn in place, else not at all
 * (state changes are printed as lines instead). */
static void draw(void)
{
	size_t i, k, hosts_done = 0, counts[MSG_TS_SKIPPED + 1] = { 0 }, total = 0;
	uint64_t bytes = 0;
	char b[32];

	for (i = 0; i < T.cl->n; i++) {
		struct host *h = &T.cl->hosts[i];
		struct thost *t = h->ud;

		if (h->done || h->error[0])
			hosts_done++;
		for (k = 0; k < t->n; k++)
			if (t->procs[k].state >= 0 && t->procs[k].state <= MSG_TS_SKIPPED)
				counts[t->procs[k].state]++;
		total += t->n;
		bytes += t->q.bytes;
	}
	fmt_bytes(bytes, b, sizeof(b));
	fprintf(stderr, "\r\033[K%s: hosts %zu/%zu | %zu processes: %zu capturing, %zu writing, "
	        "%zu uploading, %zu done, %zu failed | %s downloaded", T.trace_id, hosts_done,
	        T.cl->n, total - counts[MSG_TS_SKIPPED], counts[MSG_TS_CAPTURING] +
	        counts[MSG_TS_WAITING] + counts[MSG_TS_MATCHED], counts[MSG_TS_WRITING],
	        counts[MSG_TS_UPLOADING], counts[MSG_TS_DONE],
	        counts[MSG_TS_FAILED] + counts[MSG_TS_CANCELLED], b);
}

static void on_progress(uv_timer_t *t)
{
	(void)t;
	draw();
}

static void maybe_done(struct host *h)
{
	struct thost *t = h->ud;

	if (t->ended && dlq_idle(&t->q))
		host_done(h);
}

static void send_start(struct host *h)
{
	struct thost *t = h->ud;
	struct msg m;

	if (T.cancelling) {
		host_done(h); /* interrupted before this host was asked */
		return;
	}
	msg_init(&m, MSG_TRACE_START, 0);
	m.u.trace_start = T.req;
	if (host_send(h, &m) == 0)
		t->sent = true;
}

/* Every host has listed its processes (or failed): the common step is
 * the first multiple of the roundup at least 5 steps past the most
 * advanced process anywhere (the daemons' estimates; the margin covers
 * the time trace_start takes to arrive), then every waiting host starts. */
static void sync_maybe(void)
{
	int64_t r = T.req.win.iteration_roundup > 0 ? T.req.win.iteration_roundup : 1;
	size_t i;

	if (T.listed < T.cl->n)
		return;
	if (T.step_max > 0)
		T.req.win.start_iteration = (T.step_max + 5 + r - 1) / r * r;
	for (i = 0; i < T.cl->n; i++) {
		struct host *h = &T.cl->hosts[i];
		struct thost *t = h->ud;

		if (t->to_start && !h->done) {
			t->to_start = false;
			send_start(h);
		}
	}
}

/* One page of the job's process list, from offset (a long one comes in
 * pages). */
static void list_from(struct host *h, int64_t offset)
{
	struct thost *t = h->ud;
	struct msg m;

	msg_init(&m, MSG_PROCESS_LIST, 0);
	m.u.process_list.job_id = T.req.job_id;
	m.u.process_list.offset = offset;
	if (host_send(h, &m) == 0)
		t->listing = true;
}

static void ready(struct host *h)
{
	if (!T.sync || T.cancelling) {
		send_start(h);
		return;
	}
	list_from(h, 0);
}

/* Ctrl-C (or SIGTERM): cancel the trace everywhere it was asked for, and
 * keep following until every host says it ended; a second one quits. */
static void on_signal(uv_signal_t *sig, int signum)
{
	size_t i;

	(void)sig;
	if (T.cancelling) {
		fprintf(stderr, "\ngprofctl trace: interrupted again; trace %s is left to its "
		        "timeout (gprofctl cancel %s ends it)\n", T.trace_id, T.trace_id);
		_exit(128 + signum);
	}
	T.cancelling = true;
	fprintf(stderr, "\ngprofctl trace: cancelling trace %s on every host (interrupt again to "
	        "quit at once)\n", T.trace_id);
	for (i = 0; i < T.cl->n; i++) {
		struct host *h = &T.cl->hosts[i];
		struct thost *t = h->ud;
		struct msg m;

		if (h->done || !t->sent)
			continue;
		msg_init(&m, MSG_TRACE_CANCEL, 0);
		m.u.trace_ref.trace_id = T.trace_id;
		host_send(h, &m);
	}
}

static void update(struct host *h, const struct msg_trace_info *info)
{
	struct thost *t = h->ud;
	size_t i, k;

	for (i = 0; i < info->procs.n; i++) {
		const struct msg_trace_proc *p = &info->procs.v[i];

		for (k = 0; k < t->n; k++)
			if (t->procs[k].pid == p->pid)
				break;
		if (k == t->n)
			continue;
		if (t->procs[k].state != p->state && !T.tty && !T.json)
			fprintf(stderr, "%s: pid %lld rank %s: %s%s%s\n", h->label, (long long)p->pid,
			        rank_text(p->rank, rb, sizeof(rb)), state_word(p->state), p->reason ? ": " : "",
			        p->reason ? p->reason : "");
		t->procs[k].state = p->state;
		t->procs[k].bytes = p->bytes;
		if (p->reason)
			snprintf(t->procs[k].reason, sizeof(t->procs[k].reason), "%s", p->reason);
		if (p->file)
			snprintf(t->procs[k].file, sizeof(t->procs[k].file), "%s", p->file);
		if (p->state == MSG_TS_DONE && p->file && !t->procs[k].queued) {
			t->procs[k].queued = true;
			dlq_add(&t->q, T.trace_id, p->file, &t->procs[k]);
		}
	}
	if (info->state != MSG_TRACE_RUNNING)
		t->ended = true;
	dlq_pump(h, &t->q);
	maybe_done(h);
}

/* The trace id, on stderr, once: as soon as the first daemon has the
 * trace (it can be cancelled from then on), whether stderr is a terminal
 * or not, so a script can end it with gprofctl cancel. */
static void announce(struct host *h)
{
	struct thost *t = h->ud;

	if (T.announced)
		return;
	T.announced = true;
	fprintf(stderr, "%sgprofctl trace: trace %s started (%zu process%s on %s%s); "
	        "gprofctl cancel %s ends it\n", T.tty ? "\r\033[K" : "", T.trace_id, t->n,
	        t->n == 1 ? "" : "es", h->label, T.cl->n > 1 ? ", other hosts to follow" : "",
	        T.trace_id);
}

static void message(struct host *h, const struct msg *m)
{
	struct thost *t = h->ud;
	size_t i;

	if (dlq_message(h, &t->q, m)) {
		maybe_done(h);
		return;
	}
	switch (m->type) {
	case MSG_PROCESS_LIST_REPLY:
		if (!t->listing)
			break;
		t->listing = false;
		for (i = 0; i < m->u.process_list_reply.procs.n; i++) {
			const struct msg_proc_info *p = &m->u.process_list_reply.procs.v[i];

			if (!p->launcher && p->step_now > T.step_max)
				T.step_max = p->step_now;
		}
		if (m->u.process_list_reply.next_offset > 0 && m->u.process_list_reply.procs.n > 0) {
			list_from(h, m->u.process_list_reply.next_offset);
			break;
		}
		t->to_start = true;
		T.listed++;
		sync_maybe();
		break;
	case MSG_ERROR:
		if (!t->replied || m->id == 0) {
			host_fail(h, "%s", m->u.error.message);
			return;
		}
		break;
	case MSG_TRACE_START_REPLY:
		t->replied = true;
		t->n = m->u.trace_start_reply.procs.n;
		t->procs = calloc(t->n + 1, sizeof(*t->procs));
		for (i = 0; i < t->n; i++) {
			t->procs[i].pid = m->u.trace_start_reply.procs.v[i].pid;
			t->procs[i].rank = m->u.trace_start_reply.procs.v[i].rank;
			t->procs[i].state = m->u.trace_start_reply.procs.v[i].state;
			if (m->u.trace_start_reply.procs.v[i].reason)
				snprintf(t->procs[i].reason, sizeof(t->procs[i].reason), "%s",
				         m->u.trace_start_reply.procs.v[i].reason);
			if (t->procs[i].state == MSG_TS_SKIPPED && !T.tty && !T.json)
				fprintf(stderr, "%s: pid %lld rank %s: %s\n", h->label,
				        (long long)t->procs[i].pid, rank_text(t->procs[i].rank, rb, sizeof(rb)),
				        t->procs[i].reason);
		}
		if (t->n == 0) {
			snprintf(t->hint, sizeof(t->hint), "%s", m->u.trace_start_reply.hint ?
			         m->u.trace_start_reply.hint : "nothing matched");
			host_done(h);
		} else
			announce(h);
		break;
	case MSG_TRACE_PROGRESS:
		update(h, &m->u.trace_info);
		break;
	default:
		break;
	}
}

static void chunk(struct host *h, const struct frame *f)
{
	struct thost *t = h->ud;

	dlq_chunk(h, &t->q, f);
}

static void failed(struct host *h, const char *why)
{
	struct thost *t = h->ud;

	if (T.sync && (t->listing || (!t->to_start && !t->sent))) {
		t->listing = false; /* counts as listed: the others must not wait on it */
		T.listed++;
		sync_maybe();
	}
	dlq_abort(&t->q, why);
	if (!T.tty && !T.json)
		fprintf(stderr, "%s: %s\n", h->label, why);
}

static void finished(struct client *cl)
{
	(void)cl;
	uv_close((uv_handle_t *)&T.sigint, NULL);
	uv_close((uv_handle_t *)&T.sigterm, NULL);
	if (T.progress_on) {
		uv_timer_stop(&T.progress);
		uv_close((uv_handle_t *)&T.progress, NULL);
		draw();
		fprintf(stderr, "\n");
	}
}

static int parse_start(const char *s, int64_t *us)
{
	struct timespec ts;
	char *end;
	double v;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (strcmp(s, "now") == 0) {
		*us = 0;
		return 0;
	}
	v = strtod(s[0] == '+' ? s + 1 : s, &end);
	if (*end || v < 0)
		return -1;
	if (s[0] == '+')
		*us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + (int64_t)(v * 1e6);
	else
		*us = (int64_t)(v * 1e6);
	return 0;
}

/* Prints the summary; returns the exit status. */
static int summarize(struct client *cl)
{
	size_t i, k, matched = 0, delivered = 0, reached = 0, skipped = 0, cancelled = 0;
	bool failures = false;
	cJSON *root = NULL, *hosts = NULL;
	char b[32];

	if (T.json) {
		root = cJSON_CreateObject();
		cJSON_AddStringToObject(root, "trace_id", T.trace_id);
		cJSON_AddStringToObject(root, "output_dir", T.outdir);
		hosts = cJSON_AddArrayToObject(root, "hosts");
	}
	for (i = 0; i < cl->n; i++) {
		struct host *h = &cl->hosts[i];
		struct thost *t = h->ud;
		cJSON *jh = NULL, *jp = NULL;

		if (T.json) {
			jh = cJSON_CreateObject();
			cJSON_AddStringToObject(jh, "host", h->label);
			cJSON_AddItemToArray(hosts, jh);
			jp = cJSON_AddArrayToObject(jh, "processes");
		}
		if (t->replied)
			reached++;
		if (!t->replied) {
			failures = true;
			if (T.json)
				cJSON_AddStringToObject(jh, "error", h->error);
			else
				printf("  %-20s %s\n", h->label, h->error);
			continue;
		}
		if (t->n == 0) {
			if (T.json)
				cJSON_AddStringToObject(jh, "hint", t->hint);
			else
				printf("  %-20s nothing matched: %s\n", h->label, t->hint);
			continue;
		}
		if (h->error[0]) {
			failures = true;
			if (T.json)
				cJSON_AddStringToObject(jh, "error", h->error);
			else
				printf("  %-20s %s\n", h->label, h->error);
		}
		for (k = 0; k < t->n; k++) {
			struct vproc *p = &t->procs[k];
			struct dlitem *it = NULL;
			size_t j;

			/* a launcher the daemon left out: said, and no failure */
			if (p->state == MSG_TS_SKIPPED) {
				skipped++;
				if (T.json) {
					cJSON *o = cJSON_CreateObject();

					jsonint_add(o, "pid", p->pid);
					rank_json(o, p->rank);
					cJSON_AddStringToObject(o, "state", "skipped");
					cJSON_AddStringToObject(o, "reason", p->reason);
					cJSON_AddItemToArray(jp, o);
				} else
					printf("  %-20s pid %-8lld rank %-4s %s\n", h->label,
					       (long long)p->pid, rank_text(p->rank, rb, sizeof(rb)), p->reason);
				continue;
			}
			matched++;
			for (j = 0; j < t->q.n; j++)
				if (t->q.items[j].tag == p)
					it = &t->q.items[j];
			if (it && it->done)
				delivered++;
			else if (p->state == MSG_TS_CANCELLED)
				cancelled++; /* asked for: not a failure (exit 5) */
			else
				failures = true;
			if (T.json) {
				cJSON *o = cJSON_CreateObject();

				jsonint_add(o, "pid", p->pid);
				rank_json(o, p->rank);
				cJSON_AddStringToObject(o, "state", it && it->done ? "delivered" :
				                        state_word(p->state));
				if (it && it->done) {
					cJSON_AddStringToObject(o, "file", it->path);
					if (p->reason[0])
						cJSON_AddStringToObject(o, "note", p->reason);
				} else
					cJSON_AddStringToObject(o, "reason", it && it->failed ? it->error :
					                        p->reason[0] ? p->reason :
					                        h->error[0] ? h->error : "not delivered");
				jsonint_add(o, "bytes", p->bytes);
				cJSON_AddItemToArray(jp, o);
				continue;
			}
			if (it && it->done) {
				fmt_bytes((uint64_t)p->bytes, b, sizeof(b));
				printf("  %-20s pid %-8lld rank %-4s %s (%s)\n", h->label, (long long)p->pid,
				       rank_text(p->rank, rb, sizeof(rb)), it->path, b);
				if (p->reason[0])
					printf("  %-20s   note: %s\n", "", p->reason);
			} else if (p->state == MSG_TS_CANCELLED)
				printf("  %-20s pid %-8lld rank %-4s CANCELLED: %s\n", h->label,
				       (long long)p->pid, rank_text(p->rank, rb, sizeof(rb)),
				       p->reason[0] ? p->reason : "cancelled");
			else
				printf("  %-20s pid %-8lld rank %-4s FAILED (%s): %s\n", h->label,
				       (long long)p->pid, rank_text(p->rank, rb, sizeof(rb)), state_word(p->state),
				       it && it->failed ? it->error : p->reason[0] ? p->reason :
				       h->error[0] ? h->error : "not delivered");
		}
	}
	{
		int code = reached == 0 ? EXIT_USAGE : failures ? EXIT_FAILED :
		           cancelled ? EXIT_CANCELLED : matched == 0 ? EXIT_NOMATCH : EXIT_OK;

		if (T.json) {
			char *text;

			jsonint_add(root, "matched", matched);
			jsonint_add(root, "delivered", delivered);
			jsonint_add(root, "skipped", skipped);
			jsonint_add(root, "cancelled", cancelled);
			jsonint_add(root, "exit", code);
			text = cJSON_Print(root);
			printf("%s\n", text);
			cJSON_free(text);
			cJSON_Delete(root);
		} else
			printf("trace %s: %zu of %zu matched process%s delivered to %s/%s/%s%s%s\n",
			       T.trace_id, delivered, matched, matched == 1 ? "" : "es", T.outdir,
			       T.trace_id, reached == 0 ? " (no host was reachable: see above)" :
			       matched == 0 ? (reached < cl->n ? " (nothing matched on the hosts "
			       "reached)" : " (nothing matched on any host)") : "",
			       skipped ? " (launchers left out: see above)" : "",
			       cancelled ? "; CANCELLED (see above)" : "");
		return code;
	}
}

/* getopt_long's flag target for the profiler options (one at a time) */
static int opt_bit;

int cmd_trace(struct opts *o, int argc, char **argv)
{
	enum { O_JOB = 256, O_PID, O_ITER, O_DUR, O_START, O_ROUND, O_ACT, O_LIMIT, O_OUT, O_TIMEOUT,
	       O_ID, O_RANGE, O_REPORT, O_OPT, O_MEMSNAP };
	static const struct option topts[] = {
		{ "job", required_argument, NULL, O_JOB },
		{ "pid", required_argument, NULL, O_PID },
		{ "iterations", required_argument, NULL, O_ITER },
		{ "duration-ms", required_argument, NULL, O_DUR },
		{ "start-at", required_argument, NULL, O_START },
		{ "iteration-roundup", required_argument, NULL, O_ROUND },
		{ "iteration-range", required_argument, NULL, O_RANGE },
		{ "activities", required_argument, NULL, O_ACT },
		{ "process-limit", required_argument, NULL, O_LIMIT },
		{ "output-dir", required_argument, NULL, O_OUT },
		{ "trace-id", required_argument, NULL, O_ID },
		{ "report", no_argument, NULL, O_REPORT },
		{ "memory-snapshot", no_argument, NULL, O_MEMSNAP },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		/* the profiler options: flag points at the bit (MSG_OPT_*) */
		{ "record-shapes", no_argument, &opt_bit, MSG_OPT_RECORD_SHAPES },
		{ "profile-memory", no_argument, &opt_bit, MSG_OPT_PROFILE_MEMORY },
		{ "with-stack", no_argument, &opt_bit, MSG_OPT_WITH_STACK },
		{ "with-flops", no_argument, &opt_bit, MSG_OPT_WITH_FLOPS },
		{ "with-modules", no_argument, &opt_bit, MSG_OPT_WITH_MODULES },
		{ "operators", no_argument, &opt_bit, MSG_OPT_OPERATORS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct client_ops ops = { ready, message, chunk, failed, finished };
	const char *start = NULL;
	bool roundup_given = false, report = false;
	struct client cl;
	struct thost *hs;
	struct perr err;
	struct msg tmp;
	double timeout = 600;
	char *end;
	size_t i;
	int c, code;

	memset(&T, 0, sizeof(T));
	msg_init(&tmp, MSG_TRACE_START, 0);
	T.req = tmp.u.trace_start;
	T.req.pids.v = T.pids;
	T.outdir = "traces";
	while ((c = getopt_long(argc, argv, "h", topts, NULL)) != -1) {
		switch (c) {
		case 0: /* a profiler option: getopt stored its bit */
			T.req.win.options |= opt_bit;
			break;
		case O_JOB:
			T.req.job_id = optarg;
			break;
		case O_PID:
			if (T.req.pids.n == MSG_PIDS_MAX) {
				fprintf(stderr, "gprofctl trace: more than %d --pid\n", MSG_PIDS_MAX);
				return EXIT_USAGE;
			}
			if (parse_num("--pid", optarg, 1, 4194304, &T.pids[T.req.pids.n]) < 0)
				return EXIT_USAGE;
			T.req.pids.n++;
			break;
		case O_ITER:
			if (parse_num("--iterations", optarg, 1, 1000000, &T.req.win.iterations) < 0)
				return EXIT_USAGE;
			break;
		case O_DUR:
			if (parse_num("--duration-ms", optarg, 1, 86400000, &T.req.win.duration_ms) < 0)
				return EXIT_USAGE;
			break;
		case O_START:
			start = optarg;
			break;
		case O_ROUND:
			roundup_given = true;
			if (parse_num("--iteration-roundup", optarg, 0, 1000000,
			              &T.req.win.iteration_roundup) < 0)
				return EXIT_USAGE;
			break;
		case O_RANGE:
			T.req.win.iteration_range = optarg;
			break;
		case O_ACT:
			T.req.win.activities = msg_activities_parse(optarg, &err);
			if (T.req.win.activities < 0) {
				fprintf(stderr, "gprofctl trace: %s\n", err.msg);
				return EXIT_USAGE;
			}
			break;
		case O_LIMIT:
			if (parse_num("--process-limit", optarg, 1, 1000000, &T.req.process_limit) < 0)
				return EXIT_USAGE;
			break;
		case O_OUT:
			T.outdir = optarg;
			break;
		case O_REPORT:
			report = true;
			break;
		case O_MEMSNAP:
			T.req.win.memory_snapshot = true;
			break;
		case O_ID:
			snprintf(T.trace_id, sizeof(T.trace_id), "%s", optarg);
			break;
		case O_TIMEOUT:
			timeout = strtod(optarg, &end);
			if (*end || timeout <= 0) {
				fprintf(stderr, "gprofctl trace: --timeout %s is not a positive number "
				        "of seconds\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gprofctl trace: unexpected argument \"%s\"\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (T.req.job_id == NULL && T.req.pids.n == 0) {
		fprintf(stderr, "gprofctl trace: name the processes: --job ID or --pid PID\n");
		return EXIT_USAGE;
	}
	if ((T.req.win.iterations > 0) == (T.req.win.duration_ms > 0)) {
		fprintf(stderr, "gprofctl trace: give exactly one of --iterations and "
		        "--duration-ms\n");
		return EXIT_USAGE;
	}
	if (T.req.win.iterations > 0 && start != NULL) {
		fprintf(stderr, "gprofctl trace: --start-at is for duration traces; iteration "
		        "traces start together through --iteration-roundup\n");
		return EXIT_USAGE;
	}
	if (T.req.win.duration_ms > 0 && roundup_given) {
		fprintf(stderr, "gprofctl trace: --iteration-roundup is for iteration traces\n");
		return EXIT_USAGE;
	}
	if (T.req.win.iterations > 0 && !roundup_given)
		T.req.win.iteration_roundup = 10;
	if (start != NULL && parse_start(start, &T.req.win.start_at_us) < 0) {
		fprintf(stderr, "gprofctl trace: --start-at %s: use now, +SECONDS or a Unix time\n",
		        start);
		return EXIT_USAGE;
	}
	if (start == NULL && T.req.win.duration_ms > 0 && o->nhosts > 1)
		parse_start("+1", &T.req.win.start_at_us);
	if (T.trace_id[0] == 0)
		msg_trace_id_new(T.trace_id, sizeof(T.trace_id));
	T.req.trace_id = T.trace_id;
	T.req.timeout_ms = (int64_t)(timeout * 1000);
	T.req.follow = true;
	{
		/* the protocol's own limits (proto/schema.c), checked once here
		 * rather than as one failure per host */
		struct pbuf b;

		msg_init(&tmp, MSG_TRACE_START, 1);
		tmp.u.trace_start = T.req;
		pbuf_init(&b, 0);
		code = msg_encode(&b, &tmp, &err);
		pbuf_deinit(&b);
		if (code < 0) {
			fprintf(stderr, "gprofctl trace: %s\n", err.msg);
			return EXIT_USAGE;
		}
	}
	if (check_outdir(T.outdir) < 0)
		return EXIT_USAGE;
	if (o->timeout_s == 0)
		o->timeout_s = timeout + 60; /* the daemons time out first; then downloads */
	T.json = o->json;
	T.tty = !o->json && isatty(STDERR_FILENO);
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	T.cl = &cl;
	T.sync = cl.n > 1 && T.req.win.iterations > 0 && T.req.win.iteration_range == NULL &&
	         T.req.job_id != NULL && T.req.pids.n == 0;
	hs = calloc(cl.n, sizeof(*hs));
	for (i = 0; i < cl.n; i++) {
		hs[i].q.dir = T.outdir;
		cl.hosts[i].ud = &hs[i];
	}
	uv_signal_init(&cl.loop, &T.sigint);
	uv_signal_start(&T.sigint, on_signal, SIGINT);
	uv_signal_init(&cl.loop, &T.sigterm);
	uv_signal_start(&T.sigterm, on_signal, SIGTERM);
	if (T.tty) {
		uv_timer_init(&cl.loop, &T.progress);
		uv_timer_start(&T.progress, on_progress, 0, 250);
		T.progress_on = true;
	}
	client_run(&cl);
	code = summarize(&cl);
	if (report && !o->json) {
		/* what the traces say, after where they are (gprofctl report) */
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s/%s", T.outdir, T.trace_id);
		printf("\n");
		fflush(stdout);
		if (report_run_dir(dir, false) != EXIT_OK && code == EXIT_OK)
			code = EXIT_FAILED;
	}
	for (i = 0; i < cl.n; i++) {
		dlq_free(&hs[i].q);
		free(hs[i].procs);
	}
	free(hs);
	client_deinit(&cl);
	return code;
}
