/*
 * _ops_observer.cpp: PyTorch operators for one agent capture window, from
 * one global RecordFunction callback (GPROF_TORCH_OPS=observer, ops.py;
 * docs/AGENT.md "Operators"). Built against the job's own torch by
 * build_ops.py (torch.utils.cpp_extension); plain CPython API, no pybind11,
 * so it compiles in seconds.
 *
 * Data flow: start() registers the callback (scopes FUNCTION,
 * BACKWARD_FUNCTION, USER_SCOPE; ids always, inputs only for shapes). Each
 * thread that runs an operator gets a buffer of its own (struct buf) the
 * first time; its start callback appends a record (struct rec: name,
 * CLOCK_REALTIME ns, sequence number, forward thread, handle, and with
 * shapes the inputs' dims and dtypes) to the buffer's chunks and pushes
 * (handle, record) on the buffer's stack; the end callback pops the entry
 * with its handle and stamps the end. stop(path) turns the callback off,
 * waits until no thread is inside a callback, writes the records as a
 * Kineto-shaped JSON file (the shape agent/ops.c reads: cpu_op and
 * user_annotation X events, times in microseconds relative to
 * baseTimeNanoseconds, fwdbwd flows from a forward op to its backward ops
 * by sequence number), and takes every chunk back.
 *
 * Invariants:
 * - The hot path takes no lock: a thread writes only its own buffer. A
 *   lock is taken when a thread first records (its buffer is made) and
 *   when its chunk is full (a 64 KB chunk holds ~1,000 records).
 * - Memory is bounded: chunks come from one pool charged against the
 *   budget start() is given; a record that finds none is dropped and
 *   counted. Chunks, buffers and name tables are never freed, only reused
 *   (next window, or a new thread taking a dead thread's buffer): a thread
 *   still inside an operator when the callback is removed may run our end
 *   callback later, and it must find memory that is still ours.
 * - A thread writes only between setting its buffer's busy flag and
 *   clearing it, and only if recording is on (read after busy is set);
 *   stop() turns recording off, then waits for each busy flag to clear:
 *   after that no thread writes until the next start().
 * - Names are copied (interned per thread, per window): a user scope's
 *   name belongs to its RecordFunction and dies with it.
 * - Nothing here throws into the operator that ran the callback.
 */
#include <Python.h>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>
#include <c10/util/typeid.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <mutex>
#include <sched.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kChunkBytes = 64 << 10;
constexpr int kStackDepth = 256;     // open operators per thread
constexpr size_t kNameSlots = 4096;  // distinct names per thread and window (a power of 2)
constexpr size_t kNameMax = 1000;    // longer names are cut
constexpr unsigned kMaxInputs = 32;  // inputs kept per operator
constexpr unsigned kMaxDims = 12;    // dims kept per input

enum : uint8_t { IN_OTHER, IN_TENSOR, IN_UNDEFINED, IN_SCALAR, IN_TENSORLIST, IN_LIST, IN_NONE };

struct chunk {
	chunk *next;
	size_t used;
	alignas(8) char data[kChunkBytes - 16];
};

/* One operator; its inputs (struct in, then dims) follow it in the chunk. */
struct rec {
	uint64_t start, end;  // CLOCK_REALTIME ns; end 0 while open
	int64_t seq;          // torch's sequence number, -1 for none
	uint64_t fwd_tid;     // torch's thread id of the forward op (backward ops), else 0
	uint64_t handle;      // the RecordFunction's handle
	const char *name;     // in the thread's name arena
	uint32_t size;        // bytes of this record with its inputs
	uint16_t ninputs;
	uint8_t scope;
	uint8_t pad;
};

struct in {
	uint8_t kind;
	int8_t dtype;
	uint8_t ndim;
	uint8_t pad[5];
	/* int64_t dims[ndim] */
};

struct open_op {
	uint64_t handle;
	rec *r;  // nullptr: not recorded (dropped), matched all the same
};

struct name_slot {
	uint64_t hash;
	const char *name;
};

/* A name's last address and its copy: operators' names are their schema's,
 * at a fixed address, so most lookups end here, checked by one memcmp. */
struct name_hit {
	const char *ptr;
	const char *name;
	size_t len;
};
constexpr size_t kHitSlots = 256;

