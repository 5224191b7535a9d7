/*
 * config: see config.h. The option table below is the one list of every
 * option; the YAML reader, config_set, config_dump and docs/CONFIG.md all
 * follow it. The file is a mapping of option names to scalars, where the
 * options whose names contain a dot live in a section mapping:
 *
 *     tcp: 127.0.0.1:1778
 *     limits:
 *       connections: 1024
 *
 * Sizes take K/M/G/T suffixes (powers of 1024, "KiB" spelled either way);
 * durations take s/m/h/d.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "config.h"

enum opt_type { OPT_PATH, OPT_STR, OPT_ADDR, OPT_UINT, OPT_SIZE, OPT_SECONDS, OPT_MS, OPT_LEVEL, OPT_BOOL };

struct opt {
	const char *name;
	enum opt_type type;
	size_t off;
	size_t size; /* string options: buffer size */
	uint64_t min, max;
	const char *help;
};

#define S(field) offsetof(struct config, field), sizeof(((struct config *)0)->field)
#define U(field) offsetof(struct config, field), 0
#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)
#define TiB (1024ull * GiB)

static const struct opt opts[] = {
	{ "socket", OPT_PATH, S(socket_path), 0, 0, "Unix socket for agents and gprofctl" },
	{ "tcp", OPT_ADDR, S(tcp), 0, 0, "TCP address for gprofctl and dyno, or off" },
	{ "metrics", OPT_ADDR, S(metrics), 0, 0, "Prometheus /metrics address, or off" },
	{ "state_dir", OPT_PATH, S(state_dir), 0, 0, "where traces are stored" },
	{ "auth_token_file", OPT_PATH, S(auth_token_file), 0, 0,
	  "shared secret TCP clients must prove (required off loopback)" },
	{ "admin_group", OPT_STR, S(admin_group), 0, 0,
	  "members may trace and read every process and trace" },
	{ "loopback_identity", OPT_BOOL, U(loopback_identity), 0, 1,
	  "treat a loopback TCP client as the user owning its socket; false: every TCP "
	  "client must prove auth_token_file" },
	{ "log_level", OPT_LEVEL, U(log_level), 3, 7, "err, warning, notice, info or debug" },
	{ "trace_timeout", OPT_SECONDS, U(trace_timeout_s), 1, 86400,
	  "default time a trace may take before unfinished processes fail" },
	{ "heartbeat_interval", OPT_MS, U(heartbeat_ms), 100, 3600000,
	  "how often agents report step counts" },
	{ "limits.connections", OPT_UINT, U(max_connections), 1, 1000000,
	  "open client connections" },
	{ "limits.connections_per_uid", OPT_UINT, U(max_connections_per_uid), 0, 1000000,
	  "open connections of one user (root not counted), so no user holds every slot; "
	  "0: an eighth of limits.connections" },
	{ "limits.frame_bytes", OPT_SIZE, U(max_frame_bytes), 4 * KiB, 64 * MiB,
	  "largest JSON message accepted" },
	{ "limits.chunk_bytes", OPT_SIZE, U(max_chunk_bytes), 4 * KiB, 256 * MiB,
	  "largest trace chunk accepted" },
	{ "limits.write_queue_bytes", OPT_SIZE, U(max_write_queue_bytes), 64 * KiB, 4 * GiB,
	  "bytes queued to one slow client before it is dropped" },
	{ "limits.connection_memory", OPT_SIZE, U(max_conn_memory), 1 * MiB, 64 * GiB,
	  "memory every client connection holds together (replies unread, partial frames, "
	  "TLS); past it the connection that grows is closed, a new one refused" },
	{ "limits.connection_memory_per_uid", OPT_SIZE, U(max_conn_memory_per_uid), 0, 64 * GiB,
	  "the same for the connections of one user (root not counted); "
	  "0: an eighth of limits.connection_memory" },
	{ "limits.hello_timeout", OPT_SECONDS, U(hello_timeout_s), 1, 3600,
	  "a connection that has not said hello by then is closed" },
	{ "limits.frame_timeout", OPT_SECONDS, U(frame_timeout_s), 1, 3600,
	  "a frame begun must arrive whole by then, else the connection is closed" },
	{ "limits.idle_timeout", OPT_SECONDS, U(idle_timeout_s), 1, 86400,
	  "a client (not an agent) that asks and awaits nothing for that long is closed" },
	{ "limits.pending_traces", OPT_UINT, U(max_pending_traces), 1, 100000,
	  "traces in progress at once" },
	{ "limits.trace_bytes", OPT_SIZE, U(max_trace_bytes), 1 * MiB, 1 * TiB,
	  "largest trace file one process may upload" },
	{ "limits.processes", OPT_UINT, U(max_processes), 1, 10000000,
	  "registered processes" },
	{ "retention.max_age", OPT_SECONDS, U(retention_max_age_s), 60, 10ull * 365 * 86400,
	  "stored traces older than this are deleted" },
	{ "retention.max_bytes", OPT_SIZE, U(retention_max_bytes), 1 * MiB, 1024 * TiB,
	  "stored traces beyond this total are deleted, oldest first" },
	{ "kineto.enabled", OPT_BOOL, U(kineto_enabled), 0, 1,
	  "serve PyTorch processes started with KINETO_USE_DAEMON=1" },
	{ "kineto.socket_dir", OPT_PATH, S(kineto_socket_dir), 0, 0,
	  "Kineto IPC socket directory (KINETO_IPC_SOCKET_DIR); empty: abstract namespace" },
	{ "kineto.socket_name", OPT_STR, S(kineto_socket_name), 0, 0,
	  "Kineto IPC socket name (Kineto expects dynolog)" },
	{ "kineto.trace_dir", OPT_PATH, S(kineto_trace_dir), 0, 0,
	  "where Kineto clients write traces; must be under /tmp or KINETO_ONDEMAND_TRACE_DIR" },
	{ "kineto.expiry", OPT_SECONDS, U(kineto_expiry_s), 1, 3600,
	  "a Kineto client silent this long is forgotten" },
	{ "kineto.step_wait", OPT_SECONDS, U(kineto_step_wait_s), 1, 3600,
	  "an iteration request waits this long for the process to report steps to Kineto, "
	  "then falls back to a 500 ms capture by time (capped by the trace's timeout less 20 s)" },
	{ "sampling.interval", OPT_MS, U(sample_ms), 100, 3600000,
	  "how often host and GPU metrics are sampled" },
	{ "sampling.history", OPT_SECONDS, U(history_s), 0, 86400,
	  "how much sample history gprofctl metrics can read" },
	{ "sampling.proc_root", OPT_PATH, S(proc_root), 0, 0,
	  "the root under which proc/ is read (tests use fixture trees)" },
	{ "sampling.nvml_library", OPT_STR, S(nvml_library), 0, 0,
	  "the NVML library to load (none found: GPU metrics off)" },
	{ "sampling.gpu_required", OPT_BOOL, U(gpu_required), 0, 1,
	  "GPU metrics are required here: no NVML is a fault (the nvml component down, "
	  "gprofctl status exits 4), not a host without GPUs" },
	{ "export.jsonl", OPT_STR, S(jsonl), 0, 0,
	  "write each sample as a JSON line to this file, or - for stdout; empty: off" },
	{ "export.jsonl_max_bytes", OPT_SIZE, U(jsonl_max_bytes), 4 * KiB, 1 * TiB,
	  "rotate the JSON lines file (to FILE.1) past this size" },
	{ "tls.listen", OPT_ADDR, S(tls_listen), 0, 0,
	  "TCP address speaking the native protocol over TLS (gprofctl --tls), or off" },
	{ "tls.cert", OPT_PATH, S(tls_cert), 0, 0,
	  "the TLS listener's certificate chain, PEM (re-read on SIGHUP)" },
	{ "tls.key", OPT_PATH, S(tls_key), 0, 0,
	  "the TLS listener's private key, PEM, unencrypted (re-read on SIGHUP)" },
	{ "tls.client_ca", OPT_PATH, S(tls_client_ca), 0, 0,
	  "if set, TLS clients must present a certificate signed by this CA (PEM)" },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static const char *const levels[] = {
	[3] = "err", [4] = "warning", [5] = "notice", [6] = "info", [7] = "debug",
};

static void copy_str(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src);
}

