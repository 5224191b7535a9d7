/*
 * download: streams a stored trace file to a client: trace_download_reply,
 * chunk frames, download_end (proto/PROTOCOL.md section 5).
 *
 * Data flow: read 1 MiB with uv_fs_read (thread pool) -> one chunk frame
 * -> conn_send. The next read starts only when the connection's write
 * queue is below DOWNLOAD_AHEAD, so a slow client holds at most that much
 * of the file in memory.
 *
 * Ownership: a session has at most one download (s->download). When the
 * session goes (download_session_gone, from bus.c), the download is
 * detached and freed once its in-flight read has come back. Called by
 * htrace.c (start) and bus.c (a write completed, the session's end).
 */
#ifndef GPROFD_DOWNLOAD_H
#define GPROFD_DOWNLOAD_H

#include "msg.h"
#include "session.h"

#define DOWNLOAD_CHUNK (1u << 20)
#define DOWNLOAD_AHEAD (4u << 20)

/* Starts sending path (already checked: exists, caller may read it). */
void download_start(struct session *s, uint64_t id, const char *path, uint64_t offset);
/* Continues after a write completed. */
void download_pump(struct session *s);
/* s is going: detach its download. */
void download_session_gone(struct session *s);

#endif
