/*
 * gprofctl status: per host, the daemon's version, uptime, registered
 * processes, traces in progress and stored; then each of its parts
 * (components: sockets, metrics endpoint, Kineto's service, NVML, the
 * store) with its state and why. A part that is down makes the exit status
 * 4 (EXIT_DEGRADED) once every host answered: a daemon that runs on
 * without Kineto or /metrics is not a healthy one (issue 26). A daemon too
 * old to report its parts reports none, and is not counted as degraded.
 * Last, the traces running there that the caller may see (a trace_list
 * of running ones, asked once the status came): id, processes, states,
 * so a trace can be found and cancelled while it runs (issue 37).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "fmt.h"
#include "jsonint.h"
#include "tlist.h"

#define PARTS_MAX 16

struct part {
	char name[32], state[32];
	bool degraded;
	char detail[512];
};

struct row {
	bool ok;
	char version[64], commit[64];
	int64_t started_us, processes, pending, stored, stored_bytes, free_bytes;
	struct part parts[PARTS_MAX];
	size_t nparts;
	bool degraded;
	struct tlist run;      /* the traces running there, asked after the status */
};

static void ready(struct host *h)
{
	struct msg m;

	msg_init(&m, MSG_DAEMON_STATUS, 0);
	host_send(h, &m);
}

static void message(struct host *h, const struct msg *m)
{
	struct row *r = h->ud;
	size_t i;

	if (r->ok) {
		/* the running traces' list, page by page */
		if (tlist_message(h, &r->run, m) == 1 && h->error[0] == 0)
			host_done(h);
		return;
	}
	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return;
	}
	if (m->type != MSG_DAEMON_STATUS_REPLY)
		return;
	r->ok = true;
	snprintf(r->version, sizeof(r->version), "%s", m->u.daemon_status_reply.version);
	r->started_us = m->u.daemon_status_reply.started_us;
	r->processes = m->u.daemon_status_reply.processes;
	r->pending = m->u.daemon_status_reply.pending_traces;
	r->stored = m->u.daemon_status_reply.stored_traces;
	r->stored_bytes = m->u.daemon_status_reply.stored_bytes;
	r->free_bytes = m->u.daemon_status_reply.store_free_bytes;
	snprintf(r->commit, sizeof(r->commit), "%s",
	         m->u.daemon_status_reply.commit ? m->u.daemon_status_reply.commit : "");
	for (i = 0; i < m->u.daemon_status_reply.components.n && i < PARTS_MAX; i++) {
		const struct msg_component *c = &m->u.daemon_status_reply.components.v[i];
		struct part *p = &r->parts[r->nparts++];

		snprintf(p->name, sizeof(p->name), "%s", c->name);
		snprintf(p->state, sizeof(p->state), "%s", c->state);
		snprintf(p->detail, sizeof(p->detail), "%s", c->detail ? c->detail : "");
		p->degraded = c->degraded;
		r->degraded |= c->degraded;
	}
	r->run.running = true;
	tlist_ask(h, &r->run, 0);
}

/* The running traces, one line each: id, jobs, processes and their states. */
static void print_running(const struct row *r)
{
	char jobs[128], states[160], ranks[64];
	size_t k;

	if (r->run.old_daemon)
		printf("  %-8s %-7s %s\n", "traces", "-", "this gprofd is too old to list its "
		       "running traces");
	for (k = 0; k < r->run.n; k++) {
		const struct tsum *s = &r->run.v[k];

		tlist_jobs(s, jobs, sizeof(jobs));
		tlist_ranks(s, ranks, sizeof(ranks));
		tlist_states(s, states, sizeof(states));
		printf("  %-8s %-7s %s: job %s, %zu process%s (ranks %s): %s\n", "trace",
		       "running", s->id, jobs, s->nprocs, s->nprocs == 1 ? "" : "es", ranks, states);
	}
}

static void failed(struct host *h, const char *why)
{
	(void)h;
	(void)why;
}

/* --json: the parts as the daemon sent them */
static void add_parts(cJSON *h, const struct row *r)
{
	cJSON *arr = cJSON_AddArrayToObject(h, "components");
	size_t i;

	for (i = 0; i < r->nparts; i++) {
		cJSON *p = cJSON_CreateObject();

		cJSON_AddStringToObject(p, "name", r->parts[i].name);
		cJSON_AddStringToObject(p, "state", r->parts[i].state);
		cJSON_AddBoolToObject(p, "degraded", r->parts[i].degraded);
		cJSON_AddStringToObject(p, "detail", r->parts[i].detail);
		cJSON_AddItemToArray(arr, p);
	}
}

/* --json: the running traces (tlist_json's objects; null from a daemon
 * too old to list them) */
static void add_running(cJSON *h, const char *label, const struct row *r)
{
	cJSON *arr;
	size_t k;

	if (r->run.old_daemon) {
		cJSON_AddNullToObject(h, "running_traces");
		return;
	}
	arr = cJSON_AddArrayToObject(h, "running_traces");
	for (k = 0; k < r->run.n; k++)
		cJSON_AddItemToArray(arr, tlist_json(label, &r->run.v[k]));
}

/* How long the daemon has run, from its start (wall clock). */
static void uptime(int64_t started_us, char *out, size_t size)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	fmt_duration(ts.tv_sec - started_us / 1000000, out, size);
}

