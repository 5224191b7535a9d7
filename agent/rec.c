/*
 * rec.c: what application threads do when they call NVTX or gprof_*:
 * record ranges, marks and iterations into their own thread's buffer.
 * Called by nvtx.c's handlers and agent.c's gprof_* API on application
 * threads, by capture.c on the agent thread (arena, end, take), and read
 * by writer.c and tw.c (rec.h); it calls only state.c, so the hot path
 * depends on nothing above it. It also keeps the NVTX domains' names.
 *
 * The cost model (DESIGN.md, performance): while no window is open every
 * entry point reads A.rec_on (and A.armed) and returns. While recording,
 * each event takes the thread buffer's own mutex, which only the agent
 * thread ever contends for, once per burst, for an O(1) swap (rec_take):
 * no application thread waits on the writer's copies, frees or I/O.
 *
 * Memory (issue 23): one byte budget for the whole burst (A.win.cpu_bytes),
 * charged atomically across all threads when memory is taken: a chunk of
 * AGENT_CHUNK_BYTES carved from the burst's arena, and for each range and
 * iteration what the writer will hold for it. So recording and writing together
 * stay within the budget however many threads record and whatever they
 * record; the first event past it ends the window (cut), and every event
 * not recorded (budget, AGENT_MAX_THREADS, AGENT_MAX_DEPTH, the start/end
 * table) is counted in A.dropped, which the trace reports.
 *
 * Ranges: push copies the name into the thread's chunk and keeps an
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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rec.h"
#include "state.h"

static __thread struct tbuf *my_tb;
static __thread uint64_t my_tb_refused; /* 1 + the burst (gen) that found no buffer free */
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

	atomic_store(&t->live, false);
}

static void tb_key_make(void)
{
	pthread_key_create(&tb_key, tb_release);
}

/* An event not recorded (budget, thread or depth limit): the trace's
 * gprof_dropped_cpu_events. */
static void dropped(void)
{
	atomic_fetch_add_explicit(&A.dropped, 1, memory_order_relaxed);
}

/* The calling thread's buffer, made (or taken over from a thread that
 * exited) on its first event. NULL when out of memory, or when
 * AGENT_MAX_THREADS buffers are all owned: such a thread looks again at
 * most once per burst (a scan of every buffer per event would be a cost
 * the job pays for our limit). A buffer taken over is empty: the agent
 * thread takes every buffer's chunks at each burst's end.
 *
 * It never waits on another thread: a window's first events find every
 * thread here at once, and a global lock, or another thread's buffer lock
 * taken in the scan, held by a thread the scheduler had preempted, blocked
 * the others for hundreds of ms (test_memory_bound: 636 ms blocked before,
 * 0.1 ms after). So the list is pushed onto with a CAS, and a buffer is
 * taken over only through pthread_mutex_trylock. */
struct tbuf *rec_tbuf(void)
{
	uint64_t gen = atomic_load(&A.gen);
	struct tbuf *t, *head;
	int tid;

	if (my_tb != NULL)
		return my_tb;
	if (my_tb_refused == gen + 1)
		return NULL;
	pthread_once(&tb_key_once, tb_key_make);
	tid = (int)syscall(SYS_gettid);
	for (t = atomic_load(&A.tbufs); t != NULL; t = t->next) {
		bool took = false;

		if (atomic_load(&t->live) || pthread_mutex_trylock(&t->lock) != 0)
			continue;
		if (!atomic_load(&t->live) && t->head == NULL) {
			atomic_store(&t->live, true);
			t->tid = tid;
			t->depth = 0;
			t->unstacked = 0;
			t->thread_name[0] = '\0';
			took = true;
		}
		pthread_mutex_unlock(&t->lock);
		if (took)
			break;
	}
	if (t == NULL && atomic_load(&A.ntbufs) < AGENT_MAX_THREADS &&
	    atomic_fetch_add(&A.ntbufs, 1) < AGENT_MAX_THREADS &&
	    (t = calloc(1, sizeof(*t))) != NULL) {
		pthread_mutex_init(&t->lock, NULL);
		atomic_init(&t->live, true);
		t->tid = tid;
		head = atomic_load(&A.tbufs);
		do
			t->next = head;
		while (!atomic_compare_exchange_weak(&A.tbufs, &head, t));
	}
	if (t != NULL)
		pthread_setspecific(tb_key, t);
	else
		my_tb_refused = gen + 1;
	my_tb = t;
	return t;
}

/* Charges n bytes to the burst's CPU budget; past it the window ends,
 * cut, and the refused bytes are taken back, so A.bytes is what the burst
 * holds (the trace reports it: gprof_cpu_bytes). Charged when memory is
 * taken (a whole chunk) or promised to the writer (REC_RANGE_RESERVE,
 * REC_STEP_RESERVE), never after. */
