/*
 * upload: see upload.h (ownership, callers).
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "deliver.h"
#include "log.h"
#include "registry.h"
#include "store.h"
#include "trace.h"
#include "upload.h"

/* A chunk waiting for the disk: either the decoder's reassembly buffer,
 * taken whole (large chunks: no copy), or a small copy. */
struct qchunk {
	struct qchunk *next;
	void *block;          /* what to free */
	const uint8_t *data;
	size_t len;
};

struct upload {
	struct upload *next;
	struct daemon *d;
	struct session *s;           /* NULL once its session is gone */
	uint32_t transfer;
	char trace_id[TRACE_ID_LEN];
	pid_t pid;
	char name[160];
	char tmp[PATH_MAX];
	uv_file fd;
	uint64_t received, written;
	uint32_t crc;
	struct qchunk *head, *tail;
	uv_fs_t req;
	bool busy;                   /* a write is in flight */
	bool failed;
	bool ending;                 /* upload_end arrived; finish when drained */
	uint64_t end_id;
	int fail_code;               /* why it failed, repeated as upload_end's reply */
	char fail_reason[200];
	struct delivery dl;          /* its way into the store, once written (deliver.h) */
};

static struct tproc *find_tproc(struct upload *u, struct trace **tout)
{
	struct trace *t = trace_find(u->d, u->trace_id);

	*tout = t;
	return t ? trace_tproc(t, u->pid) : NULL;
}