void config_defaults(struct config *c)
{
	const char *env = getenv("GPROF_SOCKET");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");

	memset(c, 0, sizeof(*c));
	/* Another user has no default it could use where root's would be
	 * (/run/gprofd is root's; /tmp is everyone's, so a name there could
	 * be taken first): without its XDG directories these stay empty and
	 * config_check says which flag to give. */
	if (env != NULL && *env)
		copy_str(c->socket_path, sizeof(c->socket_path), env);
	else if (geteuid() == 0)
		copy_str(c->socket_path, sizeof(c->socket_path), "/run/gprofd/gprofd.sock");
	else if (xdg != NULL && xdg[0] == '/')
		snprintf(c->socket_path, sizeof(c->socket_path), "%s/gprofd/gprofd.sock", xdg);
	if (geteuid() == 0)
		copy_str(c->state_dir, sizeof(c->state_dir), "/var/lib/gprofd");
	else if (state != NULL && state[0] == '/')
		snprintf(c->state_dir, sizeof(c->state_dir), "%s/gprofd", state);
	else if (home != NULL && home[0] == '/')
		snprintf(c->state_dir, sizeof(c->state_dir), "%s/.local/state/gprofd", home);
	copy_str(c->tcp, sizeof(c->tcp), "127.0.0.1:1778");
	copy_str(c->tls_listen, sizeof(c->tls_listen), "off");
	copy_str(c->metrics, sizeof(c->metrics), "127.0.0.1:9773");
	c->sample_ms = 1000;
	c->history_s = 300;
	copy_str(c->proc_root, sizeof(c->proc_root), "/");
	copy_str(c->nvml_library, sizeof(c->nvml_library), "libnvidia-ml.so.1");
	c->jsonl_max_bytes = 64 * MiB;
	c->log_level = 6;
	c->loopback_identity = 1;
	c->trace_timeout_s = 300;
	c->heartbeat_ms = 1000; /* step metrics as fresh as the 1 s samples */
	c->max_connections = 4096;
	c->max_connections_per_uid = 0;
	c->idle_timeout_s = 300;
	c->max_frame_bytes = 1 * MiB;
	c->max_chunk_bytes = 4 * MiB;
	c->max_write_queue_bytes = 64 * MiB;
	c->max_conn_memory = 512 * MiB;
	c->max_conn_memory_per_uid = 0;
	c->hello_timeout_s = 10;
	c->frame_timeout_s = 60;
	c->max_pending_traces = 64;
	c->max_trace_bytes = 2 * GiB;
	c->max_processes = 65536;
	c->retention_max_age_s = 7 * 86400;
	c->retention_max_bytes = 20 * GiB;
	c->kineto_enabled = 1;
	copy_str(c->kineto_socket_name, sizeof(c->kineto_socket_name), "dynolog");
	copy_str(c->kineto_trace_dir, sizeof(c->kineto_trace_dir), "/tmp/gprofd-kineto");
	c->kineto_expiry_s = 60;
	c->kineto_step_wait_s = 30;
	{
		const char *dir = getenv("KINETO_IPC_SOCKET_DIR");

		if (dir != NULL && dir[0] == '/')
			copy_str(c->kineto_socket_dir, sizeof(c->kineto_socket_dir), dir);
	}
}

