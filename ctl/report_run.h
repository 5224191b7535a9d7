/*
 * report_run: one run of the offline report over files and directories,
 * the layer between the commands and the report (report.h, report_mem.h).
 * Both `gprofctl report` (cmd_report.c: its options, then
 * report_run_paths) and `gprofctl trace --report` (cmd_trace.c:
 * report_run_dir on the directory it downloaded into) come here, so no
 * command file calls another's.
 *
 * What it prints on stderr names files and quotes what it read, so it goes
 * through the escaping stream (textout.h) while a run lasts:
 * report_run_dir escapes stderr itself; cmd_report.c brackets its whole
 * command (getopt's complaints quote arguments too) with
 * report_run_escape_stderr and report_run_restore_stderr, which come in
 * pairs and do not nest.
 *
 * Every function returns a gprofctl exit status (ctl.h's EXIT_*).
 */
#ifndef GPROFCTL_REPORT_RUN_H
#define GPROFCTL_REPORT_RUN_H

#include <stdbool.h>
#include <stddef.h>

/* What the run makes: text (the default), JSON, or one HTML page written
 * to html ("-" for stdout); top: the rows each table shows; by_shape: the
 * operator table per input shape (--group-by-shape). */
struct report_run_opts {
	bool json;
	const char *html;
	size_t top;
	bool by_shape;
};

/* gprofctl report on paths (n of them: trace files, memory snapshots, or
 * directories of them): EXIT_USAGE when a path cannot be read or gives no
 * file, else the run's status (EXIT_FAILED when a file is refused or an
 * output cannot be written). The caller escapes stderr around it. */
int report_run_paths(char *const *paths, size_t n, const struct report_run_opts *o);

/* gprofctl report on one directory of traces, for trace --report (top 10,
 * text or JSON): EXIT_FAILED when it gives no file, else the run's status.
 * Escapes stderr for its own duration. */
int report_run_dir(const char *dir, bool json);

/* Swaps glibc's stderr for an escaping stream until
 * report_run_restore_stderr puts the real one back (a no-op when the
 * stream could not be made, or when not escaped). */
void report_run_escape_stderr(void);
void report_run_restore_stderr(void);

#endif
