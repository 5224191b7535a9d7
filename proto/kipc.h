/*
 * kipc: the Kineto IPC fabric, what stock PyTorch speaks when started with
 * KINETO_USE_DAEMON=1 (shared/DYNOLOG_COMPAT.md section 2; proto/PROTOCOL.md
 * "Kineto IPC"). Datagrams on an AF_UNIX SOCK_DGRAM socket.
 *
 * Each datagram is a 40-byte header, then a payload:
 *   header:  u64 size (payload bytes, native endian), char type[32] (NUL-padded)
 *   "req"  (client -> daemon): i32 type (1 events | 2 activities; 0 = heartbeat
 *          or busy), i32 n, i64 job_id, n x i32 pid (self first, then ancestors)
 *   "req"  (daemon -> client): the config text, no NUL; empty = nothing to do
 *   "ctxt" (client -> daemon): i32 gpu, i32 pid, i64 job_id
 *   "ctxt" (daemon -> client): i32 count of processes of that job and GPU
 * The layout is defined by Kineto in native byte order; this is the one
 * place in gprofd where a fixed binary layout is written, field by field.
 */
#ifndef GPROF_KIPC_H
#define GPROF_KIPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "perr.h"

#define KIPC_HDR_SIZE 40u
#define KIPC_TYPE_SIZE 32u
#define KIPC_REQ_FIXED 16u  /* type, n, job_id */
#define KIPC_CTXT_SIZE 16u
#define KIPC_PIDS_MAX 64    /* Kineto sends itself + up to 10 ancestors */
#define KIPC_CONFIG_MAX 65536
#define KIPC_DAEMON_NAME "dynolog"
#define KIPC_CLIENT_PREFIX "dynoconfigclient"

/* Bits of a "req" payload's type field. */
#define KIPC_REQ_EVENTS 1
#define KIPC_REQ_ACTIVITIES 2

enum kipc_kind { KIPC_REQ = 1, KIPC_CTXT = 2 };

struct kipc_req {
	int32_t type;
	int32_t n;
	int64_t job_id;
	int32_t pids[KIPC_PIDS_MAX];
};

struct kipc_ctxt {
	int32_t gpu;
	int32_t pid;
	int64_t job_id;
};

struct kipc_msg {
	enum kipc_kind kind;
	union {
		struct kipc_req req;
		struct kipc_ctxt ctxt;
	} u;
};

/*
 * Splits any datagram into its kind and payload (both directions).
 * 0 or -EBADMSG (shorter than a header, size field disagrees with the
 * datagram length) or -EPROTONOSUPPORT (a type that is neither "req" nor
 * "ctxt"); err says which.
 */
int kipc_decode_header(const void *buf, size_t len, enum kipc_kind *kind,
                       const uint8_t **payload, size_t *plen, struct perr *err);

/* Decodes a client's datagram (what the daemon receives). As above, plus
 * -EBADMSG for a payload whose size does not match its fields. */
int kipc_decode(struct kipc_msg *m, const void *buf, size_t len, struct perr *err);

/* Encoders write one datagram into out and return its length, or -ENOBUFS
 * when cap is too small, or -EINVAL for out-of-range arguments. */
int kipc_encode_req(uint8_t *out, size_t cap, const struct kipc_req *req);
int kipc_encode_ctxt(uint8_t *out, size_t cap, const struct kipc_ctxt *c);
int kipc_encode_config_reply(uint8_t *out, size_t cap, const char *config, size_t len);
int kipc_encode_ctxt_reply(uint8_t *out, size_t cap, int32_t count);

/*
 * Socket addresses. Abstract names: sun_path[0] = 0, then the name, then a
 * NUL that is part of the name; len = sizeof(sa_family_t) + strlen(name) + 2.
 * Directory mode (KINETO_IPC_SOCKET_DIR): the path <dir>/<name>,
 * len = sizeof(sa_family_t) + strlen(path) + 1. 0 or -ENAMETOOLONG.
 */
int kipc_addr_abstract(struct sockaddr_un *sa, socklen_t *len, const char *name);
int kipc_addr_dir(struct sockaddr_un *sa, socklen_t *len, const char *dir,
                  const char *name);

#endif
