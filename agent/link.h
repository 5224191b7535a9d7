/*
 * link.h: the agent thread (link.c): the daemon connection, the loop that
 * runs bursts (capture.c) and the heartbeats. agent.c starts it once per
 * process.
 */
#ifndef GPROF_AGENT_LINK_H
#define GPROF_AGENT_LINK_H

#include "state.h"

/* The agent thread's body (pthread_create); never returns. */
AGENT_HIDDEN void *link_main(void *arg);

#endif
