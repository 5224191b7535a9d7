/*
 * rec.c: what application threads do when they call NVTX or gprof_*:
 * record ranges, marks and iterations into their own thread's buffer.
 *
 * The cost model (DESIGN.md, performance): while no window is open every
 * entry point reads A.rec_on (and A.armed) and returns. While recording,
 * each event takes the thread buffer's own mutex, which only the writer
 * ever contends for, once per burst.
 *
 * Ranges: push copies the name into the thread's name arena and keeps an
 * entry on the thread's stack; pop turns the top entry into one complete
 * event. Only ranges pushed while recording are on the stack, and each
 * entry carries the burst (gen) it belongs to: since ranges nest, a pop
 * that finds no entry of the current burst closes a range opened before
 * the window and is ignored. Start/end ranges (which may end on another
 * thread) live in a small global table until they end.
 *
 * Iterations: gprof_step() (or the end of the request's iteration range)
 * is a boundary. An armed window starts at the first boundary that is a
 * multiple of the roundup; each later boundary closes ProfilerStep#<n> on
 * the stepping thread, and the N-th closes the window, at that instant.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

static __thread struct tbuf *my_tb;
static pthread_key_t tb_key;
static pthread_once_t tb_key_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t next_id = 1;

uint64_t rec_next_id(void)
{
	return atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
}

static void tb_release(void *p)
{
	struct tbuf *t = p;

	pthread_mutex_lock(&t->lock);
	t->live = false;
	pthread_mutex_unlock(&t->lock);
}

static void tb_key_make(void)
{
	pthread_key_create(&tb_key, tb_release);
}

/* The calling thread's buffer, made (or taken over from a thread that
 * exited) on its first event. NULL only when out of memory. A buffer taken
 * over keeps its unwritten events: they carry the old tid. */
struct tbuf *rec_tbuf(void)
{
	struct tbuf *t;
	int tid;

	if (my_tb != NULL)
		return my_tb;
	pthread_once(&tb_key_once, tb_key_make);
	tid = (int)syscall(SYS_gettid);
	pthread_mutex_lock(&A.tb_lock);
	for (t = A.tbufs; t != NULL; t = t->next) {
		pthread_mutex_lock(&t->lock);
		if (!t->live && t->nev == 0) {
			t->live = true;
			t->tid = tid;
			t->depth = 0;
			t->thread_name[0] = '\0';
			pthread_mutex_unlock(&t->lock);
			break;
		}
		pthread_mutex_unlock(&t->lock);
	}
	if (t == NULL && (t = calloc(1, sizeof(*t))) != NULL) {
		pthread_mutex_init(&t->lock, NULL);
		t->live = true;
		t->tid = tid;
		t->next = A.tbufs;
		A.tbufs = t;
	}
	pthread_mutex_unlock(&A.tb_lock);
	if (t != NULL)
		pthread_setspecific(tb_key, t);
	my_tb = t;
	return t;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 256;
	void *q;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (q == NULL)
		return false;
	*p = q;
	*cap = n;
	return true;
}

/* Charges n bytes to the burst; past the limit the window ends, cut. */
static bool charge(size_t n)
{
	uint64_t used = atomic_fetch_add_explicit(&A.bytes, n, memory_order_relaxed) + n;

	if (used <= A.win.max_bytes)
		return true;
	rec_end(END_CUT);
	return false;
}

/* With t->lock held: drops what an earlier burst left, so the buffer
 * holds only the current burst. */
static void tb_fresh(struct tbuf *t, uint64_t gen)
{
	if (t->gen != gen) {
		t->gen = gen;
		t->nev = 0;
		t->nnames = 0;
	}
}

/* Appends a name to the arena: its offset, or -1. Lock held. */
static int64_t tb_name(struct tbuf *t, const char *name, size_t len)
{
	int64_t off;

	if (len > AGENT_NAME_MAX)
		len = AGENT_NAME_MAX;
	if (!grow((void **)&t->names, &t->capnames, t->nnames + len + 1, 1))
		return -1;
	off = (int64_t)t->nnames;
	memcpy(t->names + t->nnames, name, len);
	t->names[t->nnames + len] = '\0';
	t->nnames += len + 1;
	return off;
}

/* Appends one event, if still recording (checked under the lock, so the
 * writer, which clears rec_on before it locks, never races with it). */
static void tb_event(struct tbuf *t, const struct cev *e)
{
	pthread_mutex_lock(&t->lock);
	if (atomic_load(&A.rec_on) && charge(sizeof(*e))) {
		tb_fresh(t, atomic_load(&A.gen));
		if (grow((void **)&t->ev, &t->capev, t->nev + 1, sizeof(*e)))
			t->ev[t->nev++] = *e;
	}
	pthread_mutex_unlock(&t->lock);
}

void rec_end(enum end_reason why)
{
	int none = END_NONE;

	if (atomic_compare_exchange_strong(&A.end_reason, &none, (int)why)) {
		uint64_t zero = 0;

		atomic_compare_exchange_strong(&A.t_end, &zero, agent_now_ns());
		atomic_store(&A.armed, 0);
		atomic_store(&A.rec_on, 0);
		agent_wake();
	}
}

