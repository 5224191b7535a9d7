/*
 * kineto: see kineto.h (ownership, callers). The capture back end
 * (kineto_backend, backend.h) is at the end of the collecting part; the
 * datagram endpoint and the file collection feed it.
 */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "kineto.h"
#include "peer.h"
#include "kingest.h"
#include "kconfig.h"
#include "deliver.h"
#include "ident.h"
#include "kipc.h"
#include "log.h"
#include "registry.h"
#include "store.h"
#include "trace.h"

#define KFILE "kineto.pt.trace.json" /* Kineto writes kineto_<pid>.pt.trace.json */
#define KINETO_FALLBACK_MS "500"  /* Kineto's own default duration */

/* A Kineto client's state, the back end's own (proc->be_data). pending,
 * fallback, fallback_at_us and offers: the config being offered (kineto.h). */
struct kclient {
	int64_t last_seen_us;      /* its last poll */
	char *pending;             /* on-demand config for its next free poll (owned) */
	int offers;                /* times pending was handed over */
	char *fallback;            /* an iteration config's duration fallback, from
	                              fallback_at_us on; set while it is offered (owned) */
	int64_t fallback_at_us;
};

static const struct backend kineto_backend;

/* The service's state, its own: the daemon holds a pointer (d->kineto),
 * made by kineto_start and freed by kineto_free. */
struct kineto {
	int fd;
	bool open;
	bool fd_passed;            /* fd is the socket systemd passed: never unlinked */
	uv_poll_t poll;
	uv_timer_t timer;
	struct kwatch *watches;
	char base[PATH_MAX];       /* where per-trace directories go (base_dir) */
	bool base_private;         /* a mkdtemp directory beside a taken kineto.trace_dir */
};

struct kwatch {
	struct kwatch *next;
	struct daemon *d;
	uv_fs_event_t ev;
	char trace_id[TRACE_ID_LEN];
	pid_t pid;
	uid_t uid;
	int64_t rank;          /* for the stored file's name; -1 unknown */
	char dir[PATH_MAX];
	bool ingesting;
	bool saw_file;         /* an fs event named a kineto* file in dir */
	bool closing;
	bool closed;           /* its handle is closed; freed once no ingest is in flight */
	bool fell_back;        /* Kineto was handed the duration fallback */
	int64_t wait_s;        /* how long the iteration config was offered */
};

struct ingest {
	uv_work_t req;
	struct kwatch *w;
	struct kingest k;      /* the pool's job: its file, and what it found */
	char final[PATH_MAX];
	char name[160];
	struct delivery dl;    /* its way into the store, once compressed (deliver.h) */
};

/* ---- the datagram endpoint ---- */

static void reply(struct daemon *d, const struct sockaddr_un *to, socklen_t tolen,
                  const uint8_t *buf, int n)
{
	if (n > 0 && sendto(d->kineto->fd, buf, (size_t)n, MSG_DONTWAIT,
	                    (const struct sockaddr *)to, tolen) < 0)
		log_debug("kineto: reply to a client failed: %s", strerror(errno));
}

/* The watch of p's current trace, if any. */
static struct kwatch *watch_of(struct daemon *d, const struct proc *p)
{
	struct kwatch *w;

	if (p->busy == NULL)
		return NULL;
	for (w = d->kineto->watches; w != NULL; w = w->next)
		if (w->pid == p->pid && strcmp(w->trace_id, p->busy->id) == 0)
			return w;
	return NULL;
}

/* Has Kineto written (or begun to write) its file into w's directory?
 * Kineto renames the file into place before it reports itself free again,
 * so a free poll that finds no file means no capture has ended. O(1) on
 * the loop, whatever the user put in its directory: the file events seen
 * (on_fs_event), else a look at the one name Kineto writes; never a scan of
 * a directory whose entries the user controls. */
static bool watch_has_file(const struct kwatch *w)
{
	char path[PATH_MAX + 64];
	struct stat st;

	if (w->ingesting || w->saw_file)
		return true;
	snprintf(path, sizeof(path), "%s/kineto_%d.pt.trace.json", w->dir, (int)w->pid);
	return lstat(path, &st) == 0;
}

/* Withdraws c's config not yet handed over (and stops offering it). */
static void withdraw(struct kclient *c)
{
	free(c->pending);
	free(c->fallback);
	c->pending = c->fallback = NULL;
}

/* What to hand p at a poll that says whether its activity profiler is free
 * (NULL: nothing); w is the watch of p's trace. A config with a fallback is
 * an iteration config, offered until taken (kineto.h). */
