/*
 * Fuzz target: kstep_scan on arbitrary file content (Kineto's trace file is
 * written by the traced user, so it is untrusted). Properties: the
 * insertion point lies inside the file, right after a '['; the events made
 * are at most the optimizer steps found, and none when the file already
 * has ProfilerStep#; scanning is deterministic.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "kstep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* one file for every run (a memfd per run made each run ~20x slower) */
	static int fd = -1;
	struct kstep a, b;

	if (fd < 0 && (fd = memfd_create("kstep", 0)) < 0)
		return 0;
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		return 0;
	lseek(fd, 0, SEEK_SET);
	if (kstep_scan(fd, 42, &a) == 0) {
		FUZZ_CHECK(a.insert_at <= size);
		FUZZ_CHECK(a.insert_at == 0 || data[a.insert_at - 1] == '[');
		FUZZ_CHECK(a.made <= a.optimizer_steps);
		FUZZ_CHECK(!a.has_steps || a.made == 0);
		FUZZ_CHECK((a.len == 0) == (a.made == 0));
		lseek(fd, 0, SEEK_SET);
		FUZZ_CHECK(kstep_scan(fd, 42, &b) == 0);
		FUZZ_CHECK(a.len == b.len && a.made == b.made && a.insert_at == b.insert_at);
		FUZZ_CHECK(a.len == 0 || memcmp(a.events, b.events, a.len) == 0);
		kstep_free(&b);
	}
	kstep_free(&a);
	return 0;
}
