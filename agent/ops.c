/*
 * ops.c: PyTorch operators in the agent's trace. During a capture window
 * python/gprof_agent records the job's operators (by default with its own
 * RecordFunction observer, _ops_observer.cpp; or the job's own profiler
 * with CPU activities only, never CUPTI, which the agent holds) and writes
 * a Kineto-shaped trace to a file this file names; at the burst's end the
 * agent merges that file's operators into its own trace (docs/AGENT.md,
 * "Operators").
 *
 * Data flow of one burst:
 *   agent thread, begin (capture.c): ops_begin names a private directory
 *     (a mkdtemp template under the agent's trace directory) unless
 *     GPROF_TORCH_OPS=off; the helper's claim (gprof_ops_path) makes it
 *     (0700), so a process without the helper makes none;
 *   application thread, at the step that opens the window: Python polls
 *     gprof_window_flags(), sees OPEN|OPS, asks gprof_ops_path() for the
 *     file (and so tells the agent that an export will come), starts its
 *     profiler; at the first step after the window's end it stops it,
 *     exports, and calls gprof_ops_done(gen, note);
 *   agent thread, finish: ops_collect waits (bounded: GPROF_TORCH_OPS_WAIT_MS,
 *     10 s by default) for that call, reads the file (O_NOFOLLOW, a regular
 *     file of the agent's uid, at most a quarter of the burst's budget),
 *     keeps its cpu_op, user_annotation and python_function events (and
 *     the fwdbwd flows between them) that lie in the window, converted to
 *     the agent's clock (CLOCK_REALTIME ns, as torch's are); then, when
 *     the window asked for memory (--profile-memory), the helper's second
 *     file beside it (MEM_FILE, read by the same rules), whose "[memory]"
 *     instant events (Kineto's profile_memory shape, made by the helper
 *     from the CUDA caching allocator's history) it keeps the same way;
 *     and it removes both files and the directory; writer.c writes them
 *     (ops_write) with the process's pid and the OS thread id torch gave
 *     them, which is the thread id the agent's CUDA API records carry, so
 *     each launch lies inside its operator on the same row.
 *
 * The file is untrusted input (the job's code wrote it): it is parsed one
 * top-level value and one event at a time with cJSON (memory bounded by the
 * file's cap), and anything wrong (not JSON, no traceEvents, a bad event)
 * drops the whole file or the one event, with the reason in the trace's
 * gprof_note; never a crash, never a failed trace.
 *
 * Ownership: everything here belongs to the agent thread, except the
 * handshake (lock, cond, taken_gen, done_gen, py_note) with the Python
 * thread. The events (ev) live from ops_collect to ops_end.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gprof_agent.h"
#include "msg.h"
#include "ops.h"
#include "opsfile.h"
#include "state.h"
#include "tw.h"

#define OPS_FILE "ops.json"
#define MEM_FILE "memory.json"
#define OPS_WAIT_MS_DEFAULT 10000

enum { CAT_OP, CAT_ANNOT, CAT_PYFN, CAT_FLOW_S, CAT_FLOW_F, CAT_MEM };
static const char *const cat_names[] = { "cpu_op", "user_annotation", "python_function",
                                         "fwdbwd", "fwdbwd", "cpu_instant_event" };
/* A [memory] event's args, in the order Kineto's profile_memory writes
 * the ones gprofctl report reads; every one an integer. */
static const char *const mem_args[] = { "Total Reserved", "Total Allocated", "Bytes",
                                        "Device Id", "Device Type", "Addr" };

struct op {
	int tid;
	uint8_t cat;
	uint64_t start, end;  /* CLOCK_REALTIME ns; end == start for flows */
	int64_t flow_id;
	char *name;           /* NULL for flows and [memory] events */
	char *args;           /* the event's args, as JSON text, or NULL */
};

/* Python <-> agent thread */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static pthread_once_t cond_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t dir_gen; /* the burst the directory is for; 0: none */
static char dir[480];
static uint64_t taken_gen, done_gen;
static atomic_bool unasked; /* the window's operators are the default's, not asked for */
static atomic_uint helper_caps; /* GPROF_HELPER_*: what the process's helper understands */
static int made;      /* dir: 0 a mkdtemp template, 1 made (by the claim), -1 could not be */
static pid_t made_pid; /* the process that made it (a forked child leaves it alone) */
static char py_note[400];

