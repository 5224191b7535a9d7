/*
 * owndir: the daemon's own directories (the state directory, the socket's)
 * and the lock that keeps one gprofd per state directory (issue 43, case 1).
 *
 * Invariants:
 * - A directory the daemon keeps anything in is owned by its uid and
 *   writable by no one else. One it makes gets exactly the mode asked for
 *   (fchmod, whatever the umask); one it finds with more bits than that is
 *   tightened (with a warning) when it is the daemon's, refused with a
 *   message when it is not. Checks are made on an open descriptor, never
 *   on a path that could change between check and use; a link is followed
 *   only when it is the daemon's uid's (an administrator's).
 * - The lock, <state_dir>/gprofd.lock, is a regular file of the daemon's
 *   uid, mode 0600, with one link, in that 0700 directory: no other user
 *   can open it, so none can hold it. A lock file that was ever readable by
 *   others (an older gprofd made it 0644 in a 0755 directory) may be open
 *   in another user's process, which could flock it at any time: it is
 *   replaced by a fresh file (made, locked, then renamed over it) and the
 *   old one is left to whoever still holds it.
 * - Replacing is serialised by a flock on the state directory itself, and
 *   whatever is locked is checked to still be the file under the name
 *   (else the lock is taken again): two daemons starting at once never
 *   both run.
 * - A lock held by a process of another uid is never a gprofd of this
 *   directory: the message names it (from /proc/locks) and says what to do.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"
#include "owndir.h"

#define LOCKFILE "gprofd.lock"
/* Rounds of "locked, but the name points elsewhere now": each means a
 * daemon replaced the file meanwhile, which happens once per directory. */
#define LOCK_TRIES 8
/* Holders of one lock read from /proc/locks (flock holders: one, and the
 * processes a descriptor was inherited by show as that one). */
#define HOLDERS_MAX 4

int owndir_open(const char *path, mode_t mode, const char *what, struct perr *err)
{
	struct stat st;
	bool made = lstat(path, &st) != 0 && errno == ENOENT;
	int fd, r;

	r = fsutil_mkdir_p(path, mode);
	if (r < 0)
		return perr_set(err, r, "cannot create the %s %s: %s (give a directory gprofd may "
		                "create)", what, path, strerror(-r));
	/* a link is followed only when it is the daemon's own (an
	 * administrator's): one another user planted could point gprofd at a
	 * directory it would then take over */
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && st.st_uid != geteuid())
		return perr_set(err, -EPERM, "the %s %s is a link of uid %u, not gprofd's (uid %u): "
		                "give the directory itself", what, path, (unsigned)st.st_uid,
		                (unsigned)geteuid());
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return perr_set(err, -errno, "cannot open the %s %s: %s", what, path,
		                strerror(errno));
	if (fstat(fd, &st) != 0) {
		r = perr_set(err, -errno, "cannot stat the %s %s: %s", what, path, strerror(errno));
		goto fail;
	}
	if (st.st_uid != geteuid()) {
		r = perr_set(err, -EPERM, "the %s %s belongs to uid %u, not to gprofd's uid %u: "
		             "give gprofd a directory of its own, or chown it", what, path,
		             (unsigned)st.st_uid, (unsigned)geteuid());
		goto fail;
	}
	/* one made just now has mode less the umask: given mode exactly;
	 * one found with more than mode is tightened */
	if ((made && (st.st_mode & 07777) != mode) || (st.st_mode & 07777 & ~mode) != 0) {
		if (!made)
			log_warn("the %s %s had mode %04o: set to %04o (other users must not %s it)",
			         what, path, (unsigned)(st.st_mode & 07777), (unsigned)mode,
			         (mode & 0055) ? "write into" : "open anything in");
		if (fchmod(fd, mode) != 0) {
			r = perr_set(err, -errno, "cannot set the mode of the %s %s to %04o: %s",
			             what, path, (unsigned)mode, strerror(errno));
			goto fail;
		}
	}
	return fd;
fail:
	close(fd);
	return r;
}

/* The pids holding a lock on (dev, ino), from /proc/locks; their number
 * (at most max), 0 when none is visible (another pid namespace). */
