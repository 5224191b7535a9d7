/*
 * auth: TCP client authentication by HMAC-SHA256 challenge-response
 * (proto/PROTOCOL.md section 3.2). The daemon sends a fresh random nonce
 * in hello_reply; the client proves it holds the shared token by sending
 * HMAC-SHA256(token, nonce). The token never crosses the network, and a
 * recorded proof is useless for any other connection.
 *
 * Floor: a leaf (no daemon header). Owns nothing. Called by hsession.c (the nonce in
 * hello_reply, the proof in auth).
 */
#ifndef GPROFD_AUTH_H
#define GPROFD_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "perr.h"

/* Reads the token file: must be a regular file not readable or writable
 * by group or others, holding at least 16 bytes (trailing newlines are
 * dropped). 0 or -errno with err. */
int auth_load_token(const char *path, char *out, size_t size, size_t *len, struct perr *err);

/* Writes 64 lowercase hex characters of fresh randomness, NUL-terminated. */
int auth_nonce(char out[65]);

/* The proof itself is proto's: hmac_proof and hmac_verify (proto/hmac.h). */

#endif
