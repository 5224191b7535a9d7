/*
 * handler: the table of native request handlers (handler.c) and who may
 * send each message (the permission table of proto/PROTOCOL.md 3.1).
 * One handler function per message type, grouped in files by what they
 * touch: hsession.c (hello, auth), hagent.c (register, heartbeat,
 * capture_status, uploads), htrace.c (trace_*), hinfo.c (process_list,
 * daemon_status, metrics_query).
 */
#ifndef GPROFD_HANDLER_H
#define GPROFD_HANDLER_H

#include "conn.h"
#include "msg.h"

/* Routes a validated message: checks the session state (hello first,
 * auth where needed) and the sender's role, then calls its handler. */
void handler_dispatch(struct conn *c, const struct msg *m);

/* Sends reply r as one page of the n elements at v, from `from`:
 * page(r, v, n, from, k) points r's list at elements [from, from + k) and
 * sets its next_offset; k starts at max and is halved until the page fits
 * one frame (the client asks again from next_offset). `what` names the
 * list in the error sent when not even one element fits. */
typedef void handler_page_fn(struct msg *r, void *v, size_t n, size_t from, size_t k);
void handler_send_page(struct conn *c, struct msg *r, void *v, size_t n, size_t from,
                       size_t max, handler_page_fn *page, const char *what);

void hsession_hello(struct conn *c, const struct msg *m);
void hsession_auth(struct conn *c, const struct msg *m);
void hagent_register(struct conn *c, const struct msg *m);
void hagent_heartbeat(struct conn *c, const struct msg *m);
void hagent_capture_status(struct conn *c, const struct msg *m);
void htrace_start(struct conn *c, const struct msg *m);
void htrace_status(struct conn *c, const struct msg *m);
void htrace_cancel(struct conn *c, const struct msg *m);
void htrace_list(struct conn *c, const struct msg *m);
void htrace_download(struct conn *c, const struct msg *m);
void htrace_delete(struct conn *c, const struct msg *m);
void hinfo_process_list(struct conn *c, const struct msg *m);
void hinfo_daemon_status(struct conn *c, const struct msg *m);
void hinfo_metrics_query(struct conn *c, const struct msg *m);

#endif
