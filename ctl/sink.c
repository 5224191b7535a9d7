/*
 * sink: one downloaded file (ctl.h). Data goes to an unnamed file in <dir>
 * (O_TMPFILE), which gets a name only once the daemon's download_end
 * agrees on size and CRC-32: linked straight to <dir>/<name> when no file
 * has that name (one atomic step), else linked as <dir>/.<name>.part and
 * renamed over the old file (which stays whole until then). So a gprofctl
 * killed mid-download (even by SIGKILL) leaves nothing behind; only a kill
 * between that link and the rename, when overwriting, can leave the .part,
 * which the next download of the name replaces. Where the file system has
 * no O_TMPFILE, the data goes to the .part file from the start; any
 * failure gprofctl sees removes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "ctl.h"
#include "fsutil.h"

int sink_open(struct sink *s, const char *dir, const char *name, uint32_t transfer,
              uint64_t expected, char *err, size_t errlen)
{
	int r, fd;

	memset(s, 0, sizeof(*s));
	r = fsutil_mkdir_p(dir, 0755);
	if (r < 0) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(-r));
		return -1;
	}
	snprintf(s->path, sizeof(s->path), "%s/%s", dir, name);
	snprintf(s->tmp, sizeof(s->tmp), "%s/.%s.part", dir, name);
	/* 0600 whatever the umask, as the daemon keeps them: a trace shows the
	 * program's code and data, and is its owner's to share */
	fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0 && (s->f = fdopen(fd, "wb")) == NULL)
		close(fd);
	s->unnamed = s->f != NULL;
	if (s->f == NULL) {
		fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 && (fchmod(fd, 0600) != 0 || (s->f = fdopen(fd, "wb")) == NULL))
			close(fd);
	}
	if (s->f == NULL) {
		snprintf(err, errlen, "cannot write %s: %s", s->tmp, strerror(errno));
		return -1;
	}
	s->transfer = transfer;
	s->expected = expected;
	s->crc = (uint32_t)crc32(0L, Z_NULL, 0);
	return 0;
}

int sink_write(struct sink *s, const struct frame *f, char *err, size_t errlen)
{
	if (f->offset != s->bytes) {
		snprintf(err, errlen, "download out of order at byte %llu",
		         (unsigned long long)s->bytes);
		return -1;
	}
	if (fwrite(f->data, 1, f->len, s->f) != f->len) {
		snprintf(err, errlen, "writing %s failed: %s", s->tmp, strerror(errno));
		return -1;
	}
	s->crc = (uint32_t)crc32(s->crc, f->data, (uInt)f->len);
	s->bytes += f->len;
	return 0;
}

void sink_abort(struct sink *s)
{
	if (s->f != NULL) {
		fclose(s->f);
		s->f = NULL;
		if (!s->unnamed)
			unlink(s->tmp);
	}
}

int sink_finish(struct sink *s, const struct msg_download_end *e, char *err, size_t errlen)
{
	const char *from = s->tmp;
	int r = 0;

	if ((uint64_t)e->bytes != s->bytes || s->bytes != s->expected ||
	    (uint32_t)e->crc32 != s->crc) {
		snprintf(err, errlen, "download of %s is damaged (%llu of %llu bytes, CRC %08x vs "
		         "%08llx)", s->path, (unsigned long long)s->bytes,
		         (unsigned long long)s->expected, s->crc, (unsigned long long)e->crc32);
		sink_abort(s);
		return -1;
	}
	if (fflush(s->f) != 0) {
		snprintf(err, errlen, "writing %s failed: %s", s->tmp, strerror(errno));
		sink_abort(s);
		return -1;
	}
	if (s->unnamed) {
		char self[64];

		/* the name it gets once whole: linkat through /proc needs no
		 * privilege; straight to its name when that is free */
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fileno(s->f));
		if (linkat(AT_FDCWD, self, AT_FDCWD, s->path, AT_SYMLINK_FOLLOW) == 0) {
			from = NULL;
		} else if (errno != EEXIST ||
		           (unlink(s->tmp), linkat(AT_FDCWD, self, AT_FDCWD, s->tmp,
		                                   AT_SYMLINK_FOLLOW) != 0)) {
			snprintf(err, errlen, "cannot write %s: %s", s->path, strerror(errno));
			fclose(s->f);
			s->f = NULL;
			return -1;
		}
	}
	if (fclose(s->f) != 0) {
		snprintf(err, errlen, "writing %s failed: %s", s->path, strerror(errno));
		r = -1;
	}
	s->f = NULL;
	if (from == NULL) { /* already named: a failed close leaves no half file */
		if (r < 0)
			unlink(s->path);
		return r;
	}
	if (r == 0 && rename(from, s->path) != 0) {
		snprintf(err, errlen, "cannot rename %s: %s", from, strerror(errno));
		r = -1;
	}
	if (r < 0)
		unlink(from);
	return r;
}
