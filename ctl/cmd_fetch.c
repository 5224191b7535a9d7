/*
 * gprofctl fetch TRACE_ID: download a stored trace again, from every host
 * that has it, into <output-dir>/<trace-id>/.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "dlq.h"

struct fhost {
	bool listed;
	struct dlq q;
};

static const char *fetch_id;

static void ready(struct host *h)
{
	struct msg m;

	msg_init(&m, MSG_TRACE_LIST, 0);
	m.u.trace_ref.trace_id = fetch_id;
	host_send(h, &m);
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
	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return;
	}
	if (m->type != MSG_TRACE_LIST_REPLY)
		return;
	f->listed = true;
	for (i = 0; i < m->u.trace_list_reply.traces.n; i++)
		for (k = 0; k < m->u.trace_list_reply.traces.v[i].files.n; k++)
			dlq_add(&f->q, fetch_id, m->u.trace_list_reply.traces.v[i].files.v[k].name, NULL);
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

int cmd_fetch(struct opts *o, int argc, char **argv)
{
	static const struct option fopts[] = {
		{ "output-dir", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct client_ops ops = { ready, message, chunk, failed, NULL };
	const char *outdir = "traces";
	size_t i, k, files = 0, bad = 0, reached = 0;
	struct client cl;
	struct fhost *hs;
	int c;

	while ((c = getopt_long(argc, argv, "h", fopts, NULL)) != -1) {
		if (c == 'o')
			outdir = optarg;
		else if (c == 'h') {
			printf("usage: gprofctl [GLOBAL OPTIONS] fetch TRACE_ID [--output-dir DIR]\n"
			       "Downloads a stored trace again from every host that has it, into\n"
			       "DIR/TRACE_ID/ (default ./traces). Exit 2 when no host has it.\n");
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "gprofctl fetch: name one trace id (gprofctl status shows how many "
		        "are stored)\n");
		return EXIT_USAGE;
	}
	fetch_id = argv[optind];
	if (o->timeout_s == 0)
		o->timeout_s = 600;
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	hs = calloc(cl.n, sizeof(*hs));
	for (i = 0; i < cl.n; i++) {
		hs[i].q.dir = outdir;
		cl.hosts[i].ud = &hs[i];
	}
	client_run(&cl);
	for (i = 0; i < cl.n; i++) {
		if (hs[i].listed)
			reached++;
		else
			printf("  %-20s %s\n", cl.hosts[i].label, cl.hosts[i].error);
		for (k = 0; k < hs[i].q.n; k++) {
			const struct dlitem *it = &hs[i].q.items[k];

			files++;
			if (it->done)
				printf("  %-20s %s\n", cl.hosts[i].label, it->path);
			else {
				bad++;
				printf("  %-20s %s FAILED: %s\n", cl.hosts[i].label, it->file, it->error);
			}
		}
		dlq_free(&hs[i].q);
	}
	free(hs);
	client_deinit(&cl);
	if (files == 0 && reached > 0)
		fprintf(stderr, "gprofctl fetch: no host has trace %s (retention may have deleted "
		        "it)\n", fetch_id);
	return reached == 0 ? EXIT_USAGE : bad || reached < cl.n ? EXIT_FAILED :
	       files == 0 ? EXIT_NOMATCH : EXIT_OK;
}
