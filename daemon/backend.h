/*
 * backend: how the trace engine reaches a process to capture it. Every
 * registered process names its capture back end (proc->be): the agent
 * (agentcap.c: capture_start over the process's connection) or a Kineto
 * client (kineto.c: a config handed over at its next poll). The engine
 * (registry.c, trace.c, store.c, deliver.c) calls only this table and
 * names no back end, so a third one (a remote host, a simulated process in
 * a test: tests/unit/test-engine.c) is one new file and touches no engine
 * file.
 *
 * Contract. Calls go down, from the engine into a back end; a back end
 * answers through the trace engine's public calls (trace_set_state) and
 * hands a finished file to deliver.c. A back end keeps its per-process
 * state in its own struct, reached by proc->be_data (which it owns and
 * frees in forget); per-trace state it keys by trace id and pid. A back
 * end table is static and lives as long as the program.
 *
 * Floor: a header of declarations only, below the engine; includes
 * nothing of the daemon's.
 */
#ifndef GPROFD_BACKEND_H
#define GPROFD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

struct proc;
struct trace;
struct tproc;

struct backend {
	const char *name;          /* for logs, and the version of a process with none */
	int kind;                  /* the MSG_KIND_* its processes report as */
	/* Its processes report their steps (heartbeats): one that never
	 * stepped while another of a request did sits out an iteration trace,
	 * and its step now is estimated from them (registry_step_now). */
	bool counts_steps;
	/* NULL when it can capture what t asks; else why not, a sentence saying
	 * what to do instead (the part then fails with it). May be NULL. */
	const char *(*refuse)(const struct trace *t);
	/* Starts t's part on tp's process (tp->proc, free and set busy with
	 * t). It reports by trace_set_state: waiting, capturing, failed. */
	void (*start)(struct trace *t, struct tproc *tp);
	/* t's part on tp's process (tp->proc, not NULL) ends early, cancelled
	 * or timed out, for why: tell the process, withdraw what it was not
	 * handed yet. The engine sets the part's state after. */
	void (*cancel)(struct trace *t, struct tproc *tp, const char *why);
	/* Says in why (up to size bytes) why tp's part timed out in its state
	 * and what to check, for the person who asked. */
	void (*timed_out)(const struct trace *t, const struct tproc *tp, char *why, size_t size);
	/* p is about to be freed: free what p->be_data holds. May be NULL. */
	void (*forget)(struct proc *p);
};

#endif