static const char *choose_config(struct kclient *p, const struct kwatch *w, bool free_,
                                 bool *one_shot, bool *fell_back)
{
	*one_shot = true;
	*fell_back = false;
	if (p->pending == NULL)
		return NULL;
	if (p->fallback == NULL)
		return free_ ? p->pending : NULL;
	/* offered before and now busy: Kineto took it */
	if (!free_) {
		if (p->offers > 0)
			withdraw(p);
		return NULL;
	}
	if (p->offers > 0 && (w == NULL || watch_has_file(w))) {
		withdraw(p); /* taken, and already done */
		return NULL;
	}
	if (clock_now_us() >= p->fallback_at_us) {
		*fell_back = true;
		return p->fallback;
	}
	*one_shot = false; /* dropped by a Kineto that counted no step yet: again next time */
	return p->pending;
}

static void on_sweep(uv_timer_t *timer);

/* The sweep runs only while there is something to sweep (a Kineto client
 * or a file watch): an idle daemon wakes for nothing. */
static void sweep_arm(struct daemon *d)
{
	if (d->kineto->open && !uv_is_active((uv_handle_t *)&d->kineto->timer))
		uv_timer_start(&d->kineto->timer, on_sweep, 1000, 1000);
}

/* A Kineto client says nothing of its rank: read RANK, LOCAL_RANK,
 * WORLD_SIZE (or SLURM's, MPI's) from its environment, where /proc lets
 * the daemon (root, or the process's own user); -1 where it cannot. The
 * environment is the one the process started with, which is where a
 * launcher puts them. */
static void identity(struct daemon *d, struct proc *p)
{
	char path[PATH_MAX];
	struct ident id;
	size_t len = 0, cap = 64 << 10;
	char *env = malloc(cap);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/proc/%d/environ",
	         strcmp(d->cfg.proc_root, "/") == 0 ? "" : d->cfg.proc_root, (int)p->pid);
	fd = env ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0) {
		free(env);
		return;
	}
	/* at most 1 MiB: the variables sought are set by launchers, early */
	while ((n = read(fd, env + len, cap - len)) > 0) {
		len += (size_t)n;
		if (len == cap) {
			char *more = cap < (1u << 20) ? realloc(env, cap * 2) : NULL;

			if (more == NULL)
				break;
			env = more;
			cap *= 2;
		}
	}
	close(fd);
	ident_read_environ(&id, env, len);
	free(env);
	p->rank = id.rank;
	p->local_rank = id.local_rank;
	p->world_size = id.world_size;
}

/* Registers a client seen polling: pid and uid from its credentials, its
 * ancestors from /proc, its job id from the datagram, its rank from its
 * environment. 0, -ENOSPC, -ENOMEM. */
static int add_client(struct daemon *d, const struct ucred *cred, int64_t job_id,
                      struct proc **out)
{
	struct kclient *c = calloc(1, sizeof(*c));
	int32_t anc[PROC_PPIDS_MAX];
	char job[32] = "";
	struct proc *p;
	int n, r;

	if (c == NULL)
		return -ENOMEM;
	/* Kineto's job id is SLURM_JOB_ID or 0: 0 means none */
	if (job_id != 0)
		snprintf(job, sizeof(job), "%lld", (long long)job_id);
	/* Its ancestors from /proc, not from the datagram: a list taken on
	 * trust let any user declare another's process its launcher, and
	 * so have it skipped from that user's traces (issue 23, case 12). */
	n = peer_ancestors(cred->pid, anc, PROC_PPIDS_MAX);
	r = registry_add_client(d, &kineto_backend, cred->pid, cred->uid, job, anc, n, &p);
	if (r < 0) {
		free(c);
		return r;
	}
	identity(d, p);
	p->caps = MSG_CAP_CUPTI | MSG_CAP_STEPS;
	c->last_seen_us = p->registered_us;
	p->be_data = c;
	*out = p;
	return 0;
}

