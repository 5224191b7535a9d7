/*
 * projection-app: the GPU projection of NVTX ranges, and what a burst
 * keeps at its edges, fed record sequences built to break them (issue
 * 29), through the agent's real gpu.c,
 * gpu_events.c and writer.c, with CUPTI replaced by the stand-in
 * (tests/integration/fake_cupti.c, fake_cupti_record). Ranges are real: pushed and
 * popped through rec.c on this thread and a second one; each launch's API
 * record takes its times from inside its range, and its kernel runs on a
 * GPU 20 ms behind. tests/integration/test-projection.py checks the traces.
 *
 * usage: projection-app OUTDIR   (writes OUTDIR/<scenario>.pt.trace.json.gz)
 * Scenarios:
 *  shared-ids   four ranges on one thread, their launches numbered N, M,
 *               N, M (CUPTI numbering no launch, below gpu_ids_broken's
 *               threshold): kernels tied by id to the first call of each
 *               gave two ranges crossing spans on one stream.
 *  stuck-id     four ranges, every launch numbered N: all four kernels and
 *               the API calls went to the first range.
 *  two-threads  range "a" on this thread launching ids 1 and 3, range "b"
 *               on another launching 2 and 4, onto one stream, interleaved
 *               on the GPU (ids sound, spans crossing); then "outer"
 *               holding "inner" launching 5 and 6 onto another stream,
 *               which must keep its (nested) spans.
 *  window-edge  four launches in the window (ids 11-14), then two kernels
 *               (15, 16) launched while the kinds went off, whose calls
 *               were not recorded, and no call recorded after the window
 *               (a loaded machine: the program did not run in the 20 ms
 *               the end waits for one): they were kept as the window's.
 *  window-start four launches in the window (ids 21-24), none recorded
 *               before it (it opened at once), and two kernels of the
 *               previous burst's (ids 1, 2, launched while its kinds went
 *               off, completing into this burst's buffers on a GPU that
 *               lags): they were kept as the window's.
 *  stuck-tail   twenty launches all numbered N (gpu_ids_broken: counted,
 *               not matched), five kernels of the previous burst's (also
 *               N, started before the window) in the buffers, and the
 *               window's last five kernels still running until the 3rd
 *               flush: the end stopped at once, as many GPU records as
 *               launches, and lost them.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

int InitializeInjection(void);

static int (*record)(int, uint32_t, int, uint32_t, uint64_t, uint64_t, int);

/* A launch: made inside the range open now, on this thread. */
struct launch { uint32_t corr; int tid; uint64_t start, end; uint32_t stream; };

static void launch_in_range(struct launch *l, uint32_t corr, uint32_t stream)
{
	l->corr = corr;
	l->tid = (int)syscall(SYS_gettid);
	l->stream = stream;
	l->start = agent_now_ns();
	l->end = agent_now_ns() + 1;
}

static void range(const char *name, struct launch *l, const uint32_t *corr, int n,
                  uint32_t stream)
{
	int i;

	rec_push(name, strlen(name), 0);
	for (i = 0; i < n; i++)
		launch_in_range(&l[i], corr[i], stream);
	rec_pop();
}

struct side { struct launch l[2]; };

static void *side_thread(void *arg)
{
	struct side *s = arg;
	static const uint32_t ids[] = { 2, 4 };

	range("b", s->l, ids, 2, 7);
	return NULL;
}

/* Writes the API records, then the kernels in the order of `order` (the
 * GPU's), 5 us each, 10 us apart, 20 ms after the window. */
static int emit(const struct launch *l, const int *order, int n, uint64_t gpu0, bool late)
{
	int i;

	for (i = 0; i < n; i++)
		if (record(0, l[i].corr, l[i].tid, 0, l[i].start, l[i].end, 0) < 0)
			return -1;
	for (i = 0; i < n; i++) {
		const struct launch *k = &l[order[i]];
		uint64_t s = gpu0 + (uint64_t)i * 10000;

		/* in stuck-tail, the last 5 only at the 3rd flush from now */
		if (record(1, k->corr, 0, k->stream, s, s + 5000, late && i >= n - 5 ? 3 : 0) < 0)
			return -1;
	}
	return 0;
}