struct buf {
	std::atomic<int> busy{0};
	std::atomic<int> dead{0};
	pid_t tid = 0;           // the OS thread (gettid), the agent's tid
	uint64_t lid = 0;        // torch's own thread id (RecordFunction::currentThreadId)
	chunk *head = nullptr, *cur = nullptr;        // records, in start order
	chunk *nhead = nullptr, *ncur = nullptr;      // name arena
	open_op stack[kStackDepth];
	int depth = 0;
	name_slot names[kNameSlots];
	size_t nnames = 0;
	name_hit hits[kHitSlots];
	uint64_t drops = 0, unmatched = 0, overflow = 0;
	buf *next = nullptr;
};

/* shared by every thread; set by start() and stop() only */
std::atomic<bool> g_on{false};
std::mutex g_mu;                // guards g_bufs, g_spare, g_free, g_bytes
buf *g_bufs = nullptr;          // buffers of live (or died this window) threads
buf *g_spare = nullptr;         // buffers of dead threads, for new ones
chunk *g_free = nullptr;        // chunks not in use
size_t g_bytes = 0;             // chunk bytes allocated (never freed)
size_t g_budget = 0;
bool g_shapes = false;
at::CallbackHandle g_cb = 0;
uint64_t g_t0 = 0;              // the window's start, CLOCK_REALTIME ns
uint64_t g_alloc_fail = 0;

thread_local buf *t_buf = nullptr;

uint64_t now_ns()
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Marks the thread's buffer dead when the thread ends, so that stop() can
 * give it to a new thread once its records are written. */
struct reaper {
	~reaper()
	{
		if (t_buf != nullptr)
			t_buf->dead.store(1, std::memory_order_release);
		t_buf = nullptr;
	}
};
thread_local reaper t_reaper;

/* The calling thread's buffer, made (or a dead thread's taken) on its
 * first operator. */
buf *attach()
{
	buf *b;

	(void)&t_reaper; /* constructs it: its destructor runs at thread exit */
	std::lock_guard<std::mutex> g(g_mu);
	if (g_spare != nullptr) {
		b = g_spare;
		g_spare = b->next;
	} else {
		b = new (std::nothrow) buf;
		if (b == nullptr)
			return nullptr;
		std::memset(b->names, 0, sizeof(b->names));
		std::memset(b->stack, 0, sizeof(b->stack));
		std::memset(b->hits, 0, sizeof(b->hits));
	}
	b->dead.store(0);
	b->tid = (pid_t)syscall(SYS_gettid);
	b->lid = at::RecordFunction::currentThreadId();
	b->next = g_bufs;
	g_bufs = b;
	t_buf = b;
	return b;
}

chunk *take_chunk()
{
	chunk *c;

	std::lock_guard<std::mutex> g(g_mu);
	if (g_free != nullptr) {
		c = g_free;
		g_free = c->next;
	} else {
		if (g_bytes + sizeof(chunk) > g_budget)
			return nullptr;
		c = static_cast<chunk *>(std::malloc(sizeof(chunk)));
		if (c == nullptr) {
			g_alloc_fail++;
			return nullptr;
		}
		g_bytes += sizeof(chunk);
	}
	c->next = nullptr;
	c->used = 0;
	return c;
}

/* n bytes (8-aligned) at the end of a chunk list, or nullptr. */
void *carve(chunk **head, chunk **cur, size_t n)
{
	n = (n + 7) & ~size_t(7);
	if (n > sizeof(((chunk *)nullptr)->data))
		return nullptr;
	if (*cur == nullptr || (*cur)->used + n > sizeof((*cur)->data)) {
		chunk *c = take_chunk();

		if (c == nullptr)
			return nullptr;
		if (*cur != nullptr)
			(*cur)->next = c;
		else
			*head = c;
		*cur = c;
	}
	void *p = (*cur)->data + (*cur)->used;
	(*cur)->used += n;
	return p;
}

