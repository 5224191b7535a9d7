/*
 * hpage: one reply whose list may not fit a frame, sent as a page the
 * client asks the rest of (next_offset). Used by the list handlers
 * (htrace.c, hinfo.c).
 *
 * Floor: a leaf of the API layer, below every handler file; it sends on
 * the session's conn and calls nothing above it (handler.c's table calls
 * the handlers, the handlers call this: no file of the layer calls back
 * into one that calls it, .ci/symbol-cycles.py).
 */
#ifndef GPROFD_HPAGE_H
#define GPROFD_HPAGE_H

#include <stddef.h>

#include "msg.h"
#include "session.h"

/* Sends reply r as one page of the n elements at v, from `from`:
 * page(r, v, n, from, k) points r's list at elements [from, from + k) and
 * sets its next_offset; k starts at max and is halved until the page fits
 * one frame (the client asks again from next_offset). `what` names the
 * list in the error sent when not even one element fits. */
typedef void hpage_fn(struct msg *r, void *v, size_t n, size_t from, size_t k);
void hpage_send(struct session *s, struct msg *r, void *v, size_t n, size_t from,
                size_t max, hpage_fn *page, const char *what);

#endif