/* agent thread */
static struct op *ev;
static size_t nev, capev;
static char note[1000]; /* the trace's gprof_note: ours, then capture.c's (ops_add_note) */

static void cond_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&cond, &a);
	pthread_condattr_destroy(&a);
}

/* Appends to the trace's note, "; "-separated. */
static void add_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	agent_note_add(note, sizeof(note), fmt, ap);
	va_end(ap);
}

/* Which operators a window takes: none, asked, or by default.
 * Asked: the request asks (--operators, or an operator option:
 * --record-shapes, --with-modules, --profile-memory: torch.profiler's
 * profile_memory records the operators around the allocations too, and
 * gprofctl report attributes memory to them) or the job's owner does
 * (GPROF_TORCH_OPS=observer, kineto-cpu or legacy, GPROF_TORCH_OPTS); the
 * helper then records them with its observer, or, while that is not built,
 * with torch.profiler's CPU side (which leaves the job's own torch.profiler
 * without GPU activity for the rest of the process) and builds it in the
 * background. By default (nothing asked, GPROF_TORCH_OPS unset): from the
 * observer only, when it is built already (python3 -m
 * gprof_agent.build_ops), else none and the note says how; its cost is
 * under half of torch.profiler's on the same steps (2 x H200, 2026-11-28,
 * docs/BENCHMARKS.md), which is why it is on without asking.
 * GPROF_TORCH_OPS=off refuses them all. The window's private directory is
 * made only when a helper claims it (gprof_ops_path), so a process without
 * the helper pays nothing for the default. */
enum { OPS_NONE, OPS_ASKED, OPS_UNASKED };
static int ops_wanted(int64_t options)
{
	const char *v = getenv("GPROF_TORCH_OPS");

	if (v != NULL && strcmp(v, "off") == 0)
		return OPS_NONE;
	if ((v != NULL && *v) ||
	    (options & (MSG_OPT_OPERATORS | MSG_OPT_RECORD_SHAPES | MSG_OPT_WITH_MODULES |
	                MSG_OPT_PROFILE_MEMORY)) ||
	    (A.win.torch_opts & (GPROF_WINDOW_SHAPES | GPROF_WINDOW_MODULES | GPROF_WINDOW_MEMORY)))
		return OPS_ASKED;
	return OPS_UNASKED;
}

/* The torch options a window asks for: the request's (gprofctl trace
 * --record-shapes ..., dyno gputrace's) and the job owner's standing
 * GPROF_TORCH_OPTS (a comma list of shapes, modules, stack, flops, memory). */
uint32_t ops_opts(int64_t o)
{
	static const struct { const char *name; uint32_t bit; } t[] = {
		{ "shapes", GPROF_WINDOW_SHAPES }, { "modules", GPROF_WINDOW_MODULES },
		{ "stack", GPROF_WINDOW_STACK }, { "flops", GPROF_WINDOW_FLOPS },
		{ "memory", GPROF_WINDOW_MEMORY },
	};
	const char *v = getenv("GPROF_TORCH_OPTS"), *p;
	uint32_t bits = 0;
	size_t i, n;

	bits |= o & MSG_OPT_RECORD_SHAPES ? GPROF_WINDOW_SHAPES : 0;
	bits |= o & MSG_OPT_WITH_MODULES ? GPROF_WINDOW_MODULES : 0;
	bits |= o & MSG_OPT_WITH_STACK ? GPROF_WINDOW_STACK : 0;
	bits |= o & MSG_OPT_WITH_FLOPS ? GPROF_WINDOW_FLOPS : 0;
	bits |= o & MSG_OPT_PROFILE_MEMORY ? GPROF_WINDOW_MEMORY : 0;

	for (p = v; p != NULL && *p; p += n + (p[n] == ',')) {
		n = strcspn(p, ",");
		for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
			if (strlen(t[i].name) == n && memcmp(t[i].name, p, n) == 0)
				bits |= t[i].bit;
	}
	return bits;
}

void gprof_helper_caps(uint32_t caps)
{
	atomic_fetch_or(&helper_caps, caps);
}

/* The window's operators are on offer to this process's helper: asked
 * ones to any, the default's only to one that knows them as such. */
static bool offered(void)
{
	return !atomic_load(&unasked) || (atomic_load(&helper_caps) & GPROF_HELPER_UNASKED);
}

