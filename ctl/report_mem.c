/*
 * report_mem: see report_mem.h. The figures, for both sources:
 *
 * Snapshot. A history covers the window only, so the allocated (and
 * reserved) bytes at its start are the end state's less the history's net
 * change; replaying the entries forward from there gives every moment's
 * total, and the peak is the first moment it is highest. The allocations
 * live at the peak are those made in the window and not yet freed by then,
 * plus the older ones still live: those freed after the peak with no
 * allocation at their address before (their size is in the free), and the
 * end state's blocks at addresses the window never allocated.
 *
 * Trace. Kineto's [memory] events carry the totals after each allocation
 * or free, so the peak is read off them; the allocations live at the peak
 * are those of the trace not freed by then (older ones are not in it); each
 * is attributed to the innermost operator on its thread around it.
 *
 * Work is bounded by the input: one pass to find the peak and one up to it,
 * an address table of at most one slot per entry (keyed, htab.c); the text
 * of an allocation (its frames, its operator) is written only for the
 * MEM_TOP kept. A snapshot's values can be shared (the memo), so a small
 * file can name one long list many times; every step of the walk is counted
 * (pk_steps) and a snapshot whose walk passes MEM_STEPS_PER_BYTE times its
 * size is refused; so is one with more than MEM_MAX_DEVICES device
 * histories, and a pickle whose first value is not a dict (a snapshot's
 * is) at that value, before the rest is read.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jsonint.h"
#include "grow.h"
#include "htab.h"
#include "pickle.h"
#include "report_mem.h"

/* The bounds on a snapshot (docs/REPORT.md, Limits). A real one walks in
 * under 2 steps per byte. */
#define MEM_STEPS_PER_BYTE 32
#define MEM_STEPS_FIXED 100000
#define MEM_MAX_DEVICES 256

uint64_t mreport_peak_bytes;

/* pk_steps at which the walk of the snapshot being read stops. */
static uint64_t steps_end = UINT64_MAX;

static bool over(void)
{
	return pk_steps > steps_end;
}

/* ---- an address table: addr -> a value, open addressing ---- */

struct atab { uint64_t *k; int64_t *v; size_t mask; };

static bool atab_init(struct atab *t, size_t n)
{
	size_t cap = 64;

	while (cap < 2 * n + 2)
		cap *= 2;
	t->k = calloc(cap, sizeof(*t->k));
	t->v = calloc(cap, sizeof(*t->v));
	t->mask = cap - 1;
	return t->k != NULL && t->v != NULL;
}

static void atab_free(struct atab *t)
{
	free(t->k);
	free(t->v);
}

/* The slot of addr (key stored as addr+1 so 0 means empty). */
static size_t atab_slot(const struct atab *t, uint64_t addr)
{
	size_t i = (size_t)htab_hash(&addr, sizeof(addr)) & t->mask;

	/* keyed (htab.c): a file cannot choose addresses that share a chain */
	htab_counts.lookups++;
	while (t->k[i] != 0 && t->k[i] != addr + 1) {
		htab_counts.probes++;
		i = (i + 1) & t->mask;
	}
	return i;
}

static void atab_set(struct atab *t, uint64_t addr, int64_t v)
{
	size_t i = atab_slot(t, addr);

	t->k[i] = addr + 1;
	t->v[i] = v;
}

/* -1 when absent */
static int64_t atab_get(const struct atab *t, uint64_t addr)
{
	size_t i = atab_slot(t, addr);

	return t->k[i] ? t->v[i] : -1;
}

/* ---- the largest live allocations ---- */

/* A candidate for the largest live allocations: its size and where its
 * text will come from (src: a snapshot's frames list, or a trace's event),
 * written only for the MEM_TOP kept: writing it for every live allocation
 * would walk a (shared) frames list or every operator once per allocation. */
enum ckind { C_BEFORE, C_FRAMES, C_BLOCK, C_EVENT };
struct cand { uint64_t bytes; enum ckind kind; const void *src; };
struct tops { struct cand v[MEM_TOP]; size_t n; };

static void top_add(struct tops *t, uint64_t bytes, enum ckind kind, const void *src)
{
	size_t i, n = t->n;

	if (n == MEM_TOP && bytes <= t->v[n - 1].bytes)
		return;
	if (n < MEM_TOP)
		t->n++;
	for (i = t->n - 1; i > 0 && t->v[i - 1].bytes < bytes; i--)
		t->v[i] = t->v[i - 1];
	t->v[i] = (struct cand){ bytes, kind, src };
}

