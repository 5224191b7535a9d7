/*
 * agent.c: how libgprof_agent comes to life, once per process, whichever
 * way it was loaded, and the public gprof_* API.
 *
 * Entry points: InitializeInjection (CUDA_INJECTION64_PATH, called by the
 * driver in cuInit), InitializeInjectionNvtx2 (NVTX_INJECTION64_PATH,
 * called once per NVTX-using module, possibly concurrently: nvtx.c), the
 * ELF constructor (LD_PRELOAD, plain linking), and the gprof_* calls. All
 * lead to agent_init, which runs once (pthread_once): it reads the
 * identity from the environment and starts the agent thread (link.c).
 * When two copies of the library are loaded from different paths, the
 * second finds the first through the exported gprof_steps symbol and
 * stays inert: one instance per process.
 *
 * The top floor (agent.h lists them): it calls link.c (the thread), rec.c
 * (gprof_*), gpu.c (after fork) and state.c; nothing of the agent calls
 * it but nvtx.c's entry point.
 *
 * After fork the child has no agent thread: it stays dormant (a DataLoader
 * worker must not register, flush CUPTI or open sockets it did not make).
 * Its NVTX handlers see rec_on == 0 and return.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agent.h"
#include "gprof_agent.h"
#include "ident.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *env_get(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static void read_identity(void)
{
	struct ident id;

	A.pid = (int)getpid();
	if (gethostname(A.host, sizeof(A.host) - 1) != 0)
		snprintf(A.host, sizeof(A.host), "localhost");
	ident_read(&id, env_get, NULL);
	snprintf(A.job_id, sizeof(A.job_id), "%s", id.job_id);
	A.rank = id.rank;
	A.local_rank = id.local_rank;
	A.world_size = id.world_size;
}

static void atfork_child(void)
{
	/* No agent thread exists here: stay dormant (see the top comment). */
	atomic_store(&A.rec_on, 0);
	atomic_store(&A.armed, 0);
	A.thread_started = false;
	A.disabled = true;
	if (A.wake_fd >= 0)
		close(A.wake_fd);
	A.wake_fd = -1;
	gpu_atfork_child();
}

static void init_once(void)
{
	pthread_attr_t attr;
	const char *off = getenv("GPROF_AGENT_DISABLE");
	void *other = dlsym(RTLD_DEFAULT, "gprof_steps");

	/* Another copy of the agent, loaded from another path, came first. */
	if (other != NULL && other != (void *)gprof_steps) {
		A.disabled = true;
		return;
	}
	if (off != NULL && *off && strcmp(off, "0") != 0) {
		A.disabled = true;
		return;
	}
	read_identity();
	pthread_atfork(NULL, NULL, atfork_child);
	A.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (A.wake_fd < 0) {
		A.disabled = true;
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	if (pthread_create(&A.thread, &attr, link_main, NULL) == 0)
		A.thread_started = true;
	else
		A.disabled = true;
	pthread_attr_destroy(&attr);
}

void agent_init(void)
{
	pthread_once(&once, init_once);
}

/* LD_PRELOAD and plain linking. */
__attribute__((constructor)) static void agent_ctor(void)
{
	agent_init();
}

/* CUDA_INJECTION64_PATH: the driver calls this in cuInit. 1 = success. */
__attribute__((visibility("default"))) int InitializeInjection(void);
int InitializeInjection(void)
{
	A.cuda_injected = true;
	agent_init();
	return 1;
}

void gprof_step(void)
{
	rec_step();
}

void gprof_range_push(const char *name)
{
	rec_push(name ? name : "", REC_STRLEN, 0);
}

void gprof_range_pop(void)
{
	rec_pop();
}

uint64_t gprof_steps(void)
{
	return atomic_load_explicit(&A.steps, memory_order_relaxed);
}
