/*
 * registry: see registry.h. A linked list: hosts have tens to a few
 * thousand traceable processes, and every operation on the list (match a
 * request, list processes) visits them all anyway.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "peer.h"
#include "registry.h"

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static void proc_free(struct proc *p)
{
	free(p->job_id);
	free(p->host);
	free(p->version);
	free(p->name);
	free(p);
}

/* Links p into the registry, counting what it holds (counters.h
 * proc_bytes: the struct and its names; what its back end holds for it,
 * which comes and goes, is not counted). */
static void link_proc(struct daemon *d, struct proc *p)
{
	p->bytes = sizeof(*p) + strlen(p->job_id) + strlen(p->host) + strlen(p->version) +
	           strlen(p->name) + 4;
	d->cnt.proc_bytes += p->bytes;
	p->next = d->procs;
	if (d->procs)
		d->procs->prev = p;
	d->procs = p;
	d->nprocs++;
}

int registry_add(struct daemon *d, const struct backend *be, struct conn *c, pid_t pid,
                 uid_t uid, const struct msg_register *r, struct proc **out)
{
	struct proc *p;
	size_t i;

	if (registry_find_live(d, pid, uid) != NULL)
		return -EEXIST;
	if (d->nprocs >= d->cfg.max_processes) {
		d->cnt.processes_refused++;
		return -ENOSPC;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->pid = pid;
	p->uid = uid;
	p->kind = be->kind;
	p->be = be;
	for (i = 0; i < r->ppids.n && i < PROC_PPIDS_MAX; i++)
		p->ppids[p->nppids++] = (int32_t)r->ppids.v[i];
	for (i = 0; i < r->gpus.n && i < PROC_GPUS_MAX; i++)
		p->gpus[p->ngpus++] = (int32_t)r->gpus.v[i];
	p->job_id = dup_or_empty(r->job_id);
	p->host = dup_or_empty(r->host ? r->host : d->host);
	p->version = dup_or_empty(r->version);
	p->name = dup_or_empty(r->name);
	if (!p->job_id || !p->host || !p->version || !p->name) {
		proc_free(p);
		return -ENOMEM;
	}
	p->rank = r->rank;
	p->local_rank = r->local_rank;
	p->world_size = r->world_size;
	p->caps = r->caps;
	p->registered_us = clock_now_us();
	p->start_time = peer_start_time(pid);
	p->conn = c;
	link_proc(d, p);
	*out = p;
	return 0;
}

int registry_add_client(struct daemon *d, const struct backend *be, pid_t pid, uid_t uid,
                        const char *job_id, const int32_t *ppids, int nppids,
                        struct proc **out)
{
	struct proc *p;
	int i;

	if (d->nprocs >= d->cfg.max_processes) {
		d->cnt.processes_refused++;
		return -ENOSPC;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -ENOMEM;
	p->pid = pid;
	p->uid = uid;
	p->kind = be->kind;
	p->be = be;
	for (i = 0; i < nppids && i < PROC_PPIDS_MAX; i++)
		p->ppids[p->nppids++] = ppids[i];
	p->job_id = dup_or_empty(job_id);
	p->host = strdup(d->host);
	p->version = strdup(be->name);
	p->name = strdup("");
	if (!p->job_id || !p->host || !p->version || !p->name) {
		proc_free(p);
		return -ENOMEM;
	}
	p->rank = p->local_rank = p->world_size = -1;
	p->registered_us = clock_now_us();
	p->start_time = peer_start_time(pid);
	link_proc(d, p);
	*out = p;
	return 0;
}

void registry_remove(struct daemon *d, struct proc *p)
{
	if (p->ref != NULL)
		*p->ref = NULL; /* its session lives on, unregistered */
	d->hooks.proc_gone(d, p);
	if (p->be->forget != NULL)
		p->be->forget(p);
	if (p->prev)
		p->prev->next = p->next;
	else
		d->procs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	d->nprocs--;
	d->cnt.proc_bytes -= p->bytes;
	proc_free(p);
}

struct proc *registry_find(struct daemon *d, pid_t pid)
{
	struct proc *p;

	for (p = d->procs; p != NULL; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

/* Has p's process exited? An agent's connection knows its process exactly
 * (SO_PEERPIDFD); otherwise the start time of whatever has the pid now
 * tells, to the clock tick. */
static bool proc_gone(const struct proc *p)
{
	int fd = p->conn != NULL ? conn_fileno(p->conn) : -1;
	int alive = -1;

	if (fd >= 0)
		alive = peer_unix_alive(fd);
	if (alive >= 0)
		return alive == 0;
	return p->start_time != 0 && peer_start_time(p->pid) != p->start_time;
}

struct proc *registry_find_live(struct daemon *d, pid_t pid, uid_t uid)
{
	struct proc *p = registry_find(d, pid);

	/* a process of another user with this pid: the registered one is
	 * gone, whatever a clock tick says */
	if (p == NULL || (p->uid == uid && !proc_gone(p)))
		return p;
	log_info("pid %d: the process that registered it has exited and the pid is now "
	         "another's; its registration is dropped", (int)pid);
	registry_remove(d, p); /* clears the session's p->ref */
	return NULL;
}

bool registry_match(const struct proc *p, const char *job_id,
                    const int64_t *pids, size_t npids)
{
	size_t i;
	int k;

	if (job_id != NULL && strcmp(p->job_id, job_id) != 0)
		return false;
	if (npids == 0 || (npids == 1 && pids[0] == 0))
		return true;
	for (i = 0; i < npids; i++) {
		if (pids[i] == p->pid)
			return true;
		for (k = 0; k < p->nppids; k++)
			if (pids[i] == p->ppids[k])
				return true;
	}
	return false;
}

static bool descends(const struct proc *q, pid_t pid)
{
	int i;

	for (i = 0; i < q->nppids; i++)
		if (q->ppids[i] == pid)
			return true;
	return false;
}

int64_t registry_step_now(const struct proc *p, int64_t now_us)
{
	int64_t since = now_us - p->heartbeat_us;

	if (!p->be->counts_steps || p->steps <= 0)
		return 0;
	if (p->median_step_us <= 0 || since <= 0)
		return p->steps;
	return p->steps + (since < 3000000 ? since : 3000000) / p->median_step_us;
}

bool registry_launcher(struct daemon *d, const struct proc *p, char *kids, size_t size)
{
	const struct proc *q;
	size_t len = 0;
	int n = 0;

	if (p->steps > 0)
		return false;
	for (q = d->procs; q != NULL; q = q->next) {
		/* only the user's own children: another's process is never a
		 * reason to skip this one */
		if (q == p || q->uid != p->uid || !descends(q, p->pid) ||
		    strcmp(q->job_id, p->job_id) != 0 ||
		    (q->rank == p->rank && q->steps == 0))
			continue;
		if (kids != NULL && len < size)
			len += (size_t)snprintf(kids + len, size - len, "%s%d", n ? " " : "pids ",
			                        (int)q->pid);
		n++;
	}
	return n > 0;
}

/* One process for a "nothing matched" hint: "pid 100 rank 0 agent". */
static size_t describe_proc(const struct proc *p, char *buf, size_t size)
{
	char rank[32] = "";

	if (p->rank >= 0)
		snprintf(rank, sizeof(rank), " rank %lld", (long long)p->rank);
	return (size_t)snprintf(buf, size, "pid %d%s %s", (int)p->pid, rank,
	                        msg_kind_name(p->kind));
}

void registry_describe(struct daemon *d, uid_t uid, bool admin, char *buf, size_t size)
{
	/* Group by job: at most 16 jobs named, then a count. */
	const char *jobs[16];
	int counts[16], njobs = 0, others = 0, visible = 0, hidden = 0, j;
	size_t len = 0;
	struct proc *p;

	for (p = d->procs; p != NULL; p = p->next) {
		if (!admin && p->uid != uid) {
			hidden++;
			continue;
		}
		visible++;
		for (j = 0; j < njobs; j++)
			if (strcmp(jobs[j], p->job_id) == 0)
				break;
		if (j < njobs)
			counts[j]++;
		else if (njobs < 16) {
			jobs[njobs] = p->job_id;
			counts[njobs++] = 1;
		} else
			others++;
	}
	buf[0] = 0;
	if (visible == 0) {
		/* what registers a process, so the empty answer says what to do */
		snprintf(buf, size, "no traceable process of yours is registered on this host%s; a "
		         "process registers when it runs with the agent (gprofctl launch -- COMMAND, "
		         "or CUDA_INJECTION64_PATH=<libgprof_agent.so> in its environment) or, for "
		         "PyTorch's own profiler, with KINETO_USE_DAEMON=1; gprofctl list shows what "
		         "is registered", hidden ? " (processes of other users are, but you may not "
		         "trace them)" : "");
		return;
	}
	len = (size_t)snprintf(buf, size, "registered on this host:");
	for (j = 0; j < njobs && len < size; j++) {
		int shown = 0;

		len += (size_t)snprintf(buf + len, size - len, "%s job %s: %d process%s (",
		                        j ? ";" : "", *jobs[j] ? jobs[j] : "(none)", counts[j],
		                        counts[j] == 1 ? "" : "es");
		for (p = d->procs; p != NULL && len < size; p = p->next) {
			if ((!admin && p->uid != uid) || strcmp(p->job_id, jobs[j]) != 0)
				continue;
			if (shown++ == 8) {
				len += (size_t)snprintf(buf + len, size - len, ", ...");
				break;
			}
			if (shown > 1)
				len += (size_t)snprintf(buf + len, size - len, ", ");
			if (len < size)
				len += describe_proc(p, buf + len, size - len);
		}
		if (len < size)
			len += (size_t)snprintf(buf + len, size - len, ")");
	}
	if (others && len < size)
		len += (size_t)snprintf(buf + len, size - len, "; %d more in other jobs (gprofctl "
		                        "list shows them)", others);
	/* the same words as above: whoever asked should learn why a job they
	 * named matched nothing, whatever of their own is registered */
	if (hidden && len < size)
		snprintf(buf + len, size - len, " (processes of other users are registered too, but "
		         "you may not trace them)");
}

void registry_info(struct daemon *d, const struct proc *p, struct msg_proc_info *info,
                   int64_t *ppids, int64_t *gpus)
{
	int i;

	msg_elem_init(MSG_ELEM_PROC_INFO, info);
	info->pid = p->pid;
	info->uid = p->uid;
	for (i = 0; i < p->nppids; i++)
		ppids[i] = p->ppids[i];
	info->ppids.v = ppids;
	info->ppids.n = (size_t)p->nppids;
	for (i = 0; i < p->ngpus; i++)
		gpus[i] = p->gpus[i];
	info->gpus.v = gpus;
	info->gpus.n = (size_t)p->ngpus;
	info->job_id = *p->job_id ? p->job_id : NULL;
	info->rank = p->rank;
	info->local_rank = p->local_rank;
	info->world_size = p->world_size;
	info->kind = p->kind;
	info->host = p->host;
	info->caps = p->caps;
	info->version = *p->version ? p->version : NULL;
	info->name = *p->name ? p->name : NULL;
	info->registered_us = p->registered_us;
	info->steps = p->steps;
	info->last_step_us = p->last_step_us;
	info->launcher = registry_launcher(d, p, NULL, 0);
	info->step_now = registry_step_now(p, clock_now_us());
}