static const char *base_name(const char *p, size_t n, size_t *out)
{
	size_t i;

	for (i = n; i > 0 && p[i - 1] != '/'; i--)
		;
	*out = n - i;
	return p + i;
}

/* A C++ frame's function, for people: "(anonymous namespace)::" left out,
 * the parameter list cut; empty when it is one every allocation passes
 * through (the unwinder, the allocator, the tensor factories, the C
 * library), so the first one left names the operator. */
static void cxx_name(const struct pk *name, char *out, size_t n)
{
	static const char anon[] = "(anonymous namespace)::";
	static const char *const skip[] = { "unwind", "torch::unwind", "torch::CapturedTraceback",
		"torch::cuda::gather_with_cpp", "c10::", "at::detail::", "at::create_out",
		"at::empty", "std::", "_start", "__libc", "start_thread", "clone", "??", NULL };
	const char *p = name->u.s.p, *e = p + name->u.s.n;
	size_t len = 0, k;

	while (p < e && len + 1 < n) {
		if ((size_t)(e - p) >= sizeof(anon) - 1 && memcmp(p, anon, sizeof(anon) - 1) == 0) {
			p += sizeof(anon) - 1;
			continue;
		}
		if (*p == '(')
			break;
		out[len++] = *p++;
	}
	out[len] = '\0';
	for (k = 0; skip[k] != NULL; k++)
		if (strncmp(out, skip[k], strlen(skip[k])) == 0)
			out[0] = '\0';
	if (strstr(out, "::set_output") != NULL)
		out[0] = '\0';
}

/* "fn (file.py:12) < caller (file.py:40)": the innermost Python frames,
 * PyTorch's own left out when there are others. */
static void frames_text(const struct pk *frames, char *out, size_t n)
{
	size_t i, len = 0, shown = 0, nf = pk_len(frames);
	int pass;

	out[0] = '\0';
	for (pass = 0; pass < 2 && shown == 0; pass++) {
		for (i = 0; i < nf && shown < 3 && !over(); i++) {
			const struct pk *f = pk_at(frames, i), *fn = pk_get(f, "filename"),
			                *name = pk_get(f, "name");
			int64_t line = 0;
			const char *b;
			size_t bn;

			if (fn == NULL || fn->type != PK_STR || name == NULL || name->type != PK_STR)
				continue;
			if (fn->u.s.n < 3 || memcmp(fn->u.s.p + fn->u.s.n - 3, ".py", 3) != 0)
				continue; /* C++ frames (stacks="all") */
			if (pass == 0 && memmem(fn->u.s.p, fn->u.s.n, "/torch/", 7) != NULL)
				continue;
			pk_int(pk_get(f, "line"), &line);
			b = base_name(fn->u.s.p, fn->u.s.n, &bn);
			if (len < n)
				len += (size_t)snprintf(out + len, n - len, "%s%.*s (%.*s:%lld)",
				                        shown ? " < " : "", (int)(name->u.s.n > 80 ? 80 :
				                        name->u.s.n), name->u.s.p, (int)(bn > 60 ? 60 : bn),
				                        b, (long long)line);
			shown++;
		}
	}
	if (shown > 0)
		return;
	/* No Python frame: made off Python (autograd's backward thread, say):
	 * the innermost C++ functions that are not the allocator's own. */
	for (i = 0; i < nf && shown < 2 && !over(); i++) {
		const struct pk *name = pk_get(pk_at(frames, i), "name");
		char fn[120];

		if (name == NULL || name->type != PK_STR)
			continue;
		cxx_name(name, fn, sizeof(fn));
		if (fn[0] == '\0')
			continue;
		if (len < n)
			len += (size_t)snprintf(out + len, n - len, "%s%s", shown ? " < " : "", fn);
		shown++;
	}
	if (shown == 0)
		snprintf(out, n, "(no Python frames recorded)");
}

/* ---- snapshots ---- */

static struct mdev *dev_get(struct mreport *r, int64_t dev)
{
	size_t i;
	struct mdev *v;

