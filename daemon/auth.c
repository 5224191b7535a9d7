/*
 * auth: see auth.h. Nettle (GnuTLS's crypto library) computes the HMAC and
 * compares in constant time; getrandom(2) makes the nonce. Nettle rather
 * than OpenSSL: the same primitives for a twentieth of the resident memory
 * (docs/BENCHMARKS.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "auth.h"

static void to_hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = 0;
}

int auth_load_token(const char *path, char *out, size_t size, size_t *len, struct perr *err)
{
	struct stat st;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return perr_set(err, -errno, "auth_token_file %s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return perr_set(err, -EINVAL, "auth_token_file %s: not a regular file", path);
	}
	if (st.st_mode & 077) {
		close(fd);
		return perr_set(err, -EPERM, "auth_token_file %s: readable by others (mode %03o); "
		                "chmod 600 it", path, (unsigned)(st.st_mode & 0777));
	}
	n = read(fd, out, size - 1);
	close(fd);
	if (n < 0)
		return perr_set(err, -errno, "auth_token_file %s: %s", path, strerror(errno));
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
		n--;
	out[n] = 0;
	if (n < 16)
		return perr_set(err, -EINVAL, "auth_token_file %s: the token must be at least 16 "
		                "bytes (e.g. head -c 32 /dev/urandom | base64 > %s)", path, path);
	*len = (size_t)n;
	return 0;
}

int auth_nonce(char out[65])
{
	unsigned char rnd[32];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	to_hex(rnd, sizeof(rnd), out);
	return 0;
}

void auth_proof(const char *key, size_t keylen, const char *msg, char out[65])
{
	unsigned char mac[SHA256_DIGEST_SIZE];
	struct hmac_sha256_ctx ctx;

	hmac_sha256_set_key(&ctx, keylen, (const uint8_t *)key);
	hmac_sha256_update(&ctx, strlen(msg), (const uint8_t *)msg);
	hmac_sha256_digest(&ctx, sizeof(mac), mac);
	to_hex(mac, sizeof(mac), out);
}

bool auth_verify(const char *key, size_t keylen, const char *nonce, const char *proof)
{
	char want[65];

	auth_proof(key, keylen, nonce, want);
	return strlen(proof) == 64 && memeql_sec(want, proof, 64);
}