/* The name's copy in the thread's arena (one per distinct name). */
const char *intern_slow(buf *b, const char *s, size_t *len)
{
	uint64_t h = 1469598103934665603ull;
	size_t n = 0, i, probes;
	for (; s[n] && n < kNameMax; n++)
		h = (h ^ (unsigned char)s[n]) * 1099511628211ull;
	/* open addressing, at most 3/4 full: an empty slot is always found */
	for (i = h & (kNameSlots - 1), probes = 0;; i = (i + 1) & (kNameSlots - 1)) {
		name_slot *sl = &b->names[i];

		if (sl->name == nullptr)
			break;
		if (sl->hash == h && std::memcmp(sl->name, s, n) == 0 && sl->name[n] == '\0') {
			*len = n;
			return sl->name;
		}
		if (++probes == kNameSlots)
			return nullptr;
	}
	if (b->nnames >= kNameSlots * 3 / 4)
		return nullptr;
	char *p = static_cast<char *>(carve(&b->nhead, &b->ncur, n + 1));
	if (p == nullptr)
		return nullptr;
	std::memcpy(p, s, n);
	p[n] = '\0';
	b->names[i].hash = h;
	b->names[i].name = p;
	b->nnames++;
	*len = n;
	return p;
}

const char *intern(buf *b, const char *s)
{
	if (s == nullptr)
		s = "";
	name_hit *hit = &b->hits[((uintptr_t)s >> 3) & (kHitSlots - 1)];
	if (hit->ptr == s && std::memcmp(hit->name, s, hit->len + 1) == 0)
		return hit->name;
	size_t len = 0;
	const char *name = intern_slow(b, s, &len);
	if (name != nullptr && name[len] == '\0' && s[len] == '\0') {  /* names cut short: no hit */
		hit->ptr = s;
		hit->name = name;
		hit->len = len;
	}
	return name;
}

/* Bytes the inputs of fn take in a record. */
size_t inputs_size(const at::RecordFunction &fn, unsigned *count)
{
	auto ins = fn.inputs();
	unsigned n = ins.size() < kMaxInputs ? (unsigned)ins.size() : kMaxInputs;
	size_t bytes = 0;

	for (unsigned i = 0; i < n; i++) {
		const c10::IValue &v = ins[i];
		size_t d = 0;

		if (v.isTensor()) {
			const at::Tensor &t = v.toTensor();
			if (t.defined() && !t.is_nested())
				d = t.dim() < (int64_t)kMaxDims ? (size_t)t.dim() : kMaxDims;
		}
		bytes += sizeof(in) + d * sizeof(int64_t);
	}
	*count = n;
	return bytes;
}

void write_inputs(const at::RecordFunction &fn, char *p, unsigned n)
{
	auto ins = fn.inputs();

	for (unsigned i = 0; i < n; i++) {
		const c10::IValue &v = ins[i];
		in *x = reinterpret_cast<in *>(p);
		int64_t *dims = reinterpret_cast<int64_t *>(p + sizeof(in));

		std::memset(x, 0, sizeof(*x));
		x->kind = IN_OTHER;
		if (v.isTensor()) {
			const at::Tensor &t = v.toTensor();
			if (!t.defined()) {
				x->kind = IN_UNDEFINED;
			} else {
				x->kind = IN_TENSOR;
				x->dtype = (int8_t)t.scalar_type();
				if (!t.is_nested()) {
					auto sz = t.sizes();
					unsigned d = sz.size() < kMaxDims ? (unsigned)sz.size() : kMaxDims;
					for (unsigned k = 0; k < d; k++)
						dims[k] = sz[k];
					x->ndim = (uint8_t)d;
				}
			}
		} else if (v.isScalar()) {
			x->kind = IN_SCALAR;
		} else if (v.isTensorList()) {
			x->kind = IN_TENSORLIST;
		} else if (v.isList()) {
			x->kind = IN_LIST;
		} else if (v.isNone()) {
			x->kind = IN_NONE;
		}
		p += sizeof(in) + x->ndim * sizeof(int64_t);
	}
}

/* Sets the busy flag; false (flag cleared) when recording is off. */
inline bool enter(buf *b)
{
	b->busy.store(1, std::memory_order_seq_cst);
	if (g_on.load(std::memory_order_seq_cst))
		return true;
	b->busy.store(0, std::memory_order_release);
	return false;
}

