/*
 * gprofctl cancel TRACE_ID: ends a running trace on every host that has
 * it. Each agent still capturing or waiting stops, discards what it
 * recorded, and its process ends "cancelled"; processes that had already
 * delivered keep their files.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "ctl.h"

struct chost {
	bool answered;
	int64_t cancelled;
};

static const char *cancel_id;

static void ready(struct host *h)
{
	struct msg m;

	msg_init(&m, MSG_TRACE_CANCEL, 0);
	m.u.trace_ref.trace_id = cancel_id;
	host_send(h, &m);
}

static void message(struct host *h, const struct msg *m)
{
	struct chost *c = h->ud;

	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return;
	}
	if (m->type != MSG_TRACE_CANCEL_REPLY)
		return;
	c->answered = true;
	c->cancelled = m->u.trace_cancel_reply.cancelled;
	host_done(h);
}

static void failed(struct host *h, const char *why)
{
	(void)h;
	(void)why;
}

int cmd_cancel(struct opts *o, int argc, char **argv)
{
	static const struct option copts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct client_ops ops = { ready, message, NULL, failed, NULL };
	size_t i, known = 0;
	int64_t total = 0;
	struct client cl;
	struct chost *hs;
	int c;

	while ((c = getopt_long(argc, argv, "h", copts, NULL)) != -1) {
		if (c == 'h') {
			printf("usage: gprofctl [GLOBAL OPTIONS] cancel TRACE_ID\n"
			       "Ends a running trace on every host: processes still waiting or\n"
			       "capturing stop and end cancelled; delivered files stay.\n"
			       "Exit 0 when some host knew the trace, 2 when none did.\n");
			return EXIT_OK;
		}
		return EXIT_USAGE;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "gprofctl cancel: name one trace id (gprofctl trace prints it "
		        "when it starts; gprofctl traces lists the stored ones)\n");
		return EXIT_USAGE;
	}
	cancel_id = argv[optind];
	if (o->timeout_s == 0)
		o->timeout_s = 30;
	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	hs = calloc(cl.n, sizeof(*hs));
	if (hs == NULL) {
		client_deinit(&cl);
		return EXIT_FAILED;
	}
	for (i = 0; i < cl.n; i++)
		cl.hosts[i].ud = &hs[i];
	client_run(&cl);
	for (i = 0; i < cl.n; i++) {
		if (hs[i].answered) {
			known++;
			total += hs[i].cancelled;
		}
		if (o->json)
			continue;
		if (hs[i].answered)
			printf("  %-20s %lld process%s cancelled\n", cl.hosts[i].label,
			       (long long)hs[i].cancelled, hs[i].cancelled == 1 ? "" : "es");
		else
			printf("  %-20s %s\n", cl.hosts[i].label, cl.hosts[i].error);
	}
	if (o->json) {
		cJSON *root = cJSON_CreateObject(), *hosts;
		char *text;

		cJSON_AddStringToObject(root, "trace_id", cancel_id);
		hosts = cJSON_AddArrayToObject(root, "hosts");
		for (i = 0; i < cl.n; i++) {
			cJSON *h = cJSON_CreateObject();

			cJSON_AddStringToObject(h, "host", cl.hosts[i].label);
			if (hs[i].answered)
				jsonint_add(h, "cancelled", hs[i].cancelled);
			else
				cJSON_AddStringToObject(h, "error", cl.hosts[i].error);
			cJSON_AddItemToArray(hosts, h);
		}
		jsonint_add(root, "known", known);
		jsonint_add(root, "cancelled", total);
		jsonint_add(root, "exit", known > 0 ? EXIT_OK : EXIT_NOMATCH);
		if ((text = cJSON_Print(root)) != NULL)
			printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	}
	free(hs);
	client_deinit(&cl);
	return known > 0 ? EXIT_OK : EXIT_NOMATCH;
}
