/*
 * deliver: the one path by which a finished trace file becomes a
 * process's delivered part, whoever produced it (an agent's upload,
 * upload.c; a file Kineto wrote, kineto.c; any later back end).
 *
 * The producer writes the file whole into the trace's directory under a
 * temporary name and fsyncs it (on the thread pool), then calls
 * deliver_file. Here, on the loop: a part that ended meanwhile stores
 * nothing (the file is removed); else the file is renamed into place,
 * counted on its part (tproc.file, .stored_bytes: the size on disk, the one
 * count retention uses), and recorded in the trace's manifest
 * (store_record, durable). Only once that is on disk is it acknowledged:
 * the producer's done callback runs (an agent hears upload_end_reply), then
 * the part is marked done. On any failure the file is removed, nothing
 * half-stored stays, the producer hears why, and the part fails with it.
 * So store.h's invariant (nothing acknowledged that a crash could lose)
 * is kept in this one file.
 *
 * Seam: a copy to object storage (the next issue) belongs in
 * on_recorded, between the manifest and the acknowledgement.
 *
 * Ownership: the producer owns its struct delivery (embedded in its own
 * upload or ingest) and keeps it alive until done is called, exactly once.
 *
 * Floor: above the trace engine and the store, below the producers
 * (upload.c, kineto.c); calls only down, and the producer through done.
 */
#ifndef GPROFD_DELIVER_H
#define GPROFD_DELIVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"
#include "msg.h"

struct delivery;
struct tproc;

/* The outcome, on the loop. result 0: the file is stored and recorded;
 * tp is its part, still running, marked done as soon as this returns (the
 * producer acknowledges here, and may leave a note in tp->reason). Else
 * result < 0 and why says what failed (code: the MSG_E_* an agent hears);
 * the file is removed; tp (NULL when the part is gone) is failed with why
 * after this returns, unless the producer failed it here first. */
typedef void (*deliver_fn)(struct delivery *dl, struct tproc *tp, int result, int code,
                           const char *why);

struct delivery {
	struct daemon *d;
	char trace_id[64];
	pid_t pid;
	char name[160];            /* its name in the trace's directory (store_file_name) */
	int64_t bytes;             /* its size on disk */
	deliver_fn done;
	/* May be NULL. True when the producer gave the file up while its
	 * manifest was being written (its agent went): then it is removed. */
	bool (*abandoned)(struct delivery *dl);
};

/* Delivers tmp, a whole fsync'd file in dl->trace_id's directory, as
 * dl->name (deliver.h). dl->done follows, perhaps before this returns. */
void deliver_file(struct delivery *dl, const char *tmp);

#endif
