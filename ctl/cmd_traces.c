/*
 * gprofctl traces [--job ID] [--since AGE] [--older-than AGE] [TRACE_ID]:
 * the traces of every host, newest first: first those still running (id,
 * jobs, processes and their states: what gprofctl cancel needs), then the
 * stored ones: id, jobs, when, how many processes, which ranks, size,
 * state. Each daemon shows a user only its own traces (root and its admin
 * group: all), so this is also where a lost trace id is found again.
 * Per host the running list is asked first, then the stored one.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fmt.h"
#include "jsonint.h"
#include "tlist.h"

static struct tlist proto_list; /* the filters every host's list copies */

/* A host's two lists: its traces in progress, then its stored ones. */
struct hlists {
	struct tlist run, stored;
};

static void ready(struct host *h)
{
	struct hlists *l = h->ud;

	tlist_ask(h, &l->run, 0);
}

static void message(struct host *h, const struct msg *m)
{
	struct hlists *l = h->ud;

	if (!l->run.complete) {
		if (tlist_message(h, &l->run, m) == 1 && h->error[0] == 0)
			tlist_ask(h, &l->stored, 0);
		return;
	}
	if (tlist_message(h, &l->stored, m) == 1 && h->error[0] == 0)
		host_done(h);
}

/* One row of the table. */
static void row(const char *host, const struct tsum *s)
{
	char jobs[128], ranks[64], t[32], sz[32], states[160];

	tlist_jobs(s, jobs, sizeof(jobs));
	tlist_ranks(s, ranks, sizeof(ranks));
	fmt_time(s->created_us, t, sizeof(t));
	fmt_bytes(s->bytes, sz, sizeof(sz));
	printf("%-20s %-32s %-14s %-19s %5zu %-10s %9s %s", host, s->id, jobs, t,
	       s->nprocs ? s->nprocs : s->nfiles, ranks, sz, msg_trace_state_name(s->state));
	if (s->state == MSG_TRACE_RUNNING) {
		tlist_states(s, states, sizeof(states));
		printf(" (%s)", states);
	}
	printf("\n");
}

static void failed(struct host *h, const char *why)
{
	(void)h;
	(void)why;
}