	for (i = 0; i < r->ndevs; i++)
		if (r->devs[i].dev == dev)
			return &r->devs[i];
	if ((v = realloc(r->devs, (r->ndevs + 1) * sizeof(*v))) == NULL)
		return NULL;
	r->devs = v;
	v = &r->devs[r->ndevs++];
	memset(v, 0, sizeof(*v));
	v->dev = dev;
	return v;
}

static int64_t num(const struct pk *d, const char *key)
{
	int64_t v = 0;

	return pk_int(pk_get(d, key), &v) ? v : 0;
}

/* +1 alloc, -1 free_completed, +2 segment in, -2 segment out, 0 other */
static int action_of(const struct pk *e)
{
	const struct pk *a = pk_get(e, "action");

	if (pk_str_is(a, "alloc"))
		return 1;
	if (pk_str_is(a, "free_completed"))
		return -1;
	if (pk_str_is(a, "segment_alloc") || pk_str_is(a, "segment_map"))
		return 2;
	if (pk_str_is(a, "segment_free") || pk_str_is(a, "segment_unmap"))
		return -2;
	return 0;
}

static int one_device(struct mreport *r, const struct pk *snap, const struct pk *ev,
                      int64_t devno)
{
	const struct pk *segs = pk_get(snap, "segments");
	struct mdev *d = dev_get(r, devno);
	size_t i, j, n = pk_len(ev), peak_i = 0;
	int64_t a = 0, res = 0, net_a = 0, net_r = 0;
	bool at_start = true;
	struct atab t;
	struct tops top = { .n = 0 };

	if (d == NULL)
		return -ENOMEM;
	for (i = 0; i < pk_len(segs) && !over(); i++) {
		const struct pk *s = pk_at(segs, i), *blocks = pk_get(s, "blocks");
		int64_t sd = pk_get(s, "device") ? num(s, "device") : 0;

		if (sd != devno)
			continue;
		d->end_res += (uint64_t)num(s, "total_size");
		for (j = 0; j < pk_len(blocks) && !over(); j++) {
			const struct pk *b = pk_at(blocks, j), *st = pk_get(b, "state");

			if (st && st->type == PK_STR && st->u.s.n >= 6 && memcmp(st->u.s.p, "active", 6) == 0)
				d->end_alloc += (uint64_t)num(b, "size");
		}
	}
	for (i = 0; i < n && !over(); i++) {
		const struct pk *e = pk_at(ev, i);
		int64_t sz = num(e, "size");

		switch (action_of(e)) {
		case 1: net_a += sz; d->allocs++; d->alloc_bytes += (uint64_t)sz; break;
		case -1: net_a -= sz; d->frees++; break;
		case 2: net_r += sz; break;
		case -2: net_r -= sz; break;
		default: break;
		}
	}
	d->events = n;
	if ((int64_t)d->end_alloc < net_a || (int64_t)d->end_res < net_r) {
		/* the history frees more than the end state and it could hold */
		snprintf(r->note, sizeof(r->note), "GPU %lld: the history does not add up to the "
		         "end state (more freed than was there); figures from 0 at its start",
		         (long long)devno);
		net_a = (int64_t)d->end_alloc < net_a ? (int64_t)d->end_alloc : net_a;
		net_r = (int64_t)d->end_res < net_r ? (int64_t)d->end_res : net_r;
	}
	d->start_alloc = (uint64_t)((int64_t)d->end_alloc - net_a);
	d->start_res = (uint64_t)((int64_t)d->end_res - net_r);
	a = (int64_t)d->start_alloc;
	res = (int64_t)d->start_res;
	d->peak_alloc = (uint64_t)a;
	d->res_at_peak = d->peak_res = (uint64_t)res;
	for (i = 0; i < n && !over(); i++) {
		const struct pk *e = pk_at(ev, i);
		int64_t sz = num(e, "size");

		switch (action_of(e)) {
		case 1: a += sz; break;
		case -1: a -= sz; break;
		case 2: res += sz; break;
		case -2: res -= sz; break;
		default: continue;
		}
		if (res > (int64_t)d->peak_res)
			d->peak_res = (uint64_t)res;
		if (a > (int64_t)d->peak_alloc) {
			d->peak_alloc = (uint64_t)a;
			d->res_at_peak = (uint64_t)res;
			peak_i = i;
			at_start = false;
		}
	}
	/* who is live at the peak */
	if (!atab_init(&t, n + 1))
		return -ENOMEM;
	for (i = 0; i < n && !over(); i++) {
		const struct pk *e = pk_at(ev, i);
		int act = action_of(e);
		uint64_t addr = (uint64_t)num(e, "addr");

		if (act == 1) {
			/* an allocation at or before the peak is live unless freed by
			 * it; one after it only marks the address as the window's */
			if (!at_start && i <= peak_i)
				atab_set(&t, addr, (int64_t)i);
			else if (atab_get(&t, addr) == -1)
				atab_set(&t, addr, -2);
		} else if (act == -1) {
			int64_t was = atab_get(&t, addr);

			if (was >= 0 && !at_start && i <= peak_i)
				atab_set(&t, addr, -2); /* freed by the peak */
			else if (was == -1 && (at_start || i > peak_i)) {
				/* older than the window and freed after the peak: live then */
				top_add(&top, (uint64_t)num(e, "size"), C_BEFORE, NULL);
				atab_set(&t, addr, -2);
			} else if (was == -1)
				atab_set(&t, addr, -2);
		}
	}
	for (i = 0; i <= t.mask && !over(); i++) {
		if (t.k[i] == 0 || t.v[i] < 0)
			continue;
		{
			const struct pk *e = pk_at(ev, (size_t)t.v[i]);

			top_add(&top, (uint64_t)num(e, "size"), C_FRAMES, pk_get(e, "frames"));
		}
	}
	/* the end state's blocks the window never touched were live throughout */
	for (i = 0; i < pk_len(segs) && !over(); i++) {
		const struct pk *s = pk_at(segs, i), *blocks = pk_get(s, "blocks");
		int64_t sd = pk_get(s, "device") ? num(s, "device") : 0, addr = num(s, "address");

		if (sd != devno)
			continue;
		for (j = 0; j < pk_len(blocks) && !over(); j++) {
			const struct pk *b = pk_at(blocks, j), *st = pk_get(b, "state");
			int64_t ba = pk_get(b, "address") ? num(b, "address") : addr;

			addr = ba + num(b, "size");
			if (!(st && st->type == PK_STR && st->u.s.n >= 6 &&
			      memcmp(st->u.s.p, "active", 6) == 0))
				continue;
			if (atab_get(&t, (uint64_t)ba) != -1)
				continue; /* the window allocated or freed there */
			top_add(&top, (uint64_t)num(b, "size"), C_BLOCK, pk_get(b, "frames"));
		}
	}
	atab_free(&t);
	/* the text of the ones kept */
	for (i = 0; i < top.n && !over(); i++) {
		struct mtop *m = &d->top[d->ntop++];

		m->bytes = top.v[i].bytes;
		if (top.v[i].kind == C_BEFORE) {
			snprintf(m->where, sizeof(m->where), "(allocated before the window)");
			continue;
		}
		frames_text(top.v[i].src, m->where, sizeof(m->where));
		if (top.v[i].kind == C_BLOCK && strcmp(m->where, "(no Python frames recorded)") == 0)
			snprintf(m->where, sizeof(m->where), "(allocated before the window)");
	}
	return 0;
}

