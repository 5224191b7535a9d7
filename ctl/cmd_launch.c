/*
 * gprofctl launch [--job ID] [--agent PATH] -- COMMAND...: runs COMMAND with
 * the agent injected (CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH) and
 * GPROF_JOB_ID set, so `gprofctl trace --job ID` finds it; for Python
 * jobs it also puts gprofd's python/ folder first on PYTHONPATH with
 * GPROF_TORCH_STEPS=1, so PyTorch optimizer steps become iterations.
 * gprofctl replaces itself with COMMAND: signals and the exit status are
 * COMMAND's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ctl.h"

#ifndef GPROF_PYTHON_DIR
#define GPROF_PYTHON_DIR "/usr/local/share/gprofd/python"
#endif
#ifndef GPROF_AGENT_PATH
#define GPROF_AGENT_PATH "/usr/local/lib/x86_64-linux-gnu/gprofd/libgprof_agent.so"
#endif

int cmd_launch(struct opts *o, int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "agent", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *job = NULL, *agent = getenv("GPROF_AGENT");
	char gen[32];
	int c;

	while ((c = getopt_long(argc, argv, "+h", lopts, NULL)) != -1) {
		if (c == 'j')
			job = optarg;
		else if (c == 'a')
			agent = optarg;
		else if (c == 'h') {
			printf("usage: gprofctl launch [--job ID] [--agent PATH] -- COMMAND [ARGS]\n"
			       "Runs COMMAND with libgprof_agent injected and GPROF_JOB_ID set (ID, else\n"
			       "$GPROF_JOB_ID, $SLURM_JOB_ID, else a new id that is printed), so that\n"
			       "gprofctl trace --job ID finds it. The agent is $GPROF_AGENT or\n"
			       "%s.\n", GPROF_AGENT_PATH);
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "gprofctl launch: give the command to run after --\n");
		return EXIT_USAGE;
	}
	if (agent == NULL)
		agent = GPROF_AGENT_PATH;
	if (access(agent, R_OK) != 0)
		fprintf(stderr, "gprofctl launch: warning: no agent at %s (%s); the command runs "
		        "untraced. Set --agent or $GPROF_AGENT.\n", agent, strerror(errno));
	if (job == NULL)
		job = getenv("GPROF_JOB_ID");
	if (job == NULL)
		job = getenv("SLURM_JOB_ID");
	if (job == NULL) {
		unsigned char r[4] = { 0 };

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			r[0] = (unsigned char)getpid();
		snprintf(gen, sizeof(gen), "gprof-%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
		job = gen;
		fprintf(stderr, "gprofctl launch: job id %s (trace it with gprofctl trace --job %s)\n",
		        job, job);
	}
	setenv("CUDA_INJECTION64_PATH", agent, 1);
	setenv("NVTX_INJECTION64_PATH", agent, 1);
	setenv("GPROF_JOB_ID", job, 1);
	/* PyTorch jobs: python/sitecustomize.py imports gprof_agent, whose
	 * optimizer hook makes every step an iteration (GPROF_TORCH_STEPS). */
	if (access(GPROF_PYTHON_DIR, R_OK) == 0) {
		const char *pp = getenv("PYTHONPATH");
		char *path = NULL;

		if (asprintf(&path, "%s%s%s", GPROF_PYTHON_DIR, pp && *pp ? ":" : "",
		             pp ? pp : "") >= 0) {
			setenv("PYTHONPATH", path, 1);
			free(path);
		}
		if (getenv("GPROF_TORCH_STEPS") == NULL)
			setenv("GPROF_TORCH_STEPS", "1", 1);
	}
	if (o->nhosts == 0 && getenv("GPROF_SOCKET") == NULL)
		setenv("GPROF_SOCKET", o->socket, 1);
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "gprofctl launch: cannot run %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
