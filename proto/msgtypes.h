/*
 * msgtypes: the native protocol's messages as C structs, without their
 * codec: the protocol versions, the field limits, the one list of message
 * types and the struct that holds each one's fields (msg.h has the rules
 * of ownership and defaults). The codec (msg.h, msg.c) is built on the
 * schema (schema.h) and the window rules (window.h), and those need only
 * these types: so the types are a floor of their own, below all three,
 * and the include graph of proto/ has no cycle (issue 25).
 */
#ifndef GPROF_MSGTYPES_H
#define GPROF_MSGTYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Protocol versions this code speaks (agreed in hello). */
#define GPROF_PROTO_MIN 1
#define GPROF_PROTO_MAX 1

/* JSON integers are exact only up to 2^53 - 1 in most languages. */
#define MSG_INT_MAX 9007199254740991LL

/* Field limits (bytes for strings, elements for arrays). */
#define MSG_TRACE_ID_MAX 64
#define MSG_JOB_ID_MAX 128
#define MSG_HOST_MAX 255
#define MSG_NAME_MAX 255
#define MSG_TEXT_MAX 4096
#define MSG_PIDS_MAX 1024
#define MSG_GPUS_MAX 64
#define MSG_ITEMS_MAX 100000
#define MSG_METRIC_NAME_MAX 200
#define MSG_METRICS_MAX 10000
/* The largest pid any path accepts (Linux's PID_MAX_LIMIT). */
#define MSG_PID_MAX 4194304

/* The message types. Numbers are internal; the wire carries the names.
 * A retired name is never reused (proto/PROTOCOL.md keeps the list). */
enum msg_type {
	MSG_NONE = 0,
	MSG_HELLO,
	MSG_HELLO_REPLY,
	MSG_AUTH,
	MSG_AUTH_REPLY,
	MSG_ERROR,
	MSG_REGISTER,
	MSG_REGISTER_REPLY,
	MSG_HEARTBEAT,
	MSG_CAPTURE_START,
	MSG_CAPTURE_CANCEL,
	MSG_CAPTURE_STATUS,
	MSG_UPLOAD_BEGIN,
	MSG_UPLOAD_END,
	MSG_UPLOAD_END_REPLY,
	MSG_TRACE_START,
	MSG_TRACE_START_REPLY,
	MSG_TRACE_STATUS,
	MSG_TRACE_STATUS_REPLY,
	MSG_TRACE_PROGRESS,
	MSG_TRACE_CANCEL,
	MSG_TRACE_CANCEL_REPLY,
	MSG_TRACE_LIST,
	MSG_TRACE_LIST_REPLY,
	MSG_TRACE_DOWNLOAD,
	MSG_TRACE_DOWNLOAD_REPLY,
	MSG_DOWNLOAD_END,
	MSG_TRACE_DELETE,
	MSG_TRACE_DELETE_REPLY,
	MSG_PROCESS_LIST,
	MSG_PROCESS_LIST_REPLY,
	MSG_DAEMON_STATUS,
	MSG_DAEMON_STATUS_REPLY,
	MSG_METRICS_QUERY,
	MSG_METRICS_REPLY,
	MSG_TYPE_COUNT
};

/* Enumerations carried as strings; the names are in schema.c. */
enum msg_role { MSG_ROLE_AGENT, MSG_ROLE_CTL };
enum msg_auth_kind { MSG_AUTH_NONE, MSG_AUTH_HMAC_SHA256 };
enum msg_errcode {
	MSG_E_BAD_REQUEST, MSG_E_UNSUPPORTED, MSG_E_VERSION, MSG_E_AUTH_REQUIRED,
	MSG_E_AUTH_FAILED, MSG_E_FORBIDDEN, MSG_E_NOT_FOUND, MSG_E_LIMIT,
	MSG_E_BUSY, MSG_E_NO_SPACE, MSG_E_IO, MSG_E_INTERNAL,
};
enum msg_kind { MSG_KIND_AGENT, MSG_KIND_KINETO };
/* Per-process trace states, in the order a capture goes through them. */
enum msg_tstate {
	MSG_TS_MATCHED, MSG_TS_WAITING, MSG_TS_CAPTURING, MSG_TS_WRITING,
	MSG_TS_UPLOADING, MSG_TS_DONE, MSG_TS_FAILED, MSG_TS_CANCELLED,
	MSG_TS_SKIPPED, /* left out with a reason (a launcher); not a failure */
};
/* Whole-trace states. */
enum msg_trace_state { MSG_TRACE_RUNNING, MSG_TRACE_DONE, MSG_TRACE_PARTIAL,
                       MSG_TRACE_FAILED, MSG_TRACE_CANCELLED };

