/*
 * perr: a human-readable error message, built once where a decode or
 * validation failure is understood, and carried up to whoever reports it
 * (an error reply, a log line, a CLI message).
 *
 * Functions in proto/ return 0 or a negative errno-style code; when they
 * also take a `struct perr *`, they fill it on failure. A NULL perr is
 * allowed everywhere and means "the caller only wants the code".
 */
#ifndef GPROF_PERR_H
#define GPROF_PERR_H

#define PERR_MAX 256

struct perr {
	char msg[PERR_MAX];
};

/* Formats the message into err (if err is not NULL); returns code, so a
 * failure path reads `return perr_set(err, -EINVAL, "...", ...);`. */
int perr_set(struct perr *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
