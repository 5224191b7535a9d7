/*
 * gpu_events.c: CUPTI's records of a burst as trace events, written into
 * the trace stream (tw.c); writer.c calls gpu_write once per trace, after
 * gpu_stop's harvest. It walks the harvested records (gpu_buf.c) three
 * times under the buffer lock: the API calls, indexed by
 * correlation id (kept when they started inside the window, tied to the
 * NVTX range around them); the GPU records (kept when their launch was
 * kept, or, launched by an API not traced, when they started inside the
 * window), each with its flow end and its range's GPU projection; then the
 * API calls, with a flow start where they launched GPU work. Records that
 * never completed (zero timestamps) are counted, never written.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "gpu.h"
#include "gpu_buf.h"
#include "gpu_events.h"
#include "gpu_meta.h"
#include "state.h"
#include "tw.h"

/* API calls by correlation id: open addressing, sized once per write.
 * An id names one call: a runtime call, and the driver calls made inside
 * it on the same thread. One given to calls that do not nest so (CUPTI
 * numbering no launch, below gpu_ids_broken's threshold) is `shared`: its
 * GPU work cannot be tied to a call, so it gets no flow, no External id
 * and no GPU projection, and is kept by time; each of its calls is written
 * on its own. kept: the first call is in the window; any_kept: one is. */
struct corr {
	uint32_t id; int32_t range; int tid; uint64_t start, end;
	uint8_t kept, gpu, shared, any_kept;
};
struct cmap { struct corr *v; size_t mask; };

static struct corr *cmap_get(struct cmap *m, uint32_t id, bool add)
{
	size_t i;

	if (m->v == NULL || id == 0)
		return NULL;
	for (i = (id * 2654435761u) & m->mask;; i = (i + 1) & m->mask) {
		if (m->v[i].id == id)
			return &m->v[i];
		if (m->v[i].id == 0) {
			if (!add)
				return NULL;
			m->v[i].id = id;
			m->v[i].range = -1;
			return &m->v[i];
		}
	}
}

struct pass {
	struct cmap m;
	uint64_t t0, t1, napi, kept_api, kept_gpu, dup_api, shared_gpu;
	size_t nbuf;
	/* correlation ids are one sequence across runtime and driver calls:
	 * the last call before the window and the first after it bound what
	 * was launched inside it */
	uint32_t pre_max, post_min;
	/* the first and last traced calls inside the window: the bounds
	 * instead of pre_max when no call before the window was recorded (it
	 * opened at once: the previous burst's work, completing into this
	 * one's buffers, would be kept), and of post_min when none after it
	 * was (the end waits 20 ms for one; on a loaded machine the program
	 * may not run in that time, and work launched while the kinds went off
	 * would be kept) */
	uint32_t in_min, in_max;
	uint64_t unbounded; /* GPU records left out for want of pre_max, post_min */
	/* Most API records share a correlation id: CUPTI did not number this
	 * burst (the toolkit's libcupti 13.0 after an unsubscribe, seen on an
	 * H100). Records are then kept by time (API calls made in the window,
	 * GPU work from its start on) and nothing is tied by id (no flows, no
	 * External id), rather than all but one dropped. */
	bool ids_broken;
};

static void count_api(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;

	(void)w;
	if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER)
		p->napi++;
}

static void index_api(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;
	CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
	struct corr *c;
	bool kept;

	if (r->kind != CUPTI_ACTIVITY_KIND_RUNTIME && r->kind != CUPTI_ACTIVITY_KIND_DRIVER)
		return;
	if ((c = cmap_get(&p->m, a->correlationId, true)) == NULL)
		return;
	kept = a->start >= p->t0 && a->start <= p->t1 && a->start != 0 && a->end >= a->start;
	if (c->kept || c->start != 0) {
		/* the first stays the id's call; a repeat that is not a call
		 * inside it (or around it) on its thread makes the id shared */
		p->dup_api++;
		if ((int)a->threadId != c->tid || !((a->start >= c->start && a->end <= c->end) ||
		                                    (a->start <= c->start && a->end >= c->end)))
			c->shared = 1;
		c->any_kept |= kept;
		return;
	}
	c->kept = kept;
	c->any_kept = kept;
	if (a->start != 0 && a->start < p->t0 && a->correlationId > p->pre_max)
		p->pre_max = a->correlationId;
	if (a->start > p->t1 && a->correlationId < p->post_min)
		p->post_min = a->correlationId;
	c->tid = (int)a->threadId;
	c->start = a->start;
	c->end = a->end;
	if (c->kept && a->correlationId > p->in_max)
		p->in_max = a->correlationId;
	if (c->kept && a->correlationId < p->in_min)
		p->in_min = a->correlationId;
	if (c->kept) {
		c->range = tw_range_at(w, (int)a->threadId, a->start);
		p->kept_api++;
	}
}

