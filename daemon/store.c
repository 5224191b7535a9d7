/*
 * store: see store.h. Manifests are a storage format, not protocol: they
 * are read and written here with cJSON and never cross a socket.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "clock.h"
#include "log.h"
#include "owndir.h"
#include "store.h"

#define MANIFEST "manifest.json"

/* A trace directory in use: made by store_mkdir for a trace still
 * running, until store_add records the trace's end. */
struct sopen {
	struct sopen *next;
	char id[64];
};

/* The store's state, its own: the daemon holds only a pointer
 * (d->store), made by store_init and freed by store_deinit. */
struct store {
	int lock_fd;               /* holds the flock on <state_dir>/gprofd.lock */
	struct sjob *jobs;         /* the writer's queue; the first runs when... */
	bool job_running;          /* ...this is set */
	struct stored *list;       /* newest first */
	uint64_t bytes;
	size_t n;
	struct sopen *open;        /* directories of traces still running */
};

static void traces_dir(struct daemon *d, char *out, size_t size)
{
	snprintf(out, size, "%s/traces", d->cfg.state_dir);
}

void store_path(struct daemon *d, const char *trace_id, const char *file,
                char *out, size_t size)
{
	if (file != NULL)
		snprintf(out, size, "%s/traces/%s/%s", d->cfg.state_dir, trace_id, file);
	else
		snprintf(out, size, "%s/traces/%s", d->cfg.state_dir, trace_id);
}

void store_file_name(const char *host, pid_t pid, int64_t rank, int format, char *out,
                     size_t size)
{
	struct timespec ts;
	char h[64], r[32] = "";
	size_t i;

	snprintf(h, sizeof(h), "%s", host && *host ? host : "host");
	for (i = 0; h[i]; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
		      (h[i] >= '0' && h[i] <= '9') || h[i] == '-' || (h[i] == '.' && i > 0)))
			h[i] = '-';
	if (rank >= 0)
		snprintf(r, sizeof(r), "_rank%lld", (long long)rank);
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(out, size, "%s_%d%s.%lld%09ld.%s", h, (int)pid, r, (long long)ts.tv_sec,
	         ts.tv_nsec, format == MSG_FMT_MEMORY_SNAPSHOT ? "memory.pickle" :
	         "pt.trace.json.gz");
}

/* Is trace id's directory in use by a trace still running? */
static bool is_open(struct daemon *d, const char *id)
{
	struct sopen *o;

	for (o = d->store->open; o != NULL; o = o->next)
		if (strcmp(o->id, id) == 0)
			return true;
	return false;
}

/* Trace id ended (store_add): its directory is the list's now. */
static void close_open(struct daemon *d, const char *id)
{
	struct sopen **pp, *o;

	for (pp = &d->store->open; (o = *pp) != NULL; pp = &o->next)
		if (strcmp(o->id, id) == 0) {
			*pp = o->next;
			free(o);
			return;
		}
}

int store_mkdir(struct daemon *d, const char *trace_id)
{
	char path[PATH_MAX];
	struct sopen *o;

	store_path(d, trace_id, NULL, path, sizeof(path));
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return -errno;
	if (!is_open(d, trace_id)) {
		if ((o = calloc(1, sizeof(*o))) == NULL)
			return -ENOMEM;
		snprintf(o->id, sizeof(o->id), "%s", trace_id);
		o->next = d->store->open;
		d->store->open = o;
	}
	return 0;
}

/* Removes a trace directory and everything in it (one level: traces hold
 * only files). */
static void remove_dir(const char *path)
{
	char sub[PATH_MAX];
	struct dirent *e;
	DIR *dir = opendir(path);

	if (dir != NULL) {
		while ((e = readdir(dir)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			unlink(sub);
		}
		closedir(dir);
	}
	rmdir(path);
}

static void stored_free(struct stored *s)
{
	free(s->files);
	free(s);
}

/* Inserts s keeping the list newest first. */
static void insert(struct daemon *d, struct stored *s)
{
	struct stored **pp = &d->store->list;

	while (*pp != NULL && (*pp)->created_us > s->created_us)
		pp = &(*pp)->next;
	s->next = *pp;
	*pp = s;
	d->store->n++;
	d->store->bytes += s->bytes;
}

/* fsync of a directory, so the renames and creations in it survive a crash
 * or a power cut. 0 or -errno. */
static int sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		r = -errno;
	close(fd);
	return r;
}

/* Writes s's manifest into dir durably: a temporary file, fsync'd, renamed
 * over the old one, then dir and (for its first) traces, its parent, fsync'd. On any
 * failure the previous manifest (if any) is left as it was. Touches nothing
 * of the daemon's: it runs on the thread pool. 0 or -errno. */
