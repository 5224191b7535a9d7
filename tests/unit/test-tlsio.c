/* Unit tests for proto/tlsio.c: a client and a server session in one
 * process, each one's output fed to the other, with a CA and certificates
 * made here (OpenSSL's API, written to a temporary directory): the
 * handshake, plaintext written before it, large writes in pieces, close,
 * an unknown CA, a wrong name, and a peer that is no TLS at all. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "tlsio.h"

static char dir[] = "/tmp/test-tlsio-XXXXXX";
static char path_buf[8][512];
static int n_paths;

static const char *path(const char *name)
{
	char *p = path_buf[n_paths++ % 8];

	snprintf(p, sizeof(path_buf[0]), "%s/%s", dir, name);
	return p;
}

/* A key and a certificate for cn (ip: its subjectAltName address) signed
 * by (ca, cakey), or self-signed when ca is NULL; written as NAME.crt and
 * NAME.key. */
static void make_cert(const char *name, const char *cn, const char *san, X509 *ca,
                      EVP_PKEY *cakey, X509 **out_cert, EVP_PKEY **out_key)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	FILE *f;

	assert_non_null(key);
	ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(random() & 0x7fffffff));
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	                           (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : X509_get_subject_name(x));
	X509V3_set_ctx(&v3, ca ? ca : x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, ca ? NID_subject_alt_name : NID_basic_constraints,
	                          ca ? san : "critical,CA:TRUE");
	assert_non_null(ext);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	assert_true(X509_sign(x, ca ? cakey : key, EVP_sha256()) > 0);
	f = fopen(path(name), "w");
	assert_non_null(f);
	PEM_write_X509(f, x);
	fclose(f);
	{
		char kn[64];

		snprintf(kn, sizeof(kn), "%.50s.key", name);
		f = fopen(path(kn), "w");
		assert_non_null(f);
		PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
		fclose(f);
	}
	*out_cert = x;
	*out_key = key;
}

static int setup(void **state)
{
	X509 *ca, *other, *srv, *cli;
	EVP_PKEY *cak, *otherk, *srvk, *clik;

	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	make_cert("ca.crt", "test ca", NULL, NULL, NULL, &ca, &cak);
	make_cert("other.crt", "other ca", NULL, NULL, NULL, &other, &otherk);
	make_cert("server.crt", "gprofd", "IP:127.0.0.1,DNS:localhost", ca, cak, &srv, &srvk);
	make_cert("client.crt", "client", "DNS:client", ca, cak, &cli, &clik);
	X509_free(ca);
	X509_free(other);
	X509_free(srv);
	X509_free(cli);
	EVP_PKEY_free(cak);
	EVP_PKEY_free(otherk);
	EVP_PKEY_free(srvk);
	EVP_PKEY_free(clik);
	return 0;
}