static void on_req(struct daemon *d, const struct kipc_req *req, const struct ucred *cred,
                   const struct sockaddr_un *from, socklen_t fromlen)
{
	static uint8_t out[KIPC_HDR_SIZE + KIPC_CONFIG_MAX];
	const char *config = NULL;
	struct proc *p = registry_find_live(d, cred->pid, cred->uid);
	bool one_shot = true, fell_back = false;
	struct kclient *c = NULL;
	struct kwatch *w = NULL;
	int n;

	if (p == NULL) {
		if (add_client(d, cred, req->job_id, &p) < 0) {
			reply(d, from, fromlen, out, kipc_encode_config_reply(out, sizeof(out), "", 0));
			return;
		}
		log_info("kineto client pid %d (uid %u, job %s) registered", (int)p->pid,
		         (unsigned)p->uid, *p->job_id ? p->job_id : "none");
		sweep_arm(d);
	}
	if (p->be == &kineto_backend) {
		c = p->be_data;
		c->last_seen_us = clock_now_us();
		w = watch_of(d, p);
		/* the activities bit clear: busy (or a bare heartbeat) */
		config = choose_config(c, w, (req->type & KIPC_REQ_ACTIVITIES) != 0, &one_shot,
		                       &fell_back);
	}
	n = kipc_encode_config_reply(out, sizeof(out), config ? config : "",
	                             config ? strlen(config) : 0);
	reply(d, from, fromlen, out, n);
	if (config != NULL) {
		struct trace *t = p->busy;
		struct tproc *tp = t ? trace_tproc(t, p->pid) : NULL;

		d->cnt.kineto_configs++;
		if (c->offers++ == 0 && tp != NULL)
			trace_set_state(t, tp, MSG_TS_CAPTURING, NULL);
		if (fell_back && w != NULL)
			w->fell_back = true;
		log_debug("kineto: %s delivered to pid %d (offer %d)", fell_back ?
		          "duration fallback" : "config", (int)p->pid, c->offers);
		if (one_shot)
			withdraw(c);
	}
}

static void on_ctxt(struct daemon *d, const struct kipc_ctxt *c, const struct sockaddr_un *from,
                    socklen_t fromlen)
{
	uint8_t out[64];
	char job[32] = "";
	struct proc *p;
	int32_t count = 0;

	if (c->job_id != 0)
		snprintf(job, sizeof(job), "%lld", (long long)c->job_id);
	for (p = d->procs; p != NULL; p = p->next)
		if (strcmp(p->job_id, job) == 0)
			count++;
	reply(d, from, fromlen, out, kipc_encode_ctxt_reply(out, sizeof(out), count));
}

static void on_readable(uv_poll_t *h, int status, int events)
{
	struct daemon *d = h->data;
	uint8_t buf[1024];
	char cbuf[CMSG_SPACE(sizeof(struct ucred))];
	struct sockaddr_un from;
	struct kipc_msg m;
	struct perr err;

	(void)events;
	if (status < 0)
		return;
	/* Drain everything pending: many ranks poll at the same instant. */
	for (;;) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = {
			.msg_name = &from, .msg_namelen = sizeof(from),
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
		};
		const struct ucred *cred = NULL;
		struct cmsghdr *cm;
		ssize_t n;

		n = recvmsg(d->kineto->fd, &mh, MSG_DONTWAIT);
		if (n < 0)
			break;
		d->cnt.kineto_datagrams++;
		for (cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS)
				cred = (const struct ucred *)(const void *)CMSG_DATA(cm);
		if (cred == NULL || (mh.msg_flags & MSG_TRUNC)) {
			d->cnt.kineto_malformed++;
			continue;
		}
		if (kipc_decode(&m, buf, (size_t)n, &err) < 0) {
			d->cnt.kineto_malformed++;
			log_debug("kineto: dropped a datagram from pid %d: %s", (int)cred->pid, err.msg);
			continue;
		}
		if (m.kind == KIPC_REQ)
			on_req(d, &m.u.req, cred, &from, mh.msg_namelen);
		else
			on_ctxt(d, &m.u.ctxt, &from, mh.msg_namelen);
	}
}

/* ---- collecting the file Kineto writes ---- */

/* A watch with an ingest in flight is freed when that ends (ingest_end). */
static void on_watch_closed(uv_handle_t *h)
{
	struct kwatch *w = h->data;

	w->closed = true;
	if (!w->ingesting)
		free(w);
}