/* Activity flags (a JSON array of names on the wire). */
enum {
	MSG_ACT_KERNEL = 1 << 0,
	MSG_ACT_MEMCPY = 1 << 1,
	MSG_ACT_MEMSET = 1 << 2,
	MSG_ACT_RUNTIME = 1 << 3,
	MSG_ACT_DRIVER = 1 << 4,
	MSG_ACT_SYNC = 1 << 5,
	MSG_ACT_OVERHEAD = 1 << 6,
	MSG_ACT_MEMORY = 1 << 7,
	MSG_ACT_NVTX = 1 << 8,
};
/* What a capture records unless asked otherwise: GPU kernels and copies,
 * the runtime calls that launched them, NVTX. Measured on an H100
 * (docs/BENCHMARKS.md, docs/gpu-validation.md): sync and overhead took a
 * PyTorch loop's capture from 1.06-1.12x to 1.28x its step time; and
 * with memcpy and memset both on, CUPTI 13.0 crashed in its own worker
 * thread about once per 130 back-to-back bursts of a copy-heavy CUDA loop
 * (0 in 874 with either alone). The rest are opt-in. */
#define MSG_ACT_DEFAULT (MSG_ACT_KERNEL | MSG_ACT_MEMCPY | MSG_ACT_RUNTIME | MSG_ACT_NVTX)
/* What PyTorch's profiler records beyond the activities, as torch.profiler's
 * arguments and `dyno gputrace`'s flags name them (a JSON array of names on
 * the wire, "options"). A Kineto client gets each as its on-demand config
 * key (proto/kconfig.h); an agent honours what it can and says in its
 * trace's note what it left out. None by default. */
enum {
	MSG_OPT_RECORD_SHAPES = 1 << 0,  /* PROFILE_REPORT_INPUT_SHAPES */
	MSG_OPT_PROFILE_MEMORY = 1 << 1, /* PROFILE_PROFILE_MEMORY */
	MSG_OPT_WITH_STACK = 1 << 2,     /* PROFILE_WITH_STACK */
	MSG_OPT_WITH_FLOPS = 1 << 3,     /* PROFILE_WITH_FLOPS */
	MSG_OPT_WITH_MODULES = 1 << 4,   /* PROFILE_WITH_MODULES */
	/* the agent path: record PyTorch operators in the window (a Kineto
	 * client always records them; its config has no key for it) */
	MSG_OPT_OPERATORS = 1 << 5,
};
#define MSG_OPT_ALL 0x3f
/* the options a Kineto on-demand config carries (proto/kconfig.c) */
#define MSG_OPT_KINETO 0x1f
/* Agent capability flags. */
enum { MSG_CAP_CUPTI = 1 << 0, MSG_CAP_NVTX = 1 << 1, MSG_CAP_STEPS = 1 << 2 };

struct msg_ints { int64_t *v; size_t n; };
struct msg_strs { const char **v; size_t n; };
/* A flat map of names to numbers (counters, metric samples). */
struct msg_nummap { const char **names; double *values; size_t n; };
#define MSG_ARRAY(T) struct { T *v; size_t n; }

struct msg_hello { int64_t proto_min, proto_max; int role; const char *software; };
struct msg_hello_reply {
	int64_t proto; const char *software; const char *host;
	int auth; const char *nonce; /* hex; present when auth != NONE */
};
struct msg_auth { const char *proof; /* hex HMAC-SHA256 of the nonce */ };
struct msg_error { int code; const char *message; };

