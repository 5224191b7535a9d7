/*
 * kstep.c: iterations for traces that Kineto writes in daemon mode.
 *
 * Kineto's on-demand traces carry no ProfilerStep#<n> events (those come
 * from torch.profiler's own step(), which a daemon-triggered capture does
 * not run), but PyTorch annotates every optimizer step
 * ("Optimizer.step#SGD.step", a user_annotation on the training thread).
 * Since an iteration ends when its optimizer step ends, kstep_scan finds
 * those annotations of the traced process and builds one ProfilerStep#<k>
 * per step: from the end of the previous one (for the first, from the
 * earliest complete event of the process) to the end of its own, on the
 * same thread.
 * HTA, TensorBoard and `validate_trace.py --steps N` then see the
 * iterations. Nothing is made when the file has ProfilerStep# already.
 *
 * The scan is one streaming pass over the file (64 KiB reads with an
 * overlap, so a match split across reads is still whole in one window)
 * that also finds the byte offset just past "traceEvents": [ , where the
 * caller inserts the events while compressing: order inside traceEvents
 * does not matter to any consumer, and the rest of the file is copied as
 * it is. Memory: one record per optimizer step, bounded by KSTEP_MAX.
 */
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kstep.h"

#define CHUNK (64 * 1024)
#define OVERLAP 1024 /* longer than any event head Kineto writes */
#define BACK 256     /* kept before the window, for heads that began there */
#define KSTEP_MAX 100000

struct opt { int64_t ts, end, tid; }; /* times in ns (Kineto's us, 3 decimals) */

