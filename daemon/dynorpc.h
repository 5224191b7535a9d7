/*
 * dynorpc: serves Dynolog's RPC on the daemon's sockets so the stock `dyno`
 * client works unchanged (proto/PROTOCOL.md section 7). A
 * setKinetOnDemandRequest becomes an ordinary trace (trace_create) whose
 * window comes from the Kineto config text; the reply is Dynolog's, with
 * gprofd's trace id added as "traceId". Called by bus.c for every JSON
 * frame of a Dynolog session (the first one makes it one).
 */
#ifndef GPROFD_DYNORPC_H
#define GPROFD_DYNORPC_H

#include <stddef.h>

#include "session.h"

void dynorpc_handle(struct session *s, const char *json, size_t len);

#endif
