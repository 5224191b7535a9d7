/*
 * msg: the native protocol's messages as typed C structs (msgtypes.h)
 * and their codec (msg.c).
 *
 * Every message on the wire is one JSON object in a JSON frame (frame.h)
 * with a string "type" and, for requests and their replies, an integer
 * "id". This header declares every message type (the one list; wire names
 * are in schema.c and proto/PROTOCOL.md) and the struct that holds each
 * one's fields. The daemon, the agent and gprofctl build and read messages
 * only through these structs: msg_decode validates untrusted text strictly
 * (types, ranges, string lengths and characters, required fields,
 * cross-field rules, no duplicate keys) and msg_encode applies the same
 * rules before anything is sent.
 *
 * Ownership:
 *   - A decoded msg owns its parse tree and arrays; its strings and arrays
 *     stay valid until msg_deinit.
 *   - A msg built by hand (msg_init, then fill fields) borrows whatever
 *     strings and arrays the caller points it at; msg_deinit frees nothing
 *     of them.
 * Absent optional fields decode to their defaults (0, false, NULL, or -1
 * where 0 is meaningful, as for rank); fields equal to their default are
 * not encoded. Unknown keys are ignored so that a newer peer can add
 * fields without a version bump; unknown message types are errors.
 */
#ifndef GPROF_MSG_H
#define GPROF_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msgtypes.h"
#include "pbuf.h"
#include "perr.h"

/* Zeroes m and sets type, id and every field's default. */
void msg_init(struct msg *m, enum msg_type type, uint64_t id);
/* Sets an array element's defaults (rank = -1, ...). */
void msg_elem_init(enum msg_elem kind, void *elem);

/*
 * Parses and validates one JSON frame's text into m (which it initialises).
 * Returns 0; -EBADMSG (not JSON, invalid UTF-8, too deep, not an object,
 * a field of the wrong type or out of range, a duplicate key, a missing
 * required field); -EPROTONOSUPPORT (unknown "type": m->type is MSG_NONE
 * and m->id is set, so the caller can answer with an error reply); or
 * -ENOMEM. err says which field and why. On failure m holds nothing that
 * needs msg_deinit, but calling it is harmless.
 */
int msg_decode(struct msg *m, const char *json, size_t len, struct perr *err);

/* Frees what msg_decode allocated; harmless on a hand-built msg. */
void msg_deinit(struct msg *m);

/* Validates m with the decoder's rules and appends it as one JSON frame.
 * 0, -EINVAL (a field breaks a rule: err says which), -EMSGSIZE (over the
 * 1 MiB frame limit), -ENOBUFS or -ENOMEM. */
int msg_encode(struct pbuf *out, const struct msg *m, struct perr *err);

/* Builds and encodes an error reply in one call. */
int msg_encode_error(struct pbuf *out, uint64_t id, enum msg_errcode code,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Wire names; "?" for an out-of-range value. */
const char *msg_type_name(enum msg_type t);
const char *msg_errcode_name(int code);
const char *msg_tstate_name(int state);
const char *msg_trace_state_name(int state);
const char *msg_kind_name(int kind);
/* Wire name -> enum value, or -1. */
int msg_type_from_name(const char *name);

/* Formats an activity mask as "kernel,memcpy,..." into buf; parses the
 * same list (as gprofctl's --activities takes it). parse returns the mask
 * or -EINVAL with err naming the unknown activity. */
size_t msg_activities_format(int64_t mask, char *buf, size_t size);
int64_t msg_activities_parse(const char *list, struct perr *err);
/* Formats an options mask (MSG_OPT_*) as gprofctl's flags name them,
 * "--record-shapes, --with-stack", into buf, for notes that name what was
 * asked; returns the length. */
size_t msg_options_flags(int64_t mask, char *buf, size_t size);

/* Writes a fresh trace id, "YYYYMMDDTHHMMSSZ-xxxxxx" (UTC time and 24 random
 * bits): a token, sortable by time, the same from the daemon and gprofctl. */
void msg_trace_id_new(char *out, size_t size);

/* True when a request type expects a reply, i.e. its sender waits for one. */
bool msg_type_is_request(enum msg_type t);

#endif
