/*
 * metrics.c: always-on sampling and its three exports.
 *
 * Data flow, every sampling.interval (default 1 s):
 *   uv timer (loop) -> uv_queue_work: sample_work (a pool thread) reads
 *   /proc (mhost.c) and NVML (mgpu.c; loaded on the first cycle there, so
 *   nvmlInit never blocks the loop) into m->cur, timing itself ->
 *   sample_done (loop) adds the traced processes' step metrics (from the
 *   agents' heartbeats in the registry) and the daemon's own, then
 *     - copies it to m->latest under m->lock, which the HTTP thread
 *       (libmicrohttpd's, started here) renders as Prometheus text when
 *       scraped (rendering every cycle for scrapes every 15 s was half the
 *       daemon's sampling cost),
 *     - appends a JSON line to export.jsonl (with size-based rotation),
 *     - moves the sample into the history ring that metrics_query reads.
 * One cycle at a time: a tick that finds the previous still running is
 * skipped and counted (metrics_skipped).
 *
 * Ownership: struct metrics belongs to the daemon (d->metrics) and is
 * freed in its timer's close callback; samples in the ring are owned by
 * the ring; m->text by m under m->lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "conn.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "mgpu.h"
#include "mhost.h"
#include "mset.h"
#include "peer.h"
#include "registry.h"

struct metrics {
	struct daemon *d;
	uv_timer_t timer;
	uv_work_t work;
	bool busy, closing, timer_closed;
	struct mset cur;
	double wall_s, cpu_s;
	struct mgpu *gpu;
	bool gpu_tried, gpu_logged;
	char gpu_why[256];
	struct mset *ring;     /* history: ring[(head + i) % cap], i < n */
	size_t cap, n, head;
	pthread_mutex_t lock;  /* latest, shared with the HTTP thread */
	struct mset latest;    /* a copy of the newest sample, rendered on scrape */
	bool have_latest;
	struct MHD_Daemon *http;
	int http_port;
	FILE *jsonl;
	uint64_t jsonl_bytes;
	uint64_t skipped;
	/* copies: the pool thread must not read d->cfg, which a reload swaps */
	char proc_root[PATH_MAX];
	char nvml_library[256];
};

static void maybe_free(struct metrics *m);

static double now_s(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sample_work(uv_work_t *req)
{
	struct metrics *m = req->data;
	double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);

	mset_reset(&m->cur);
	m->cur.ts_us = (int64_t)(now_s(CLOCK_REALTIME) * 1e6);
	mhost_sample(m->proc_root, &m->cur);
	if (!m->gpu_tried) {
		m->gpu_tried = true;
		m->gpu = mgpu_open(m->nvml_library, m->gpu_why, sizeof(m->gpu_why));
	}
	mgpu_sample(m->gpu, &m->cur);
	m->wall_s = now_s(CLOCK_MONOTONIC) - w0;
	m->cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
}

static void add_processes(struct metrics *m, struct mset *s)
{
	char job[300], host[300];
	struct mval *v;
	struct proc *p;

	for (p = m->d->procs; p != NULL; p = p->next) {
		if (p->kind != MSG_KIND_AGENT)
			continue;
		mset_label(job, sizeof(job), p->job_id ? p->job_id : "");
		mset_label(host, sizeof(host), p->host ? p->host : m->d->host);
#define PL "job=\"%.60s\",rank=\"%lld\",pid=\"%d\",host=\"%.60s\""
#define OWNED(x) if ((v = (x)) != NULL) v->owner = (int64_t)p->uid
		OWNED(mset_add(s, MF_PROC_STEPS, (double)p->steps, PL, job, (long long)p->rank,
		               (int)p->pid, host));
		if (p->last_step_us > 0)
			OWNED(mset_add(s, MF_PROC_LAST_STEP, (double)p->last_step_us / 1e6, PL, job,
			               (long long)p->rank, (int)p->pid, host));
		if (p->median_step_us > 0)
			OWNED(mset_add(s, MF_PROC_MEDIAN_STEP, (double)p->median_step_us / 1e6, PL, job,
			               (long long)p->rank, (int)p->pid, host));
#undef OWNED
#undef PL
	}
}

