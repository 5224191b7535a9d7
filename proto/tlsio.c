/*
 * tlsio: see tlsio.h. OpenSSL 3 over a pair of memory BIOs per session:
 * received ciphertext is written into `rbio`, what OpenSSL produces lands
 * in `wbio` and is moved to the caller's `out` after every call (drain),
 * so nothing here ever touches a socket or blocks.
 *
 * Settings: TLS 1.2 or later; no renegotiation (a peer cannot make the
 * daemon redo handshakes); no session tickets (gprofctl connects fresh
 * each run); buffers released while a connection is idle (10,000 idle
 * connections must stay cheap). A tls_ctx is an SSL_CTX, whose own
 * reference count keeps it alive while sessions made from it exist.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tlsio.h"

#define TLS_RECORD 16384 /* the largest plaintext of one TLS record */

struct tlsio {
	SSL *ssl;
	BIO *rbio, *wbio;       /* owned by ssl */
	struct pbuf pending;    /* plaintext written before the handshake finished */
	bool fed;               /* some ciphertext has arrived */
	bool server;
	char desc[64];
};

bool tls_available(void)
{
	return true;
}

/* The most useful reason OpenSSL has queued, or what. */
static const char *ossl_reason(char *buf, size_t n, const char *what)
{
	unsigned long e = ERR_peek_last_error();

	if (e == 0)
		return what;
	ERR_error_string_n(e, buf, n);
	/* "error:0A000086:SSL routines::certificate verify failed": keep the
	 * words after the last colon */
	{
		char *last = strrchr(buf, ':');

		if (last != NULL && last[1] != 0)
			memmove(buf, last + 1, strlen(last + 1) + 1);
	}
	return buf;
}

