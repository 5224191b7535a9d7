/*
 * report: what a trace says (gprofctl report, issue 14): the interface
 * report_run.c uses (the run gprofctl report and trace --report share).
 * One struct rstats per trace file (a rank of a job):
 * report_read fills it in one streaming pass, and the outputs write a list
 * of them as text, JSON or one HTML page, with the comparison across ranks
 * and the findings. What is inside a struct rstats is the report_*.c
 * files' business (report_int.h); here it is opaque.
 *
 * Ownership: the caller owns each struct rstats (report_new's memory:
 * report_free releases what report_read allocated in it, then free() it);
 * the cJSON tree from report_json is the caller's; a struct mreport from
 * report_memory stays the rstats'.
 */
#ifndef GPROFCTL_REPORT_H
#define GPROFCTL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

struct rstats;
struct mreport;

/* Why no report is made from a file (report_error says it for people):
 * REFUSED_NOT_TRACE, a file that is not a trace (no traceEvents array: not
 * JSON, other JSON, cut before its events); REFUSED_EMPTY, a trace with
 * nothing timed in it; REFUSED_UNREADABLE, a file that cannot be opened. */
enum report_refusal { REFUSED_NO, REFUSED_NOT_TRACE, REFUSED_EMPTY, REFUSED_UNREADABLE };

/* Room for one trace's figures, for report_read; NULL when out of memory. */
struct rstats *report_new(void);
/* Reads path into st (zeroed here). 0; or -1 with report_error saying what
 * and where (byte offset), and st holding whatever was read before. */
int report_read(const char *path, struct rstats *st);
/* The same over text in memory (plain JSON), named name (the fuzz target's way in). */
int report_read_mem(const char *name, const char *text, size_t len, struct rstats *st);
/* Releases what report_read allocated in st (not st itself). */
void report_free(struct rstats *st);

/* What report_read found out about the file: its path, its rank (-1
 * unknown), why it could not be read whole ("" when it was), whether it is
 * refused, and its memory events (NULL when it has none). */
const char *report_path(const struct rstats *st);
int64_t report_rank(const struct rstats *st);
const char *report_error(const struct rstats *st);
enum report_refusal report_refusal(const struct rstats *st);
struct mreport *report_memory(const struct rstats *st);
/* The operator table per input shape (gprofctl report --group-by-shape). */
void report_set_by_shape(struct rstats *st, bool by_shape);
/* How many report_where lookups the outputs made in st (GPROFCTL_REPORT_COUNTS). */
uint32_t report_wheres(const struct rstats *st);
/* Sorts st by rank (unknown ranks last), then by path. */
void report_sort(struct rstats **st, size_t n);

/* Text for people (several ranks: the comparison across them, then the
 * findings), the same as JSON, or as one self-contained HTML page with
 * charts (report_html.c); top: the rows each table shows. */
void report_print(FILE *f, struct rstats *const *st, size_t n, size_t top);
cJSON *report_json(struct rstats *const *st, size_t n, size_t top);
void report_html(FILE *f, struct rstats *const *st, size_t n, size_t top);

#endif
