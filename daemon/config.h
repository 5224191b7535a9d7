/*
 * config: the daemon's configuration, declared once in config.c's option
 * table (every option's name, type, limits, default and help text).
 *
 * Sources, later ones winning: embedded defaults (the daemon is useful
 * with no file), the YAML file (--config, else config_default_path, which
 * may be absent), then command-line flags.
 * Only config.c touches libyaml. A bad file is an error with file:line
 * and nothing of it is applied: on SIGHUP the old config stays. So is a
 * file that may be cut short (config_load).
 *
 * struct config holds no pointers, so a config is copied by assignment
 * and a reload is "parse into a new struct, then swap".
 *
 * Floor: a leaf. Owns struct config, which main.c embeds in the daemon
 * (d->cfg). Called by main.c (load, reload, --check-config, --dump-config);
 * every other module only reads d->cfg, and conn.c reads it through the
 * pointer it was given at conn_init.
 */
#ifndef GPROFD_CONFIG_H
#define GPROFD_CONFIG_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/un.h>

#include "perr.h"

#define CONFIG_ADDR_MAX 128
#define CONFIG_SOCK_MAX ((int)sizeof(((struct sockaddr_un *)0)->sun_path))

struct config {
	char socket_path[CONFIG_SOCK_MAX];
	char tcp[CONFIG_ADDR_MAX];      /* "HOST:PORT" or "off" */
	char metrics[CONFIG_ADDR_MAX];  /* "HOST:PORT" or "off" */
	char state_dir[PATH_MAX];
	char auth_token_file[PATH_MAX]; /* "" = none */
	char admin_group[64];           /* "" = none */
	uint64_t log_level;             /* syslog priority: 3 err .. 7 debug */
	uint64_t loopback_identity;     /* bool: identify loopback TCP peers by uid */
	uint64_t trace_timeout_s;
	uint64_t heartbeat_ms;
	uint64_t max_connections;
	uint64_t max_connections_per_uid; /* one user's share; root is not counted;
	                                     0: max_connections / 8 */
	uint64_t idle_timeout_s;        /* a client (not an agent) silent and awaiting nothing */
	uint64_t max_frame_bytes;
	uint64_t max_chunk_bytes;
	uint64_t max_write_queue_bytes;
	uint64_t max_conn_memory;         /* what every connection holds together */
	uint64_t max_conn_memory_per_uid; /* what one user's hold; root is not counted;
	                                     0: max_conn_memory / 8 */
	uint64_t hello_timeout_s;       /* a connection must say hello by then */
	uint64_t frame_timeout_s;       /* a frame begun must be complete by then */
	uint64_t max_pending_traces;
	uint64_t max_trace_bytes;
	uint64_t max_processes;
	uint64_t retention_max_age_s;
	uint64_t retention_max_bytes;
	uint64_t kineto_enabled;          /* bool: serve KINETO_USE_DAEMON=1 clients */
	char kineto_socket_dir[PATH_MAX]; /* "" = abstract namespace */
	char kineto_socket_name[64];
	char kineto_trace_dir[PATH_MAX];  /* where Kineto clients write traces */
	uint64_t kineto_expiry_s;
	uint64_t kineto_step_wait_s;      /* iteration request: wait for steps, then by time */
	uint64_t sample_ms;               /* metrics sampling interval */
	uint64_t history_s;               /* samples kept for metrics_query */
	char proc_root[PATH_MAX];         /* where /proc is read ("/" normally) */
	char nvml_library[256];           /* NVML to dlopen */
	uint64_t gpu_required;            /* bool: no NVML is a fault (component.c) */
	char jsonl[PATH_MAX];             /* JSON lines: "" off, "-" stdout, or a file */
	uint64_t jsonl_max_bytes;         /* rotate the file past this */
	char tls_listen[CONFIG_ADDR_MAX]; /* the TLS listener, "HOST:PORT" or "off" */
	char tls_cert[PATH_MAX];          /* its certificate chain (PEM) */
	char tls_key[PATH_MAX];           /* its private key (PEM) */
	char tls_client_ca[PATH_MAX];     /* "" or the CA clients' certificates must chain to */
};

/* Fills c with the embedded defaults. Paths depend on who runs the daemon:
 * as root /run/gprofd and /var/lib/gprofd, otherwise under
 * $XDG_RUNTIME_DIR and $XDG_STATE_HOME (or ~/.local/state); without
 * those they are left empty, and config_check says which flag to give.
 * GPROF_SOCKET, when set, names the socket. */
void config_defaults(struct config *c);

/* The file read when no --config is given, into buf ("" when there is
 * none): $CONFIGURATION_DIRECTORY/gprofd.yaml when systemd set it (the
 * unit's ConfigurationDirectory=), else /etc/gprofd/gprofd.yaml as root,
 * else $XDG_CONFIG_HOME/gprofd/gprofd.yaml or ~/.config/gprofd/gprofd.yaml. */
void config_default_path(char *buf, size_t len);

/* Parses a YAML file over c (options it does not name keep their values).
 * 0, or a negative code with err = "FILE:LINE: what is wrong" (-ENOENT:
 * no such file). A file that is empty, whose last line has no newline, or
 * that changed while it was read is refused (-ENODATA, -EAGAIN): it may
 * be cut short. On failure c is unchanged. */
int config_load(struct config *c, const char *path, struct perr *err);

/* Parses YAML text (the same rules; `name` is used in messages). */
int config_parse(struct config *c, const char *text, size_t len, const char *name,
                 struct perr *err);

/* Sets one option by its name from a string, as the file would
 * (used by command-line flags). 0 or -EINVAL with err. */
int config_set(struct config *c, const char *name, const char *value, struct perr *err);

/* Cross-option rules (a non-loopback TCP address needs a token file, ...).
 * 0 or -EINVAL with err. */
int config_check(const struct config *c, struct perr *err);

/* Writes the effective configuration as YAML that config_load accepts. */
void config_dump(const struct config *c, FILE *f);

/* Splits "HOST:PORT" / "[V6]:PORT" into host and port. 0 or -EINVAL. */
int config_split_addr(const char *addr, char *host, size_t hostlen, int *port);
/* True when addr's host is a loopback address (127.0.0.0/8, ::1, localhost). */
int config_addr_is_loopback(const char *addr);

#endif
