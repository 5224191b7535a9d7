/*
 * metrics.c: always-on sampling and its three exports.
 *
 * Data flow, every sampling.interval (default 1 s), all on one thread of
 * its own (the sampler, "gprofd-sample"), so a cycle wakes nothing else:
 *   sleep to the next tick on a fixed grid (ticks a slow cycle overran are
 *   skipped and counted) -> read /proc (mhost.c) and NVML (mgpu.c; loaded
 *   when the thread starts, so nvmlInit never blocks the loop) into m->cur
 *   -> add the traced processes' step values (m->procs, which the loop
 *   keeps from the agents' heartbeats: metrics_proc_update/_gone) and the
 *   daemon's own -> append a JSON line to export.jsonl (size-based
 *   rotation) -> under m->lock: append it to the history (mhist.c,
 *   compact: each series named once, a value in a few bytes) that
 *   metrics_query (loop) reads; its host values become m->latest, which
 *   the HTTP thread (libmicrohttpd's) copies out, adds the processes'
 *   values to (m->procs), and renders as Prometheus text on the first
 *   scrape of that sample (later scrapes share the rendering). Between
 *   cycles no sample is held twice: the history has them all, m->procs
 *   the processes' (issue 25: 170 bytes a process less).
 * Before, a loop timer queued each cycle on the thread pool and took it
 * back on the loop: three cold wake-ups a second instead of one, which
 * cost more than the sampling itself (docs/BENCHMARKS.md).
 *
 * Ownership: struct metrics belongs to the daemon (d->metrics); the
 * sampler thread owns m->cur, m->gpu and the JSON lines file; the HTTP
 * thread owns its connection list, http_set and http_resp; m->lock
 * guards the ring, latest, procs and stop. metrics_stop joins the sampler
 * and frees everything.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "component.h"
#include "conn.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "mgpu.h"
#include "mhist.h"
#include "mhost.h"
#include "mset.h"
#include "peer.h"
#include "registry.h"

struct mproc {            /* an agent-loaded process's step values */
	bool live;
	int64_t owner;        /* its uid */
	char *labels;         /* heap, its length: a fixed MSET_LABELS_MAX array
	                         was 190 bytes more per process (issue 25) */
	uint64_t first_seq;   /* the first sample it is in (latest_seq's count); 0 none yet */
	double steps, last_s, median_s;
};

struct hconn {             /* one HTTP connection, while libmicrohttpd has it */
	struct hconn *prev, *next; /* in m->hc_*, unless evicted */
	int fd;
	uint64_t since_ms;     /* when its current request began: its start, or the
	                          end of its previous one */
	bool evicted;
};

struct metrics {
	struct daemon *d;
	pthread_t thread;
	bool thread_running;
	bool stop;             /* under lock */
	pthread_cond_t wake;   /* signalled by metrics_stop */
	uint64_t interval_ns;
	struct mset cur;       /* the sampler thread's */
	double wall_s, cpu_s;
	struct mgpu *gpu;
	bool gpu_absent;       /* no NVML installed (component.c: absent, not down) */
	char gpu_why[256];
	pthread_mutex_t lock;  /* everything below */
	struct mhist *hist;    /* the last history_s / interval samples */
	struct mset latest;    /* a copy of the newest sample, rendered on scrape */
	bool have_latest;
	uint64_t latest_seq;   /* counts the samples copied to latest */
	struct mproc *procs;   /* indexed by proc->mslot - 1 */
	size_t nprocs, procs_cap;
	uint64_t skipped;
	struct MHD_Daemon *http;
	int http_port;
	/* libmicrohttpd's thread only: its open connections, oldest request
	 * first (see "HTTP connections" below) */
	struct hconn *hc_head, *hc_tail;
	size_t hc_live;
	/* ...and the exposition of sample http_seq, rendered once from a copy
	 * (http_set) and handed to every scrape of that sample */
	struct MHD_Response *http_resp;
	uint64_t http_seq;
	struct mset http_set;
	_Atomic uint64_t http_evicted; /* read by the sampler for its counter */
	/* what the endpoint holds, for its gauges (the HTTP thread writes, the
	 * sampler reads): renders of the exposition, the bytes of those still
	 * held (the newest, and older ones scrapes are still sending), and its
	 * connections (each with at most HTTP_REQUEST_BYTES of request) */
	_Atomic uint64_t http_renders, http_body_bytes, http_conns;
	/* the sampler thread's: the JSON lines file, and copies of settings
	 * (a reload swaps d->cfg on the loop) */
	FILE *jsonl;
	uint64_t jsonl_bytes, jsonl_max;
	char jsonl_path[PATH_MAX];
	char host[256];
	int statm_fd;          /* /proc/self/statm, kept open */
	long trimmed_pages;    /* own pages after the last malloc_trim */
	char proc_root[PATH_MAX];
	char nvml_library[256];
};

