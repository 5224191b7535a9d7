/*
 * gprofctl list: the traceable processes on every host: host, pid, uid,
 * job, rank, kind, name. --job narrows to one job.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "ctl.h"

struct lproc {
	int64_t pid, uid, rank, world, steps;
	int kind;
	bool launcher;
	char job[MSG_JOB_ID_MAX + 1], name[64];
};

struct lhost {
	bool ok;
	size_t n;
	struct lproc *procs;
};

static const char *job_filter;

/* One page of the list, from offset (a long list comes in pages). */
static void ask(struct host *h, int64_t offset)
{
	struct msg m;

	msg_init(&m, MSG_PROCESS_LIST, 0);
	m.u.process_list.job_id = job_filter;
	m.u.process_list.offset = offset;
	host_send(h, &m);
}

static void ready(struct host *h)
{
	ask(h, 0);
}

static void message(struct host *h, const struct msg *m)
{
	struct lhost *l = h->ud;
	size_t i;

	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return;
	}
	if (m->type != MSG_PROCESS_LIST_REPLY)
		return;
	{
		size_t add = m->u.process_list_reply.procs.n;
		struct lproc *more = realloc(l->procs, (l->n + add + 1) * sizeof(*more));

		if (more == NULL) {
			host_fail(h, "out of memory");
			return;
		}
		l->procs = more;
		for (i = 0; i < add; i++) {
			const struct msg_proc_info *p = &m->u.process_list_reply.procs.v[i];
			struct lproc *q = &l->procs[l->n + i];

			q->pid = p->pid;
			q->uid = p->uid;
			q->rank = p->rank;
			q->world = p->world_size;
			q->steps = p->steps;
			q->launcher = p->launcher;
			q->kind = p->kind;
			snprintf(q->job, sizeof(q->job), "%s", p->job_id ? p->job_id : "-");
			snprintf(q->name, sizeof(q->name), "%s", p->name ? p->name : "-");
		}
		l->n += add;
	}
	/* the next page, until the last (processes that came or went between
	 * pages may be missed or listed twice: a list is a view, not a snapshot) */
	if (m->u.process_list_reply.next_offset > 0 && m->u.process_list_reply.procs.n > 0) {
		ask(h, m->u.process_list_reply.next_offset);
		return;
	}
	l->ok = true;
	host_done(h);
}

static void failed(struct host *h, const char *why)
{
	(void)h;
	(void)why;
}

int cmd_list(struct opts *o, int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct client_ops ops = { ready, message, NULL, failed, NULL };
	struct client cl;
	struct lhost *hs;
	size_t i, k, ok = 0, total = 0;
	int c, code;

	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		if (c == 'j')
			job_filter = optarg;
		else if (c == 'h') {
			printf("usage: gprofctl [GLOBAL OPTIONS] list [--job ID]\n"
			       "Prints the traceable processes of every host: host, pid, uid, job,\n"
			       "rank/world size, kind (agent or kineto), iterations seen, name, and a\n"
			       "note for launchers (a process that started other ranks of its job and\n"
			       "never steps: traces of the job leave it out). You see your own\n"
			       "processes; root and the daemon's admin group see all. Stored traces:\n"
			       "gprofctl traces.\n");
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	if (o->timeout_s == 0)
		o->timeout_s = 30;
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	hs = calloc(cl.n, sizeof(*hs));
	for (i = 0; i < cl.n; i++)
		cl.hosts[i].ud = &hs[i];
	client_run(&cl);
	for (i = 0; i < cl.n; i++)
		ok += hs[i].ok;
	code = ok == cl.n ? EXIT_OK : ok == 0 ? EXIT_USAGE : EXIT_FAILED;
	if (o->json) {
		cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "processes");
		cJSON *errs = cJSON_AddArrayToObject(root, "errors");
		cJSON *hosts = cJSON_AddArrayToObject(root, "hosts");
		char *text;

		for (i = 0; i < cl.n; i++) {
			cJSON *jh = cJSON_CreateObject();

			cJSON_AddStringToObject(jh, "host", cl.hosts[i].label);
			if (!hs[i].ok)
				cJSON_AddStringToObject(jh, "error", cl.hosts[i].error);
			cJSON_AddItemToArray(hosts, jh);
			if (!hs[i].ok) {
				cJSON *e = cJSON_CreateObject();

				cJSON_AddStringToObject(e, "host", cl.hosts[i].label);
				cJSON_AddStringToObject(e, "error", cl.hosts[i].error);
				cJSON_AddItemToArray(errs, e);
			}
			for (k = 0; k < hs[i].n; k++) {
				const struct lproc *p = &hs[i].procs[k];
				cJSON *j = cJSON_CreateObject();

				cJSON_AddStringToObject(j, "host", cl.hosts[i].label);
				jsonint_add(j, "pid", p->pid);
				jsonint_add(j, "uid", p->uid);
				if (p->job[0] && strcmp(p->job, "-") != 0)
					cJSON_AddStringToObject(j, "job", p->job);
				else
					cJSON_AddNullToObject(j, "job");
				/* unknown: null, never -1 (gprofctl(1), JSON output) */
				if (p->rank >= 0)
					jsonint_add(j, "rank", p->rank);
				else
					cJSON_AddNullToObject(j, "rank");
				if (p->world > 0)
					jsonint_add(j, "world_size", p->world);
				else
					cJSON_AddNullToObject(j, "world_size");
				cJSON_AddStringToObject(j, "kind", msg_kind_name(p->kind));
				cJSON_AddStringToObject(j, "role", p->launcher ? "launcher" : "traced");
				jsonint_add(j, "steps", p->steps);
				cJSON_AddStringToObject(j, "name", p->name);
				cJSON_AddItemToArray(arr, j);
			}
		}
		jsonint_add(root, "exit", code);
		text = cJSON_Print(root);
		printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	} else {
		printf("%-20s %8s %6s %-14s %7s %-7s %8s %-16s %s\n", "HOST", "PID", "UID", "JOB",
		       "RANK", "KIND", "STEPS", "NAME", "NOTE");
		for (i = 0; i < cl.n; i++) {
			if (!hs[i].ok)
				printf("%-20s %s\n", cl.hosts[i].label, cl.hosts[i].error);
			for (k = 0; k < hs[i].n; k++) {
				const struct lproc *p = &hs[i].procs[k];

				char rank[32] = "-";

				if (p->rank >= 0 && p->world > 0)
					snprintf(rank, sizeof(rank), "%lld/%lld", (long long)p->rank,
					         (long long)p->world);
				else if (p->rank >= 0)
					snprintf(rank, sizeof(rank), "%lld", (long long)p->rank);
				printf("%-20s %8lld %6lld %-14s %7s %-7s %8lld %-16s %s\n",
				       cl.hosts[i].label, (long long)p->pid, (long long)p->uid, p->job, rank,
				       msg_kind_name(p->kind), (long long)p->steps, p->name,
				       p->launcher ? "launcher: not traced by job" : "");
			}
			total += hs[i].n;
		}
		if (total == 0)
			printf("(no traceable process%s)\n", job_filter ? " of that job" : "");
	}
	for (i = 0; i < cl.n; i++)
		free(hs[i].procs);
	free(hs);
	client_deinit(&cl);
	return code;
}