static int write_manifest_at(const char *dir, const char *traces, const struct stored *s)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	bool first;
	cJSON *root, *files, *f;
	char *text;
	size_t i;
	int fd, r = 0;

	root = cJSON_CreateObject();
	if (root == NULL)
		return -ENOMEM;
	cJSON_AddStringToObject(root, "trace_id", s->id);
	jsonint_add(root, "owner_uid", s->owner);
	jsonint_add(root, "created_us", s->created_us);
	cJSON_AddStringToObject(root, "state", msg_trace_state_name(s->state));
	jsonint_add(root, "processes", s->processes);
	files = cJSON_AddArrayToObject(root, "files");
	for (i = 0; i < s->nfiles; i++) {
		f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "name", s->files[i].name);
		jsonint_add(f, "bytes", s->files[i].bytes);
		jsonint_add(f, "pid", s->files[i].pid);
		jsonint_add(f, "rank", s->files[i].rank);
		cJSON_AddStringToObject(f, "host", s->files[i].host);
		cJSON_AddStringToObject(f, "job_id", s->files[i].job_id);
		cJSON_AddItemToArray(files, f);
	}
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (text == NULL)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/" MANIFEST, dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	first = access(path, F_OK) != 0;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		r = -errno;
	else {
		size_t len = strlen(text);
		ssize_t n;

		errno = 0;
		n = write(fd, text, len);
		if (n != (ssize_t)len)
			r = n < 0 && errno ? -errno : -ENOSPC;
		if (r == 0 && fsync(fd) != 0)
			r = -errno;
		if (close(fd) != 0 && r == 0)
			r = -errno;
		if (r == 0 && rename(tmp, path) != 0)
			r = -errno;
		if (r < 0)
			unlink(tmp);
	}
	cJSON_free(text);
	if (r == 0)
		r = sync_dir(dir);
	/* the trace's directory entry in traces/ is new only with its first
	 * manifest */
	if (r == 0 && first)
		r = sync_dir(traces);
	return r;
}

/* write_manifest_at for s's directory under d's store (start-up only: later
 * writes go through the writer below). */
static int write_manifest(struct daemon *d, const struct stored *s)
{
	char dir[PATH_MAX], traces[PATH_MAX];

	store_path(d, s->id, NULL, dir, sizeof(dir));
	traces_dir(d, traces, sizeof(traces));
	return write_manifest_at(dir, traces, s);
}

/* A manifest's number, or 0 when it is missing or not a sane count. */
static int64_t num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsNumber(v) && v->valuedouble > -1e18 && v->valuedouble < 1e18 ?
	       (int64_t)v->valuedouble : 0;
}

/* Reads trace id's manifest into *out. 0; -ENOENT when there is none (no
 * file of the trace was ever acknowledged); -EINVAL when it is there but
 * cannot be read (left alone: it may list acknowledged files). */
static int read_manifest(struct daemon *d, const char *id, struct stored **out)
{
	char path[PATH_MAX], *text = NULL;
	const cJSON *f, *files;
	struct stored *s = NULL;
	cJSON *root = NULL;
	struct stat st;
	size_t i = 0;
	int fd, state, r = -EINVAL;

	*out = NULL;
	store_path(d, id, MANIFEST, path, sizeof(path));
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -EINVAL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 22) ||
	    (text = malloc((size_t)st.st_size + 1)) == NULL ||
	    read(fd, text, (size_t)st.st_size) != st.st_size)
		goto out;
	root = cJSON_ParseWithLength(text, (size_t)st.st_size);
	files = cJSON_GetObjectItem(root, "files");
	if (!cJSON_IsArray(files))
		goto out;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto out;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->owner = (uid_t)num(root, "owner_uid");
	s->created_us = num(root, "created_us");
	s->processes = num(root, "processes") > 0 ? (size_t)num(root, "processes") : 0;
	s->state = MSG_TRACE_DONE;
	for (state = 0; state <= MSG_TRACE_CANCELLED; state++)
		if (cJSON_GetStringValue(cJSON_GetObjectItem(root, "state")) &&
		    strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(root, "state")),
		           msg_trace_state_name(state)) == 0)
			s->state = state;
	s->files = calloc((size_t)cJSON_GetArraySize(files) + 1, sizeof(*s->files));
	if (s->files == NULL) {
		free(s);
		s = NULL;
		goto out;
	}
	cJSON_ArrayForEach(f, files) {
		struct stored_file *sf = &s->files[i++];
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(f, "name"));
		const char *host = cJSON_GetStringValue(cJSON_GetObjectItem(f, "host"));
		const char *job = cJSON_GetStringValue(cJSON_GetObjectItem(f, "job_id"));

		snprintf(sf->name, sizeof(sf->name), "%s", name ? name : "");
		snprintf(sf->host, sizeof(sf->host), "%s", host ? host : "");
		snprintf(sf->job_id, sizeof(sf->job_id), "%s", job ? job : "");
		sf->bytes = num(f, "bytes");
		sf->pid = num(f, "pid");
		sf->rank = num(f, "rank");
		s->bytes += (uint64_t)sf->bytes;
	}
	s->nfiles = i;
	r = 0;