static void add_self(struct metrics *m, struct mset *s)
{
	struct rusage ru;
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		mset_add(s, MF_SELF_CPU_SECONDS,
		         (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, NULL);
	if (rss > 0)
		mset_add(s, MF_SELF_RSS, (double)rss * (double)sysconf(_SC_PAGESIZE), NULL);
	mset_add(s, MF_SAMPLE_SECONDS, m->wall_s, NULL);
	mset_add(s, MF_SAMPLE_CPU_SECONDS, m->cpu_s, NULL);
}

static void jsonl_write(struct metrics *m, const struct mset *s)
{
	const char *path = m->d->cfg.jsonl;
	struct pbuf b;

	if (m->jsonl == NULL)
		return;
	pbuf_init(&b, 0);
	if (mset_json(s, m->d->host, &b) == 0 && fwrite(b.data, 1, b.len, m->jsonl) == b.len) {
		fflush(m->jsonl);
		m->jsonl_bytes += b.len;
	}
	pbuf_deinit(&b);
	if (m->jsonl != stdout && m->jsonl_bytes >= m->d->cfg.jsonl_max_bytes) {
		char old[PATH_MAX + 4];

		/* rotate: FILE -> FILE.1 (replacing the previous one), start afresh */
		fclose(m->jsonl);
		snprintf(old, sizeof(old), "%s.1", path);
		if (rename(path, old) != 0)
			log_warn("export.jsonl: cannot rotate %s: %s", path, strerror(errno));
		m->jsonl = fopen(path, "ae");
		m->jsonl_bytes = 0;
		if (m->jsonl == NULL)
			log_err("export.jsonl: cannot reopen %s: %s; JSON lines stop", path,
			        strerror(errno));
	}
}

static void sample_done(uv_work_t *req, int status)
{
	struct metrics *m = req->data;
	struct mset s = m->cur, *slot;

	m->busy = false;
	memset(&m->cur, 0, sizeof(m->cur));
	if (status < 0 || m->closing) {
		mset_free(&s);
		maybe_free(m);
		return;
	}
	if (!m->gpu_logged) {
		m->gpu_logged = true;
		if (m->gpu == NULL)
			log_info("%s", m->gpu_why);
		else
			log_info("NVML loaded: GPU metrics on");
	}
	add_processes(m, &s);
	add_self(m, &s);
	pthread_mutex_lock(&m->lock);
	m->have_latest = mset_copy(&m->latest, &s) == 0;
	pthread_mutex_unlock(&m->lock);
	jsonl_write(m, &s);
	if (m->cap == 0) {
		m->cur = s; /* no history: the next cycle reuses the buffers */
		return;
	}
	if (m->n == m->cap) { /* the oldest goes; its buffers serve the next cycle */
		m->cur = m->ring[m->head];
		m->head = (m->head + 1) % m->cap;
		m->n--;
	}
	slot = &m->ring[(m->head + m->n) % m->cap];
	*slot = s;
	m->n++;
}

static void on_tick(uv_timer_t *t)
{
	struct metrics *m = t->data;

	if (m->busy) {
		m->skipped++;
		return;
	}
	m->work.data = m;
	if (uv_queue_work(m->d->loop, &m->work, sample_work, sample_done) == 0)
		m->busy = true;
}

/* ---- HTTP (libmicrohttpd's own thread) ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
                             const char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
	                                                         MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **state)
{
	static const char index_page[] =
		"gprofd metrics: GET /metrics (Prometheus text format 0.0.4)\n";
	struct metrics *m = cls;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	struct pbuf b;
	int r;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)state;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", 9);
	if (strcmp(url, "/") == 0)
		return reply(c, MHD_HTTP_OK, "text/plain", index_page, sizeof(index_page) - 1);
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", "not found: try /metrics\n", 24);
	pthread_mutex_lock(&m->lock);
	if (!m->have_latest) {
		pthread_mutex_unlock(&m->lock);
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
		             "the first sample is not taken yet\n", 34);
	}
	pbuf_init(&b, 0);
	r = mset_prometheus(&m->latest, &b);
	pthread_mutex_unlock(&m->lock);
	if (r < 0) {
		pbuf_deinit(&b);
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n", 14);
	}
	resp = MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		pbuf_deinit(&b);
		return MHD_NO;
	}
	b.data = NULL; /* transferred: libmicrohttpd frees it */
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}

