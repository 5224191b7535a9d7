/*
 * component: see component.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "commit.h"
#include "component.h"
#include "daemon.h"
#include "kineto.h"
#include "mgpu.h"
#include "mset.h"
#include "store.h"

static const char *const names[COMP_COUNT] = {
	[COMP_UNIX] = "unix", [COMP_TCP] = "tcp", [COMP_TLS] = "tls",
	[COMP_METRICS] = "metrics", [COMP_KINETO] = "kineto", [COMP_NVML] = "nvml",
	[COMP_STORE] = "store",
};

static const char *const state_names[] = {
	[COMP_OFF] = "off", [COMP_UP] = "up", [COMP_ABSENT] = "absent", [COMP_DOWN] = "down",
};

/* gprofd_traces_total's outcome label, by index (component.h) */
static const char *const outcome_names[COMP_OUTCOMES] = {
	[COMP_OUTCOME_REFUSED] = "refused", [MSG_TRACE_DONE] = "done",
	[MSG_TRACE_PARTIAL] = "partial", [MSG_TRACE_FAILED] = "failed",
	[MSG_TRACE_CANCELLED] = "cancelled",
};

const char *component_name(enum component_id id)
{
	return id < COMP_COUNT ? names[id] : "?";
}

const char *component_state_name(enum component_state st)
{
	return st <= COMP_DOWN ? state_names[st] : "?";
}

int component_init(struct daemon *d, struct perr *err)
{
	struct components *k = calloc(1, sizeof(*k));
	int i;

	if (k == NULL)
		return perr_set(err, -ENOMEM, "out of memory for the component table");
	d->comp = k;
	pthread_mutex_init(&k->lock, NULL);
	for (i = 0; i < COMP_COUNT; i++) {
		k->c[i].state = COMP_OFF;
		k->c[i].detail[0] = '\0';
	}
	k->store_free = -1;
	k->tcp_port = k->tls_port = -1;
	k->gpu_required = d->cfg.gpu_required;
	/* until the sampler loads it (or metrics never start) */
	snprintf(k->c[COMP_NVML].detail, sizeof(k->c[COMP_NVML].detail),
	         "not loaded: the sampler is not running");
	k->ready = true;
	return 0;
}

void component_deinit(struct daemon *d)
{
	if (d->comp == NULL || !d->comp->ready)
		return;
	d->comp->ready = false;
	pthread_mutex_destroy(&d->comp->lock);
	free(d->comp); /* after the loop closed: no statfs request in flight */
	d->comp = NULL;
}

static void set_locked(struct components *k, enum component_id id, enum component_state st,
                       const char *fmt, va_list ap)
{
	k->c[id].state = st;
	vsnprintf(k->c[id].detail, sizeof(k->c[id].detail), fmt, ap);
}

void component_set(struct daemon *d, enum component_id id, enum component_state st,
                   const char *fmt, ...)
{
	va_list ap;

	if (d->comp == NULL || !d->comp->ready || id >= COMP_COUNT)
		return;
	va_start(ap, fmt);
	pthread_mutex_lock(&d->comp->lock);
	set_locked(d->comp, id, st, fmt, ap);
	pthread_mutex_unlock(&d->comp->lock);
	va_end(ap);
}

static void on_statfs(uv_fs_t *req)
{
	struct daemon *d = req->data;
	struct components *k = d->comp;
	int64_t free_bytes = -1;

	if (req->result == 0 && req->ptr != NULL) {
		const uv_statfs_t *st = req->ptr;

		free_bytes = (int64_t)(st->f_bavail * st->f_bsize);
	}
	pthread_mutex_lock(&k->lock);
	k->store_free = free_bytes;
	if (req->result < 0)
		snprintf(k->c[COMP_STORE].detail, sizeof(k->c[COMP_STORE].detail),
		         "%s: cannot read its filesystem: %s (is the state directory still "
		         "there?)", d->cfg.state_dir, uv_strerror((int)req->result));
	else
		snprintf(k->c[COMP_STORE].detail, sizeof(k->c[COMP_STORE].detail), "%s/traces",
		         d->cfg.state_dir);
	k->c[COMP_STORE].state = req->result < 0 ? COMP_DOWN : COMP_UP;
	pthread_mutex_unlock(&k->lock);
	k->statfs_busy = false;
	uv_fs_req_cleanup(req);
}

