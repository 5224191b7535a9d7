/*
 * Fuzz target: the daemon's YAML configuration parser (daemon/config.c)
 * on arbitrary text. Properties: a failed parse leaves the configuration
 * untouched; a successful one dumps to YAML that parses back to the same
 * configuration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config c, before, back;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	config_defaults(&c);
	before = c;
	if (config_parse(&c, (const char *)data, size, "fuzz", NULL) != 0) {
		FUZZ_CHECK(memcmp(&c, &before, sizeof(c)) == 0);
		return 0;
	}
	f = open_memstream(&text, &len);
	config_dump(&c, f);
	fclose(f);
	config_defaults(&back);
	FUZZ_CHECK(config_parse(&back, text, len, "dump", NULL) == 0);
	FUZZ_CHECK(memcmp(&c, &back, sizeof(c)) == 0);
	free(text);
	return 0;
}
