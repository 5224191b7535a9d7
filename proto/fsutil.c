/* fsutil: see fsutil.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"

int fsutil_mkdir_p(const char *path, mode_t mode)
{
	char tmp[4096], *p;
	struct stat st;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) != 0) {
		if (errno != EEXIST)
			return -errno;
		if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
	return 0;
}

const char *fsutil_client_socket(char *buf, size_t size)
{
	const char *env = getenv("GPROF_SOCKET"), *xdg = getenv("XDG_RUNTIME_DIR");

	if (env && *env)
		return env;
	if (access("/run/gprofd/gprofd.sock", F_OK) == 0 || xdg == NULL || !*xdg)
		return "/run/gprofd/gprofd.sock";
	snprintf(buf, size, "%s/gprofd/gprofd.sock", xdg);
	return buf;
}