struct msg_register {
	int64_t pid; /* informational: the daemon trusts peer credentials */
	struct msg_ints ppids;
	const char *job_id;
	int64_t rank, local_rank, world_size; /* -1 = unknown */
	const char *host;
	struct msg_ints gpus;
	int64_t caps;
	const char *version;
	const char *name;
};
struct msg_register_reply { int64_t heartbeat_ms; };
struct msg_heartbeat { int64_t steps, last_step_us, median_step_us; };

/* What to capture and when: shared by trace_start and capture_start. */
struct msg_window {
	int64_t iterations;        /* > 0: iteration mode */
	int64_t duration_ms;       /* > 0: duration mode */
	int64_t start_at_us;       /* wall clock (unix us); 0 = now */
	int64_t iteration_roundup; /* start at an iteration multiple of R */
	int64_t start_iteration;   /* > 0: start at exactly this iteration (a
	                              job's ranks together), else the roundup */
	int64_t activities;        /* MSG_ACT_* */
	const char *iteration_range; /* NVTX range name that marks iterations */
	int64_t options;           /* MSG_OPT_* */
	bool memory_snapshot;      /* deliver the CUDA caching allocator's history for
	                              the window (a pickle) instead of a trace */
};

struct msg_capture_start { const char *trace_id; struct msg_window win; int64_t max_bytes; };
struct msg_capture_cancel { const char *trace_id; const char *reason; };
struct msg_capture_status {
	const char *trace_id; int state; const char *reason;
	int64_t events, dropped, bytes;
};
/* format: MSG_FMT_TRACE (a Kineto trace, gzip) or MSG_FMT_MEMORY_SNAPSHOT
 * (PyTorch's memory snapshot pickle); the stored file's name says which. */
enum { MSG_FMT_TRACE, MSG_FMT_MEMORY_SNAPSHOT };
struct msg_upload_begin { const char *trace_id; int64_t transfer; int format; };
struct msg_upload_end { int64_t transfer, bytes, crc32; };
struct msg_upload_end_reply { const char *file; int64_t bytes; };

struct msg_trace_start {
	const char *trace_id; /* optional: one id for a trace across many hosts */
	const char *job_id; struct msg_ints pids; bool all;
	struct msg_window win;
	int64_t process_limit, timeout_ms;
	bool follow; /* push trace_progress messages until the trace ends */
};
/* One process's part in a trace. */
struct msg_trace_proc {
	int64_t pid; const char *host; const char *job_id; int64_t rank;
	int kind; int state; const char *reason;
	int64_t bytes, events, dropped; const char *file;
};
struct msg_trace_start_reply {
	const char *trace_id;
	MSG_ARRAY(struct msg_trace_proc) procs;
	const char *hint; /* why nothing matched, and what is registered */
};
/* trace_status, trace_cancel, trace_delete, trace_list (filters: trace_id,
 * job_id; offset: where the page begins among the matching traces;
 * running: list the traces in progress instead of the stored ones). */
struct msg_trace_ref {
	const char *trace_id; bool follow; const char *job_id; int64_t offset; bool running;
};
/* trace_status_reply and trace_progress. */
struct msg_trace_info {
	const char *trace_id; int state; int64_t created_us;
	MSG_ARRAY(struct msg_trace_proc) procs;
};
/* state: the trace's state once cancelled (cancelled, or how it had ended
 * before); MSG_TRACE_RUNNING only from an older daemon, which says none. */
struct msg_trace_cancel_reply { int64_t cancelled; int state; };
struct msg_trace_file {
	const char *name; int64_t bytes, pid, rank; const char *host; const char *job_id;
};
struct msg_trace_summary {
	const char *trace_id; int64_t created_us; int state;
	MSG_ARRAY(struct msg_trace_file) files;
	int64_t uid; /* the owner; -1 unknown (an older daemon) */
	MSG_ARRAY(struct msg_trace_proc) procs; /* a running trace's processes */
};
/* total: how many traces match; next_offset: the next page's offset, 0 on
 * the last page. */