static SSL_CTX *new_ctx(const SSL_METHOD *m, struct perr *err)
{
	SSL_CTX *c = SSL_CTX_new(m);

	if (c == NULL) {
		perr_set(err, -ENOMEM, "cannot set up TLS (SSL_CTX_new failed)");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
	SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
	SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_num_tickets(c, 0);
	return c;
}

static int load_pair(SSL_CTX *c, const char *cert, const char *key, const char *what,
                     struct perr *err)
{
	char buf[256];

	ERR_clear_error();
	if (SSL_CTX_use_certificate_chain_file(c, cert) != 1)
		return perr_set(err, -EINVAL, "%s certificate %s: %s (a PEM file: the certificate, "
		                "then any intermediates)", what, cert,
		                ossl_reason(buf, sizeof(buf), "cannot read it"));
	ERR_clear_error();
	if (SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1 &&
	    ERR_GET_LIB(ERR_peek_last_error()) == ERR_LIB_X509 &&
	    ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
		return perr_set(err, -EINVAL, "%s key %s does not belong to certificate %s", what,
		                key, cert);
	if (ERR_peek_last_error() != 0)
		return perr_set(err, -EINVAL, "%s key %s: %s (a PEM private key, unencrypted)",
		                what, key, ossl_reason(buf, sizeof(buf), "cannot read it"));
	if (SSL_CTX_check_private_key(c) != 1)
		return perr_set(err, -EINVAL, "%s key %s does not belong to certificate %s", what,
		                key, cert);
	return 0;
}

int tls_server_ctx(struct tls_ctx **out, const char *cert, const char *key,
                   const char *client_ca, struct perr *err)
{
	SSL_CTX *c = new_ctx(TLS_server_method(), err);
	char buf[256];
	int r;

	*out = NULL;
	if (c == NULL)
		return -ENOMEM;
	r = load_pair(c, cert, key, "tls.cert/tls.key:", err);
	if (r == 0 && client_ca != NULL && client_ca[0] != 0) {
		STACK_OF(X509_NAME) *names;

		ERR_clear_error();
		if (SSL_CTX_load_verify_locations(c, client_ca, NULL) != 1 ||
		    (names = SSL_load_client_CA_file(client_ca)) == NULL) {
			r = perr_set(err, -EINVAL, "tls.client_ca %s: %s (a PEM file of CA "
			             "certificates)", client_ca,
			             ossl_reason(buf, sizeof(buf), "no certificate in it"));
		} else {
			SSL_CTX_set_client_CA_list(c, names);
			SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
		}
	}
	if (r < 0) {
		SSL_CTX_free(c);
		return r;
	}
	*out = (struct tls_ctx *)c;
	return 0;
}

int tls_client_ctx(struct tls_ctx **out, const char *ca, const char *cert, const char *key,
                   struct perr *err)
{
	SSL_CTX *c = new_ctx(TLS_client_method(), err);
	char buf[256];
	int r = 0;

	*out = NULL;
	if (c == NULL)
		return -ENOMEM;
	SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
	ERR_clear_error();
	if (ca != NULL && ca[0] != 0) {
		if (SSL_CTX_load_verify_locations(c, ca, NULL) != 1)
			r = perr_set(err, -EINVAL, "--tls-ca %s: %s (a PEM file of CA certificates)",
			             ca, ossl_reason(buf, sizeof(buf), "no certificate in it"));
	} else if (SSL_CTX_set_default_verify_paths(c) != 1) {
		r = perr_set(err, -EINVAL, "cannot load the system's CA certificates: %s (name "
		             "the daemons' CA with --tls-ca)",
		             ossl_reason(buf, sizeof(buf), "unknown reason"));
	}
	if (r == 0 && (cert != NULL) != (key != NULL))
		r = perr_set(err, -EINVAL, "--tls-cert and --tls-key go together");
	if (r == 0 && cert != NULL)
		r = load_pair(c, cert, key, "--tls-cert/--tls-key:", err);
	if (r < 0) {
		SSL_CTX_free(c);
		return r;
	}
	*out = (struct tls_ctx *)c;
	return 0;
}

void tls_ctx_unref(struct tls_ctx *c)
{
	SSL_CTX_free((SSL_CTX *)c);
}

/* Moves what OpenSSL wants sent into out. */
static int drain(struct tlsio *t, struct pbuf *out, struct perr *err)
{
	size_t pend;
	int got;

	while ((pend = BIO_ctrl_pending(t->wbio)) > 0) {
		if (pend > INT32_MAX)
			pend = INT32_MAX;
		if (pbuf_reserve(out, pend) < 0)
			return perr_set(err, -ENOBUFS, "TLS output of %zu bytes does not fit", pend);
		got = BIO_read(t->wbio, out->data + out->len, (int)pend);
		if (got <= 0)
			break;
		out->len += (size_t)got;
	}
	return 0;
}

struct tlsio *tlsio_new(struct tls_ctx *c, const char *server_name, struct pbuf *out,
                        struct perr *err)
{
	struct tlsio *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		perr_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	pbuf_init(&t->pending, 0);
	t->server = server_name == NULL;
	t->ssl = SSL_new((SSL_CTX *)c);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		SSL_free(t->ssl);
		free(t);
		perr_set(err, -ENOMEM, "cannot set up a TLS session");
		return NULL;
	}
	SSL_set_bio(t->ssl, t->rbio, t->wbio);
	if (t->server) {
		SSL_set_accept_state(t->ssl);
		return t;
	}
	SSL_set_connect_state(t->ssl);
	{
		ASN1_OCTET_STRING *ip = a2i_IPADDRESS(server_name);
		int ok;

		/* a name is checked against the certificate's DNS names and sent as
		 * SNI; an address against its IP addresses */
		if (ip != NULL) {
			ASN1_OCTET_STRING_free(ip);
			ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), server_name);
		} else {
			ok = SSL_set1_host(t->ssl, server_name) &&
			     SSL_set_tlsext_host_name(t->ssl, server_name);
		}
		if (!ok) {
			perr_set(err, -EINVAL, "%s cannot be checked against a certificate",
			         server_name);
			tlsio_free(t);
			return NULL;
		}
	}
	ERR_clear_error();
	SSL_do_handshake(t->ssl); /* WANT_READ: the ClientHello is in wbio */
	if (drain(t, out, err) < 0) {
		tlsio_free(t);
		return NULL;
	}
	return t;
}

void tlsio_free(struct tlsio *t)
{
	if (t == NULL)
		return;
	SSL_free(t->ssl);
	pbuf_deinit(&t->pending);
	free(t);
}

bool tlsio_handshake_done(const struct tlsio *t)
{
	return SSL_is_init_finished(t->ssl);
}

const char *tlsio_describe(const struct tlsio *t)
{
	struct tlsio *w = (struct tlsio *)t;

	if (!SSL_is_init_finished(t->ssl))
		return "";
	if (w->desc[0] == 0)
		snprintf(w->desc, sizeof(w->desc), "%s %s", SSL_get_version(t->ssl),
		         SSL_CIPHER_get_name(SSL_get_current_cipher(t->ssl)));
	return w->desc;
}