static int http_start(struct metrics *m, struct perr *err)
{
	const char *addr = m->d->cfg.metrics;
	char host[CONFIG_ADDR_MAX], *colon;
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	                          .ai_socktype = SOCK_STREAM }, *ai = NULL;
	const union MHD_DaemonInfo *info;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;

	if (strcmp(addr, "off") == 0)
		return 0;
	snprintf(host, sizeof(host), "%s", addr);
	colon = strrchr(host, ':');
	if (colon == NULL)
		return perr_set(err, -EINVAL, "metrics: \"%s\" is not ADDR:PORT", addr);
	*colon = '\0';
	if (host[0] == '[' && colon[-1] == ']') { /* [::1]:9773 */
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL)
		return perr_set(err, -EINVAL, "metrics: cannot use the address \"%s\"", addr);
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	m->http = MHD_start_daemon(flags, 0, NULL, NULL, on_http, m,
	                           MHD_OPTION_SOCK_ADDR, ai->ai_addr,
	                           MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
	                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
	                           MHD_OPTION_END);
	freeaddrinfo(ai);
	if (m->http == NULL)
		return perr_set(err, -EADDRINUSE, "metrics: cannot listen on %s (in use? set metrics: "
		                "to another address, or off)", addr);
	info = MHD_get_daemon_info(m->http, MHD_DAEMON_INFO_BIND_PORT);
	m->http_port = info ? info->port : 0;
	log_info("metrics on http://%s:%d/metrics", host, m->http_port);
	return 0;
}

int metrics_start(struct daemon *d, struct perr *err)
{
	struct metrics *m = calloc(1, sizeof(*m));
	int r;

	if (m == NULL)
		return perr_set(err, -ENOMEM, "out of memory");
	m->d = d;
	snprintf(m->proc_root, sizeof(m->proc_root), "%s", d->cfg.proc_root);
	snprintf(m->nvml_library, sizeof(m->nvml_library), "%s", d->cfg.nvml_library);
	pthread_mutex_init(&m->lock, NULL);
	m->cap = d->cfg.history_s * 1000 / (d->cfg.sample_ms ? d->cfg.sample_ms : 1000);
	if (m->cap > 0 && (m->ring = calloc(m->cap, sizeof(*m->ring))) == NULL)
		m->cap = 0;
	if (d->cfg.jsonl[0]) {
		if (strcmp(d->cfg.jsonl, "-") == 0) {
			m->jsonl = stdout;
		} else if (d->cfg.jsonl[0] != '/') {
			r = perr_set(err, -EINVAL, "export.jsonl: \"%s\" must be an absolute path or -",
			             d->cfg.jsonl);
			goto fail;
		} else if ((m->jsonl = fopen(d->cfg.jsonl, "ae")) == NULL) {
			r = perr_set(err, -errno, "export.jsonl: cannot open %s: %s", d->cfg.jsonl,
			             strerror(errno));
			goto fail;
		} else {
			fseek(m->jsonl, 0, SEEK_END);
			m->jsonl_bytes = (uint64_t)ftell(m->jsonl);
		}
	}
	if ((r = http_start(m, err)) < 0)
		goto fail;
	uv_timer_init(d->loop, &m->timer);
	m->timer.data = m;
	uv_timer_start(&m->timer, on_tick, 0, d->cfg.sample_ms);
	d->metrics = m;
	return 0;
fail:
	if (m->jsonl != NULL && m->jsonl != stdout)
		fclose(m->jsonl);
	free(m->ring);
	free(m);
	return r;
}

/* m goes when both its timer is closed and no cycle is in the pool. */
static void maybe_free(struct metrics *m)
{
	size_t i;

	if (!m->timer_closed || m->busy)
		return;
	for (i = 0; i < m->n; i++)
		mset_free(&m->ring[(m->head + i) % m->cap]);
	free(m->ring);
	mset_free(&m->cur);
	mset_free(&m->latest);
	pthread_mutex_destroy(&m->lock);
	mgpu_close(m->gpu);
	free(m);
}

