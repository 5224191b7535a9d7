/*
 * ident: see ident.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ident.h"

static const char *const jobs[] = { "GPROF_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID",
                                    "PBS_JOBID", "LSB_JOBID", NULL };
static const char *const ranks[] = { "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                     "PMI_RANK", NULL };
static const char *const locals[] = { "LOCAL_RANK", "SLURM_LOCALID",
                                      "OMPI_COMM_WORLD_LOCAL_RANK", NULL };
static const char *const worlds[] = { "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
                                      "PMI_SIZE", NULL };

static int64_t first_int(const char *const *names, ident_get_fn get, void *ctx)
{
	for (; *names; names++) {
		const char *v = get(*names, ctx);
		char *end;
		long long x;

		if (v == NULL || !*v)
			continue;
		errno = 0;
		x = strtoll(v, &end, 10);
		if (errno == 0 && *end == '\0' && x >= 0 && x <= 16777216)
			return x;
	}
	return -1;
}

void ident_read(struct ident *id, ident_get_fn get, void *ctx)
{
	const char *const *j;

	id->job_id[0] = '\0';
	for (j = jobs; *j; j++) {
		const char *v = get(*j, ctx);

		if (v && *v && strlen(v) < sizeof(id->job_id)) {
			snprintf(id->job_id, sizeof(id->job_id), "%s", v);
			break;
		}
	}
	id->rank = first_int(ranks, get, ctx);
	id->local_rank = first_int(locals, get, ctx);
	id->world_size = first_int(worlds, get, ctx);
}

struct block { const char *env; size_t len; };

static const char *block_get(const char *name, void *ctx)
{
	const struct block *b = ctx;
	size_t n = strlen(name), i = 0;

	while (i < b->len) {
		const char *e = b->env + i;
		const char *nul = memchr(e, '\0', b->len - i);
		size_t elen = nul ? (size_t)(nul - e) : b->len - i;

		/* an unterminated last entry is cut off: not trusted */
		if (nul != NULL && elen > n && memcmp(e, name, n) == 0 && e[n] == '=')
			return e + n + 1;
		i += elen + 1;
	}
	return NULL;
}

void ident_read_environ(struct ident *id, const char *env, size_t len)
{
	struct block b = { env, len };

	ident_read(id, block_get, &b);
}
