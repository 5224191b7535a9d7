/*
 * writer.c: writes one burst as Kineto's Chrome-trace JSON
 * (shared/TRACE_FORMAT.md) into a gzip file, in one streaming pass, through
 * the trace stream of tw.c. capture.c calls writer_write once per burst,
 * after the window's end and gpu_stop; it calls gpu_events.c and
 * gpu_meta.c for the GPU's part of the document.
 *
 * Order in the file: schemaVersion, deviceProperties, every metadata key
 * (distributedInfo with a space after "rank":, trace_id, host_name, CUDA
 * versions, gprof's dropped/cut counts), displayTimeUnit,
 * baseTimeNanoseconds, then traceEvents: the CPU events of every thread
 * buffer (ranges, marks, ProfilerStep#<n>), CUPTI's events (gpu.c: API
 * calls, kernels, copies, sets, syncs, flows), the GPU projection of each
 * NVTX range (gpu_user_annotation: only spans that nest on their stream as
 * their ranges do, see tw_write_projections), notes on what was left out
 * (gprof_note), the process/thread/stream rows, and "Record Window End";
 * last traceName.
 *
 * Ownership: the thread buffers' chunks are taken (rec_take: a pointer
 * swap under each buffer's lock, so application threads never wait on
 * this file's work); their memory is the burst's arena, unmapped by
 * capture.c once this returns. Nothing is copied: events are
 * written from the chunks. The range index (for the GPU projection, only
 * with GPU kinds on) and step_row's boundaries live for one writer_write
 * call, and their bytes were charged to the burst's budget when the events
 * were recorded (REC_RANGE_RESERVE, REC_STEP_RESERVE), so the writer's
 * memory is sized from the budget, not from what arrived.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "gpu.h"
#include "gpu_events.h"
#include "ops.h"
#include "gpu_meta.h"
#include "rec.h"
#include "state.h"
#include "tw.h"
#include "writer.h"

/* Kineto's base-time rule: floor to a multiple of 7,889,238 s, so ranks and
 * hosts started within ~3 months share the base. */
#define BASE_QUANTUM_NS (7889238ull * 1000000000ull)
/* A thread's iteration row when its ranges cross iteration boundaries
 * (step_row): Linux thread ids stay below 2^22, so bit 30 is free. */
#define ITER_ROW(tid) ((tid) | 0x40000000)

/* What rec.c reserved for each iteration is what step_row holds for it:
 * its two boundaries, and qsort's scratch copy of them. */
_Static_assert(4 * sizeof(uint64_t) <= REC_STEP_RESERVE,
               "step_row holds more per iteration than rec.c reserves (rec.h)");

/* Every CPU event of a taken buffer, chunk by chunk. */
#define FOR_EACH_EV(e, c, i, head) \
	for ((c) = (head); (c) != NULL; (c) = (c)->next) \
		for ((i) = 0; (i) < (c)->nev && ((e) = &(c)->ev[(i)], 1); (i)++)

/* ---- CPU events ---- */

/* Events recorded after the window's end (a duration timer fires a
 * little late; a thread may be mid-event when recording stops) are not
 * part of the window. */
static bool in_window(const struct cev *e, uint64_t t0, uint64_t t1)
{
	return e->start_ns >= t0 && e->end_ns <= t1;
}

/* The range index, for the GPU projection: only when GPU kinds are on (no
 * kernel to project otherwise), and then every range's entry was charged
 * to the budget when it was recorded (REC_RANGE_RESERVE). */