static bool charge(uint64_t n)
{
	uint64_t used = atomic_fetch_add_explicit(&A.bytes, n, memory_order_relaxed) + n;

	if (used <= A.win.cpu_bytes)
		return true;
	atomic_fetch_sub_explicit(&A.bytes, n, memory_order_relaxed);
	rec_end(END_CUT);
	return false;
}

/* With t->lock held: whether the thread may still append to burst gen:
 * recording, and gen still the burst, so the chunks an event's name
 * points into have not been taken (the agent thread clears rec_on before
 * it takes them, and the next burst moves gen before it sets rec_on). */
static bool tb_open(struct tbuf *t, uint64_t gen)
{
	if (!atomic_load(&A.rec_on) || atomic_load(&A.gen) != gen)
		return false;
	t->gen = gen; /* its chunks, if any, are this burst's (rec_take) */
	return true;
}

static size_t room(const struct evchunk *c)
{
	return AGENT_CHUNK_BYTES - sizeof(*c) - c->nev * sizeof(struct cev) - c->names;
}

/* The burst's arena: the CPU budget's worth of address space, reserved by
 * the agent thread before the window opens (rec_arena_new) and unmapped
 * after the trace is written (rec_arena_free). Chunks and the writer's
 * reservations are charged to it by one atomic add on A.bytes, and chunks
 * carved from it by another on A.arena_used: the budget is the arena's
 * end, so no chunk past it can exist, and chunks with the writer's
 * reservations stay within it. Pages cost only once touched (and are
 * never huge pages, which would cost 2 MB for a touch). One mapping made in advance, not one per chunk: 16
 * threads mapping chunks while faulting pages in them blocked each other
 * in the kernel (its map lock), 2 s in all in a 512 MB burst. */
static char *arena;
static size_t arena_len;

int rec_arena_new(uint64_t bytes)
{
	void *p;

	rec_arena_free();
	if (bytes == 0)
		return 0;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
	         -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, bytes, MADV_NOHUGEPAGE);
	arena = p;
	arena_len = bytes;
	A.win.arena = arena;
	return 0;
}

void rec_arena_free(void)
{
	size_t off, n;

	A.win.arena = NULL;
	/* in slices, so that no one call holds the process's map lock for
	 * long: the job's own threads may be mapping memory meanwhile */
	for (off = 0; arena != NULL && off < arena_len; off += n) {
		n = arena_len - off < (16u << 20) ? arena_len - off : 16u << 20;
		munmap(arena + off, n);
	}
	arena = NULL;
	arena_len = 0;
}

/* With t->lock held: the tail chunk with room for nev events and nbytes of
 * names, a new one carved from the arena (and so charged whole) when it
 * has not. NULL past the budget. */
static struct evchunk *tb_room(struct tbuf *t, size_t nev, size_t nbytes)
{
	struct evchunk *c = t->tail;
	uint64_t off;

	if (c != NULL && room(c) >= nev * sizeof(struct cev) + nbytes)
		return c;
	if (A.win.arena == NULL || !charge(AGENT_CHUNK_BYTES))
		return NULL;
	/* chunks are charged with the writer's reservations, so the chunks
	 * alone stay inside the arena; carved whole pages apart, so the pages
	 * touched are the chunks' and nothing more */
	off = atomic_fetch_add_explicit(&A.arena_used, AGENT_CHUNK_BYTES, memory_order_relaxed);
	if (off + AGENT_CHUNK_BYTES > A.win.cpu_bytes)
		return NULL;
	c = (struct evchunk *)(A.win.arena + off);
	c->next = NULL;
	c->nev = 0;
	c->names = 0;
	if (t->tail != NULL)
		t->tail->next = c;
	else
		t->head = c;
	t->tail = c;
	return c;
}

/* Copies a name into the tail chunk (lock held, burst open): its copy, or
 * NULL. */
static const char *tb_name(struct tbuf *t, const char *name, size_t len)
{
	struct evchunk *c;
	char *p;

	if (len > AGENT_NAME_MAX)
		len = AGENT_NAME_MAX;
	if ((c = tb_room(t, 0, len + 1)) == NULL)
		return NULL;
	c->names += (uint32_t)len + 1;
	p = (char *)c + AGENT_CHUNK_BYTES - c->names;
	memcpy(p, name, len);
	p[len] = '\0';
	return p;
}

/* Appends one event of burst gen, with its name copied first when name is
 * not NULL; the bytes the writer will need for it are charged here. Lock
 * held only for the copy: the agent thread takes it only to swap the
 * chunk list out. */
