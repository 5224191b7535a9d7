/*
 * schema: see schema.h. One block per message, in msg.h's order. The wire
 * names here and the tables in proto/PROTOCOL.md must agree; test-msg.c
 * round-trips every type to keep them honest.
 */
#include <errno.h>
#include <string.h>

#include "schema.h"
#include "window.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define REQ FF_REQUIRED

#define STR(S, m, key, fl, maxlen) \
	{ key, FT_STR, (fl), offsetof(S, m), ((fl) & REQ) ? 1 : 0, maxlen, 0, NULL, NULL, 0 }
#define INT(S, m, key, fl, lo, hi, d) \
	{ key, FT_INT, (fl), offsetof(S, m), lo, hi, d, NULL, NULL, 0 }
#define BOOL(S, m, key) \
	{ key, FT_BOOL, 0, offsetof(S, m), 0, 1, 0, NULL, NULL, 0 }
#define ENUM(S, m, key, fl, nm, d) \
	{ key, FT_ENUM, (fl), offsetof(S, m), 0, (int64_t)N(nm) - 2, d, nm, NULL, 0 }
#define FLAGS(S, m, key, nm, d) \
	{ key, FT_FLAGS, 0, offsetof(S, m), 0, 0, d, nm, NULL, 0 }
#define INTS(S, m, key, fl, lo, hi, cm) \
	{ key, FT_INTS, (fl), offsetof(S, m), lo, hi, 0, NULL, NULL, cm }
#define OBJS(S, m, key, fl, sc, cm) \
	{ key, FT_OBJS, (fl), offsetof(S, m), 0, 0, 0, NULL, &(sc), cm }
#define NUMMAP(S, m, key, cm) \
	{ key, FT_NUMMAP, 0, offsetof(S, m), 0, MSG_METRIC_NAME_MAX, 0, NULL, NULL, cm }
#define SCHEMA(nm, S, f, chk, rq) { nm, f, N(f), sizeof(S), chk, rq }
#define EMPTY(nm, rq) { nm, NULL, 0, 0, NULL, rq }

#define PID_MAX_ MSG_PID_MAX
#define ID_ MSG_INT_MAX
#define U32_ 4294967295LL
#define DAY_MS 86400000LL

const char *const schema_type_names[MSG_TYPE_COUNT] = {
	[MSG_NONE] = "?",
	[MSG_HELLO] = "hello",
	[MSG_HELLO_REPLY] = "hello_reply",
	[MSG_AUTH] = "auth",
	[MSG_AUTH_REPLY] = "auth_reply",
	[MSG_ERROR] = "error",
	[MSG_REGISTER] = "register",
	[MSG_REGISTER_REPLY] = "register_reply",
	[MSG_HEARTBEAT] = "heartbeat",
	[MSG_CAPTURE_START] = "capture_start",
	[MSG_CAPTURE_CANCEL] = "capture_cancel",
	[MSG_CAPTURE_STATUS] = "capture_status",
	[MSG_UPLOAD_BEGIN] = "upload_begin",
	[MSG_UPLOAD_END] = "upload_end",
	[MSG_UPLOAD_END_REPLY] = "upload_end_reply",
	[MSG_TRACE_START] = "trace_start",
	[MSG_TRACE_START_REPLY] = "trace_start_reply",
	[MSG_TRACE_STATUS] = "trace_status",
	[MSG_TRACE_STATUS_REPLY] = "trace_status_reply",
	[MSG_TRACE_PROGRESS] = "trace_progress",
	[MSG_TRACE_CANCEL] = "trace_cancel",
	[MSG_TRACE_CANCEL_REPLY] = "trace_cancel_reply",
	[MSG_TRACE_LIST] = "trace_list",
	[MSG_TRACE_LIST_REPLY] = "trace_list_reply",
	[MSG_TRACE_DOWNLOAD] = "trace_download",
	[MSG_TRACE_DOWNLOAD_REPLY] = "trace_download_reply",
	[MSG_DOWNLOAD_END] = "download_end",
	[MSG_TRACE_DELETE] = "trace_delete",
	[MSG_TRACE_DELETE_REPLY] = "trace_delete_reply",
	[MSG_PROCESS_LIST] = "process_list",
	[MSG_PROCESS_LIST_REPLY] = "process_list_reply",
	[MSG_DAEMON_STATUS] = "daemon_status",
	[MSG_DAEMON_STATUS_REPLY] = "daemon_status_reply",
	[MSG_METRICS_QUERY] = "metrics_query",
	[MSG_METRICS_REPLY] = "metrics_reply",
};

