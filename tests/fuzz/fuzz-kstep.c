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
	struct kstep a, b;
	int fd = memfd_create("kstep", 0);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size)
		goto out;
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
out:
	close(fd);
	return 0;
}
