/*
 * tlist: a host's stored traces, or its running ones, collected page by
 * page (tlist.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "tlist.h"

void tlist_ask(struct host *h, struct tlist *l, int64_t offset)
{
	struct msg m;

	msg_init(&m, MSG_TRACE_LIST, 0);
	m.u.trace_ref.trace_id = l->trace_id;
	m.u.trace_ref.job_id = l->job_id;
	m.u.trace_ref.offset = offset;
	m.u.trace_ref.running = l->running;
	host_send(h, &m);
}

static int add(struct tlist *l, const struct msg_trace_summary *t)
{
	struct tsum *more = realloc(l->v, (l->n + 1) * sizeof(*more)), *s;
	size_t i;

	if (more == NULL)
		return -ENOMEM;
	l->v = more;
	s = &l->v[l->n];
	memset(s, 0, sizeof(*s));
	s->files = calloc(t->files.n ? t->files.n : 1, sizeof(*s->files));
	s->procs = calloc(t->procs.n ? t->procs.n : 1, sizeof(*s->procs));
	if (s->files == NULL || s->procs == NULL) {
		free(s->files);
		free(s->procs);
		return -ENOMEM;
	}
	snprintf(s->id, sizeof(s->id), "%s", t->trace_id);
	s->created_us = t->created_us;
	s->uid = t->uid;
	s->state = t->state;
	s->deleted_files = -1;
	for (i = 0; i < t->files.n; i++) {
		const struct msg_trace_file *f = &t->files.v[i];
		struct tfile *d = &s->files[i];

		snprintf(d->name, sizeof(d->name), "%s", f->name);
		snprintf(d->job, sizeof(d->job), "%s", f->job_id ? f->job_id : "");
		d->bytes = f->bytes;
		d->pid = f->pid;
		d->rank = f->rank;
		s->bytes += (uint64_t)f->bytes;
	}
	s->nfiles = t->files.n;
	for (i = 0; i < t->procs.n; i++) {
		const struct msg_trace_proc *p = &t->procs.v[i];
		struct tproc_sum *d = &s->procs[i];

		snprintf(d->job, sizeof(d->job), "%s", p->job_id ? p->job_id : "");
		d->pid = p->pid;
		d->rank = p->rank;
		d->kind = p->kind;
		d->state = p->state;
	}
	s->nprocs = t->procs.n;
	l->n++;
	return 0;
}

int tlist_message(struct host *h, struct tlist *l, const struct msg *m)
{
	const struct msg_trace_list_reply *r = &m->u.trace_list_reply;
	size_t i;

	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return 1;
	}
	if (m->type != MSG_TRACE_LIST_REPLY)
		return -1;
	for (i = 0; i < r->traces.n; i++) {
		/* a daemon from before running lists ignores the key and answers
		 * with its stored traces: none of them is running */
		if (l->running && r->traces.v[i].state != MSG_TRACE_RUNNING) {
			l->old_daemon = true;
			continue;
		}
		if (add(l, &r->traces.v[i]) < 0) {
			host_fail(h, "out of memory");
			return 1;
		}
	}
	/* the next page, until the last (a trace stored or deleted between
	 * pages may be missed or listed twice: a list is a view); a daemon
	 * that answered running with its stored traces is not asked for more */
	if (r->next_offset > 0 && r->traces.n > 0 && !l->old_daemon) {
		tlist_ask(h, l, r->next_offset);
		return 0;
	}
	l->complete = true;
	return 1;
}

void tlist_free(struct tlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		free(l->v[i].files);
		free(l->v[i].procs);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int64_t tlist_parse_age(const char *s)
{
	char *end;
	double v;
	int64_t unit = 1000000;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno != 0 || v < 0)
		return -1;
	if (*end == 's')
		end++;
	else if (*end == 'm')
		unit = 60LL * 1000000, end++;
	else if (*end == 'h')
		unit = 3600LL * 1000000, end++;
	else if (*end == 'd')
		unit = 86400LL * 1000000, end++;
	if (*end != 0 || v * (double)unit > 9.0e18)
		return -1;
	return (int64_t)(v * (double)unit);
}

/* A trace's members: a running trace's processes, a stored one's files. */
static size_t members(const struct tsum *s)
{
	return s->nprocs ? s->nprocs : s->nfiles;
}

static const char *job_of(const struct tsum *s, size_t i)
{
	return s->nprocs ? s->procs[i].job : s->files[i].job;
}

static int64_t rank_of(const struct tsum *s, size_t i)
{
	return s->nprocs ? s->procs[i].rank : s->files[i].rank;
}

void tlist_jobs(const struct tsum *s, char *out, size_t size)
{
	size_t i, k, len = 0;

	out[0] = 0;
	for (i = 0; i < members(s); i++) {
		if (!job_of(s, i)[0])
			continue;
		for (k = 0; k < i; k++)
			if (strcmp(job_of(s, k), job_of(s, i)) == 0)
				break;
		if (k < i)
			continue;
		len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s",
		                        len ? "," : "", job_of(s, i));
		if (len >= size)
			break;
	}
	if (out[0] == 0)
		snprintf(out, size, "-");
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The known ranks of s, sorted and distinct, into v (room for members). */
static size_t known_ranks(const struct tsum *s, int64_t *v)
{
	size_t i, n = 0, k = 0;

	for (i = 0; i < members(s); i++)
		if (rank_of(s, i) >= 0)
			v[n++] = rank_of(s, i);
	qsort(v, n, sizeof(*v), cmp64);
	for (i = 0; i < n; i++)
		if (k == 0 || v[k - 1] != v[i])
			v[k++] = v[i];
	return k;
}

