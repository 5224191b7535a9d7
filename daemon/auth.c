/*
 * auth: see auth.h. getrandom(2) makes the nonce; the HMAC is proto's
 * (Nettle rather than OpenSSL: the same primitives for a twentieth of the
 * resident memory, docs/BENCHMARKS.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "hmac.h"

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
	hmac_hex(rnd, sizeof(rnd), out);
	return 0;
}