static size_t lock_holders(dev_t dev, ino_t ino, pid_t *out, size_t max)
{
	char line[256];
	unsigned mj, mn;
	unsigned long long in;
	long pid;
	size_t n = 0;
	FILE *f = fopen("/proc/locks", "re");

	if (f == NULL)
		return 0;
	while (n < max && fgets(line, sizeof(line), f) != NULL) {
		/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" */
		if (strstr(line, "->") != NULL ||
		    sscanf(line, "%*d: %*s %*s %*s %ld %x:%x:%llu", &pid, &mj, &mn, &in) != 4)
			continue;
		if (pid > 0 && in == (unsigned long long)ino && mj == major(dev) && mn == minor(dev))
			out[n++] = (pid_t)pid;
	}
	fclose(f);
	return n;
}

/* The uid of pid (from its /proc directory); -1 if it is gone. */
static long pid_uid(pid_t pid, char *comm, size_t n)
{
	char path[64];
	struct stat st;
	FILE *f;

	snprintf(comm, n, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if ((f = fopen(path, "re")) != NULL) {
		if (fgets(comm, (int)n, f) != NULL)
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) == 0 ? (long)st.st_uid : -1;
}

/* A holder of the lock on st of another uid than the daemon's: its pid
 * (0: none), with its command and uid. */
static pid_t foreign_holder(const struct stat *st, char *comm, size_t n, long *uid)
{
	pid_t pids[HOLDERS_MAX];
	size_t k = lock_holders(st->st_dev, st->st_ino, pids, HOLDERS_MAX), i;

	for (i = 0; i < k; i++) {
		*uid = pid_uid(pids[i], comm, n);
		if (*uid >= 0 && (uid_t)*uid != geteuid())
			return pids[i];
	}
	return 0;
}

/* The message for a lock someone holds: another gprofd (a holder of the
 * daemon's uid, or none visible), or another user's process (-EPERM). */
static int held(const char *dir, const char *path, const struct stat *st, int fd,
                struct perr *err)
{
	pid_t pids[1];
	char pid[32] = "", comm[64];
	long uid;
	pid_t who = foreign_holder(st, comm, sizeof(comm), &uid);
	ssize_t k;

	if (who > 0)
		return perr_set(err, -EPERM, "%s is held by pid %d (%s, uid %ld), not a gprofd "
		                "(uid %u); an older gprofd left it readable by all: stop that "
		                "process, or remove the file, and start gprofd again", path, (int)who,
		                comm, uid, (unsigned)geteuid());
	if (lock_holders(st->st_dev, st->st_ino, pids, 1) > 0)
		snprintf(pid, sizeof(pid), "%d", (int)pids[0]);
	else if (fd >= 0 && (k = pread(fd, pid, sizeof(pid) - 1, 0)) > 0) {
		pid[k] = 0;
		pid[strcspn(pid, "\n")] = 0;
	}
	return perr_set(err, -EBUSY, "another gprofd (pid %s) is using the state directory %s "
	                "(it holds %s): stop it first, or give this one another --state-dir; "
	                "nothing was changed", pid[0] ? pid : "unknown", dir, path);
}

/* The lock file, opened and checked: a regular file of the daemon's uid
 * with one link; *tainted when others could ever have opened it. */
static int open_lock(int dfd, const char *path, bool *tainted, struct stat *st,
                     struct perr *err)
{
	int fd = openat(dfd, LOCKFILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
	                0600);

	if (fd < 0)
		return perr_set(err, -errno, "cannot open %s: %s%s", path, strerror(errno),
		                errno == ELOOP ? " (it is a link: remove it)" : "");
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_uid != geteuid() ||
	    st->st_nlink != 1) {
		int r = perr_set(err, -EPERM, "%s is not gprofd's lock file (a %s of uid %u, "
		                 "%u links): someone else put it there; remove it and start gprofd "
		                 "again", path, S_ISREG(st->st_mode) ? "file" : S_ISDIR(st->st_mode) ?
		                 "directory" : "special file", (unsigned)st->st_uid,
		                 (unsigned)st->st_nlink);

		close(fd);
		return r;
	}
	*tainted = (st->st_mode & 077) != 0;
	if (*tainted)
		fchmod(fd, 0600); /* no new opener from here on */
	return fd;
}

