/*
 * ident: who a process is in its job (job id, rank, local rank, world
 * size), read from the environment variables launchers set: torchrun
 * (RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID), SLURM srun
 * (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_JOB_ID), Open MPI and
 * PMI. The agent reads its own environment (getenv); the daemon reads a
 * Kineto client's /proc/<pid>/environ. One list, one order of preference,
 * so both paths name a process the same way.
 */
#ifndef GPROF_IDENT_H
#define GPROF_IDENT_H

#include <stddef.h>
#include <stdint.h>

struct ident {
	char job_id[129];     /* "" when none (MSG_JOB_ID_MAX + 1) */
	int64_t rank, local_rank, world_size; /* -1 = unknown */
};

/* Looks a variable up: its value, or NULL when unset. */
typedef const char *(*ident_get_fn)(const char *name, void *ctx);

/* Fills id from the variables get returns, first match of each list. */
void ident_read(struct ident *id, ident_get_fn get, void *ctx);

/* ident_read over an environment block as /proc/<pid>/environ holds it
 * (NUL-separated NAME=value entries, len bytes). */
void ident_read_environ(struct ident *id, const char *env, size_t len);

#endif