static void watch_close(struct kwatch *w)
{
	struct kwatch **pp;

	if (w->closing)
		return;
	w->closing = true;
	for (pp = &w->d->kineto->watches; *pp != NULL; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	uv_close((uv_handle_t *)&w->ev, on_watch_closed);
}

/* Entries remove_dir looks at: it runs on the loop, and the directory's
 * entries are the traced user's to multiply. */
#define REMOVE_SCAN_MAX 256

/* Removes what Kineto wrote in a process's directory (kineto_<pid>...,
 * its .tmp too; unlink never follows a link), then the directory if that
 * emptied it: anything else stays for a person to look at, as does all of
 * a directory stuffed past REMOVE_SCAN_MAX entries (its user's disk). */
static void remove_dir(const char *dir)
{
	struct dirent *e;
	DIR *dh = opendir(dir);
	int seen = 0;

	if (dh != NULL) {
		while (seen++ < REMOVE_SCAN_MAX && (e = readdir(dh)) != NULL)
			if (strncmp(e->d_name, "kineto", 6) == 0)
				unlinkat(dirfd(dh), e->d_name, 0);
		closedir(dh);
	}
	rmdir(dir);
}

/* Thread pool: kingest.c compresses the file into the trace's directory. */
static void ingest_work(uv_work_t *req)
{
	struct ingest *in = req->data;

	kingest_run(&in->k);
}

/* The ingest's last step: w is freed here when its handle closed meanwhile
 * (on_watch_closed leaves a watch with an ingest in flight). */
static void ingest_end(struct ingest *in)
{
	struct kwatch *w = in->w;

	w->ingesting = false;
	if (w->closed)
		free(w);
	free(in);
}

/* deliver.c's outcome: Kineto's file is stored and recorded in the
 * trace's manifest (result 0), and the process about to be done (store.h);
 * or it is removed and the process failed. */
static void ingest_delivered(struct delivery *dl, struct tproc *tp, int result, int code,
                             const char *why)
{
	struct ingest *in = (struct ingest *)(void *)((char *)dl - offsetof(struct ingest, dl));
	struct kwatch *w = in->w;
	struct trace *t = trace_find(w->d, w->trace_id);

	(void)code;
	(void)why;
	/* Kineto turns an iteration request it cannot count into a time-based
	 * capture, silently: the file says so; tell the user. */
	if (result < 0 || tp == NULL || t == NULL)
		;
	else if (t->win.iterations > 0 && in->k.steps != t->win.iterations && w->fell_back)
		snprintf(tp->reason, sizeof(tp->reason), "captured by time, not by "
		         "iterations: the process reported no optimizer step to Kineto "
		         "in %lld s (kineto.step_wait, at most the timeout less 20 s), so "
		         "Kineto's 500 ms fallback ran; the trace holds %lld optimizer steps "
		         "(is it training yet? Kineto counts optimizer.step() calls)",
		         (long long)w->wait_s, (long long)in->k.steps);
	else if (t->win.iterations > 0 && in->k.steps != t->win.iterations)
		snprintf(tp->reason, sizeof(tp->reason), "Kineto captured by time, not by "
		         "iterations: the trace holds %lld optimizer steps, %lld were asked "
		         "for", (long long)in->k.steps, (long long)t->win.iterations);
	ingest_end(in);
}

static void ingest_done(uv_work_t *req, int status)
{
	struct ingest *in = req->data;
	struct kwatch *w = in->w;
	struct trace *t = trace_find(w->d, w->trace_id);
	struct tproc *tp = t ? trace_tproc(t, w->pid) : NULL;

	(void)status;
	if (in->k.result == 1) {
		ingest_end(in);
		return;
	}
	/* Clean up first: whoever hears "done" may look, and must find the
	 * client's directory gone. */
	remove_dir(w->dir);
	watch_close(w);
	if (w->d->stopping && w->d->kineto->base_private)
		rmdir(w->d->kineto->base); /* kineto_stop left it for this one */
	if (in->k.result < 0) {
		if (tp != NULL)
			trace_set_state(t, tp, MSG_TS_FAILED, in->k.why);
		ingest_end(in);
		return;
	}
	in->dl.d = w->d;
	snprintf(in->dl.trace_id, sizeof(in->dl.trace_id), "%s", w->trace_id);
	in->dl.pid = w->pid;
	snprintf(in->dl.name, sizeof(in->dl.name), "%s", in->name);
	in->dl.bytes = in->k.bytes;
	in->dl.done = ingest_delivered;
	deliver_file(&in->dl, in->k.tmp);
}

static void on_fs_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
	struct kwatch *w = h->data;
	struct ingest *in;
	size_t len;

	(void)events;
	if (status < 0 || filename == NULL || w->closing)
		return;
	if (strncmp(filename, "kineto", 6) == 0)
		w->saw_file = true;
	if (w->ingesting)
		return;
	len = strlen(filename);
	/* kineto_<pid>.pt.trace.json; Kineto's own .tmp name is not it */
	if (len < 14 || strcmp(filename + len - 14, ".pt.trace.json") != 0)
		return;
	in = calloc(1, sizeof(*in));
	if (in == NULL)
		return;
	w->ingesting = true;
	in->w = w;
	in->req.data = in;
	in->k.limit = w->d->cfg.max_trace_bytes;
	in->k.pid = w->pid;
	in->k.uid = w->uid;
	snprintf(in->k.src, sizeof(in->k.src), "%s/%s", w->dir, filename);
	store_file_name(w->d->host, w->pid, w->rank, MSG_FMT_TRACE, in->name, sizeof(in->name));
	store_mkdir(w->d, w->trace_id);
	store_path(w->d, w->trace_id, in->name, in->final, sizeof(in->final));
	snprintf(in->k.tmp, sizeof(in->k.tmp), "%s.tmp", in->final);
	if (uv_queue_work(w->d->loop, &in->req, ingest_work, ingest_done) < 0) {
		w->ingesting = false;
		free(in);
	}
}