static void on_timer_closed(uv_handle_t *h)
{
	struct metrics *m = h->data;

	m->timer_closed = true;
	maybe_free(m);
}

void metrics_stop(struct daemon *d)
{
	struct metrics *m = d->metrics;

	if (m == NULL)
		return;
	d->metrics = NULL;
	m->closing = true;
	if (m->http != NULL)
		MHD_stop_daemon(m->http);
	if (m->jsonl != NULL && m->jsonl != stdout)
		fclose(m->jsonl);
	m->jsonl = NULL;
	uv_timer_stop(&m->timer);
	/* a cycle still in the pool finishes first: its done callback runs
	 * before the loop ends and frees m if the timer is closed by then */
	uv_close((uv_handle_t *)&m->timer, on_timer_closed);
}

int metrics_http_port(struct daemon *d)
{
	return d->metrics ? d->metrics->http_port : 0;
}

/* A sample's values for one reader: a process's values only if the peer
 * may see that process (its pid, job and rank are not everyone's). */
static bool visible(const struct peer *peer, const struct mval *v)
{
	return v->owner < 0 || peer_may(peer, (uid_t)v->owner);
}

void metrics_query(struct conn *c, const struct msg *q)
{
	struct daemon *d = c->d;
	struct metrics *m = d->metrics;
	struct msg_sample *samples;
	struct msg r;
	size_t want, first, oldest, i, j, cost = 0;

	if (m == NULL || m->n == 0) {
		conn_send_error(c, q->id, MSG_E_NOT_FOUND, m == NULL ?
		                "metrics are off on this daemon" :
		                "no sample yet: the first is taken within a second of start");
		return;
	}
	/* history_s 0: the latest sample; else the samples of that span, as
	 * many of the newest as fit one reply */
	want = q->u.metrics_query.history_s > 0 ?
	       (size_t)(q->u.metrics_query.history_s * 1000 / (int64_t)d->cfg.sample_ms) + 1 : 1;
	if (want > m->n)
		want = m->n;
	first = m->n - want; /* ring position of the oldest wanted */
	if ((samples = calloc(want, sizeof(*samples))) == NULL) {
		conn_send_error(c, q->id, MSG_E_INTERNAL, "out of memory");
		return;
	}
	oldest = want;
	for (i = want; i-- > 0;) {
		const struct mset *s = &m->ring[(m->head + first + i) % m->cap];
		struct msg_sample *o = &samples[i];

		msg_elem_init(MSG_ELEM_SAMPLE, o);
		o->ts_us = s->ts_us;
		o->values.names = calloc(s->n ? s->n : 1, sizeof(char *));
		o->values.values = calloc(s->n ? s->n : 1, sizeof(double));
		if (o->values.names == NULL || o->values.values == NULL)
			break;
		for (j = 0; j < s->n && o->values.n < MSG_METRICS_MAX; j++) {
			char key[MSET_LABELS_MAX + 100];

			if (!visible(conn_peer(c), &s->v[j]))
				continue;
			mset_key(s, &s->v[j], key, sizeof(key));
			if (strlen(key) > MSG_METRIC_NAME_MAX ||
			    (o->values.names[o->values.n] = strdup(key)) == NULL)
				continue;
			o->values.values[o->values.n++] = s->v[j].v;
			cost += strlen(key) + 28;
		}
		if (cost > 900 * 1024 && i + 1 < want)
			break; /* this one does not fit the 1 MiB frame: send the newer */
		oldest = i;
	}
	msg_init(&r, MSG_METRICS_REPLY, q->id);
	r.u.metrics_reply.host = d->host;
	r.u.metrics_reply.interval_ms = (int64_t)d->cfg.sample_ms;
	r.u.metrics_reply.samples.v = samples + oldest;
	r.u.metrics_reply.samples.n = want - oldest;
	conn_send_msg(c, &r);
	for (i = 0; i < want; i++) {
		for (j = 0; j < samples[i].values.n; j++)
			free((char *)samples[i].values.names[j]);
		free(samples[i].values.names);
		free(samples[i].values.values);
	}
	free(samples);
}