void config_default_path(char *buf, size_t len)
{
	const char *sd = getenv("CONFIGURATION_DIRECTORY");
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");

	buf[0] = 0;
	if (sd != NULL && sd[0] == '/') /* systemd's list: the first one is ours */
		snprintf(buf, len, "%.*s/gprofd.yaml", (int)strcspn(sd, ":"), sd);
	else if (geteuid() == 0)
		snprintf(buf, len, "/etc/gprofd/gprofd.yaml");
	else if (xdg != NULL && xdg[0] == '/')
		snprintf(buf, len, "%s/gprofd/gprofd.yaml", xdg);
	else if (home != NULL && home[0] == '/')
		snprintf(buf, len, "%s/.config/gprofd/gprofd.yaml", home);
}

static const struct opt *find_opt(const char *name)
{
	size_t i;

	for (i = 0; i < NOPTS; i++)
		if (strcmp(opts[i].name, name) == 0)
			return &opts[i];
	return NULL;
}

/* Parses an unsigned number with an optional unit suffix. */
static int parse_number(const char *s, enum opt_type type, uint64_t *out)
{
	static const struct { const char *sfx; uint64_t mul; } sizes[] = {
		{ "", 1 }, { "B", 1 }, { "K", KiB }, { "KiB", KiB }, { "KB", KiB },
		{ "M", MiB }, { "MiB", MiB }, { "MB", MiB }, { "G", GiB }, { "GiB", GiB },
		{ "GB", GiB }, { "T", TiB }, { "TiB", TiB }, { "TB", TiB },
	}, secs[] = {
		{ "", 1 }, { "s", 1 }, { "m", 60 }, { "h", 3600 }, { "d", 86400 },
	}, msecs[] = {
		{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 },
	};
	const void *tab = type == OPT_SIZE ? (const void *)sizes :
	                  type == OPT_SECONDS ? (const void *)secs :
	                  type == OPT_MS ? (const void *)msecs : NULL;
	size_t ntab = type == OPT_SIZE ? sizeof(sizes) / sizeof(sizes[0]) :
	              type == OPT_SECONDS ? sizeof(secs) / sizeof(secs[0]) :
	              type == OPT_MS ? sizeof(msecs) / sizeof(msecs[0]) : 1;
	char *end;
	unsigned long long v;
	size_t i;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -ERANGE;
	while (*end == ' ')
		end++;
	if (tab == NULL) {
		if (*end)
			return -EINVAL;
		*out = v;
		return 0;
	}
	for (i = 0; i < ntab; i++) {
		const char *sfx = type == OPT_SIZE ? sizes[i].sfx :
		                  type == OPT_SECONDS ? secs[i].sfx : msecs[i].sfx;
		uint64_t mul = type == OPT_SIZE ? sizes[i].mul :
		               type == OPT_SECONDS ? secs[i].mul : msecs[i].mul;

		if (strcmp(end, sfx) == 0) {
			if (mul != 0 && v > UINT64_MAX / mul)
				return -ERANGE;
			*out = v * mul;
			return 0;
		}
	}
	return -EINVAL;
}