/* Is path a directory of this daemon's (not a link, owned by its uid,
 * writable by no one else)? */
static bool ours(const char *path, struct stat *st)
{
	return lstat(path, st) == 0 && S_ISDIR(st->st_mode) && st->st_uid == geteuid() &&
	       (st->st_mode & 022) == 0;
}

/*
 * The base directory the per-trace directories go in: kineto.trace_dir,
 * made by the daemon (mode 0711: the traced users pass through, none lists
 * it). Where that path is taken by anything that is not the daemon's own
 * directory (any local user may make /tmp/gprofd-kineto first), a private
 * directory beside it, <trace_dir>.XXXXXX from mkdtemp (a name nobody can
 * guess and take first), is used instead, with a warning naming the owner:
 * Kineto accepts only paths under /tmp, so the base stays there. Chosen at
 * the first capture, checked again at each.
 */
static int base_dir(struct daemon *d, struct perr *err)
{
	const char *want = d->cfg.kineto_trace_dir;
	char *base = d->kineto->base;
	struct stat st;

	if (base[0] && ours(base, &st))
		return 0;
	if (mkdir(want, 0711) == 0 || (errno == EEXIST && ours(want, &st))) {
		snprintf(base, sizeof(d->kineto->base), "%s", want);
		d->kineto->base_private = false;
		return 0;
	}
	if (errno != EEXIST)
		return perr_set(err, -errno, "kineto.trace_dir %s: %s", want, strerror(errno));
	if (snprintf(base, sizeof(d->kineto->base), "%s.XXXXXX", want) >=
	    (int)sizeof(d->kineto->base) || mkdtemp(base) == NULL || chmod(base, 0711) != 0) {
		int r = -errno;

		base[0] = 0;
		return perr_set(err, r, "kineto.trace_dir %s is taken (not a directory of "
		                "gprofd's), and a private one beside it cannot be made: %s", want,
		                strerror(-r));
	}
	d->kineto->base_private = true;
	if (lstat(want, &st) == 0)
		log_warn("kineto.trace_dir %s is not gprofd's (a %s of uid %u, mode %03o): "
		         "Kineto traces go to %s instead; remove it or choose another "
		         "kineto.trace_dir", want, S_ISDIR(st.st_mode) ? "directory" :
		         S_ISLNK(st.st_mode) ? "link" : "file", (unsigned)st.st_uid,
		         (unsigned)(st.st_mode & 07777), base);
	return 0;
}

/* The back end's start (backend.h): leaves t's on-demand config for tp's
 * client, to be handed over at its next poll, and watches for the file it
 * will write. */