/* Is fd still the file named LOCKFILE in dfd? */
static bool still_named(int dfd, const struct stat *st)
{
	struct stat now;

	return fstatat(dfd, LOCKFILE, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st->st_dev &&
	       now.st_ino == st->st_ino;
}

/* Replaces the tainted lock file (st) with a fresh one, locked; the fresh
 * descriptor, or a negative errno (-EAGAIN: the name changed meanwhile,
 * look again). */
static int replace_lock(int dfd, const char *dir, const char *path, const struct stat *st,
                        struct perr *err)
{
	char tmp[PATH_MAX];
	int fd = -1, r;

	/* one replacer at a time: the directory's lock (a holder of another
	 * uid opened the directory while it was loose: say so, with what to do) */
	if (flock(dfd, LOCK_EX | LOCK_NB) != 0) {
		struct stat ds;
		char comm[64];
		long uid;
		pid_t who = fstat(dfd, &ds) == 0 ? foreign_holder(&ds, comm, sizeof(comm), &uid) : 0;

		if (who > 0)
			return perr_set(err, -EPERM, "%s, left readable by all by an older gprofd, "
			                "and its directory are held by pid %d (%s, uid %ld), not a "
			                "gprofd: stop that process and start gprofd again", path,
			                (int)who, comm, uid);
		return perr_set(err, -EBUSY, "another gprofd is starting on the state directory "
		                "%s (it is replacing the lock file): try again", dir);
	}
	if (!still_named(dfd, st)) {
		r = -EAGAIN;
		goto out;
	}
	if (snprintf(tmp, sizeof(tmp), "%s/" LOCKFILE ".XXXXXX", dir) >= (int)sizeof(tmp)) {
		r = perr_set(err, -ENAMETOOLONG, "%s: the path is too long", dir);
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0600) != 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 ||
	    rename(tmp, path) != 0) {
		r = perr_set(err, -errno, "cannot replace %s (it was readable by other users): %s",
		             path, strerror(errno));
		if (fd >= 0) {
			unlink(tmp);
			close(fd);
		}
		fd = -1;
		goto out;
	}
	log_warn("%s was readable by other users (an older gprofd made it so), and any of them "
	         "could have held it to keep gprofd from starting: replaced by a private one",
	         path);
	r = fd;
out:
	flock(dfd, LOCK_UN);
	return r;
}

int owndir_lock(const char *dir, int dfd, struct perr *err)
{
	char path[PATH_MAX], pid[32];
	struct stat st;
	bool tainted = false;
	int fd = -1, r, tries, n;

	if (snprintf(path, sizeof(path), "%s/" LOCKFILE, dir) >= (int)sizeof(path))
		return perr_set(err, -ENAMETOOLONG, "%s: the path is too long", dir);
	for (tries = 0; tries < LOCK_TRIES; tries++) {
		fd = open_lock(dfd, path, &tainted, &st, err);
		if (fd < 0)
			return fd;
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			r = -errno;
			if (r != -EWOULDBLOCK) {
				close(fd);
				return perr_set(err, r, "cannot lock %s: %s", path, strerror(-r));
			}
			if (!tainted) {
				r = held(dir, path, &st, fd, err);
				close(fd);
				return r;
			}
			/* held, and others could open it: another user's process,
			 * or a gprofd of ours (held() tells them apart) */
			r = held(dir, path, &st, fd, err);
			if (r == -EBUSY) {
				close(fd);
				return r;
			}
		} else if (!tainted) {
			if (still_named(dfd, &st))
				break; /* the lock */
			close(fd); /* replaced meanwhile: that one is the lock now */
			fd = -1;
			continue;
		}
		/* tainted: held by another user, or ours now but open elsewhere */
		r = replace_lock(dfd, dir, path, &st, err);
		close(fd);
		fd = -1;
		if (r == -EAGAIN)
			continue;
		if (r < 0)
			return r;
		fd = r;
		if (fstat(fd, &st) == 0 && still_named(dfd, &st))
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		return perr_set(err, -EBUSY, "cannot lock %s: it was replaced %d times while this "
		                "gprofd started (are several starting at once?); try again", path,
		                LOCK_TRIES);
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_warn("cannot write the pid into %s: %s", path, strerror(errno));
	return fd;
}