struct msg_trace_list_reply {
	MSG_ARRAY(struct msg_trace_summary) traces; int64_t total, next_offset;
};
struct msg_trace_download { const char *trace_id; const char *file; int64_t offset; };
struct msg_trace_download_reply { int64_t transfer, bytes; };
struct msg_download_end { int64_t transfer, bytes, crc32; };
struct msg_trace_delete_reply { int64_t files, bytes; };

/* offset: where this page begins among the matching processes (a list
 * longer than one frame comes in pages; next_offset 0: the last one) */
struct msg_process_list { const char *job_id; int64_t pid, uid; /* -1 = any */ int64_t offset; };
struct msg_proc_info {
	int64_t pid, uid; struct msg_ints ppids; const char *job_id;
	int64_t rank, local_rank, world_size; int kind; const char *host;
	struct msg_ints gpus; int64_t caps; const char *version; const char *name;
	int64_t registered_us, steps, last_step_us;
	bool launcher; /* it started other ranks of its job and never steps: not traced */
	int64_t step_now; /* the daemon's estimate of its current step (0: none) */
};
struct msg_process_list_reply { MSG_ARRAY(struct msg_proc_info) procs; int64_t total, next_offset; };
/* One part of the daemon (a socket, Kineto's service, NVML, the store):
 * state is a token (up, off, absent, down; a newer daemon may add others),
 * degraded says whether it is a fault (gprofctl status exits 4). */
struct msg_component { const char *name, *state; bool degraded; const char *detail; };
struct msg_daemon_status_reply {
	const char *version; const char *host;
	int64_t pid, started_us, processes, pending_traces, stored_traces, stored_bytes;
	struct msg_nummap counters;
	const char *commit;          /* the build's source revision */
	int64_t store_free_bytes;    /* free on the store's filesystem; -1: unknown */
	MSG_ARRAY(struct msg_component) components;
};
struct msg_metrics_query { int64_t history_s; };
struct msg_sample { int64_t ts_us; struct msg_nummap values; };
struct msg_metrics_reply {
	const char *host; int64_t interval_ms;
	MSG_ARRAY(struct msg_sample) samples;
};

struct msg {
	enum msg_type type;
	uint64_t id; /* request id, echoed by replies; 0 = none */
	union {
		struct msg_hello hello;
		struct msg_hello_reply hello_reply;
		struct msg_auth auth;
		struct msg_error error;
		struct msg_register reg;
		struct msg_register_reply register_reply;
		struct msg_heartbeat heartbeat;
		struct msg_capture_start capture_start;
		struct msg_capture_cancel capture_cancel;
		struct msg_capture_status capture_status;
		struct msg_upload_begin upload_begin;
		struct msg_upload_end upload_end;
		struct msg_upload_end_reply upload_end_reply;
		struct msg_trace_start trace_start;
		struct msg_trace_start_reply trace_start_reply;
		struct msg_trace_ref trace_ref;
		struct msg_trace_info trace_info;
		struct msg_trace_cancel_reply trace_cancel_reply;
		struct msg_trace_list_reply trace_list_reply;
		struct msg_trace_download trace_download;
		struct msg_trace_download_reply trace_download_reply;
		struct msg_download_end download_end;
		struct msg_trace_delete_reply trace_delete_reply;
		struct msg_process_list process_list;
		struct msg_process_list_reply process_list_reply;
		struct msg_daemon_status_reply daemon_status_reply;
		struct msg_metrics_query metrics_query;
		struct msg_metrics_reply metrics_reply;
	} u;
	/* private to msg.c */
	void *root_;
	void *arena_;
};

/* Element kinds, for msg_elem_init on array elements built by hand. */
enum msg_elem {
	MSG_ELEM_TRACE_PROC, MSG_ELEM_TRACE_FILE, MSG_ELEM_TRACE_SUMMARY,
	MSG_ELEM_PROC_INFO, MSG_ELEM_SAMPLE, MSG_ELEM_COMPONENT,
};

#endif
