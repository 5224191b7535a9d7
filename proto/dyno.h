/*
 * dyno: Dynolog's RPC, byte-compatible, so the stock `dyno` client and
 * scripts written for Dynolog work against gprofd (shared/DYNOLOG_COMPAT.md
 * section 1; proto/PROTOCOL.md "Dynolog RPC").
 *
 * A request is a JSON frame (frame.h: the same length prefix) holding an
 * object with a string "fn". Replies are compact JSON with keys in
 * alphabetical order, as Dynolog's nlohmann::json prints them.
 *
 * Ownership: a decoded dyno_request owns its parse tree; `config` points
 * into it and `pids` into an array it owns, until dyno_request_deinit.
 */
#ifndef GPROF_DYNO_H
#define GPROF_DYNO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pbuf.h"
#include "perr.h"

#define DYNO_PIDS_MAX 1024
#define DYNO_CONFIG_MAX 65536
#define DYNO_PROCESS_LIMIT_DEFAULT 1000

enum dyno_fn {
	DYNO_GET_STATUS,
	DYNO_GET_VERSION,
	DYNO_SET_KINETO_ONDEMAND,
	DYNO_DCGM_PAUSE,
	DYNO_DCGM_RESUME,
};

struct dyno_request {
	enum dyno_fn fn;
	/* setKinetOnDemandRequest */
	const char *config;     /* KEY=VALUE lines, as the client sent them */
	int32_t pids[DYNO_PIDS_MAX];
	size_t npids;           /* 0, or [0]: every process of the job */
	int64_t job_id;         /* default 0 */
	int64_t process_limit;  /* default DYNO_PROCESS_LIMIT_DEFAULT */
	/* dcgmProfPause */
	int64_t duration_s;
	void *root_;
};

/* True when the JSON text is a Dynolog request, i.e. has a top-level "fn"
 * (as opposed to a native message's "type"). Cheap: no parse. Used by a
 * server to pick the decoder for a frame; a wrong guess only changes which
 * decoder reports the error. */
bool dyno_is_request(const char *json, size_t len);

/*
 * Decodes a request. 0; -EBADMSG (not a JSON object, no string "fn", bad
 * field types); -EOPNOTSUPP (unknown fn: err names it); -EINVAL
 * (setKinetOnDemandRequest without config or pids, where Dynolog answers
 * {"status":"failed"}); -ENOMEM. On failure nothing needs freeing.
 */
int dyno_decode_request(struct dyno_request *r, const char *json, size_t len,
                        struct perr *err);
void dyno_request_deinit(struct dyno_request *r);

/* Reply encoders: each appends one framed reply to out. */
int dyno_encode_status(struct pbuf *out);                      /* {"status":1} */
int dyno_encode_version(struct pbuf *out, const char *version); /* {"version":"..."} */
int dyno_encode_dcgm(struct pbuf *out, bool ok);               /* {"status":false} */
/* {"error":"...","status":"failed"}: where Dynolog sends nothing (bad JSON,
 * unknown fn) or {"status":"failed"}; the extra "error" says what to fix. */
int dyno_encode_failed(struct pbuf *out, const char *error);

struct dyno_kineto_reply {
	const int32_t *matched; size_t nmatched;
	const int32_t *triggered; size_t ntriggered;
	int64_t busy;
	const char *trace_id; /* gprofd's extra key "traceId"; NULL omits it */
};
int dyno_encode_kineto_reply(struct pbuf *out, const struct dyno_kineto_reply *rep);

/* Encodes a request the way the dyno client does (for tests and clients). */
int dyno_encode_request(struct pbuf *out, const struct dyno_request *req);

#endif
