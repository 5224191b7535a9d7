/*
 * scratch: the files the agent makes for a burst (the trace it writes, the
 * memory snapshot the job's Python writes) before they are handed to the
 * daemon. scratch.c says where they live and why no other user can name,
 * take or keep them.
 */
#ifndef GPROF_AGENT_SCRATCH_H
#define GPROF_AGENT_SCRATCH_H

#include <stddef.h>

/* The directory scratch files go in: $GPROF_AGENT_TRACE_DIR, else
 * $TMPDIR, else /tmp. */
const char *scratch_base(void);

/* A new file with no name, open for reading and writing (mode 0600, the
 * process's own): it disappears with its last descriptor, however the
 * process ends. The descriptor (O_CLOEXEC), or a negative errno with why
 * saying what failed and what to do. */
int scratch_new(char *why, size_t n);

/* Gives what fd holds a name, when the daemon could not take it: a new
 * file <base>/gprof-<pid>-<trace_id>-XXXXXX<suffix> (a random part, made
 * with O_EXCL, mode 0600) with a copy of it. 0 and the name in path, or a
 * negative errno. */
int scratch_keep(int fd, const char *trace_id, const char *suffix, char *path, size_t n);

#endif
