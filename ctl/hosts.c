/*
 * hosts: the hosts a command talks to. --host adds one, --hostfile reads
 * one per line (# comments), --slurm-job asks SLURM for a job's nodes:
 * `scontrol show hostnames` expands the node list (from SLURM_JOB_NODELIST
 * when it is this job's, else from `squeue -h -j JOB -o %N`), so gprofctl
 * never re-implements SLURM's host-list syntax.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

int hosts_parse(const char *spec, char *name, size_t size, int *port)
{
	const char *colon = strrchr(spec, ':'), *p = NULL;
	char *end;
	long v;

	*port = 0;
	if (colon != NULL && strchr(spec, ']') == NULL && strchr(spec, ':') == colon) {
		snprintf(name, size, "%.*s", (int)(colon - spec), spec);
		p = colon + 1;
	} else if (spec[0] == '[' && (colon = strstr(spec, "]:")) != NULL) {
		snprintf(name, size, "%.*s", (int)(colon - spec - 1), spec + 1);
		p = colon + 2;
	} else if (spec[0] == '[' && spec[strlen(spec) - 1] == ']')
		snprintf(name, size, "%.*s", (int)strlen(spec) - 2, spec + 1);
	else
		snprintf(name, size, "%s", spec);
	if (p == NULL)
		return 0;
	errno = 0;
	v = strtol(p, &end, 10);
	if (*p < '0' || *p > '9' || *end != 0 || errno != 0 || v < 1 || v > 65535)
		return -EINVAL;
	*port = (int)v;
	return 0;
}

int hosts_add(struct opts *o, const char *spec)
{
	const char **v;
	char name[256];
	int port;

	if (*spec == 0)
		return 0;
	/* a port that cannot be one is said now, not as a failure to connect */
	if (hosts_parse(spec, name, sizeof(name), &port) < 0 || name[0] == 0) {
		fprintf(stderr, "gprofctl: host \"%s\" is not HOST[:PORT] with a port from 1 to "
		        "65535 (IPv6: [ADDR]:PORT)\n", spec);
		return -EINVAL;
	}
	v = realloc(o->hosts, (o->nhosts + 1) * sizeof(*v));
	if (v == NULL)
		return -ENOMEM;
	o->hosts = v;
	o->hosts[o->nhosts] = strdup(spec);
	if (o->hosts[o->nhosts] == NULL)
		return -ENOMEM;
	o->nhosts++;
	return 0;
}

void hosts_free(struct opts *o)
{
	size_t i;

	for (i = 0; i < o->nhosts; i++)
		free((char *)o->hosts[i]);
	free(o->hosts);
	o->hosts = NULL;
	o->nhosts = 0;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
		*--e = 0;
	return s;
}

static int add_lines(struct opts *o, FILE *f)
{
	char line[512], *s;
	int n = 0;

	while (fgets(line, sizeof(line), f) != NULL) {
		s = trim(line);
		if (*s == 0 || *s == '#')
			continue;
		if (hosts_add(o, s) < 0)
			return -EINVAL;
		n++;
	}
	return n;
}

int hosts_from_file(struct opts *o, const char *path)
{
	FILE *f = fopen(path, "r");
	int n;

	if (f == NULL) {
		fprintf(stderr, "gprofctl: --hostfile %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = add_lines(o, f);
	fclose(f);
	if (n < 0)
		return -1;
	if (n == 0) {
		fprintf(stderr, "gprofctl: --hostfile %s names no host\n", path);
		return -1;
	}
	return 0;
}

/* Job ids are digits (and array suffixes like 123_4): nothing a shell
 * would interpret. */
static int valid_job(const char *job)
{
	const char *p;

	for (p = job; *p; p++)
		if (!((*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
			return 0;
	return *job != 0;
}

int hosts_from_slurm(struct opts *o, const char *job)
{
	const char *env_job = getenv("SLURM_JOB_ID"), *env_list = getenv("SLURM_JOB_NODELIST");
	char cmd[600], list[4096] = "";
	FILE *p;
	int n;

	if (!valid_job(job)) {
		fprintf(stderr, "gprofctl: --slurm-job %s is not a SLURM job id\n", job);
		return -1;
	}
	if (env_job && env_list && strcmp(env_job, job) == 0 &&
	    strspn(env_list, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,[]") ==
	    strlen(env_list))
		snprintf(list, sizeof(list), "%s", env_list);
	else {
		snprintf(cmd, sizeof(cmd), "squeue -h -j '%s' -o %%N 2>/dev/null", job);
		p = popen(cmd, "r");
		if (p == NULL || fgets(list, sizeof(list), p) == NULL) {
			if (p)
				pclose(p);
			fprintf(stderr, "gprofctl: --slurm-job %s: squeue knows no such running job "
			        "(is SLURM on this machine's PATH?)\n", job);
			return -1;
		}
		pclose(p);
		trim(list);
	}
	snprintf(cmd, sizeof(cmd), "scontrol show hostnames '%s' 2>/dev/null", list);
	p = popen(cmd, "r");
	if (p == NULL) {
		fprintf(stderr, "gprofctl: cannot run scontrol\n");
		return -1;
	}
	n = add_lines(o, p);
	if (pclose(p) != 0 || n <= 0) {
		fprintf(stderr, "gprofctl: --slurm-job %s: scontrol could not expand the node "
		        "list \"%s\"\n", job, list);
		return -1;
	}
	return 0;
}
