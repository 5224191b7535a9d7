/*
 * counters: the daemon's counters, one per limit and per kind of bad
 * input (STYLE.md rule 4), exported in daemon_status. A leaf: the
 * transport (conn.c) counts its own (frames, bad frames, write-queue
 * drops, TLS failures, timeouts) through a pointer to the daemon's, and
 * needs nothing else of the daemon for it.
 */
#ifndef GPROFD_COUNTERS_H
#define GPROFD_COUNTERS_H

#include <stdint.h>

struct counters {
	uint64_t conns_accepted;
	uint64_t conns_refused;       /* limits.connections */
	uint64_t conns_timed_out;     /* limits.hello_timeout, limits.frame_timeout */
	uint64_t frames_in;
	uint64_t bad_frames;          /* framing errors, oversized frames */
	uint64_t bad_messages;        /* failed validation */
	uint64_t write_queue_drops;   /* limits.write_queue_bytes */
	uint64_t conn_bytes;          /* held by the connections now (conn.h: c->held) */
	uint64_t conn_bytes_peak;     /* the most they held at once */
	uint64_t conn_bytes_high;     /* the most since the last heap trim (bus.c) */
	uint64_t conns_memory_closed; /* limits.connection_memory{,_per_uid}, while open */
	uint64_t conns_memory_refused;/* the same, at accept */
	uint64_t conns_backlogged;    /* not read while 256 KiB of their replies wait (conn.c) */
	uint64_t proc_bytes;          /* held by the registry's processes (registry.c) */
	uint64_t heap_trims;          /* freed connection memory given back (bus.c) */
	uint64_t processes_refused;   /* limits.processes */
	uint64_t traces_refused;      /* limits.pending_traces */
	uint64_t traces_started;
	uint64_t traces_ended[5];     /* by final MSG_TRACE_* state (DONE..CANCELLED) */
	uint64_t uploads_failed;
	uint64_t dyno_requests;
	uint64_t auth_failures;
	uint64_t tls_failures;        /* handshakes and records refused */
	uint64_t retention_deleted;
	uint64_t kineto_datagrams;
	uint64_t kineto_malformed;    /* datagrams dropped */
	uint64_t kineto_configs;      /* configs delivered */
};

#endif