int ops_poll(void)
{
	uint64_t gen = atomic_load_explicit(&A.gen, memory_order_acquire);

	return atomic_load_explicit(&A.rec_on, memory_order_acquire) &&
	       atomic_load_explicit(&A.end_reason, memory_order_relaxed) == END_NONE &&
	       atomic_load_explicit(&dir_gen, memory_order_relaxed) == gen && offered() ?
	               GPROF_STEP_OPS : 0;
}

uint64_t gprof_window_flags(void)
{
	uint64_t gen = atomic_load_explicit(&A.gen, memory_order_acquire);
	uint32_t f = 0;

	if (!atomic_load_explicit(&A.rec_on, memory_order_acquire) ||
	    atomic_load_explicit(&A.end_reason, memory_order_relaxed) != END_NONE)
		return gen << 32;
	f = GPROF_WINDOW_OPEN | (uint32_t)A.win.torch_opts;
	pthread_mutex_lock(&lock);
	if (dir_gen == gen && offered())
		f |= GPROF_WINDOW_OPS | (atomic_load(&unasked) ? GPROF_WINDOW_UNASKED : 0);
	pthread_mutex_unlock(&lock);
	return (gen << 32) | f;
}

/* The directory is made here, when a helper claims the window (on its
 * thread, once a window): a process without the helper never makes one. */
uint64_t gprof_ops_path(char *buf, size_t n)
{
	uint64_t gen = atomic_load(&A.gen), r = 0;

	bool open;

	pthread_mutex_lock(&lock);
	open = buf != NULL && n > 0 && dir_gen == gen && gen != 0 && taken_gen != gen &&
	       atomic_load(&A.rec_on) && offered();
	if (open && made == 0) {
		if (mkdtemp(dir) != NULL) {
			made = 1;
			made_pid = getpid();
		} else {
			made = -1;
			agent_log("trace %s: no directory for PyTorch operators (%s): %s",
			          A.win.trace_id, dir, strerror(errno));
		}
	}
	if (open && made == 1 && (size_t)snprintf(buf, n, "%s/" OPS_FILE, dir) < n) {
		taken_gen = gen;
		r = gen & 0xffffffffu;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

void gprof_ops_done(uint64_t gen, const char *why)
{
	pthread_once(&cond_once, cond_init);
	pthread_mutex_lock(&lock);
	if (gen != 0 && taken_gen != 0 && (taken_gen & 0xffffffffu) == gen) {
		done_gen = taken_gen;
		snprintf(py_note, sizeof(py_note), "%s", why ? why : "");
		pthread_cond_signal(&cond);
	}
	pthread_mutex_unlock(&lock);
}

bool ops_begin(int64_t options)
{
	const char *base = getenv("GPROF_AGENT_TRACE_DIR");
	char path[sizeof(dir)];
	int want;

	pthread_once(&cond_once, cond_init);
	note[0] = '\0';
	if ((want = ops_wanted(options)) == OPS_NONE)
		return false;
	if (base == NULL || !*base)
		base = getenv("TMPDIR");
	if (base == NULL || !*base)
		base = "/tmp";
	/* the template only: gprof_ops_path makes it when a helper claims it */
	if ((size_t)snprintf(path, sizeof(path), "%s/gprof-ops-%d-XXXXXX", base, A.pid) >=
	    sizeof(path)) {
		agent_log("trace %s: no directory for PyTorch operators: %s is too long",
		          A.win.trace_id, base);
		return true;
	}
	pthread_mutex_lock(&lock);
	snprintf(dir, sizeof(dir), "%s", path);
	made = 0;
	atomic_store(&unasked, want == OPS_UNASKED);
	dir_gen = atomic_load(&A.gen);
	taken_gen = done_gen = 0;
	py_note[0] = '\0';
	pthread_mutex_unlock(&lock);
	return true;
}

static uint64_t wait_ms(void)
{
	const char *v = getenv("GPROF_TORCH_OPS_WAIT_MS");
	char *end;
	unsigned long long ms;

	if (v == NULL || !*v)
		return OPS_WAIT_MS_DEFAULT;
	ms = strtoull(v, &end, 10);
	return *end == '\0' && ms <= 600000 ? ms : OPS_WAIT_MS_DEFAULT;
}

/* ---- reading the file ---- */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* One JSON value at p (cJSON), its end in *next; NULL if not JSON. */
static cJSON *value_at(const char *p, const char *end, const char **next)
{
	const char *e = NULL;
	cJSON *v = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &e, 0);

	*next = v != NULL && e != NULL ? e : NULL;
	return v;
}

/* Microseconds as written ("1700000000123456.789"), exactly, in ns: a
 * double holds absolute microseconds only to a quarter of one, and a
 * launch at the edge of its operator would then stick out of it. */
static bool us_text(const char *p, const char *end, uint64_t *ns)
{
	uint64_t v = 0;
	int frac = -1, digits = 0;

	for (; p < end && ((*p >= '0' && *p <= '9') || (*p == '.' && frac < 0)); p++) {
		if (*p == '.') {
			frac = 0;
			continue;
		}
		if (frac >= 3)
			continue; /* below a nanosecond */
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
		digits++;
		if (frac >= 0)
			frac++;
	}
	if (digits == 0 || (p < end && (*p == 'e' || *p == 'E' || *p == '-' || *p == '+')))
		return false;
	for (frac = frac < 0 ? 0 : frac; frac < 3; frac++) {
		if (v > UINT64_MAX / 10)
			return false;
		v *= 10;
	}
	*ns = v;
	return true;
}

/* The text of the number under key at the top level of the object text
 * [p, end) (valid JSON: cJSON parsed it), or NULL. */
static const char *member(const char *p, const char *end, const char *key)
{
	size_t klen = strlen(key);
	int depth = 0;
	bool at_key = false;

	for (; p < end; p++) {
		if (*p == '"') {
			const char *q = ++p;

			while (p < end && *p != '"')
				p += *p == '\\' ? 2 : 1;
			if (p >= end)
				return NULL;
			if (depth == 1 && at_key && (size_t)(p - q) == klen && memcmp(q, key, klen) == 0) {
				p = skip_ws(p + 1, end);
				return p < end && *p == ':' ? skip_ws(p + 1, end) : NULL;
			}
			at_key = false;
		} else if (*p == '{' || *p == '[') {
			depth++;
			at_key = depth == 1;
		} else if (*p == '}' || *p == ']') {
			depth--;
		} else if (*p == ',' && depth == 1) {
			at_key = true;
		}
	}
	return NULL;
}

/* An event's time field in ns on the agent's clock. */
static bool to_ns(const cJSON *v, const char *text, const char *end, const char *key,
                  int64_t base_ns, uint64_t *out)
{
	const char *num;
	uint64_t ns;

	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || (num = member(text, end, key)) == NULL ||
	    !us_text(num, end, &ns) || ns > UINT64_MAX - (uint64_t)base_ns)
		return false;
	*out = ns + (uint64_t)base_ns;
	return true;
}

