/*
 * agentcap: the capture back end (backend.h) of processes that run the
 * agent: a part starts with capture_start sent over the process's
 * connection and ends early with capture_cancel; the agent reports by
 * capture_status (hagent.c) and delivers its file by upload (upload.c).
 * It keeps no state of its own: the connection is the registry's
 * proc->conn.
 *
 * Floor: a back end, above the trace engine (it reads struct trace) and
 * the transport (conn.h); named only by hagent.c, which registers agents.
 */
#ifndef GPROFD_AGENTCAP_H
#define GPROFD_AGENTCAP_H

#include "backend.h"

extern const struct backend agentcap_backend;

#endif