static const char *const role_names[] = { "agent", "ctl", NULL };
static const char *const auth_names[] = { "none", "hmac-sha256", NULL };
/* upload_begin.format, in MSG_FMT_* order */
static const char *const format_names[] = { "trace", "memory_snapshot", NULL };
const char *const schema_errcode_names[] = {
	"bad_request", "unsupported", "version", "auth_required", "auth_failed",
	"forbidden", "not_found", "limit", "busy", "no_space", "io", "internal", NULL,
};
const char *const schema_kind_names[] = { "agent", "kineto", NULL };
const char *const schema_tstate_names[] = {
	"matched", "waiting", "capturing", "writing", "uploading", "done",
	"failed", "cancelled", "skipped", NULL,
};
const char *const schema_trace_state_names[] = {
	"running", "done", "partial", "failed", "cancelled", NULL,
};
const char *const schema_activity_names[] = {
	"kernel", "memcpy", "memset", "cuda_runtime", "cuda_driver", "sync",
	"overhead", "memory", "nvtx", NULL,
};
const char *const schema_option_names[] = {
	"record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "operators",
	NULL,
};
static const char *const cap_names[] = { "cupti", "nvtx", "steps", NULL };

/* ---- cross-field rules ---- */

static int check_hello(const void *obj, struct perr *err)
{
	const struct msg_hello *h = obj;

	if (h->proto_min > h->proto_max)
		return perr_set(err, -EBADMSG, "proto_min %lld is above proto_max %lld",
		                (long long)h->proto_min, (long long)h->proto_max);
	return 0;
}

static int check_hello_reply(const void *obj, struct perr *err)
{
	const struct msg_hello_reply *h = obj;

	if (h->auth != MSG_AUTH_NONE && h->nonce == NULL)
		return perr_set(err, -EBADMSG, "auth \"%s\" needs a nonce",
		                auth_names[h->auth]);
	return 0;
}

/* The window's ranges and rules live in window.c, shared with the Dynolog
 * RPC's Kineto config, so both paths refuse the same values the same way. */
static int check_window(const struct msg_window *w, struct perr *err)
{
	return window_check(w, err);
}

static int check_capture_start(const void *obj, struct perr *err)
{
	return check_window(&((const struct msg_capture_start *)obj)->win, err);
}

static int check_trace_start(const void *obj, struct perr *err)
{
	const struct msg_trace_start *t = obj;

	if (t->all && (t->job_id != NULL || t->pids.n > 0))
		return perr_set(err, -EBADMSG, "\"all\" excludes job_id and pids");
	if (!t->all && t->job_id == NULL && t->pids.n == 0)
		return perr_set(err, -EBADMSG, "name a target: job_id, pids, or all");
	return check_window(&t->win, err);
}

/* ---- the tables ---- */

