/*
 * tlsmod.c: the table gprofd-tls.so exports (tlsmod.h says why TLS is a
 * module): tlsio.c's functions, linked into the module with OpenSSL.
 * Nothing else in the module is visible outside it.
 */
#include "tlsmod.h"

__attribute__((visibility("default"))) extern const struct tlsmod gprofd_tls_module;

const struct tlsmod gprofd_tls_module = {
	.version = GPROF_VERSION,
	.size = sizeof(struct tlsmod),
	.server_ctx = tls_server_ctx,
	.ctx_unref = tls_ctx_unref,
	.session_new = tlsio_new,
	.session_free = tlsio_free,
	.feed = tlsio_feed,
	.write = tlsio_write,
	.close = tlsio_close,
	.handshake_done = tlsio_handshake_done,
	.describe = tlsio_describe,
};
