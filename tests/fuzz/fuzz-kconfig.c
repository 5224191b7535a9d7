/*
 * Fuzz target: kconfig_parse on arbitrary text (what a dyno client or a
 * daemon peer may send as a Kineto config). Property: a config that parses
 * never yields negative numbers, and parsing is deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kconfig a, b;
	char *text = malloc(size + 1);

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	if (kconfig_parse(&a, text, NULL) == 0) {
		FUZZ_CHECK(a.duration_ms >= 0 && a.iterations >= 0 && a.roundup >= 0 &&
		           a.start_time_ms >= 0 && a.start_iteration >= 0);
		FUZZ_CHECK(kconfig_parse(&b, text, NULL) == 0);
		FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
	}
	free(text);
	return 0;
}
