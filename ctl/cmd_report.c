/*
 * gprofctl report PATH... [--top N] [--html FILE] [--group-by-shape]: what
 * the traces say (text, --json, or one HTML page written to FILE), for
 * trace files (gzip or plain), memory snapshots, or directories of them
 * (one file per rank, as gprofctl trace writes them). Works offline: no
 * daemon is asked.
 *
 * This file is the command's options and help; the run itself (the inputs,
 * reading them, the outputs) is report_run.c's, which gprofctl trace
 * --report calls too. Its stderr is escaped for the whole command
 * (report_run.h), getopt's complaints included, since they quote arguments.
 */
#include <getopt.h>
#include <stdlib.h>

#include "ctl.h"
#include "report_run.h"

static int report_main(struct opts *o, int argc, char **argv);

/* gprofctl report: an exit status; stderr escaped throughout. */
int cmd_report(struct opts *o, int argc, char **argv)
{
	int code;

	report_run_escape_stderr();
	code = report_main(o, argc, argv);
	report_run_restore_stderr();
	return code;
}

/* gprofctl report's options and inputs; stderr is escaped meanwhile. */
static int report_main(struct opts *o, int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "top", required_argument, NULL, 't' },
		{ "html", required_argument, NULL, 'H' },
		{ "group-by-shape", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct report_run_opts ro;
	long top = 10;
	const char *html = NULL;
	bool by_shape = false;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		if (c == 't') {
			top = strtol(optarg, &end, 10);
			if (*end || top < 1 || top > 10000) {
				fprintf(stderr, "gprofctl report: --top takes a number from 1 to 10000\n");
				return EXIT_USAGE;
			}
		} else if (c == 'H') {
			html = optarg;
		} else if (c == 'S') {
			by_shape = true;
		} else if (c == 'h') {
			printf("usage: gprofctl [--json] report PATH... [--top N] [--html FILE] "
			       "[--group-by-shape]\n"
			       "What the traces say: per rank the window, GPU busy and idle time per device\n"
			       "and stream (idle gaps by length, the longest located, those after\n"
			       "synchronising calls), iterations, the top N kernels by GPU time (count,\n"
			       "total, mean, median, max, share), copies and sets with bandwidth, ranges\n"
			       "with CPU and GPU time, launch-bound stretches, data loading, CUDA API and\n"
			       "NCCL time; for traces with PyTorch operators (cpu_op) the operator table\n"
			       "of torch.profiler's key_averages (per name, or per name and input shapes\n"
			       "with --group-by-shape: calls, CPU total and self, CUDA total and self,\n"
			       "shares), sorted by self CUDA time; across ranks the step time, GPU busy,\n"
			       "NCCL wait; then findings, naming operators and their modules,\n"
			       "with their evidence and the usual fix. --html FILE writes it all as one\n"
			       "self-contained page with charts (- for stdout). PATH is a trace file\n"
			       "(.json or .json.gz, gprofd's or PyTorch's) or a directory of them (one per\n"
			       "rank, as gprofctl trace writes them), or trace --output-dir's directory\n"
			       "when it holds one trace. No daemon is needed.\n");
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "gprofctl report: give trace files or a directory of them\n");
		return EXIT_USAGE;
	}
	ro.json = o->json;
	ro.html = html;
	ro.top = (size_t)top;
	ro.by_shape = by_shape;
	return report_run_paths(argv + optind, (size_t)(argc - optind), &ro);
}