/* Whether a GPU record belongs: launched in the window; or, launched by
 * an API not traced (cuBLAS's and NCCL's cuLaunchKernel when the driver
 * API is off), when its correlation id falls between the last traced call
 * before the window and the first after it (it may run long after the
 * window, on a GPU that lags), or, with no call before (after) it
 * recorded, the first (last) traced call inside it; with no traced call
 * at all, when it started in the window. */
static struct corr *gpu_keep(struct pass *p, uint32_t corr, uint64_t start, uint64_t end,
                             bool *keep, bool flow)
{
	struct corr *c = cmap_get(&p->m, corr, false);

	if (start == 0 || end < start) {
		*keep = false;
		gpu_buf_incomplete();
		return NULL;
	}
	if (p->ids_broken) {
		/* every GPU record in the burst's buffers was launched while the
		 * kinds were on, which ends just after the window: what runs
		 * from its start on is the window's, however far the GPU lags */
		c = NULL;
		*keep = start >= p->t0;
	} else if (c != NULL && c->shared) {
		/* one of its calls was in the window, and work runs after its
		 * launch: by time, tied to none of them */
		*keep = c->any_kept && start >= p->t0;
		if (*keep)
			p->shared_gpu++;
	} else if (c != NULL) {
		*keep = c->kept;
	} else if (p->napi > 0) {
		bool lo = p->pre_max != 0 ? corr > p->pre_max : corr >= p->in_min;
		bool hi = p->post_min != UINT32_MAX ? corr < p->post_min : corr <= p->in_max;

		*keep = lo && hi;
		p->unbounded += (p->pre_max == 0 && !lo) || (p->post_min == UINT32_MAX && !hi);
	} else {
		*keep = start >= p->t0 && start <= p->t1;
	}
	if (c && *keep && flow && !c->shared)
		c->gpu = 1; /* the launch gets a flow arrow to this GPU event */
	if (*keep)
		p->kept_gpu++;
	return c;
}

/* In a burst CUPTI did not number (pass.ids_broken), every event gets an id
 * of the agent's own instead, unique, from 2^30 up: the format asks for a
 * correlation on each, and CUPTI's one id would join every kernel to every
 * launch in a consumer that joins on it (HTA). One writer at a time. */
static bool ids_own;
static uint32_t ids_next;

static uint32_t corr_out(uint32_t corr)
{
	return ids_own ? ids_next++ : corr;
}

static void gpu_common(struct tw *w, struct corr *c, uint32_t dev, uint32_t ctx, uint32_t stream,
                       uint32_t corr, uint64_t start, uint64_t end)
{
	tw_lit(w, ",\"args\":{\"device\":");
	tw_int(w, dev);
	tw_lit(w, ",\"context\":");
	tw_int(w, ctx);
	tw_lit(w, ",\"stream\":");
	tw_int(w, stream);
	tw_lit(w, ",\"correlation\":");
	tw_int(w, corr_out(corr));
	if (c && c->range >= 0 && !c->shared) {
		tw_lit(w, ",\"External id\":");
		tw_int(w, (int64_t)tw_range_id(w, c->range));
		tw_range_gpu(w, c->range, (int)dev, stream, start, end);
	}
	tw_stream(w, (int)dev, stream);
}