/* gprof_steps: the counters python/gprof_agent noted at each step of the
 * window (the first at its start). */
static int iterations(struct mreport *r, const struct pk *notes)
{
	size_t i, n = pk_len(notes), best = 0;
	struct mdev *d;
	double sum = 0;

	if (n < 2 || r->ndevs == 0)
		return 0;
	for (i = 1; i < r->ndevs; i++) /* the device the history is about */
		if (r->devs[i].events > r->devs[best].events)
			best = i;
	d = &r->devs[best];
	if ((d->its = calloc(n - 1, sizeof(*d->its))) == NULL)
		return -ENOMEM;
	for (i = 1; i < n && !over(); i++) {
		const struct pk *p = pk_at(notes, i - 1), *c = pk_at(notes, i);
		struct mstep *s = &d->its[d->nits++];

		s->step = (int64_t)i;
		s->allocations = num(c, "allocations") - num(p, "allocations");
		s->allocated = (uint64_t)num(c, "allocated");
		s->growth = num(c, "allocated") - num(p, "allocated");
		sum += (double)s->growth;
	}
	d->growth_per_it = sum / (double)d->nits;
	return 0;
}

int mreport_snapshot_mem(const char *name, const uint8_t *buf, size_t len, struct mreport *r)
{
	struct pickle p = { 0 };
	const struct pk *traces, *segs;
	size_t i, ndev = 0;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "%s", name);
	r->rank = -1;
	r->source = "snapshot";
	{
		const char *s = strstr(name, "_rank");

		if (s != NULL)
			r->rank = strtoll(s + 5, NULL, 10);
	}
	steps_end = pk_steps + (uint64_t)len * MEM_STEPS_PER_BYTE + MEM_STEPS_FIXED;
	p.want_dict = true; /* a snapshot is one: anything else is refused at once */
	if (pickle_load(&p, buf, len) < 0) {
		snprintf(r->error, sizeof(r->error), "not a readable memory snapshot: at byte %zu, %s",
		         p.err_off, p.error);
		goto out;
	}
	traces = pk_get(p.root, "device_traces");
	segs = pk_get(p.root, "segments");
	if (p.root->type != PK_DICT || segs == NULL || segs->type != PK_LIST ||
	    traces == NULL || traces->type != PK_LIST) {
		snprintf(r->error, sizeof(r->error), "a pickle, but not a PyTorch memory snapshot "
		         "(a dict with \"segments\" and \"device_traces\" lists, as "
		         "torch.cuda.memory._snapshot() returns)");
		goto out;
	}
	for (i = 0; i < pk_len(traces); i++) {
		const struct pk *ev = pk_at(traces, i);

		if (ev == NULL || ev->type != PK_LIST) {
			snprintf(r->error, sizeof(r->error), "device_traces[%zu] is not a list: not a "
			         "PyTorch memory snapshot", i);
			goto out;
		}
		if (pk_len(ev) == 0 && pk_len(traces) > 1)
			continue; /* a device this process never used */
		if (++ndev > MEM_MAX_DEVICES) {
			snprintf(r->error, sizeof(r->error), "histories of more than %d devices: more "
			         "GPUs than a machine has, not a PyTorch memory snapshot",
			         MEM_MAX_DEVICES);
			goto out;
		}
		if (one_device(r, p.root, ev, (int64_t)i) < 0) {
			snprintf(r->error, sizeof(r->error), "out of memory");
			goto out;
		}
		if (over())
			break;
	}
	if (r->ndevs == 0 || (r->ndevs == 1 && r->devs[0].events == 0))
		snprintf(r->note, sizeof(r->note), "the snapshot holds no allocation history: its "
		         "end state only (was recording on?)");
	if (iterations(r, pk_get(p.root, "gprof_steps")) < 0) {
		snprintf(r->error, sizeof(r->error), "out of memory");
		goto out;
	}
	if (over()) {
		snprintf(r->error, sizeof(r->error), "reading it takes more than %d steps per byte "
		         "(its lists are shared, or its dicts large, as no PyTorch memory snapshot's "
		         "are): refused", MEM_STEPS_PER_BYTE);
		goto out;
	}
	rc = 0;