static void kineto_part_start(struct trace *t, struct tproc *tp)
{
	struct daemon *d = t->d;
	struct proc *p = tp->proc;
	struct kclient *c = p->be_data;
	char config[PATH_MAX + 1024], why[300];
	struct kwatch *w;
	struct perr err;
	int r, n;

	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		trace_set_state(t, tp, MSG_TS_FAILED, "out of memory");
		return;
	}
	w->d = d;
	w->pid = p->pid;
	w->uid = p->uid;
	w->rank = p->rank;
	snprintf(w->trace_id, sizeof(w->trace_id), "%s", t->id);
	r = base_dir(d, &err);
	snprintf(w->dir, sizeof(w->dir), "%s/%s-%d", d->kineto->base, t->id, (int)p->pid);
	if (r == 0 && mkdir(w->dir, 0700) != 0)
		r = perr_set(&err, -errno, "cannot create %s: %s", w->dir, strerror(errno));
	/* the traced process writes there as itself */
	if (r == 0 && geteuid() == 0 && chown(w->dir, p->uid, (gid_t)-1) != 0)
		r = perr_set(&err, -errno, "cannot give %s to uid %u: %s", w->dir,
		             (unsigned)p->uid, strerror(errno));
	if (r == 0 && (uv_fs_event_init(d->loop, &w->ev) != 0 ||
	               uv_fs_event_start(&w->ev, on_fs_event, w->dir, 0) != 0)) {
		r = perr_set(&err, -EIO, "cannot watch %s", w->dir);
		uv_close((uv_handle_t *)&w->ev, NULL);
		rmdir(w->dir);
		free(w);
		w = NULL;
	}
	if (r < 0) {
		if (w != NULL) {
			rmdir(w->dir);
			free(w);
		}
		snprintf(why, sizeof(why), "%s", err.msg);
		trace_set_state(t, tp, MSG_TS_FAILED, why);
		return;
	}
	w->ev.data = w;
	w->next = d->kineto->watches;
	d->kineto->watches = w;
	sweep_arm(d);
	/* The on-demand config, as `dyno gputrace` would write it. An
	 * iteration config says ACTIVITIES_DURATION_MSECS=0: a Kineto that has
	 * counted no step yet drops it rather than capture by time, and it is
	 * offered again at every free poll until Kineto takes it; after
	 * kineto.step_wait the same config with a duration is handed over once,
	 * which Kineto captures by time if it still counts no steps. */
	n = snprintf(config, sizeof(config), "ACTIVITIES_LOG_FILE=%s/" KFILE "\n", w->dir);
	/* the profiler options, every one said true or false as `dyno
	 * gputrace` says them; the buffer holds the longest directory and
	 * them with room to spare */
	r = kconfig_options_format(t->win.options, config, sizeof(config));
	n += r > 0 ? r : 0;
	if (t->win.iterations > 0)
		n += snprintf(config + n, sizeof(config) - (size_t)n,
		              "PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=%lld\n"
		              "ACTIVITIES_ITERATIONS=%lld\nREQUEST_TRACE_ID=%s\n"
		              "ACTIVITIES_DURATION_MSECS=",
		              (long long)(t->win.iteration_roundup > 0 ? t->win.iteration_roundup : 1),
		              (long long)t->win.iterations, t->id);
	else
		snprintf(config + n, sizeof(config) - (size_t)n,
		         "PROFILE_START_TIME=%lld\nACTIVITIES_DURATION_MSECS=%lld\nREQUEST_TRACE_ID=%s",
		         (long long)(t->win.start_at_us / 1000), (long long)t->win.duration_ms, t->id);
	withdraw(c);
	c->offers = 0;
	if (t->win.iterations > 0) {
		/* the fallback needs Kineto's 5 s warm-up, the capture and the
		 * writing: leave it 20 s of the trace's time, or at least half */
		int64_t wait_us = (int64_t)d->cfg.kineto_step_wait_s * 1000000,
		        room_us = (t->timeout_ms - 20000) * 1000;

		if (room_us < t->timeout_ms * 500)
			room_us = t->timeout_ms * 500;
		if (wait_us > room_us)
			wait_us = room_us;
		if (asprintf(&c->pending, "%s0", config) < 0)
			c->pending = NULL;
		if (asprintf(&c->fallback, "%s" KINETO_FALLBACK_MS, config) < 0)
			c->fallback = NULL;
		c->fallback_at_us = clock_now_us() + wait_us;
		w->wait_s = wait_us / 1000000;
		if (c->fallback == NULL)
			withdraw(c);
	} else
		c->pending = strdup(config);
	if (c->pending == NULL) {
		trace_set_state(t, tp, MSG_TS_FAILED, "out of memory");
		return;
	}
	trace_set_state(t, tp, MSG_TS_WAITING, NULL);
}

/* Kineto has no way to take a memory snapshot. */
static const char *kineto_refuse(const struct trace *t)
{
	if (t->win.memory_snapshot)
		return "a memory snapshot needs the agent: this process is traced through Kineto's "
		       "daemon mode (KINETO_USE_DAEMON); start it with libgprof_agent and "
		       "GPROF_TORCH_STEPS=1 (gprofctl launch does both)";
	return NULL;
}

/* A part ending early: Kineto must not start a config it was not handed
 * yet (one it took cannot be called back; its file is not stored). */
static void kineto_cancel(struct trace *t, struct tproc *tp, const char *why)
{
	(void)t;
	(void)why;
	withdraw(tp->proc->be_data);
}

/* A client that stopped polling, or a Kineto that took the config and
 * wrote nothing. */