static double now_s(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- process values, kept by the loop, read by the sampler ---- */

void metrics_proc_update(struct daemon *d, struct proc *p)
{
	struct metrics *m = d->metrics;
	char job[MSET_VALUE_MAX], host[MSET_VALUE_MAX], rank[24] = "", labels[MSET_LABELS_MAX + 1];
	struct mproc *mp;

	if (m == NULL || p->kind != MSG_KIND_AGENT)
		return;
	pthread_mutex_lock(&m->lock);
	if (p->mslot == 0) {
		size_t i;

		for (i = 0; i < m->nprocs && m->procs[i].live; i++)
			;
		if (i == m->nprocs) {
			/* doubling: one slot more per registration left a trail of
			 * freed arrays in the loop's heap */
			if (m->nprocs == m->procs_cap) {
				size_t cap = m->procs_cap ? m->procs_cap * 2 : 16;
				struct mproc *v = realloc(m->procs, cap * sizeof(*v));

				if (v == NULL) {
					pthread_mutex_unlock(&m->lock);
					return;
				}
				m->procs = v;
				m->procs_cap = cap;
			}
			m->procs[m->nprocs].live = false;
			m->procs[m->nprocs++].labels = NULL;
		}
		p->mslot = i + 1;
	}
	mp = &m->procs[p->mslot - 1];
	/* Each value is bounded as it is escaped (mset_label), never after:
	 * a precision here once cut an escaped job id just after a backslash, and the
	 * dangling escape broke every series of the scrape (issue 23, item 10).
	 * An unknown rank is an empty label, which Prometheus reads as no
	 * label at all: never rank="-1". */
	if (p->rank >= 0)
		snprintf(rank, sizeof(rank), "%lld", (long long)p->rank);
	snprintf(labels, sizeof(labels), "job=\"%s\",rank=\"%s\",pid=\"%d\",host=\"%s\"",
	         mset_label(job, sizeof(job), p->job_id ? p->job_id : ""), rank,
	         (int)p->pid, mset_label(host, sizeof(host), p->host ? p->host : d->host));
	if (mp->labels == NULL || strcmp(mp->labels, labels) != 0) {
		char *l = strdup(labels);

		if (l == NULL) { /* left out of the samples until the next heartbeat */
			pthread_mutex_unlock(&m->lock);
			return;
		}
		free(mp->labels);
		mp->labels = l;
	}
	if (!mp->live)
		mp->first_seq = 0;
	mp->live = true;
	mp->owner = (int64_t)p->uid;
	mp->steps = (double)p->steps;
	mp->last_s = (double)p->last_step_us / 1e6;
	mp->median_s = (double)p->median_step_us / 1e6;
	pthread_mutex_unlock(&m->lock);
}

void metrics_proc_gone(struct daemon *d, struct proc *p)
{
	struct metrics *m = d->metrics;

	if (m == NULL || p->mslot == 0)
		return;
	pthread_mutex_lock(&m->lock);
	m->procs[p->mslot - 1].live = false;
	free(m->procs[p->mslot - 1].labels);
	m->procs[p->mslot - 1].labels = NULL;
	pthread_mutex_unlock(&m->lock);
	p->mslot = 0;
}

/* Under m->lock. */
/* Under m->lock. The sampler (upto 0) adds every live process and stamps
 * the new ones with the sample they are first in (latest_seq + 1); a
 * scrape (upto: the sample it renders) adds those already in that sample,
 * so /metrics names the series gprofctl metrics reads in the same sample. */
static void add_processes(struct metrics *m, struct mset *s, uint64_t upto)
{
	struct mval *v;
	size_t i;

	for (i = 0; i < m->nprocs; i++) {
		struct mproc *p = &m->procs[i];

		if (!p->live)
			continue;
		if (upto == 0 && p->first_seq == 0)
			p->first_seq = m->latest_seq + 1;
		if (upto != 0 && (p->first_seq == 0 || p->first_seq > upto))
			continue;
		if ((v = mset_add_labels(s, MF_PROC_STEPS, p->steps, p->labels)) != NULL)
			v->owner = p->owner;
		if (p->last_s > 0 && (v = mset_add_labels(s, MF_PROC_LAST_STEP, p->last_s,
		                                          p->labels)) != NULL)
			v->owner = p->owner;
		if (p->median_s > 0 && (v = mset_add_labels(s, MF_PROC_MEDIAN_STEP, p->median_s,
		                                            p->labels)) != NULL)
			v->owner = p->owner;
	}
}

/* The daemon's resident pages, and those of them that are its own
 * (anonymous: resident less shared), from /proc/self/statm; 0 unknown. */
static long self_pages(struct metrics *m, long *anon)
{
	char buf[128], *p;
	long rss = 0, shared = 0;
	ssize_t n;

	if (m->statm_fd < 0)
		m->statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (m->statm_fd >= 0 && (n = pread(m->statm_fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = '\0';
		strtol(buf, &p, 10);    /* size */
		rss = strtol(p, &p, 10);
		shared = strtol(p, NULL, 10);
	}
	*anon = rss > shared ? rss - shared : 0;
	return rss;
}

static void add_self(struct metrics *m, struct mset *s)
{
	struct rusage ru;
	long anon, rss = self_pages(m, &anon);

	if (getrusage(RUSAGE_SELF, &ru) == 0)
		mset_add(s, MF_SELF_CPU_SECONDS,
		         (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6, NULL);
	if (rss > 0)
		mset_add(s, MF_SELF_RSS, (double)rss * (double)sysconf(_SC_PAGESIZE), NULL);
	mset_add(s, MF_SAMPLE_SECONDS, m->wall_s, NULL);
	mset_add(s, MF_SAMPLE_CPU_SECONDS, m->cpu_s, NULL);
	mset_add(s, MF_SAMPLE_SKIPPED, (double)m->skipped, NULL);
	mset_add(s, MF_HTTP_EVICTED, (double)atomic_load(&m->http_evicted), NULL);
	mset_add(s, MF_HTTP_RENDERS, (double)atomic_load(&m->http_renders), NULL);
	mset_add(s, MF_SAMPLES_TOTAL, (double)(m->latest_seq + 1), NULL); /* with this one */
	mset_add(s, MF_HTTP_BODY_BYTES, (double)atomic_load(&m->http_body_bytes), NULL);
	mset_add(s, MF_HTTP_CONNS, (double)atomic_load(&m->http_conns), NULL);
	/* as of the previous cycle: this sample is not in it yet */
	pthread_mutex_lock(&m->lock);
	mset_add(s, MF_HISTORY_SAMPLES, (double)mhist_len(m->hist), NULL);
	mset_add(s, MF_HISTORY_BYTES, (double)mhist_bytes(m->hist), NULL);
	pthread_mutex_unlock(&m->lock);
}

static void jsonl_write(struct metrics *m, const struct mset *s)
{
	struct pbuf b;

	if (m->jsonl == NULL)
		return;
	pbuf_init(&b, 0);
	if (mset_json(s, m->host, &b) == 0 && fwrite(b.data, 1, b.len, m->jsonl) == b.len) {
		fflush(m->jsonl);
		m->jsonl_bytes += b.len;
	}
	pbuf_deinit(&b);
	if (m->jsonl != stdout && m->jsonl_bytes >= m->jsonl_max) {
		char old[PATH_MAX + 4];

		/* rotate: FILE -> FILE.1 (replacing the previous one), start afresh */
		fclose(m->jsonl);
		snprintf(old, sizeof(old), "%s.1", m->jsonl_path);
		if (rename(m->jsonl_path, old) != 0)
			log_warn("export.jsonl: cannot rotate %s: %s", m->jsonl_path, strerror(errno));
		m->jsonl = fopen(m->jsonl_path, "ae");
		m->jsonl_bytes = 0;
		if (m->jsonl == NULL)
			log_err("export.jsonl: cannot reopen %s: %s; JSON lines stop", m->jsonl_path,
			        strerror(errno));
	}
}

/* Gives the heap's free pages back once more than this is free. glibc
 * returns only the free memory at the top of a heap, and by itself only
 * past a threshold that grows with the largest block ever freed: one
 * gprofctl metrics reply (its strings and JSON) left 750 kB resident in
 * the middle of the loop's heap, where nothing reclaimed it, nearly
 * doubling an idle daemon's private memory (issue 25). */
#define TRIM_FREE_BYTES (128 * 1024)

/* Once a cycle, and cheap: a read of statm. malloc_trim (which holds the
 * arena's lock, the loop's too, while it walks the free lists) runs only
 * when the daemon's own pages grew by TRIM_FREE_BYTES since the last one:
 * after a burst of allocations, which the trim gives back if they were
 * freed. Counting free bytes instead (mallinfo2) would trim every cycle:
 * pages already given back still count as free. */
static void trim_heap(struct metrics *m)
{
	long page = sysconf(_SC_PAGESIZE), anon;

	self_pages(m, &anon);
	if (anon < m->trimmed_pages)
		m->trimmed_pages = anon;
	if ((anon - m->trimmed_pages) * page < TRIM_FREE_BYTES)
		return;
	malloc_trim(0);
	self_pages(m, &m->trimmed_pages);
}

/* Shrinks s's buffers to its first n values (and their labels). */
static void mset_truncate(struct mset *s, size_t n, size_t text_len)
{
	void *p;

	s->n = n;
	s->text_len = text_len;
	if (n > 0 && n < s->cap && (p = realloc(s->v, n * sizeof(*s->v))) != NULL) {
		s->v = p;
		s->cap = n;
	}
	if (text_len > 0 && text_len < s->text_cap && (p = realloc(s->text, text_len)) != NULL) {
		s->text = p;
		s->text_cap = text_len;
	}
}

/* One cycle, on the sampler thread. */
static void sample(struct metrics *m)
{
	double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	struct mset *s = &m->cur, old;
	size_t nbase, tbase;

	mset_reset(s);
	s->ts_us = (int64_t)(now_s(CLOCK_REALTIME) * 1e6);
	mhost_sample(m->proc_root, s);
	component_nvml(m->d, m->gpu, m->gpu_absent, mgpu_sample(m->gpu, s), m->gpu_why);
	/* the cost of the cycle: reading /proc and NVML */
	m->wall_s = now_s(CLOCK_MONOTONIC) - w0;
	m->cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
	add_self(m, s);
	component_sample(m->d, s); /* the parts' state: host values, kept in latest */
	nbase = s->n;
	tbase = s->text_len;
	pthread_mutex_lock(&m->lock);
	add_processes(m, s, 0);
	pthread_mutex_unlock(&m->lock);
	jsonl_write(m, s);
	pthread_mutex_lock(&m->lock);
	if (mhist_append(m->hist, s) < 0)
		log_warn("metrics: out of memory: a sample is missing from the history");
	pthread_mutex_unlock(&m->lock);
	/* latest keeps the host's values only: a scrape takes the processes'
	 * from m->procs, which holds them anyway, so between cycles no copy of
	 * them is kept but the history's (issue 25) */
	mset_truncate(s, nbase, tbase);
	pthread_mutex_lock(&m->lock);
	old = m->latest;
	m->latest = *s; /* transferred */
	m->have_latest = true;
	m->latest_seq++;
	pthread_mutex_unlock(&m->lock);
	mset_free(&old);
	memset(s, 0, sizeof(*s));
	trim_heap(m);
}

static void *sampler_main(void *arg)
{
	struct metrics *m = arg;
	struct timespec next;
	bool stop;

	pthread_setname_np(pthread_self(), "gprofd-sample");
	/* NVML loads here, so nvmlInit never blocks the loop */
	m->gpu = mgpu_load(m->nvml_library, &m->gpu_absent, m->gpu_why, sizeof(m->gpu_why));
	log_info("%s", m->gpu ? "NVML loaded: GPU metrics on" : m->gpu_why);
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		struct timespec now;
		uint64_t late;

		sample(m);
		/* the next tick on the grid; ticks a slow cycle overran are skipped */
		next.tv_nsec += (long)(m->interval_ns % 1000000000u);
		next.tv_sec += (time_t)(m->interval_ns / 1000000000u) + next.tv_nsec / 1000000000;
		next.tv_nsec %= 1000000000;
		clock_gettime(CLOCK_MONOTONIC, &now);
		late = (uint64_t)((now.tv_sec - next.tv_sec) * 1000000000LL + (now.tv_nsec - next.tv_nsec));
		if ((int64_t)late >= 0) {
			uint64_t k = late / m->interval_ns + 1;

			m->skipped += k;
			next.tv_nsec += (long)((k * m->interval_ns) % 1000000000u);
			next.tv_sec += (time_t)((k * m->interval_ns) / 1000000000u) +
			               next.tv_nsec / 1000000000;
			next.tv_nsec %= 1000000000;
		}
		pthread_mutex_lock(&m->lock);
		while (!m->stop && pthread_cond_timedwait(&m->wake, &m->lock, &next) == 0)
			;
		stop = m->stop;
		pthread_mutex_unlock(&m->lock);
		if (stop)
			break;
	}
	mgpu_close(m->gpu);
	return NULL;
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

/* A rendered exposition, counted in http_body_bytes while libmicrohttpd
 * holds it. */
struct hbody {
	struct metrics *m;
	size_t len;
	void *data;
};

/* libmicrohttpd let go of a rendered exposition (no scrape sends it). */
static void hbody_free(void *cls)
{
	struct hbody *h = cls;

	atomic_fetch_sub(&h->m->http_body_bytes, h->len);
	free(h->data);
	free(h);
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **state)
{
	static const char index_page[] =
		"gprofd metrics: GET /metrics (Prometheus text format 0.0.4)\n";
	struct metrics *m = cls;
	struct MHD_Response *resp;
	struct hbody *hb;
	uint64_t seq = 0;
	void *p;
	bool fresh;
	struct pbuf b;
	int r = 0;

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
	/* One render per sample, outside the lock: each scrape of the same
	 * sample is handed the same response (libmicrohttpd counts its users),
	 * so a request costs a reference, not a render of the whole exposition
	 * under m->lock, which the loop takes too. Before, 100 clients that each
	 * sent one request and read nothing held the thread in 100 renders (5 s
	 * on a 4,096-CPU host) and pinned 100 copies (issue 23). */
	pthread_mutex_lock(&m->lock);
	if (!m->have_latest) {
		pthread_mutex_unlock(&m->lock);
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
		             "the first sample is not taken yet\n", 34);
	}
	fresh = m->http_resp == NULL || m->http_seq != m->latest_seq;
	if (fresh) {
		seq = m->latest_seq;
		r = mset_copy(&m->http_set, &m->latest);
		if (r == 0)
			add_processes(m, &m->http_set, seq);
	}
	pthread_mutex_unlock(&m->lock);
	if (fresh) {
		pbuf_init(&b, 0);
		if (r == 0)
			r = mset_prometheus(&m->http_set, &b);
		/* the copy is needed only to render: between scrapes the response
		 * alone is kept, at its length (issue 25) */
		mset_free(&m->http_set);
		if (r == 0 && b.len > 0 && (p = realloc(b.data, b.len)) != NULL) {
			b.data = p;
			b.cap = b.len;
		}
		if (r < 0) {
			pbuf_deinit(&b);
			return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain",
			             "out of memory\n", 14);
		}
		atomic_fetch_add(&m->http_renders, 1);
		hb = malloc(sizeof(*hb));
		resp = hb == NULL ? NULL :
		       MHD_create_response_from_buffer_with_free_callback_cls(b.len, b.data,
		                                                              hbody_free, hb);
		if (resp == NULL) {
			free(hb);
			pbuf_deinit(&b);
			return MHD_NO;
		}
		hb->m = m;
		hb->len = b.len;
		hb->data = b.data;
		atomic_fetch_add(&m->http_body_bytes, b.len);
		b.data = NULL; /* transferred: hbody_free frees it */
		MHD_add_response_header(resp, "Content-Type",
		                        "text/plain; version=0.0.4; charset=utf-8");
		if (m->http_resp != NULL)
			MHD_destroy_response(m->http_resp); /* scrapes still sending keep theirs */
		m->http_resp = resp;
		m->http_seq = seq;
	}
	return MHD_queue_response(c, MHD_HTTP_OK, m->http_resp);
}

/* ---- HTTP connections: a deadline for every request ----
 *
 * libmicrohttpd's own limits could not keep /metrics answering: its
 * timeout counts idleness, so a client that sends a byte every 3 s is never
 * idle, and its per-address limit (32) is shared by every local user, all
 * of them 127.0.0.1, so 70 such clients refused every scrape from this host
 * for as long as they dribbled (issue 23, item 11). Instead each request
 * gets HTTP_REQUEST_S from its connection's start (or from the end of the
 * request before it on that connection) to be read and answered, and at
 * most HTTP_CONNS_SOFT connections are kept: whenever a connection arrives,
 * those past their deadline are closed, then the oldest ones while there
 * are too many. A scraper sends its request at once and is answered within
 * a loop turn, so a new connection always gets its turn, however many slow
 * ones an attacker opens; libmicrohttpd's hard limit (HTTP_CONNS_MAX) is
 * never the one that refuses it. Closing is shutdown(2) on the socket:
 * libmicrohttpd sees the end of the stream and frees the connection itself.
 * All of this runs on libmicrohttpd's one thread (its callbacks), which is
 * also the only one that closes these sockets, so an fd in the list is
 * still the connection's. */
#define HTTP_REQUEST_S 10
#define HTTP_CONNS_SOFT 128
#define HTTP_CONNS_MAX 256
#define HTTP_REQUEST_BYTES (32 * 1024) /* a request's headers, at most */

static uint64_t mono_ms(void)
{
	return (uint64_t)(now_s(CLOCK_MONOTONIC) * 1000);
}

static void hc_unlink(struct metrics *m, struct hconn *h)
{
	if (h->prev != NULL)
		h->prev->next = h->next;
	else
		m->hc_head = h->next;
	if (h->next != NULL)
		h->next->prev = h->prev;
	else
		m->hc_tail = h->prev;
	h->prev = h->next = NULL;
}

static void hc_append(struct metrics *m, struct hconn *h)
{
	h->prev = m->hc_tail;
	h->next = NULL;
	if (m->hc_tail != NULL)
		m->hc_tail->next = h;
	else
		m->hc_head = h;
	m->hc_tail = h;
}

static void hc_evict(struct metrics *m, struct hconn *h, const char *why)
{
	uint64_t n;

	hc_unlink(m, h);
	m->hc_live--;
	atomic_store(&m->http_conns, m->hc_live);
	h->evicted = true;
	shutdown(h->fd, SHUT_RDWR);
	n = atomic_fetch_add(&m->http_evicted, 1) + 1;
	if ((n & (n - 1)) == 0) /* the 1st, 2nd, 4th, 8th...: a flood logs little */
		log_info("metrics: closed a slow HTTP connection (%s); %llu so far "
		         "(gprofd_metrics_http_evicted_total)", why, (unsigned long long)n);
}

static void on_http_conn(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code)
{
	struct metrics *m = cls;
	struct hconn *h = *socket_context;
	const union MHD_ConnectionInfo *ci;
	uint64_t now = mono_ms();

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (h != NULL && !h->evicted) {
			hc_unlink(m, h);
			m->hc_live--;
			atomic_store(&m->http_conns, m->hc_live);
		}
		free(h);
		*socket_context = NULL;
		return;
	}
	/* the list is in request-start order: the overdue are at its head */
	while (m->hc_head != NULL && now - m->hc_head->since_ms >= HTTP_REQUEST_S * 1000)
		hc_evict(m, m->hc_head, "its request took more than 10 s");
	while (m->hc_live >= HTTP_CONNS_SOFT)
		hc_evict(m, m->hc_head, "too many connections: the oldest request goes");
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci == NULL || (h = calloc(1, sizeof(*h))) == NULL)
		return; /* untracked: libmicrohttpd's own timeout still ends it */
	h->fd = ci->connect_fd;
	h->since_ms = now;
	hc_append(m, h);
	m->hc_live++;
	atomic_store(&m->http_conns, m->hc_live);
	*socket_context = h;
}