static int teardown(void **state)
{
	const char *names[] = { "ca.crt", "ca.crt.key", "other.crt", "other.crt.key",
	                        "server.crt", "server.crt.key", "client.crt", "client.crt.key" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(path(names[i]));
	rmdir(dir);
	return 0;
}

/* What each side's plaintext callback collected. */
struct sink {
	struct pbuf got;
	int stop_after; /* return -EPIPE after this many calls (0: never) */
	int calls;
};

static int on_plain(void *ud, const char *data, size_t n)
{
	struct sink *s = ud;

	assert_int_equal(pbuf_append(&s->got, data, n), 0);
	if (s->stop_after && ++s->calls >= s->stop_after)
		return -EPIPE;
	return 0;
}

struct pair {
	struct tls_ctx *sctx, *cctx;
	struct tlsio *srv, *cli;
	struct pbuf to_srv, to_cli; /* bytes in flight */
	struct sink at_srv, at_cli;
	int srv_r, cli_r;
	struct perr serr, cerr;
};

static void pair_init(struct pair *p, const char *client_ca, const char *trust,
                      const char *name, bool client_cert)
{
	struct perr err;

	memset(p, 0, sizeof(*p));
	pbuf_init(&p->to_srv, 0);
	pbuf_init(&p->to_cli, 0);
	pbuf_init(&p->at_srv.got, 0);
	pbuf_init(&p->at_cli.got, 0);
	assert_int_equal(tls_server_ctx(&p->sctx, path("server.crt"), path("server.crt.key"),
	                                client_ca, &err), 0);
	assert_int_equal(tls_client_ctx(&p->cctx, trust,
	                                client_cert ? path("client.crt") : NULL,
	                                client_cert ? path("client.crt.key") : NULL, &err), 0);
	p->srv = tlsio_new(p->sctx, NULL, NULL, &err);
	assert_non_null(p->srv);
	p->cli = tlsio_new(p->cctx, name, &p->to_srv, &err);
	assert_non_null(p->cli);
	assert_true(p->to_srv.len > 0); /* the ClientHello */
}

/* Moves bytes both ways until neither side has anything to say, or one
 * has failed. */
static void pump(struct pair *p)
{
	int rounds = 0;

	while ((p->to_srv.len > 0 || p->to_cli.len > 0) && p->srv_r >= 0 && p->cli_r >= 0) {
		struct pbuf in = p->to_srv;

		assert_true(++rounds < 100);
		pbuf_init(&p->to_srv, 0);
		if (in.len > 0)
			p->srv_r = tlsio_feed(p->srv, in.data, in.len, on_plain, &p->at_srv,
			                      &p->to_cli, &p->serr);
		pbuf_deinit(&in);
		in = p->to_cli;
		pbuf_init(&p->to_cli, 0);
		if (in.len > 0 && p->srv_r >= 0)
			p->cli_r = tlsio_feed(p->cli, in.data, in.len, on_plain, &p->at_cli,
			                      &p->to_srv, &p->cerr);
		pbuf_deinit(&in);
	}
}

static void pair_deinit(struct pair *p)
{
	tlsio_free(p->srv);
	tlsio_free(p->cli);
	tls_ctx_unref(p->sctx);
	tls_ctx_unref(p->cctx);
	pbuf_deinit(&p->to_srv);
	pbuf_deinit(&p->to_cli);
	pbuf_deinit(&p->at_srv.got);
	pbuf_deinit(&p->at_cli.got);
}

static void test_handshake_then_both_ways(void **state)
{
	struct pair p;
	struct perr err;

	(void)state;
	assert_true(tls_available());
	pair_init(&p, NULL, path("ca.crt"), "127.0.0.1", false);
	/* written before the handshake: waits inside the session */
	assert_int_equal(tlsio_write(p.cli, "hello", 5, &p.to_srv, &err), 0);
	assert_false(tlsio_handshake_done(p.cli));
	assert_string_equal(tlsio_describe(p.cli), "");
	pump(&p);
	assert_int_equal(p.srv_r, 0);
	assert_int_equal(p.cli_r, 0);
	assert_true(tlsio_handshake_done(p.srv));
	assert_true(tlsio_handshake_done(p.cli));
	assert_non_null(strstr(tlsio_describe(p.cli), "TLSv1.3"));
	assert_int_equal(p.at_srv.got.len, 5);
	assert_memory_equal(p.at_srv.got.data, "hello", 5);
	assert_int_equal(tlsio_write(p.srv, "world!", 6, &p.to_cli, &err), 0);
	assert_true(p.to_cli.len > 6);
	assert_null(memmem(p.to_cli.data, p.to_cli.len, "world!", 6)); /* not in clear */
	pump(&p);
	assert_int_equal(p.at_cli.got.len, 6);
	assert_memory_equal(p.at_cli.got.data, "world!", 6);
	/* close_notify: the other side's feed says the peer closed */
	tlsio_close(p.cli, &p.to_srv);
	assert_true(p.to_srv.len > 0);
	pump(&p);
	assert_int_equal(p.srv_r, 1);
	pair_deinit(&p);
}

static void test_large_write_arrives_whole_in_pieces(void **state)
{
	size_t n = 3u << 20, i;
	uint8_t *big = malloc(n);
	struct pair p;
	struct perr err;

	(void)state;
	for (i = 0; i < n; i++)
		big[i] = (uint8_t)(i * 2654435761u >> 13);
	pair_init(&p, NULL, path("ca.crt"), "localhost", false);
	pump(&p);
	assert_int_equal(tlsio_write(p.srv, big, n, &p.to_cli, &err), 0);
	/* fed to the client a few bytes at a time at first, then the rest */
	{
		struct pbuf in = p.to_cli;
		size_t off = 0, step;

		pbuf_init(&p.to_cli, 0);
		while (off < in.len) {
			step = off < 1000 ? 7 : in.len - off;
			assert_int_equal(tlsio_feed(p.cli, in.data + off, step, on_plain, &p.at_cli,
			                            &p.to_srv, &err), 0);
			off += step;
		}
		pbuf_deinit(&in);
	}
	assert_int_equal(p.at_cli.got.len, n);
	assert_memory_equal(p.at_cli.got.data, big, n);
	/* a callback that stops the feed: its code comes back */
	p.at_cli.stop_after = 1;
	assert_int_equal(tlsio_write(p.srv, big, 100000, &p.to_cli, &err), 0);
	assert_int_equal(tlsio_feed(p.cli, p.to_cli.data, p.to_cli.len, on_plain, &p.at_cli,
	                            &p.to_srv, &err), -EPIPE);
	free(big);
	pair_deinit(&p);
}

static void test_unknown_ca_refused(void **state)
{
	struct pair p;

	(void)state;
	pair_init(&p, NULL, path("other.crt"), "127.0.0.1", false);
	pump(&p);
	assert_int_equal(p.cli_r, -EACCES);
	assert_non_null(strstr(p.cerr.msg, "daemon's certificate was refused"));
	assert_non_null(strstr(p.cerr.msg, "--tls-ca"));
	assert_false(tlsio_handshake_done(p.cli));
	pair_deinit(&p);
}

static void test_wrong_name_refused(void **state)
{
	const char *names[] = { "gpu-node-17.example", "10.0.0.9" }; /* a name, an address */
	struct pair p;
	size_t i;

	(void)state;
	for (i = 0; i < 2; i++) {
		pair_init(&p, NULL, path("ca.crt"), names[i], false);
		pump(&p);
		assert_int_equal(p.cli_r, -EACCES);
		assert_non_null(strstr(p.cerr.msg, "mismatch"));
		pair_deinit(&p);
	}
}

static void test_client_certificate_asked(void **state)
{
	struct pair p;

	(void)state;
	pair_init(&p, path("ca.crt"), path("ca.crt"), "127.0.0.1", false);
	pump(&p);
	assert_true(p.srv_r < 0 || p.cli_r < 0);
	assert_non_null(strstr(p.srv_r < 0 ? p.serr.msg : p.cerr.msg, "certificate"));
	pair_deinit(&p);
	pair_init(&p, path("ca.crt"), path("ca.crt"), "127.0.0.1", true);
	pump(&p);
	assert_int_equal(p.srv_r, 0);
	assert_int_equal(p.cli_r, 0);
	assert_true(tlsio_handshake_done(p.srv));
	pair_deinit(&p);
}

static void test_not_tls(void **state)
{
	struct tls_ctx *c;
	struct tlsio *t;
	struct perr err;
	struct pbuf out;
	struct sink s;
	const char frame[] = "\x12\x00\x00\x00{\"type\":\"hello\"}";

	(void)state;
	pbuf_init(&out, 0);
	memset(&s, 0, sizeof(s));
	pbuf_init(&s.got, 0);
	assert_int_equal(tls_server_ctx(&c, path("server.crt"), path("server.crt.key"), NULL,
	                                &err), 0);
	t = tlsio_new(c, NULL, NULL, &err);
	assert_int_equal(tlsio_feed(t, frame, sizeof(frame) - 1, on_plain, &s, &out, &err),
	                 -EPROTONOSUPPORT);
	assert_non_null(strstr(err.msg, "does not speak TLS"));
	assert_int_equal(s.got.len, 0);
	tlsio_free(t);
	/* a record header of the right type, then garbage: a protocol error */
	t = tlsio_new(c, NULL, NULL, &err);
	assert_int_equal(tlsio_feed(t, "\x16\x03\x01\x00\x05garbage", 12, on_plain, &s, &out,
	                            &err), -EPROTO);
	assert_int_equal(s.got.len, 0);
	tlsio_free(t);
	tls_ctx_unref(c);
	pbuf_deinit(&out);
	pbuf_deinit(&s.got);
}

static void test_bad_files_say_which(void **state)
{
	struct tls_ctx *c;
	struct perr err;

	(void)state;
	assert_int_equal(tls_server_ctx(&c, path("nope.crt"), path("server.crt.key"), NULL, &err),
	                 -EINVAL);
	assert_null(c);
	assert_non_null(strstr(err.msg, "nope.crt"));
	assert_int_equal(tls_server_ctx(&c, path("server.crt"), path("client.crt.key"), NULL,
	                                &err), -EINVAL);
	assert_non_null(strstr(err.msg, "does not belong to certificate"));
	assert_int_equal(tls_server_ctx(&c, path("server.crt"), path("server.crt.key"),
	                                path("server.crt.key"), &err), -EINVAL);
	assert_non_null(strstr(err.msg, "tls.client_ca"));
	assert_int_equal(tls_client_ctx(&c, path("ca.crt"), path("client.crt"), NULL, &err),
	                 -EINVAL);
	assert_non_null(strstr(err.msg, "go together"));
	assert_int_equal(tls_client_ctx(&c, path("missing.crt"), NULL, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "missing.crt"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake_then_both_ways),
		cmocka_unit_test(test_large_write_arrives_whole_in_pieces),
		cmocka_unit_test(test_unknown_ca_refused),
		cmocka_unit_test(test_wrong_name_refused),
		cmocka_unit_test(test_client_certificate_asked),
		cmocka_unit_test(test_not_tls),
		cmocka_unit_test(test_bad_files_say_which),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
