/*
 * gprofctl cancel TRACE_ID: ends a running trace on every host that has
 * it. Each agent still capturing or waiting stops, discards what it
 * recorded, and its process ends "cancelled"; processes that had already
 * delivered keep their files; the trace ends "cancelled" (and the
 * gprofctl trace waiting on it exits 5). Exit: 0 cancelled on some host
 * and every host answered; 1 a host could not be asked (it may still run
 * there); 2 nothing to cancel (no host has a running trace of that id you
 * may see: unknown there, or it had ended, which each line says).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "ctl.h"

struct chost {
	bool answered;     /* the daemon had the trace */
	bool unknown;      /* it had none that the caller may see */
	int64_t cancelled;
	int state;         /* the trace's state after the cancel (running: not said) */
	char why[512];     /* unknown: the daemon's words */
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

	if (m->type == MSG_ERROR && m->u.error.code == MSG_E_NOT_FOUND) {
		/* not a failure: this host has no such trace (others may) */
		c->unknown = true;
		snprintf(c->why, sizeof(c->why), "%s", m->u.error.message);
		host_done(h);
		return;
	}
	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return;
	}
	if (m->type != MSG_TRACE_CANCEL_REPLY)
		return;
	c->answered = true;
	c->cancelled = m->u.trace_cancel_reply.cancelled;
	c->state = m->u.trace_cancel_reply.state;
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
	size_t i, known = 0, failures = 0;
	int64_t total = 0;
	struct client cl;
	struct chost *hs;
	int c, code;

	while ((c = getopt_long(argc, argv, "h", copts, NULL)) != -1) {
		if (c == 'h') {
			printf("usage: gprofctl [GLOBAL OPTIONS] cancel TRACE_ID\n"
			       "Ends a running trace on every host: processes still waiting or\n"
			       "capturing stop and end cancelled; delivered files stay; the trace\n"
			       "ends cancelled (gprofctl trace exits 5). gprofctl traces and\n"
			       "gprofctl status list the running traces and their ids.\n"
			       "Exit 0 when it was cancelled on some host and every host answered,\n"
			       "1 when a host could not be asked, 2 when no host had it running.\n");
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
		if (hs[i].cancelled > 0) {
			known++;
			total += hs[i].cancelled;
		}
		failures += !hs[i].answered && !hs[i].unknown;
	}
	code = failures ? EXIT_FAILED : known ? EXIT_OK : EXIT_NOMATCH;
	for (i = 0; i < cl.n && !o->json; i++) {
		if (hs[i].answered && hs[i].cancelled > 0)
			printf("  %-20s %lld process%s cancelled\n", cl.hosts[i].label,
			       (long long)hs[i].cancelled, hs[i].cancelled == 1 ? "" : "es");
		else if (hs[i].answered)
			printf("  %-20s nothing to cancel: the trace had already ended%s%s\n",
			       cl.hosts[i].label, hs[i].state != MSG_TRACE_RUNNING ? " " : "",
			       hs[i].state != MSG_TRACE_RUNNING ? msg_trace_state_name(hs[i].state) : "");
		else if (hs[i].unknown)
			printf("  %-20s %s\n", cl.hosts[i].label, hs[i].why);
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
			if (hs[i].answered) {
				jsonint_add(h, "cancelled", hs[i].cancelled);
				if (hs[i].state != MSG_TRACE_RUNNING)
					cJSON_AddStringToObject(h, "state",
					                        msg_trace_state_name(hs[i].state));
			} else if (hs[i].unknown) {
				cJSON_AddStringToObject(h, "unknown", hs[i].why);
			} else
				cJSON_AddStringToObject(h, "error", cl.hosts[i].error);
			cJSON_AddItemToArray(hosts, h);
		}
		jsonint_add(root, "known", known);
		jsonint_add(root, "cancelled", total);
		jsonint_add(root, "exit", code);
		if ((text = cJSON_Print(root)) != NULL)
			printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	}
	free(hs);
	client_deinit(&cl);
	return code;
}
