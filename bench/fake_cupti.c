/*
 * fake_cupti.c: a stand-in for libcupti, for the writer benchmark and its
 * CI check only (never shipped). The agent loads it through its normal
 * path (GPROF_CUPTI_PATH), so gpu.c and writer.c run exactly as on a GPU;
 * fake_cupti_emit() then plays the part of CUPTI and the GPU: it asks the
 * agent for buffers through the registered callbacks, fills them with
 * CUDA 13-shaped records (a runtime API call and the kernel, copy or set
 * it launched, with matching correlation ids) and hands them back.
 *
 * FAKE_CUPTI_HELD=NAME makes cuptiSubscribe_v2 fail as when NAME (another
 * tool) holds CUPTI.
 *
 * Records are laid out back to back at 8-byte alignment, and
 * cuptiActivityGetNextRecord walks them by their kind's struct size, which
 * is all the agent relies on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

static CUpti_BuffersCallbackRequestFunc req_cb;
static CUpti_BuffersCallbackCompleteFunc done_cb;
static CUpti_CallbackFunc sub_cb;
static void *sub_ud;
static int subscribed;

static size_t rec_size(CUpti_ActivityKind k)
{
	switch (k) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
	default: return 0;
	}
}

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	size_t off = 0;

	if (*rec != NULL)
		off = (size_t)((uint8_t *)*rec - buf) + ALIGN8(rec_size((*rec)->kind));
	if (off >= valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)(buf + off);
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
                                           CUpti_BuffersCallbackCompleteFunc c)
{
	req_cb = r;
	done_cb = c;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *ud,
                              CUpti_SubscriberParams *p)
{
	const char *held = getenv("FAKE_CUPTI_HELD"); /* another tool holds CUPTI */

	if (subscribed || (held && *held)) {
		if (held && p && p->oldSubscriberName && p->oldSubscriberSize)
			snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s", held);
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	subscribed = 1;
	sub_cb = cb;
	sub_ud = ud;
	*s = (CUpti_SubscriberHandle)&subscribed;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	(void)s;
	subscribed = 0;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiFinalize(void)
{
	subscribed = 0;
	return CUPTI_SUCCESS;
}

/* As a real application's next CUDA call would: the API exit callback. */
CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
{
	CUpti_CallbackData data;

	(void)s;
	if (enable && sub_cb) {
		memset(&data, 0, sizeof(data));
		data.callbackSite = CUPTI_API_EXIT;
		sub_cb(sub_ud, d, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &data);
	}
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) { (void)k; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId c, uint8_t e)
{
	(void)c; (void)e;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) { (void)k; return CUPTI_SUCCESS; }
CUptiResult cuptiActivityFlushAll(uint32_t f) { (void)f; return CUPTI_SUCCESS; }
CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t) { (void)t; return CUPTI_SUCCESS; }
CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *n, void *v)
{
	(void)a; (void)n; (void)v;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *d)
{
	(void)c; (void)s;
	*d = 0;
	return CUPTI_SUCCESS;
}
CUptiResult cuptiGetVersion(uint32_t *v) { *v = CUPTI_API_VERSION; return CUPTI_SUCCESS; }
CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	(void)r;
	*s = "fake CUPTI error";
	return CUPTI_SUCCESS;
}
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
	(void)d;
	*name = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 ? "cudaLaunchKernel_v7000"
	      : cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 ? "cudaMemcpyAsync_v3020"
	      : "cudaMemsetAsync_v3020";
	return CUPTI_SUCCESS;
}

/*
 * Emits n launches on thread tid from time t0 on, one every step_ns: per
 * launch a runtime API record and its GPU record (8 kernels to 1 copy and
 * 1 set). Returns the number of records.
 */
uint64_t fake_cupti_emit(uint64_t n, uint64_t t0, uint64_t step_ns, int tid);
uint64_t fake_cupti_emit(uint64_t n, uint64_t t0, uint64_t step_ns, int tid)
{
	uint8_t *buf = NULL;
	size_t size = 0, max = 0, off = 0;
	uint64_t i, recs = 0;
	static uint32_t corr = 1;

	for (i = 0; i < n; i++) {
		uint64_t t = t0 + i * step_ns;
		CUpti_ActivityAPI *a;
		int what = i % 10;

		if (buf == NULL || off + 2048 > size) {
			if (buf != NULL)
				done_cb(NULL, 0, buf, size, off);
			req_cb(&buf, &size, &max);
			off = 0;
			if (buf == NULL)
				return recs; /* the agent's byte limit: CUPTI would drop */
		}
		a = (CUpti_ActivityAPI *)(buf + off);
		memset(a, 0, sizeof(*a));
		a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
		a->cbid = what < 8 ? CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
		        : what == 8 ? CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020
		        : CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020;
		a->start = t;
		a->end = t + step_ns / 4;
		a->processId = 1;
		a->threadId = (uint32_t)tid;
		a->correlationId = corr;
		off += ALIGN8(sizeof(*a));
		if (what < 8) {
			CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(buf + off);

			memset(k, 0, sizeof(*k));
			k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
			k->start = t + step_ns / 2;
			k->end = t + step_ns / 2 + 1000 + what * 100;
			k->streamId = 7 + (what & 1);
			k->correlationId = corr;
			k->gridX = 1024; k->gridY = 1; k->gridZ = 1;
			k->blockX = 256; k->blockY = 1; k->blockZ = 1;
			k->registersPerThread = 32;
			k->name = what & 1 ? "ampere_sgemm_128x64_tn" : "vectorized_elementwise_kernel";
			off += ALIGN8(sizeof(*k));
		} else if (what == 8) {
			CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)(buf + off);

			memset(m, 0, sizeof(*m));
			m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
			m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
			m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
			m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
			m->bytes = 1 << 20;
			m->start = t + step_ns / 2;
			m->end = t + step_ns / 2 + 50000;
			m->streamId = 7;
			m->correlationId = corr;
			off += ALIGN8(sizeof(*m));
		} else {
			CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)(buf + off);

			memset(m, 0, sizeof(*m));
			m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
			m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
			m->bytes = 1 << 20;
			m->start = t + step_ns / 2;
			m->end = t + step_ns / 2 + 2000;
			m->streamId = 8;
			m->correlationId = corr;
			off += ALIGN8(sizeof(*m));
		}
		corr++;
		recs += 2;
	}
	if (buf != NULL)
		done_cb(NULL, 0, buf, size, off);
	return recs;
}
