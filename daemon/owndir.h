/*
 * owndir: the daemon's own directories and the one-daemon lock of a state
 * directory (owndir.c says why each check is there).
 */
#ifndef GPROFD_OWNDIR_H
#define GPROFD_OWNDIR_H

#include <stdbool.h>
#include <sys/types.h>

#include "perr.h"

/* Makes path (its parents 0755) with exactly mode, or opens it as it is:
 * a directory (not a link) of the daemon's uid; more bits than mode are
 * taken away, with a warning. The directory's descriptor (the caller
 * closes it), or a negative errno with err saying what to do. what names
 * it in messages ("state directory"). */
int owndir_open(const char *path, mode_t mode, const char *what, struct perr *err);

/* Takes the exclusive lock of the state directory dir (dfd, from
 * owndir_open), replacing a lock file others could open; writes the pid
 * into it. The descriptor that holds the lock until it is closed, or a
 * negative errno: -EBUSY another gprofd holds it, -EPERM a file or holder
 * of another user (err names it and says what to do). */
int owndir_lock(const char *dir, int dfd, struct perr *err);

#endif
