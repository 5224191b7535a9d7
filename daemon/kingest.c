/*
 * kingest: see kingest.h. Runs on libuv's thread pool: it touches nothing
 * but its struct kingest and the files it names.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "kingest.h"
#include "kstep.h"

/* Counts a pattern across buffer boundaries. The pattern's first byte
 * occurs nowhere else in it, so on a mismatch matching restarts at 0 or 1. */
struct counter {
	const char *pat;
	size_t len, matched;
	int64_t count;
};

static void count_feed(struct counter *c, const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (p[i] == (uint8_t)c->pat[c->matched]) {
			if (++c->matched == c->len) {
				c->count++;
				c->matched = 0;
			}
		} else
			c->matched = p[i] == (uint8_t)c->pat[0];
	}
}

void kingest_run(struct kingest *in)
{
	uint8_t buf[1 << 16];
	struct counter steps = { "\"Optimizer.step#", 16, 0, 0 };
	struct kstep ks = { 0 };
	uint64_t copied = 0;
	char last = 0;
	struct stat st;
	ssize_t n;
	gzFile gz = NULL;
	int fd, out = -1;
	size_t i;

	in->result = -1;
	/* The path is the traced user's to shape: O_NONBLOCK so a FIFO (or a
	 * device) put there opens at once instead of holding this pool thread
	 * until a writer comes, O_NOFOLLOW so a link is not followed; then
	 * nothing but a regular file of that user is read. */
	fd = open(in->src, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(in->why, sizeof(in->why), "cannot read the trace Kineto wrote: %s",
		         strerror(errno));
		goto out;
	}
	/* never follow what the traced user put there to a file it cannot read */
	if (!S_ISREG(st.st_mode) || st.st_uid != in->uid) {
		snprintf(in->why, sizeof(in->why), "%s is not a regular file of the traced user; "
		         "not collected", in->src);
		goto out;
	}
	if ((uint64_t)st.st_size > in->limit) {
		snprintf(in->why, sizeof(in->why), "the trace is larger than limits.trace_bytes");
		goto out;
	}
	out = open(in->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0 || (gz = gzdopen(out, "wb6")) == NULL) {
		snprintf(in->why, sizeof(in->why), "cannot store the trace: %s", strerror(errno));
		if (out >= 0)
			close(out);
		goto out;
	}
	/* Kineto writes no ProfilerStep#: make them from the optimizer steps
	 * (kstep.c) and put them first in traceEvents while compressing. */
	if (kstep_scan(fd, in->pid, &ks) < 0 || lseek(fd, 0, SEEK_SET) != 0)
		kstep_free(&ks);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		size_t cut = (size_t)n;
		bool insert = false;

		/* a file that grows while it is read stops at the limit too */
		if (copied + (uint64_t)n > in->limit) {
			snprintf(in->why, sizeof(in->why), "the trace is larger than "
			         "limits.trace_bytes");
			gzclose(gz);
			unlink(in->tmp);
			goto out;
		}
		count_feed(&steps, buf, (size_t)n);
		if (ks.len && ks.insert_at > copied && ks.insert_at <= copied + (uint64_t)n) {
			cut = (size_t)(ks.insert_at - copied);
			insert = true;
		}
		if (gzwrite(gz, buf, (unsigned)cut) != (int)cut ||
		    (insert && gzwrite(gz, ks.events, (unsigned)ks.len) != (int)ks.len) ||
		    (cut < (size_t)n &&
		     gzwrite(gz, buf + cut, (unsigned)((size_t)n - cut)) != (int)((size_t)n - cut))) {
			snprintf(in->why, sizeof(in->why), "storing the trace failed (disk full?)");
			gzclose(gz);
			unlink(in->tmp);
			goto out;
		}
		copied += (uint64_t)n;
		for (i = (size_t)n; i > 0; i--)
			if (buf[i - 1] != ' ' && buf[i - 1] != '\n' && buf[i - 1] != '\r' &&
			    buf[i - 1] != '\t') {
				last = (char)buf[i - 1];
				break;
			}
	}
	if (gzclose(gz) != Z_OK) {
		snprintf(in->why, sizeof(in->why), "storing the trace failed (disk full?)");
		unlink(in->tmp);
		goto out;
	}
	if (last != '}') {
		/* still being written by a Kineto that does not rename: wait */
		unlink(in->tmp);
		in->result = 1;
		goto out;
	}
	/* durable before deliver.c renames it into the store and it is
	 * acknowledged */
	out = open(in->tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0 || fsync(out) != 0 || fstat(out, &st) != 0) {
		snprintf(in->why, sizeof(in->why), "flushing the trace to disk failed: %s",
		         strerror(errno));
		if (out >= 0)
			close(out);
		unlink(in->tmp);
		goto out;
	}
	close(out);
	in->bytes = st.st_size;
	/* the process's own optimizer steps (GPU rows repeat the annotation);
	 * the plain count where the scan could not read the events */
	in->steps = ks.optimizer_steps > 0 ? ks.optimizer_steps : steps.count;
	in->made_steps = ks.made;
	in->result = 0;
out:
	kstep_free(&ks);
	if (fd >= 0)
		close(fd);
}