inline void leave(buf *b)
{
	b->busy.store(0, std::memory_order_release);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn)
{
	buf *b = t_buf;

	if (!g_on.load(std::memory_order_relaxed))
		return nullptr;
	if (b == nullptr && (b = attach()) == nullptr)
		return nullptr;
	if (!enter(b))
		return nullptr;
	if (b->depth >= kStackDepth) {
		b->overflow++;  /* its end finds no entry: counted unmatched too */
		leave(b);
		return nullptr;
	}
	rec *r = nullptr;
	try {
		const char *name = intern(b, fn.name());
		unsigned nin = 0;
		size_t extra = g_shapes && name != nullptr ? inputs_size(fn, &nin) : 0;

		if (name != nullptr)
			r = static_cast<rec *>(carve(&b->head, &b->cur, sizeof(rec) + extra));
		if (r != nullptr) {
			r->end = 0;
			r->seq = fn.seqNr();
			r->fwd_tid = fn.forwardThreadId();
			r->handle = fn.handle();
			r->name = name;
			r->size = (uint32_t)((sizeof(rec) + extra + 7) & ~size_t(7));
			r->ninputs = (uint16_t)nin;
			r->scope = (uint8_t)fn.scope();
			if (nin)
				write_inputs(fn, reinterpret_cast<char *>(r + 1), nin);
		} else {
			b->drops++;
		}
	} catch (...) {
		if (r != nullptr)
			r->ninputs = 0;  /* the record stands, without its inputs */
		else
			b->drops++;
	}
	b->stack[b->depth].handle = fn.handle();
	b->stack[b->depth].r = r;
	b->depth++;
	if (r != nullptr)
		r->start = now_ns();  /* last: the operator's work starts now */
	leave(b);
	return nullptr;
}

void on_end(const at::RecordFunction &fn, at::ObserverContext *)
{
	uint64_t t = now_ns();  /* first: the operator's work ended */
	buf *b = t_buf;
	uint64_t h;
	int i;

	if (b == nullptr || !enter(b))
		return;
	h = fn.handle();
	for (i = b->depth - 1; i >= 0 && b->stack[i].handle != h; i--)
		;
	if (i < 0) {
		b->unmatched++;  /* begun before the window, another thread's, or past the stack */
	} else {
		if (b->stack[i].r != nullptr)
			b->stack[i].r->end = t;
		b->depth = i;  /* entries above it never ended: left open */
	}
	leave(b);
}

/* A scope opened from Python (ops.py's module scopes): a user_annotation
 * like a record_function's, without the RecordFunction (whose Python
 * entry, torch.ops.profiler._record_function_enter_new, costs tens of
 * microseconds a call). Its handle has the top bit set: torch's count up
 * from 1. Returns the handle, or 0 when nothing was recorded. */
uint64_t scope_push(const char *s)
{
	static thread_local uint64_t next = 0;
	buf *b = t_buf;
	uint64_t h = (1ull << 63) | ++next;
	rec *r = nullptr;

	if (!g_on.load(std::memory_order_relaxed))
		return 0;
	if (b == nullptr && (b = attach()) == nullptr)
		return 0;
	if (!enter(b))
		return 0;
	if (b->depth >= kStackDepth) {
		b->overflow++;
		leave(b);
		return 0;
	}
	const char *name = intern(b, s);
	if (name != nullptr)
		r = static_cast<rec *>(carve(&b->head, &b->cur, sizeof(rec)));
	if (r != nullptr) {
		r->end = 0;
		r->seq = -1;
		r->fwd_tid = 0;
		r->handle = h;
		r->name = name;
		r->size = sizeof(rec);
		r->ninputs = 0;
		r->scope = (uint8_t)at::RecordScope::USER_SCOPE;
	} else {
		b->drops++;
	}
	b->stack[b->depth].handle = h;
	b->stack[b->depth].r = r;
	b->depth++;
	if (r != nullptr)
		r->start = now_ns();
	leave(b);
	return h;
}

void scope_pop(uint64_t h)
{
	uint64_t t = now_ns();
	buf *b = t_buf;
	int i;

	if (h == 0 || b == nullptr || !enter(b))
		return;
	for (i = b->depth - 1; i >= 0 && b->stack[i].handle != h; i--)
		;
	if (i < 0) {
		b->unmatched++;
	} else {
		if (b->stack[i].r != nullptr)
			b->stack[i].r->end = t;
		b->depth = i;
	}
	leave(b);
}

/* ---- the file ---- */