int cmd_traces(struct opts *o, int argc, char **argv)
{
	static const struct option topts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "since", required_argument, NULL, 's' },
		{ "older-than", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct client_ops ops = { ready, message, NULL, failed, NULL };
	int64_t since_us = -1, older_us = -1;
	size_t i, k, ok = 0, shown = 0, old = 0;
	struct client cl;
	struct hlists *ls;
	int c, code;

	memset(&proto_list, 0, sizeof(proto_list));
	while ((c = getopt_long(argc, argv, "h", topts, NULL)) != -1) {
		if (c == 'j')
			proto_list.job_id = optarg;
		else if (c == 's' || c == 'o') {
			int64_t v = tlist_parse_age(optarg);

			if (v < 0) {
				fprintf(stderr, "gprofctl traces: --%s %s is not an age: give seconds or "
				        "a number with s, m, h or d (30m, 7d)\n",
				        c == 's' ? "since" : "older-than", optarg);
				return EXIT_USAGE;
			}
			*(c == 's' ? &since_us : &older_us) = v;
		} else if (c == 'h') {
			printf("usage: gprofctl [GLOBAL OPTIONS] traces [--job ID] [--since AGE]\n"
			       "                [--older-than AGE] [TRACE_ID]\n"
			       "Lists the traces of every host, newest first: first those running\n"
			       "(state running, with their processes' states; gprofctl cancel\n"
			       "TRACE_ID ends one), then the stored ones: trace id, jobs, when it was\n"
			       "taken, processes, ranks, size and state. AGE is seconds or\n"
			       "a number with s, m, h or d: --since 2h shows the last two hours,\n"
			       "--older-than 7d what is older than a week. You see your own traces;\n"
			       "root and the daemon's admin group see all. Get one back with\n"
			       "gprofctl fetch TRACE_ID, remove it with gprofctl delete TRACE_ID.\n");
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	if (optind < argc - 1) {
		fprintf(stderr, "gprofctl traces: unexpected argument \"%s\"\n", argv[optind + 1]);
		return EXIT_USAGE;
	}
	if (optind == argc - 1)
		proto_list.trace_id = argv[optind];
	if (o->timeout_s == 0)
		o->timeout_s = 30;
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	ls = calloc(cl.n, sizeof(*ls));
	if (ls == NULL) {
		client_deinit(&cl);
		return EXIT_FAILED;
	}
	for (i = 0; i < cl.n; i++) {
		ls[i].run = ls[i].stored = proto_list;
		ls[i].run.running = true;
		cl.hosts[i].ud = &ls[i];
	}
	client_run(&cl);
	for (i = 0; i < cl.n; i++) {
		ok += ls[i].stored.complete && !cl.hosts[i].error[0];
		shown += tlist_filter(&ls[i].run, NULL, 0, since_us, older_us);
		shown += tlist_filter(&ls[i].stored, NULL, 0, since_us, older_us);
		old += ls[i].run.old_daemon;
	}
	code = ok == cl.n ? EXIT_OK : ok == 0 ? EXIT_USAGE : EXIT_FAILED;
	if (o->json) {
		cJSON *root = cJSON_CreateObject(), *hosts = cJSON_AddArrayToObject(root, "hosts");
		cJSON *arr = cJSON_AddArrayToObject(root, "traces");
		char *text;

		for (i = 0; i < cl.n; i++) {
			cJSON *h = cJSON_CreateObject();

			cJSON_AddStringToObject(h, "host", cl.hosts[i].label);
			if (cl.hosts[i].error[0])
				cJSON_AddStringToObject(h, "error", cl.hosts[i].error);
			/* false: a daemon too old to list its running traces */
			cJSON_AddBoolToObject(h, "running_listed", !ls[i].run.old_daemon);
			cJSON_AddItemToArray(hosts, h);
			for (k = 0; k < ls[i].run.n; k++)
				if (!ls[i].run.v[k].drop)
					cJSON_AddItemToArray(arr, tlist_json(cl.hosts[i].label,
					                                     &ls[i].run.v[k]));
			for (k = 0; k < ls[i].stored.n; k++)
				if (!ls[i].stored.v[k].drop)
					cJSON_AddItemToArray(arr, tlist_json(cl.hosts[i].label,
					                                     &ls[i].stored.v[k]));
		}
		jsonint_add(root, "exit", code);
		text = cJSON_Print(root);
		printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	} else {
		printf("%-20s %-32s %-14s %-19s %5s %-10s %9s %s\n", "HOST", "TRACE", "JOB", "TAKEN",
		       "PROCS", "RANKS", "SIZE", "STATE");
		for (i = 0; i < cl.n; i++) {
			if (cl.hosts[i].error[0])
				printf("%-20s %s\n", cl.hosts[i].label, cl.hosts[i].error);
			for (k = 0; k < ls[i].run.n; k++)
				if (!ls[i].run.v[k].drop)
					row(cl.hosts[i].label, &ls[i].run.v[k]);
			for (k = 0; k < ls[i].stored.n; k++)
				if (!ls[i].stored.v[k].drop)
					row(cl.hosts[i].label, &ls[i].stored.v[k]);
		}
		if (old > 0)
			printf("(%zu host%s run%s a gprofd too old to list its running traces)\n", old,
			       old == 1 ? "" : "s", old == 1 ? "s" : "");
		if (shown == 0 && ok > 0)
			printf("(no trace%s that you may see)\n",
			       proto_list.job_id || proto_list.trace_id || since_us >= 0 ||
			       older_us >= 0 ? " matches" : "");
	}
	for (i = 0; i < cl.n; i++) {
		tlist_free(&ls[i].run);
		tlist_free(&ls[i].stored);
	}
	free(ls);
	client_deinit(&cl);
	return code;
}