out:
	steps_end = UINT64_MAX;
	mreport_peak_bytes = p.peak > mreport_peak_bytes ? p.peak : mreport_peak_bytes;
	pickle_free(&p);
	return rc;
}

int mreport_snapshot(const char *path, struct mreport *r)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	struct stat st;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "%s", path);
	if (f == NULL || fstat(fileno(f), &st) != 0) {
		snprintf(r->error, sizeof(r->error), "cannot read it: %s", strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size > (4ull << 30)) {
		snprintf(r->error, sizeof(r->error), "%lld bytes: larger than the 4 GiB gprofctl "
		         "report reads", (long long)st.st_size);
		goto out;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL ||
	    fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		snprintf(r->error, sizeof(r->error), "cannot read it: %s", buf ? "short read" :
		         "out of memory");
		goto out;
	}
	rc = mreport_snapshot_mem(path, buf, (size_t)st.st_size, r);
out:
	if (f != NULL)
		fclose(f);
	free(buf);
	return rc;
}

bool mreport_is_snapshot(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 7 && strcmp(name + n - 7, ".pickle") == 0;
}

/* ---- traces with [memory] events ---- */

bool mreport_event(struct mreport *r, const struct mevent *e)
{
	if (r->nev == r->capev) {
		size_t cap = r->capev ? r->capev * 2 : 1024;
		struct mevent *v = realloc(r->ev, cap * sizeof(*v));

		if (v == NULL)
			return false;
		r->ev = v;
		r->capev = cap;
	}
	r->ev[r->nev++] = *e;
	return true;
}

