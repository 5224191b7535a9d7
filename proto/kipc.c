/*
 * kipc: see kipc.h. Every integer is copied with memcpy in native order:
 * the datagrams are read straight from Kineto's C structs on the same
 * machine, so host order is the contract, and memcpy keeps unaligned
 * reads defined.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kipc.h"

static const char *const type_names[] = { [KIPC_REQ] = "req", [KIPC_CTXT] = "ctxt" };

int kipc_decode_header(const void *buf, size_t len, enum kipc_kind *kind,
                       const uint8_t **payload, size_t *plen, struct perr *err)
{
	const uint8_t *p = buf;
	char type[KIPC_TYPE_SIZE + 1];
	uint64_t size;

	if (len < KIPC_HDR_SIZE)
		return perr_set(err, -EBADMSG, "datagram of %zu bytes is shorter than "
		                "the %u-byte header", len, KIPC_HDR_SIZE);
	memcpy(&size, p, sizeof(size));
	if (size != len - KIPC_HDR_SIZE)
		return perr_set(err, -EBADMSG, "header says %llu payload bytes, "
		                "datagram has %zu", (unsigned long long)size,
		                len - KIPC_HDR_SIZE);
	memcpy(type, p + 8, KIPC_TYPE_SIZE);
	type[KIPC_TYPE_SIZE] = 0;
	/* Kineto compares types as prefixes. */
	if (strncmp(type, "req", 3) == 0)
		*kind = KIPC_REQ;
	else if (strncmp(type, "ctxt", 4) == 0)
		*kind = KIPC_CTXT;
	else {
		for (size_t i = 0; i < KIPC_TYPE_SIZE && type[i]; i++)
			if (type[i] < 0x20 || type[i] > 0x7e)
				type[i] = '?';
		return perr_set(err, -EPROTONOSUPPORT, "unknown datagram type \"%s\"",
		                type);
	}
	*payload = p + KIPC_HDR_SIZE;
	*plen = len - KIPC_HDR_SIZE;
	return 0;
}

int kipc_decode(struct kipc_msg *m, const void *buf, size_t len, struct perr *err)
{
	const uint8_t *pl;
	size_t plen;
	int r;

	memset(m, 0, sizeof(*m));
	r = kipc_decode_header(buf, len, &m->kind, &pl, &plen, err);
	if (r < 0)
		return r;
	if (m->kind == KIPC_CTXT) {
		if (plen != KIPC_CTXT_SIZE)
			return perr_set(err, -EBADMSG, "\"ctxt\" payload is %zu bytes, "
			                "expected %u", plen, KIPC_CTXT_SIZE);
		memcpy(&m->u.ctxt.gpu, pl, 4);
		memcpy(&m->u.ctxt.pid, pl + 4, 4);
		memcpy(&m->u.ctxt.job_id, pl + 8, 8);
		if (m->u.ctxt.pid <= 0)
			return perr_set(err, -EBADMSG, "\"ctxt\" pid %d is not a process",
			                m->u.ctxt.pid);
		return 0;
	}
	if (plen < KIPC_REQ_FIXED)
		return perr_set(err, -EBADMSG, "\"req\" payload is %zu bytes, shorter "
		                "than %u", plen, KIPC_REQ_FIXED);
	memcpy(&m->u.req.type, pl, 4);
	memcpy(&m->u.req.n, pl + 4, 4);
	memcpy(&m->u.req.job_id, pl + 8, 8);
	if (m->u.req.n < 1 || m->u.req.n > KIPC_PIDS_MAX)
		return perr_set(err, -EBADMSG, "\"req\" names %d pids; expected 1..%d",
		                m->u.req.n, KIPC_PIDS_MAX);
	if (plen != KIPC_REQ_FIXED + 4u * (size_t)m->u.req.n)
		return perr_set(err, -EBADMSG, "\"req\" payload is %zu bytes; %d pids "
		                "need %zu", plen, m->u.req.n,
		                KIPC_REQ_FIXED + 4u * (size_t)m->u.req.n);
	if (m->u.req.type < 0 || m->u.req.type > (KIPC_REQ_EVENTS | KIPC_REQ_ACTIVITIES))
		return perr_set(err, -EBADMSG, "\"req\" type %d is not a mask of "
		                "events (1) and activities (2)", m->u.req.type);
	memcpy(m->u.req.pids, pl + KIPC_REQ_FIXED, 4u * (size_t)m->u.req.n);
	if (m->u.req.pids[0] <= 0)
		return perr_set(err, -EBADMSG, "\"req\" first pid %d is not a process",
		                m->u.req.pids[0]);
	return 0;
}

