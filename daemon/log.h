/*
 * log: the daemon's logging. Lines go to stderr with a syslog priority
 * prefix ("<3>"), which journald turns into the entry's priority, so the
 * same binary logs correctly under systemd, in a container and in a
 * terminal. Messages below the current level cost one comparison.
 *
 * Floor: a leaf, included by every module. Owns the level. Called by
 * everyone; main.c sets the level.
 */
#ifndef GPROFD_LOG_H
#define GPROFD_LOG_H

#include <syslog.h>

extern int log_level;

void log_init(int level);
void log_write(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_msg(prio, ...) do { \
	if ((prio) <= log_level) log_write((prio), __VA_ARGS__); \
} while (0)
#define log_err(...) log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
