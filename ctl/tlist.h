/*
 * tlist: one host's stored traces, or its traces in progress (running),
 * as trace_list pages arrive: what `gprofctl traces`, `status`, `fetch`
 * and `delete` share. A long list comes in
 * pages (next_offset); tlist asks for the next until the last, and keeps a
 * copy of every summary (the message's strings die with it).
 *
 * Ownership: a tlist owns its summaries and their file arrays; tlist_free
 * releases them.
 */
#ifndef GPROFCTL_TLIST_H
#define GPROFCTL_TLIST_H

#include "ctl.h"

struct tfile {
	char name[MSG_NAME_MAX + 1];
	char job[MSG_JOB_ID_MAX + 1];   /* "" unknown */
	int64_t bytes, pid, rank;       /* rank -1: unknown, printed as "-" or null */
};

/* A process of a running trace: where it is. */
struct tproc_sum {
	char job[MSG_JOB_ID_MAX + 1];   /* "" unknown */
	int64_t pid, rank;              /* rank -1: unknown */
	int kind, state;                /* MSG_KIND_*, MSG_TS_* */
};

struct tsum {
	char id[MSG_TRACE_ID_MAX + 1];
	int64_t created_us, uid;        /* uid -1: unknown */
	int state;
	uint64_t bytes;
	size_t nfiles;
	struct tfile *files;
	size_t nprocs;                  /* a running trace's processes (else 0) */
	struct tproc_sum *procs;
	bool drop;                      /* filtered out by the command (age) */
	int64_t deleted_files;          /* delete: what the daemon removed; -1 not yet */
};

struct tlist {
	const char *trace_id, *job_id;  /* the daemon-side filters (NULL: any) */
	bool running;                   /* the traces in progress, not the stored ones */
	bool complete;                  /* the last page came */
	bool old_daemon;                /* running asked, stored ones answered: a daemon
	                                 * from before running lists (none kept) */
	size_t n;
	struct tsum *v;
};

/* Asks h for the page of l from offset. */
void tlist_ask(struct host *h, struct tlist *l, int64_t offset);
/* Handles a trace_list_reply or error for l: 1 when the list is complete,
 * 0 when it took the message and asked for the next page, -1 when the
 * message was not l's (nothing done). An error fails the host. */
int tlist_message(struct host *h, struct tlist *l, const struct msg *m);
void tlist_free(struct tlist *l);

/* An age: "90" or "90s", "15m", "2h", "7d" into microseconds; -1 when it
 * is not one. */
int64_t tlist_parse_age(const char *s);
/* Marks the summaries the filters leave out (drop): l->job_id keeps those
 * with a file of that job (again here: an older daemon ignores it); ids
 * (nids > 0) keeps those named; since_us those taken at most that long ago, older_us those
 * taken at least that long ago (-1: no filter). Returns how many remain. */
size_t tlist_filter(struct tlist *l, char *const *ids, size_t nids, int64_t since_us,
                    int64_t older_us);
/* The jobs of s (of its files, or of a running trace's processes),
 * comma-separated, into out ("-" when none is known). */
void tlist_jobs(const struct tsum *s, char *out, size_t size);
/* The ranks of s (as tlist_jobs) as ranges ("0-3,7"; "-" when none is known). */
void tlist_ranks(const struct tsum *s, char *out, size_t size);
/* A summary as JSON (host, trace_id, jobs, created_us, processes, ranks,
 * bytes, state, uid, files, and a running trace's procs: pid, rank, kind,
 * state, job); unknown values are null. */
struct cJSON;
struct cJSON *tlist_json(const char *host, const struct tsum *s);
/* A running trace's processes by state, for people: "2 capturing, 1
 * waiting" into out. */
void tlist_states(const struct tsum *s, char *out, size_t size);

#endif
