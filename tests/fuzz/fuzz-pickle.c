/*
 * Fuzz target: `gprofctl report` on a memory snapshot, which is any file
 * a user hands it: the pickle reader (ctl/pickle.c) and the figures drawn
 * from its tree (ctl/report_mem.c), then the text and JSON outputs.
 * Properties beyond "no crash, no leak, no UB, nothing run": the reader
 * answers 0 exactly when it has a root and no error, and -1 with an error
 * and an offset inside the input; a report either has an error or figures
 * whose JSON prints; two reads give the same JSON text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz.h"
#include "pickle.h"
#include "report_mem.h"

static char *as_json(const struct mreport *r)
{
	cJSON *j = mreport_json(r, 5);
	char *s;

	FUZZ_CHECK(j != NULL);
	s = cJSON_PrintUnformatted(j);
	FUZZ_CHECK(s != NULL);
	cJSON_Delete(j);
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pickle p = { .max_values = 1u << 16 };
	struct mreport a, b;
	int r = pickle_load(&p, data, size);
	char *ja, *jb;
	FILE *devnull;

	FUZZ_CHECK((r == 0) == (p.root != NULL));
	FUZZ_CHECK((r == 0) == (p.error[0] == '\0'));
	FUZZ_CHECK(r == 0 || p.err_off <= size);
	pickle_free(&p);

	if (mreport_snapshot_mem("fuzz_rank3.memory.pickle", data, size, &a) < 0) {
		FUZZ_CHECK(a.error[0] != '\0');
		mreport_free(&a);
		return 0;
	}
	FUZZ_CHECK(a.error[0] == '\0');
	FUZZ_CHECK(mreport_snapshot_mem("fuzz_rank3.memory.pickle", data, size, &b) == 0);
	ja = as_json(&a);
	jb = as_json(&b);
	FUZZ_CHECK(strcmp(ja, jb) == 0);
	if ((devnull = fopen("/dev/null", "w")) != NULL) {
		mreport_print(devnull, &a, 10);
		fclose(devnull);
	}
	free(ja);
	free(jb);
	mreport_free(&a);
	mreport_free(&b);
	return 0;
}