static const char *unit_hint(enum opt_type t)
{
	switch (t) {
	case OPT_SIZE: return " (a size such as 512M or 2G)";
	case OPT_SECONDS: return " (a duration such as 30s, 5m, 7d)";
	case OPT_MS: return " (a duration such as 500ms or 5s)";
	default: return "";
	}
}

int config_split_addr(const char *addr, char *host, size_t hostlen, int *port)
{
	const char *colon;
	char *end;
	size_t n;
	long p;

	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');

		if (close == NULL || close[1] != ':')
			return -EINVAL;
		n = (size_t)(close - addr - 1);
		colon = close + 1;
		addr++;
	} else {
		colon = strrchr(addr, ':');
		if (colon == NULL)
			return -EINVAL;
		n = (size_t)(colon - addr);
	}
	if (n == 0 || n >= hostlen)
		return -EINVAL;
	memcpy(host, addr, n);
	host[n] = 0;
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
		return -EINVAL;
	*port = (int)p;
	return 0;
}

int config_addr_is_loopback(const char *addr)
{
	char host[CONFIG_ADDR_MAX];
	int port;

	if (config_split_addr(addr, host, sizeof(host), &port) < 0)
		return 0;
	return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
	       strcmp(host, "localhost") == 0;
}

int config_set(struct config *c, const char *name, const char *value, struct perr *err)
{
	const struct opt *o = find_opt(name);
	char host[CONFIG_ADDR_MAX];
	uint64_t v;
	int port, r, i;

	if (o == NULL)
		return perr_set(err, -EINVAL, "unknown option \"%s\" (gprofd --dump-config "
		                "lists every option)", name);
	for (i = 0; value[i]; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			return perr_set(err, -EINVAL, "%s: contains a control character", name);
	switch (o->type) {
	case OPT_PATH:
		if (*value && value[0] != '/')
			return perr_set(err, -EINVAL, "%s: \"%s\" must be an absolute path",
			                name, value);
		/* fall through */
	case OPT_STR:
		if (strlen(value) >= o->size)
			return perr_set(err, -EINVAL, "%s: longer than %zu bytes", name,
			                o->size - 1);
		copy_str((char *)c + o->off, o->size, value);
		return 0;
	case OPT_ADDR:
		if (strcmp(value, "off") != 0 &&
		    config_split_addr(value, host, sizeof(host), &port) < 0)
			return perr_set(err, -EINVAL, "%s: \"%s\" is not HOST:PORT, "
			                "[IPV6]:PORT or off", name, value);
		if (strlen(value) >= o->size)
			return perr_set(err, -EINVAL, "%s: address too long", name);
		copy_str((char *)c + o->off, o->size, value);
		return 0;
	case OPT_BOOL:
		if (strcasecmp(value, "true") == 0 || strcasecmp(value, "yes") == 0 ||
		    strcmp(value, "1") == 0)
			v = 1;
		else if (strcasecmp(value, "false") == 0 || strcasecmp(value, "no") == 0 ||
		         strcmp(value, "0") == 0)
			v = 0;
		else
			return perr_set(err, -EINVAL, "%s: \"%s\" is not true or false", name, value);
		*(uint64_t *)((char *)c + o->off) = v;
		return 0;
	case OPT_LEVEL:
		for (i = 3; i <= 7; i++)
			if (strcasecmp(value, levels[i]) == 0)
				break;
		if (i > 7)
			return perr_set(err, -EINVAL, "%s: \"%s\" is not one of err, warning, "
			                "notice, info, debug", name, value);
		*(uint64_t *)((char *)c + o->off) = (uint64_t)i;
		return 0;
	default:
		r = parse_number(value, o->type, &v);
		if (r < 0)
			return perr_set(err, -EINVAL, "%s: \"%s\" is not a number%s", name,
			                value, unit_hint(o->type));
		if (v < o->min || v > o->max)
			return perr_set(err, -EINVAL, "%s: %s is outside the allowed range "
			                "%llu..%llu%s", name, value, (unsigned long long)o->min,
			                (unsigned long long)o->max,
			                o->type == OPT_SECONDS ? " seconds" :
			                o->type == OPT_MS ? " ms" :
			                o->type == OPT_SIZE ? " bytes" : "");
		*(uint64_t *)((char *)c + o->off) = v;
		return 0;
	}
}

int config_check(const struct config *c, struct perr *err)
{
	if (c->socket_path[0] == 0 && geteuid() != 0)
		return perr_set(err, -EINVAL, "socket: no default without XDG_RUNTIME_DIR for a user "
		                "other than root: give --socket PATH in a directory you own (clients "
		                "then need GPROF_SOCKET=PATH), or set XDG_RUNTIME_DIR");
	if (c->socket_path[0] == 0)
		return perr_set(err, -EINVAL, "socket: must be set");
	if (!c->loopback_identity && c->auth_token_file[0] == 0)
		return perr_set(err, -EINVAL, "loopback_identity: false needs auth_token_file "
		                "(otherwise no TCP client could be identified)");
	if (strcmp(c->tcp, "off") != 0 && !config_addr_is_loopback(c->tcp) &&
	    c->auth_token_file[0] == 0)
		return perr_set(err, -EINVAL, "tcp: %s is not a loopback address, so "
		                "auth_token_file must be set (clients prove they hold the "
		                "token); or listen on 127.0.0.1", c->tcp);
	if (c->state_dir[0] == 0 && geteuid() != 0)
		return perr_set(err, -EINVAL, "state_dir: no default without XDG_STATE_HOME or HOME "
		                "for a user other than root: give --state-dir DIR (a directory you "
		                "own)");
	if (c->state_dir[0] == 0)
		return perr_set(err, -EINVAL, "state_dir: must be set");
	if (strcmp(c->tls_listen, "off") != 0) {
		if (c->tls_cert[0] == 0 || c->tls_key[0] == 0)
			return perr_set(err, -EINVAL, "tls.listen: %s needs tls.cert and tls.key "
			                "(PEM files: the certificate chain and its private key)",
			                c->tls_listen);
		if (!config_addr_is_loopback(c->tls_listen) && c->auth_token_file[0] == 0)
			return perr_set(err, -EINVAL, "tls.listen: %s is not a loopback address, so "
			                "auth_token_file must be set (TLS hides the traffic; the token "
			                "decides who may act); or listen on 127.0.0.1", c->tls_listen);
	}
	return 0;
}

/* ---- YAML ---- */

struct reader {
	yaml_parser_t parser;
	const char *name;
	struct perr *err;
};

static int next(struct reader *rd, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&rd->parser, ev))
		return perr_set(rd->err, -EINVAL, "%s:%zu: %s", rd->name,
		                rd->parser.problem_mark.line + 1,
		                rd->parser.problem ? rd->parser.problem : "YAML syntax error");
	return 0;
}