static bool name_is(const void *ctx, uint32_t pos, const void *key)
{
	return strcmp(((const struct mreport *)ctx)->names[pos], key) == 0;
}

/* The index of name in the trace's operator names. */
static bool intern(struct mreport *r, const char *name, uint32_t *out)
{
	uint64_t h = htab_hash(name, strlen(name));
	uint32_t pos = htab_find(&r->nidx, h, name_is, r, name);

	if (pos != HTAB_NONE) {
		*out = pos;
		return true;
	}
	if (r->nnames == r->capnames) {
		size_t cap = r->capnames ? r->capnames * 2 : 64;
		char **v = realloc(r->names, cap * sizeof(*v));

		if (v == NULL)
			return false;
		r->names = v;
		r->capnames = cap;
	}
	if (r->nnames >= HTAB_NONE || (r->names[r->nnames] = strdup(name)) == NULL)
		return false;
	if (htab_add(&r->nidx, h, (uint32_t)r->nnames) < 0) {
		free(r->names[r->nnames]);
		return false;
	}
	*out = (uint32_t)r->nnames++;
	return true;
}

bool mreport_op(struct mreport *r, double ts, double dur, int64_t tid, const char *name)
{
	uint32_t k;

	if (!intern(r, name, &k))
		return false;
	if (r->nops == r->capops) {
		size_t cap = r->capops ? r->capops * 2 : 1024;
		struct mop *v = realloc(r->ops, cap * sizeof(*v));

		if (v == NULL)
			return false;
		r->ops = v;
		r->capops = cap;
	}
	r->ops[r->nops++] = (struct mop){ ts, ts + dur, tid, k };
	return true;
}