/* Opens the window at boundary time now (iteration mode). A boundary
 * whose time was read before the burst was armed does not: the window
 * would begin before CUPTI's kinds were all on, and a launch in between
 * would be kept without its kernel (seen with the stand-in under ASan). */
static void trigger(uint64_t now, uint64_t n)
{
	int one = 1;

	if (now < atomic_load(&A.armed_ns))
		return;

	if (A.win.start_iter > 0 && !A.win.iter_range[0]) {
		if (n < A.win.start_iter)
			return;
		/* passed it between arming and here: the roundup's rule */
		if (n > A.win.start_iter && A.win.roundup > 1 && n % (uint64_t)A.win.roundup != 0)
			return;
	} else if (A.win.roundup > 1 && n % (uint64_t)A.win.roundup != 0)
		return;
	if (!atomic_compare_exchange_strong(&A.armed, &one, 0))
		return;
	atomic_store(&A.t_start, now);
	atomic_store(&A.prev_step_ns, now);
	atomic_store(&A.rec_on, 1);
	/* A cancel that came between the CAS above and here has already
	 * cleared rec_on (before we set it) and set end_reason first: seeing
	 * it, clear rec_on again, or the window would stay open after its end. */
	if (atomic_load(&A.end_reason) != END_NONE)
		atomic_store(&A.rec_on, 0);
	agent_wake();
}

/* A boundary inside an open window: closes ProfilerStep#n (the iteration
 * that began at the previous boundary) on the calling thread. */
static void boundary(uint64_t now, uint64_t n)
{
	uint64_t prev = atomic_exchange(&A.prev_step_ns, now);
	struct tbuf *t;
	int64_t k;

	if (prev == 0 || prev < atomic_load(&A.t_start))
		return; /* duration mode: the first boundary inside the window */
	if ((t = rec_tbuf()) != NULL) {
		struct cev e = { .start_ns = prev, .end_ns = now, .kind = CEV_STEP, .id = n };

		tb_event(t, &e);
	}
	k = atomic_fetch_add(&A.win_steps, 1) + 1;
	if (A.win.iterations > 0 && k >= A.win.iterations) {
		uint64_t zero = 0;

		atomic_compare_exchange_strong(&A.t_end, &zero, now);
		rec_end(END_DONE);
	}
}

void rec_step(void)
{
	uint64_t now = agent_now_ns();
	uint64_t n = atomic_fetch_add_explicit(&A.steps, 1, memory_order_relaxed) + 1;
	uint64_t prev = atomic_exchange_explicit(&A.last_step_ns, now, memory_order_relaxed);

	/* The daemon hears at once of the first step, and of the ninth, by
	 * which the median step time is known (link.c): a trace requested
	 * just after a job began needs both. */
	if (n == 1 || n == 9)
		agent_wake();
	if (prev != 0) {
		unsigned i = atomic_fetch_add_explicit(&A.step_i, 1, memory_order_relaxed);

		atomic_store_explicit(&A.last_step_dur_ns, now - prev, memory_order_relaxed);
		A.step_durs[i % 64] = now - prev;
	}
	if (A.win.iter_range[0])
		return; /* this window counts NVTX ranges, not gprof_step */
	if (atomic_load_explicit(&A.armed, memory_order_acquire))
		trigger(now, n);
	else if (atomic_load_explicit(&A.rec_on, memory_order_acquire))
		boundary(now, n - 1);
}

void rec_push(const char *name, size_t len, uint32_t domain)
{
	uint64_t gen, now;
	struct tbuf *t;
	bool iter;
	int64_t off;

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire) &&
	    !(atomic_load_explicit(&A.armed, memory_order_acquire) && A.win.iter_range[0]))
		return;
	if (len == REC_STRLEN)
		len = strnlen(name, AGENT_NAME_MAX);
	now = agent_now_ns();
	iter = A.win.iter_range[0] && strlen(A.win.iter_range) == len &&
	       memcmp(A.win.iter_range, name, len) == 0;
	if (iter && atomic_load(&A.armed))
		trigger(now, atomic_load(&A.win_steps));
	if (!atomic_load(&A.rec_on) || (t = rec_tbuf()) == NULL)
		return;
	gen = atomic_load(&A.gen);
	if (t->depth > 0 && t->stack[t->depth - 1].gen != gen)
		t->depth = 0; /* left over from an earlier burst */
	if (t->depth >= AGENT_MAX_DEPTH)
		return;
	pthread_mutex_lock(&t->lock);
	tb_fresh(t, gen);
	off = charge(len + 1) ? tb_name(t, name, len) : -1;
	pthread_mutex_unlock(&t->lock);
	if (off < 0)
		return;
	t->stack[t->depth].gen = gen;
	t->stack[t->depth].start_ns = now;
	t->stack[t->depth].id = rec_next_id();
	t->stack[t->depth].name_off = (uint32_t)off;
	t->stack[t->depth].name_len = (uint16_t)(len > AGENT_NAME_MAX ? AGENT_NAME_MAX : len);
	t->stack[t->depth].domain = domain;
	t->stack[t->depth].iter = iter;
	t->depth++;
}

