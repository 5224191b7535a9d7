/*
 * gprofd: the per-host daemon (shared/DESIGN.md).
 *
 * This entry point owns the libuv loop and the process's signals. It runs
 * in the foreground, as systemd and containers expect, until SIGINT or
 * SIGTERM, and closes every handle before it returns (uv_loop_close must
 * succeed: a handle left open is a bug). The listeners, the registry and
 * trace orchestration hang off this loop (issue 3).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "log.h"

struct daemon {
	uv_loop_t loop;
	uv_signal_t sigint;
	uv_signal_t sigterm;
};

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: gprofd [-v] [--version] [--help]\n"
	        "Runs the gprofd GPU profiling daemon in the foreground.\n"
	        "  -v, --verbose   log debug messages\n"
	        "  --version       print the version and exit\n"
	        "See gprofd(8).\n");
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	log_info("signal %d: stopping", signum);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct daemon d;
	int c, level = LOG_INFO, r;

	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			level = LOG_DEBUG;
			break;
		case 'V':
			printf("gprofd %s\n", GPROF_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gprofd: unexpected argument '%s'; see gprofd --help\n",
		        argv[optind]);
		return 2;
	}
	log_init(level);
	memset(&d, 0, sizeof(d));
	uv_loop_init(&d.loop);
	uv_signal_init(&d.loop, &d.sigint);
	uv_signal_init(&d.loop, &d.sigterm);
	d.sigint.data = d.sigterm.data = &d;
	uv_signal_start(&d.sigint, on_signal, SIGINT);
	uv_signal_start(&d.sigterm, on_signal, SIGTERM);
	log_info("gprofd %s running; stop with SIGINT or SIGTERM", GPROF_VERSION);
	uv_run(&d.loop, UV_RUN_DEFAULT);
	r = uv_loop_close(&d.loop);
	if (r != 0) {
		log_err("handles left open at exit: %s", uv_strerror(r));
		return 1;
	}
	return 0;
}