static void write_flow_end(struct tw *w, struct corr *c, uint32_t dev, uint32_t stream,
                           uint32_t corr, uint64_t start)
{
	if (c != NULL && !c->shared)
		tw_flow(w, 'f', corr, dev, stream, start);
}

static const char *const copy_kinds[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                          "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };
static const char *const mem_kinds[] = { "Unknown", "Pageable", "Pinned", "Device", "Array",
                                         "Managed", "Device Static", "Managed Static" };
#define NAME_OF(tab, i) ((size_t)(i) < sizeof(tab) / sizeof(tab[0]) ? tab[i] : "Unknown")

static void bandwidth(struct tw *w, uint64_t bytes, uint64_t start, uint64_t end)
{
	tw_lit(w, ",\"bytes\":");
	tw_int(w, (int64_t)bytes);
	tw_lit(w, ",\"memory bandwidth (GB/s)\":");
	tw_fix2(w, end > start ? (double)bytes / (double)(end - start) : 0.0);
}

/* Kernel names as people read them: demangled with the C++ runtime's
 * __cxa_demangle when the process has one (every CUDA C++ program and
 * PyTorch does), else as CUPTI gives them. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn demangle;
static char *dm_buf;
static size_t dm_cap;

static const char *kernel_name(const char *name)
{
	static bool looked;
	char *out;
	int st = -1;

	if (name == NULL)
		return "unknown";
	if (!looked) {
		void *cxx = dlopen("libstdc++.so.6", RTLD_NOLOAD | RTLD_LAZY);

		looked = true;
		/* PyTorch loads libstdc++ privately: look in it by name too */
		demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (demangle == NULL && cxx != NULL)
			demangle = (demangle_fn)dlsym(cxx, "__cxa_demangle");
	}
	if (demangle == NULL || name[0] != '_' || name[1] != 'Z')
		return name;
	out = demangle(name, dm_buf, &dm_cap, &st);
	if (st != 0 || out == NULL)
		return name;
	dm_buf = out; /* __cxa_demangle may have realloc'ed it */
	return out;
}

static void write_kernel(struct tw *w, struct pass *p, CUpti_ActivityKernel10 *k)
{
	bool keep;
	struct corr *c = gpu_keep(p, k->correlationId, k->start, k->end, &keep, true);
	int64_t blocks = (int64_t)k->gridX * k->gridY * k->gridZ;
	int64_t threads = (int64_t)k->blockX * k->blockY * k->blockZ;
	int sms = gpu_sm_count(k->deviceId);
	double bps = sms > 0 ? (double)blocks / sms : 0;

	if (!keep)
		return;
	tw_x(w, "kernel", kernel_name(k->name), (size_t)-1, k->deviceId, k->streamId,
	     k->start, k->end);
	gpu_common(w, c, k->deviceId, k->contextId, k->streamId, k->correlationId, k->start, k->end);
	tw_lit(w, ",\"queued\":");
	tw_int(w, k->queued > k->start ? 0 : (int64_t)k->queued);
	tw_lit(w, ",\"registers per thread\":");
	tw_int(w, k->registersPerThread);
	tw_lit(w, ",\"shared memory\":");
	tw_int(w, (int64_t)k->staticSharedMemory + k->dynamicSharedMemory);
	tw_lit(w, ",\"blocks per SM\":");
	tw_fix2(w, bps);
	tw_lit(w, ",\"warps per SM\":");
	tw_fix2(w, bps * (double)((threads + 31) / 32));
	tw_lit(w, ",\"grid\":[");
	tw_int(w, k->gridX);
	tw_lit(w, ",");
	tw_int(w, k->gridY);
	tw_lit(w, ",");
	tw_int(w, k->gridZ);
	tw_lit(w, "],\"block\":[");
	tw_int(w, k->blockX);
	tw_lit(w, ",");
	tw_int(w, k->blockY);
	tw_lit(w, ",");
	tw_int(w, k->blockZ);
	tw_lit(w, "]}}");
	write_flow_end(w, c, k->deviceId, k->streamId, k->correlationId, k->start);
}