static void unlink_upload(struct upload *u)
{
	struct upload **pp;

	if (u->s == NULL)
		return;
	for (pp = &u->s->uploads; *pp != NULL; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
}

static void drop_queue(struct upload *u)
{
	struct qchunk *q, *next;

	for (q = u->head; q != NULL; q = next) {
		next = q->next;
		free(q->block);
		free(q);
	}
	u->head = u->tail = NULL;
}

/* Releases u's file and queue (removing the partial file of a failed
 * upload), and frees u itself once it is detached from its connection. A
 * failed upload stays on its connection until upload_end, so chunks
 * already on the way are dropped quietly. Waits for an in-flight write:
 * its callback calls release again. */
static void release(struct upload *u)
{
	if (u->busy)
		return;
	if (u->fd >= 0) {
		uv_fs_t req;

		uv_fs_close(NULL, &req, u->fd, NULL);
		uv_fs_req_cleanup(&req);
		u->fd = -1;
	}
	if (u->failed && u->tmp[0]) {
		unlink(u->tmp);
		u->tmp[0] = 0;
	}
	drop_queue(u);
	if (u->s == NULL)
		free(u);
}

/* Takes u off its connection's list and releases it. */
static void detach(struct upload *u)
{
	unlink_upload(u);
	u->s = NULL;
	release(u);
}

/* Fails u: the agent hears it at once (an error event, or the reply to its
 * upload_end when that has arrived), and the process's trace state says
 * why. A failure before upload_end is repeated as the reply to it, so
 * that request, like every request, gets exactly one reply. */
static void fail(struct upload *u, enum msg_errcode code, const char *why)
{
	struct trace *t;
	struct tproc *tp = find_tproc(u, &t);

	if (u->failed)
		return;
	u->failed = true;
	u->fail_code = code;
	snprintf(u->fail_reason, sizeof(u->fail_reason), "%s", why);
	u->d->cnt.uploads_failed++;
	log_info("upload of trace %s from pid %d failed: %s", u->trace_id, (int)u->pid, why);
	if (u->s != NULL)
		conn_send_error(&u->s->conn, u->ending ? u->end_id : 0, code, "trace %s: %s",
		                u->trace_id, why);
	if (tp != NULL)
		trace_set_state(t, tp, MSG_TS_FAILED, why);
	if (u->s != NULL)
		conn_resume(&u->s->conn);
	if (u->ending)
		detach(u); /* upload_end is answered: nothing more will come */
	else
		release(u);
}

/* An asynchronous step of u's came back: false when u is no longer wanted
 * (given up meanwhile: released; its agent gone: failed saying so). */
static bool back_in_hand(struct upload *u)
{
	u->busy = false;
	if (u->failed) {
		release(u);
		return false;
	}
	if (u->s == NULL) {
		fail(u, MSG_E_IO, "the agent disconnected during the upload");
		return false;
	}
	return true;
}

/* deliver.c's outcome: the file is stored and recorded (result 0), and
 * acknowledged here, or it is removed and the upload fails. */
static void on_delivered(struct delivery *dl, struct tproc *tp, int result, int code,
                         const char *why)
{
	struct upload *u = (struct upload *)(void *)((char *)dl - offsetof(struct upload, dl));
	struct msg m;

	(void)tp;
	if (!back_in_hand(u))
		return;
	if (result < 0) {
		fail(u, (enum msg_errcode)code, why);
		return;
	}
	msg_init(&m, MSG_UPLOAD_END_REPLY, u->end_id);
	m.u.upload_end_reply.file = u->name;
	m.u.upload_end_reply.bytes = (int64_t)u->received;
	conn_send_msg(&u->s->conn, &m);
	detach(u);
}

/* Given up while its manifest was being written (deliver.h). */
static bool abandoned(struct delivery *dl)
{
	struct upload *u = (struct upload *)(void *)((char *)dl - offsetof(struct upload, dl));

	return u->failed || u->s == NULL;
}

/* The file is written whole and fsync'd: deliver.c renames it into the
 * store, records it, and calls on_delivered. */
static void complete(struct upload *u)
{
	char tmp[PATH_MAX];
	uv_fs_t req;

	uv_fs_close(NULL, &req, u->fd, NULL);
	uv_fs_req_cleanup(&req);
	u->fd = -1;
	snprintf(tmp, sizeof(tmp), "%s", u->tmp);
	u->tmp[0] = 0; /* deliver_file renames or removes it */
	u->dl.d = u->d;
	snprintf(u->dl.trace_id, sizeof(u->dl.trace_id), "%s", u->trace_id);
	u->dl.pid = u->pid;
	snprintf(u->dl.name, sizeof(u->dl.name), "%s", u->name);
	u->dl.bytes = (int64_t)u->received;
	u->dl.done = on_delivered;
	u->dl.abandoned = abandoned;
	u->busy = true; /* until on_delivered */
	deliver_file(&u->dl, tmp);
}

static void on_fsync(uv_fs_t *req)
{
	struct upload *u = req->data;
	ssize_t r = req->result;

	uv_fs_req_cleanup(req);
	if (!back_in_hand(u))
		return;
	if (r < 0) {
		char why[160];

		snprintf(why, sizeof(why), "flushing the trace to disk failed: %s%s",
		         uv_strerror((int)r), r == UV_ENOSPC ? " (the daemon's disk is full)" : "");
		fail(u, r == UV_ENOSPC ? MSG_E_NO_SPACE : MSG_E_IO, why);
		return;
	}
	complete(u);
}

/* Every byte is written: fsync on the thread pool, then complete. */
static void sync_file(struct upload *u)
{
	int r;

	u->req.data = u;
	r = uv_fs_fsync(u->d->loop, &u->req, u->fd, on_fsync);
	if (r < 0) {
		fail(u, MSG_E_IO, uv_strerror(r));
		return;
	}
	u->busy = true;
}

static void pump(struct upload *u);

static void on_write(uv_fs_t *req)
{
	struct upload *u = req->data;
	struct qchunk *q = u->head;
	ssize_t r = req->result;

	uv_fs_req_cleanup(req);
	u->busy = false;
	u->head = q->next;
	if (u->head == NULL)
		u->tail = NULL;
	free(q->block);
	free(q);
	if (u->failed || u->s == NULL) {
		if (!u->failed)
			fail(u, MSG_E_IO, "the agent disconnected during the upload");
		else
			release(u);
		return;
	}
	if (r < 0) {
		char why[160];

		snprintf(why, sizeof(why), "writing the trace failed: %s%s", uv_strerror((int)r),
		         r == UV_ENOSPC ? " (the daemon's disk is full)" : "");
		fail(u, r == UV_ENOSPC ? MSG_E_NO_SPACE : MSG_E_IO, why);
		return;
	}
	u->written += (uint64_t)r;
	if (u->received - u->written <= UPLOAD_QUEUE_MAX / 2)
		conn_resume(&u->s->conn);
	pump(u);
}

static void pump(struct upload *u)
{
	uv_buf_t buf;
	int r;

	if (u->busy || u->failed)
		return;
	if (u->head == NULL) {
		if (u->ending)
			sync_file(u);
		return;
	}
	buf = uv_buf_init((char *)u->head->data, (unsigned)u->head->len);
	u->req.data = u;
	r = uv_fs_write(u->d->loop, &u->req, u->fd, &buf, 1, (int64_t)u->written, on_write);
	if (r < 0) {
		fail(u, MSG_E_IO, uv_strerror(r));
		return;
	}
	u->busy = true;
}

static struct upload *find(struct session *s, uint32_t transfer)
{
	struct upload *u;

	for (u = s->uploads; u != NULL; u = u->next)
		if (u->transfer == transfer)
			return u;
	return NULL;
}

void upload_begin(struct session *s, const struct msg *m)
{
	const struct msg_upload_begin *b = &m->u.upload_begin;
	struct daemon *d = s->d;
	struct upload *u;
	struct trace *t;
	struct tproc *tp;
	int r;

	if (s->proc == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_FORBIDDEN, "register before uploading");
		return;
	}
	t = trace_find(d, b->trace_id);
	tp = t ? trace_tproc(t, s->proc->pid) : NULL;
	if (tp == NULL || t->finished || tp->state == MSG_TS_DONE ||
	    tp->state == MSG_TS_FAILED || tp->state == MSG_TS_CANCELLED) {
		conn_send_error(&s->conn, m->id, MSG_E_NOT_FOUND, "trace %s is not waiting for a "
		                "trace from pid %d", b->trace_id, (int)s->proc->pid);
		return;
	}
	/* One upload per process and trace: a second (another transfer, on this
	 * connection or another) would store bytes the trace's books never
	 * count, past limits.trace_bytes and retention.max_bytes. */
	if (tp->upload_begun) {
		conn_send_error(&s->conn, m->id, MSG_E_BUSY, "pid %d has already begun its upload for "
		                "trace %s; a process sends one file per trace", (int)s->proc->pid,
		                b->trace_id);
		return;
	}
	/* The file must be what the trace asked for: an agent too old to know
	 * memory_snapshot would send a trace, which a .pickle name would hide. */
	if ((b->format == MSG_FMT_MEMORY_SNAPSHOT) != t->win.memory_snapshot) {
		char why[300];

		snprintf(why, sizeof(why), "%s", t->win.memory_snapshot ? "this process's agent "
		         "sent a trace, not the memory snapshot asked for: it is too old for "
		         "--memory-snapshot; update libgprof_agent and python/gprof_agent" :
		         "the agent sent a memory snapshot for a trace that asked for none");
		tp->upload_begun = true;
		trace_set_state(t, tp, MSG_TS_FAILED, why);
		conn_send_error(&s->conn, m->id, MSG_E_BAD_REQUEST, "%s", why);
		return;
	}
	if (find(s, (uint32_t)b->transfer) != NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_BAD_REQUEST, "transfer %lld is already open",
		                (long long)b->transfer);
		return;
	}
	u = calloc(1, sizeof(*u));
	if (u == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_INTERNAL, "out of memory");
		return;
	}
	u->d = d;
	u->s = s;
	u->fd = -1;
	u->transfer = (uint32_t)b->transfer;
	u->pid = s->proc->pid;
	u->crc = (uint32_t)crc32(0L, Z_NULL, 0);
	snprintf(u->trace_id, sizeof(u->trace_id), "%s", b->trace_id);
	/* the host part is what the agent registered */
	store_file_name(tp->host[0] ? tp->host : d->host, u->pid, tp->rank, b->format, u->name,
	                sizeof(u->name));
	store_path(d, u->trace_id, u->name, u->tmp, sizeof(u->tmp));
	strncat(u->tmp, ".tmp", sizeof(u->tmp) - strlen(u->tmp) - 1);
	r = store_mkdir(d, u->trace_id);
	if (r == 0) {
		u->fd = open(u->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (u->fd < 0)
			r = -errno;
	}
	u->next = s->uploads;
	s->uploads = u;
	tp->upload_begun = true;
	trace_set_state(t, tp, MSG_TS_UPLOADING, NULL);
	if (r < 0) {
		char why[160];

		snprintf(why, sizeof(why), "cannot create the trace file: %s", strerror(-r));
		u->end_id = m->id;
		fail(u, r == -ENOSPC ? MSG_E_NO_SPACE : MSG_E_IO, why);
	}
}