/* A request was answered: the connection's next one starts its clock now. */
static void on_http_done(void *cls, struct MHD_Connection *c, void **req_context,
                         enum MHD_RequestTerminationCode toe)
{
	struct metrics *m = cls;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct hconn *h = ci ? ci->socket_context : NULL;

	(void)req_context;
	(void)toe;
	if (h == NULL || h->evicted)
		return;
	hc_unlink(m, h);
	h->since_ms = mono_ms();
	hc_append(m, h);
}

static int http_start(struct metrics *m, struct perr *err)
{
	const char *addr = m->d->cfg.metrics;
	char host[CONFIG_ADDR_MAX], *colon;
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	                          .ai_socktype = SOCK_STREAM }, *ai = NULL;
	const union MHD_DaemonInfo *info;
	/* epoll (MHD_USE_AUTO), not select: with thousands of agents connected
	 * a scrape's socket is past FD_SETSIZE, which select cannot watch */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;

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
	/* One thread, non-blocking sockets: a slow client costs a connection,
	 * never the thread (a thread per connection would give each one a
	 * thread to hold). No per-address limit: every local user is 127.0.0.1,
	 * so one user's connections would use up every local scraper's share;
	 * the request deadline and the eviction above bound them all instead. */
	m->http = MHD_start_daemon(flags, 0, NULL, NULL, on_http, m,
	                           MHD_OPTION_SOCK_ADDR, ai->ai_addr,
	                           MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNS_MAX,
	                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_REQUEST_S,
	                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_REQUEST_BYTES,
	                           MHD_OPTION_NOTIFY_CONNECTION, on_http_conn, m,
	                           MHD_OPTION_NOTIFY_COMPLETED, on_http_done, m,
	                           MHD_OPTION_END);
	freeaddrinfo(ai);
	if (m->http == NULL)
		return perr_set(err, -EADDRINUSE, "metrics: cannot listen on %s (in use? set metrics: "
		                "to another address, or off)", addr);
	info = MHD_get_daemon_info(m->http, MHD_DAEMON_INFO_BIND_PORT);
	m->http_port = info ? info->port : 0;
	log_info("metrics on http://%s:%d/metrics", host, m->http_port);
	component_set(m->d, COMP_METRICS, COMP_UP, "http://%s:%d/metrics", host, m->http_port);
	return 0;
}

