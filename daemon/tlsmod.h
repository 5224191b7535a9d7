/*
 * tlsmod.h: the daemon's TLS, loaded only when tls.listen is on.
 *
 * Why: linking OpenSSL costs every process that loads it about 460 kB of
 * private memory before it does anything (libcrypto's relocated tables:
 * measured in issue 25), more than the rest of an idle gprofd's own data.
 * tls.listen is off by default, so the daemon does not link OpenSSL:
 * tlsio.c is built into a module of its own, gprofd-tls.so, which exports
 * the one table below; tlsdl.c implements tlsio.h by loading the module
 * the first time a TLS context is asked for (tls_server_ctx, at start or
 * on the reload that turns tls.listen on). gprofctl links tlsio.c as
 * before.
 *
 * The table carries the version it was built for: a module from another
 * build is refused with a message, never called.
 */
#ifndef GPROFD_TLSMOD_H
#define GPROFD_TLSMOD_H

#include "tlsio.h"

#define TLSMOD_SYMBOL "gprofd_tls_module"
#define TLSMOD_NAME "gprofd-tls.so"

struct tlsmod {
	const char *version;   /* GPROF_VERSION of the build */
	size_t size;           /* sizeof(struct tlsmod) */
	int (*server_ctx)(struct tls_ctx **out, const char *cert, const char *key,
	                  const char *client_ca, struct perr *err);
	void (*ctx_unref)(struct tls_ctx *c);
	struct tlsio *(*session_new)(struct tls_ctx *c, const char *server_name, struct pbuf *out,
	                             struct perr *err);
	void (*session_free)(struct tlsio *t);
	int (*feed)(struct tlsio *t, const void *in, size_t n,
	            int (*plain)(void *ud, const char *data, size_t len), void *ud,
	            struct pbuf *out, struct perr *err);
	int (*write)(struct tlsio *t, const void *p, size_t n, struct pbuf *out, struct perr *err);
	void (*close)(struct tlsio *t, struct pbuf *out);
	bool (*handshake_done)(const struct tlsio *t);
	const char *(*describe)(const struct tlsio *t);
};

#endif