/* A copy, from either record kind (MEMCPY, or MEMCPY2 between devices,
 * which also names both devices). */
struct copy {
	uint8_t kind, src, dst;
	uint64_t bytes, start, end;
	uint32_t dev, ctx, stream, corr;
	int64_t src_dev, dst_dev; /* -1: not a peer copy */
};

static void write_copy(struct tw *w, struct pass *p, const struct copy *m)
{
	char name[96];
	bool keep;
	struct corr *c = gpu_keep(p, m->corr, m->start, m->end, &keep, true);
	int n;

	if (!keep)
		return;
	n = snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", NAME_OF(copy_kinds, m->kind),
	             NAME_OF(mem_kinds, m->src), NAME_OF(mem_kinds, m->dst));
	tw_x(w, "gpu_memcpy", name, (size_t)n, m->dev, m->stream, m->start, m->end);
	gpu_common(w, c, m->dev, m->ctx, m->stream, m->corr, m->start, m->end);
	bandwidth(w, m->bytes, m->start, m->end);
	if (m->src_dev >= 0) {
		tw_lit(w, ",\"src device\":");
		tw_int(w, m->src_dev);
		tw_lit(w, ",\"dst device\":");
		tw_int(w, m->dst_dev);
	}
	tw_lit(w, "}}");
	write_flow_end(w, c, m->dev, m->stream, m->corr, m->start);
}

static void write_gpu(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;
	char name[96];
	bool keep;
	struct corr *c;

	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case CUPTI_ACTIVITY_KIND_KERNEL:
		write_kernel(w, p, (CUpti_ActivityKernel10 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
		struct copy cp = { m->copyKind, m->srcKind, m->dstKind, m->bytes, m->start, m->end,
		                   m->deviceId, m->contextId, m->streamId, m->correlationId, -1, -1 };

		write_copy(w, p, &cp);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		CUpti_ActivityMemcpyPtoP4 *m = (CUpti_ActivityMemcpyPtoP4 *)r;
		struct copy cp = { m->copyKind, m->srcKind, m->dstKind, m->bytes, m->start, m->end,
		                   m->deviceId, m->contextId, m->streamId, m->correlationId,
		                   m->srcDeviceId, m->dstDeviceId };

		write_copy(w, p, &cp);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)r;
		int n;

		c = gpu_keep(p, m->correlationId, m->start, m->end, &keep, true);
		if (!keep)
			return;
		n = snprintf(name, sizeof(name), "Memset (%s)", NAME_OF(mem_kinds, m->memoryKind));
		tw_x(w, "gpu_memset", name, (size_t)n, m->deviceId, m->streamId, m->start, m->end);
		gpu_common(w, c, m->deviceId, m->contextId, m->streamId, m->correlationId, m->start,
		           m->end);
		bandwidth(w, m->bytes, m->start, m->end);
		tw_lit(w, "}}");
		write_flow_end(w, c, m->deviceId, m->streamId, m->correlationId, m->start);
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		static const char *const names[] = { "Unknown Sync", "Event Sync", "Stream Wait Event",
		                                     "Stream Sync", "Context Sync" };
		CUpti_ActivitySynchronization2 *s = (CUpti_ActivitySynchronization2 *)r;
		int64_t stream = s->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : (int64_t)s->streamId;
		const char *nm = NAME_OF(names, s->type);

		c = gpu_keep(p, s->correlationId, s->start, s->end, &keep, false);
		if (!keep)
			return;
		if (c != NULL && !c->shared &&
		    s->type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) {
			/* A host-side wait: on the thread that waited, inside its API
			 * call (on the stream's row it would overlap the GPU work it
			 * waits for, which breaks nesting). */
			uint64_t b = s->start < c->start ? c->start : s->start;
			uint64_t e = s->end > c->end ? c->end : s->end;

			tw_x(w, "cuda_sync", nm, (size_t)-1, A.pid, c->tid, b, e < b ? b : e);
		} else {
			tw_x(w, "cuda_sync", nm, (size_t)-1, 0, stream, s->start, s->end);
		}
		tw_lit(w, ",\"args\":{\"cuda_sync_kind\":");
		tw_str(w, nm, (size_t)-1);
		tw_lit(w, ",\"stream\":");
		tw_int(w, stream);
		tw_lit(w, ",\"correlation\":");
		tw_int(w, corr_out(s->correlationId));
		tw_lit(w, ",\"device\":0,\"context\":");
		tw_int(w, s->contextId);
		if (s->cudaEventId != CUPTI_SYNCHRONIZATION_INVALID_VALUE) {
			tw_lit(w, ",\"cuda event\":");
			tw_int(w, s->cudaEventId);
		}
		tw_lit(w, "}}");
		break;
	}
	case CUPTI_ACTIVITY_KIND_OVERHEAD: {
		CUpti_ActivityOverhead3 *o = (CUpti_ActivityOverhead3 *)r;
		const char *nm;

		if (o->start < p->t0 || o->start > p->t1 || o->end < o->start)
			return;
		switch (o->overheadKind) {
		case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: nm = "Buffer Flush"; break;
		case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: nm = "Instrumentation"; break;
		case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: nm = "Resource"; break;
		case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: nm = "Driver Compiler"; break;
		case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: nm = "Lazy Function Loading"; break;
		case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: nm = "Activity Buffer Request"; break;
		default: nm = "Unknown"; break;
		}
		tw_x(w, "overhead", nm, (size_t)-1, -1, 0, o->start, o->end);
		tw_lit(w, "}");
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY2: {
		CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)r;

		if (m->timestamp < p->t0 || m->timestamp > p->t1)
			return;
		tw_event(w);
		tw_lit(w, "\"ph\":\"i\",\"s\":\"t\",\"cat\":\"gpu_memory\",\"name\":");
		tw_str(w, m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
		              ? "Memory Release" : "Memory Allocation", (size_t)-1);
		tw_lit(w, ",\"pid\":");
		tw_int(w, m->deviceId);
		tw_lit(w, ",\"tid\":0,\"ts\":");
		tw_ts(w, m->timestamp);
		tw_lit(w, ",\"args\":{\"bytes\":");
		tw_int(w, (int64_t)m->bytes);
		tw_lit(w, ",\"address\":");
		tw_int(w, (int64_t)(m->address & 0x1fffffffffffffull));
		tw_lit(w, ",\"memory kind\":");
		tw_str(w, NAME_OF(mem_kinds, m->memoryKind), (size_t)-1);
		tw_lit(w, ",\"correlation\":");
		tw_int(w, corr_out(m->correlationId));
		tw_lit(w, "}}");
		break;
	}
	default:
		break;
	}
}