int metrics_start(struct daemon *d, struct perr *err)
{
	struct metrics *m = calloc(1, sizeof(*m));
	pthread_condattr_t ca;
	int r;

	if (m == NULL)
		return perr_set(err, -ENOMEM, "out of memory");
	m->d = d;
	m->statm_fd = -1;
	m->interval_ns = (d->cfg.sample_ms ? d->cfg.sample_ms : 1000) * 1000000ull;
	snprintf(m->proc_root, sizeof(m->proc_root), "%s", d->cfg.proc_root);
	snprintf(m->nvml_library, sizeof(m->nvml_library), "%s", d->cfg.nvml_library);
	snprintf(m->host, sizeof(m->host), "%s", d->host);
	snprintf(m->jsonl_path, sizeof(m->jsonl_path), "%s", d->cfg.jsonl);
	m->jsonl_max = d->cfg.jsonl_max_bytes;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->wake, &ca);
	pthread_condattr_destroy(&ca);
	m->hist = mhist_new(d->cfg.history_s * 1000 / (d->cfg.sample_ms ? d->cfg.sample_ms : 1000));
	if (m->hist == NULL) {
		r = perr_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
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
	/* A taken port costs /metrics only: sampling goes on for gprofctl
	 * metrics and export.jsonl, and the metrics component says why. */
	if (http_start(m, err) < 0) {
		log_err("%s; sampling goes on (gprofctl metrics, export.jsonl)", err->msg);
		component_set(d, COMP_METRICS, COMP_DOWN, "%s", err->msg);
	} else if (m->http == NULL)
		component_set(d, COMP_METRICS, COMP_OFF, "metrics: off (sampling goes on)");
	d->metrics = m;
	if ((r = -pthread_create(&m->thread, NULL, sampler_main, m)) < 0) {
		d->metrics = NULL;
		if (m->http != NULL)
			MHD_stop_daemon(m->http);
		perr_set(err, r, "cannot start the sampling thread: %s", strerror(-r));
		goto fail;
	}
	m->thread_running = true;
	return 0;
fail:
	if (m->jsonl != NULL && m->jsonl != stdout)
		fclose(m->jsonl);
	mhist_free(m->hist);
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	free(m);
	return r;
}

