/*
 * store: trace files on disk, under <state_dir>/traces/<trace-id>/.
 *
 * Each trace directory holds the uploaded files (mode 0600, named by the
 * daemon: <host>_<pid>.<unix-ns>.pt.trace.json.gz) and a manifest.json.
 *
 * Invariant: nothing acknowledged is ever removed but by retention or a
 * delete request. A process's file is acknowledged (upload_end_reply, the
 * state done) only once it is fsync'd, renamed into place, and listed in
 * the trace's manifest, itself written durably (fsync'd, renamed, the
 * directories fsync'd) with state "running" (store_record). When the trace
 * ends the manifest is rewritten with its final state (store_add). So at
 * start-up: a directory with no manifest held nothing acknowledged and is
 * removed; a "running" manifest is a trace the daemon stopped under (kill
 * -9, a crash, a disk full at its last manifest): its listed files stay and
 * it becomes done or partial; anything a manifest does not list (*.tmp) is
 * removed; a manifest that cannot be read is left alone, unlisted.
 *
 * One daemon per state directory: store_init first takes an exclusive
 * flock on <state_dir>/gprofd.lock (holding the pid), before it reads or
 * changes anything; a second daemon stops there, naming the first's pid.
 *
 * Retention: after each trace is stored, at start-up and every hour, traces
 * older than retention.max_age are deleted, then the oldest until the
 * total is within retention.max_bytes.
 *
 * Manifests after start-up are written by one queue worked on the thread
 * pool, one job at a time (they are fsync'd: never on the loop), so a
 * trace's manifests land in the order asked. Removals (retention, delete,
 * a trace with nothing delivered) happen on the loop at once; a job that
 * ends for a trace no longer kept removes what it wrote.
 *
 * Ownership: the store's state is a struct store of store.c's own, made by
 * store_init and freed by store_deinit (d->store points at it). It owns
 * the list of stored traces (newest first); each struct stored owns its
 * file array. The writer's jobs own copies, never a trace or a stored
 * entry. A trace's directory is in use from store_mkdir until store_add
 * records the trace's end: a job ending meanwhile keeps it.
 *
 * Floor: an engine below the trace engine: it never sees a struct trace
 * (trace_stored makes its record) and calls nothing above it. Called by
 * main.c (init, retention, deinit), trace.c (add, find), deliver.c
 * (records), upload.c and kineto.c (names, paths, directories), htrace.c
 * and hinfo.c (list, download, delete, totals), component.c (totals).
 */
#ifndef GPROFD_STORE_H
#define GPROFD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "msg.h"

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
	size_t processes;          /* the trace's processes, those left out excepted */
	size_t nfiles;
	struct stored_file *files;
	uint64_t bytes;
};

/* Makes the store (d->store), locks the state directory, creates the
 * trace directory and loads what is stored (recovering interrupted
 * traces). 0 or -errno, with err saying which path failed or which pid
 * holds the lock; store_deinit is called after either. */
int store_init(struct daemon *d, struct perr *err);
/* Frees the store and drops the lock (after the loop has run out: no
 * manifest is being written). */
void store_deinit(struct daemon *d);

/* Path of a trace's directory or of one of its files. */
void store_path(struct daemon *d, const char *trace_id, const char *file,
                char *out, size_t size);

/* The name of a process's trace file, as TRACE_FORMAT.md has it:
 * <host>_<pid>.<unix-ns>.pt.trace.json.gz, with _rank<R> after the pid
 * when the rank is known (rank >= 0), so a job's directory sorts and reads
 * by rank; the host cut to characters a token allows (it may come from a
 * client), so every stored name is one the protocol can carry. */
void store_file_name(const char *host, pid_t pid, int64_t rank, int format, char *out,
                     size_t size);

/* Creates a trace's directory (uploads go there), in use until the
 * trace's store_add. 0 or -errno. */
int store_mkdir(struct daemon *d, const char *trace_id);

/* Called on the loop when a manifest asked for is on disk (result 0) or
 * could not be written (-errno). */
typedef void (*store_done_fn)(void *arg, int result);

/* Records s, a running trace's record (trace_stored: every file
 * acknowledged so far and every file waiting to be, fsync'd and renamed
 * into the trace's directory), as its manifest, written durably on the
 * thread pool. Takes s (NULL: out of memory). fn(arg, result) follows on
 * the loop; only on 0 may those processes be acknowledged (done). On an
 * error (a full disk) the caller removes its file and fails its process.
 * Returns 0 (fn will be called) or -ENOMEM (it will not). */
int store_record(struct daemon *d, struct stored *s, store_done_fn fn, void *arg);

/* Records a finished trace (s, from trace_stored; taken): writes its
 * manifest, adds it to the list, applies retention. A trace with no
 * delivered file leaves nothing. */
void store_add(struct daemon *d, struct stored *s);

/* The stored traces, newest first (follow ->next); how many; their bytes. */
struct stored *store_list(struct daemon *d);
size_t store_count(struct daemon *d);
uint64_t store_bytes(struct daemon *d);
/* Is no manifest waiting to be written? */
bool store_idle(struct daemon *d);

struct stored *store_find(struct daemon *d, const char *trace_id);
const struct stored_file *store_file(const struct stored *s, const char *name);

/* Deletes a stored trace's files and directory. */
void store_delete(struct daemon *d, struct stored *s);

/* Applies retention now. */
void store_retain(struct daemon *d);

#endif