static void kineto_timed_out(const struct trace *t, const struct tproc *tp, char *why,
                             size_t size)
{
	snprintf(why, size, "timed out after %lld s while %s: %s",
	         (long long)(t->timeout_ms / 1000), msg_tstate_name(tp->state),
	         tp->state == MSG_TS_WAITING ? "the process did not poll for its "
	         "config (is it still running with KINETO_USE_DAEMON=1?)" :
	         "Kineto took the config but wrote no trace (did the job reach the "
	         "iterations? is another profiler active in it?)");
}

/* The client is forgotten: its state goes with it. */
static void kineto_forget(struct proc *p)
{
	struct kclient *c = p->be_data;

	if (c != NULL)
		withdraw(c);
	free(c);
	p->be_data = NULL;
}

static const struct backend kineto_backend = {
	.name = "kineto",
	.kind = MSG_KIND_KINETO,
	.counts_steps = false,     /* Kineto reports no steps to the daemon */
	.refuse = kineto_refuse,
	.start = kineto_part_start,
	.cancel = kineto_cancel,
	.timed_out = kineto_timed_out,
	.forget = kineto_forget,
};

/* ---- life cycle ---- */

static void on_sweep(uv_timer_t *timer)
{
	struct daemon *d = timer->data;
	int64_t now = clock_now_us(), limit = (int64_t)d->cfg.kineto_expiry_s * 1000000;
	struct kwatch *w, *wnext;
	struct proc *p, *next;
	bool clients = false;

	for (p = d->procs; p != NULL; p = next) {
		next = p->next;
		if (p->be == &kineto_backend &&
		    now - ((struct kclient *)p->be_data)->last_seen_us > limit) {
			log_info("kineto client pid %d silent for %llu s: forgotten", (int)p->pid,
			         (unsigned long long)d->cfg.kineto_expiry_s);
			registry_remove(d, p);
		} else if (p->be == &kineto_backend)
			clients = true;
	}
	/* watches whose process has ended one way or another */
	for (w = d->kineto->watches; w != NULL; w = wnext) {
		struct trace *t = trace_find(d, w->trace_id);
		struct tproc *tp = t ? trace_tproc(t, w->pid) : NULL;

		wnext = w->next;
		if (!w->ingesting && (tp == NULL || tp->state == MSG_TS_FAILED ||
		                      tp->state == MSG_TS_CANCELLED || tp->state == MSG_TS_DONE)) {
			remove_dir(w->dir);
			watch_close(w);
		}
	}
	if (!clients && d->kineto->watches == NULL)
		uv_timer_stop(timer);
}

/*
 * A socket systemd (or another supervisor) passed, bound before gprofd ran:
 * used when it is bound to the configured address (the bytes Kineto's
 * clients send to), else closed with a warning and the address bound here.
 * Returns the fd to use, or -1.
 */
