/*
 * report_run: one run of gprofctl report, for `gprofctl report` (cmd_report.c,
 * which parses the options) and `gprofctl trace --report` (cmd_trace.c, on
 * the directory it downloaded into): the layer between the commands and the
 * report (report.h; memory snapshots, report_mem.h). Works offline: no
 * daemon is asked.
 *
 * A run: the paths given become a list of files (a trace file, gzip or
 * plain, or a memory snapshot as given; a directory's trace files, one per
 * rank as gprofctl trace writes them, not recursive; trace --output-dir's
 * directory when it holds one trace's), each trace is read into a struct
 * rstats, and only when every one was read is the report made (text,
 * --json, or one HTML page), the snapshots' after it. A report that would
 * leave out a file asked for is not made: a job's report missing a rank
 * would pass for the whole job's.
 *
 * Invariants: the text report goes to stdout through the escaping stream
 * (textout.h), and while a run lasts so does stderr (report_run_escape_stderr),
 * so no control byte from a file or its name reaches the terminal; an HTML
 * page is written whole or not at all (a temporary file renamed over it).
 */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "htab.h"
#include "jscan.h"
#include "pickle.h"
#include "report.h"
#include "report_mem.h"
#include "report_run.h"
#include "textout.h"

/* The files a run reads, in the order given (each strdup'ed). */
struct inputs { char **v; size_t n, cap; };

/* Appends a copy of path to in: 0, or -1 out of memory. */
static int add(struct inputs *in, const char *path)
{
	if (in->n == in->cap) {
		size_t cap = in->cap ? in->cap * 2 : 16;
		char **v = realloc(in->v, cap * sizeof(*v));

		if (v == NULL)
			return -1;
		in->v = v;
		in->cap = cap;
	}
	return (in->v[in->n++] = strdup(path)) ? 0 : -1;
}

/* Whether a directory entry is one the report reads (a trace or a snapshot). */
static bool trace_name(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && ((n > 5 && strcmp(name + n - 5, ".json") == 0) ||
	                          (n > 8 && strcmp(name + n - 8, ".json.gz") == 0) ||
	                          mreport_is_snapshot(name));
}

/* The trace files directly in directory path, added to in (counted only
 * when in is NULL); their count, or -1 (said why). */
static long add_dir(struct inputs *in, const char *path)
{
	struct dirent *e;
	long n = 0;
	DIR *d;

	if ((d = opendir(path)) == NULL) {
		fprintf(stderr, "gprofctl report: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		char p[4096];

		if (!trace_name(e->d_name))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (in != NULL && add(in, p) < 0) {
			closedir(d);
			return -1;
		}
		n++;
	}
	closedir(d);
	return n;
}

/* Why directory path gave nothing to read: empty, or what it holds instead. */
static void say_empty(const char *path)
{
	struct dirent *e;
	char first[256] = "";
	size_t n = 0;
	DIR *d = opendir(path);

	while (d != NULL && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && n++ == 0)
			snprintf(first, sizeof(first), "%s", e->d_name);
	if (d != NULL)
		closedir(d);
	if (n == 0)
		fprintf(stderr, "gprofctl report: %s is an empty directory: no trace was written "
		        "there (gprofctl trace --output-dir writes one directory per trace, with a file "
		        "per process); give a trace file or such a directory\n", path);
	else
		fprintf(stderr, "gprofctl report: %s holds no trace file (*.json, *.json.gz), memory "
		        "snapshot (*.pickle) or directory of them, only %zu other entr%s (such as "
		        "'%.60s'); give a trace file or the directory gprofctl trace wrote\n", path, n,
		        n == 1 ? "y" : "ies", first);
}

/* A file, or a directory's trace files (not recursive); a directory with
 * none but one trace's directory below it (gprofctl trace --output-dir D
 * writes D/TRACE_ID/) is read there; with several below it, an error that
 * names them, since mixing two traces' ranks would mislead. */
static int expand(struct inputs *in, const char *path)
{
	struct dirent *e;
	struct stat st;
	char one[4096] = "", newest[4096] = "";
	time_t newest_t = 0;
	long n;
	size_t subs = 0;
	DIR *d;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "gprofctl report: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return add(in, path);
	if ((n = add_dir(in, path)) != 0)
		return n < 0 ? -1 : 0;
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char p[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode) || add_dir(NULL, p) <= 0)
			continue;
		if (subs++ == 0)
			snprintf(one, sizeof(one), "%s", p);
		if (st.st_mtime >= newest_t) {
			newest_t = st.st_mtime;
			snprintf(newest, sizeof(newest), "%s", p);
		}
	}
	closedir(d);
	if (subs == 1)
		return add_dir(in, one) < 0 ? -1 : 0;
	if (subs == 0) {
		say_empty(path);
		return -1;
	}
	if (subs > 1) {
		fprintf(stderr, "gprofctl report: %s holds %zu traces, a directory each (as gprofctl "
		        "trace --output-dir writes them): name one, e.g. gprofctl report %s (the "
		        "newest)\n", path, subs, newest);
		return -1;
	}
	return 0;
}