struct out {
	FILE *f;
	bool ok = true;
	void s(const char *x) { if (std::fputs(x, f) < 0) ok = false; }
	void c(char x) { if (std::fputc(x, f) == EOF) ok = false; }
	void u(uint64_t v) { std::fprintf(f, "%llu", (unsigned long long)v); }
	void i(int64_t v) { std::fprintf(f, "%lld", (long long)v); }
	/* ns after base as microseconds with 3 decimals */
	void us(uint64_t ns) { std::fprintf(f, "%llu.%03u", (unsigned long long)(ns / 1000), (unsigned)(ns % 1000)); }
	void str(const char *x)
	{
		c('"');
		for (const unsigned char *p = (const unsigned char *)x; *p; p++) {
			if (*p == '"' || *p == '\\') {
				c('\\');
				c((char)*p);
			} else if (*p < 0x20) {
				std::fprintf(f, "\\u%04x", *p);
			} else {
				c((char)*p);
			}
		}
		c('"');
	}
};

const char *dtype_name(int8_t t)
{
	static thread_local std::string s;

	try {
		auto n = caffe2::TypeMeta::fromScalarType(static_cast<c10::ScalarType>(t)).name();
		s.assign(n.data(), n.size());
	} catch (...) {
		s.clear();
	}
	return s.c_str();
}

void write_args_inputs(out &o, const rec *r)
{
	const char *p = reinterpret_cast<const char *>(r + 1);
	std::vector<const in *> ins;

	for (unsigned k = 0; k < r->ninputs; k++) {
		const in *x = reinterpret_cast<const in *>(p);
		ins.push_back(x);
		p += sizeof(in) + x->ndim * sizeof(int64_t);
	}
	o.s(",\"Input Dims\":[");
	for (size_t k = 0; k < ins.size(); k++) {
		const int64_t *d = reinterpret_cast<const int64_t *>(ins[k] + 1);
		o.s(k ? ",[" : "[");
		for (unsigned j = 0; j < ins[k]->ndim; j++) {
			if (j)
				o.c(',');
			o.i(d[j]);
		}
		o.c(']');
	}
	o.s("],\"Input type\":[");
	for (size_t k = 0; k < ins.size(); k++) {
		static const char *const kinds[] = { "", "", "", "Scalar", "TensorList", "GenericList", "" };
		if (k)
			o.c(',');
		o.str(ins[k]->kind == IN_TENSOR ? dtype_name(ins[k]->dtype) : kinds[ins[k]->kind]);
	}
	o.c(']');
}

struct stats {
	uint64_t events = 0, flows = 0, drops = 0, open = 0, unmatched = 0, overflow = 0, threads = 0;
};

bool skipped(const rec *r)
{
	/* the scope-making calls of record_function are operators of their own */
	return std::strncmp(r->name, "profiler::_record_function", 26) == 0;
}

template <typename F> void each_rec(buf *b, F fn)
{
	for (chunk *c = b->head; c != nullptr; c = c->next)
		for (size_t off = 0; off < c->used;) {
			const rec *r = reinterpret_cast<const rec *>(c->data + off);
			fn(r);
			off += r->size;
		}
}