out:
	cJSON_Delete(root);
	free(text);
	close(fd);
	*out = s;
	return r;
}

/* Removes from a trace's directory every entry its manifest does not list
 * (the manifest itself excepted): a *.tmp of an upload or a manifest cut
 * short, a file renamed in but never acknowledged. unlink never follows a
 * link and leaves directories. */
static void remove_unlisted(const char *path, const struct stored *s)
{
	struct dirent *e;
	DIR *dh;

	if ((dh = opendir(path)) == NULL)
		return;
	while ((e = readdir(dh)) != NULL) {
		if (e->d_name[0] == '.' && (e->d_name[1] == 0 ||
		                            (e->d_name[1] == '.' && e->d_name[2] == 0)))
			continue;
		if (strcmp(e->d_name, MANIFEST) == 0 || store_file(s, e->d_name) != NULL)
			continue;
		log_info("trace %s: removing %s, which no acknowledgement recorded", s->id,
		         e->d_name);
		unlinkat(dirfd(dh), e->d_name, 0);
	}
	closedir(dh);
}

/* Drops from s the files its manifest lists that are not in dir (a
 * file recorded for a process that then failed, removed before the trace's
 * last manifest was written). True when any was dropped. */
static bool drop_missing(const char *dir, struct stored *s)
{
	char path[PATH_MAX + 200];
	struct stat st;
	size_t i, kept = 0;

	for (i = 0; i < s->nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, s->files[i].name);
		if (s->files[i].name[0] && lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			s->files[kept++] = s->files[i];
			continue;
		}
		log_warn("trace %s: %s is listed but missing; dropped from its list", s->id,
		         s->files[i].name);
		s->bytes -= (uint64_t)s->files[i].bytes;
	}
	i = s->nfiles;
	s->nfiles = kept;
	return kept != i;
}

/*
 * One gprofd per state directory: the state directory is the daemon's own
 * (0700, its uid), and an exclusive flock on <state_dir>/gprofd.lock, a
 * file only the daemon's uid can open (owndir.c), is taken before anything
 * in the store is read or changed and held (through d->store->lock_fd)
 * until exit; the kernel drops it when the process ends, however it ends.
 */
static int lock_state(struct daemon *d, struct perr *err)
{
	int dfd, fd;

	dfd = owndir_open(d->cfg.state_dir, 0700, "state directory", err);
	if (dfd < 0)
		return dfd;
	fd = owndir_lock(d->cfg.state_dir, dfd, err);
	close(dfd);
	if (fd < 0)
		return fd;
	d->store->lock_fd = fd;
	return 0;
}

int store_init(struct daemon *d, struct perr *err)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *e;
	struct stored *s;
	DIR *dh;
	bool dropped;
	int r;

	if ((d->store = calloc(1, sizeof(*d->store))) == NULL)
		return perr_set(err, -ENOMEM, "out of memory");
	d->store->lock_fd = -1;
	r = lock_state(d, err);
	if (r < 0)
		return r;
	traces_dir(d, dir, sizeof(dir));
	r = owndir_open(dir, 0700, "trace store", err);
	if (r < 0)
		return r;
	close(r);
	dh = opendir(dir);
	if (dh == NULL)
		return perr_set(err, -errno, "cannot read %s: %s", dir, strerror(errno));
	while ((e = readdir(dh)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		store_path(d, e->d_name, NULL, path, sizeof(path));
		r = read_manifest(d, e->d_name, &s);
		if (r == -ENOENT) {
			/* no manifest: no file of it was ever acknowledged */
			log_info("removing unfinished trace directory %s (nothing in it was "
			         "acknowledged)", path);
			remove_dir(path);
			continue;
		}
		if (r < 0) {
			log_warn("cannot read the manifest of %s: left as it is, not listed; "
			         "look at it, then remove it by hand", path);
			continue;
		}
		dropped = drop_missing(path, s);
		if (s->nfiles == 0) {
			/* a manifest left by a job for a trace deleted meanwhile */
			log_info("removing trace directory %s: none of its files is there", path);
			stored_free(s);
			remove_dir(path);
			continue;
		}
		if (s->state == MSG_TRACE_RUNNING) {
			/* the daemon stopped (killed, a crash, a full disk at the last
			 * manifest) while the trace ran: what it acknowledged stays */
			s->state = s->processes > 0 && s->nfiles >= s->processes ?
			           MSG_TRACE_DONE : MSG_TRACE_PARTIAL;
			log_warn("trace %s was interrupted (the daemon stopped before it ended): "
			         "keeping its %zu acknowledged file%s, as %s", s->id, s->nfiles,
			         s->nfiles == 1 ? "" : "s", msg_trace_state_name(s->state));
			dropped = true;
		}
		if (dropped && (r = write_manifest(d, s)) < 0)
			log_warn("trace %s: cannot rewrite its manifest (%s); it stays as it is and "
			         "is tried again at the next start", s->id, strerror(-r));
		remove_unlisted(path, s);
		insert(d, s);
	}
	closedir(dh);
	log_info("%zu stored traces, %llu bytes, in %s", d->store->n,
	         (unsigned long long)d->store->bytes, dir);
	store_retain(d);
	return 0;
}

