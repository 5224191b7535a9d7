/*
 * handler: the table of native request handlers (handler.c) and who may
 * send each message (the permission table of proto/PROTOCOL.md 3.1).
 * One handler function per message type, grouped in files by what they
 * touch: hsession.c (hello, auth), hagent.c (register, heartbeat,
 * capture_status; uploads are upload.c's), htrace.c (trace_*), hinfo.c
 * (process_list, daemon_status, metrics_query); the list replies go out
 * in pages through hpage.c. bus.c calls handler_dispatch with each
 * validated message of a session; the table calls the handler files and
 * none calls back (.ci/symbol-cycles.py).
 *
 * Ownership, the objects a handler meets (each file's header says more):
 * - conn (conn.h): the transport, embedded in its session; freed only in
 *   libuv's close callback, through the session. A handler sends on it
 *   (conn_send_msg, conn_send_error) and may finish or close it; it
 *   stays valid until the handler returns either way.
 * - session (session.h): owned by the bus (d->sessions), freed in its
 *   conn's close callback after bus.c has detached everything from it.
 * - upload (upload.h): owned by its session (s->uploads) until its
 *   session goes; then detached, failed, and freed by itself when its
 *   in-flight file operation comes back.
 * - download (download.h): at most one per session (s->download), the
 *   same way.
 * - proc (registry.h): the registry's; a session points at its own
 *   (s->proc), and the registry clears that pointer when it removes it.
 * A message handed to a handler is valid during the call only.
 */
#ifndef GPROFD_HANDLER_H
#define GPROFD_HANDLER_H

#include "msg.h"
#include "session.h"

/* Routes a validated message: checks the session state (hello first,
 * auth where needed) and the sender's role, then calls its handler. */
void handler_dispatch(struct session *s, const struct msg *m);

/* The handlers, one per message type, in the table of handler.c. */
void hsession_hello(struct session *s, const struct msg *m);
void hsession_auth(struct session *s, const struct msg *m);
void hagent_register(struct session *s, const struct msg *m);
void hagent_heartbeat(struct session *s, const struct msg *m);
void hagent_capture_status(struct session *s, const struct msg *m);
void htrace_start(struct session *s, const struct msg *m);
void htrace_status(struct session *s, const struct msg *m);
void htrace_cancel(struct session *s, const struct msg *m);
void htrace_list(struct session *s, const struct msg *m);
void htrace_download(struct session *s, const struct msg *m);
void htrace_delete(struct session *s, const struct msg *m);
void hinfo_process_list(struct session *s, const struct msg *m);
void hinfo_daemon_status(struct session *s, const struct msg *m);
void hinfo_metrics_query(struct session *s, const struct msg *m);

#endif