void write_file(FILE *f, stats *st)
{
	out o{ f };
	uint64_t base = g_t0 - g_t0 % 1000000000ull;  /* whole seconds, before every record */
	int pid = (int)getpid();
	uint64_t ext = 0;
	/* (torch thread id, sequence number) -> the outermost forward op */
	struct fwd { const rec *r; pid_t tid; uint64_t flow; };
	std::unordered_map<std::string, fwd> fwds;
	auto key = [](uint64_t lid, int64_t seq) { return std::to_string(lid) + "/" + std::to_string(seq); };

	for (buf *b = g_bufs; b != nullptr; b = b->next)
		each_rec(b, [&](const rec *r) {
			if (r->end == 0 || r->fwd_tid != 0 || r->seq < 0 || r->scope != (uint8_t)at::RecordScope::FUNCTION)
				return;
			auto it = fwds.find(key(b->lid, r->seq));
			if (it == fwds.end())
				fwds.emplace(key(b->lid, r->seq), fwd{ r, b->tid, 0 });
			else if (r->start < it->second.r->start)
				it->second.r = r;
		});
	o.s("{\"schemaVersion\":1,\"baseTimeNanoseconds\":");
	o.u(base);
	o.s(",\"traceEvents\":[");
	bool first = true;
	uint64_t flow_id = 0;
	for (buf *b = g_bufs; b != nullptr; b = b->next) {
		bool any = false;
		st->drops += b->drops;
		st->unmatched += b->unmatched;
		st->overflow += b->overflow;
		st->open += (uint64_t)b->depth;
		each_rec(b, [&](const rec *r) {
			if (r->end == 0 || skipped(r))
				return;
			any = true;
			o.s(first ? "\n{" : ",\n{");
			first = false;
			o.s("\"ph\":\"X\",\"cat\":");
			o.s(r->scope == (uint8_t)at::RecordScope::USER_SCOPE ? "\"user_annotation\"" : "\"cpu_op\"");
			o.s(",\"name\":");
			o.str(r->name);
			o.s(",\"pid\":");
			o.i(pid);
			o.s(",\"tid\":");
			o.i(b->tid);
			o.s(",\"ts\":");
			o.us(r->start - base);
			o.s(",\"dur\":");
			o.us(r->end > r->start ? r->end - r->start : 0);
			o.s(",\"args\":{\"External id\":");
			o.u(++ext);
			o.s(",\"Record function id\":");
			o.u(r->handle);
			if (r->seq >= 0) {
				o.s(",\"Sequence number\":");
				o.i(r->seq);
				o.s(",\"Fwd thread id\":");
				o.u(r->fwd_tid);
			}
			if (r->ninputs)
				write_args_inputs(o, r);
			o.s("}}");
			st->events++;
			if (r->fwd_tid == 0 || r->seq < 0)
				return;
			auto it = fwds.find(key(r->fwd_tid, r->seq));
			if (it == fwds.end() || it->second.r->end == 0)
				return;
			fwd &fw = it->second;
			/* one end of a fwdbwd flow: "s" on the forward op, "f" (bound to
			 * the enclosing slice, "bp":"e") on the backward one */
			auto flow = [&](const char *ph, long tid, uint64_t start, const char *tail) {
				o.s(",\n{\"ph\":\"");
				o.s(ph);
				o.s("\",\"id\":");
				o.u(fw.flow);
				o.s(",\"pid\":");
				o.i(pid);
				o.s(",\"tid\":");
				o.i(tid);
				o.s(",\"ts\":");
				o.us(start - base);
				o.s(",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\"");
				o.s(tail);
			};
			if (fw.flow == 0) {  /* the flow's start, on the forward op */
				fw.flow = ++flow_id;
				flow("s", fw.tid, fw.r->start, "}");
			}
			flow("f", b->tid, r->start, ",\"bp\":\"e\"}");
			st->flows++;
		});
		st->threads += any;
	}
	o.s("\n]}\n");
	if (!o.ok)
		errno = EIO;
}

/* After a window: every chunk back to the pool, every buffer empty, dead
 * threads' buffers kept for new threads. Only with recording off and no
 * thread inside a callback. */
void reset_all()
{
	std::lock_guard<std::mutex> g(g_mu);
	buf **pp = &g_bufs;

	while (*pp != nullptr) {
		buf *b = *pp;
		for (chunk **h : { &b->head, &b->nhead }) {
			chunk *c = *h;
			while (c != nullptr) {
				chunk *n = c->next;
				c->next = g_free;
				g_free = c;
				c = n;
			}
			*h = nullptr;
		}
		b->cur = b->ncur = nullptr;
		b->depth = 0;
		std::memset(b->names, 0, sizeof(b->names));
		std::memset(b->hits, 0, sizeof(b->hits));
		b->nnames = 0;
		b->drops = b->unmatched = b->overflow = 0;
		if (b->dead.load(std::memory_order_acquire)) {
			*pp = b->next;
			b->next = g_spare;
			g_spare = b;
		} else {
			pp = &b->next;
		}
	}
}

void quiesce()
{
	std::vector<buf *> all;
	{
		std::lock_guard<std::mutex> g(g_mu);
		for (buf *b = g_bufs; b != nullptr; b = b->next)
			all.push_back(b);
	}
	for (buf *b : all)
		while (b->busy.load(std::memory_order_seq_cst))
			sched_yield();
}

/* ---- Python ---- */