#define S struct msg_hello
static const struct field f_hello[] = {
	INT(S, proto_min, "proto_min", REQ, 1, 65535, 0),
	INT(S, proto_max, "proto_max", REQ, 1, 65535, 0),
	ENUM(S, role, "role", REQ, role_names, 0),
	STR(S, software, "software", 0, MSG_NAME_MAX),
};
#undef S
#define S struct msg_hello_reply
static const struct field f_hello_reply[] = {
	INT(S, proto, "proto", REQ, 1, 65535, 0),
	STR(S, software, "software", REQ, MSG_NAME_MAX),
	STR(S, host, "host", REQ, MSG_HOST_MAX),
	ENUM(S, auth, "auth", 0, auth_names, MSG_AUTH_NONE),
	STR(S, nonce, "nonce", FF_HEX, 128),
};
#undef S
#define S struct msg_auth
static const struct field f_auth[] = {
	STR(S, proof, "proof", REQ | FF_HEX, 128),
};
#undef S
#define S struct msg_error
static const struct field f_error[] = {
	ENUM(S, code, "code", REQ, schema_errcode_names, 0),
	STR(S, message, "message", REQ | FF_TEXT, MSG_TEXT_MAX),
};
#undef S
#define S struct msg_register
static const struct field f_register[] = {
	INT(S, pid, "pid", REQ, 1, PID_MAX_, 0),
	INTS(S, ppids, "ppids", 0, 0, PID_MAX_, 64),
	STR(S, job_id, "job_id", 0, MSG_JOB_ID_MAX),
	INT(S, rank, "rank", 0, -1, 16777216, -1),
	INT(S, local_rank, "local_rank", 0, -1, 16777216, -1),
	INT(S, world_size, "world_size", 0, -1, 16777216, -1),
	STR(S, host, "host", 0, MSG_HOST_MAX),
	INTS(S, gpus, "gpus", 0, 0, 1023, MSG_GPUS_MAX),
	FLAGS(S, caps, "caps", cap_names, 0),
	STR(S, version, "version", 0, MSG_NAME_MAX),
	STR(S, name, "name", 0, MSG_NAME_MAX),
};
#undef S
#define S struct msg_register_reply
static const struct field f_register_reply[] = {
	INT(S, heartbeat_ms, "heartbeat_ms", REQ, 100, DAY_MS, 0),
};
#undef S
#define S struct msg_heartbeat
static const struct field f_heartbeat[] = {
	INT(S, steps, "steps", 0, 0, ID_, 0),
	INT(S, last_step_us, "last_step_us", 0, 0, ID_, 0),
	INT(S, median_step_us, "median_step_us", 0, 0, ID_, 0),
};
#undef S

/* Only the wire's integer range here: window_check (window.c) holds the
 * real limits, for this path and the Dynolog RPC's alike. */
#define WINDOW_FIELDS(S) \
	INT(S, win.iterations, "iterations", 0, 0, ID_, 0), \
	INT(S, win.duration_ms, "duration_ms", 0, 0, ID_, 0), \
	INT(S, win.start_at_us, "start_at_us", 0, 0, ID_, 0), \
	INT(S, win.iteration_roundup, "iteration_roundup", 0, 0, ID_, 0), \
	INT(S, win.start_iteration, "start_iteration", 0, 0, ID_, 0), \
	FLAGS(S, win.activities, "activities", schema_activity_names, MSG_ACT_DEFAULT), \
	STR(S, win.iteration_range, "iteration_range", 0, MSG_NAME_MAX), \
	FLAGS(S, win.options, "options", schema_option_names, 0), \
	BOOL(S, win.memory_snapshot, "memory_snapshot")

