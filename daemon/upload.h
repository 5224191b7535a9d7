/*
 * upload: an agent's trace upload: upload_begin, chunk frames, upload_end
 * (proto/PROTOCOL.md section 5).
 *
 * Data flow: chunk frame -> checked (contiguous offset, size limit) ->
 * CRC-32 updated -> copied into a queue -> written by uv_fs_write on
 * libuv's thread pool, one write in flight, into <trace>/<name>.tmp ->
 * on upload_end, once the queue is empty and size and CRC match, renamed
 * to its final name and the process is done. When more than
 * UPLOAD_QUEUE_MAX bytes wait for the disk, the connection stops being
 * read (backpressure) until the queue drains.
 *
 * Ownership: a connection owns its uploads (c->uploads). An upload whose
 * connection closes is failed, but freed only when its in-flight file
 * operation has come back; until then it is detached (u->c == NULL).
 * Failures remove the partial file, so nothing half-written is ever stored.
 */
#ifndef GPROFD_UPLOAD_H
#define GPROFD_UPLOAD_H

#include "conn.h"
#include "frame.h"
#include "msg.h"

#define UPLOAD_QUEUE_MAX (16u << 20)

void upload_begin(struct conn *c, const struct msg *m);
void upload_end(struct conn *c, const struct msg *m);
/* A chunk frame from c: 0, or a negative code that closes c. */
int upload_chunk(struct conn *c, const struct frame *f);
/* c is closing: fail and detach its uploads. */
void upload_conn_gone(struct conn *c);

#endif
