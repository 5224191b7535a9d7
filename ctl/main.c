/*
 * gprofctl: trigger, follow and collect traces across many hosts, and read
 * what each daemon knows (gprofctl(1)).
 *
 * main parses the global options, builds the host list, and runs one
 * command from the table below; each command lives in its own file.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctl.h"
#include "fsutil.h"
#include "jsonint.h"

struct command {
	const char *name;
	int (*run)(struct opts *o, int argc, char **argv);
	const char *summary;
};

static int cmd_help(struct opts *o, int argc, char **argv);

static const struct command commands[] = {
	{ "status", cmd_status, "daemon version, uptime, processes and traces, per host" },
	{ "metrics", cmd_metrics, "host, GPU and step-time metrics, per host (--watch)" },
	{ "list", cmd_list, "traceable processes: host, pid, uid, job, rank, kind" },
	{ "trace", cmd_trace, "capture a trace on every matching process and download it" },
	{ "traces", cmd_traces, "stored traces: id, job, time, processes, ranks, size" },
	{ "fetch", cmd_fetch, "download stored traces again, by id or by job" },
	{ "delete", cmd_delete, "remove stored traces, by id or by job" },
	{ "cancel", cmd_cancel, "end a running trace on every host" },
	{ "launch", cmd_launch, "run a command with the agent injected" },
	{ "report", cmd_report, "what the traces say: GPU time, top kernels, ranks, findings" },
	{ "help", cmd_help, "this help, or a command's: gprofctl help trace" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
	        "usage: gprofctl [--host H[:PORT]]... [--hostfile F] [--slurm-job J]\n"
	        "                [--socket PATH] [--port N] [--token-file F] [--json]\n"
	        "                [--tls [--tls-ca F] [--tls-cert F --tls-key F]]\n"
	        "                [--timeout S] COMMAND [ARGS]\n"
	        "Without a host option gprofctl talks to the local daemon's Unix socket.\n\n"
	        "commands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nglobal options:\n"
	        "  --host H[:PORT]   a daemon to talk to over TCP (repeatable)\n"
	        "  --hostfile F      hosts, one per line\n"
	        "  --slurm-job J     the nodes of SLURM job J (via scontrol)\n"
	        "  --socket PATH     the local daemon's socket (default $GPROF_SOCKET,\n"
	        "                    /run/gprofd/gprofd.sock, $XDG_RUNTIME_DIR/gprofd/gprofd.sock)\n"
	        "  --port N          TCP port when a host names none (default 1778; --tls: 1779)\n"
	        "  --token-file F    the daemons' auth token, for TCP authentication\n"
	        "  --tls             talk TLS to TCP hosts (their tls.listen; default port 1779)\n"
	        "  --tls-ca F        CA certificates (PEM) the daemons' certificates must chain\n"
	        "                    to (default: the system's trust store)\n"
	        "  --tls-cert F, --tls-key F  a client certificate and key, for daemons\n"
	        "                    that ask for one (tls.client_ca)\n"
	        "  --json            machine-readable output on stdout: one JSON object\n"
	        "                    (before or after the command; see gprofctl(1))\n"
	        "  --timeout S       give up on hosts after S seconds (default 30; trace: 600)\n"
	        "See gprofctl(1).\n");
}

static int cmd_help(struct opts *o, int argc, char **argv)
{
	char *hargv[] = { NULL, "--help", NULL };
	size_t i;

	if (argc < 2 && o->json) {
		/* the command table, for tools that build on gprofctl */
		cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "commands");
		char *text;

		for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
			cJSON *c = cJSON_CreateObject();

			cJSON_AddStringToObject(c, "name", commands[i].name);
			cJSON_AddStringToObject(c, "summary", commands[i].summary);
			cJSON_AddItemToArray(arr, c);
		}
		cJSON_AddStringToObject(root, "version", GPROF_VERSION);
		jsonint_add(root, "exit", EXIT_OK);
		text = cJSON_Print(root);
		printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
		return EXIT_OK;
	}
	if (argc < 2) {
		usage(stdout);
		return EXIT_OK;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, argv[1]) == 0 && commands[i].run != cmd_help) {
			hargv[0] = argv[1];
			return commands[i].run(o, 2, hargv);
		}
	fprintf(stderr, "gprofctl: no command \"%s\"; see gprofctl help\n", argv[1]);
	return EXIT_USAGE;
}

/* --json is a global option that may also come anywhere among the
 * command's own options: it is taken out of the command's arguments here,
 * once, so every command accepts it in both places. The scan stops at
 * "--", and for launch at its first operand (what follows is the command
 * it runs, whose own --json is not ours). Returns the new argc. */
