/*
 * Fuzz target: msg_decode on arbitrary text. Property: whatever decodes
 * also encodes, and the encoding decodes again to the same encoding
 * (decode . encode is a fixed point), so the decoder never accepts
 * something the encoder would refuse or print differently.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbuf a, b;
	struct msg m, m2;
	int r;

	if (msg_decode(&m, (const char *)data, size, NULL) != 0) {
		msg_deinit(&m);
		return 0;
	}
	pbuf_init(&a, 0);
	pbuf_init(&b, 0);
	r = msg_encode(&a, &m, NULL);
	/* too large after re-encoding is possible (escapes grow): not a bug */
	if (r == 0) {
		FUZZ_CHECK(msg_decode(&m2, (const char *)a.data + 4, a.len - 4, NULL) == 0);
		FUZZ_CHECK(msg_encode(&b, &m2, NULL) == 0);
		FUZZ_CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
		msg_deinit(&m2);
	} else
		FUZZ_CHECK(r == -EMSGSIZE);
	pbuf_deinit(&a);
	pbuf_deinit(&b);
	msg_deinit(&m);
	return 0;
}
