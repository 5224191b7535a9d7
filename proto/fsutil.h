/*
 * fsutil: file-system helpers the daemon, the agent and gprofctl share.
 */
#ifndef GPROF_FSUTIL_H
#define GPROF_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

/* Creates path and its missing parents (parents 0755, path itself mode).
 * An existing directory is fine. 0 or -errno. */
int fsutil_mkdir_p(const char *path, mode_t mode);

/* The daemon socket a client (the agent, gprofctl) uses when none is
 * given: $GPROF_SOCKET, else /run/gprofd/gprofd.sock when it exists (the
 * system service) or there is no $XDG_RUNTIME_DIR, else
 * $XDG_RUNTIME_DIR/gprofd/gprofd.sock (a user's daemon), written to buf. */
const char *fsutil_client_socket(char *buf, size_t size);

#endif