static int take_json(struct opts *o, const char *cmd, int argc, char **argv)
{
	bool launch = strcmp(cmd, "launch") == 0;
	int i, k = 1;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0 || (launch && argv[i][0] != '-'))
			break;
		if (strcmp(argv[i], "--json") == 0) {
			o->json = true;
			continue;
		}
		/* launch's options with a value: the value is not an operand */
		if (launch && (strcmp(argv[i], "--job") == 0 || strcmp(argv[i], "--agent") == 0) &&
		    i + 1 < argc)
			argv[k++] = argv[i++];
		argv[k++] = argv[i];
	}
	for (; i < argc; i++)
		argv[k++] = argv[i];
	argv[k] = NULL;
	return k;
}

int main(int argc, char **argv)
{
	static char sockbuf[256];
	enum { O_HOST = 256, O_HOSTFILE, O_SLURM, O_SOCKET, O_PORT, O_TOKEN, O_JSON, O_TIMEOUT,
	       O_VERSION, O_TLS, O_TLS_CA, O_TLS_CERT, O_TLS_KEY };
	static const struct option opts[] = {
		{ "host", required_argument, NULL, O_HOST },
		{ "hostfile", required_argument, NULL, O_HOSTFILE },
		{ "slurm-job", required_argument, NULL, O_SLURM },
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "port", required_argument, NULL, O_PORT },
		{ "token-file", required_argument, NULL, O_TOKEN },
		{ "tls", no_argument, NULL, O_TLS },
		{ "tls-ca", required_argument, NULL, O_TLS_CA },
		{ "tls-cert", required_argument, NULL, O_TLS_CERT },
		{ "tls-key", required_argument, NULL, O_TLS_KEY },
		{ "json", no_argument, NULL, O_JSON },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "version", no_argument, NULL, O_VERSION },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* static: the host list stays reachable on the early (usage) exits */
	static struct opts o = { .port = 0, .timeout_s = 0 };
	char *end;
	size_t i;
	int c;

	/* A daemon that goes away mid-write is a failed host ("connection
	 * lost"), not a silent death by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* Downloaded chunks come from the heap and are reused (as in gprofd). */
	mallopt(M_MMAP_THRESHOLD, 8 << 20);
	mallopt(M_TRIM_THRESHOLD, 16 << 20);
	o.socket = fsutil_client_socket(sockbuf, sizeof(sockbuf));
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case O_HOST:
			if (hosts_add(&o, optarg) < 0)
				return EXIT_USAGE;
			break;
		case O_HOSTFILE:
			if (hosts_from_file(&o, optarg) < 0)
				return EXIT_USAGE;
			break;
		case O_SLURM:
			if (hosts_from_slurm(&o, optarg) < 0)
				return EXIT_USAGE;
			break;
		case O_SOCKET:
			o.socket = optarg;
			break;
		case O_PORT:
			o.port = (int)strtol(optarg, &end, 10);
			if (*end || o.port <= 0 || o.port > 65535) {
				fprintf(stderr, "gprofctl: --port %s is not a port number\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case O_TOKEN:
			o.token_file = optarg;
			break;
		case O_TLS:
			o.tls = true;
			break;
		case O_TLS_CA:
			o.tls_ca = optarg;
			break;
		case O_TLS_CERT:
			o.tls_cert = optarg;
			break;
		case O_TLS_KEY:
			o.tls_key = optarg;
			break;
		case O_JSON:
			o.json = true;
			break;
		case O_TIMEOUT:
			o.timeout_s = strtod(optarg, &end);
			if (*end || o.timeout_s <= 0) {
				fprintf(stderr, "gprofctl: --timeout %s is not a positive number of "
				        "seconds\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case O_VERSION:
			printf("gprofctl %s\n", GPROF_VERSION);
			return EXIT_OK;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!o.tls && (o.tls_ca || o.tls_cert || o.tls_key)) {
		fprintf(stderr, "gprofctl: --tls-ca, --tls-cert and --tls-key go with --tls\n");
		return EXIT_USAGE;
	}
	if (o.port == 0)
		o.port = o.tls ? CTL_TLS_PORT_DEFAULT : CTL_PORT_DEFAULT;
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, argv[optind]) == 0) {
			char **cargv = argv + optind;
			int cargc = take_json(&o, argv[optind], argc - optind, cargv);
			int r;

			optind = 0; /* glibc: restart getopt for the command's own options */
			r = commands[i].run(&o, cargc, cargv);
			hosts_free(&o);
			return r;
		}
	fprintf(stderr, "gprofctl: unknown command \"%s\"; see gprofctl help\n", argv[optind]);
	return EXIT_USAGE;
}
