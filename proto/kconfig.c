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

/* The option keys, current ones first (the ones written); the older
 * names Kineto still reads follow. */
static const struct {
	const char *key;
	int64_t bit;
} opt_keys[] = {
	{ "PROFILE_REPORT_INPUT_SHAPES", MSG_OPT_RECORD_SHAPES },
	{ "PROFILE_PROFILE_MEMORY", MSG_OPT_PROFILE_MEMORY },
	{ "PROFILE_WITH_STACK", MSG_OPT_WITH_STACK },
	{ "PROFILE_WITH_FLOPS", MSG_OPT_WITH_FLOPS },
	{ "PROFILE_WITH_MODULES", MSG_OPT_WITH_MODULES },
	{ "CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION", MSG_OPT_RECORD_SHAPES },
	{ "PYTHON_STACK_TRACE", MSG_OPT_WITH_STACK },
};
#define OPT_WRITTEN 5

/* Kineto's AbstractConfig::toBool: these words in any case, else it
 * throws and the whole config is dropped. 1 true, 0 false, -1 neither. */
static int parse_bool(const char *v)
{
	static const char *const words[] = { "n", "y", "no", "yes", "f", "t", "false", "true",
	                                     "0", "1" };
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(v, words[i]) == 0)
			return (int)(i % 2);
	return -1;
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

/* One option line (opt_keys[i] = val, at lineno): sets or clears its bit.
 * set_line/set_key remember, per option, the line that set it first. */
static int parse_option(struct kconfig *k, size_t i, const char *val, int lineno,
                        int *set_line, const char **set_key, struct perr *err)
{
	int64_t bit = opt_keys[i].bit;
	int b = parse_bool(val), o;
	bool was;

	if (b < 0)
		return perr_set(err, -EINVAL, "config line %d: %s=%.40s is not a boolean: give "
		                "true or false (Kineto would reject the whole config)", lineno,
		                opt_keys[i].key, val);
	for (o = 0; opt_keys[o].bit != bit; o++)
		;
	was = (k->options & bit) != 0;
	if (set_line[o] > 0 && was != (b == 1))
		return perr_set(err, -EINVAL, "config line %d: %s=%s contradicts line %d (%s=%s); "
		                "Kineto would take the later one: give the option once",
		                lineno, opt_keys[i].key, b ? "true" : "false", set_line[o],
		                set_key[o], was ? "true" : "false");
	if (set_line[o] == 0) {
		set_line[o] = lineno;
		set_key[o] = opt_keys[i].key;
	}
	if (b)
		k->options |= bit;
	if (bit == MSG_OPT_PROFILE_MEMORY)
		k->profile_memory = k->profile_memory || b == 1;
	return 0;
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
	int lineno = 0, rc, set_line[OPT_WRITTEN] = { 0 };
	const char *set_key[OPT_WRITTEN] = { NULL };
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
		} else if (strcmp(key, "PROFILE_MEMORY") == 0) {
			k->profile_memory = parse_bool(val) == 1;
		} else {
			for (i = 0; i < sizeof(opt_keys) / sizeof(opt_keys[0]); i++)
				if (strcmp(key, opt_keys[i].key) == 0)
					break;
			if (i == sizeof(opt_keys) / sizeof(opt_keys[0]))
				continue;
			rc = parse_option(k, i, val, lineno, set_line, set_key, err);
			if (rc < 0)
				return rc;
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
	w->options = k->options;
	return window_check(w, err);
}

int kconfig_options_format(int64_t options, char *buf, size_t size)
{
	size_t len = strlen(buf), start = len, i;
	int n;

	for (i = 0; i < OPT_WRITTEN; i++) {
		n = snprintf(buf + len, size - len, "%s=%s\n", opt_keys[i].key,
		             (options & opt_keys[i].bit) ? "true" : "false");
		if (n < 0 || (size_t)n >= size - len) {
			buf[start] = 0;
			return -ENOBUFS;
		}
		len += (size_t)n;
	}
	return (int)(len - start);
}