void store_deinit(struct daemon *d)
{
	struct stored *s, *next;
	struct sopen *o;

	if (d->store == NULL)
		return;
	for (s = d->store->list; s != NULL; s = next) {
		next = s->next;
		stored_free(s);
	}
	while ((o = d->store->open) != NULL) {
		d->store->open = o->next;
		free(o);
	}
	if (d->store->lock_fd >= 0)
		close(d->store->lock_fd); /* the lock goes with it */
	free(d->store);
	d->store = NULL;
}

/* A copy of s (the writer gets its own). NULL when out of memory. */
static struct stored *stored_dup(const struct stored *s)
{
	struct stored *c = malloc(sizeof(*c));

	if (c == NULL)
		return NULL;
	*c = *s;
	c->next = NULL;
	c->files = calloc(s->nfiles + 1, sizeof(*c->files));
	if (c->files == NULL) {
		free(c);
		return NULL;
	}
	memcpy(c->files, s->files, s->nfiles * sizeof(*c->files));
	return c;
}

/* ---- the writer: every change to a trace's directory after start-up, one
 * at a time, in order, on the thread pool ----
 *
 * A manifest write fsyncs three times (tens of milliseconds on a loaded
 * disk): never on the loop. One job runs at a time, so the writes for one
 * trace land in the order they were asked (a trace's last manifest after
 * every "running" one). Removals happen on the loop at once; a job that
 * ends for a trace no longer kept removes what it wrote. A running manifest asked
 * while another for the same trace waits (not yet started) replaces it and
 * joins its waiters: many ranks finishing together cost a few writes. */

struct swaiter {
	struct swaiter *next;
	store_done_fn fn;
	void *arg;
};

struct sjob {
	struct sjob *next;
	struct daemon *d;
	uv_work_t req;
	bool final;                /* the trace has ended: prune what s does not list */
	char dir[PATH_MAX], traces[PATH_MAX];
	char id[64];
	struct stored *s;          /* owned */
	struct swaiter *waiters;
	int result;
};

static void job_work(uv_work_t *req)
{
	struct sjob *j = req->data;

	j->result = write_manifest_at(j->dir, j->traces, j->s);
	if (j->result == 0 && j->final)
		remove_unlisted(j->dir, j->s);
}

static void job_next(struct daemon *d);

static void job_done(uv_work_t *req, int status)
{
	struct sjob *j = req->data;
	struct daemon *d = j->d;
	struct swaiter *w, *next;

	(void)status;
	d->store->jobs = j->next;
	d->store->job_running = false;
	if (j->final && j->result < 0)
		log_err("trace %s: cannot write its final manifest (%s); the manifest written at "
		        "its last acknowledgement still lists its files, which the next start "
		        "keeps", j->id, strerror(-j->result));
	for (w = j->waiters; w != NULL; w = next) {
		next = w->next;
		w->fn(w->arg, j->result);
		free(w);
	}
	/* deleted (or ended with nothing) while this job wrote its manifest:
	 * no directory of it may stay */
	if (store_find(d, j->id) == NULL && !is_open(d, j->id))
		remove_dir(j->dir);
	if (j->s != NULL)
		stored_free(j->s);
	free(j);
	job_next(d);
}

static void job_next(struct daemon *d)
{
	struct sjob *j = d->store->jobs;

	if (j == NULL || d->store->job_running)
		return;
	d->store->job_running = true;
	j->req.data = j;
	if (uv_queue_work(d->loop, &j->req, job_work, job_done) < 0) {
		job_work(&j->req); /* the loop refuses work only while closing */
		job_done(&j->req, 0);
	}
}