/* The number after "key": in [p, end), or NAN. */
static double num_after(const char *p, const char *end, const char *key)
{
	size_t k = strlen(key);
	char tmp[64];
	size_t n = 0;

	if (p < end && (p = memmem(p, (size_t)(end - p), key, k)) != NULL && p + k < end) {
		p += k;
		while (p < end && (*p == ' ' || *p == ':'))
			p++;
		while (p < end && n < sizeof(tmp) - 1 &&
		       ((*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == 'e' || *p == 'E' ||
		        *p == '+'))
			tmp[n++] = *p++;
		tmp[n] = '\0';
		return n ? strtod(tmp, NULL) : NAN;
	}
	return NAN;
}

/* The number after "key": as an exact count of thousandths (Kineto's
 * microseconds with 3 decimals -> nanoseconds): doubles lose the last
 * digits of today's 4.5e12 us timestamps. false when absent or absurd. */
static bool ns_after(const char *p, const char *end, const char *key, int64_t *out)
{
	size_t k = strlen(key);
	int64_t v = 0;
	int frac = -1, digits = 0;
	bool neg = false;

	if (p < end && (p = memmem(p, (size_t)(end - p), key, k)) != NULL && p + k < end) {
		p += k;
		while (p < end && (*p == ' ' || *p == ':'))
			p++;
		if (p < end && *p == '-') {
			neg = true;
			p++;
		}
		for (; p < end; p++) {
			if (*p == '.' && frac < 0) {
				frac = 0;
			} else if (*p >= '0' && *p <= '9') {
				if (frac >= 3)
					continue; /* beyond ns: dropped */
				if (++digits > 16)
					return false;
				v = v * 10 + (*p - '0');
				if (frac >= 0)
					frac++;
			} else {
				break;
			}
		}
		if (digits == 0)
			return false;
		for (frac = frac < 0 ? 0 : frac; frac < 3; frac++)
			v *= 10;
		*out = neg ? -v : v;
		return true;
	}
	return false;
}

/* A pid or tid: an integer-valued number in range (the file is the traced
 * user's: anything may be there). */
static bool is_id(double v, int64_t want, bool any)
{
	if (isnan(v) || v < -9007199254740991.0 || v > 9007199254740991.0 || v != floor(v))
		return false;
	return any || (int64_t)v == want;
}

static const char *find(const char *p, const char *end, const char *pat)
{
	return p < end ? memmem(p, (size_t)(end - p), pat, strlen(pat)) : NULL;
}

static int by_ts(const void *a, const void *b)
{
	const struct opt *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Looks at one window [b, e) of which [b, done) was seen before; matches
 * that begin within `limit` are handled (the rest is left to the next
 * window, which starts OVERLAP bytes earlier). */
static int scan_window(struct kstep *ks, struct opt **opts, size_t *nopt, const char *b,
                       const char *e, const char *from, const char *limit, int64_t pid,
                       uint64_t base_off, int64_t *tmin)
{
	const char *p;

	/* the earliest complete event of the traced process: where the first
	 * iteration's span begins */
	for (p = from; (p = find(p, e, "\"ph\": \"X\"")) != NULL && p < limit; p++) {
		const char *stop = memchr(p, '{', (size_t)(e - p));
		double ev_pid;
		int64_t ts;

		if (stop == NULL || stop - p > 400)
			stop = p + 400 < e ? p + 400 : e;
		ev_pid = num_after(p, stop, "\"pid\"");
		if (is_id(ev_pid, pid, false) && ns_after(p, stop, "\"ts\"", &ts) && ts < *tmin)
			*tmin = ts;
	}
	if (!ks->has_steps && find(from, limit, "\"ProfilerStep#") != NULL)
		ks->has_steps = true;
	if (ks->insert_at == 0 && (p = find(from, e, "\"traceEvents\"")) != NULL && p < limit) {
		const char *q = p + 13;

		while (q < e && (*q == ' ' || *q == ':' || *q == '\n' || *q == '\r' || *q == '\t'))
			q++;
		if (q < e && *q == '[')
			ks->insert_at = base_off + (uint64_t)(q + 1 - b);
	}
	for (p = from; (p = find(p, e, "\"name\": \"Optimizer.step#")) != NULL && p < limit; p++) {
		const char *stop = memchr(p, '{', (size_t)(e - p)); /* "args": { ends the head */
		const char *head = p;
		double ev_pid, tid;
		int64_t ts, dur;

		if (stop == NULL)
			stop = e;
		/* fields may precede the name too: look from the event's start */
		while (head > b && head[-1] != '{')
			head--;
		ev_pid = num_after(head, stop, "\"pid\"");
		tid = num_after(head, stop, "\"tid\"");
		if (!is_id(ev_pid, pid, false) || !is_id(tid, 0, true) ||
		    !ns_after(head, stop, "\"ts\"", &ts) || !ns_after(head, stop, "\"dur\"", &dur) ||
		    dur < 0)
			continue;
		if (*nopt >= KSTEP_MAX)
			return -E2BIG;
		if (*nopt % 256 == 0) {
			struct opt *o = realloc(*opts, (*nopt + 256) * sizeof(**opts));

			if (o == NULL)
				return -ENOMEM;
			*opts = o;
		}
		(*opts)[(*nopt)++] = (struct opt){ ts, ts + dur, (int64_t)tid };
	}
	return 0;
}

int kstep_scan(int fd, int64_t pid, struct kstep *ks)
{
	char *buf = malloc(CHUNK + OVERLAP);
	struct opt *opts = NULL;
	size_t nopt = 0, have = 0, back = 0, i;
	uint64_t off = 0; /* file offset of buf[0] */
	int64_t tmin = INT64_MAX;
	int r = 0;

	memset(ks, 0, sizeof(*ks));
	if (buf == NULL)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + have, CHUNK + OVERLAP - have);
		const char *e, *from = buf + back, *limit, *keep;

		if (n < 0) {
			r = -errno;
			goto out;
		}
		e = buf + have + n;
		/* Matches starting before limit are handled now; the last OVERLAP
		 * bytes wait for the next read (at EOF everything is final). The
		 * BACK bytes before limit are kept too, so an event whose head
		 * began there is still readable, but not matched again. */
		limit = n == 0 || e - from <= OVERLAP ? e : e - OVERLAP;
		if ((r = scan_window(ks, &opts, &nopt, buf, e, from, limit, pid, off, &tmin)) < 0)
			goto out;
		if (n == 0)
			break;
		keep = limit - buf >= BACK ? limit - BACK : buf;
		back = (size_t)(limit - keep);
		have = (size_t)(e - keep);
		off += (uint64_t)(keep - buf);
		memmove(buf, keep, have);
	}
	ks->optimizer_steps = (int64_t)nopt;
	if (nopt == 0 || ks->has_steps || ks->insert_at == 0)
		goto out;
	qsort(opts, nopt, sizeof(*opts), by_ts);
	{
		size_t cap = nopt * 200 + 1;
		int64_t start = tmin < opts[0].ts ? tmin : opts[0].ts;

		if ((ks->events = malloc(cap)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		for (i = 0; i < nopt; i++) {
			int64_t s = i == 0 ? start : opts[i - 1].end, d = opts[i].end - s;
			int w;

			if (d < 0)
				d = 0;
			w = snprintf(ks->events + ks->len, cap - ks->len,
			             "{\"ph\": \"X\", \"cat\": \"user_annotation\", "
			             "\"name\": \"ProfilerStep#%zu\", \"pid\": %lld, \"tid\": %lld, "
			             "\"ts\": %s%lld.%03lld, \"dur\": %lld.%03lld, "
			             "\"args\": {\"gprofd\": \"from Optimizer.step\"}},\n",
			             i, (long long)pid, (long long)opts[i].tid, s < 0 ? "-" : "",
			             (long long)(s < 0 ? -s : s) / 1000, (long long)(s < 0 ? -s : s) % 1000,
			             (long long)d / 1000, (long long)d % 1000);

			if (w < 0 || (size_t)w >= cap - ks->len)
				break;
			ks->len += (size_t)w;
		}
		ks->made = (int64_t)i;
	}
out:
	free(opts);
	free(buf);
	return r;
}

void kstep_free(struct kstep *ks)
{
	free(ks->events);
	ks->events = NULL;
	ks->len = 0;
}