/* Why the handshake or a record failed, for people. */
static int failed(struct tlsio *t, int e, struct perr *err)
{
	char buf[256];
	long v = SSL_get_verify_result(t->ssl);

	if (e == SSL_ERROR_SSL && v != X509_V_OK)
		return perr_set(err, -EACCES, "TLS: the %s's certificate was refused: %s (%s)",
		                t->server ? "client" : "daemon", X509_verify_cert_error_string(v),
		                t->server ? "tls.client_ca names the CA it must chain to" :
		                "name the CA that signed it with --tls-ca");
	if (e == SSL_ERROR_SSL && !SSL_is_init_finished(t->ssl) && t->server &&
	    SSL_get_peer_certificate(t->ssl) == NULL &&
	    (SSL_CTX_get_verify_mode(SSL_get_SSL_CTX(t->ssl)) & SSL_VERIFY_FAIL_IF_NO_PEER_CERT) &&
	    ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
		return perr_set(err, -EACCES, "TLS: the client sent no certificate, and this "
		                "daemon asks for one (tls.client_ca)");
	if (e == SSL_ERROR_SSL && !t->server &&
	    ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
		return perr_set(err, -EACCES, "TLS: the daemon asks for a client certificate "
		                "(tls.client_ca): give one with --tls-cert and --tls-key");
	if (e == SSL_ERROR_SSL)
		return perr_set(err, -EPROTO, "TLS: %s",
		                ossl_reason(buf, sizeof(buf), "protocol error"));
	return perr_set(err, -EPROTO, "TLS: error %d", e);
}

static int flush_pending(struct tlsio *t, struct pbuf *out, struct perr *err)
{
	struct pbuf p = t->pending;
	int r;

	if (p.len == 0)
		return 0;
	pbuf_init(&t->pending, 0);
	r = tlsio_write(t, p.data, p.len, out, err);
	pbuf_deinit(&p);
	return r;
}

/* Runs the session over what rbio holds: the handshake, then every whole
 * record's plaintext to plain. 0 when it needs more bytes, else as
 * tlsio_feed. */
static int advance(struct tlsio *t, int (*plain)(void *ud, const char *data, size_t len),
                   void *ud, struct pbuf *out, struct perr *err)
{
	char buf[TLS_RECORD];
	size_t got;
	int r, e;

	for (;;) {
		ERR_clear_error();
		if (!SSL_is_init_finished(t->ssl)) {
			r = SSL_do_handshake(t->ssl);
			if (r != 1) {
				e = SSL_get_error(t->ssl, r);
				if (drain(t, out, err) < 0)
					return -ENOBUFS;
				if (e == SSL_ERROR_WANT_READ)
					return 0;
				return failed(t, e, err);
			}
			if (flush_pending(t, out, err) < 0)
				return -EPROTO;
		}
		r = SSL_read_ex(t->ssl, buf, sizeof(buf), &got);
		if (r == 1) {
			if (drain(t, out, err) < 0)
				return -ENOBUFS;
			r = plain(ud, buf, got);
			if (r < 0)
				return r;
			continue;
		}
		e = SSL_get_error(t->ssl, r);
		if (drain(t, out, err) < 0)
			return -ENOBUFS;
		if (e == SSL_ERROR_WANT_READ)
			return 0;
		if (e == SSL_ERROR_ZERO_RETURN)
			return 1;
		return failed(t, e, err);
	}
}

int tlsio_feed(struct tlsio *t, const void *in, size_t n,
               int (*plain)(void *ud, const char *data, size_t len), void *ud,
               struct pbuf *out, struct perr *err)
{
	size_t off = 0, piece;
	int r;

	if (n > 0 && !t->fed) {
		uint8_t b = *(const uint8_t *)in;

		t->fed = true;
		/* a TLS stream begins with a handshake record (22), or an alert (21) */
		if (b != 22 && b != 21)
			return perr_set(err, -EPROTONOSUPPORT, "TLS: the %s does not speak TLS (its first "
			                "bytes are no TLS record)", t->server ? "client" : "daemon");
	}
	/* a record's worth at a time, consumed before the next: rbio stays
	 * small instead of growing to the size of a read */
	do {
		piece = n - off < TLS_RECORD ? n - off : TLS_RECORD;
		if (piece > 0 && BIO_write(t->rbio, (const char *)in + off, (int)piece) != (int)piece)
			return perr_set(err, -ENOMEM, "TLS: cannot buffer %zu received bytes", piece);
		off += piece;
		r = advance(t, plain, ud, out, err);
	} while (r == 0 && off < n);
	return r;
}

int tlsio_write(struct tlsio *t, const void *p, size_t n, struct pbuf *out, struct perr *err)
{
	size_t done = 0, wrote;
	int e;

	if (!SSL_is_init_finished(t->ssl)) {
		if (pbuf_append(&t->pending, p, n) < 0)
			return perr_set(err, -ENOBUFS, "TLS: %zu bytes wait for the handshake", n);
		return 0;
	}
	/* one record at a time, drained as it is made: the memory BIO then
	 * never grows (growing it copies and wipes its old buffer) */
	while (done < n) {
		ERR_clear_error();
		if (SSL_write_ex(t->ssl, (const char *)p + done,
		                 n - done < TLS_RECORD ? n - done : TLS_RECORD, &wrote) != 1) {
			e = SSL_get_error(t->ssl, 0);
			return failed(t, e, err);
		}
		done += wrote;
		if (drain(t, out, err) < 0)
			return -ENOBUFS;
	}
	return drain(t, out, err);
}

void tlsio_close(struct tlsio *t, struct pbuf *out)
{
	if (SSL_is_init_finished(t->ssl)) {
		ERR_clear_error();
		SSL_shutdown(t->ssl);
		drain(t, out, NULL);
	}
}