static void tb_event(struct tbuf *t, struct cev *e, uint64_t gen, const char *name)
{
	size_t extra = e->kind == CEV_STEP ? REC_STEP_RESERVE :
	               e->kind == CEV_RANGE && A.win.index ? REC_RANGE_RESERVE : 0;
	struct evchunk *c;
	bool ok = false;

	pthread_mutex_lock(&t->lock);
	if (!tb_open(t, gen)) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	if (name != NULL)
		e->name = tb_name(t, name, e->name_len);
	if ((name == NULL || e->name != NULL) && (extra == 0 || charge(extra)) &&
	    (c = tb_room(t, 1, 0)) != NULL) {
		c->ev[c->nev++] = *e;
		ok = true;
	}
	pthread_mutex_unlock(&t->lock);
	if (!ok)
		dropped();
}

struct taken *rec_take(size_t *n)
{
	struct tbuf *first = atomic_load(&A.tbufs), *t;
	struct taken *tk;
	size_t k = 0, count = 0;

	/* buffers pushed after this snapshot hold nothing: recording had
	 * stopped before the agent thread got here */
	for (t = first; t != NULL; t = t->next)
		count++;
	tk = calloc(count ? count : 1, sizeof(*tk));
	for (t = first; t != NULL; t = t->next) {
		pthread_mutex_lock(&t->lock);
		if (t->head != NULL && tk != NULL) {
			tk[k].tid = t->tid;
			memcpy(tk[k].thread_name, t->thread_name, sizeof(tk[k].thread_name));
			tk[k].head = t->head;
			k++;
		}
		/* (with no list to hand them in, they go with the arena) */
		t->head = t->tail = NULL;
		pthread_mutex_unlock(&t->lock);
	}
	*n = k;
	return tk;
}

void rec_free(struct taken *tk, size_t n)
{
	(void)n; /* the chunks are the arena's: rec_arena_free */
	free(tk);
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

		tb_event(t, &e, atomic_load(&A.gen), NULL);
	} else {
		dropped();
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
	const char *copy = NULL;
	uint64_t gen, now;
	struct tbuf *t;
	bool iter, open;

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire) &&
	    !(atomic_load_explicit(&A.armed, memory_order_acquire) && A.win.iter_range[0]))
		return;
	if (len == REC_STRLEN)
		len = strnlen(name, AGENT_NAME_MAX);
	if (len > AGENT_NAME_MAX)
		len = AGENT_NAME_MAX;
	now = agent_now_ns();
	iter = A.win.iter_range[0] && strlen(A.win.iter_range) == len &&
	       memcmp(A.win.iter_range, name, len) == 0;
	if (iter && atomic_load(&A.armed))
		trigger(now, atomic_load(&A.win_steps));
	if (!atomic_load(&A.rec_on))
		return;
	if ((t = rec_tbuf()) == NULL) {
		dropped();
		return;
	}
	gen = atomic_load(&A.gen);
	if (t->depth > 0 && t->stack[t->depth - 1].gen != gen)
		t->depth = 0; /* left over from an earlier burst */
	if (t->unstacked_gen != gen) {
		t->unstacked_gen = gen;
		t->unstacked = 0;
	}
	if (t->depth >= AGENT_MAX_DEPTH) {
		/* too deep: counted, so that its pop pops it and not the
		 * range below (deeper pushes are all above the stack) */
		t->unstacked++;
		dropped();
		return;
	}
	pthread_mutex_lock(&t->lock);
	if ((open = tb_open(t, gen)))
		copy = tb_name(t, name, len);
	pthread_mutex_unlock(&t->lock);
	if (!open)
		return;
	if (copy == NULL)
		dropped(); /* stacked all the same (name NULL): its pop writes nothing */
	t->stack[t->depth].gen = gen;
	t->stack[t->depth].start_ns = now;
	t->stack[t->depth].id = rec_next_id();
	t->stack[t->depth].name = copy;
	t->stack[t->depth].name_len = (uint16_t)len;
	t->stack[t->depth].domain = domain;
	t->stack[t->depth].iter = iter;
	t->depth++;
}

