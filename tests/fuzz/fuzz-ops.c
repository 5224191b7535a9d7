/*
 * Fuzz target: ops_parse (agent/ops.c) on arbitrary file content: the
 * PyTorch operator file is written by the job's code, so the agent takes
 * it as untrusted. Properties: every kept event lies in the window asked
 * for, starts no later than it ends, has a thread id in 1..2^22, and its
 * args (when kept) are JSON text; a refused file keeps nothing; parsing
 * is deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ops.h"
#include "fuzz.h"

static void check_window(const char *text, size_t size, uint64_t t0, uint64_t t1)
{
	size_t bad, outside, i, n;
	const char *err = ops_parse(text, size, t0, t1, &bad, &outside);

	n = ops_count();
	FUZZ_CHECK(err == NULL || n == 0);
	for (i = 0; i < n; i++) {
		const char *name, *args;
		uint64_t s, e;
		int tid;

		FUZZ_CHECK(ops_get(i, &tid, &s, &e, &name, &args));
		FUZZ_CHECK(t0 <= s && s <= e && e <= t1);
		FUZZ_CHECK(tid >= 1 && tid < (1 << 22));
		if (args != NULL) {
			cJSON *j = cJSON_Parse(args);

			FUZZ_CHECK(j != NULL);
			cJSON_Delete(j);
		}
	}
	FUZZ_CHECK(ops_parse(text, size, t0, t1, &bad, &outside) == err);
	FUZZ_CHECK(ops_count() == n);
	ops_end();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	check_window(text, size, 0, UINT64_MAX);
	check_window(text, size, 1000, 50000);
	free(text);
	return 0;
}
