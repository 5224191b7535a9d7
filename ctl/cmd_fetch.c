/*
 * gprofctl fetch (TRACE_ID... | --job ID [--since AGE]) [--output-dir DIR]:
 * downloads stored traces again, from every host that has them, into
 * DIR/<trace-id>/. Each host first lists its stored traces (tlist: only
 * those the caller may see, with the job filter applied by the daemon),
 * then the files of those that match are downloaded one at a time.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "dlq.h"
#include "tlist.h"

struct fhost {
	struct tlist l;
	struct dlq q;
	bool listed;
};

static struct {
	char **ids;
	size_t nids;
	const char *job;
	int64_t since_us;
} F;

static void ready(struct host *h)
{
	struct fhost *f = h->ud;

	tlist_ask(h, &f->l, 0);
}

static void message(struct host *h, const struct msg *m)
{
	struct fhost *f = h->ud;
	size_t i, k;

	if (dlq_message(h, &f->q, m)) {
		if (dlq_idle(&f->q))
			host_done(h);
		return;
	}
	if (f->listed || tlist_message(h, &f->l, m) != 1 || h->error[0])
		return;
	f->listed = true;
	tlist_filter(&f->l, F.ids, F.nids, F.since_us, -1);
	for (i = 0; i < f->l.n; i++)
		for (k = 0; !f->l.v[i].drop && k < f->l.v[i].nfiles; k++)
			dlq_add(&f->q, f->l.v[i].id, f->l.v[i].files[k].name, &f->l.v[i].files[k]);
	if (f->q.n == 0) {
		host_done(h);
		return;
	}
	dlq_pump(h, &f->q);
}

static void chunk(struct host *h, const struct frame *fr)
{
	struct fhost *f = h->ud;

	dlq_chunk(h, &f->q, fr);
}

static void failed(struct host *h, const char *why)
{
	struct fhost *f = h->ud;

	dlq_abort(&f->q, why);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gprofctl [GLOBAL OPTIONS] fetch (TRACE_ID... | --job ID [--since AGE])\n"
	        "                [--output-dir DIR]\n"
	        "Downloads stored traces again from every host that has them, into\n"
	        "DIR/TRACE_ID/ (default ./traces): the traces named, or every trace of job\n"
	        "ID (taken within AGE: 30m, 2h, 7d). gprofctl traces lists what is stored.\n"
	        "Exit 0 when every file came, 1 when some did not, 2 when no host has a\n"
	        "matching trace, 3 usage error or no host reachable.\n");
}

int cmd_fetch(struct opts *o, int argc, char **argv)
{
	static const struct option fopts[] = {
		{ "output-dir", required_argument, NULL, 'o' },
		{ "job", required_argument, NULL, 'j' },
		{ "since", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct client_ops ops = { ready, message, chunk, failed, NULL };
	const char *outdir = "traces";
	size_t i, k, files = 0, bad = 0, reached = 0;
	cJSON *root = NULL, *hosts = NULL, *jf = NULL;
	struct client cl;
	struct fhost *hs;
	int c, code;

	memset(&F, 0, sizeof(F));
	F.since_us = -1;
	while ((c = getopt_long(argc, argv, "h", fopts, NULL)) != -1) {
		if (c == 'o')
			outdir = optarg;
		else if (c == 'j')
			F.job = optarg;
		else if (c == 's') {
			F.since_us = tlist_parse_age(optarg);
			if (F.since_us < 0) {
				fprintf(stderr, "gprofctl fetch: --since %s is not an age: give seconds or "
				        "a number with s, m, h or d (30m, 7d)\n", optarg);
				return EXIT_USAGE;
			}
		} else if (c == 'h') {
			usage(stdout);
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	F.ids = argv + optind;
	F.nids = (size_t)(argc - optind);
	if ((F.nids == 0) == (F.job == NULL)) {
		fprintf(stderr, "gprofctl fetch: name the traces: one or more trace ids, or --job ID "
		        "(gprofctl traces lists the stored ones)\n");
		return EXIT_USAGE;
	}
	if (o->timeout_s == 0)
		o->timeout_s = 600;
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	hs = calloc(cl.n, sizeof(*hs));
	if (hs == NULL) {
		client_deinit(&cl);
		return EXIT_FAILED;
	}
	for (i = 0; i < cl.n; i++) {
		hs[i].q.dir = outdir;
		hs[i].l.job_id = F.job;
		hs[i].l.trace_id = F.nids == 1 ? F.ids[0] : NULL;
		cl.hosts[i].ud = &hs[i];
	}
	client_run(&cl);
	if (o->json) {
		root = cJSON_CreateObject();
		cJSON_AddStringToObject(root, "output_dir", outdir);
		hosts = cJSON_AddArrayToObject(root, "hosts");
		jf = cJSON_AddArrayToObject(root, "files");
	}
	for (i = 0; i < cl.n; i++) {
		const char *label = cl.hosts[i].label;

		if (hs[i].listed)
			reached++;
		if (o->json) {
			cJSON *h = cJSON_CreateObject();

			cJSON_AddStringToObject(h, "host", label);
			if (!hs[i].listed)
				cJSON_AddStringToObject(h, "error", cl.hosts[i].error);
			cJSON_AddItemToArray(hosts, h);
		} else if (!hs[i].listed)
			printf("  %-20s %s\n", label, cl.hosts[i].error);
		for (k = 0; k < hs[i].q.n; k++) {
			const struct dlitem *it = &hs[i].q.items[k];
			const struct tfile *tf = it->tag;

			files++;
			bad += !it->done;
			if (o->json) {
				cJSON *j = cJSON_CreateObject();

				cJSON_AddStringToObject(j, "host", label);
				cJSON_AddStringToObject(j, "trace_id", it->trace_id);
				cJSON_AddStringToObject(j, "file", it->file);
				if (tf->rank >= 0)
					jsonint_add(j, "rank", tf->rank);
				else
					cJSON_AddNullToObject(j, "rank");
				if (it->done)
					cJSON_AddStringToObject(j, "path", it->path);
				else
					cJSON_AddStringToObject(j, "error", it->error);
				cJSON_AddItemToArray(jf, j);
			} else if (it->done)
				printf("  %-20s %s\n", label, it->path);
			else
				printf("  %-20s %s FAILED: %s\n", label, it->file, it->error);
		}
	}
	code = reached == 0 ? EXIT_USAGE : bad || reached < cl.n ? EXIT_FAILED :
	       files == 0 ? EXIT_NOMATCH : EXIT_OK;
	if (files == 0 && reached > 0 && !o->json) {
		if (F.job)
			fprintf(stderr, "gprofctl fetch: no host has a stored trace of job %s that you "
			        "may read%s (gprofctl traces lists what is stored)\n", F.job,
			        F.since_us >= 0 ? " taken that recently" : "");
		else
			fprintf(stderr, "gprofctl fetch: no host has trace%s %s that you may read "
			        "(gprofctl traces lists what is stored; retention may have deleted "
			        "it)\n", F.nids > 1 ? "s" : "", F.ids[0]);
	}
	if (o->json) {
		char *text;

		jsonint_add(root, "exit", code);
		text = cJSON_Print(root);
		printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	}
	for (i = 0; i < cl.n; i++) {
		dlq_free(&hs[i].q);
		tlist_free(&hs[i].l);
	}
	free(hs);
	client_deinit(&cl);
	return code;
}