void rec_pop(void)
{
	struct tbuf *t = my_tb;
	uint64_t now;

	if (t == NULL || t->depth == 0 || !atomic_load_explicit(&A.rec_on, memory_order_acquire))
		return;
	if (t->stack[t->depth - 1].gen != atomic_load(&A.gen)) {
		t->depth = 0;
		return;
	}
	now = agent_now_ns();
	t->depth--;
	{
		struct cev e = {
			.start_ns = t->stack[t->depth].start_ns, .end_ns = now,
			.name_off = t->stack[t->depth].name_off,
			.name_len = t->stack[t->depth].name_len,
			.kind = CEV_RANGE, .depth = (uint8_t)t->depth,
			.domain = t->stack[t->depth].domain, .id = t->stack[t->depth].id,
		};

		tb_event(t, &e);
		if (t->stack[t->depth].iter) {
			/* The iteration range itself is the step: ProfilerStep#k. */
			struct cev s = e;
			int64_t k = atomic_fetch_add(&A.win_steps, 1);

			s.kind = CEV_STEP;
			s.id = (uint64_t)k;
			tb_event(t, &s);
			if (k + 1 >= A.win.iterations) {
				uint64_t zero = 0;

				atomic_compare_exchange_strong(&A.t_end, &zero, now);
				rec_end(END_DONE);
			}
		}
	}
}

void rec_mark(const char *name, size_t len, uint32_t domain)
{
	struct tbuf *t;
	int64_t off;

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire) || (t = rec_tbuf()) == NULL)
		return;
	if (len == REC_STRLEN)
		len = strnlen(name, AGENT_NAME_MAX);
	pthread_mutex_lock(&t->lock);
	tb_fresh(t, atomic_load(&A.gen));
	off = charge(len + 1) ? tb_name(t, name, len) : -1;
	pthread_mutex_unlock(&t->lock);
	if (off >= 0) {
		uint64_t now = agent_now_ns();
		struct cev e = { .start_ns = now, .end_ns = now, .name_off = (uint32_t)off,
		                 .name_len = (uint16_t)(len > AGENT_NAME_MAX ? AGENT_NAME_MAX : len),
		                 .kind = CEV_MARK, .domain = domain };

		tb_event(t, &e);
	}
}

/* Start/end ranges: may end on another thread, so they wait here. */
struct open_range {
	uint64_t id, gen, start_ns;
	struct tbuf *t;
	uint32_t name_off, domain;
	uint16_t name_len;
};
#define OPEN_MAX 1024
static struct open_range open_ranges[OPEN_MAX];
static size_t n_open;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t rec_range_start(const char *name, size_t len, uint32_t domain)
{
	uint64_t id = rec_next_id(), gen;
	struct tbuf *t;
	int64_t off;

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire) || (t = rec_tbuf()) == NULL)
		return id;
	if (len == REC_STRLEN)
		len = strnlen(name, AGENT_NAME_MAX);
	gen = atomic_load(&A.gen);
	pthread_mutex_lock(&t->lock);
	tb_fresh(t, gen);
	off = charge(len + 1) ? tb_name(t, name, len) : -1;
	pthread_mutex_unlock(&t->lock);
	if (off < 0)
		return id;
	pthread_mutex_lock(&open_lock);
	if (n_open > 0 && open_ranges[0].gen != gen)
		n_open = 0; /* an earlier burst's ranges that never ended */
	if (n_open < OPEN_MAX)
		open_ranges[n_open++] = (struct open_range){
			.id = id, .gen = gen, .start_ns = agent_now_ns(), .t = t,
			.name_off = (uint32_t)off, .domain = domain,
			.name_len = (uint16_t)(len > AGENT_NAME_MAX ? AGENT_NAME_MAX : len) };
	pthread_mutex_unlock(&open_lock);
	return id;
}

void rec_range_end(uint64_t id)
{
	struct open_range r = { 0 };
	size_t i;

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire))
		return;
	pthread_mutex_lock(&open_lock);
	for (i = 0; i < n_open; i++) {
		if (open_ranges[i].id == id) {
			r = open_ranges[i];
			open_ranges[i] = open_ranges[--n_open];
			break;
		}
	}
	pthread_mutex_unlock(&open_lock);
	if (r.t != NULL && r.gen == atomic_load(&A.gen)) {
		struct cev e = { .start_ns = r.start_ns, .end_ns = agent_now_ns(),
		                 .name_off = r.name_off, .name_len = r.name_len,
		                 .kind = CEV_RANGE, .domain = r.domain, .id = r.id };

		tb_event(r.t, &e);
	}
}

void rec_thread_name(const char *name)
{
	struct tbuf *t = rec_tbuf();

	if (t != NULL) {
		pthread_mutex_lock(&t->lock);
		snprintf(t->thread_name, sizeof(t->thread_name), "%s", name);
		pthread_mutex_unlock(&t->lock);
	}
}
