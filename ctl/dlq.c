/*
 * dlq: see dlq.h.
 */
#include <stdlib.h>
#include <string.h>

#include "dlq.h"

void dlq_add(struct dlq *q, const char *trace_id, const char *file, void *tag)
{
	struct dlitem *it;

	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 8;
		struct dlitem *v = realloc(q->items, cap * sizeof(*v));

		if (v == NULL)
			return;
		q->items = v;
		q->cap = cap;
	}
	it = &q->items[q->n++];
	memset(it, 0, sizeof(*it));
	snprintf(it->trace_id, sizeof(it->trace_id), "%s", trace_id);
	snprintf(it->file, sizeof(it->file), "%s", file);
	it->tag = tag;
}

void dlq_pump(struct host *h, struct dlq *q)
{
	struct msg m;

	if (q->active || q->next >= q->n)
		return;
	msg_init(&m, MSG_TRACE_DOWNLOAD, 0);
	m.u.trace_download.trace_id = q->items[q->next].trace_id;
	m.u.trace_download.file = q->items[q->next].file;
	q->active = true;
	if (host_send(h, &m) == 0)
		q->req_id = m.id;
}

static void item_failed(struct dlq *q, const char *why)
{
	struct dlitem *it = &q->items[q->next];

	it->failed = true;
	snprintf(it->error, sizeof(it->error), "%s", why);
	sink_abort(&q->sink);
	q->active = false;
	q->next++;
}

bool dlq_message(struct host *h, struct dlq *q, const struct msg *m)
{
	struct dlitem *it;
	char dir[4096], err[300];

	if (!q->active)
		return false;
	it = &q->items[q->next];
	if (m->type == MSG_ERROR && m->id == q->req_id) {
		item_failed(q, m->u.error.message);
		dlq_pump(h, q);
		return true;
	}
	if (m->type == MSG_TRACE_DOWNLOAD_REPLY && m->id == q->req_id) {
		snprintf(dir, sizeof(dir), "%s/%s", q->dir, it->trace_id);
		if (sink_open(&q->sink, dir, it->file, (uint32_t)m->u.trace_download_reply.transfer,
		              (uint64_t)m->u.trace_download_reply.bytes, err, sizeof(err)) < 0) {
			/* the daemon streams the file anyway: its chunks are dropped,
			 * and download_end moves on to the next file */
			it->failed = true;
			snprintf(it->error, sizeof(it->error), "%s", err);
			q->sink.transfer = (uint32_t)m->u.trace_download_reply.transfer;
		}
		return true;
	}
	if (m->type == MSG_DOWNLOAD_END && m->u.download_end.transfer == q->sink.transfer) {
		if (!it->failed) {
			if (sink_finish(&q->sink, &m->u.download_end, err, sizeof(err)) == 0) {
				it->done = true;
				snprintf(it->path, sizeof(it->path), "%s", q->sink.path);
			} else {
				it->failed = true;
				snprintf(it->error, sizeof(it->error), "%s", err);
			}
		}
		q->active = false;
		q->next++;
		dlq_pump(h, q);
		return true;
	}
	return false;
}

void dlq_chunk(struct host *h, struct dlq *q, const struct frame *f)
{
	struct dlitem *it;
	char err[300];

	(void)h;
	if (!q->active || f->transfer != q->sink.transfer)
		return;
	it = &q->items[q->next];
	if (it->failed || q->sink.f == NULL)
		return;
	if (sink_write(&q->sink, f, err, sizeof(err)) < 0) {
		it->failed = true;
		snprintf(it->error, sizeof(it->error), "%s", err);
		sink_abort(&q->sink);
		return;
	}
	q->bytes += f->len;
}

bool dlq_idle(const struct dlq *q)
{
	return !q->active && q->next >= q->n;
}

void dlq_abort(struct dlq *q, const char *why)
{
	sink_abort(&q->sink);
	for (; q->next < q->n; q->next++) {
		q->items[q->next].failed = true;
		snprintf(q->items[q->next].error, sizeof(q->items[q->next].error), "%s", why);
	}
	q->active = false;
}

void dlq_free(struct dlq *q)
{
	sink_abort(&q->sink);
	free(q->items);
	q->items = NULL;
	q->n = q->cap = q->next = 0;
}