void tlist_ranks(const struct tsum *s, char *out, size_t size)
{
	int64_t *v = calloc(members(s) + 1, sizeof(*v));
	size_t i, j, n, len = 0;

	snprintf(out, size, "-");
	if (v == NULL)
		return;
	n = known_ranks(s, v);
	for (i = 0; i < n && len < size; i = j) {
		for (j = i + 1; j < n && v[j] == v[j - 1] + 1; j++)
			;
		if (j - i > 1)
			len += (size_t)snprintf(out + len, size - len, "%s%lld-%lld", len ? "," : "",
			                        (long long)v[i], (long long)v[j - 1]);
		else
			len += (size_t)snprintf(out + len, size - len, "%s%lld", len ? "," : "",
			                        (long long)v[i]);
	}
	free(v);
}

cJSON *tlist_json(const char *host, const struct tsum *s)
{
	cJSON *o = cJSON_CreateObject(), *jobs, *ranks, *files;
	int64_t *v = calloc(members(s) + 1, sizeof(*v));
	size_t i, n;

	cJSON_AddStringToObject(o, "host", host);
	cJSON_AddStringToObject(o, "trace_id", s->id);
	jobs = cJSON_AddArrayToObject(o, "jobs");
	for (i = 0; i < members(s); i++) {
		size_t k;

		if (!job_of(s, i)[0])
			continue;
		for (k = 0; k < i; k++)
			if (strcmp(job_of(s, k), job_of(s, i)) == 0)
				break;
		if (k == i)
			cJSON_AddItemToArray(jobs, cJSON_CreateString(job_of(s, i)));
	}
	jsonint_add(o, "created_us", s->created_us);
	jsonint_add(o, "processes", members(s));
	ranks = cJSON_AddArrayToObject(o, "ranks");
	n = v ? known_ranks(s, v) : 0;
	for (i = 0; i < n; i++)
		jsonint_add(ranks, NULL, v[i]);
	free(v);
	jsonint_add(o, "bytes", s->bytes);
	cJSON_AddStringToObject(o, "state", msg_trace_state_name(s->state));
	if (s->uid >= 0)
		jsonint_add(o, "uid", s->uid);
	else
		cJSON_AddNullToObject(o, "uid");
	files = cJSON_AddArrayToObject(o, "files");
	for (i = 0; i < s->nfiles; i++) {
		const struct tfile *f = &s->files[i];
		cJSON *j = cJSON_CreateObject();

		cJSON_AddStringToObject(j, "name", f->name);
		jsonint_add(j, "bytes", f->bytes);
		jsonint_add(j, "pid", f->pid);
		if (f->rank >= 0)
			jsonint_add(j, "rank", f->rank);
		else
			cJSON_AddNullToObject(j, "rank");
		if (f->job[0])
			cJSON_AddStringToObject(j, "job", f->job);
		else
			cJSON_AddNullToObject(j, "job");
		cJSON_AddItemToArray(files, j);
	}
	if (s->state != MSG_TRACE_RUNNING)
		return o;
	files = cJSON_AddArrayToObject(o, "procs");
	for (i = 0; i < s->nprocs; i++) {
		const struct tproc_sum *p = &s->procs[i];
		cJSON *j = cJSON_CreateObject();

		jsonint_add(j, "pid", p->pid);
		if (p->rank >= 0)
			jsonint_add(j, "rank", p->rank);
		else
			cJSON_AddNullToObject(j, "rank");
		cJSON_AddStringToObject(j, "kind", msg_kind_name(p->kind));
		cJSON_AddStringToObject(j, "state", msg_tstate_name(p->state));
		if (p->job[0])
			cJSON_AddStringToObject(j, "job", p->job);
		else
			cJSON_AddNullToObject(j, "job");
		cJSON_AddItemToArray(files, j);
	}
	return o;
}

void tlist_states(const struct tsum *s, char *out, size_t size)
{
	size_t counts[MSG_TS_SKIPPED + 1] = { 0 }, i, len = 0;
	int st;

	for (i = 0; i < s->nprocs; i++)
		if (s->procs[i].state >= 0 && s->procs[i].state <= MSG_TS_SKIPPED)
			counts[s->procs[i].state]++;
	out[0] = 0;
	for (st = 0; st <= MSG_TS_SKIPPED && len < size; st++)
		if (counts[st])
			len += (size_t)snprintf(out + len, size - len, "%s%zu %s", len ? ", " : "",
			                        counts[st], msg_tstate_name(st));
}

/* Whether s has a file of job (NULL: any). Checked here as well as by
 * the daemon: an older daemon ignores the job filter, and delete --job
 * must never take a trace that is not of the job. */
static bool of_job(const struct tsum *s, const char *job)
{
	size_t i;

	if (job == NULL)
		return true;
	for (i = 0; i < members(s); i++)
		if (strcmp(job_of(s, i), job) == 0)
			return true;
	return false;
}

/* Marks what the filters leave out; returns how many remain. */
size_t tlist_filter(struct tlist *l, char *const *ids, size_t nids, int64_t since_us,
                    int64_t older_us)
{
	struct timespec ts;
	int64_t now;
	size_t i, k, kept = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	for (i = 0; i < l->n; i++) {
		int64_t age = now - l->v[i].created_us;

		for (k = 0; k < nids && strcmp(ids[k], l->v[i].id) != 0; k++)
			;
		l->v[i].drop = (since_us >= 0 && age > since_us) || (older_us >= 0 && age < older_us) ||
		               (nids > 0 && k == nids) || !of_job(&l->v[i], l->job_id);
		kept += !l->v[i].drop;
	}
	return kept;
}
