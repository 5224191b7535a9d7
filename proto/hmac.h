/*
 * hmac: the proof of a TCP client's authentication (proto/PROTOCOL.md
 * section 3.2): lowercase hex of HMAC-SHA256(key = the token, message =
 * the nonce's hex text). Defined once, here, for the daemon that checks it
 * and for every client that sends it.
 */
#ifndef GPROF_HMAC_H
#define GPROF_HMAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HMAC_PROOF_LEN 64

/* Writes the proof for nonce as 64 hex characters and a NUL. */
void hmac_proof(const char *key, size_t keylen, const char *nonce,
                char out[HMAC_PROOF_LEN + 1]);
/* Constant-time check of a peer's proof. */
bool hmac_verify(const char *key, size_t keylen, const char *nonce, const char *proof);
/* Lowercase hex of n bytes into out (2n characters and a NUL). */
void hmac_hex(const uint8_t *in, size_t n, char *out);

#endif