static int take_passed(struct daemon *d, const struct sockaddr_un *want, socklen_t want_len)
{
	struct sockaddr_un got;
	socklen_t len = sizeof(got);
	int fd = d->kineto_passed_fd, fl;

	if (!d->kineto_passed)
		return -1;
	d->kineto_passed = false; /* taken once; a restart of Kineto binds its own */
	memset(&got, 0, sizeof(got));
	if (!d->cfg.kineto_enabled) {
		log_warn("closing the Unix datagram socket systemd passed (fd %d): kineto.enabled is "
		         "false", fd);
		close(fd);
		return -1;
	}
	if (getsockname(fd, (struct sockaddr *)&got, &len) != 0 || len != want_len ||
	    memcmp(&got, want, len) != 0) {
		log_warn("the Unix datagram socket systemd passed (fd %d) is not bound to the "
		         "configured Kineto address %s%s%s (an abstract name ends in a NUL that "
		         "systemd's ListenDatagram=@name does not write): closed; gprofd binds the "
		         "address itself", fd, d->cfg.kineto_socket_dir[0] ? d->cfg.kineto_socket_dir :
		         "@", d->cfg.kineto_socket_dir[0] ? "/" : "", d->cfg.kineto_socket_name);
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	if ((fl = fcntl(fd, F_GETFL)) >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	return fd;
}

int kineto_start(struct daemon *d, struct perr *err)
{
	struct sockaddr_un sa;
	socklen_t len;
	int one = 1, r;

	if ((d->kineto = calloc(1, sizeof(*d->kineto))) == NULL)
		return perr_set(err, -ENOMEM, "out of memory");
	d->kineto->fd = -1;
	if (!d->cfg.kineto_enabled) {
		take_passed(d, NULL, 0); /* closes one passed */
		return 0;
	}
	if (d->cfg.kineto_socket_dir[0]) {
		r = kipc_addr_dir(&sa, &len, d->cfg.kineto_socket_dir, d->cfg.kineto_socket_name);
	} else
		r = kipc_addr_abstract(&sa, &len, d->cfg.kineto_socket_name);
	if (r < 0)
		return perr_set(err, r, "kineto socket name too long");
	if ((d->kineto->fd = take_passed(d, &sa, len)) >= 0) {
		d->kineto->fd_passed = true;
		goto serve;
	}
	if (d->cfg.kineto_socket_dir[0])
		mkdir(d->cfg.kineto_socket_dir, 0755);
	d->kineto->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->kineto->fd < 0)
		return perr_set(err, -errno, "kineto socket: %s", strerror(errno));
	if (d->cfg.kineto_socket_dir[0])
		unlink(sa.sun_path);
	if (bind(d->kineto->fd, (struct sockaddr *)&sa, len) != 0) {
		char who[256] = "";

		r = -errno;
		close(d->kineto->fd);
		/* an abstract name any local user may have taken first: say who,
		 * since PyTorch jobs would send their requests to that process */
		if (r == -EADDRINUSE && !d->cfg.kineto_socket_dir[0])
			peer_abstract_holders(d->cfg.kineto_socket_name, who, sizeof(who));
		return perr_set(err, r, "cannot bind the Kineto socket %s%s: %s%s%s%s (is dynolog "
		                "running? stop it, or set kineto.enabled: false)",
		                d->cfg.kineto_socket_dir[0] ? "" : "@",
		                d->cfg.kineto_socket_dir[0] ? sa.sun_path : d->cfg.kineto_socket_name,
		                strerror(-r), who[0] ? "; held by " : "", who,
		                who[0] ? "" : (r == -EADDRINUSE && !d->cfg.kineto_socket_dir[0] ?
		                               "; its holder is not visible to this user" : ""));
	}
	if (d->cfg.kineto_socket_dir[0])
		chmod(sa.sun_path, 0666);
serve:
	setsockopt(d->kineto->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	uv_poll_init(d->loop, &d->kineto->poll, d->kineto->fd);
	d->kineto->poll.data = d;
	uv_poll_start(&d->kineto->poll, UV_READABLE, on_readable);
	uv_timer_init(d->loop, &d->kineto->timer);
	d->kineto->timer.data = d;
	d->kineto->open = true;
	log_info("serving Kineto clients (KINETO_USE_DAEMON=1) on %s%s%s", d->cfg.kineto_socket_dir[0] ?
	         "" : "@", d->cfg.kineto_socket_dir[0] ? sa.sun_path : d->cfg.kineto_socket_name,
	         d->kineto->fd_passed ? " (the socket systemd passed)" : "");
	return 0;
}

void kineto_stop(struct daemon *d)
{
	struct kwatch *w;

	if (d->kineto == NULL)
		return;
	/* the traces still running end with the daemon: what Kineto wrote for
	 * them goes, and their directories (one being ingested goes when that
	 * ends: ingest_done) */
	while ((w = d->kineto->watches) != NULL) {
		if (!w->ingesting)
			remove_dir(w->dir);
		watch_close(w);
	}
	/* the private base goes when empty (a per-trace directory a person
	 * should look at keeps it): nothing of a stopped daemon stays in /tmp */
	if (d->kineto->base_private)
		rmdir(d->kineto->base);
	if (!d->kineto->open)
		return;
	d->kineto->open = false;
	uv_poll_stop(&d->kineto->poll);
	uv_close((uv_handle_t *)&d->kineto->poll, NULL);
	uv_close((uv_handle_t *)&d->kineto->timer, NULL);
	close(d->kineto->fd);
	/* a socket file systemd made stays: systemd hands it to the next start */
	if (d->cfg.kineto_socket_dir[0] && !d->kineto->fd_passed) {
		char path[PATH_MAX + 80];

		snprintf(path, sizeof(path), "%s/%s", d->cfg.kineto_socket_dir,
		         d->cfg.kineto_socket_name);
		unlink(path);
	}
}

bool kineto_serving(struct daemon *d, bool *passed)
{
	*passed = d->kineto != NULL && d->kineto->fd_passed;
	return d->kineto != NULL && d->kineto->open;
}

void kineto_free(struct daemon *d)
{
	free(d->kineto);
	d->kineto = NULL;
}
