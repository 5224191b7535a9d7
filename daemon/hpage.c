/*
 * hpage: see hpage.h. Owns nothing: the reply and its list are the
 * caller's, the encoded frame goes to the conn's queue.
 */
#include <errno.h>

#include "hpage.h"
#include "pbuf.h"

void hpage_send(struct session *s, struct msg *r, void *v, size_t n, size_t from,
                size_t max, hpage_fn *page, const char *what)
{
	size_t k = n - from < max ? n - from : max;
	struct perr err;
	struct pbuf b;
	int rc;

	for (;;) {
		page(r, v, n, from, k);
		pbuf_init(&b, 0);
		if ((rc = msg_encode(&b, r, &err)) == 0 || rc != -EMSGSIZE || k <= 1)
			break;
		pbuf_deinit(&b);
		k /= 2;
	}
	if (rc == 0) {
		conn_send(&s->conn, &b);
		return;
	}
	pbuf_deinit(&b);
	conn_send_error(&s->conn, r->id, MSG_E_INTERNAL, "cannot send the %s: %s", what, err.msg);
}