static int bad(struct reader *rd, const yaml_event_t *ev, const char *what)
{
	return perr_set(rd->err, -EINVAL, "%s:%zu: %s", rd->name,
	                ev->start_mark.line + 1, what);
}

/* Reads a mapping's key/value pairs (the MAPPING_START was consumed).
 * prefix is "" at the top level or "section." inside a section. */
static int read_mapping(struct reader *rd, struct config *c, const char *prefix,
                        char (*seen)[64], size_t *nseen)
{
	yaml_event_t key, val;
	char name[64], msg[200];
	struct perr e2;
	size_t i;
	int r;

	for (;;) {
		r = next(rd, &key);
		if (r < 0)
			return r;
		if (key.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&key);
			return 0;
		}
		if (key.type != YAML_SCALAR_EVENT) {
			r = bad(rd, &key, "expected an option name");
			yaml_event_delete(&key);
			return r;
		}
		snprintf(name, sizeof(name), "%s%s", prefix, (const char *)key.data.scalar.value);
		r = next(rd, &val);
		if (r < 0) {
			yaml_event_delete(&key);
			return r;
		}
		if (val.type == YAML_MAPPING_START_EVENT && *prefix == 0) {
			char sect[64];
			size_t k, found = 0;

			snprintf(sect, sizeof(sect), "%s.", name);
			for (k = 0; k < NOPTS; k++)
				if (strncmp(opts[k].name, sect, strlen(sect)) == 0)
					found = 1;
			if (!found) {
				snprintf(msg, sizeof(msg), "unknown section \"%s\"", name);
				r = bad(rd, &key, msg);
			} else
				r = read_mapping(rd, c, sect, seen, nseen);
		} else if (val.type != YAML_SCALAR_EVENT) {
			snprintf(msg, sizeof(msg), "%s: expected a single value", name);
			r = bad(rd, &val, msg);
		} else {
			for (i = 0; i < *nseen; i++)
				if (strcmp(seen[i], name) == 0)
					break;
			if (i < *nseen) {
				snprintf(msg, sizeof(msg), "%s: given twice", name);
				r = bad(rd, &key, msg);
			} else if (find_opt(name) == NULL) {
				snprintf(msg, sizeof(msg), "unknown option \"%s\" (gprofd "
				         "--dump-config lists every option)", name);
				r = bad(rd, &key, msg);
			} else {
				copy_str(seen[(*nseen)++], sizeof(seen[0]), name);
				r = config_set(c, name, (const char *)val.data.scalar.value, &e2);
				if (r < 0)
					r = bad(rd, &val, e2.msg);
			}
		}
		yaml_event_delete(&key);
		yaml_event_delete(&val);
		if (r < 0)
			return r;
	}
}

