/*
 * download: streams a stored trace file to a client: trace_download_reply,
 * chunk frames, download_end (proto/PROTOCOL.md section 5).
 *
 * Data flow: read 1 MiB with uv_fs_read (thread pool) -> one chunk frame
 * -> conn_send. The next read starts only when the connection's write
 * queue is below DOWNLOAD_AHEAD, so a slow client holds at most that much
 * of the file in memory.
 *
 * Ownership: a connection has at most one download (c->download). When
 * the connection closes, the download is detached and freed once its
 * in-flight read has come back.
 */
#ifndef GPROFD_DOWNLOAD_H
#define GPROFD_DOWNLOAD_H

#include "conn.h"
#include "msg.h"

#define DOWNLOAD_CHUNK (1u << 20)
#define DOWNLOAD_AHEAD (4u << 20)

/* Starts sending path (already checked: exists, caller may read it). */
void download_start(struct conn *c, uint64_t id, const char *path, uint64_t offset);
/* Continues after a write completed. */
void download_pump(struct conn *c);
void download_conn_gone(struct conn *c);

#endif
