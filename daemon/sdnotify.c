/*
 * sdnotify: see sdnotify.h. The library is opened once, on first need.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "log.h"
#include "sdnotify.h"

static struct {
	bool tried;
	void *lib;
	int (*notify)(int, const char *);
	int (*listen_fds)(int);
	int (*is_unix)(int, int, int, const char *, size_t);
	int (*is_inet)(int, int, int, int, unsigned short);
} sd;

static bool load(void)
{
	if (sd.tried)
		return sd.lib != NULL;
	sd.tried = true;
	if (getenv("NOTIFY_SOCKET") == NULL && getenv("LISTEN_FDS") == NULL)
		return false;
	sd.lib = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
	if (sd.lib == NULL) {
		log_warn("systemd asks for notifications, but libsystemd.so.0 cannot be loaded: %s",
		         dlerror());
		return false;
	}
	*(void **)&sd.notify = dlsym(sd.lib, "sd_notify");
	*(void **)&sd.listen_fds = dlsym(sd.lib, "sd_listen_fds");
	*(void **)&sd.is_unix = dlsym(sd.lib, "sd_is_socket_unix");
	*(void **)&sd.is_inet = dlsym(sd.lib, "sd_is_socket_inet");
	if (!sd.notify || !sd.listen_fds || !sd.is_unix || !sd.is_inet) {
		log_warn("libsystemd.so.0 lacks sd_notify or sd_listen_fds");
		dlclose(sd.lib);
		sd.lib = NULL;
	}
	return sd.lib != NULL;
}

void sdnotify_send(const char *state)
{
	if (load())
		sd.notify(0, state);
}

int sdnotify_listen_fds(void)
{
	int n;

	if (!load())
		return 0;
	n = sd.listen_fds(1);
	return n > 0 ? n : 0;
}

bool sdnotify_is_unix_listener(int fd)
{
	return load() && sd.is_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0;
}

bool sdnotify_is_unix_dgram(int fd)
{
	return load() && sd.is_unix(fd, SOCK_DGRAM, -1, NULL, 0) > 0;
}

bool sdnotify_is_inet_listener(int fd)
{
	return load() && sd.is_inet(fd, AF_UNSPEC, SOCK_STREAM, 1, 0) > 0;
}