int upload_chunk(struct session *s, const struct frame *f)
{
	struct upload *u = find(s, f->transfer);
	struct qchunk *q;

	if (u == NULL) {
		conn_send_error(&s->conn, 0, MSG_E_BAD_REQUEST, "chunk for transfer %u, which is not "
		                "open; closing the connection", f->transfer);
		conn_finish(&s->conn, "chunk for an unknown transfer");
		return -EPROTO;
	}
	if (u->failed)
		return 0; /* already answered; the rest of this transfer is dropped */
	if (f->offset != u->received) {
		fail(u, MSG_E_BAD_REQUEST, "chunks are not contiguous (a byte was lost or "
		     "repeated)");
		return 0;
	}
	if (u->received + f->len > s->d->cfg.max_trace_bytes) {
		fail(u, MSG_E_LIMIT, "the trace is larger than limits.trace_bytes");
		return 0;
	}
	q = malloc(sizeof(*q));
	if (q != NULL && f->buffered) {
		q->block = conn_steal_frame(&s->conn);
		q->data = f->data;
	} else if (q != NULL) {
		q->block = malloc(f->len);
		q->data = q->block;
		if (q->block != NULL)
			memcpy(q->block, f->data, f->len);
	}
	if (q == NULL || q->block == NULL) {
		free(q);
		fail(u, MSG_E_INTERNAL, "out of memory");
		return 0;
	}
	q->next = NULL;
	q->len = f->len;
	if (u->tail)
		u->tail->next = q;
	else
		u->head = q;
	u->tail = q;
	u->received += f->len;
	u->crc = (uint32_t)crc32(u->crc, f->data, (uInt)f->len);
	if (u->received - u->written > UPLOAD_QUEUE_MAX)
		conn_pause(&s->conn);
	pump(u);
	return 0;
}