void metrics_stop(struct daemon *d)
{
	struct metrics *m = d->metrics;
	size_t i;

	if (m == NULL)
		return;
	d->metrics = NULL;
	if (m->http != NULL)
		MHD_stop_daemon(m->http);
	if (m->http_resp != NULL)
		MHD_destroy_response(m->http_resp);
	mset_free(&m->http_set);
	/* a cycle in progress finishes first (NVML calls are not interrupted) */
	pthread_mutex_lock(&m->lock);
	m->stop = true;
	pthread_cond_signal(&m->wake);
	pthread_mutex_unlock(&m->lock);
	if (m->thread_running)
		pthread_join(m->thread, NULL);
	if (m->jsonl != NULL && m->jsonl != stdout)
		fclose(m->jsonl);
	if (m->statm_fd >= 0)
		close(m->statm_fd);
	mhist_free(m->hist);
	for (i = 0; i < m->nprocs; i++)
		free(m->procs[i].labels);
	free(m->procs);
	mset_free(&m->cur);
	mset_free(&m->latest);
	pthread_cond_destroy(&m->wake);
	pthread_mutex_destroy(&m->lock);
	free(m);
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

/* metrics_query's two passes over the history (mhist_read): what each
 * sample costs in the reply, then the samples that fit, as messages. */
struct query {
	struct conn *c;
	size_t *cost;              /* per sample wanted */
	size_t oldest;             /* the first sample sent, of those wanted */
	struct msg_sample *samples;
};

static int query_cost(void *ud, size_t i, const struct mset *s)
{
	struct query *q = ud;
	char key[MSET_LABELS_MAX + 100];
	size_t j, n = 0;

	for (j = 0; j < s->n && n < MSG_METRICS_MAX; j++) {
		if (!visible(conn_peer(q->c), &s->v[j]))
			continue;
		mset_key(s, &s->v[j], key, sizeof(key));
		if (strlen(key) <= MSG_METRIC_NAME_MAX) {
			q->cost[i] += strlen(key) + 28;
			n++;
		}
	}
	return 0;
}

static int query_fill(void *ud, size_t i, const struct mset *s)
{
	struct query *q = ud;
	struct msg_sample *o;
	size_t j;

	if (i < q->oldest)
		return 0;
	o = &q->samples[i - q->oldest];
	msg_elem_init(MSG_ELEM_SAMPLE, o);
	o->ts_us = s->ts_us;
	o->values.names = calloc(s->n ? s->n : 1, sizeof(char *));
	o->values.values = calloc(s->n ? s->n : 1, sizeof(double));
	if (o->values.names == NULL || o->values.values == NULL)
		return -ENOMEM;
	for (j = 0; j < s->n && o->values.n < MSG_METRICS_MAX; j++) {
		char key[MSET_LABELS_MAX + 100];

		if (!visible(conn_peer(q->c), &s->v[j]))
			continue;
		mset_key(s, &s->v[j], key, sizeof(key));
		if (strlen(key) > MSG_METRIC_NAME_MAX ||
		    (o->values.names[o->values.n] = strdup(key)) == NULL)
			continue;
		o->values.values[o->values.n++] = s->v[j].v;
	}
	return 0;
}

void metrics_query(struct daemon *d, struct conn *c, const struct msg *q)
{
	struct metrics *m = d->metrics;
	struct query qq = { .c = c };
	struct msg r;
	size_t n, want, first, sent = 0, i, j, total = 0;
	int rc;

	if (m == NULL) {
		conn_send_error(c, q->id, MSG_E_NOT_FOUND, "metrics are off on this daemon");
		return;
	}
	pthread_mutex_lock(&m->lock);
	if ((n = mhist_len(m->hist)) == 0) {
		pthread_mutex_unlock(&m->lock);
		conn_send_error(c, q->id, MSG_E_NOT_FOUND,
		                "no sample yet: the first is taken within a second of start");
		return;
	}
	/* history_s 0: the latest sample; else the samples of that span, as
	 * many of the newest as fit one reply (1 MiB) */
	want = q->u.metrics_query.history_s > 0 ?
	       (size_t)(q->u.metrics_query.history_s * 1000 / (int64_t)d->cfg.sample_ms) + 1 : 1;
	if (want > n)
		want = n;
	first = n - want; /* history position of the oldest wanted */
	qq.cost = calloc(want, sizeof(*qq.cost));
	rc = qq.cost ? mhist_read(m->hist, first, want, query_cost, &qq) : -ENOMEM;
	if (rc == 0) {
		for (qq.oldest = want; qq.oldest > 0; qq.oldest--) {
			total += qq.cost[qq.oldest - 1];
			if (total > 900 * 1024 && qq.oldest < want)
				break; /* this one does not fit the frame: send the newer */
		}
		sent = want - qq.oldest;
		qq.samples = calloc(sent, sizeof(*qq.samples));
		rc = qq.samples ? mhist_read(m->hist, first, want, query_fill, &qq) : -ENOMEM;
	}
	pthread_mutex_unlock(&m->lock);
	if (rc == 0) {
		msg_init(&r, MSG_METRICS_REPLY, q->id);
		r.u.metrics_reply.host = d->host;
		r.u.metrics_reply.interval_ms = (int64_t)d->cfg.sample_ms;
		r.u.metrics_reply.samples.v = qq.samples;
		r.u.metrics_reply.samples.n = sent;
		conn_send_msg(c, &r);
	} else {
		conn_send_error(c, q->id, MSG_E_INTERNAL, "out of memory");
	}
	for (i = 0; qq.samples != NULL && i < sent; i++) {
		for (j = 0; j < qq.samples[i].values.n; j++)
			free((char *)qq.samples[i].values.names[j]);
		free(qq.samples[i].values.names);
		free(qq.samples[i].values.values);
	}
	free(qq.samples);
	free(qq.cost);
}
