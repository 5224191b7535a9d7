/*
 * dynorpc: see dynorpc.h. A peer that speaks Dynolog gets Dynolog replies
 * for as long as it stays connected (`dyno` reads one and closes).
 * A Kineto config meets the same window rules as a native trace request
 * (proto/window.h), so no value is answered "triggered" that no process
 * could ever deliver.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "dyno.h"
#include "dynorpc.h"
#include "kconfig.h"
#include "log.h"
#include "trace.h"
#include "window.h"

static void reply_failed(struct session *s, const char *why)
{
	struct pbuf b;

	pbuf_init(&b, 0);
	if (dyno_encode_failed(&b, why) == 0)
		conn_send(&s->conn, &b);
	else
		pbuf_deinit(&b);
}

static void set_kineto(struct session *s, const struct dyno_request *r)
{
	struct dyno_kineto_reply rep = { 0 };
	struct msg_trace_start req;
	char job[32], why[MSG_TEXT_MAX];
	int64_t pids[DYNO_PIDS_MAX];
	int32_t *matched, *triggered;
	struct kconfig k;
	struct perr err;
	struct trace *t;
	struct msg tmp;
	struct pbuf b;
	size_t i;
	int code = 0;

	if (kconfig_parse(&k, r->config, &err) < 0) {
		reply_failed(s, err.msg);
		return;
	}
	msg_init(&tmp, MSG_TRACE_START, 1); /* for its defaults */
	req = tmp.u.trace_start;
	/* Job 0 is what a Kineto client without SLURM reports; it means "any
	 * job" here, narrowed by pids. */
	if (r->job_id != 0) {
		snprintf(job, sizeof(job), "%lld", (long long)r->job_id);
		req.job_id = job;
	} else
		req.all = r->npids == 0 || (r->npids == 1 && r->pids[0] == 0);
	for (i = 0; i < r->npids; i++)
		pids[i] = r->pids[i];
	req.pids.v = pids;
	req.pids.n = req.all ? 0 : r->npids;
	req.process_limit = r->process_limit > 0 ? r->process_limit : 1;
	/* The same rules as a native trace request (window.h): a window that
	 * could never be delivered is refused here, with the reason, rather
	 * than answered "triggered" and left to hold the process until the
	 * trace times out (issue 23, item 7). */
	if (kconfig_window(&k, &req.win, &err) < 0 ||
	    window_fits(&req.win, clock_now_us(), (int64_t)s->d->cfg.trace_timeout_s * 1000,
	                &err) < 0) {
		s->d->cnt.bad_messages++;
		log_info("dyno request from %s refused: %s", s->conn.peer.desc, err.msg);
		reply_failed(s, err.msg);
		return;
	}
	t = trace_create(s->d, conn_peer(&s->conn), &req, false, &code, &err);
	if (t == NULL && code != MSG_E_NOT_FOUND) {
		reply_failed(s, err.msg);
		return;
	}
	if (t == NULL) {
		/* Dynolog answers an empty match with empty lists; the dyno client
		 * then prints its generic hint. Log ours for the operator. */
		snprintf(why, sizeof(why), "%s", err.msg);
		log_info("dyno request from %s matched nothing: %s", s->conn.peer.desc, why);
		rep.trace_id = NULL;
		pbuf_init(&b, 0);
		if (dyno_encode_kineto_reply(&b, &rep) == 0)
			conn_send(&s->conn, &b);
		else
			pbuf_deinit(&b);
		return;
	}
	matched = calloc(t->n, sizeof(*matched));
	triggered = calloc(t->n, sizeof(*triggered));
	if (matched == NULL || triggered == NULL) {
		free(matched);
		free(triggered);
		reply_failed(s, "out of memory");
		return;
	}
	for (i = 0; i < t->n; i++) {
		/* a launcher left out is not part of Dynolog's answer */
		if (t->tp[i].state == MSG_TS_SKIPPED)
			continue;
		matched[rep.nmatched++] = t->tp[i].pid;
		if (t->tp[i].state == MSG_TS_FAILED)
			rep.busy++;
		else
			triggered[rep.ntriggered++] = t->tp[i].pid;
	}
	rep.matched = matched;
	rep.triggered = triggered;
	rep.trace_id = t->id;
	pbuf_init(&b, 0);
	if (dyno_encode_kineto_reply(&b, &rep) == 0)
		conn_send(&s->conn, &b);
	else
		pbuf_deinit(&b);
	free(matched);
	free(triggered);
}

void dynorpc_handle(struct session *s, const char *json, size_t len)
{
	struct dyno_request r;
	struct perr err;
	struct pbuf b;
	int rc;

	s->d->cnt.dyno_requests++;
	if (s->role == SESSION_ROLE_NONE) {
		s->role = SESSION_ROLE_DYNO;
		conn_greeted(&s->conn);
	}
	if (s->role != SESSION_ROLE_DYNO) {
		conn_send_error(&s->conn, 0, MSG_E_BAD_REQUEST, "a Dynolog request on a native "
		                "connection; open a new connection for dyno requests");
		return;
	}
	if (s->need_auth) {
		reply_failed(s, "this gprofd requires authentication on TCP from other hosts; "
		             "run dyno on the traced host, or use gprofctl --token-file");
		conn_finish(&s->conn, "dyno request without authentication");
		return;
	}
	rc = dyno_decode_request(&r, json, len, &err);
	if (rc < 0) {
		s->d->cnt.bad_messages++;
		reply_failed(s, err.msg);
		return;
	}
	pbuf_init(&b, 0);
	switch (r.fn) {
	case DYNO_GET_STATUS:
		rc = dyno_encode_status(&b);
		break;
	case DYNO_GET_VERSION:
		rc = dyno_encode_version(&b, GPROF_VERSION);
		break;
	case DYNO_DCGM_PAUSE:
	case DYNO_DCGM_RESUME:
		/* No DCGM here: CUPTI activity tracing does not contend with it. */
		rc = dyno_encode_dcgm(&b, false);
		break;
	case DYNO_SET_KINETO_ONDEMAND:
		set_kineto(s, &r);
		rc = 0;
		break;
	}
	if (rc == 0 && b.len > 0)
		conn_send(&s->conn, &b);
	else
		pbuf_deinit(&b);
	dyno_request_deinit(&r);
}