void upload_end(struct session *s, const struct msg *m)
{
	const struct msg_upload_end *e = &m->u.upload_end;
	struct upload *u = find(s, (uint32_t)e->transfer);

	if (u == NULL) {
		conn_send_error(&s->conn, m->id, MSG_E_NOT_FOUND, "transfer %lld is not open",
		                (long long)e->transfer);
		return;
	}
	u->end_id = m->id;
	u->ending = true;
	if (u->failed) {
		conn_send_error(&s->conn, m->id, u->fail_code, "trace %s: %s", u->trace_id,
		                u->fail_reason);
		detach(u);
		return;
	}
	if ((uint64_t)e->bytes != u->received || (uint32_t)e->crc32 != u->crc) {
		char why[200];

		snprintf(why, sizeof(why), "received %llu bytes with CRC-32 %08x, the agent "
		         "sent %lld bytes with CRC-32 %08llx", (unsigned long long)u->received,
		         u->crc, (long long)e->bytes, (unsigned long long)e->crc32);
		fail(u, MSG_E_BAD_REQUEST, why);
		return;
	}
	pump(u);
}

void upload_session_gone(struct session *s)
{
	struct upload *u;

	while ((u = s->uploads) != NULL) {
		s->uploads = u->next;
		u->s = NULL;
		if (!u->failed) {
			struct trace *t;
			struct tproc *tp = find_tproc(u, &t);

			u->failed = true;
			u->d->cnt.uploads_failed++;
			if (tp != NULL)
				trace_set_state(t, tp, MSG_TS_FAILED,
				                "the agent disconnected during the upload");
		}
		release(u);
	}
}
