/*
 * tlsio_none: the build without OpenSSL (tlsio.h). Asking for TLS fails
 * with a message that says how to get it; nothing else can be reached,
 * since no session can be made without a ctx.
 */
#include <errno.h>

#include "tlsio.h"

#define NO_TLS "this build has no TLS: install libssl-dev and rebuild (meson setup -Dtls=enabled)"

bool tls_available(void)
{
	return false;
}

int tls_server_ctx(struct tls_ctx **out, const char *cert, const char *key,
                   const char *client_ca, struct perr *err)
{
	*out = NULL;
	return perr_set(err, -ENOTSUP, NO_TLS);
}

int tls_client_ctx(struct tls_ctx **out, const char *ca, const char *cert, const char *key,
                   struct perr *err)
{
	*out = NULL;
	return perr_set(err, -ENOTSUP, NO_TLS);
}

void tls_ctx_unref(struct tls_ctx *c)
{
}

struct tlsio *tlsio_new(struct tls_ctx *c, const char *server_name, struct pbuf *out,
                        struct perr *err)
{
	perr_set(err, -ENOTSUP, NO_TLS);
	return NULL;
}

void tlsio_free(struct tlsio *t)
{
}

int tlsio_feed(struct tlsio *t, const void *in, size_t n,
               int (*plain)(void *ud, const char *data, size_t len), void *ud,
               struct pbuf *out, struct perr *err)
{
	return perr_set(err, -ENOTSUP, NO_TLS);
}

int tlsio_write(struct tlsio *t, const void *p, size_t n, struct pbuf *out, struct perr *err)
{
	return perr_set(err, -ENOTSUP, NO_TLS);
}

void tlsio_close(struct tlsio *t, struct pbuf *out)
{
}

bool tlsio_handshake_done(const struct tlsio *t)
{
	return false;
}

const char *tlsio_describe(const struct tlsio *t)
{
	return "";
}