static int by_ts(const void *a, const void *b)
{
	const struct mevent *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The innermost operator on e's thread around it. */
static const char *op_at(const struct mreport *r, const struct mevent *e)
{
	const struct mop *best = NULL;
	size_t i;

	for (i = 0; i < r->nops; i++) {
		const struct mop *o = &r->ops[i];

		if (o->tid == e->tid && o->a <= e->ts && e->ts <= o->b &&
		    (best == NULL || o->b - o->a < best->b - best->a))
			best = o;
	}
	return best ? r->names[best->name] : NULL;
}

static void trace_device(struct mreport *r, int64_t dev, const double *steps, size_t nsteps)
{
	struct mdev *d = dev_get(r, dev);
	size_t i, first = SIZE_MAX, peak_i = 0, k;
	struct atab t;
	struct tops top = { .n = 0 };

	if (d == NULL)
		return;
	for (i = 0; i < r->nev; i++) {
		const struct mevent *e = &r->ev[i];

		if (e->dev != dev)
			continue;
		if (first == SIZE_MAX) {
			first = i;
			d->start_alloc = (uint64_t)(e->total_alloc - e->bytes);
			d->start_res = (uint64_t)e->total_res;
			d->peak_alloc = d->start_alloc;
			d->res_at_peak = d->peak_res = d->start_res;
		}
		d->events++;
		if (e->bytes > 0) {
			d->allocs++;
			d->alloc_bytes += (uint64_t)e->bytes;
		} else if (e->bytes < 0)
			d->frees++;
		if ((uint64_t)e->total_res > d->peak_res)
			d->peak_res = (uint64_t)e->total_res;
		if ((uint64_t)e->total_alloc > d->peak_alloc) {
			d->peak_alloc = (uint64_t)e->total_alloc;
			d->res_at_peak = (uint64_t)e->total_res;
			peak_i = i;
		}
		d->end_alloc = (uint64_t)e->total_alloc;
		d->end_res = (uint64_t)e->total_res;
	}
	d->before_unknown = true;
	if (first == SIZE_MAX || !atab_init(&t, d->events))
		return;
	for (i = first; i <= peak_i; i++) {
		const struct mevent *e = &r->ev[i];

		if (e->dev != dev)
			continue;
		atab_set(&t, (uint64_t)e->addr, e->bytes > 0 ? (int64_t)i : -2);
	}
	for (k = 0; k <= t.mask; k++)
		if (t.k[k] != 0 && t.v[k] >= 0)
			top_add(&top, (uint64_t)r->ev[t.v[k]].bytes, C_EVENT, &r->ev[t.v[k]]);
	atab_free(&t);
	/* the operator of each one kept (op_at scans the operators) */
	for (k = 0; k < top.n; k++) {
		const char *op = op_at(r, top.v[k].src);
		struct mtop *m = &d->top[d->ntop++];

		m->bytes = top.v[k].bytes;
		snprintf(m->where, sizeof(m->where), "%s", op ? op : "(outside any operator)");
	}
	/* per iteration: allocations in it, and allocated memory at its end
	 * against the previous end (the first: against the window's start) */
	if (nsteps > 0 && (d->its = calloc(nsteps, sizeof(*d->its))) != NULL) {
		uint64_t prev = d->start_alloc, cur = d->start_alloc;
		double sum = 0;
		size_t s, j = first;

		for (s = 0; s < nsteps; s++) {
			struct mstep *m = &d->its[d->nits++];

			m->step = (int64_t)s + 1;
			for (; j < r->nev && r->ev[j].ts <= steps[2 * s + 1]; j++) {
				if (r->ev[j].dev != dev)
					continue;
				cur = (uint64_t)r->ev[j].total_alloc;
				if (r->ev[j].ts >= steps[2 * s] && r->ev[j].bytes > 0)
					m->allocations++;
			}
			m->allocated = cur;
			m->growth = (int64_t)(cur - prev);
			sum += (double)m->growth;
			prev = cur;
		}
		d->growth_per_it = sum / (double)d->nits;
	}
}

void mreport_finish_trace(struct mreport *r, const double *steps, size_t nsteps)
{
	size_t i, j;
	int64_t seen[16];
	size_t nseen = 0;

	r->source = "trace";
	qsort(r->ev, r->nev, sizeof(*r->ev), by_ts);
	for (i = 0; i < r->nev && nseen < 16; i++) {
		for (j = 0; j < nseen && seen[j] != r->ev[i].dev; j++)
			;
		if (j == nseen)
			seen[nseen++] = r->ev[i].dev;
	}
	for (j = 0; j < nseen; j++)
		trace_device(r, seen[j], steps, nsteps);
}

void mreport_free(struct mreport *r)
{
	size_t i;

	for (i = 0; i < r->ndevs; i++)
		free(r->devs[i].its);
	free(r->devs);
	free(r->ev);
	free(r->ops);
	for (i = 0; i < r->nnames; i++)
		free(r->names[i]);
	free(r->names);
	htab_deinit(&r->nidx);
	memset(r, 0, sizeof(*r));
}

/* ---- output ---- */

static const char *mib(double b, char *out, size_t n)
{
	double a = fabs(b);

	if (a >= 1024.0 * 1024 * 1024)
		snprintf(out, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
	else if (a >= 1024.0 * 1024)
		snprintf(out, n, "%.1f MiB", b / (1024.0 * 1024));
	else if (a >= 1024)
		snprintf(out, n, "%.1f KiB", b / 1024);
	else
		snprintf(out, n, "%.0f B", b);
	return out;
}

void mreport_print(FILE *f, const struct mreport *r, size_t top)
{
	char a[32], b[32], c[32], d4[32];
	size_t i, k;

	fprintf(f, "== memory: %s", r->path);
	if (r->rank >= 0)
		fprintf(f, " (rank %lld)", (long long)r->rank);
	fprintf(f, ", from a %s\n", r->source);
	if (r->note[0])
		fprintf(f, "  note: %s\n", r->note);
	for (i = 0; i < r->ndevs; i++) {
		const struct mdev *d = &r->devs[i];

		fprintf(f, "  GPU %lld: peak allocated %s, reserved then %s (fragmentation %s); "
		        "peak reserved %s\n", (long long)d->dev, mib((double)d->peak_alloc, a, sizeof(a)),
		        mib((double)d->res_at_peak, b, sizeof(b)),
		        mib((double)d->res_at_peak - (double)d->peak_alloc, c, sizeof(c)),
		        mib((double)d->peak_res, d4, sizeof(d4)));
		fprintf(f, "    window: allocated %s -> %s, reserved %s -> %s",
		        mib((double)d->start_alloc, a, sizeof(a)), mib((double)d->end_alloc, b, sizeof(b)),
		        mib((double)d->start_res, c, sizeof(c)), mib((double)d->end_res, d4, sizeof(d4)));
		fprintf(f, "; %llu allocations (%s), %llu frees\n", (unsigned long long)d->allocs,
		        mib((double)d->alloc_bytes, a, sizeof(a)), (unsigned long long)d->frees);
		if (d->ntop)
			fprintf(f, "    largest live at the peak%s:\n", d->before_unknown ?
			        " (allocations older than the trace are not in it)" : "");
		for (k = 0; k < d->ntop && k < top; k++)
			fprintf(f, "      %10s  %s\n", mib((double)d->top[k].bytes, a, sizeof(a)),
			        d->top[k].where);
		if (d->nits) {
			size_t grew = 0;

			for (k = 0; k < d->nits; k++)
				grew += d->its[k].growth > 0;
			fprintf(f, "    per iteration:");
			for (k = 0; k < d->nits && k < 20; k++)
				fprintf(f, " %lld allocs %s%s;", (long long)d->its[k].allocations,
				        d->its[k].growth >= 0 ? "+" : "",
				        mib((double)d->its[k].growth, a, sizeof(a)));
			fprintf(f, "%s\n", d->nits > 20 ? " ..." : "");
			if (d->growth_per_it > 0 && grew * 2 > d->nits)
				fprintf(f, "    allocated memory grows by %s per iteration (%zu of %zu "
				        "grew): a leak? what holds it is among the allocations live at "
				        "the peak, above\n", mib(d->growth_per_it, a, sizeof(a)), grew,
				        d->nits);
		}
	}
}

cJSON *mreport_json(const struct mreport *r, size_t top)
{
	cJSON *o = cJSON_CreateObject(), *devs = cJSON_AddArrayToObject(o, "devices");
	size_t i, k;

	cJSON_AddStringToObject(o, "file", r->path);
	if (r->rank >= 0)
		jsonint_add(o, "rank", r->rank);
	else
		cJSON_AddNullToObject(o, "rank");
	cJSON_AddStringToObject(o, "source", r->source ? r->source : "snapshot");
	if (r->note[0])
		cJSON_AddStringToObject(o, "note", r->note);
	if (r->error[0])
		cJSON_AddStringToObject(o, "error", r->error);
	for (i = 0; i < r->ndevs; i++) {
		const struct mdev *d = &r->devs[i];
		cJSON *j = cJSON_CreateObject(), *t, *it;

		cJSON_AddItemToArray(devs, j);
		jsonint_add(j, "device", d->dev);
		jsonint_add(j, "peak_allocated", d->peak_alloc);
		jsonint_add(j, "reserved_at_peak", d->res_at_peak);
		jsonint_add(j, "fragmentation", (int64_t)d->res_at_peak - (int64_t)d->peak_alloc);
		jsonint_add(j, "peak_reserved", d->peak_res);
		jsonint_add(j, "start_allocated", d->start_alloc);
		jsonint_add(j, "end_allocated", d->end_alloc);
		jsonint_add(j, "start_reserved", d->start_res);
		jsonint_add(j, "end_reserved", d->end_res);
		jsonint_add(j, "allocations", d->allocs);
		jsonint_add(j, "allocated_bytes", d->alloc_bytes);
		jsonint_add(j, "frees", d->frees);
		cJSON_AddBoolToObject(j, "older_allocations_unknown", d->before_unknown);
		t = cJSON_AddArrayToObject(j, "top");
		for (k = 0; k < d->ntop && k < top; k++) {
			cJSON *x = cJSON_CreateObject();

			jsonint_add(x, "bytes", d->top[k].bytes);
			cJSON_AddStringToObject(x, "where", d->top[k].where);
			cJSON_AddItemToArray(t, x);
		}
		it = cJSON_AddArrayToObject(j, "iterations");
		for (k = 0; k < d->nits; k++) {
			cJSON *x = cJSON_CreateObject();

			jsonint_add(x, "iteration", d->its[k].step);
			jsonint_add(x, "allocations", d->its[k].allocations);
			jsonint_add(x, "growth", d->its[k].growth);
			jsonint_add(x, "allocated", d->its[k].allocated);
			cJSON_AddItemToArray(it, x);
		}
		if (d->nits)
			cJSON_AddNumberToObject(j, "growth_per_iteration", d->growth_per_it);
		else
			cJSON_AddNullToObject(j, "growth_per_iteration");
	}
	return o;
}