void rec_pop(void)
{
	struct tbuf *t = my_tb;
	uint64_t now, gen;

	if (t == NULL || !atomic_load_explicit(&A.rec_on, memory_order_acquire))
		return;
	gen = atomic_load(&A.gen);
	if (t->unstacked > 0 && t->unstacked_gen == gen) {
		t->unstacked--;
		return;
	}
	if (t->depth == 0)
		return;
	if (t->stack[t->depth - 1].gen != gen) {
		t->depth = 0;
		return;
	}
	now = agent_now_ns();
	t->depth--;
	{
		struct cev e = {
			.start_ns = t->stack[t->depth].start_ns, .end_ns = now,
			.name = t->stack[t->depth].name,
			.name_len = t->stack[t->depth].name_len,
			.kind = CEV_RANGE, .depth = (uint8_t)t->depth,
			.domain = t->stack[t->depth].domain, .id = t->stack[t->depth].id,
		};

		if (e.name != NULL)
			tb_event(t, &e, gen, NULL);
		if (t->stack[t->depth].iter) {
			/* The iteration range itself is the step: ProfilerStep#k. */
			struct cev s = e;
			int64_t k = atomic_fetch_add(&A.win_steps, 1);

			s.kind = CEV_STEP;
			s.id = (uint64_t)k;
			tb_event(t, &s, gen, NULL);
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

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire))
		return;
	if ((t = rec_tbuf()) == NULL) {
		dropped();
		return;
	}
	if (len == REC_STRLEN)
		len = strnlen(name, AGENT_NAME_MAX);
	{
		uint64_t now = agent_now_ns();
		struct cev e = { .start_ns = now, .end_ns = now,
		                 .name_len = (uint16_t)(len > AGENT_NAME_MAX ? AGENT_NAME_MAX : len),
		                 .kind = CEV_MARK, .domain = domain };

		tb_event(t, &e, atomic_load(&A.gen), name);
	}
}

/* Start/end ranges: may end on another thread, so they wait here. A
 * start past OPEN_MAX open ones is dropped (counted); its end finds
 * nothing. */
struct open_range {
	uint64_t id, gen, start_ns;
	struct tbuf *t;
	const char *name;
	uint32_t domain;
	uint16_t name_len;
};
#define OPEN_MAX 1024
static struct open_range open_ranges[OPEN_MAX];
static size_t n_open;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t rec_range_start(const char *name, size_t len, uint32_t domain)
{
	uint64_t id = rec_next_id(), gen;
	const char *copy = NULL;
	struct tbuf *t;
	bool open, kept = false;

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire))
		return id;
	if ((t = rec_tbuf()) == NULL) {
		dropped();
		return id;
	}
	if (len == REC_STRLEN)
		len = strnlen(name, AGENT_NAME_MAX);
	if (len > AGENT_NAME_MAX)
		len = AGENT_NAME_MAX;
	gen = atomic_load(&A.gen);
	pthread_mutex_lock(&t->lock);
	if ((open = tb_open(t, gen)))
		copy = tb_name(t, name, len);
	pthread_mutex_unlock(&t->lock);
	if (!open)
		return id;
	if (copy != NULL) {
		pthread_mutex_lock(&open_lock);
		if (n_open > 0 && open_ranges[0].gen != gen)
			n_open = 0; /* an earlier burst's ranges that never ended */
		if (n_open < OPEN_MAX) {
			open_ranges[n_open++] = (struct open_range){
				.id = id, .gen = gen, .start_ns = agent_now_ns(), .t = t,
				.name = copy, .domain = domain, .name_len = (uint16_t)len };
			kept = true;
		}
		pthread_mutex_unlock(&open_lock);
	}
	if (!kept)
		dropped();
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
	if (r.t != NULL) {
		/* tb_event checks, under the buffer's lock, that r's burst is
		 * still the one recording: its name's chunk is then not taken */
		struct cev e = { .start_ns = r.start_ns, .end_ns = agent_now_ns(),
		                 .name = r.name, .name_len = r.name_len,
		                 .kind = CEV_RANGE, .domain = r.domain, .id = r.id };

		tb_event(r.t, &e, r.gen, NULL);
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

/* NVTX domains' names (rec_domain): the table only grows, and a name is
 * written before n_domains counts it, so readers take no lock. */
static char *domain_names[REC_DOMAINS_MAX]; /* [0] is the default domain */
static atomic_uint n_domains = 1;
static pthread_mutex_t domain_lock = PTHREAD_MUTEX_INITIALIZER;

uint32_t rec_domain(const char *name)
{
	uint32_t i, n;

	pthread_mutex_lock(&domain_lock);
	n = atomic_load(&n_domains);
	for (i = 1; i < n; i++)
		if (strcmp(domain_names[i], name) == 0)
			break;
	if (i == n && n < REC_DOMAINS_MAX && (domain_names[i] = strndup(name, AGENT_NAME_MAX)) != NULL)
		atomic_store(&n_domains, ++n);
	pthread_mutex_unlock(&domain_lock);
	return i < n ? i : 0;
}

const char *rec_domain_name(uint32_t domain)
{
	return domain < REC_DOMAINS_MAX ? domain_names[domain] : NULL;
}
