/*
 * nvtx.c: the NVTX injection (NVTX_INJECTION64_PATH). NVTX calls
 * InitializeInjectionNvtx2 once per shared object that uses NVTX v3,
 * possibly concurrently and before CUDA exists; each call writes our
 * handlers into that module's function tables (NVTX_ETID_CALLBACKS). Slots
 * left unset stay no-ops. Handling NVTX here, not through CUPTI, keeps
 * ranges working when another tool owns CUPTI, and idle costs one flag.
 *
 * An entry point beside agent.c at the top of the agent: it starts the
 * agent (agent_init) and its handlers call rec.c, nothing else. A domain's
 * name is kept in rec.c (rec_domain), where the writer reads it by the
 * index events carry.
 *
 * Domains and registered strings are handles we hand out: small structs
 * that live for the process (NVTX has no "free" for strings; a domain's
 * destroy is rare and its handle may still be used by racing threads, so
 * it is kept). Both are bounded: past the limit a domain maps to the
 * default one and a string handle to NULL, which NVTX callers tolerate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "agent.h"

struct nvtxDomainRegistration_st { uint32_t index; };
struct nvtxStringRegistration_st { struct nvtxStringRegistration_st *next; uint16_t len; char s[]; };

#define STRINGS_MAX 65536
/* A domain's handle, by its index in rec.c's table of names. */
static struct nvtxDomainRegistration_st domains[REC_DOMAINS_MAX];
static unsigned n_strings;
static struct nvtxStringRegistration_st *strings; /* all of them, kept for the process */
static pthread_mutex_t nvtx_lock = PTHREAD_MUTEX_INITIALIZER;

static inline bool active(void)
{
	return atomic_load_explicit(&A.rec_on, memory_order_relaxed) ||
	       (atomic_load_explicit(&A.armed, memory_order_relaxed) && A.win.iter_range[0]);
}

static uint32_t dom(nvtxDomainHandle_t d)
{
	return d ? d->index : 0;
}

/* The message of an attribute struct: ASCII or a registered string. */
static bool message(const nvtxEventAttributes_t *a, const char **s, size_t *len)
{
	if (a == NULL)
		return false;
	if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii) {
		*s = a->message.ascii;
		*len = REC_STRLEN;
		return true;
	}
	if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered) {
		*s = a->message.registered->s;
		*len = a->message.registered->len;
		return true;
	}
	*s = "";
	*len = 0;
	return true;
}

static void h_mark_a(const char *m)
{
	if (active())
		rec_mark(m ? m : "", REC_STRLEN, 0);
}

static void h_domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	const char *s;
	size_t n;

	if (active() && message(a, &s, &n))
		rec_mark(s, n, dom(d));
}

static void h_mark_ex(const nvtxEventAttributes_t *a)
{
	h_domain_mark(NULL, a);
}

static nvtxRangeId_t h_domain_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	const char *s;
	size_t n;

	if (active() && message(a, &s, &n))
		return rec_range_start(s, n, dom(d));
	return 0;
}

static nvtxRangeId_t h_start_ex(const nvtxEventAttributes_t *a)
{
	return h_domain_start(NULL, a);
}

static nvtxRangeId_t h_start_a(const char *m)
{
	return active() ? rec_range_start(m ? m : "", REC_STRLEN, 0) : 0;
}

static void h_end(nvtxRangeId_t id)
{
	if (id != 0)
		rec_range_end(id);
}

static void h_domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	(void)d;
	h_end(id);
}

static int h_domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	const char *s;
	size_t n;

	if (active() && message(a, &s, &n))
		rec_push(s, n, dom(d));
	return 0;
}

static int h_push_ex(const nvtxEventAttributes_t *a)
{
	return h_domain_push(NULL, a);
}

static int h_push_a(const char *m)
{
	if (active())
		rec_push(m ? m : "", REC_STRLEN, 0);
	return 0;
}

static int h_pop(void)
{
	rec_pop();
	return 0;
}

static int h_domain_pop(nvtxDomainHandle_t d)
{
	(void)d;
	rec_pop();
	return 0;
}

static void h_name_thread(uint32_t tid, const char *name)
{
	(void)tid; /* NVTX passes the caller's own OS thread id in practice */
	if (name)
		rec_thread_name(name);
}

static nvtxDomainHandle_t h_domain_create(const char *name)
{
	nvtxDomainHandle_t h = &domains[0];
	uint32_t i;

	if (name == NULL)
		return h;
	pthread_mutex_lock(&nvtx_lock);
	i = rec_domain(name); /* 0, the default domain, past the limit */
	domains[i].index = i;
	h = &domains[i];
	pthread_mutex_unlock(&nvtx_lock);
	return h;
}

static nvtxStringHandle_t h_register_string(nvtxDomainHandle_t d, const char *s)
{
	struct nvtxStringRegistration_st *r = NULL;
	size_t len;

	(void)d;
	if (s == NULL)
		return NULL;
	len = strnlen(s, AGENT_NAME_MAX);
	pthread_mutex_lock(&nvtx_lock);
	if (n_strings < STRINGS_MAX && (r = malloc(sizeof(*r) + len + 1)) != NULL) {
		n_strings++;
		r->next = strings;
		strings = r;
		r->len = (uint16_t)len;
		memcpy(r->s, s, len);
		r->s[len] = '\0';
	}
	pthread_mutex_unlock(&nvtx_lock);
	return r;
}

static void set(NvtxFunctionTable t, unsigned n, unsigned id, NvtxFunctionPointer f)
{
	if (id < n && t[id] != NULL)
		*t[id] = f;
}

#define FP(f) ((NvtxFunctionPointer)(void (*)(void))(f))

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb;
	NvtxFunctionTable t;
	unsigned n;

	if (get == NULL)
		return 0;
	cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
	if (cb == NULL || cb->struct_size < sizeof(*cb) || cb->GetModuleFunctionTable == NULL)
		return 0;
	agent_init();
	if (A.disabled)
		return 0; /* NVTX becomes a no-op for this module: nothing to record into */
	if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n) && t) {
		set(t, n, NVTX_CBID_CORE_MarkEx, FP(h_mark_ex));
		set(t, n, NVTX_CBID_CORE_MarkA, FP(h_mark_a));
		set(t, n, NVTX_CBID_CORE_RangeStartEx, FP(h_start_ex));
		set(t, n, NVTX_CBID_CORE_RangeStartA, FP(h_start_a));
		set(t, n, NVTX_CBID_CORE_RangeEnd, FP(h_end));
		set(t, n, NVTX_CBID_CORE_RangePushEx, FP(h_push_ex));
		set(t, n, NVTX_CBID_CORE_RangePushA, FP(h_push_a));
		set(t, n, NVTX_CBID_CORE_RangePop, FP(h_pop));
		set(t, n, NVTX_CBID_CORE_NameOsThreadA, FP(h_name_thread));
	}
	if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n) && t) {
		set(t, n, NVTX_CBID_CORE2_DomainMarkEx, FP(h_domain_mark));
		set(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, FP(h_domain_start));
		set(t, n, NVTX_CBID_CORE2_DomainRangeEnd, FP(h_domain_end));
		set(t, n, NVTX_CBID_CORE2_DomainRangePushEx, FP(h_domain_push));
		set(t, n, NVTX_CBID_CORE2_DomainRangePop, FP(h_domain_pop));
		set(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, FP(h_register_string));
		set(t, n, NVTX_CBID_CORE2_DomainCreateA, FP(h_domain_create));
	}
	A.nvtx_attached = true;
	return 1;
}