static void collect_ranges(struct tw *w, const struct taken *tk, size_t ntk, uint64_t t0,
                           uint64_t t1)
{
	const struct evchunk *c;
	const struct cev *e;
	size_t i, n = 0;
	uint32_t j;

	if (!A.win.index)
		return;
	for (i = 0; i < ntk; i++)
		FOR_EACH_EV(e, c, j, tk[i].head)
			n += e->kind == CEV_RANGE && in_window(e, t0, t1);
	w->r = calloc(n ? n : 1, sizeof(*w->r));
	if (w->r == NULL)
		return;
	for (i = 0; i < ntk; i++) {
		FOR_EACH_EV(e, c, j, tk[i].head) {
			if (e->kind != CEV_RANGE || !in_window(e, t0, t1))
				continue;
			w->r[w->nr++] = (struct rng){
				.tid = tk[i].tid, .start = e->start_ns, .end = e->end_ns, .id = e->id,
				.name = e->name, .len = e->name_len, .domain = e->domain };
		}
	}
	tw_index_ranges(w);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The row a thread's ProfilerStep# events go on. Normally the stepping
 * thread's own, as Kineto does; but when one of that thread's ranges
 * crosses an iteration boundary (an NVTX range around the whole training
 * step, with the optimizer hook's boundary inside it), the two would
 * overlap on one row and Perfetto drops one of them: then the thread's
 * iterations get a row of their own, "iterations (thread N)".
 */
static int64_t step_row(const struct taken *t, uint64_t t0, uint64_t t1)
{
	const struct evchunk *c;
	const struct cev *e;
	uint64_t *b = NULL;
	size_t nb = 0;
	int64_t row = t->tid;
	uint32_t j;

	FOR_EACH_EV(e, c, j, t->head)
		if (e->kind == CEV_STEP && in_window(e, t0, t1))
			nb += 2;
	if (nb == 0 || (b = malloc(nb * sizeof(*b))) == NULL)
		return row;
	nb = 0;
	FOR_EACH_EV(e, c, j, t->head)
		if (e->kind == CEV_STEP && in_window(e, t0, t1)) {
			b[nb++] = e->start_ns;
			b[nb++] = e->end_ns;
		}
	qsort(b, nb, sizeof(*b), cmp_u64);
	if (ops_crosses(t->tid, b, nb)) /* Optimizer.step, whose hook steps */
		row = ITER_ROW(t->tid);
	FOR_EACH_EV(e, c, j, t->head) {
		size_t lo = 0, hi = nb;

		if (row != t->tid)
			break;
		if (e->kind != CEV_RANGE || !in_window(e, t0, t1))
			continue;
		while (lo < hi) { /* the first boundary after the range's start */
			size_t mid = (lo + hi) / 2;

			if (b[mid] <= e->start_ns)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nb && b[lo] < e->end_ns)
			row = ITER_ROW(t->tid);
	}
	free(b);
	return row;
}

static void write_cpu(struct tw *w, const struct taken *tk, size_t ntk, uint64_t t0,
                      uint64_t t1)
{
	const struct evchunk *c;
	const struct cev *e;
	char step[40];
	uint32_t j;
	size_t i;

	for (i = 0; i < ntk; i++) {
		int64_t srow = step_row(&tk[i], t0, t1);

		tw_thread(w, tk[i].tid);
		if (srow != tk[i].tid)
			tw_thread(w, (int)srow);
		FOR_EACH_EV(e, c, j, tk[i].head) {
			const char *dn;

			if (!in_window(e, t0, t1))
				continue;
			if (e->kind == CEV_STEP) {
				int n = snprintf(step, sizeof(step), "ProfilerStep#%llu",
				                 (unsigned long long)e->id);

				tw_x(w, "user_annotation", step, (size_t)n, A.pid, srow,
				     e->start_ns, e->end_ns);
				tw_put(w, '}');
				continue;
			}
			if (e->kind == CEV_MARK) {
				tw_event(w);
				tw_lit(w, "\"ph\":\"i\",\"s\":\"t\",\"cat\":\"user_annotation\",\"name\":");
				tw_str(w, e->name, e->name_len);
				tw_lit(w, ",\"pid\":");
				tw_int(w, A.pid);
				tw_lit(w, ",\"tid\":");
				tw_int(w, tk[i].tid);
				tw_lit(w, ",\"ts\":");
				tw_ts(w, e->start_ns);
			} else {
				tw_x(w, "user_annotation", e->name, e->name_len,
				     A.pid, tk[i].tid, e->start_ns, e->end_ns);
				tw_lit(w, ",\"args\":{\"External id\":");
				tw_int(w, (int64_t)e->id);
				if (e->domain && (dn = rec_domain_name(e->domain)) != NULL) {
					tw_lit(w, ",\"domain\":");
					tw_str(w, dn, (size_t)-1);
				}
				tw_put(w, '}');
			}
			tw_put(w, '}');
		}
	}
}

static void comm_of(int tid, char *out, size_t n)
{
	char path[64];
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), tid ? "/proc/self/task/%d/comm" : "/proc/self/comm", tid);
	out[0] = '\0';
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	k = read(fd, out, n - 1);
	close(fd);
	out[k > 0 ? k : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

static void meta(struct tw *w, const char *what, int64_t pid, int64_t tid, const char *key,
                 const char *sval, int64_t ival)
{
	tw_event(w);
	tw_lit(w, "\"ph\":\"M\",\"name\":\"");
	tw_raw(w, what, strlen(what));
	tw_lit(w, "\",\"pid\":");
	tw_int(w, pid);
	tw_lit(w, ",\"tid\":");
	tw_int(w, tid);
	tw_lit(w, ",\"ts\":0,\"args\":{\"");
	tw_raw(w, key, strlen(key));
	tw_lit(w, "\":");
	if (sval)
		tw_str(w, sval, (size_t)-1);
	else
		tw_int(w, ival);
	tw_lit(w, "}}");
}

static void write_rows(struct tw *w, const struct taken *tk, size_t ntk)
{
	char name[128], comm[64];
	size_t i, j;
	int dev;

	comm_of(0, comm, sizeof(comm));
	meta(w, "process_name", A.pid, 0, "name", comm[0] ? comm : "process", 0);
	meta(w, "process_labels", A.pid, 0, "labels", "CPU", 0);
	meta(w, "process_sort_index", A.pid, 0, "sort_index", NULL, A.pid);
	for (i = 0; i < w->ntids; i++) {
		const char *tn = NULL;

		for (j = 0; j < ntk; j++)
			if (tk[j].tid == w->tids[i] && tk[j].thread_name[0])
				tn = tk[j].thread_name;
		if (w->tids[i] & ITER_ROW(0)) {
			snprintf(name, sizeof(name), "iterations (thread %d)", w->tids[i] & ~ITER_ROW(0));
			meta(w, "thread_name", A.pid, w->tids[i], "name", name, 0);
			meta(w, "thread_sort_index", A.pid, w->tids[i], "sort_index", NULL,
			     w->tids[i] & ~ITER_ROW(0));
			continue;
		}
		if (tn == NULL) {
			comm_of(w->tids[i], comm, sizeof(comm));
			tn = comm;
		}
		snprintf(name, sizeof(name), "thread %d (%s)", w->tids[i], tn);
		meta(w, "thread_name", A.pid, w->tids[i], "name", name, 0);
		meta(w, "thread_sort_index", A.pid, w->tids[i], "sort_index", NULL, w->tids[i]);
	}
	for (i = 0; i < w->nstreams; i++) {
		dev = w->streams[i].device;
		for (j = 0; j < i && w->streams[j].device != dev; j++)
			;
		if (j == i) { /* first stream of this device: the device's rows */
			snprintf(name, sizeof(name), "GPU %d", dev);
			meta(w, "process_name", dev, 0, "name", name, 0);
			meta(w, "process_labels", dev, 0, "labels", name, 0);
			meta(w, "process_sort_index", dev, 0, "sort_index", NULL, 0x1000000 + dev);
		}
		snprintf(name, sizeof(name), "stream %lld ", (long long)w->streams[i].stream);
		meta(w, "thread_name", dev, w->streams[i].stream, "name", name, 0);
		meta(w, "thread_sort_index", dev, w->streams[i].stream, "sort_index", NULL,
		     w->streams[i].stream);
	}
}

static void write_header(struct tw *w, uint64_t dropped, uint64_t cpu_dropped, bool cut)
{
	tw_lit(w, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [");
	gpu_write_devices(w);
	tw_lit(w, "\n  ]");
	/* distributedInfo only for a process that has a rank, as Kineto writes
	 * it only once torch.distributed is up: "rank 0 of 1" for a process
	 * with none would make unrelated traces look like ranks of one job. */
	if (A.rank >= 0) {
		tw_lit(w, ",\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": ");
		tw_int(w, A.rank);
		if (A.world_size > 0) {
			tw_lit(w, ", \"world_size\": ");
			tw_int(w, A.world_size);
		}
		if (A.local_rank >= 0) {
			tw_lit(w, ", \"local_rank\": ");
			tw_int(w, A.local_rank);
		}
		tw_lit(w, "}");
	}
	tw_lit(w, ",\n  \"trace_id\": ");
	tw_str(w, A.win.trace_id, (size_t)-1);
	tw_lit(w, ",\n  \"host_name\": ");
	tw_str(w, A.host, (size_t)-1);
	gpu_write_meta(w);
	tw_lit(w, ",\n  \"gprof_agent_version\": \"" GPROF_VERSION "\"");
	tw_lit(w, ",\n  \"gprof_dropped_records\": ");
	tw_int(w, (int64_t)dropped);
	tw_lit(w, ",\n  \"gprof_dropped_cpu_events\": ");
	tw_int(w, (int64_t)cpu_dropped);
	tw_lit(w, ",\n  \"gprof_trace_cut\": ");
	if (cut)
		tw_lit(w, "true");
	else
		tw_lit(w, "false");
	/* what the burst's CPU side held (rec.c charges its chunks and the
	 * writer's reservations, and takes back a charge it refuses), and its
	 * budget: the agent's own count, which tests bound */
	tw_lit(w, ",\n  \"gprof_cpu_bytes\": ");
	tw_int(w, (int64_t)atomic_load(&A.bytes));
	tw_lit(w, ",\n  \"gprof_cpu_budget_bytes\": ");
	tw_int(w, (int64_t)A.win.cpu_bytes);
	tw_lit(w, ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ");
	tw_int(w, (int64_t)w->base);
	tw_lit(w, ",\n  \"traceEvents\": [\n");
}

int writer_write(int out, struct trace_result *res, char *why, size_t n)
{
	struct tw *w = calloc(1, sizeof(*w));
	uint64_t t0 = atomic_load(&A.t_start), t1 = atomic_load(&A.t_end);
	uint64_t cpu_dropped;
	struct taken *tk;
	size_t ntk = 0, i;
	char name[256];
	int fd, r = 0;

	if (w == NULL) {
		snprintf(why, n, "out of memory writing the trace");
		return -ENOMEM;
	}
	if (t0 == 0)
		t0 = t1;
	w->first = true;
	w->base = t0 / BASE_QUANTUM_NS * BASE_QUANTUM_NS;
	fd = fcntl(out, F_DUPFD_CLOEXEC, 0); /* gzclose closes it; out stays the caller's */
	if (fd < 0 || (w->gz = gzdopen(fd, "wb1")) == NULL) {
		r = -errno;
		snprintf(why, n, "cannot write the trace file: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		free(w);
		return r ? r : -EIO;
	}
	tk = rec_take(&ntk); /* recording has stopped: nothing is dropped after this */
	res->dropped = gpu_dropped();
	cpu_dropped = atomic_load(&A.dropped);
	res->cut = atomic_load(&A.end_reason) == END_CUT || gpu_cut();
	write_header(w, res->dropped, cpu_dropped, res->cut);
	res->dropped += cpu_dropped;
	collect_ranges(w, tk, ntk, t0, t1);
	write_cpu(w, tk, ntk, t0, t1);
	ops_write(w);
	gpu_write(w, t0, t1);
	tw_write_projections(w);
	write_rows(w, tk, ntk);
	tw_event(w);
	tw_lit(w, "\"ph\":\"i\",\"s\":\"g\",\"name\":\"Record Window End\",\"pid\":\"\",\"tid\":\"\",\"ts\":");
	tw_ts(w, t1);
	tw_put(w, '}');
	snprintf(name, sizeof(name), "%s_%d.%llu.pt.trace.json.gz", A.host, A.pid,
	         (unsigned long long)t0);
	tw_lit(w, "\n  ],\n  \"traceName\": ");
	tw_str(w, name, (size_t)-1);
	tw_lit(w, "\n}\n");
	if (tw_close(w) < 0) {
		r = w->err;
		snprintf(why, n, "writing the trace file failed: %s (the agent writes its traces "
		         "to $GPROF_AGENT_TRACE_DIR, else $TMPDIR or /tmp: free space there, or point "
		         "it elsewhere)", strerror(-r));
	}
	res->events = w->events;
	{
		struct stat st;

		if (fstat(out, &st) == 0)
			res->bytes = (uint64_t)st.st_size;
	}
	rec_free(tk, ntk);
	for (i = 0; i < w->nr; i++)
		free(w->r[i].spans);
	free(w->r);
	free(w->tids);
	free(w->streams);
	free(w);
	return r;
}
