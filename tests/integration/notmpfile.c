/*
 * notmpfile.c: an LD_PRELOAD stand-in for a file system without O_TMPFILE
 * (NFS, an old kernel): open(2) asked for O_TMPFILE fails with EOPNOTSUPP,
 * as such a file system answers; every other open goes to libc's. Each
 * refusal is counted, and the count is written at exit to the file named
 * by NOTMPFILE_COUNT, so the test knows its fallback path ran (test-agent.py
 * test_no_tmpfile: the agent's burst file then has a random name, gone at
 * once, agent/scratch.c).
 */
/* both entry points defined here: no redirection of open to open64 */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

static atomic_int refused;

typedef int (*open_fn)(const char *, int, ...);

/* libc's open or open64, found once. */
static int forward(const char *name, const char *path, int flags, mode_t mode)
{
	open_fn real = (open_fn)dlsym(RTLD_NEXT, name);

	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	return real(path, flags, mode);
}

/* The mode argument is there only with O_CREAT or O_TMPFILE. */
static int gate(const char *name, const char *path, int flags, va_list ap)
{
	mode_t mode = 0;

	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		mode = (mode_t)va_arg(ap, int);
	if ((flags & O_TMPFILE) == O_TMPFILE) {
		atomic_fetch_add(&refused, 1);
		errno = EOPNOTSUPP;
		return -1;
	}
	return forward(name, path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	int r;

	va_start(ap, flags);
	r = gate("open", path, flags, ap);
	va_end(ap);
	return r;
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	int r;

	va_start(ap, flags);
	r = gate("open64", path, flags, ap);
	va_end(ap);
	return r;
}

/* Writes the count where the test asked for it. */
__attribute__((destructor)) static void say_count(void)
{
	const char *p = getenv("NOTMPFILE_COUNT");
	FILE *f;

	if (p == NULL || (f = fopen(p, "w")) == NULL)
		return;
	fprintf(f, "%d\n", atomic_load(&refused));
	fclose(f);
}
