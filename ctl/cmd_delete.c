/*
 * gprofctl delete (TRACE_ID... | --job ID [--older-than AGE]): removes
 * stored traces from every host that has them. Each host first lists the
 * stored traces the caller may see (tlist), then deletes those that match
 * with one trace_delete each. What a user may delete is what it may see:
 * its own traces (root and the daemon's admin group: all); the daemon
 * checks that again on every trace_delete.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fmt.h"
#include "jsonint.h"
#include "tlist.h"

struct dhost {
	struct tlist l;
	bool listed;
	size_t pending;
	uint64_t first_id;          /* the request id of the first trace_delete */
};

static struct {
	char **ids;
	size_t nids;
	const char *job;
	int64_t older_us;
} D;

static void ready(struct host *h)
{
	struct dhost *d = h->ud;

	tlist_ask(h, &d->l, 0);
}

/* One trace_delete per matching trace, in list order, so a reply's id
 * says which trace it answers. */
static void delete_matched(struct host *h, struct dhost *d)
{
	size_t i;

	d->first_id = h->next_id;
	for (i = 0; i < d->l.n; i++) {
		struct msg m;

		if (d->l.v[i].drop)
			continue;
		msg_init(&m, MSG_TRACE_DELETE, 0);
		m.u.trace_ref.trace_id = d->l.v[i].id;
		m.id = d->first_id + d->pending;
		h->next_id = m.id + 1;
		d->pending++;
		if (host_send(h, &m) < 0)
			return;
	}
	if (d->pending == 0)
		host_done(h);
}

static struct tsum *answered(struct dhost *d, uint64_t id)
{
	size_t i, k = 0;

	for (i = 0; i < d->l.n; i++) {
		if (d->l.v[i].drop)
			continue;
		if (d->first_id + k == id)
			return &d->l.v[i];
		k++;
	}
	return NULL;
}

static void message(struct host *h, const struct msg *m)
{
	struct dhost *d = h->ud;
	struct tsum *s;

	if (!d->listed) {
		if (tlist_message(h, &d->l, m) != 1 || h->error[0])
			return;
		d->listed = true;
		tlist_filter(&d->l, D.ids, D.nids, -1, D.older_us);
		delete_matched(h, d);
		return;
	}
	if ((m->type != MSG_TRACE_DELETE_REPLY && m->type != MSG_ERROR) ||
	    (s = answered(d, m->id)) == NULL)
		return;
	/* an error here is one trace gone meanwhile (retention): 0 files */
	s->deleted_files = m->type == MSG_ERROR ? 0 : m->u.trace_delete_reply.files;
	if (m->type == MSG_ERROR)
		s->bytes = 0;
	if (--d->pending == 0)
		host_done(h);
}

static void failed(struct host *h, const char *why)
{
	(void)h;
	(void)why;
}

