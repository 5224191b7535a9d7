/*
 * bench-codec: throughput of the native protocol codec on one core.
 *
 * Workloads:
 *   control  encode + decode of small control frames (a heartbeat, a
 *            trace_status_reply with 4 processes): msg_encode into a
 *            pbuf, then frame decoding and msg_decode of the same bytes.
 *   chunk    4 MiB chunk frames: frame_encode_chunk (one copy into the
 *            send buffer) and frame decoding fed in 64 KiB reads (one copy
 *            into the reassembly buffer), the server's real path.
 * Each workload runs REPS times; the figures printed are the medians of
 * frames/s and MB/s over the repetitions (docs/BENCHMARKS.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frame.h"
#include "msg.h"

#define REPS 9

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

struct sink {
	size_t frames;
	size_t bytes;
	int decode;
};

static int on_frame(void *ud, const struct frame *f)
{
	struct sink *s = ud;
	struct msg m;

	s->frames++;
	s->bytes += f->len;
	if (s->decode) {
		if (msg_decode(&m, (const char *)f->data, f->len, NULL) != 0)
			abort();
		msg_deinit(&m);
	}
	return 0;
}

static void build_status(struct msg *m, struct msg_trace_proc *procs)
{
	int i;

	msg_init(m, MSG_TRACE_STATUS_REPLY, 12345);
	m->u.trace_info.trace_id = "20261122-081500-node17-3f9a";
	m->u.trace_info.state = MSG_TRACE_RUNNING;
	m->u.trace_info.created_us = 1795000000123456LL;
	for (i = 0; i < 4; i++) {
		msg_elem_init(MSG_ELEM_TRACE_PROC, &procs[i]);
		procs[i].pid = 40000 + i;
		procs[i].host = "node17";
		procs[i].job_id = "1234";
		procs[i].rank = i;
		procs[i].state = MSG_TS_CAPTURING;
		procs[i].events = 123456;
	}
	m->u.trace_info.procs.v = procs;
	m->u.trace_info.procs.n = 4;
}

static void bench_control(const char *name, const struct msg *m, int n)
{
	double fps[REPS], mbs[REPS], t0, t;
	struct frame_decoder d;
	struct sink s;
	struct pbuf b;
	int rep, i;

	for (rep = 0; rep < REPS; rep++) {
		pbuf_init(&b, 0);
		memset(&s, 0, sizeof(s));
		s.decode = 1;
		frame_decoder_init(&d, 0, 0);
		t0 = now_s();
		for (i = 0; i < n; i++) {
			pbuf_reset(&b);
			if (msg_encode(&b, m, NULL) != 0)
				abort();
			if (frame_decoder_feed(&d, b.data, b.len, on_frame, &s, NULL) != 0)
				abort();
		}
		t = now_s() - t0;
		fps[rep] = n / t;
		mbs[rep] = (double)s.bytes / t / 1e6;
		frame_decoder_deinit(&d);
		pbuf_deinit(&b);
	}
	printf("control %-20s %6zu B/frame  %10.0f frames/s  %8.1f MB/s  (encode+decode, median of %d)\n",
	       name, s.bytes / (size_t)n, median(fps, REPS), median(mbs, REPS), REPS);
}

static void bench_chunk(int n)
{
	double fps[REPS], mbs[REPS], efps[REPS], embs[REPS], t0, t;
	size_t len = FRAME_MAX_CHUNK_DEFAULT, off, step = 64 << 10;
	uint8_t *data = malloc(len);
	struct frame_decoder d;
	struct sink s;
	struct pbuf b;
	int rep, i;

	for (off = 0; off < len; off++)
		data[off] = (uint8_t)(off * 131);
	for (rep = 0; rep < REPS; rep++) {
		pbuf_init(&b, 0);
		t0 = now_s();
		for (i = 0; i < n; i++) {
			pbuf_reset(&b);
			if (frame_encode_chunk(&b, 1, (uint64_t)i * len, data, len) != 0)
				abort();
		}
		t = now_s() - t0;
		efps[rep] = n / t;
		embs[rep] = (double)n * (double)len / t / 1e6;

		memset(&s, 0, sizeof(s));
		frame_decoder_init(&d, 0, 0);
		t0 = now_s();
		for (i = 0; i < n; i++)
			for (off = 0; off < b.len; off += step) {
				size_t k = b.len - off < step ? b.len - off : step;

				if (frame_decoder_feed(&d, b.data + off, k, on_frame, &s, NULL) != 0)
					abort();
			}
		t = now_s() - t0;
		fps[rep] = n / t;
		mbs[rep] = (double)s.bytes / t / 1e6;
		frame_decoder_deinit(&d);
		pbuf_deinit(&b);
	}
	printf("chunk   4 MiB encode          %10.1f frames/s  %8.1f MB/s  (median of %d)\n",
	       median(efps, REPS), median(embs, REPS), REPS);
	printf("chunk   4 MiB decode (64 KiB reads) %4.1f frames/s  %8.1f MB/s  (median of %d)\n",
	       median(fps, REPS), median(mbs, REPS), REPS);
	free(data);
}

int main(int argc, char **argv)
{
	struct msg_trace_proc procs[4];
	struct msg hb, st;
	int scale = argc > 1 ? atoi(argv[1]) : 1;

	if (scale < 1)
		scale = 1;
	msg_init(&hb, MSG_HEARTBEAT, 0);
	hb.u.heartbeat.steps = 123456;
	hb.u.heartbeat.last_step_us = 81234;
	hb.u.heartbeat.median_step_us = 80000;
	build_status(&st, procs);
	bench_control("heartbeat", &hb, 200000 * scale);
	bench_control("trace_status_reply", &st, 50000 * scale);
	bench_chunk(100 * scale);
	return 0;
}
