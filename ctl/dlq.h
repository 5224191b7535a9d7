/*
 * dlq: a host's queue of files to download, one at a time per connection
 * (the daemon streams one download per connection): trace_download ->
 * trace_download_reply -> chunk frames -> download_end, each file through a
 * sink so only complete, verified files appear in the output directory.
 */
#ifndef GPROFCTL_DLQ_H
#define GPROFCTL_DLQ_H

#include "ctl.h"

struct dlitem {
	char trace_id[MSG_TRACE_ID_MAX + 1];
	char file[MSG_NAME_MAX + 1];
	char path[4096];       /* where it landed, once done */
	bool done, failed;
	char error[300];
	void *tag;             /* the command's pointer for this file */
};

struct dlq {
	const char *dir;       /* files go to <dir>/<trace_id>/<file> */
	struct dlitem *items;
	size_t n, cap, next;
	bool active;
	uint64_t req_id;
	struct sink sink;
	uint64_t bytes;        /* downloaded so far */
};

void dlq_add(struct dlq *q, const char *trace_id, const char *file, void *tag);
/* Starts the next download if none is running. */
void dlq_pump(struct host *h, struct dlq *q);
/* Handles a message that belongs to the queue; true when it did. */
bool dlq_message(struct host *h, struct dlq *q, const struct msg *m);
void dlq_chunk(struct host *h, struct dlq *q, const struct frame *f);
/* Nothing queued or running. */
bool dlq_idle(const struct dlq *q);
/* Fails what is left (the host failed). */
void dlq_abort(struct dlq *q, const char *why);
void dlq_free(struct dlq *q);

#endif
