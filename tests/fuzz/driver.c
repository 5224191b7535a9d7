/*
 * Standalone fuzz driver: replays every file under the directories (or
 * files) named on the command line through LLVMFuzzerTestOneInput, so the
 * saved corpus runs as a regression suite under `meson test` where
 * libFuzzer is absent. Fails when it finds no input at all, so an empty or
 * misplaced corpus cannot pass silently.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static long replayed;

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (f == NULL) {
		perror(path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "%s: read failed\n", path);
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	replayed++;
	return 0;
}

static int replay(const char *path)
{
	struct dirent *e;
	struct stat st;
	char sub[4096];
	DIR *d;
	int r = 0;

	if (stat(path, &st) != 0) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	d = opendir(path);
	if (d == NULL) {
		perror(path);
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		if (replay(sub) != 0)
			r = -1;
	}
	closedir(d);
	return r;
}

int main(int argc, char **argv)
{
	int i, r = 0;

	for (i = 1; i < argc; i++)
		if (replay(argv[i]) != 0)
			r = 1;
	printf("replayed %ld inputs\n", replayed);
	if (replayed == 0) {
		fprintf(stderr, "no corpus inputs found: the corpus is missing\n");
		return 1;
	}
	return r;
}
