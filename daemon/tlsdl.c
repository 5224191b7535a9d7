/*
 * tlsdl.c: tlsio.h for the daemon, through the module gprofd-tls.so
 * (tlsmod.h says why TLS is a module), loaded the first time a TLS
 * context is asked for and kept until exit.
 *
 * Where the module is looked for: beside the gprofd executable (the build
 * tree, and installs that keep them together), then in the directory it
 * was installed to (GPROFD_TLS_DIR, libdir/gprofd), the agent's. Both are
 * as trusted as the executable itself; no path comes from a client or
 * the environment.
 *
 * Every session call is reached only with a session made from a context,
 * so only tls_server_ctx can find the module missing, and it says so.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tlsmod.h"

static const struct tlsmod *mod;

/* Loads the module at path into mod; 0, or -1 with why written. */
static int load_from(const char *path, char *why, size_t n)
{
	const struct tlsmod *t;
	void *h;

	if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		snprintf(why, n, "%s", dlerror());
		return -1;
	}
	t = dlsym(h, TLSMOD_SYMBOL);
	if (t == NULL || t->size != sizeof(*t) || strcmp(t->version, GPROF_VERSION) != 0) {
		snprintf(why, n, "%s is from another build of gprofd (%s, this is %s)", path,
		         t ? t->version : "no " TLSMOD_SYMBOL, GPROF_VERSION);
		dlclose(h);
		return -1;
	}
	mod = t; /* the handle stays open until exit */
	return 0;
}

static int load(struct perr *err)
{
	char exe[PATH_MAX], path[PATH_MAX + sizeof(TLSMOD_NAME)], why[PATH_MAX + 128] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/%s", exe, TLSMOD_NAME);
			if (access(path, F_OK) == 0 && load_from(path, why, sizeof(why)) == 0)
				return 0;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", GPROFD_TLS_DIR, TLSMOD_NAME);
	if (access(path, F_OK) == 0 && load_from(path, why, sizeof(why)) == 0)
		return 0;
	if (why[0] == '\0')
		snprintf(why, sizeof(why), "not found beside gprofd or in %s", GPROFD_TLS_DIR);
	return perr_set(err, -ENOENT, "tls.listen needs gprofd's TLS module %s: %s; install it "
	                "with gprofd, or set tls.listen: off", TLSMOD_NAME, why);
}

bool tls_available(void)
{
	return true;
}

int tls_server_ctx(struct tls_ctx **out, const char *cert, const char *key,
                   const char *client_ca, struct perr *err)
{
	int r;

	*out = NULL;
	if (mod == NULL && (r = load(err)) < 0)
		return r;
	return mod->server_ctx(out, cert, key, client_ca, err);
}

int tls_client_ctx(struct tls_ctx **out, const char *ca, const char *cert, const char *key,
                   struct perr *err)
{
	(void)ca;
	(void)cert;
	(void)key;
	*out = NULL;
	return perr_set(err, -ENOTSUP, "the daemon makes no TLS client connections");
}

void tls_ctx_unref(struct tls_ctx *c)
{
	if (c != NULL)
		mod->ctx_unref(c);
}

struct tlsio *tlsio_new(struct tls_ctx *c, const char *server_name, struct pbuf *out,
                        struct perr *err)
{
	return mod->session_new(c, server_name, out, err);
}

void tlsio_free(struct tlsio *t)
{
	if (t != NULL)
		mod->session_free(t);
}

int tlsio_feed(struct tlsio *t, const void *in, size_t n,
               int (*plain)(void *ud, const char *data, size_t len), void *ud,
               struct pbuf *out, struct perr *err)
{
	return mod->feed(t, in, n, plain, ud, out, err);
}

int tlsio_write(struct tlsio *t, const void *p, size_t n, struct pbuf *out, struct perr *err)
{
	return mod->write(t, p, n, out, err);
}

void tlsio_close(struct tlsio *t, struct pbuf *out)
{
	mod->close(t, out);
}

bool tlsio_handshake_done(const struct tlsio *t)
{
	return mod->handshake_done(t);
}

const char *tlsio_describe(const struct tlsio *t)
{
	return mod->describe(t);
}
