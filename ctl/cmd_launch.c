/*
 * gprofctl launch [--job ID] [--agent PATH] -- COMMAND...: runs COMMAND with
 * the agent injected (CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH) and
 * GPROF_JOB_ID set, so `gprofctl trace --job ID` finds it; for Python
 * jobs it also puts gprofd's python/ folder first on PYTHONPATH with
 * GPROF_TORCH_STEPS=1, so PyTorch optimizer steps become iterations.
 * gprofctl replaces itself with COMMAND: signals and the exit status are
 * COMMAND's.
 *
 * Where the agent and python/ are: an installed gprofctl uses the
 * installed paths; a gprofctl run from its build tree (the agent library
 * sits at ../agent/ next to it) uses that build's agent and the source
 * tree's python/, so a checkout works without installing.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ctl.h"

#ifndef GPROF_PYTHON_DIR
#define GPROF_PYTHON_DIR "/usr/local/share/gprofd/python"
#endif
#ifndef GPROF_AGENT_PATH
#define GPROF_AGENT_PATH "/usr/local/lib/x86_64-linux-gnu/gprofd/libgprof_agent.so"
#endif
#ifndef GPROF_SOURCE_PYTHON_DIR
#define GPROF_SOURCE_PYTHON_DIR ""
#endif

struct paths { char agent[PATH_MAX]; char python[PATH_MAX]; };

static bool has_helper(const char *dir)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/gprof_agent/__init__.py", dir);
	return dir[0] && access(p, R_OK) == 0;
}

/* Fills the agent and python/ paths for this gprofctl (see the top
 * comment); python is "" when there is none. */
static void find_paths(struct paths *ps)
{
	char exe[PATH_MAX], dir[PATH_MAX], cand[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	snprintf(ps->agent, sizeof(ps->agent), "%s", GPROF_AGENT_PATH);
	snprintf(ps->python, sizeof(ps->python), "%s", has_helper(GPROF_PYTHON_DIR) ?
	         GPROF_PYTHON_DIR : "");
	if (n <= 0)
		return;
	exe[n] = '\0';
	snprintf(dir, sizeof(dir), "%s", dirname(exe));
	snprintf(cand, sizeof(cand), "%s/../agent/libgprof_agent.so", dir);
	if (access(cand, R_OK) != 0)
		return; /* installed */
	if (realpath(cand, ps->agent) == NULL)
		snprintf(ps->agent, sizeof(ps->agent), "%s", cand);
	ps->python[0] = '\0';
	snprintf(cand, sizeof(cand), "%s/../../python", dir);
	if (has_helper(GPROF_SOURCE_PYTHON_DIR))
		snprintf(ps->python, sizeof(ps->python), "%s", GPROF_SOURCE_PYTHON_DIR);
	else if (has_helper(cand) && realpath(cand, ps->python) == NULL)
		ps->python[0] = '\0';
}

int cmd_launch(struct opts *o, int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "agent", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *job = NULL, *agent = getenv("GPROF_AGENT");
	struct paths ps;
	char gen[32];
	int c;

	find_paths(&ps);
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
			       "%s.\n"
			       "Python jobs get %s first on PYTHONPATH and\n"
			       "GPROF_TORCH_STEPS=1: every optimizer step is an iteration, in every\n"
			       "rank (torchrun, srun, mp.spawn); a launcher that never steps is left\n"
			       "out of traces. A missing agent is an error (exit 3): the command\n"
			       "is not started untraced. COMMAND's stdout is its own; with --json the\n"
			       "one note gprofctl prints (a generated job id) is a JSON object on\n"
			       "stderr.\n", ps.agent, ps.python[0] ? ps.python : "(no python/ found)");
			return EXIT_OK;
		} else
			return EXIT_USAGE;
	}
	if (optind >= argc) {
		fprintf(stderr, "gprofctl launch: give the command to run after --\n");
		return EXIT_USAGE;
	}
	if (agent == NULL)
		agent = ps.agent;
	/* An agent that is not there would leave the job running untraced
	 * while the user believes it is profiled: refuse before starting it. */
	if (access(agent, R_OK) != 0) {
		fprintf(stderr, "gprofctl launch: no agent at %s (%s): the command would run "
		        "untraced, so it was not started. Give the path of libgprof_agent.so with "
		        "--agent or $GPROF_AGENT (installed: %s).\n", agent, strerror(errno),
		        GPROF_AGENT_PATH);
		return EXIT_USAGE;
	}
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
		/* stdout is the command's: this note goes to stderr, as JSON with --json */
		if (o->json) {
			cJSON *j = cJSON_CreateObject();
			char *text;

			cJSON_AddStringToObject(j, "job_id", job);
			cJSON_AddStringToObject(j, "agent", agent);
			if ((text = cJSON_PrintUnformatted(j)) != NULL)
				fprintf(stderr, "%s\n", text);
			cJSON_free(text);
			cJSON_Delete(j);
		} else
			fprintf(stderr, "gprofctl launch: job id %s (trace it with gprofctl trace "
			        "--job %s)\n", job, job);
	}
	setenv("CUDA_INJECTION64_PATH", agent, 1);
	setenv("NVTX_INJECTION64_PATH", agent, 1);
	setenv("GPROF_JOB_ID", job, 1);
	/* PyTorch jobs: python/sitecustomize.py imports gprof_agent, whose
	 * optimizer hook makes every step an iteration (GPROF_TORCH_STEPS). */
	if (ps.python[0]) {
		const char *pp = getenv("PYTHONPATH");
		char *path = NULL;

		if (asprintf(&path, "%s%s%s", ps.python, pp && *pp ? ":" : "",
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