static void write_api(struct tw *w, CUpti_Activity *r, void *ud)
{
	struct pass *p = ud;
	CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
	struct corr *c;
	const char *nm;
	size_t len;
	int range;

	if (r->kind != CUPTI_ACTIVITY_KIND_RUNTIME && r->kind != CUPTI_ACTIVITY_KIND_DRIVER)
		return;
	if (p->ids_broken) { /* by time, tied to nothing */
		if (a->start < p->t0 || a->start > p->t1 || a->start == 0 || a->end < a->start)
			return;
		nm = gpu_buf_api_name(r->kind, a->cbid, &len);
		tw_x(w, r->kind == CUPTI_ACTIVITY_KIND_DRIVER ? "cuda_driver" : "cuda_runtime", nm,
		     len, A.pid, a->threadId, a->start, a->end);
		tw_lit(w, ",\"args\":{\"cbid\":");
		tw_int(w, a->cbid);
		tw_lit(w, ",\"correlation\":");
		tw_int(w, corr_out(a->correlationId));
		tw_lit(w, "}}");
		tw_thread(w, (int)a->threadId);
		return;
	}
	c = cmap_get(&p->m, a->correlationId, false);
	if (c != NULL && c->shared) {
		/* each call of a shared id on its own: in the window by its time,
		 * in the range around it, with no flow */
		if (a->start < p->t0 || a->start > p->t1 || a->start == 0 || a->end < a->start)
			return;
		range = tw_range_at(w, (int)a->threadId, a->start);
	} else if (c == NULL || !c->kept) {
		return;
	} else {
		range = c->range;
	}
	nm = gpu_buf_api_name(r->kind, a->cbid, &len);
	tw_x(w, r->kind == CUPTI_ACTIVITY_KIND_DRIVER ? "cuda_driver" : "cuda_runtime", nm, len,
	     A.pid, a->threadId, a->start, a->end);
	tw_lit(w, ",\"args\":{\"cbid\":");
	tw_int(w, a->cbid);
	tw_lit(w, ",\"correlation\":");
	tw_int(w, a->correlationId);
	if (range >= 0) {
		tw_lit(w, ",\"External id\":");
		tw_int(w, (int64_t)tw_range_id(w, range));
	}
	tw_lit(w, "}}");
	tw_thread(w, (int)a->threadId);
	if (c->gpu && !c->shared)
		tw_flow(w, 's', a->correlationId, A.pid, a->threadId, a->start);
}