/* addr's host with the port bound (tcp may ask for port 0). */
static void bound(char *out, size_t size, const char *addr, int port, bool passed)
{
	char host[CONFIG_ADDR_MAX];
	int p;

	if (passed || config_split_addr(addr, host, sizeof(host), &p) < 0)
		snprintf(out, size, "port %d (passed by systemd)", port);
	else
		snprintf(out, size, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

void component_listeners(struct daemon *d, bool unix_open, int tcp_port, int tls_port)
{
	struct components *k = d->comp;

	pthread_mutex_lock(&k->lock);
	k->unix_open = unix_open;
	k->tcp_port = tcp_port;
	k->tls_port = tls_port;
	pthread_mutex_unlock(&k->lock);
}

/* The sockets as server.c left them (component_listeners): a failure
 * there stops the daemon, so a running one has each either up or off. */
static void scan_sockets(struct daemon *d, struct components *k)
{
	int tcp = k->tcp_port, tls = k->tls_port;

	snprintf(k->c[COMP_UNIX].detail, sizeof(k->c[COMP_UNIX].detail), "%s",
	         k->unix_open ? d->cfg.socket_path : "");
	k->c[COMP_UNIX].state = k->unix_open ? COMP_UP : COMP_OFF;
	if (tcp >= 0)
		bound(k->c[COMP_TCP].detail, sizeof(k->c[COMP_TCP].detail), d->cfg.tcp, tcp,
		      strcmp(d->cfg.tcp, "off") == 0);
	else
		snprintf(k->c[COMP_TCP].detail, sizeof(k->c[COMP_TCP].detail), "tcp: off");
	k->c[COMP_TCP].state = tcp >= 0 ? COMP_UP : COMP_OFF;
	if (tls >= 0)
		bound(k->c[COMP_TLS].detail, sizeof(k->c[COMP_TLS].detail), d->cfg.tls_listen,
		      tls, false);
	else
		snprintf(k->c[COMP_TLS].detail, sizeof(k->c[COMP_TLS].detail), "tls.listen: off");
	k->c[COMP_TLS].state = tls >= 0 ? COMP_UP : COMP_OFF;
}

void component_scan(struct daemon *d)
{
	struct components *k = d->comp;
	bool passed;
	int i;

	if (k == NULL || !k->ready)
		return;
	pthread_mutex_lock(&k->lock);
	k->gpu_required = d->cfg.gpu_required != 0; /* a reload may change it */
	scan_sockets(d, k);
	/* Kineto: down is set where its start failed (main.c), with the reason */
	if (kineto_serving(d, &passed)) {
		snprintf(k->c[COMP_KINETO].detail, sizeof(k->c[COMP_KINETO].detail), "%s%s%s%s",
		         d->cfg.kineto_socket_dir[0] ? d->cfg.kineto_socket_dir : "@",
		         d->cfg.kineto_socket_dir[0] ? "/" : "", d->cfg.kineto_socket_name,
		         passed ? " (passed by systemd)" : "");
		k->c[COMP_KINETO].state = COMP_UP;
	} else if (!d->cfg.kineto_enabled) {
		snprintf(k->c[COMP_KINETO].detail, sizeof(k->c[COMP_KINETO].detail),
		         "kineto.enabled: false");
		k->c[COMP_KINETO].state = COMP_OFF;
	}
	for (i = 1; i < COMP_OUTCOMES; i++)
		k->outcomes[i] = d->cnt.traces_ended[i];
	k->outcomes[COMP_OUTCOME_REFUSED] = d->cnt.traces_refused;
	k->store_traces = store_count(d);
	k->store_bytes = store_bytes(d);
	k->conn_bytes = d->cnt.conn_bytes;
	k->conn_bytes_peak = d->cnt.conn_bytes_peak;
	k->conns_memory_closed = d->cnt.conns_memory_closed;
	k->conns_memory_refused = d->cnt.conns_memory_refused;
	k->conns_backlogged = d->cnt.conns_backlogged;
	if (k->c[COMP_STORE].state == COMP_OFF) { /* store_init succeeded; statfs not back yet */
		k->c[COMP_STORE].state = COMP_UP;
		snprintf(k->c[COMP_STORE].detail, sizeof(k->c[COMP_STORE].detail), "%s/traces",
		         d->cfg.state_dir);
	}
	pthread_mutex_unlock(&k->lock);
	if (!k->statfs_busy && !d->stopping) {
		k->statfs_req.data = d;
		if (uv_fs_statfs(d->loop, &k->statfs_req, d->cfg.state_dir, on_statfs) == 0)
			k->statfs_busy = true;
	}
}

void component_nvml(struct daemon *d, const struct mgpu *gpu, bool absent, int r,
                    const char *why)
{
	struct components *k = d->comp;
	enum component_state st;
	char detail[COMPONENT_DETAIL_MAX];

	if (k == NULL || !k->ready)
		return;
	if (gpu == NULL && absent) {
		/* no NVIDIA driver: no GPU here, no fault, unless GPU metrics
		 * were asked for */
		st = k->gpu_required ? COMP_DOWN : COMP_ABSENT;
		snprintf(detail, sizeof(detail), "%s%s", why,
		         k->gpu_required ? " (sampling.gpu_required is set)" : "");
	} else if (gpu == NULL) {
		st = COMP_DOWN; /* a driver is there but NVML does not work */
		snprintf(detail, sizeof(detail), "%s", why);
	} else if (r < 0) {
		st = COMP_DOWN;
		snprintf(detail, sizeof(detail), "NVML stopped answering (nvmlDeviceGetCount "
		         "failed this sample): GPU metrics missing; check the driver (nvidia-smi)");
	} else {
		st = COMP_UP;
		snprintf(detail, sizeof(detail), "%d GPU%s", mgpu_count(gpu),
		         mgpu_count(gpu) == 1 ? "" : "s");
	}
	pthread_mutex_lock(&k->lock);
	k->c[COMP_NVML].state = st;
	memcpy(k->c[COMP_NVML].detail, detail, sizeof(detail));
	pthread_mutex_unlock(&k->lock);
}

void component_sample(struct daemon *d, struct mset *s)
{
	struct components *k = d->comp;
	int i;

	if (k == NULL || !k->ready)
		return;
	mset_add(s, MF_BUILD_INFO, 1, "version=\"%s\",commit=\"%s\"", GPROF_VERSION,
	         GPROF_COMMIT);
	pthread_mutex_lock(&k->lock);
	for (i = 0; i < COMP_COUNT; i++) {
		mset_add(s, MF_COMPONENT_UP, k->c[i].state == COMP_UP, "component=\"%s\"", names[i]);
		mset_add(s, MF_COMPONENT_DEGRADED, k->c[i].state == COMP_DOWN, "component=\"%s\"",
		         names[i]);
	}
	for (i = 0; i < COMP_OUTCOMES; i++)
		mset_add(s, MF_TRACES_TOTAL, (double)k->outcomes[i], "outcome=\"%s\"",
		         outcome_names[i]);
	mset_add(s, MF_STORE_TRACES, (double)k->store_traces, NULL);
	mset_add(s, MF_STORE_BYTES, (double)k->store_bytes, NULL);
	if (k->store_free >= 0)
		mset_add(s, MF_STORE_FREE_BYTES, (double)k->store_free, NULL);
	mset_add(s, MF_CONN_BYTES, (double)k->conn_bytes, NULL);
	mset_add(s, MF_CONN_BYTES_PEAK, (double)k->conn_bytes_peak, NULL);
	mset_add(s, MF_CONN_MEMORY_LIMITED, (double)k->conns_memory_closed, "action=\"closed\"");
	mset_add(s, MF_CONN_MEMORY_LIMITED, (double)k->conns_memory_refused, "action=\"refused\"");
	mset_add(s, MF_CONN_MEMORY_LIMITED, (double)k->conns_backlogged, "action=\"paused\"");
	pthread_mutex_unlock(&k->lock);
}

void component_fill(struct daemon *d, struct component_view *v,
                    struct msg_daemon_status_reply *r)
{
	struct components *k = d->comp;
	int i;

	component_scan(d);
	pthread_mutex_lock(&k->lock);
	for (i = 0; i < COMP_COUNT; i++) {
		msg_elem_init(MSG_ELEM_COMPONENT, &v->v[i]);
		memcpy(v->detail[i], k->c[i].detail, sizeof(v->detail[i]));
		v->v[i].name = names[i];
		v->v[i].state = state_names[k->c[i].state];
		v->v[i].degraded = k->c[i].state == COMP_DOWN;
		v->v[i].detail = v->detail[i][0] ? v->detail[i] : NULL;
	}
	v->store_free = k->store_free;
	pthread_mutex_unlock(&k->lock);
	r->components.v = v->v;
	r->components.n = COMP_COUNT;
	r->commit = GPROF_COMMIT;
	r->store_free_bytes = v->store_free;
}
