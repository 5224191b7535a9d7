/*
 * Fuzz target: dyno_decode_request on arbitrary text. Property: a decoded
 * setKinetOnDemandRequest re-encodes and decodes to the same fields.
 */
#include <string.h>

#include "dyno.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dyno_request r, r2;
	struct pbuf b;

	(void)dyno_is_request((const char *)data, size);
	if (dyno_decode_request(&r, (const char *)data, size, NULL) != 0)
		return 0;
	pbuf_init(&b, 0);
	if (r.fn == DYNO_SET_KINETO_ONDEMAND && dyno_encode_request(&b, &r) == 0) {
		FUZZ_CHECK(dyno_decode_request(&r2, (const char *)b.data + 4,
		                               b.len - 4, NULL) == 0);
		FUZZ_CHECK(strcmp(r.config, r2.config) == 0);
		FUZZ_CHECK(r.npids == r2.npids && r.job_id == r2.job_id &&
		           r.process_limit == r2.process_limit);
		FUZZ_CHECK(memcmp(r.pids, r2.pids, r.npids * sizeof(r.pids[0])) == 0);
		dyno_request_deinit(&r2);
	}
	pbuf_deinit(&b);
	dyno_request_deinit(&r);
	return 0;
}
