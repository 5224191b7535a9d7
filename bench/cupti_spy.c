/* cupti_spy.c: LD_PRELOAD shim that reports every CUPTI call which changes
 * who owns CUPTI (subscribe, callback registration, activity kinds on/off,
 * finalize), so a measurement can tell whether a PyTorch profiler mode
 * touches CUPTI at all (issue 27: operators must never take CUPTI from the
 * agent). Each call is printed to stderr as "cupti-spy: NAME(args) = rc"
 * and forwarded unchanged to the next definition (libcupti).
 *
 * Built by hand on the GPU host's side, not by meson:
 *   cc -shared -fPIC -O2 -o cupti_spy.so bench/cupti_spy.c -ldl
 * Ownership: nothing; stateless forwarding. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int rc_t;

/* The real definition: the next object's, else libcupti loaded by path
 * (CUPTI_SPY_LIB: PyTorch wheels load their own libcupti late, so it may
 * not be in the search list yet when the first call comes). */
static void *real(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	const char *lib = getenv("CUPTI_SPY_LIB");
	if (!f && lib) {
		void *h = dlopen(lib, RTLD_LAZY | RTLD_GLOBAL);
		f = h ? dlsym(h, name) : NULL;
	}
	if (!f)
		fprintf(stderr, "cupti-spy: no real %s\n", name);
	return f;
}

#define NEXT(name, params) \
	static rc_t(*next_) params; \
	if (!next_) \
		next_ = (rc_t(*) params)real(name)

rc_t cuptiSubscribe(void **sub, void *cb, void *data)
{
	NEXT("cuptiSubscribe", (void **, void *, void *));
	rc_t rc = next_ ? next_(sub, cb, data) : 999;
	fprintf(stderr, "cupti-spy: cuptiSubscribe = %d\n", rc);
	return rc;
}

rc_t cuptiUnsubscribe(void *sub)
{
	NEXT("cuptiUnsubscribe", (void *));
	rc_t rc = next_ ? next_(sub) : 999;
	fprintf(stderr, "cupti-spy: cuptiUnsubscribe = %d\n", rc);
	return rc;
}

rc_t cuptiActivityRegisterCallbacks(void *req, void *done)
{
	NEXT("cuptiActivityRegisterCallbacks", (void *, void *));
	rc_t rc = next_ ? next_(req, done) : 999;
	fprintf(stderr, "cupti-spy: cuptiActivityRegisterCallbacks = %d\n", rc);
	return rc;
}

rc_t cuptiActivityEnable(int kind)
{
	NEXT("cuptiActivityEnable", (int));
	rc_t rc = next_ ? next_(kind) : 999;
	fprintf(stderr, "cupti-spy: cuptiActivityEnable(%d) = %d\n", kind, rc);
	return rc;
}

rc_t cuptiEnableCallback(unsigned on, void *sub, int domain, unsigned id)
{
	NEXT("cuptiEnableCallback", (unsigned, void *, int, unsigned));
	rc_t rc = next_ ? next_(on, sub, domain, id) : 999;
	fprintf(stderr, "cupti-spy: cuptiEnableCallback(%u, %d, %u) = %d\n", on, domain, id, rc);
	return rc;
}

rc_t cuptiEnableDomain(unsigned on, void *sub, int domain)
{
	NEXT("cuptiEnableDomain", (unsigned, void *, int));
	rc_t rc = next_ ? next_(on, sub, domain) : 999;
	fprintf(stderr, "cupti-spy: cuptiEnableDomain(%u, %d) = %d\n", on, domain, rc);
	return rc;
}

rc_t cuptiFinalize(void)
{
	NEXT("cuptiFinalize", (void));
	rc_t rc = next_ ? next_() : 999;
	fprintf(stderr, "cupti-spy: cuptiFinalize = %d\n", rc);
	return rc;
}