void gpu_write(struct tw *w, uint64_t t0, uint64_t t1)
{
	/* calls made before the window and shed then (gpu_buf.c) left their
	 * highest id: the lower bound, as their records would have been */
	struct pass p = { .t0 = t0, .t1 = t1, .post_min = UINT32_MAX, .in_min = UINT32_MAX,
	                  .pre_max = gpu_buf_pre_corr() };
	size_t size = 16;

	if (!gpu_loaded())
		return;
	gpu_buf_lock();
	p.nbuf = gpu_buf_each(w, count_api, &p);
	while (size < p.napi * 2)
		size *= 2;
	p.m.v = calloc(size, sizeof(*p.m.v));
	p.m.mask = size - 1;
	if (p.m.v != NULL) {
		gpu_buf_each(w, index_api, &p);
		p.ids_broken = gpu_ids_broken(p.napi, p.dup_api);
		ids_own = p.ids_broken;
		ids_next = 1u << 30;
		if (p.ids_broken)
			agent_log("trace %s: %llu of %llu API records repeat a correlation id (CUPTI did "
			          "not number this burst): records kept by time, launches not tied to "
			          "their GPU work", A.win.trace_id, (unsigned long long)p.dup_api,
			          (unsigned long long)p.napi);
		gpu_buf_each(w, write_gpu, &p);
		gpu_buf_each(w, write_api, &p);
		if (p.shared_gpu > 0) {
			char note[400];

			snprintf(note, sizeof(note), "%llu GPU records not tied to a launch or an NVTX "
			         "range (no flow, External id or GPU projection): CUPTI gave their "
			         "correlation id to calls that are not one call (%llu of %llu API records "
			         "repeat an id), so which range launched them is unknown",
			         (unsigned long long)p.shared_gpu, (unsigned long long)p.dup_api,
			         (unsigned long long)p.napi);
			tw_note(w, note);
			agent_log("trace %s: %s", A.win.trace_id, note);
		}
	}
	gpu_buf_unlock();
	ids_own = false;
	free(p.m.v);
	if (p.unbounded > 0)
		agent_log("trace %s: %llu GPU records without a traced launch left out: no traced call "
		          "was recorded before or after the window to bound what was launched inside "
		          "it, so only those between its first and last traced calls are kept",
		          A.win.trace_id,
		          (unsigned long long)p.unbounded);
	{
		uint64_t sb, sr, sd;

		gpu_buf_shed_stats(&sb, &sr, &sd);
		agent_log("trace %s: %zu CUPTI buffers, %llu API records (%llu in the window, %llu "
		          "with a repeated id), %llu GPU records kept, %llu records dropped or "
		          "incomplete; before the window opened: %llu buffers freed as they came "
		          "(%llu records, %llu dropped)",
		          A.win.trace_id, p.nbuf, (unsigned long long)p.napi,
		          (unsigned long long)p.kept_api, (unsigned long long)p.dup_api,
		          (unsigned long long)p.kept_gpu, (unsigned long long)gpu_dropped(),
		          (unsigned long long)sb, (unsigned long long)sr, (unsigned long long)sd);
	}
}