int cmd_delete(struct opts *o, int argc, char **argv)
{
	static const struct option dopts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "older-than", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct client_ops ops = { ready, message, NULL, failed, NULL };
	size_t i, k, reached = 0, deleted = 0;
	cJSON *root = NULL, *hosts = NULL, *jd = NULL;
	uint64_t bytes = 0;
	struct client cl;
	struct dhost *hs;
	int c, code;

	memset(&D, 0, sizeof(D));
	D.older_us = -1;
	while ((c = getopt_long(argc, argv, "h", dopts, NULL)) != -1) {
		if (c == 'j')
			D.job = optarg;
		else if (c == 'o') {
			D.older_us = tlist_parse_age(optarg);
			if (D.older_us < 0) {
				fprintf(stderr, "gprofctl delete: --older-than %s is not an age: give "
				        "seconds or a number with s, m, h or d (30m, 7d)\n", optarg);
				return EXIT_USAGE;
			}
		} else if (c == 'h') {
			printf("usage: gprofctl [GLOBAL OPTIONS] delete (TRACE_ID... | --job ID\n"
			       "                [--older-than AGE])\n"
			       "Removes stored traces from every host that has them: the traces named,\n"
			       "or every trace of job ID (older than AGE: 30m, 2h, 7d). You delete your\n"
			       "own traces; root and the daemon's admin group may delete any.\n"
			       "Retention (gprofd's retention.max_age, max_bytes) still applies.\n"
			       "Exit 0 when something was deleted, 2 when no host had a match,\n"
			       "1 when some host failed, 3 usage error or no host reachable.\n");
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	D.ids = argv + optind;
	D.nids = (size_t)(argc - optind);
	if ((D.nids == 0) == (D.job == NULL)) {
		fprintf(stderr, "gprofctl delete: name the traces: one or more trace ids, or --job ID "
		        "(gprofctl traces lists the stored ones)\n");
		return EXIT_USAGE;
	}
	if (D.nids > 0 && D.older_us >= 0) {
		fprintf(stderr, "gprofctl delete: --older-than goes with --job\n");
		return EXIT_USAGE;
	}
	if (o->timeout_s == 0)
		o->timeout_s = 30;
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	hs = calloc(cl.n, sizeof(*hs));
	if (hs == NULL) {
		client_deinit(&cl);
		return EXIT_FAILED;
	}
	for (i = 0; i < cl.n; i++) {
		hs[i].l.job_id = D.job;
		hs[i].l.trace_id = D.nids == 1 ? D.ids[0] : NULL;
		cl.hosts[i].ud = &hs[i];
	}
	client_run(&cl);
	if (o->json) {
		root = cJSON_CreateObject();
		hosts = cJSON_AddArrayToObject(root, "hosts");
		jd = cJSON_AddArrayToObject(root, "deleted");
	}
	for (i = 0; i < cl.n; i++) {
		const char *label = cl.hosts[i].label;
		bool ok = hs[i].listed && hs[i].pending == 0 && !cl.hosts[i].error[0];

		reached += ok;
		if (o->json) {
			cJSON *h = cJSON_CreateObject();

			cJSON_AddStringToObject(h, "host", label);
			if (!ok)
				cJSON_AddStringToObject(h, "error", cl.hosts[i].error);
			cJSON_AddItemToArray(hosts, h);
		} else if (!ok)
			printf("  %-20s %s\n", label, cl.hosts[i].error);
		for (k = 0; k < hs[i].l.n; k++) {
			const struct tsum *s = &hs[i].l.v[k];
			char sz[32];

			if (s->drop || s->deleted_files <= 0)
				continue;
			deleted++;
			bytes += s->bytes;
			if (o->json) {
				cJSON *j = cJSON_CreateObject();

				cJSON_AddStringToObject(j, "host", label);
				cJSON_AddStringToObject(j, "trace_id", s->id);
				jsonint_add(j, "files", s->deleted_files);
				jsonint_add(j, "bytes", s->bytes);
				cJSON_AddItemToArray(jd, j);
			} else {
				fmt_bytes(s->bytes, sz, sizeof(sz));
				printf("  %-20s %s deleted (%lld file%s, %s)\n", label, s->id,
				       (long long)s->deleted_files, s->deleted_files == 1 ? "" : "s", sz);
			}
		}
	}
	code = reached == 0 ? EXIT_USAGE : reached < cl.n ? EXIT_FAILED :
	       deleted == 0 ? EXIT_NOMATCH : EXIT_OK;
	if (o->json) {
		char *text;

		jsonint_add(root, "traces", deleted);
		jsonint_add(root, "bytes", bytes);
		jsonint_add(root, "exit", code);
		text = cJSON_Print(root);
		printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	} else if (deleted == 0 && reached > 0)
		fprintf(stderr, "gprofctl delete: no host has a stored trace %s%s that you may "
		        "delete (gprofctl traces lists yours)\n", D.job ? "of job " : "",
		        D.job ? D.job : D.ids[0]);
	for (i = 0; i < cl.n; i++)
		tlist_free(&hs[i].l);
	free(hs);
	client_deinit(&cl);
	return code;
}
