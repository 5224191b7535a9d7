/*
 * scratch.c: where the agent's burst files live (issue 43, cases 4 and 7).
 *
 * The agent runs in a job on a shared host, and its files go to a shared
 * directory (/tmp by default). A name another user can predict there
 * (gprof-<pid>-<trace-id>...) can be taken first, by a file, a link or a
 * FIFO, and a rank's part then fails; a named file also outlives a
 * process killed before it handed the file over (the agent installs no
 * signal handler: STYLE.md rule 6).
 *
 * So a burst's file has no name at all: O_TMPFILE makes an inode in the
 * directory that is in no directory entry, so there is nothing to predict
 * or take, and the kernel frees it with its last descriptor, however the
 * process ends (SIGTERM, SIGKILL, a crash). The trace is written to it,
 * and uploaded from it (link.c reads the descriptor); the job's Python
 * writes the memory snapshot through /proc/self/fd/<fd> (memsnap.c).
 * Where the file system has no O_TMPFILE (NFS, old kernels), the fallback
 * is the classic one: a name with a random part (mkostemp: O_EXCL, 0600),
 * unlinked as soon as it is open, so the window in which it has a name is
 * two system calls long and the name cannot be guessed.
 *
 * Either way the descriptor is checked (fstat: a regular file of the
 * process's uid with no link) before anything is written to it.
 *
 * Only when the daemon cannot take the file is it given a name
 * (scratch_keep): a new mkostemp name (random part, O_EXCL, 0600, never
 * following a link) with a copy of the bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scratch.h"
#include "state.h"

const char *scratch_base(void)
{
	const char *dir = getenv("GPROF_AGENT_TRACE_DIR");

	if (dir == NULL || !*dir)
		dir = getenv("TMPDIR");
	if (dir == NULL || !*dir)
		dir = "/tmp";
	return dir;
}

int scratch_new(char *why, size_t n)
{
	const char *base = scratch_base();
	char path[512];
	struct stat st;
	int fd, r;

	fd = open(base, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		/* no O_TMPFILE here: a random name, gone at once */
		if ((size_t)snprintf(path, sizeof(path), "%s/gprof-%d-XXXXXX", base, (int)A.pid) >=
		    sizeof(path)) {
			snprintf(why, n, "the trace directory %s is too long (GPROF_AGENT_TRACE_DIR, "
			         "TMPDIR)", base);
			return -ENAMETOOLONG;
		}
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0) {
		r = -errno;
		snprintf(why, n, "cannot create a file in %s: %s (the agent writes its traces to "
		         "$GPROF_AGENT_TRACE_DIR, else $TMPDIR or /tmp: point it at a directory "
		         "this user may write)", base, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_nlink != 0) {
		close(fd);
		snprintf(why, n, "the file made in %s is not a private one (a regular file of "
		         "this user with no name): not used", base);
		return -EPERM;
	}
	return fd;
}

int scratch_keep(int fd, const char *trace_id, const char *suffix, char *path, size_t n)
{
	off_t off = 0;
	struct stat st;
	ssize_t k;
	int out, r = 0;

	if ((size_t)snprintf(path, n, "%s/gprof-%d-%s-XXXXXX%s", scratch_base(), (int)A.pid,
	                     trace_id, suffix) >= n)
		return -ENAMETOOLONG;
	if (fstat(fd, &st) != 0)
		return -errno;
	out = mkostemps(path, (int)strlen(suffix), O_CLOEXEC);
	if (out < 0)
		return -errno;
	while (off < st.st_size) {
		k = sendfile(out, fd, &off, (size_t)(st.st_size - off));
		if (k <= 0) {
			r = k < 0 ? -errno : -EIO;
			break;
		}
	}
	if (close(out) != 0 && r == 0)
		r = -errno;
	if (r < 0)
		unlink(path);
	return r;
}