int config_parse(struct config *c, const char *text, size_t len, const char *name,
                 struct perr *err)
{
	struct reader rd = { .name = name, .err = err };
	char seen[sizeof(opts) / sizeof(opts[0])][64];
	struct config tmp = *c;
	yaml_event_t ev;
	size_t nseen = 0;
	int r, done = 0;

	if (!yaml_parser_initialize(&rd.parser))
		return perr_set(err, -ENOMEM, "out of memory");
	yaml_parser_set_input_string(&rd.parser, (const unsigned char *)text, len);
	while (!done) {
		r = next(&rd, &ev);
		if (r < 0)
			goto out;
		switch (ev.type) {
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			break;
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_MAPPING_START_EVENT:
			r = read_mapping(&rd, &tmp, "", seen, &nseen);
			break;
		case YAML_SCALAR_EVENT:
			/* an empty document is fine: all defaults */
			if (ev.data.scalar.length == 0)
				break;
			/* fall through */
		default:
			r = bad(&rd, &ev, "the file must be a mapping of option: value");
			break;
		}
		yaml_event_delete(&ev);
		if (r < 0)
			goto out;
	}
	*c = tmp;
	r = 0;
out:
	yaml_parser_delete(&rd.parser);
	return r;
}

/*
 * Reads the file whole, and only a file that is whole: a reader cannot
 * tell a file cut short (by a crash, or caught between a writer's
 * truncate and its write) from one meant that way, and applying one
 * would put the embedded defaults (a shorter retention, say) in place of
 * what the file was to say. So a file that is empty, whose last line has
 * no newline, or that changed while it was read is refused; a file meant
 * to say nothing says so with `{}` or a comment line.
 */
