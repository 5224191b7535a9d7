/*
 * fsutil: file-system helpers the daemon and gprofctl share.
 */
#ifndef GPROF_FSUTIL_H
#define GPROF_FSUTIL_H

#include <sys/types.h>

/* Creates path and its missing parents (parents 0755, path itself mode).
 * An existing directory is fine. 0 or -errno. */
int fsutil_mkdir_p(const char *path, mode_t mode);

#endif