struct scan { int64_t base; bool have_base; const char *events; size_t bad, outside, steps; };

/* Passes over the array at p, one element at a time (no tree of the
 * whole); its end in *next. */
static const char *skip_array(const char *p, const char *end, const char **next)
{
	cJSON *e;

	if (p >= end || *p != '[')
		return "traceEvents is not an array";
	p = skip_ws(p + 1, end);
	while (p < end && *p != ']') {
		if ((e = value_at(p, end, next)) == NULL)
			return "an event is not JSON";
		cJSON_Delete(e);
		p = skip_ws(*next, end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
		else if (p < end && *p != ']')
			return "events not separated by commas";
	}
	if (p >= end)
		return "the event array is cut short";
	*next = p + 1;
	return NULL;
}

/* The top level: the array of events (the whole document, for the legacy
 * profiler's), and baseTimeNanoseconds where the file has one (newer
 * Kineto; older files have absolute microseconds). Returns why not. */
static const char *find_events(const char *p, const char *end, struct scan *s)
{
	const char *next, *err;
	cJSON *k, *v;

	p = skip_ws(p, end);
	if (p < end && *p == '[') {
		s->events = p;
		return NULL;
	}
	if (p >= end || *p != '{')
		return "not a JSON object";
	p = skip_ws(p + 1, end);
	while (p < end && *p != '}') {
		if ((k = value_at(p, end, &next)) == NULL || !cJSON_IsString(k)) {
			cJSON_Delete(k);
			return "not JSON";
		}
		p = skip_ws(next, end);
		if (p >= end || *p != ':') {
			cJSON_Delete(k);
			return "not JSON";
		}
		p = skip_ws(p + 1, end);
		if (strcmp(k->valuestring, "traceEvents") == 0) {
			/* Kineto writes baseTimeNanoseconds after the events
			 * (gprofd's own traces before): pass over them, one
			 * at a time, and read on */
			cJSON_Delete(k);
			s->events = p;
			if ((err = skip_array(p, end, &next)) != NULL)
				return err;
			p = skip_ws(next, end);
			if (p < end && *p == ',')
				p = skip_ws(p + 1, end);
			continue;
		}
		v = value_at(p, end, &next);
		if (v == NULL) {
			cJSON_Delete(k);
			return "not JSON";
		}
		if (strcmp(k->valuestring, "baseTimeNanoseconds") == 0 && cJSON_IsNumber(v) &&
		    v->valuedouble >= 0 && v->valuedouble < 9.2e18) {
			s->base = (int64_t)v->valuedouble;
			s->have_base = true;
		}
		cJSON_Delete(k);
		cJSON_Delete(v);
		p = skip_ws(next, end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
	}
	return s->events != NULL ? NULL : "no traceEvents";
}

static bool keep(struct op *o)
{
	if (nev == capev) {
		size_t cap = capev ? capev * 2 : 1024;
		struct op *p = realloc(ev, cap * sizeof(*p));

		if (p == NULL)
			return false;
		ev = p;
		capev = cap;
	}
	ev[nev++] = *o;
	return true;
}

/* An integer a double holds exactly (never a cast out of range). */
static bool exact_int(const cJSON *v, int64_t *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < -9007199254740992.0 ||
	    v->valuedouble > 9007199254740992.0 || v->valuedouble != (double)(int64_t)v->valuedouble)
		return false;
	*out = (int64_t)v->valuedouble;
	return true;
}

/* An event's thread and start: the tid torch writes is the OS thread's
 * (gettid), which the agent's records of the same thread carry too. */
static bool stamp(const cJSON *e, const char *text, const char *tend, struct scan *s,
                  struct op *o)
{
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");

	if (!cJSON_IsNumber(tid) || tid->valuedouble < 1 || tid->valuedouble >= (1 << 22) ||
	    !to_ns(cJSON_GetObjectItemCaseSensitive(e, "ts"), text, tend, "ts", s->base, &o->start))
		return false;
	o->tid = (int)tid->valuedouble;
	return true;
}

/* A "[memory]" instant event (Kineto's profile_memory shape): kept with
 * exactly its six integer args, rewritten here (nothing else of the
 * file's text goes into the trace), or counted bad. */
static void take_memory(const cJSON *e, const char *text, const char *tend, struct scan *s,
                        uint64_t t0, uint64_t t1)
{
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
	struct op o = { 0 };
	char buf[400];
	size_t i, n = 0;
	int64_t v;

	if (!stamp(e, text, tend, s, &o) || !cJSON_IsObject(args)) {
		s->bad++;
		return;
	}
	for (i = 0; i < sizeof(mem_args) / sizeof(mem_args[0]); i++) {
		if (!exact_int(cJSON_GetObjectItemCaseSensitive(args, mem_args[i]), &v)) {
			s->bad++;
			return;
		}
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"%s\":%lld", i ? "," : "{",
		                      mem_args[i], (long long)v);
	}
	snprintf(buf + n, sizeof(buf) - n, "}");
	o.cat = CAT_MEM;
	o.end = o.start;
	if (o.start < t0 || o.end > t1) {
		s->outside++;
		return;
	}
	n = strlen(buf) + 1;
	if ((o.args = cJSON_malloc(n)) == NULL)
		return;
	memcpy(o.args, buf, n);
	if (!keep(&o))
		cJSON_free(o.args);
}