/* A new job for trace id, taking s. */
static struct sjob *job_new(struct daemon *d, const char *id, struct stored *s)
{
	struct sjob *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->d = d;
	j->s = s;
	snprintf(j->id, sizeof(j->id), "%s", id);
	store_path(d, id, NULL, j->dir, sizeof(j->dir));
	traces_dir(d, j->traces, sizeof(j->traces));
	return j;
}

static void job_push(struct daemon *d, struct sjob *j)
{
	struct sjob **pp = &d->store->jobs;

	while (*pp != NULL)
		pp = &(*pp)->next;
	*pp = j;
	job_next(d);
}

/* Removes trace id's directory now (a few unlinks: a delete request's
 * reply then finds it gone). A manifest the writer was writing for it
 * meanwhile is removed when that job ends (job_done). */
static void remove_now(struct daemon *d, const char *id)
{
	char path[PATH_MAX];

	store_path(d, id, NULL, path, sizeof(path));
	remove_dir(path);
}

int store_record(struct daemon *d, struct stored *s, store_done_fn fn, void *arg)
{
	struct swaiter *w = calloc(1, sizeof(*w));
	struct sjob *j;

	if (s == NULL || w == NULL) {
		free(w);
		if (s != NULL)
			stored_free(s);
		return -ENOMEM;
	}
	w->fn = fn;
	w->arg = arg;
	/* a running manifest of this trace not yet started: this one replaces it */
	for (j = d->store->jobs; j != NULL; j = j->next)
		if (!(j == d->store->jobs && d->store->job_running) && !j->final &&
		    strcmp(j->id, s->id) == 0)
			break;
	if (j != NULL) {
		stored_free(j->s);
		j->s = s;
		w->next = j->waiters;
		j->waiters = w;
		return 0;
	}
	j = job_new(d, s->id, s);
	if (j == NULL) {
		free(w);
		stored_free(s);
		return -ENOMEM;
	}
	j->waiters = w;
	job_push(d, j);
	return 0;
}

void store_add(struct daemon *d, struct stored *s)
{
	struct stored *copy;
	struct sjob *j;

	close_open(d, s->id);
	if (s->nfiles == 0) {
		remove_now(d, s->id);
		stored_free(s);
		return;
	}
	/* the list has it at once; the writer gets a copy */
	copy = stored_dup(s);
	j = copy ? job_new(d, s->id, copy) : NULL;
	if (j == NULL) {
		if (copy != NULL)
			stored_free(copy);
		log_err("trace %s: out of memory writing its final manifest; the manifest of its "
		        "last acknowledgement stays", s->id);
	} else {
		j->final = true;
		job_push(d, j);
	}
	insert(d, s);
	store_retain(d);
}

struct stored *store_list(struct daemon *d)
{
	return d->store->list;
}

size_t store_count(struct daemon *d)
{
	return d->store->n;
}

uint64_t store_bytes(struct daemon *d)
{
	return d->store->bytes;
}

bool store_idle(struct daemon *d)
{
	return d->store->jobs == NULL;
}

struct stored *store_find(struct daemon *d, const char *trace_id)
{
	struct stored *s;

	for (s = d->store->list; s != NULL; s = s->next)
		if (strcmp(s->id, trace_id) == 0)
			return s;
	return NULL;
}

const struct stored_file *store_file(const struct stored *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->nfiles; i++)
		if (strcmp(s->files[i].name, name) == 0)
			return &s->files[i];
	return NULL;
}

void store_delete(struct daemon *d, struct stored *s)
{
	struct stored **pp;

	for (pp = &d->store->list; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	d->store->n--;
	d->store->bytes -= s->bytes;
	remove_now(d, s->id);
	stored_free(s);
}

void store_retain(struct daemon *d)
{
	int64_t cutoff = clock_now_us() - (int64_t)d->cfg.retention_max_age_s * 1000000;
	struct stored *s, *oldest;

	for (;;) {
		oldest = NULL;
		for (s = d->store->list; s != NULL; s = s->next)
			oldest = s;
		if (oldest == NULL)
			return;
		if (oldest->created_us >= cutoff && d->store->bytes <= d->cfg.retention_max_bytes)
			return;
		log_info("retention: deleting trace %s (%llu bytes, %s)", oldest->id,
		         (unsigned long long)oldest->bytes,
		         oldest->created_us < cutoff ? "older than retention.max_age" :
		         "over retention.max_bytes");
		d->cnt.retention_deleted++;
		store_delete(d, oldest);
	}
}
