/*
 * upload: an agent's trace upload: upload_begin, chunk frames, upload_end
 * (proto/PROTOCOL.md section 5).
 *
 * Data flow: chunk frame -> checked (contiguous offset, size limit) ->
 * CRC-32 updated -> copied into a queue -> written by uv_fs_write on
 * libuv's thread pool, one write in flight, into <trace>/<name>.tmp ->
 * on upload_end, once the queue is empty and size and CRC match, fsync'd
 * (on the pool) -> handed to deliver.c, which renames it to its final
 * name and records it in the trace's manifest (store_record); only then
 * is it acknowledged: the reply (on_delivered, here), and the process
 * done (deliver.c).
 *
 * One upload per process and trace, ever (tproc.upload_begun): a second
 * upload_begin is refused, so every byte a process stores is its one file,
 * counted once (tproc.stored_bytes) within limits.trace_bytes. A file that
 * completes after its process's part ended is removed, not stored. When more than
 * UPLOAD_QUEUE_MAX bytes wait for the disk, the connection stops being
 * read (backpressure) until the queue drains.
 *
 * Ownership: a session owns its uploads (s->uploads). An upload whose
 * session goes (upload_session_gone, from bus.c) is failed, but freed
 * only when its in-flight file operation has come back; until then it is
 * detached (u->s == NULL); one whose agent goes while its manifest is
 * written is given up (deliver.h abandoned): its file is removed. Called
 * by the handler table (upload_begin, upload_end) and bus.c (chunks, the
 * session's end).
 * Failures remove the partial file, so nothing half-written is ever stored.
 */
#ifndef GPROFD_UPLOAD_H
#define GPROFD_UPLOAD_H

#include "frame.h"
#include "msg.h"
#include "session.h"

#define UPLOAD_QUEUE_MAX (16u << 20)

void upload_begin(struct session *s, const struct msg *m);
void upload_end(struct session *s, const struct msg *m);
/* A chunk frame from s: 0, or a negative code that stops reading s (it
 * is then finishing). */
int upload_chunk(struct session *s, const struct frame *f);
/* s is going: fail and detach its uploads. */
void upload_session_gone(struct session *s);

#endif