#define S struct msg_capture_start
static const struct field f_capture_start[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	WINDOW_FIELDS(S),
	INT(S, max_bytes, "max_bytes", 0, 0, ID_, 0),
};
#undef S
#define S struct msg_capture_cancel
static const struct field f_capture_cancel[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	STR(S, reason, "reason", FF_TEXT, MSG_TEXT_MAX),
};
#undef S
#define S struct msg_capture_status
static const struct field f_capture_status[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	ENUM(S, state, "state", REQ, schema_tstate_names, 0),
	STR(S, reason, "reason", FF_TEXT, MSG_TEXT_MAX),
	INT(S, events, "events", 0, 0, ID_, 0),
	INT(S, dropped, "dropped", 0, 0, ID_, 0),
	INT(S, bytes, "bytes", 0, 0, ID_, 0),
};
#undef S
#define S struct msg_upload_begin
static const struct field f_upload_begin[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	INT(S, transfer, "transfer", REQ, 1, U32_, 0),
	ENUM(S, format, "format", 0, format_names, MSG_FMT_TRACE),
};
#undef S
#define S struct msg_upload_end
static const struct field f_upload_end[] = {
	INT(S, transfer, "transfer", REQ, 1, U32_, 0),
	INT(S, bytes, "bytes", REQ, 0, ID_, 0),
	INT(S, crc32, "crc32", REQ, 0, U32_, 0),
};
#undef S
#define S struct msg_upload_end_reply
static const struct field f_upload_end_reply[] = {
	STR(S, file, "file", REQ | FF_TOKEN, MSG_NAME_MAX),
	INT(S, bytes, "bytes", REQ, 0, ID_, 0),
};
#undef S
#define S struct msg_trace_proc
static const struct field f_trace_proc[] = {
	INT(S, pid, "pid", REQ, 1, PID_MAX_, 0),
	STR(S, host, "host", 0, MSG_HOST_MAX),
	STR(S, job_id, "job_id", 0, MSG_JOB_ID_MAX),
	INT(S, rank, "rank", 0, -1, 16777216, -1),
	ENUM(S, kind, "kind", 0, schema_kind_names, MSG_KIND_AGENT),
	ENUM(S, state, "state", REQ, schema_tstate_names, 0),
	STR(S, reason, "reason", FF_TEXT, MSG_TEXT_MAX),
	INT(S, bytes, "bytes", 0, 0, ID_, 0),
	INT(S, events, "events", 0, 0, ID_, 0),
	INT(S, dropped, "dropped", 0, 0, ID_, 0),
	STR(S, file, "file", FF_TOKEN, MSG_NAME_MAX),
};
static const struct schema sc_trace_proc = SCHEMA("trace_proc", S, f_trace_proc, NULL, false);
#undef S
#define S struct msg_trace_start
static const struct field f_trace_start[] = {
	STR(S, trace_id, "trace_id", FF_TOKEN, MSG_TRACE_ID_MAX),
	STR(S, job_id, "job_id", 0, MSG_JOB_ID_MAX),
	INTS(S, pids, "pids", 0, 0, PID_MAX_, MSG_PIDS_MAX),
	BOOL(S, all, "all"),
	WINDOW_FIELDS(S),
	INT(S, process_limit, "process_limit", 0, 1, 1000000, 1000),
	INT(S, timeout_ms, "timeout_ms", 0, 0, DAY_MS, 0),
	BOOL(S, follow, "follow"),
};
#undef S
#define S struct msg_trace_start_reply
static const struct field f_trace_start_reply[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	OBJS(S, procs, "procs", REQ, sc_trace_proc, MSG_ITEMS_MAX),
	STR(S, hint, "hint", FF_TEXT, MSG_TEXT_MAX),
};
#undef S
#define S struct msg_trace_ref
static const struct field f_trace_ref[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
};
static const struct field f_trace_status[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	BOOL(S, follow, "follow"),
};
static const struct field f_trace_list[] = {
	STR(S, trace_id, "trace_id", FF_TOKEN, MSG_TRACE_ID_MAX),
	STR(S, job_id, "job_id", 0, MSG_JOB_ID_MAX),
	INT(S, offset, "offset", 0, 0, ID_, 0),
	BOOL(S, running, "running"),
};
#undef S
#define S struct msg_trace_info
static const struct field f_trace_info[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	ENUM(S, state, "state", REQ, schema_trace_state_names, 0),
	INT(S, created_us, "created_us", 0, 0, ID_, 0),
	OBJS(S, procs, "procs", REQ, sc_trace_proc, MSG_ITEMS_MAX),
};
#undef S
#define S struct msg_trace_cancel_reply
static const struct field f_trace_cancel_reply[] = {
	INT(S, cancelled, "cancelled", REQ, 0, ID_, 0),
	ENUM(S, state, "state", 0, schema_trace_state_names, MSG_TRACE_RUNNING),
};
#undef S
#define S struct msg_trace_file
static const struct field f_trace_file[] = {
	STR(S, name, "name", REQ | FF_TOKEN, MSG_NAME_MAX),
	INT(S, bytes, "bytes", REQ, 0, ID_, 0),
	INT(S, pid, "pid", 0, 0, PID_MAX_, 0),
	INT(S, rank, "rank", 0, -1, 16777216, -1),
	STR(S, host, "host", 0, MSG_HOST_MAX),
	STR(S, job_id, "job_id", 0, MSG_JOB_ID_MAX),
};
static const struct schema sc_trace_file = SCHEMA("trace_file", S, f_trace_file, NULL, false);
#undef S
#define S struct msg_trace_summary
static const struct field f_trace_summary[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	INT(S, created_us, "created_us", 0, 0, ID_, 0),
	ENUM(S, state, "state", REQ, schema_trace_state_names, 0),
	OBJS(S, files, "files", REQ, sc_trace_file, MSG_ITEMS_MAX),
	INT(S, uid, "uid", 0, -1, U32_, -1),
	OBJS(S, procs, "procs", 0, sc_trace_proc, MSG_ITEMS_MAX),
};
static const struct schema sc_trace_summary = SCHEMA("trace_summary", S, f_trace_summary, NULL, false);
#undef S
#define S struct msg_trace_list_reply
static const struct field f_trace_list_reply[] = {
	OBJS(S, traces, "traces", REQ, sc_trace_summary, MSG_ITEMS_MAX),
	INT(S, total, "total", 0, 0, ID_, 0),
	INT(S, next_offset, "next_offset", 0, 0, ID_, 0),
};
#undef S
#define S struct msg_trace_download
static const struct field f_trace_download[] = {
	STR(S, trace_id, "trace_id", REQ | FF_TOKEN, MSG_TRACE_ID_MAX),
	STR(S, file, "file", REQ | FF_TOKEN, MSG_NAME_MAX),
	INT(S, offset, "offset", 0, 0, ID_, 0),
};
#undef S
#define S struct msg_trace_download_reply
static const struct field f_trace_download_reply[] = {
	INT(S, transfer, "transfer", REQ, 1, U32_, 0),
	INT(S, bytes, "bytes", REQ, 0, ID_, 0),
};
#undef S
#define S struct msg_download_end
static const struct field f_download_end[] = {
	INT(S, transfer, "transfer", REQ, 1, U32_, 0),
	INT(S, bytes, "bytes", REQ, 0, ID_, 0),
	INT(S, crc32, "crc32", REQ, 0, U32_, 0),
};
#undef S
#define S struct msg_trace_delete_reply
static const struct field f_trace_delete_reply[] = {
	INT(S, files, "files", REQ, 0, ID_, 0),
	INT(S, bytes, "bytes", REQ, 0, ID_, 0),
};
#undef S
#define S struct msg_process_list
static const struct field f_process_list[] = {
	STR(S, job_id, "job_id", 0, MSG_JOB_ID_MAX),
	INT(S, pid, "pid", 0, -1, PID_MAX_, -1),
	INT(S, uid, "uid", 0, -1, U32_, -1),
	INT(S, offset, "offset", 0, 0, ID_, 0),
};
#undef S
#define S struct msg_proc_info
static const struct field f_proc_info[] = {
	INT(S, pid, "pid", REQ, 1, PID_MAX_, 0),
	INT(S, uid, "uid", REQ, 0, U32_, 0),
	INTS(S, ppids, "ppids", 0, 0, PID_MAX_, 64),
	STR(S, job_id, "job_id", 0, MSG_JOB_ID_MAX),
	INT(S, rank, "rank", 0, -1, 16777216, -1),
	INT(S, local_rank, "local_rank", 0, -1, 16777216, -1),
	INT(S, world_size, "world_size", 0, -1, 16777216, -1),
	ENUM(S, kind, "kind", 0, schema_kind_names, MSG_KIND_AGENT),
	STR(S, host, "host", 0, MSG_HOST_MAX),
	INTS(S, gpus, "gpus", 0, 0, 1023, MSG_GPUS_MAX),
	FLAGS(S, caps, "caps", cap_names, 0),
	STR(S, version, "version", 0, MSG_NAME_MAX),
	STR(S, name, "name", 0, MSG_NAME_MAX),
	INT(S, registered_us, "registered_us", 0, 0, ID_, 0),
	INT(S, steps, "steps", 0, 0, ID_, 0),
	INT(S, last_step_us, "last_step_us", 0, 0, ID_, 0),
	BOOL(S, launcher, "launcher"),
	INT(S, step_now, "step_now", 0, 0, ID_, 0),
};
static const struct schema sc_proc_info = SCHEMA("proc_info", S, f_proc_info, NULL, false);
#undef S
#define S struct msg_process_list_reply
static const struct field f_process_list_reply[] = {
	OBJS(S, procs, "procs", REQ, sc_proc_info, MSG_ITEMS_MAX),
	INT(S, total, "total", 0, 0, ID_, 0),
	INT(S, next_offset, "next_offset", 0, 0, ID_, 0),
};
#undef S
#define S struct msg_component
static const struct field f_component[] = {
	STR(S, name, "name", REQ | FF_TOKEN, MSG_NAME_MAX),
	STR(S, state, "state", REQ | FF_TOKEN, MSG_NAME_MAX),
	BOOL(S, degraded, "degraded"),
	STR(S, detail, "detail", FF_TEXT, MSG_TEXT_MAX),
};
static const struct schema sc_component = SCHEMA("component", S, f_component, NULL, false);
#undef S
#define S struct msg_daemon_status_reply
static const struct field f_daemon_status_reply[] = {
	STR(S, version, "version", REQ, MSG_NAME_MAX),
	STR(S, host, "host", REQ, MSG_HOST_MAX),
	INT(S, pid, "pid", REQ, 1, PID_MAX_, 0),
	INT(S, started_us, "started_us", REQ, 0, ID_, 0),
	INT(S, processes, "processes", 0, 0, ID_, 0),
	INT(S, pending_traces, "pending_traces", 0, 0, ID_, 0),
	INT(S, stored_traces, "stored_traces", 0, 0, ID_, 0),
	INT(S, stored_bytes, "stored_bytes", 0, 0, ID_, 0),
	NUMMAP(S, counters, "counters", MSG_METRICS_MAX),
	STR(S, commit, "commit", 0, MSG_NAME_MAX),
	INT(S, store_free_bytes, "store_free_bytes", 0, -1, ID_, -1),
	OBJS(S, components, "components", 0, sc_component, 64),
};
#undef S
#define S struct msg_metrics_query
static const struct field f_metrics_query[] = {
	INT(S, history_s, "history_s", 0, 0, 86400, 0),
};
#undef S
#define S struct msg_sample
static const struct field f_sample[] = {
	INT(S, ts_us, "ts_us", REQ, 0, ID_, 0),
	NUMMAP(S, values, "values", MSG_METRICS_MAX),
};
static const struct schema sc_sample = SCHEMA("sample", S, f_sample, NULL, false);
#undef S
#define S struct msg_metrics_reply
static const struct field f_metrics_reply[] = {
	STR(S, host, "host", REQ, MSG_HOST_MAX),
	INT(S, interval_ms, "interval_ms", 0, 0, DAY_MS, 0),
	OBJS(S, samples, "samples", REQ, sc_sample, 86400),
};
#undef S