PyObject *py_start(PyObject *, PyObject *args)
{
	int shapes = 0;
	unsigned long long budget = 0;

	if (!PyArg_ParseTuple(args, "pK", &shapes, &budget))
		return nullptr;
	if (g_cb != 0) {
		PyErr_SetString(PyExc_RuntimeError, "the operator observer is running already");
		return nullptr;
	}
	reset_all();
	g_shapes = shapes != 0;
	g_budget = (size_t)budget;
	g_alloc_fail = 0;
	try {
		g_cb = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
		                                     .needsInputs(g_shapes)
		                                     .needsIds(true)
		                                     .scopes({ at::RecordScope::FUNCTION,
		                                               at::RecordScope::BACKWARD_FUNCTION,
		                                               at::RecordScope::USER_SCOPE }));
	} catch (const std::exception &e) {
		PyErr_Format(PyExc_RuntimeError, "addGlobalCallback: %s", e.what());
		return nullptr;
	}
	g_t0 = now_ns();
	g_on.store(true, std::memory_order_seq_cst);
	Py_RETURN_NONE;
}

/* stop(path or None) -> dict of counts; the file is written when a path
 * is given. */
PyObject *py_stop(PyObject *, PyObject *args)
{
	const char *path = nullptr;
	stats st;
	int err = 0;
	size_t pool;

	if (!PyArg_ParseTuple(args, "z", &path))
		return nullptr;
	if (g_cb == 0) {
		PyErr_SetString(PyExc_RuntimeError, "the operator observer is not running");
		return nullptr;
	}
	g_on.store(false, std::memory_order_seq_cst);
	Py_BEGIN_ALLOW_THREADS
	try {
		at::removeCallback(g_cb);
	} catch (...) {
	}
	g_cb = 0;
	quiesce();
	if (path != nullptr) {
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		FILE *f = fd >= 0 ? fdopen(fd, "w") : nullptr;

		if (f == nullptr) {
			err = errno;
			if (fd >= 0)
				close(fd);
		} else {
			static char iobuf[1 << 20];
			setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
			try {
				write_file(f, &st);
			} catch (...) {
				errno = ENOMEM;
			}
			if (ferror(f))
				err = errno ? errno : EIO;
			if (fclose(f) != 0 && err == 0)
				err = errno;
		}
	}
	{
		std::lock_guard<std::mutex> g(g_mu);
		pool = g_bytes;
	}
	reset_all();
	Py_END_ALLOW_THREADS
	if (err != 0) {
		errno = err;
		return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
	}
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "events", (unsigned long long)st.events,
	                     "flows", (unsigned long long)st.flows, "drops", (unsigned long long)st.drops,
	                     "open", (unsigned long long)st.open, "unmatched",
	                     (unsigned long long)st.unmatched, "overflow", (unsigned long long)st.overflow,
	                     "threads", (unsigned long long)st.threads, "pool_bytes",
	                     (unsigned long long)pool);
}

PyObject *py_scope_push(PyObject *, PyObject *arg)
{
	const char *s = PyUnicode_AsUTF8(arg);  /* kept by the str: ops.py keeps its names */

	if (s == nullptr)
		return nullptr;
	return PyLong_FromUnsignedLongLong(scope_push(s));
}

PyObject *py_scope_pop(PyObject *, PyObject *arg)
{
	unsigned long long h = PyLong_AsUnsignedLongLong(arg);

	if (h == (unsigned long long)-1 && PyErr_Occurred())
		return nullptr;
	scope_pop(h);
	Py_RETURN_NONE;
}

PyMethodDef methods[] = {
	{ "scope_push", py_scope_push, METH_O, "scope_push(name) -> handle: opens a user_annotation" },
	{ "scope_pop", py_scope_pop, METH_O, "scope_pop(handle): closes it" },
	{ "start", py_start, METH_VARARGS, "start(shapes, budget_bytes): records operators" },
	{ "stop", py_stop, METH_VARARGS, "stop(path or None) -> counts: stops, writes the file" },
	{ nullptr, nullptr, 0, nullptr },
};

#define GPROF_STR_(x) #x
#define GPROF_STR(x) GPROF_STR_(x)
#define GPROF_CAT_(a, b) a##b
#define GPROF_CAT(a, b) GPROF_CAT_(a, b)

PyModuleDef module = { PyModuleDef_HEAD_INIT, GPROF_STR(TORCH_EXTENSION_NAME),
	                   "PyTorch operators from one RecordFunction callback (gprof_agent.ops)", -1,
	                   methods, nullptr, nullptr, nullptr, nullptr };

} // namespace

PyMODINIT_FUNC GPROF_CAT(PyInit_, TORCH_EXTENSION_NAME)(void)
{
	return PyModule_Create(&module);
}