int config_load(struct config *c, const char *path, struct perr *err)
{
	struct stat before, after;
	char *text = NULL;
	size_t n, have = 0;
	ssize_t got = 0;
	int fd, r;

	/* O_NONBLOCK: a FIFO put there must not hold the daemon in open() */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return perr_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &before) != 0 || !S_ISREG(before.st_mode) || before.st_size > (1 << 20)) {
		r = perr_set(err, -EFBIG, "%s: not a regular file of at most 1 MiB", path);
		goto out;
	}
	n = (size_t)before.st_size;
	text = malloc(n + 1);
	if (text == NULL) {
		r = perr_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	while (have < n && (got = read(fd, text + have, n - have)) > 0)
		have += (size_t)got;
	if (got < 0) {
		r = perr_set(err, -EIO, "%s: read failed: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &after) != 0 || have != n || after.st_size != before.st_size ||
	    after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
	    after.st_mtim.tv_nsec != before.st_mtim.tv_nsec) {
		r = perr_set(err, -EAGAIN, "%s changed while it was read: nothing applied; write "
		             "the file whole and rename it into place", path);
		goto out;
	}
	if (n == 0) {
		r = perr_set(err, -ENODATA, "%s is empty (cut short, or being written?): nothing "
		             "applied; to leave every option at its default, write {} or a "
		             "comment line", path);
		goto out;
	}
	if (text[n - 1] != '\n') {
		r = perr_set(err, -ENODATA, "%s: no newline at its end, so it may be cut short "
		             "(being written?): nothing applied; end its last line with a "
		             "newline", path);
		goto out;
	}
	r = config_parse(c, text, n, path, err);
out:
	free(text);
	close(fd);
	return r;
}

static void dump_value(const struct config *c, const struct opt *o, FILE *f)
{
	const void *p = (const char *)c + o->off;
	uint64_t v;

	switch (o->type) {
	case OPT_PATH:
	case OPT_STR:
	case OPT_ADDR: {
		/* single quotes: YAML interprets no escapes there, only '' */
		const char *q;

		fputc('\'', f);
		for (q = p; *q; q++) {
			if (*q == '\'')
				fputc('\'', f);
			fputc(*q, f);
		}
		fputc('\'', f);
		return;
	}
	case OPT_LEVEL:
		fprintf(f, "%s", levels[*(const uint64_t *)p]);
		return;
	case OPT_BOOL:
		fprintf(f, "%s", *(const uint64_t *)p ? "true" : "false");
		return;
	default:
		v = *(const uint64_t *)p;
		if (o->type == OPT_SIZE && v % GiB == 0)
			fprintf(f, "%lluG", (unsigned long long)(v / GiB));
		else if (o->type == OPT_SIZE && v % MiB == 0)
			fprintf(f, "%lluM", (unsigned long long)(v / MiB));
		else if (o->type == OPT_SIZE && v % KiB == 0)
			fprintf(f, "%lluK", (unsigned long long)(v / KiB));
		else if (o->type == OPT_SECONDS && v % 86400 == 0)
			fprintf(f, "%llud", (unsigned long long)(v / 86400));
		else if (o->type == OPT_SECONDS)
			fprintf(f, "%llus", (unsigned long long)v);
		else if (o->type == OPT_MS)
			fprintf(f, "%llums", (unsigned long long)v);
		else
			fprintf(f, "%llu", (unsigned long long)v);
	}
}

void config_dump(const struct config *c, FILE *f)
{
	char section[32] = "";
	size_t i;

	fprintf(f, "# gprofd effective configuration (gprofd --dump-config)\n");
	for (i = 0; i < NOPTS; i++) {
		const struct opt *o = &opts[i];
		const char *dot = strchr(o->name, '.');
		const char *key = o->name;

		if (dot != NULL) {
			size_t n = (size_t)(dot - o->name);

			if (strlen(section) != n || strncmp(section, o->name, n) != 0) {
				snprintf(section, sizeof(section), "%.*s", (int)n, o->name);
				fprintf(f, "%s:\n", section);
			}
			key = dot + 1;
			fprintf(f, "  ");
		}
		fprintf(f, "%s: ", key);
		dump_value(c, o, f);
		fprintf(f, "  # %s\n", o->help);
	}
}
