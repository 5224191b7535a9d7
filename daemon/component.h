/*
 * component: what each part of gprofd is doing, said where an operator
 * looks: gprofctl status (daemon_status_reply's components) and /metrics
 * (gprofd_component_up/_degraded, gprofd_build_info, gprofd_traces_total,
 * gprofd_store_*). A part that could not start (Kineto's @dynolog name
 * taken, the metrics port busy) used to be one log line while the daemon
 * ran on, so KINETO_USE_DAEMON=1 jobs went untraced with no sign anywhere
 * a user looks (issue 26, item 4).
 *
 * States: up (serving), off (configured off), absent (not on this host and
 * not asked for: NVML with no NVIDIA driver, since a host with no GPU is
 * not at fault) and down (wanted but not working: the fault, "degraded",
 * which makes gprofctl status exit 4).
 *
 * Writers: the loop (sockets, Kineto through kineto_serving, the store
 * through store_count and store_bytes, trace outcomes: component_scan), metrics_start (its HTTP endpoint) and the sampler
 * thread (NVML, each cycle). Readers: the loop (the status reply) and the
 * sampler (component_sample). So the table has a mutex of its own, held
 * only to copy a few hundred bytes; nothing blocks under it.
 *
 * Ownership: embedded in struct daemon (d->comp); component_init and
 * component_deinit bracket the loop's life. The store's free space is
 * read by uv_fs_statfs on the thread pool (disk calls stay off the loop),
 * at most one at a time.
 */
#ifndef GPROFD_COMPONENT_H
#define GPROFD_COMPONENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "msg.h"
#include "perr.h"

struct daemon;
struct mset;
struct mgpu;

enum component_id {
	COMP_UNIX, COMP_TCP, COMP_TLS, COMP_METRICS, COMP_KINETO, COMP_NVML, COMP_STORE,
	COMP_COUNT
};

enum component_state { COMP_OFF, COMP_UP, COMP_ABSENT, COMP_DOWN };

#define COMPONENT_DETAIL_MAX 512

/* Trace outcomes counted for gprofd_traces_total: MSG_TRACE_DONE ..
 * MSG_TRACE_CANCELLED by their index, and refusals (limits.pending_traces)
 * at COMP_OUTCOME_REFUSED. */
#define COMP_OUTCOME_REFUSED 0
#define COMP_OUTCOMES 5

struct components {
	pthread_mutex_t lock;      /* everything below */
	bool ready;                /* component_init ran */
	struct {
		enum component_state state;
		char detail[COMPONENT_DETAIL_MAX];
	} c[COMP_COUNT];
	bool gpu_required;         /* sampling.gpu_required: absent NVML is down */
	uint64_t outcomes[COMP_OUTCOMES];
	uint64_t store_traces, store_bytes;
	uint64_t conn_bytes, conn_bytes_peak, conns_memory_closed, conns_memory_refused,
	         conns_backlogged;
	int64_t store_free;        /* -1: not known yet */
	/* the listeners as server.c opened them (component_listeners) */
	bool unix_open;
	int tcp_port, tls_port;    /* -1: off */
	/* the loop's only */
	uv_fs_t statfs_req;
	bool statfs_busy;
};

/* A view of the table for one status reply: the reply's components point
 * into it, so it lives as long as the reply is being encoded. */
struct component_view {
	struct msg_component v[COMP_COUNT];
	char detail[COMP_COUNT][COMPONENT_DETAIL_MAX];
	const char *commit;
	int64_t store_free;
};

int component_init(struct daemon *d, struct perr *err);
void component_deinit(struct daemon *d);

/* Sets one component's state; detail (printf) says where it serves, or
 * why not and what to do. Any thread. */
void component_set(struct daemon *d, enum component_id id, enum component_state st,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* main.c, once the server started: which listeners are open and their
 * bound ports (-1: off). The listeners live as long as the loop, so the
 * table keeps these until the end. */
void component_listeners(struct daemon *d, bool unix_open, int tcp_port, int tls_port);
/* The loop: reads the sockets, Kineto's and the store's state from d into
 * the table, and asks for the store's free space (answered later). */
void component_scan(struct daemon *d);

/* The sampler thread, each cycle: NVML's state from the library's load
 * (gpu, absent and why as mgpu_load left them) and this cycle's sample
 * (r: mgpu_sample's result). */
void component_nvml(struct daemon *d, const struct mgpu *gpu, bool absent, int r,
                    const char *why);

/* The sampler thread: adds the component, build, trace and store families
 * to s. */
void component_sample(struct daemon *d, struct mset *s);

/* The loop: fills r's components, commit and store_free_bytes from the
 * table (scanned first), through v. */
void component_fill(struct daemon *d, struct component_view *v,
                    struct msg_daemon_status_reply *r);

/* The name of a component and of a state, as status and /metrics say them. */
const char *component_name(enum component_id id);
const char *component_state_name(enum component_state st);

#endif
