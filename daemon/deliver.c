/*
 * deliver: see deliver.h (the order of the steps, and why).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "deliver.h"
#include "log.h"
#include "store.h"
#include "trace.h"

/* The part of pid in trace id, when its trace is in memory and the part has not ended. */
static struct tproc *live_part(struct daemon *d, const char *id, pid_t pid,
                               struct trace **tout)
{
	struct trace *t = trace_find(d, id);
	struct tproc *tp = t != NULL ? trace_tproc(t, pid) : NULL;

	*tout = t;
	if (tp == NULL || t->finished || trace_tproc_ended(tp))
		return NULL;
	return tp;
}

/* Tells the producer of the failure, then fails the part with why (a
 * no-op when the producer failed it already, or it had ended). dl may be
 * freed by done: what is needed after is copied first. */
static void fail(struct delivery *dl, int result, int code, const char *why)
{
	struct daemon *d = dl->d;
	char id[sizeof(dl->trace_id)];
	pid_t pid = dl->pid;
	struct trace *t;
	struct tproc *tp;

	snprintf(id, sizeof(id), "%s", dl->trace_id);
	log_debug("trace %s: pid %d's file not delivered: %s", id, (int)pid, why);
	dl->done(dl, live_part(d, id, pid, &t), result, code, why);
	if ((tp = live_part(d, id, pid, &t)) != NULL)
		trace_set_state(t, tp, MSG_TS_FAILED, why);
}

/* The manifest listing the file is on disk (result 0), or could not be
 * written: only now is the file acknowledged (store.h), or removed. */
static void on_recorded(void *arg, int result)
{
	struct delivery *dl = arg;
	char final[PATH_MAX], why[200];
	struct trace *t = trace_find(dl->d, dl->trace_id);
	struct tproc *tp = t != NULL ? trace_tproc(t, dl->pid) : NULL;
	bool mine = tp != NULL && strcmp(tp->file, dl->name) == 0;
	bool gone = dl->abandoned != NULL && dl->abandoned(dl);

	if (mine)
		tp->recording = false;
	/* a part that ended meanwhile keeps nothing: the next manifest does not
	 * list it, and a start-up drops a listed file that is missing */
	if (result < 0 || !mine || t->finished || trace_tproc_ended(tp) || gone) {
		store_path(dl->d, dl->trace_id, dl->name, final, sizeof(final));
		unlink(final);
		if (mine) {
			tp->file[0] = 0;
			tp->stored_bytes = 0;
		}
		if (result < 0)
			snprintf(why, sizeof(why), "cannot record the file in the trace's manifest: "
			         "%s%s", strerror(-result), result == -ENOSPC ?
			         " (the daemon's disk is full)" : "");
		else
			snprintf(why, sizeof(why), "the trace ended (timed out or cancelled) before "
			         "the upload completed");
		fail(dl, result < 0 ? result : -ECANCELED, result == -ENOSPC ? MSG_E_NO_SPACE :
		     result < 0 ? MSG_E_IO : MSG_E_NOT_FOUND, why);
		return;
	}
	/* Here an object store would take its copy: the file is durable and
	 * listed, not yet acknowledged. */
	tp->bytes = tp->stored_bytes;
	log_debug("trace %s: stored %s (%lld bytes)", dl->trace_id, dl->name,
	          (long long)dl->bytes);
	dl->done(dl, tp, 0, 0, NULL);
	trace_set_state(t, tp, MSG_TS_DONE, NULL);
}

void deliver_file(struct delivery *dl, const char *tmp)
{
	char final[PATH_MAX], why[PATH_MAX + 64];
	struct trace *t;
	struct tproc *tp = live_part(dl->d, dl->trace_id, dl->pid, &t);
	int r;

	/* a part that ended meanwhile (timed out, cancelled, failed by its
	 * producer's own report) stores nothing: no byte on disk goes
	 * uncounted */
	if (tp == NULL) {
		unlink(tmp);
		fail(dl, -ECANCELED, MSG_E_NOT_FOUND, "the trace ended (timed out or cancelled) "
		     "before the upload completed");
		return;
	}
	store_path(dl->d, dl->trace_id, dl->name, final, sizeof(final));
	if (rename(tmp, final) != 0) {
		r = -errno;
		unlink(tmp);
		snprintf(why, sizeof(why), "cannot store the file: %s", strerror(-r));
		fail(dl, r, MSG_E_IO, why);
		return;
	}
	snprintf(tp->file, sizeof(tp->file), "%s", dl->name);
	tp->stored_bytes = dl->bytes;
	tp->recording = true;
	r = store_record(dl->d, trace_stored(t, MSG_TRACE_RUNNING, true), on_recorded, dl);
	if (r < 0)
		on_recorded(dl, r);
}