/* The page goes to a temporary file renamed over FILE once whole, so a
 * failed run leaves no half page. */
static int write_html(const char *path, struct rstats **st, size_t n, size_t top)
{
	char tmp[4096];
	FILE *f;
	int fd;

	if (strcmp(path, "-") == 0) {
		report_html(stdout, st, n, top);
		return fflush(stdout) == 0 ? 0 : -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if ((fd = mkstemp(tmp)) < 0 || (f = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "gprofctl report: cannot write %s: %s\n", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		return -1;
	}
	report_html(f, st, n, top);
	if (fchmod(fd, 0644) != 0 || fflush(f) != 0 || ferror(f) || fclose(f) != 0 ||
	    rename(tmp, path) != 0) {
		fprintf(stderr, "gprofctl report: cannot write %s: %s\n", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	fprintf(stderr, "gprofctl report: wrote %s\n", path);
	return 0;
}

/* Whether path names a memory snapshot (by its last component's name). */
static bool is_snapshot(const char *path)
{
	const char *slash = strrchr(path, '/');

	return mreport_is_snapshot(slash ? slash + 1 : path);
}

/* Memory snapshots (*.pickle) are read by report_mem.c, the traces here;
 * snapshots come after the traces' report, or under "memory" in JSON
 * (with the memory of traces that have [memory] events). */
static int run_memory(struct inputs *in, bool json, const char *html, size_t top,
                      struct rstats **st, size_t nst, cJSON *root, FILE *out)
{
	struct mreport *m = calloc(in->n ? in->n : 1, sizeof(*m));
	size_t i, bad = 0, nm = 0, k;
	cJSON *arr = NULL;

	if (m == NULL)
		return -1;
	for (i = 0; i < in->n; i++) {
		if (!is_snapshot(in->v[i]))
			continue;
		if (html != NULL) {
			fprintf(stderr, "gprofctl report: %s: a memory snapshot has no HTML page; "
			        "drop --html, or open it in PyTorch's viewer (python -m "
			        "torch.cuda._memory_viz trace_plot FILE -o page.html)\n", in->v[i]);
			bad++;
			continue;
		}
		if (mreport_snapshot(in->v[i], &m[nm]) < 0) {
			fprintf(stderr, "gprofctl report: %s: %s\n", in->v[i], m[nm].error);
			mreport_free(&m[nm]);
			bad++;
			continue;
		}
		nm++;
	}
	for (k = 0; k < nst; k++)
		if (st[k] != NULL && report_memory(st[k]) != NULL)
			break;
	if (json && root != NULL && (nm > 0 || k < nst)) {
		/* only when there is some: a trace report's JSON is otherwise as before */
		arr = cJSON_AddArrayToObject(root, "memory");
		for (k = 0; k < nst; k++)
			if (st[k] != NULL && report_memory(st[k]) != NULL)
				cJSON_AddItemToArray(arr, mreport_json(report_memory(st[k]), top));
		for (k = 0; k < nm; k++)
			cJSON_AddItemToArray(arr, mreport_json(&m[k], top));
	} else if (!json && html == NULL) {
		for (k = 0; k < nst; k++)
			if (st[k] != NULL && report_memory(st[k]) != NULL) {
				fprintf(out, "\n");
				mreport_print(out, report_memory(st[k]), top);
			}
		for (k = 0; k < nm; k++) {
			if (nst > 0 || k > 0)
				fprintf(out, "\n");
			fflush(out);
			mreport_print(out, &m[k], top);
		}
	}
	for (k = 0; k < nm; k++)
		mreport_free(&m[k]);
	free(m);
	return (int)bad;
}

/* EXIT_USAGE when a file is not a trace (or cannot be read), EXIT_FAILED
 * when one is an empty trace, else EXIT_OK; report_read said why. */
static int refused(struct rstats *const *st, size_t n)
{
	int code = EXIT_OK;
	size_t i;

	for (i = 0; i < n; i++)
		if (report_refusal(st[i]) == REFUSED_EMPTY && code == EXIT_OK)
			code = EXIT_FAILED;
		else if (report_refusal(st[i]) != REFUSED_NO && report_refusal(st[i]) != REFUSED_EMPTY)
			code = EXIT_USAGE;
	return code;
}

/* With GPROFCTL_REPORT_COUNTS set: what reading cost, as the program counts
 * it, on stderr (tests and bench/report_worst.py hold it to the input's
 * size; docs/REPORT.md, Limits). heap: bytes malloc holds once every file
 * is read (its own count, mallinfo2), before any output is made. */
static void print_counts(struct rstats **st, size_t n, const struct mallinfo2 *mi)
{
	uint64_t wheres = 0;
	size_t i;

	for (i = 0; i < n; i++)
		wheres += st[i] != NULL ? report_wheres(st[i]) : 0;
	fprintf(stderr, "gprofctl report: counts: lookups=%llu probes=%llu wheres=%llu "
	        "rescanned=%llu snapshot_steps=%llu snapshot_peak_bytes=%llu heap_bytes=%llu "
	        "escaped=%llu\n",
	        (unsigned long long)htab_counts.lookups, (unsigned long long)htab_counts.probes,
	        (unsigned long long)wheres, (unsigned long long)jscan_carry_scanned,
	        (unsigned long long)pk_steps,
	        (unsigned long long)mreport_peak_bytes,
	        (unsigned long long)(mi->uordblks + mi->hblkhd),
	        (unsigned long long)textout_escaped);
}

/* Reads every file of in and makes the report from them: an exit status. */
static int run(struct inputs *in, bool json, const char *html, size_t top, bool by_shape)
{
	struct rstats **st = calloc(in->n ? in->n : 1, sizeof(*st));
	size_t i, bad = 0, n = 0;
	int code = EXIT_OK;
	cJSON *root = NULL;
	struct mallinfo2 mi;
	/* the text report, escaped for the terminal (textout.h) */
	FILE *out = !json && html == NULL ? textout_open(stdout) : stdout;

	if (st == NULL || out == NULL) {
		free(st);
		return EXIT_USAGE;
	}
	/* the traces; the snapshots are run_memory's */
	for (i = 0; i < in->n; i++) {
		if (is_snapshot(in->v[i]))
			continue;
		st[n] = report_new();
		if (st[n] == NULL || report_read(in->v[i], st[n]) < 0) {
			bad++;
			if (st[n] != NULL)
				fprintf(stderr, "gprofctl report: %s: %s\n", in->v[i], report_error(st[n]));
		}
		if (st[n] != NULL)
			report_set_by_shape(st[n], by_shape);
		n++;
	}
	mi = mallinfo2();
	for (i = 0; i < n && st[i] != NULL; i++)
		;
	if (i == n && (code = refused(st, n)) != EXIT_OK) {
		/* a report that leaves out one of the files asked for would pass
		 * for the whole job's: none, and each refused file said why */
		if (n > 1)
			fprintf(stderr, "gprofctl report: no report made, since one of the files "
			        "given would be missing from it: name only the others to report them\n");
		bad = 0;
	} else if (i == n) {
		report_sort(st, n);
		if (json)
			root = n ? report_json(st, n, top) : cJSON_CreateObject();
		else if (html != NULL && n > 0) {
			if (write_html(html, st, n, top) < 0)
				bad++;
		} else if (n > 0)
			report_print(out, st, n, top);
		bad += (size_t)run_memory(in, json, html, top, st, n, root, out);
		if (root != NULL) {
			char *text = cJSON_Print(root);

			printf("%s\n", text);
			cJSON_free(text);
			cJSON_Delete(root);
		}
	}
	if (out != stdout && textout_close(out) != 0)
		bad++;
	if (getenv("GPROFCTL_REPORT_COUNTS") != NULL)
		print_counts(st, n, &mi);
	for (i = 0; i < n; i++) {
		if (st[i] != NULL)
			report_free(st[i]);
		free(st[i]);
	}
	free(st);
	return code != EXIT_OK ? code : bad ? EXIT_FAILED : EXIT_OK;
}

/* What report says on stderr names files and quotes what it read (a file's
 * name, why it is refused): written through the escaping stream too, for
 * the whole command, by swapping glibc's stderr (a variable) and putting it
 * back after. report_run_escape_stderr and report_run_restore_stderr come
 * in pairs. */
static FILE *err_raw;

/* Swaps stderr for an escaping stream over it. */
void report_run_escape_stderr(void)
{
	FILE *e = textout_open(stderr);

	if (e != NULL) {
		setvbuf(e, NULL, _IOLBF, 0); /* a message shows when its line ends */
		err_raw = stderr;
		stderr = e;
	}
}

/* Puts the real stderr back, flushing what the escaping stream holds. */
void report_run_restore_stderr(void)
{
	FILE *e = stderr;

	if (err_raw != NULL) {
		stderr = err_raw;
		err_raw = NULL;
		textout_close(e);
	}
}

/* Frees the paths in and their array. */
static void inputs_free(struct inputs *in)
{
	size_t i;

	for (i = 0; i < in->n; i++)
		free(in->v[i]);
	free(in->v);
}

/* gprofctl report's run over the paths its command line gave. */
int report_run_paths(char *const *paths, size_t n, const struct report_run_opts *o)
{
	struct inputs in = { 0 };
	int code;
	size_t i;

	for (i = 0; i < n; i++)
		if (expand(&in, paths[i]) < 0) {
			code = EXIT_USAGE;
			goto out;
		}
	if (in.n == 0) {
		fprintf(stderr, "gprofctl report: no trace file (*.json, *.json.gz) or memory "
		        "snapshot (*.pickle) there\n");
		code = EXIT_USAGE;
		goto out;
	}
	code = run(&in, o->json, o->html, o->top, o->by_shape);
out:
	inputs_free(&in);
	return code;
}

/* report_run_dir's run, stderr escaped meanwhile. */
static int run_dir(const char *dir, bool json)
{
	struct inputs in = { 0 };
	int code;

	if (expand(&in, dir) < 0 || in.n == 0) {
		inputs_free(&in);
		return EXIT_FAILED;
	}
	code = run(&in, json, NULL, 10, false);
	inputs_free(&in);
	return code;
}

/* trace --report's run over the directory it downloaded into. */
int report_run_dir(const char *dir, bool json)
{
	int code;

	report_run_escape_stderr();
	code = run_dir(dir, json);
	report_run_restore_stderr();
	return code;
}
