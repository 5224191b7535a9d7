/*
 * tlsio: TLS for the native protocol's TCP connections, as a byte
 * transformer that owns no socket (OpenSSL over memory BIOs), so the
 * daemon's and gprofctl's libuv read and write paths stay as they are:
 *
 *   socket read --ciphertext--> tlsio_feed --plaintext--> frame decoder
 *   message     --plaintext---> tlsio_write --ciphertext--> socket write
 *
 * Whatever TLS has to send (handshake, session tickets, alerts, the
 * records of a write) is appended to the caller's `out` buffer by every
 * call; the caller writes `out` to the socket when it is not empty.
 * Plaintext written before the handshake is done waits inside the session
 * and goes out when it completes.
 *
 * Ownership: a tls_ctx holds the certificates and settings of one side
 * (the daemon's listener, or gprofctl); a session holds a reference to
 * its ctx, so a ctx replaced on reload lives until its last session ends.
 * Both are single-threaded (the loop that owns the connection).
 *
 * Built with OpenSSL (tlsio.c) or without (tlsio_none.c: every setup
 * call fails with a message saying so); callers are the same either way.
 */
#ifndef GPROF_TLSIO_H
#define GPROF_TLSIO_H

#include <stdbool.h>
#include <stddef.h>

#include "pbuf.h"
#include "perr.h"

struct tls_ctx;
struct tlsio;

/* Is TLS compiled in? */
bool tls_available(void);

/* The daemon's side: its certificate chain and key (PEM files), and, when
 * client_ca is not NULL or "", the CA bundle a client's certificate must
 * chain to (the handshake fails without one). 0 or -errno with err. */
int tls_server_ctx(struct tls_ctx **out, const char *cert, const char *key,
                   const char *client_ca, struct perr *err);
/* gprofctl's side: the CA bundle that must sign the daemon's certificate
 * (NULL or "": the system's trust store), and a client certificate and
 * key for daemons that ask for one (both NULL: none). */
int tls_client_ctx(struct tls_ctx **out, const char *ca, const char *cert, const char *key,
                   struct perr *err);
/* Drops the caller's reference. */
void tls_ctx_unref(struct tls_ctx *c);

/* A session. server_name: the host the client dialled (checked against
 * the certificate's names or IP addresses, and sent as SNI); NULL on the
 * server. A client session starts its handshake into out at once. NULL
 * with err on failure. */
struct tlsio *tlsio_new(struct tls_ctx *c, const char *server_name, struct pbuf *out,
                        struct perr *err);
void tlsio_free(struct tlsio *t);

/* Feeds received ciphertext. plain is called with each piece of
 * plaintext (in order); a negative return from it stops feeding and is
 * returned. Returns 0, 1 when the peer closed the TLS session, or a
 * negative errno with err (a failed handshake says why: certificate
 * checks, protocol versions); -EPROTONOSUPPORT when the peer's first
 * bytes are no TLS record (it does not speak TLS at all). */
int tlsio_feed(struct tlsio *t, const void *in, size_t n,
               int (*plain)(void *ud, const char *data, size_t len), void *ud,
               struct pbuf *out, struct perr *err);
/* Encrypts n bytes of plaintext into out (or keeps them until the
 * handshake is done). 0 or -errno with err. */
int tlsio_write(struct tlsio *t, const void *p, size_t n, struct pbuf *out, struct perr *err);
/* Appends a close_notify alert to out. */
void tlsio_close(struct tlsio *t, struct pbuf *out);
bool tlsio_handshake_done(const struct tlsio *t);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384" once the handshake is done, else "". */
const char *tlsio_describe(const struct tlsio *t);

#endif
