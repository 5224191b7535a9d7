/*
 * kconfig: see kconfig.h.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kconfig.h"
#include "window.h"

static int parse_int(const char *v, int64_t *out)
{
	char *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno || end == v || *end || x < 0)
		return -EINVAL;
	*out = x;
	return 0;
}

static const char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t' || *s == '\r')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = 0;
	return s;
}

int kconfig_parse(struct kconfig *k, const char *text, struct perr *err)
{
	static const struct {
		const char *key;
		size_t off;
	} ints[] = {
		{ "ACTIVITIES_DURATION_MSECS", offsetof(struct kconfig, duration_ms) },
		{ "PROFILE_START_TIME", offsetof(struct kconfig, start_time_ms) },
		{ "ACTIVITIES_ITERATIONS", offsetof(struct kconfig, iterations) },
		{ "PROFILE_START_ITERATION", offsetof(struct kconfig, start_iteration) },
		{ "PROFILE_START_ITERATION_ROUNDUP", offsetof(struct kconfig, roundup) },
	};
	char line[4200];
	const char *p = text, *nl;
	int lineno = 0;
	size_t i, n;

	memset(k, 0, sizeof(*k));
	k->duration_ms = KCONFIG_DURATION_DEFAULT_MS;
	while (*p) {
		char *eq;
		const char *key, *val;

		lineno++;
		nl = strchr(p, '\n');
		n = nl ? (size_t)(nl - p) : strlen(p);
		if (n >= sizeof(line))
			return perr_set(err, -EINVAL, "config line %d is longer than %zu bytes",
			                lineno, sizeof(line) - 1);
		memcpy(line, p, n);
		line[n] = 0;
		p += n + (nl ? 1 : 0);
		key = trim(line);
		if (*key == 0 || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (eq == NULL)
			return perr_set(err, -EINVAL, "config line %d \"%.60s\" is not KEY=VALUE",
			                lineno, key);
		if (strchr(eq + 1, '=') != NULL)
			return perr_set(err, -EINVAL, "config line %d \"%.60s\" has more than one "
			                "'=' (Kineto would reject the whole config)", lineno, key);
		*eq = 0;
		val = trim(eq + 1);
		key = trim((char *)key);
		for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
			if (strcmp(key, ints[i].key) == 0)
				break;
		if (i < sizeof(ints) / sizeof(ints[0])) {
			if (parse_int(val, (int64_t *)((char *)k + ints[i].off)) < 0)
				return perr_set(err, -EINVAL, "config line %d: %s=%.40s is not a "
				                "non-negative integer", lineno, key, val);
		} else if (strcmp(key, "ACTIVITIES_LOG_FILE") == 0) {
			snprintf(k->log_file, sizeof(k->log_file), "%s", val);
		} else if (strcmp(key, "REQUEST_TRACE_ID") == 0) {
			snprintf(k->trace_id, sizeof(k->trace_id), "%s", val);
		} else if (strcmp(key, "PROFILE_PROFILE_MEMORY") == 0 ||
		           strcmp(key, "PROFILE_MEMORY") == 0) {
			k->profile_memory = strcasecmp(val, "true") == 0 || strcmp(val, "1") == 0;
		}
	}
	return 0;
}

int kconfig_window(const struct kconfig *k, struct msg_window *w, struct perr *err)
{
	w->iterations = 0;
	w->iteration_roundup = 0;
	w->duration_ms = 0;
	if (k->iterations > 0) {
		w->iterations = k->iterations;
		w->iteration_roundup = k->roundup;
	} else
		w->duration_ms = k->duration_ms > 0 ? k->duration_ms : KCONFIG_DURATION_DEFAULT_MS;
	/* ms to us without overflow: past the protocol's largest time it
	 * becomes one more than that, which window_check refuses */
	if (k->start_time_ms > WINDOW_START_AT_US_MAX / 1000)
		w->start_at_us = WINDOW_START_AT_US_MAX + 1;
	else
		w->start_at_us = k->start_time_ms * 1000;
	return window_check(w, err);
}
