/*
 * opsfile.c: reading the job's profiler files and pairing their flows
 * (opsfile.h). ops.c keeps a window's operators and the fwdbwd flows
 * between them by time, one event at a time, so a flow whose start lies in
 * the window and whose end lies after it (a forward operator at the
 * window's end, its backward in the next step) would be written half:
 * opsfile_unpaired finds such ends, in O(n log n) whatever the ids.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opsfile.h"

char *opsfile_slurp(const char *path, const char *what, size_t cap, size_t *len, char *why,
                    size_t n)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	ssize_t k;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, n, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		snprintf(why, n, "%s is not a regular file of this process's user", path);
		goto out;
	}
	if ((uint64_t)st.st_size > cap) {
		snprintf(why, n, "the %s (%lld MB) is larger than its cap of %zu MB "
		         "(with the other file, a quarter of the burst's budget: GPROF_AGENT_MAX_MB)",
		         what, (long long)(st.st_size >> 20), cap >> 20);
		goto out;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		snprintf(why, n, "no memory for the %s", what);
		goto out;
	}
	while (got < (size_t)st.st_size &&
	       (k = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)k;
	buf[got] = '\0';
	*len = got;
out:
	close(fd);
	return buf;
}

struct end {
	int64_t id;
	size_t at;
	bool start;
};

/* By id, then position. */
static int by_id(const void *a, const void *b)
{
	const struct end *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

long opsfile_unpaired(const int64_t *id, const bool *start, size_t n, bool *drop)
{
	struct end *e = malloc((n ? n : 1) * sizeof(*e));
	size_t i, j, k, starts;
	long marked = 0;

	if (e == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		e[i] = (struct end){ id[i], i, start[i] };
		drop[i] = false;
	}
	qsort(e, n, sizeof(*e), by_id);
	for (i = 0; i < n; i = j) {
		for (j = i + 1, starts = e[i].start; j < n && e[j].id == e[i].id; j++)
			starts += e[j].start;
		if (j - i == 2 && starts == 1)
			continue;
		for (k = i; k < j; k++)
			drop[e[k].at] = true;
		marked += (long)(j - i);
	}
	free(e);
	return marked;
}
