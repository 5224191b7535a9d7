/*
 * nvtx_none.c: built instead of nvtx.c where the NVTX v3 headers are
 * absent (no CUDA toolkit): the agent then records only what the gprof_*
 * API marks, and no NVTX injection entry point is exported.
 */
#include "agent.h"

const char *nvtx_domain_name(uint32_t domain)
{
	(void)domain;
	return NULL;
}
