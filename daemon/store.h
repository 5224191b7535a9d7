/*
 * store: trace files on disk, under <state_dir>/traces/<trace-id>/.
 *
 * Each finished trace directory holds the uploaded files (mode 0600, named
 * by the daemon: <host>_<pid>.<unix-ns>.pt.trace.json.gz) and a
 * manifest.json written last, by rename, so a directory without a
 * manifest is an unfinished trace: at start-up such directories (and any
 * *.tmp file) are leftovers of a crash and are removed.
 *
 * Retention: after each trace is stored, at start-up and every hour, traces
 * older than retention.max_age are deleted, then the oldest until the
 * total is within retention.max_bytes.
 *
 * Ownership: the daemon owns the list of stored traces (d->stored, newest
 * first); each struct stored owns its file array.
 */
#ifndef GPROFD_STORE_H
#define GPROFD_STORE_H

#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "msg.h"

struct trace;

struct stored_file {
	char name[160];
	int64_t bytes, pid, rank;
	char host[64];
	char job_id[MSG_JOB_ID_MAX + 1]; /* "" unknown (a manifest from before it was kept) */
};

struct stored {
	struct stored *next;
	char id[64];
	uid_t owner;
	int64_t created_us;
	int state;
	size_t nfiles;
	struct stored_file *files;
	uint64_t bytes;
};

/* Creates the trace directory and loads what is stored. 0 or -errno, with
 * err saying which path failed. */
int store_init(struct daemon *d, struct perr *err);
void store_deinit(struct daemon *d);

/* Path of a trace's directory or of one of its files. */
void store_path(struct daemon *d, const char *trace_id, const char *file,
                char *out, size_t size);

/* The name of a process's trace file, as TRACE_FORMAT.md has it:
 * <host>_<pid>.<unix-ns>.pt.trace.json.gz, with _rank<R> after the pid
 * when the rank is known (rank >= 0), so a job's directory sorts and reads
 * by rank; the host cut to characters a token allows (it may come from a
 * client), so every stored name is one the protocol can carry. */
void store_file_name(const char *host, pid_t pid, int64_t rank, char *out, size_t size);

/* Creates a trace's directory (uploads go there). 0 or -errno. */
int store_mkdir(struct daemon *d, const char *trace_id);

/* Records a finished trace: writes its manifest, adds it to the list,
 * applies retention. A trace with no delivered file leaves nothing. */
void store_add(struct daemon *d, const struct trace *t);

struct stored *store_find(struct daemon *d, const char *trace_id);
const struct stored_file *store_file(const struct stored *s, const char *name);

/* Deletes a stored trace's files and directory. */
void store_delete(struct daemon *d, struct stored *s);

/* Applies retention now. */
void store_retain(struct daemon *d);

#endif