/* One event of the file: kept (in the window, a kind the trace takes),
 * skipped, or counted bad. */
static void take_event(const cJSON *e, const char *text, const char *tend, struct scan *s,
                       uint64_t t0, uint64_t t1)
{
	const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
	const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
	struct op o = { 0 };
	uint64_t dur = 0;
	int c;

	if (!cJSON_IsString(ph) || !cJSON_IsString(cat))
		return; /* metadata rows and the like: the agent writes its own */
	if (strcmp(cat->valuestring, cat_names[CAT_MEM]) == 0) {
		/* only [memory]: other instant events (Iteration Start, ...) are
		 * the profiler's own bookkeeping */
		if (strcmp(ph->valuestring, "i") == 0 && cJSON_IsString(name) &&
		    strcmp(name->valuestring, "[memory]") == 0)
			take_memory(e, text, tend, s, t0, t1);
		return;
	}
	for (c = 0; c < CAT_FLOW_S; c++)
		if (strcmp(cat->valuestring, cat_names[c]) == 0)
			break;
	if (c == CAT_FLOW_S && strcmp(cat->valuestring, "fwdbwd") != 0)
		return;
	if (c < CAT_FLOW_S && strcmp(ph->valuestring, "X") != 0)
		return;
	if (c == CAT_FLOW_S) {
		if (strcmp(ph->valuestring, "f") == 0)
			c = CAT_FLOW_F;
		else if (strcmp(ph->valuestring, "s") != 0)
			return;
	}
	if (!stamp(e, text, tend, s, &o)) {
		s->bad++;
		return;
	}
	o.cat = (uint8_t)c;
	if (c < CAT_FLOW_S) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "dur");

		if (!cJSON_IsString(name) || !to_ns(d, text, tend, "dur", 0, &dur)) {
			s->bad++;
			return;
		}
		/* ProfilerStep# is the agent's to write (one per step) */
		if (strncmp(name->valuestring, "ProfilerStep#", 13) == 0) {
			s->steps++;
			return;
		}
	} else {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");

		/* an integer a double holds exactly (never a cast out of range) */
		if (!cJSON_IsNumber(id) || id->valuedouble < -9007199254740992.0 ||
		    id->valuedouble > 9007199254740992.0) {
			s->bad++;
			return;
		}
		o.flow_id = (int64_t)id->valuedouble;
	}
	o.end = o.start + dur;
	if (o.start < t0 || o.end > t1) {
		s->outside++;
		return;
	}
	if (c < CAT_FLOW_S && (o.name = strdup(name->valuestring)) == NULL)
		return;
	if (cJSON_IsObject(args) && (o.args = cJSON_PrintUnformatted(args)) == NULL) {
		free(o.name);
		return;
	}
	if (!keep(&o)) {
		free(o.name);
		free(o.args);
	}
}

