/*
 * opsfile: what ops.c needs to read a file the job's profiler wrote, kept
 * apart from its parser: reading the file under the agent's rules
 * (opsfile_slurp), and pairing the flows kept from it (opsfile_unpaired).
 * Both are pure helpers: no state, nothing shared with other threads.
 */
#ifndef GPROF_AGENT_OPSFILE_H
#define GPROF_AGENT_OPSFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The file at path, opened without following a link: a regular file of
 * this process's user, no larger than cap; NUL-terminated, its length in
 * *len; the caller frees it. NULL with why[n] said (what names the file in
 * the message). */
char *opsfile_slurp(const char *path, const char *what, size_t cap, size_t *len, char *why,
                    size_t n);

/* Of n flow ends (id[i]; start[i]: an "s", else an "f"), marks in drop[]
 * every end whose id does not have exactly one start and one end among
 * them (a flow cut by the window's edge, or a repeated id): Perfetto and
 * HTA pair ends by id, and a lone end is an error to them. Returns how many
 * it marked, or -1 when out of memory (then it marks nothing). */
long opsfile_unpaired(const int64_t *id, const bool *start, size_t n, bool *drop);

#endif
