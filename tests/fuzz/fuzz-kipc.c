/*
 * Fuzz target: kipc_decode on arbitrary datagrams. Property: a decoded
 * datagram re-encodes to one that decodes to the same fields.
 */
#include <string.h>

#include "fuzz.h"
#include "kipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[KIPC_HDR_SIZE + KIPC_REQ_FIXED + 4 * KIPC_PIDS_MAX];
	struct kipc_msg m, m2;
	int n;

	if (kipc_decode(&m, data, size, NULL) != 0)
		return 0;
	if (m.kind == KIPC_REQ)
		n = kipc_encode_req(out, sizeof(out), &m.u.req);
	else
		n = kipc_encode_ctxt(out, sizeof(out), &m.u.ctxt);
	FUZZ_CHECK(n > 0);
	FUZZ_CHECK(kipc_decode(&m2, out, (size_t)n, NULL) == 0);
	FUZZ_CHECK(m2.kind == m.kind);
	if (m.kind == KIPC_REQ)
		FUZZ_CHECK(m2.u.req.type == m.u.req.type && m2.u.req.n == m.u.req.n &&
		           m2.u.req.job_id == m.u.req.job_id &&
		           memcmp(m2.u.req.pids, m.u.req.pids, 4 * (size_t)m.u.req.n) == 0);
	else
		FUZZ_CHECK(memcmp(&m2.u.ctxt, &m.u.ctxt, sizeof(m.u.ctxt)) == 0);
	return 0;
}
