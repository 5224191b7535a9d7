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

#include "fsutil.h"
#include "log.h"
#include "store.h"
#include "trace.h"

#define MANIFEST "manifest.json"

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

void store_file_name(const char *host, pid_t pid, int64_t rank, char *out, size_t size)
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
	snprintf(out, size, "%s_%d%s.%lld%09ld.pt.trace.json.gz", h, (int)pid, r,
	         (long long)ts.tv_sec, ts.tv_nsec);
}

int store_mkdir(struct daemon *d, const char *trace_id)
{
	char path[PATH_MAX];

	store_path(d, trace_id, NULL, path, sizeof(path));
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return -errno;
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
	struct stored **pp = &d->stored;

	while (*pp != NULL && (*pp)->created_us > s->created_us)
		pp = &(*pp)->next;
	s->next = *pp;
	*pp = s;
	d->nstored++;
	d->stored_bytes += s->bytes;
}

static int write_manifest(struct daemon *d, const struct stored *s)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	cJSON *root, *files, *f;
	char *text;
	size_t i;
	int fd, r = 0;

	root = cJSON_CreateObject();
	if (root == NULL)
		return -ENOMEM;
	cJSON_AddStringToObject(root, "trace_id", s->id);
	cJSON_AddNumberToObject(root, "owner_uid", (double)s->owner);
	cJSON_AddNumberToObject(root, "created_us", (double)s->created_us);
	cJSON_AddStringToObject(root, "state", msg_trace_state_name(s->state));
	files = cJSON_AddArrayToObject(root, "files");
	for (i = 0; i < s->nfiles; i++) {
		f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "name", s->files[i].name);
		cJSON_AddNumberToObject(f, "bytes", (double)s->files[i].bytes);
		cJSON_AddNumberToObject(f, "pid", (double)s->files[i].pid);
		cJSON_AddNumberToObject(f, "rank", (double)s->files[i].rank);
		cJSON_AddStringToObject(f, "host", s->files[i].host);
		cJSON_AddStringToObject(f, "job_id", s->files[i].job_id);
		cJSON_AddItemToArray(files, f);
	}
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (text == NULL)
		return -ENOMEM;
	store_path(d, s->id, MANIFEST, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		r = -errno;
	else {
		size_t len = strlen(text);

		if (write(fd, text, len) != (ssize_t)len)
			r = errno ? -errno : -EIO;
		if (close(fd) != 0 && r == 0)
			r = -errno;
		if (r == 0 && rename(tmp, path) != 0)
			r = -errno;
		if (r < 0)
			unlink(tmp);
	}
	cJSON_free(text);
	return r;
}

static struct stored *read_manifest(struct daemon *d, const char *id)
{
	char path[PATH_MAX], *text = NULL;
	const cJSON *f, *files;
	struct stored *s = NULL;
	cJSON *root = NULL;
	struct stat st;
	size_t i = 0;
	int fd, state;

	store_path(d, id, MANIFEST, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || st.st_size > (1 << 22) ||
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
	s->owner = (uid_t)cJSON_GetNumberValue(cJSON_GetObjectItem(root, "owner_uid"));
	s->created_us = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(root, "created_us"));
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
		sf->bytes = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(f, "bytes"));
		sf->pid = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(f, "pid"));
		sf->rank = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(f, "rank"));
		s->bytes += (uint64_t)sf->bytes;
	}
	s->nfiles = i;
out:
	cJSON_Delete(root);
	free(text);
	close(fd);
	return s;
}

int store_init(struct daemon *d, struct perr *err)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *e;
	struct stored *s;
	DIR *dh;
	int r;

	traces_dir(d, dir, sizeof(dir));
	r = fsutil_mkdir_p(dir, 0700);
	if (r < 0)
		return perr_set(err, r, "cannot create %s: %s (set state_dir to a writable "
		                "directory)", dir, strerror(-r));
	dh = opendir(dir);
	if (dh == NULL)
		return perr_set(err, -errno, "cannot read %s: %s", dir, strerror(errno));
	while ((e = readdir(dh)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		s = read_manifest(d, e->d_name);
		if (s == NULL) {
			store_path(d, e->d_name, NULL, path, sizeof(path));
			log_info("removing unfinished trace directory %s", path);
			remove_dir(path);
			continue;
		}
		insert(d, s);
	}
	closedir(dh);
	log_info("%zu stored traces, %llu bytes, in %s", d->nstored,
	         (unsigned long long)d->stored_bytes, dir);
	store_retain(d);
	return 0;
}

void store_deinit(struct daemon *d)
{
	struct stored *s, *next;

	for (s = d->stored; s != NULL; s = next) {
		next = s->next;
		stored_free(s);
	}
	d->stored = NULL;
	d->nstored = 0;
	d->stored_bytes = 0;
}

void store_add(struct daemon *d, const struct trace *t)
{
	char path[PATH_MAX];
	struct stored *s;
	size_t i, n = 0;
	int r;

	for (i = 0; i < t->n; i++)
		if (t->tp[i].state == MSG_TS_DONE)
			n++;
	store_path(d, t->id, NULL, path, sizeof(path));
	if (n == 0) {
		remove_dir(path);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->files = calloc(n, sizeof(*s->files))) == NULL) {
		free(s);
		log_err("trace %s: out of memory recording it", t->id);
		return;
	}
	snprintf(s->id, sizeof(s->id), "%s", t->id);
	s->owner = t->owner;
	s->created_us = t->created_us;
	s->state = t->state;
	for (i = 0; i < t->n; i++) {
		const struct tproc *tp = &t->tp[i];
		struct stored_file *sf;

		if (tp->state != MSG_TS_DONE)
			continue;
		sf = &s->files[s->nfiles++];
		snprintf(sf->name, sizeof(sf->name), "%s", tp->file);
		snprintf(sf->host, sizeof(sf->host), "%s", tp->host);
		snprintf(sf->job_id, sizeof(sf->job_id), "%s", tp->job_id);
		sf->bytes = tp->bytes;
		sf->pid = tp->pid;
		sf->rank = tp->rank;
		s->bytes += (uint64_t)tp->bytes;
	}
	r = write_manifest(d, s);
	if (r < 0)
		log_err("trace %s: cannot write its manifest (%s); it will be removed at the "
		        "next start", t->id, strerror(-r));
	insert(d, s);
	store_retain(d);
}

struct stored *store_find(struct daemon *d, const char *trace_id)
{
	struct stored *s;

	for (s = d->stored; s != NULL; s = s->next)
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
	char path[PATH_MAX];

	for (pp = &d->stored; *pp != NULL; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	d->nstored--;
	d->stored_bytes -= s->bytes;
	store_path(d, s->id, NULL, path, sizeof(path));
	remove_dir(path);
	stored_free(s);
}

void store_retain(struct daemon *d)
{
	int64_t cutoff = daemon_now_us() - (int64_t)d->cfg.retention_max_age_s * 1000000;
	struct stored *s, *oldest;

	for (;;) {
		oldest = NULL;
		for (s = d->stored; s != NULL; s = s->next)
			oldest = s;
		if (oldest == NULL)
			return;
		if (oldest->created_us >= cutoff && d->stored_bytes <= d->cfg.retention_max_bytes)
			return;
		log_info("retention: deleting trace %s (%llu bytes, %s)", oldest->id,
		         (unsigned long long)oldest->bytes,
		         oldest->created_us < cutoff ? "older than retention.max_age" :
		         "over retention.max_bytes");
		d->cnt.retention_deleted++;
		store_delete(d, oldest);
	}
}