/* Reads the events of the array at s->events; returns why not, or NULL. */
static const char *read_events(const char *p, const char *end, struct scan *s, uint64_t t0,
                               uint64_t t1)
{
	const char *next;
	cJSON *e;

	p = skip_ws(s->events, end);
	if (p >= end || *p != '[')
		return "traceEvents is not an array";
	p = skip_ws(p + 1, end);
	while (p < end && *p != ']') {
		if ((e = value_at(p, end, &next)) == NULL)
			return "an event is not JSON";
		if (cJSON_IsObject(e))
			take_event(e, p, next, s, t0, t1);
		else
			s->bad++;
		cJSON_Delete(e);
		p = skip_ws(next, end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
		else if (p < end && *p != ']')
			return "events not separated by commas";
	}
	return p < end ? NULL : "the event array is cut short";
}

/* Drops the flow ends kept since n0 whose other end was not kept (outside
 * the window) or whose id repeats: a lone end is an error to Perfetto and
 * HTA. Out of memory, every flow end of the file goes. */
static void drop_unpaired(size_t n0)
{
	size_t n = nev - n0, i, k = n0, m = 0;
	int64_t *id = malloc((n ? n : 1) * sizeof(*id));
	bool *start = malloc((n ? n : 1) * sizeof(*start)), *drop = calloc(n ? n : 1, 1);
	bool all = id == NULL || start == NULL || drop == NULL;

	for (i = n0; !all && i < nev; i++)
		if (ev[i].cat >= CAT_FLOW_S && ev[i].cat <= CAT_FLOW_F) {
			id[m] = ev[i].flow_id;
			start[m++] = ev[i].cat == CAT_FLOW_S;
		}
	all = all || opsfile_unpaired(id, start, m, drop) < 0;
	for (i = n0, m = 0; i < nev; i++) {
		bool flow = ev[i].cat >= CAT_FLOW_S && ev[i].cat <= CAT_FLOW_F;

		if (flow && (all || drop[m++])) {
			free(ev[i].name);
			cJSON_free(ev[i].args);
			continue;
		}
		ev[k++] = ev[i];
	}
	nev = k;
	free(id);
	free(start);
	free(drop);
}

/* Adds the events of one file to those kept; on an error none of its. */
static const char *parse_more(const char *buf, size_t len, uint64_t t0, uint64_t t1,
                              size_t *bad, size_t *outside)
{
	struct scan s = { 0 };
	const char *err;
	size_t n0 = nev;

	err = find_events(buf, buf + len, &s);
	if (err == NULL)
		err = read_events(buf, buf + len, &s, t0, t1);
	if (err != NULL) { /* the whole file or nothing */
		while (nev > n0) {
			nev--;
			free(ev[nev].name);
			cJSON_free(ev[nev].args);
		}
	} else {
		drop_unpaired(n0);
	}
	*bad = s.bad;
	*outside = s.outside;
	return err;
}

const char *ops_parse(const char *buf, size_t len, uint64_t t0, uint64_t t1, size_t *bad,
                      size_t *outside)
{
	ops_end();
	return parse_more(buf, len, t0, t1, bad, outside);
}

size_t ops_count(void)
{
	return nev;
}

bool ops_get(size_t i, int *tid, uint64_t *start, uint64_t *end, const char **name,
             const char **args)
{
	if (i >= nev)
		return false;
	*tid = ev[i].tid;
	*start = ev[i].start;
	*end = ev[i].end;
	*name = ev[i].name;
	*args = ev[i].args;
	return true;
}

/* With the lock held: removes the window's files and directory (nothing
 * else is ever in it), if this process made them. */
static void unmake_dir(void)
{
	char path[sizeof(dir) + 16];

	if (dir_gen != 0 && made == 1 && made_pid == getpid()) {
		snprintf(path, sizeof(path), "%s/" OPS_FILE, dir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/" MEM_FILE, dir);
		unlink(path);
		if (rmdir(dir) < 0 && errno != ENOENT)
			agent_log("trace %s: cannot remove %s: %s", A.win.trace_id, dir,
			          strerror(errno));
	}
	made = 0;
}

static void remove_dir(void)
{
	pthread_mutex_lock(&lock);
	unmake_dir();
	dir_gen = 0;
	pthread_mutex_unlock(&lock);
}

/* A process that exits inside a window its helper claimed (a duration
 * window it does not outlive) takes the directory with it. Never waits:
 * when another thread holds the lock, the directory stays. */
__attribute__((destructor)) static void ops_at_exit(void)
{
	if (pthread_mutex_trylock(&lock) != 0)
		return;
	unmake_dir();
	pthread_mutex_unlock(&lock);
}

/* Keeps the events of one of the helper's files that lie in [t0, t1],
 * the notes on what is left out (what: the file, whose: its events);
 * returns its size, taken from the cap the files share. */
static size_t collect_file(const char *path, const char *what, const char *whose, size_t cap,
                           uint64_t t0, uint64_t t1)
{
	size_t bad = 0, outside = 0, len = 0, n0 = nev;
	const char *err;
	char why[300];
	char *buf = opsfile_slurp(path, what, cap, &len, why, sizeof(why));

	if (buf == NULL) {
		add_note("%s left out: %s", whose, why);
		return 0;
	}
	err = parse_more(buf, len, t0, t1, &bad, &outside);
	free(buf);
	if (err != NULL) {
		add_note("%s left out: the %s is malformed (%s)", whose, what, err);
		return len;
	}
	if (bad)
		add_note("%zu events of the %s left out: malformed", bad, what);
	if (nev == n0 && outside > 0)
		add_note("all %zu %s fell outside the window (a clock the agent does not share?)",
		         outside, whose);
	return len;
}

bool ops_collect(uint64_t t0, uint64_t t1)
{
	uint64_t gen = atomic_load(&A.gen), taken, done;
	char path[sizeof(dir) + 16];
	size_t cap = (size_t)(A.win.max_bytes / 4);
	bool said;
	struct timespec due;

	if (t0 == 0)
		t0 = t1; /* as the writer takes it */
	pthread_mutex_lock(&lock);
	if (dir_gen != gen) {
		pthread_mutex_unlock(&lock);
		return false;
	}
	clock_gettime(CLOCK_MONOTONIC, &due);
	due.tv_sec += (time_t)(wait_ms() / 1000);
	due.tv_nsec += (long)(wait_ms() % 1000) * 1000000L;
	if (due.tv_nsec >= 1000000000L) {
		due.tv_sec++;
		due.tv_nsec -= 1000000000L;
	}
	/* the Python side stops its profiler at the first step after the
	 * window's end; a job that never steps again is not waited for long */
	while (taken_gen == gen && done_gen != gen &&
	       pthread_cond_timedwait(&cond, &lock, &due) == 0)
		;
	taken = taken_gen;
	done = done_gen;
	snprintf(path, sizeof(path), "%s/" OPS_FILE, dir);
	said = py_note[0] != '\0';
	if (said)
		add_note("%s", py_note);
	taken_gen = 0; /* a late gprof_ops_done is ignored */
	pthread_mutex_unlock(&lock);
	if (taken != gen) /* no Python helper ran a profiler: capture.c names what was asked */
		goto out;
	if (done != gen) {
		add_note("no PyTorch operators: the job did not reach a step boundary within %llu ms "
		         "of the window's end (GPROF_TORCH_OPS_WAIT_MS)",
		         (unsigned long long)wait_ms());
		goto out;
	}
	/* the helper said why there is no operator file; a memory file may
	 * still be there */
	if (!said || access(path, F_OK) == 0)
		cap -= collect_file(path, "PyTorch operator trace", "PyTorch operators", cap, t0, t1);
	snprintf(path, sizeof(path), "%s/" MEM_FILE, dir);
	if (access(path, F_OK) == 0)
		collect_file(path, "file of [memory] events", "[memory] events", cap, t0, t1);
out:
	if (note[0])
		agent_log("trace %s: %s", A.win.trace_id, note);
	remove_dir();
	return taken == gen;
}

const char *ops_note(void)
{
	return note;
}

void ops_add_note(const char *text)
{
	add_note("%s", text);
}

bool ops_crosses(int tid, const uint64_t *b, size_t nb)
{
	size_t i;

	for (i = 0; i < nev; i++) {
		const struct op *o = &ev[i];
		size_t lo = 0, hi = nb;

		if (o->tid != tid || o->cat >= CAT_FLOW_S)
			continue;
		while (lo < hi) { /* the first boundary after the op's start */
			size_t mid = (lo + hi) / 2;

			if (b[mid] <= o->start)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nb && b[lo] < o->end)
			return true;
	}
	return false;
}

/* An event's ,"pid":..,"tid":..,"ts":.. (flows and [memory] events). */
static void put_where(struct tw *w, const struct op *o)
{
	tw_lit(w, ",\"pid\":");
	tw_int(w, A.pid);
	tw_lit(w, ",\"tid\":");
	tw_int(w, o->tid);
	tw_lit(w, ",\"ts\":");
	tw_ts(w, o->start);
}

void ops_write(struct tw *w)
{
	size_t i;

	for (i = 0; i < nev; i++) {
		const struct op *o = &ev[i];

		tw_thread(w, o->tid);
		if (o->cat == CAT_MEM) { /* Kineto's shape: a thread-scoped instant */
			tw_event(w);
			tw_lit(w, "\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\","
			       "\"name\":\"[memory]\"");
			put_where(w, o);
			tw_lit(w, ",\"args\":");
			tw_raw(w, o->args, strlen(o->args));
			tw_lit(w, "}");
			continue;
		}
		if (o->cat >= CAT_FLOW_S) {
			tw_event(w);
			tw_lit(w, "\"ph\":\"");
			tw_raw(w, o->cat == CAT_FLOW_S ? "s" : "f", 1);
			tw_lit(w, "\",\"id\":");
			tw_int(w, o->flow_id);
			put_where(w, o);
			tw_lit(w, ",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\"");
			if (o->cat == CAT_FLOW_F)
				tw_lit(w, ",\"bp\":\"e\"");
			tw_lit(w, "}");
			continue;
		}
		tw_x(w, cat_names[o->cat], o->name, (size_t)-1, A.pid, o->tid, o->start, o->end);
		if (o->args != NULL) {
			tw_lit(w, ",\"args\":");
			tw_raw(w, o->args, strlen(o->args));
		}
		tw_lit(w, "}");
	}
	if (note[0])
		tw_note(w, note);
}

void ops_end(void)
{
	size_t i;

	for (i = 0; i < nev; i++) {
		free(ev[i].name);
		cJSON_free(ev[i].args);
	}
	free(ev);
	ev = NULL;
	nev = capev = 0;
}

void ops_cancel(void)
{
	remove_dir();
	ops_end();
}