/* The store's line: where, how much, and the room left. */
static void store_detail(const struct row *r, const struct part *p, char *out, size_t size)
{
	char sz[32], fr[32] = "unknown";

	fmt_bytes((uint64_t)r->stored_bytes, sz, sizeof(sz));
	if (r->free_bytes >= 0)
		fmt_bytes((uint64_t)r->free_bytes, fr, sizeof(fr));
	snprintf(out, size, "%s: %lld trace%s, %s; %s free", p->detail, (long long)r->stored,
	         r->stored == 1 ? "" : "s", sz, fr);
}

static void print_parts(const struct row *r)
{
	char line[640];
	size_t i;

	for (i = 0; i < r->nparts; i++) {
		const struct part *p = &r->parts[i];

		if (strcmp(p->name, "store") == 0 && !p->degraded)
			store_detail(r, p, line, sizeof(line));
		else
			snprintf(line, sizeof(line), "%s", p->detail);
		printf("  %-8s %-7s %s\n", p->name, p->degraded ? "DOWN" : p->state, line);
	}
}

/* One line on stderr per degraded host, naming its parts that are down. */
static void say_degraded(const struct host *h, const struct row *r)
{
	size_t i, n = 0;

	fprintf(stderr, "gprofctl status: %s is degraded:", h->label);
	for (i = 0; i < r->nparts; i++)
		if (r->parts[i].degraded)
			fprintf(stderr, "%s %s", n++ ? "," : "", r->parts[i].name);
	fprintf(stderr, " down (see above)\n");
}

int cmd_status(struct opts *o, int argc, char **argv)
{
	static const struct client_ops ops = { ready, message, NULL, failed, NULL };
	struct client cl;
	struct row *rows;
	size_t i, ok = 0, degraded = 0;
	char up[32], sz[32];
	int code;

	if (argc > 1) {
		if (strcmp(argv[1], "--help") == 0) {
			printf("usage: gprofctl [GLOBAL OPTIONS] status\n"
			       "Prints, per host: daemon version, uptime, registered processes,\n"
			       "traces in progress, stored traces and their size (gprofctl traces\n"
			       "lists them); then each part of the daemon (unix, tcp, tls, metrics,\n"
			       "kineto, nvml, store): up, off, absent or DOWN, and why; then the\n"
			       "traces running there that you may see: id, job, processes and\n"
			       "their states (gprofctl cancel TRACE_ID ends one).\n"
			       "Exits 4 when a part of a daemon that answered is down.\n"
			       "With --json, one JSON object with a \"hosts\" array.\n");
			return EXIT_OK;
		}
		fprintf(stderr, "gprofctl status: unexpected argument \"%s\"\n", argv[1]);
		return EXIT_USAGE;
	}
	if (o->timeout_s == 0)
		o->timeout_s = 30;
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	rows = calloc(cl.n, sizeof(*rows));
	for (i = 0; i < cl.n; i++)
		cl.hosts[i].ud = &rows[i];
	client_run(&cl);
	for (i = 0; i < cl.n; i++) {
		ok += rows[i].ok;
		degraded += rows[i].ok && rows[i].degraded;
	}
	/* a host not answering is worse than one answering degraded */
	code = ok == cl.n ? (degraded ? EXIT_DEGRADED : EXIT_OK) : ok == 0 ? EXIT_USAGE : EXIT_FAILED;
	if (o->json) {
		cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "hosts");
		char *text;

		for (i = 0; i < cl.n; i++) {
			cJSON *h = cJSON_CreateObject();

			cJSON_AddStringToObject(h, "host", cl.hosts[i].label);
			if (rows[i].ok) {
				cJSON_AddStringToObject(h, "version", rows[i].version);
				jsonint_add(h, "started_us", rows[i].started_us);
				jsonint_add(h, "processes", rows[i].processes);
				jsonint_add(h, "pending_traces", rows[i].pending);
				jsonint_add(h, "stored_traces", rows[i].stored);
				jsonint_add(h, "stored_bytes", rows[i].stored_bytes);
				if (rows[i].commit[0])
					cJSON_AddStringToObject(h, "commit", rows[i].commit);
				if (rows[i].free_bytes >= 0)
					jsonint_add(h, "store_free_bytes", rows[i].free_bytes);
				cJSON_AddBoolToObject(h, "degraded", rows[i].degraded);
				add_parts(h, &rows[i]);
				add_running(h, cl.hosts[i].label, &rows[i]);
			} else
				cJSON_AddStringToObject(h, "error", cl.hosts[i].error);
			cJSON_AddItemToArray(arr, h);
		}
		jsonint_add(root, "exit", code);
		text = cJSON_Print(root);
		printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	} else {
		printf("%-24s %-8s %-8s %9s %7s %s\n", "HOST", "VERSION", "UPTIME", "PROCESSES",
		       "PENDING", "STORED");
		for (i = 0; i < cl.n; i++) {
			if (!rows[i].ok) {
				printf("%-24s %s\n", cl.hosts[i].label, cl.hosts[i].error);
				continue;
			}
			uptime(rows[i].started_us, up, sizeof(up));
			fmt_bytes((uint64_t)rows[i].stored_bytes, sz, sizeof(sz));
			printf("%-24s %-8s %-8s %9lld %7lld %lld (%s)\n", cl.hosts[i].label,
			       rows[i].version, up, (long long)rows[i].processes,
			       (long long)rows[i].pending, (long long)rows[i].stored, sz);
			print_parts(&rows[i]);
			print_running(&rows[i]);
		}
		for (i = 0; i < cl.n; i++)
			if (rows[i].ok && rows[i].degraded)
				say_degraded(&cl.hosts[i], &rows[i]);
	}
	for (i = 0; i < cl.n; i++)
		tlist_free(&rows[i].run);
	free(rows);
	client_deinit(&cl);
	return code;
}