static int put_header(uint8_t *out, size_t cap, enum kipc_kind kind, size_t plen)
{
	uint64_t size = plen;

	if (cap < KIPC_HDR_SIZE + plen)
		return -ENOBUFS;
	memcpy(out, &size, sizeof(size));
	memset(out + 8, 0, KIPC_TYPE_SIZE);
	memcpy(out + 8, type_names[kind], strlen(type_names[kind]));
	return 0;
}

int kipc_encode_req(uint8_t *out, size_t cap, const struct kipc_req *req)
{
	size_t plen;

	if (req->n < 1 || req->n > KIPC_PIDS_MAX)
		return -EINVAL;
	plen = KIPC_REQ_FIXED + 4u * (size_t)req->n;
	if (put_header(out, cap, KIPC_REQ, plen) < 0)
		return -ENOBUFS;
	memcpy(out + KIPC_HDR_SIZE, &req->type, 4);
	memcpy(out + KIPC_HDR_SIZE + 4, &req->n, 4);
	memcpy(out + KIPC_HDR_SIZE + 8, &req->job_id, 8);
	memcpy(out + KIPC_HDR_SIZE + KIPC_REQ_FIXED, req->pids, 4u * (size_t)req->n);
	return (int)(KIPC_HDR_SIZE + plen);
}

int kipc_encode_ctxt(uint8_t *out, size_t cap, const struct kipc_ctxt *c)
{
	if (put_header(out, cap, KIPC_CTXT, KIPC_CTXT_SIZE) < 0)
		return -ENOBUFS;
	memcpy(out + KIPC_HDR_SIZE, &c->gpu, 4);
	memcpy(out + KIPC_HDR_SIZE + 4, &c->pid, 4);
	memcpy(out + KIPC_HDR_SIZE + 8, &c->job_id, 8);
	return (int)(KIPC_HDR_SIZE + KIPC_CTXT_SIZE);
}

int kipc_encode_config_reply(uint8_t *out, size_t cap, const char *config, size_t len)
{
	if (len > KIPC_CONFIG_MAX)
		return -EINVAL;
	if (put_header(out, cap, KIPC_REQ, len) < 0)
		return -ENOBUFS;
	if (len > 0)
		memcpy(out + KIPC_HDR_SIZE, config, len);
	return (int)(KIPC_HDR_SIZE + len);
}

int kipc_encode_ctxt_reply(uint8_t *out, size_t cap, int32_t count)
{
	if (put_header(out, cap, KIPC_CTXT, 4) < 0)
		return -ENOBUFS;
	memcpy(out + KIPC_HDR_SIZE, &count, 4);
	return (int)(KIPC_HDR_SIZE + 4);
}

int kipc_addr_abstract(struct sockaddr_un *sa, socklen_t *len, const char *name)
{
	size_t n = strlen(name);

	/* leading NUL + name + trailing NUL must fit in sun_path */
	if (n + 2 > sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, n);
	*len = (socklen_t)(sizeof(sa_family_t) + n + 2);
	return 0;
}

int kipc_addr_dir(struct sockaddr_un *sa, socklen_t *len, const char *dir,
                  const char *name)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	*len = (socklen_t)(sizeof(sa_family_t) + (size_t)n + 1);
	return 0;
}