static int scenario(const char *dir, const char *name)
{
	struct launch l[24];
	int order[24], n = 0, i, fd;
	char why[300], path[512];
	struct trace_result res = { 0 };
	uint64_t t1;

	memset(&A.win, 0, sizeof(A.win));
	snprintf(A.win.trace_id, sizeof(A.win.trace_id), "%s", name);
	A.win.max_bytes = 64u << 20;
	atomic_fetch_add(&A.gen, 1);
	atomic_store(&A.bytes, 0);
	atomic_store(&A.dropped, 0);
	atomic_store(&A.arena_used, 0);
	atomic_store(&A.t_end, 0);
	/* the burst's budget split as capture.c splits it: half for CUPTI's
	 * buffers, half (and the range index) for the CPU side's arena */
	if (gpu_start(MSG_ACT_DEFAULT, A.win.max_bytes / 2, why, sizeof(why)) < 0) {
		fprintf(stderr, "projection-app: %s\n", why);
		return -1;
	}
	A.win.cpu_bytes = A.win.max_bytes - A.win.max_bytes / 2;
	A.win.index = true;
	if (rec_arena_new(A.win.cpu_bytes) < 0) {
		fprintf(stderr, "projection-app: no address space for the CPU events\n");
		return -1;
	}
	atomic_store(&A.t_start, agent_now_ns());
	atomic_store(&A.rec_on, 1);
	if (strcmp(name, "two-threads") == 0) {
		static const uint32_t a_ids[] = { 1, 3 }, in_ids[] = { 5, 6 };
		struct side s;
		pthread_t th;

		range("a", l, a_ids, 2, 7);
		if (pthread_create(&th, NULL, side_thread, &s) != 0 || pthread_join(th, NULL) != 0)
			return -1;
		l[2] = s.l[0];
		l[3] = s.l[1];
		rec_push("outer", 5, 0);
		range("inner", &l[4], in_ids, 2, 8);
		rec_pop();
		n = 6;
		/* on stream 7: a's 1, b's 2, a's 3, b's 4; then 5 and 6 */
		order[0] = 0; order[1] = 2; order[2] = 1; order[3] = 3; order[4] = 4; order[5] = 5;
	} else if (strcmp(name, "stuck-tail") == 0) {
		uint64_t t0 = atomic_load(&A.t_start);

		/* the previous burst's work, completed into this one's buffers */
		for (i = 0; i < 5; i++)
			if (record(1, 2000, 0, 7, t0 - 1000000 + (uint64_t)i * 10000,
			           t0 - 995000 + (uint64_t)i * 10000, 0) < 0)
				return -1;
		for (n = 0; n < 20; n++) {
			uint32_t id = 2000;

			range("it", &l[n], &id, 1, 7);
			order[n] = n;
		}
	} else if (strcmp(name, "window-edge") == 0 || strcmp(name, "window-start") == 0) {
		bool start = strcmp(name, "window-start") == 0;
		uint64_t t0 = atomic_load(&A.t_start);

		for (i = 0; start && i < 2; i++)
			if (record(1, 1 + (uint32_t)i, 0, 7, t0 + 1000 + (uint64_t)i * 10000,
			           t0 + 6000 + (uint64_t)i * 10000, 0) < 0)
				return -1;
		for (n = 0; n < 4; n++) {
			uint32_t id = (start ? 21 : 11) + (uint32_t)n;

			range("step", &l[n], &id, 1, 7);
			order[n] = n;
		}
	} else {
		bool stuck = strcmp(name, "stuck-id") == 0;

		for (n = 0; n < 4; n++) {
			uint32_t id = stuck || n % 2 == 0 ? 1000 : 1001;

			range("it", &l[n], &id, 1, 7);
			order[n] = n;
		}
	}
	t1 = agent_now_ns();
	atomic_store(&A.t_end, t1);
	atomic_store(&A.rec_on, 0);
	atomic_store(&A.end_reason, END_DONE);
	if (emit(l, order, n, t1 + 20000000ull, strcmp(name, "stuck-tail") == 0) < 0 ||
	    (strcmp(name, "window-edge") == 0 &&
	     (record(1, 15, 0, 7, t1 + 30000000ull, t1 + 30005000ull, 0) < 0 ||
	      record(1, 16, 0, 7, t1 + 30010000ull, t1 + 30015000ull, 0) < 0))) {
		fprintf(stderr, "projection-app: the agent gave the stand-in no buffer\n");
		return -1;
	}
	gpu_stop();
	snprintf(path, sizeof(path), "%s/%s.pt.trace.json.gz", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || writer_write(fd, &res, why, sizeof(why)) < 0) {
		fprintf(stderr, "projection-app: %s\n", fd < 0 ? strerror(errno) : why);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	gpu_reset();
	rec_arena_free();
	for (i = 0; i < n; i++)
		printf("%s: launch %u on thread %d\n", name, l[i].corr, l[i].tid);
	printf("%s: %llu events\n", name, (unsigned long long)res.events);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "shared-ids", "stuck-id", "two-threads",
	                                     "window-edge", "window-start", "stuck-tail" };
	void *fake;
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: projection-app OUTDIR\n");
		return 2;
	}
	setenv("GPROF_CUPTI_PATH", FAKE_CUPTI_PATH, 1);
	InitializeInjection();
	fake = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
	record = fake ? (int (*)(int, uint32_t, int, uint32_t, uint64_t, uint64_t, int))
	                dlsym(fake, "fake_cupti_record") : NULL;
	if (record == NULL) {
		fprintf(stderr, "projection-app: cannot load %s: %s\n", FAKE_CUPTI_PATH, dlerror());
		return 2;
	}
	A.rank = 0;
	A.world_size = 1;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (scenario(argv[1], names[i]) < 0)
			return 1;
	return 0;
}