static const struct schema schemas[MSG_TYPE_COUNT] = {
	[MSG_HELLO] = SCHEMA("hello", struct msg_hello, f_hello, check_hello, true),
	[MSG_HELLO_REPLY] = SCHEMA("hello_reply", struct msg_hello_reply, f_hello_reply, check_hello_reply, false),
	[MSG_AUTH] = SCHEMA("auth", struct msg_auth, f_auth, NULL, true),
	[MSG_AUTH_REPLY] = EMPTY("auth_reply", false),
	[MSG_ERROR] = SCHEMA("error", struct msg_error, f_error, NULL, false),
	[MSG_REGISTER] = SCHEMA("register", struct msg_register, f_register, NULL, true),
	[MSG_REGISTER_REPLY] = SCHEMA("register_reply", struct msg_register_reply, f_register_reply, NULL, false),
	[MSG_HEARTBEAT] = SCHEMA("heartbeat", struct msg_heartbeat, f_heartbeat, NULL, false),
	[MSG_CAPTURE_START] = SCHEMA("capture_start", struct msg_capture_start, f_capture_start, check_capture_start, false),
	[MSG_CAPTURE_CANCEL] = SCHEMA("capture_cancel", struct msg_capture_cancel, f_capture_cancel, NULL, false),
	[MSG_CAPTURE_STATUS] = SCHEMA("capture_status", struct msg_capture_status, f_capture_status, NULL, false),
	[MSG_UPLOAD_BEGIN] = SCHEMA("upload_begin", struct msg_upload_begin, f_upload_begin, NULL, false),
	[MSG_UPLOAD_END] = SCHEMA("upload_end", struct msg_upload_end, f_upload_end, NULL, true),
	[MSG_UPLOAD_END_REPLY] = SCHEMA("upload_end_reply", struct msg_upload_end_reply, f_upload_end_reply, NULL, false),
	[MSG_TRACE_START] = SCHEMA("trace_start", struct msg_trace_start, f_trace_start, check_trace_start, true),
	[MSG_TRACE_START_REPLY] = SCHEMA("trace_start_reply", struct msg_trace_start_reply, f_trace_start_reply, NULL, false),
	[MSG_TRACE_STATUS] = SCHEMA("trace_status", struct msg_trace_ref, f_trace_status, NULL, true),
	[MSG_TRACE_STATUS_REPLY] = SCHEMA("trace_status_reply", struct msg_trace_info, f_trace_info, NULL, false),
	[MSG_TRACE_PROGRESS] = SCHEMA("trace_progress", struct msg_trace_info, f_trace_info, NULL, false),
	[MSG_TRACE_CANCEL] = SCHEMA("trace_cancel", struct msg_trace_ref, f_trace_ref, NULL, true),
	[MSG_TRACE_CANCEL_REPLY] = SCHEMA("trace_cancel_reply", struct msg_trace_cancel_reply, f_trace_cancel_reply, NULL, false),
	[MSG_TRACE_LIST] = SCHEMA("trace_list", struct msg_trace_ref, f_trace_list, NULL, true),
	[MSG_TRACE_LIST_REPLY] = SCHEMA("trace_list_reply", struct msg_trace_list_reply, f_trace_list_reply, NULL, false),
	[MSG_TRACE_DOWNLOAD] = SCHEMA("trace_download", struct msg_trace_download, f_trace_download, NULL, true),
	[MSG_TRACE_DOWNLOAD_REPLY] = SCHEMA("trace_download_reply", struct msg_trace_download_reply, f_trace_download_reply, NULL, false),
	[MSG_DOWNLOAD_END] = SCHEMA("download_end", struct msg_download_end, f_download_end, NULL, false),
	[MSG_TRACE_DELETE] = SCHEMA("trace_delete", struct msg_trace_ref, f_trace_ref, NULL, true),
	[MSG_TRACE_DELETE_REPLY] = SCHEMA("trace_delete_reply", struct msg_trace_delete_reply, f_trace_delete_reply, NULL, false),
	[MSG_PROCESS_LIST] = SCHEMA("process_list", struct msg_process_list, f_process_list, NULL, true),
	[MSG_PROCESS_LIST_REPLY] = SCHEMA("process_list_reply", struct msg_process_list_reply, f_process_list_reply, NULL, false),
	[MSG_DAEMON_STATUS] = EMPTY("daemon_status", true),
	[MSG_DAEMON_STATUS_REPLY] = SCHEMA("daemon_status_reply", struct msg_daemon_status_reply, f_daemon_status_reply, NULL, false),
	[MSG_METRICS_QUERY] = SCHEMA("metrics_query", struct msg_metrics_query, f_metrics_query, NULL, true),
	[MSG_METRICS_REPLY] = SCHEMA("metrics_reply", struct msg_metrics_reply, f_metrics_reply, NULL, false),
};

const struct schema *schema_of_type(enum msg_type t)
{
	if (t <= MSG_NONE || t >= MSG_TYPE_COUNT)
		return NULL;
	return &schemas[t];
}

const struct schema *schema_of_elem(enum msg_elem e)
{
	switch (e) {
	case MSG_ELEM_TRACE_PROC: return &sc_trace_proc;
	case MSG_ELEM_TRACE_FILE: return &sc_trace_file;
	case MSG_ELEM_TRACE_SUMMARY: return &sc_trace_summary;
	case MSG_ELEM_PROC_INFO: return &sc_proc_info;
	case MSG_ELEM_SAMPLE: return &sc_sample;
	case MSG_ELEM_COMPONENT: return &sc_component;
	}
	return NULL;
}
