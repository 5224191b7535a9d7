/*
 * Fuzz target: `gprofctl report` on any file (a trace is written by the
 * traced user, or cut, or not a trace at all). The whole path a file
 * takes: the scanner, folding events into per-rank figures (intervals,
 * gaps, kernels, ranges, stretches, iterations), the findings, and the
 * three outputs (text, JSON, HTML). Properties beyond "no crash, no leak,
 * no UB": the answer is 0 exactly when no error was set; the JSON output
 * prints and parses; the figures are deterministic (the JSON of two reads
 * is the same text); every figure in it is finite; the text report, written
 * through textout as gprofctl writes it, holds no control byte but the
 * newline, no DEL and no C1 control (issue 43).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz.h"
#include "report.h"
#include "report_int.h"
#include "textout.h"

/* The text as a terminal gets it: printable ASCII, newlines, and UTF-8
 * of no C1 control (textout lets through only well-formed sequences). */
static void terminal_safe(const unsigned char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		FUZZ_CHECK(s[i] >= 0x20 || s[i] == '\n');
		FUZZ_CHECK(s[i] != 0x7f);
		FUZZ_CHECK(!(s[i] == 0xc2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f));
	}
}

static void all_finite(const cJSON *j)
{
	const cJSON *c;

	if (cJSON_IsNumber(j))
		FUZZ_CHECK(isfinite(j->valuedouble));
	for (c = j->child; c; c = c->next)
		all_finite(c);
}

static char *as_json(struct rstats *st)
{
	struct rstats *v[1] = { st };
	cJSON *j = report_json(v, 1, 5);
	char *s;

	FUZZ_CHECK(j != NULL);
	all_finite(j);
	s = cJSON_PrintUnformatted(j);
	FUZZ_CHECK(s != NULL);
	cJSON_Delete(j);
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *sink;
	struct rstats a, b;
	struct rstats *v[2] = { &a, &b };
	char *ja, *jb;
	cJSON *back;
	int ra, rb;

	if (sink == NULL && (sink = fopen("/dev/null", "w")) == NULL)
		return 0;
	ra = report_read_mem("fuzz", (const char *)data, size, &a);
	FUZZ_CHECK((ra == 0) == (a.error[0] == '\0'));
	rb = report_read_mem("fuzz", (const char *)data, size, &b);
	FUZZ_CHECK(ra == rb);
	ja = as_json(&a);
	jb = as_json(&b);
	FUZZ_CHECK(strcmp(ja, jb) == 0);
	FUZZ_CHECK((back = cJSON_Parse(ja)) != NULL);
	cJSON_Delete(back);
	/* the two "ranks" side by side: comparison, straggler, findings */
	{
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len), *out;

		FUZZ_CHECK(mem != NULL && (out = textout_open(mem)) != NULL);
		report_print(out, v, 2, 5);
		FUZZ_CHECK(textout_close(out) == 0);
		fclose(mem);
		terminal_safe((const unsigned char *)text, len);
		free(text);
	}
	report_html(sink, v, 2, 5);
	free(ja);
	free(jb);
	report_free(&a);
	report_free(&b);
	return 0;
}
