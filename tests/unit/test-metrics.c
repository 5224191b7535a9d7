/*
 * test-metrics: the samplers against known inputs. mhost on the fixture
 * tree tests/fixtures/host-a (exact values for every family it exports,
 * partitions and loop devices left out), and mgpu through the NVML
 * stand-in (nvml_stub.c): present, with optional calls missing, failing
 * init, failing count, absent. Checked on the Prometheus text, which is
 * what users see.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mgpu.h"
#include "mhost.h"
#include "mset.h"

static char text[1 << 16];

static const char *render(struct mset *s)
{
	struct pbuf b;

	pbuf_init(&b, 0);
	assert_int_equal(mset_prometheus(s, &b), 0);
	assert_true(b.len < sizeof(text));
	memcpy(text, b.data, b.len);
	text[b.len] = 0;
	pbuf_deinit(&b);
	return text;
}

#define HAS(line) do { \
	if (strstr(text, line "\n") == NULL) \
		fail_msg("missing line: %s\n--- got:\n%s", line, text); \
} while (0)
#define LACKS(frag) assert_null(strstr(text, frag))

static void test_host_fixture(void **state)
{
	struct mset s = { 0 };
	long hz = sysconf(_SC_CLK_TCK);

	(void)state;
	assert_int_equal(hz, 100); /* the fixture's expectations below */
	mhost_sample(FIXTURES "/host-a", &s);
	render(&s);
	HAS("# TYPE gprofd_cpu_seconds_total counter");
	HAS("gprofd_cpu_seconds_total{cpu=\"all\",mode=\"user\"} 10");
	HAS("gprofd_cpu_seconds_total{cpu=\"all\",mode=\"idle\"} 50");
	HAS("gprofd_cpu_seconds_total{cpu=\"0\",mode=\"system\"} 2");
	HAS("gprofd_cpu_seconds_total{cpu=\"1\",mode=\"steal\"} 0.02");
	HAS("gprofd_memory_total_bytes 16777216000");
	HAS("gprofd_memory_available_bytes 8388608000");
	HAS("gprofd_memory_used_bytes 8388608000");
	HAS("gprofd_memory_cached_bytes 4194304000");
	HAS("gprofd_memory_buffers_bytes 104857600");
	HAS("gprofd_swap_total_bytes 2097152000");
	HAS("gprofd_swap_used_bytes 524288000");
	HAS("gprofd_load1 0.5");
	HAS("gprofd_load5 1.25");
	HAS("gprofd_load15 2");
	HAS("gprofd_network_receive_bytes_total{device=\"eth0\"} 9876543210");
	HAS("gprofd_network_receive_errors_total{device=\"eth0\"} 3");
	HAS("gprofd_network_receive_drops_total{device=\"eth0\"} 7");
	HAS("gprofd_network_transmit_bytes_total{device=\"eth0\"} 1234567890");
	HAS("gprofd_network_transmit_packets_total{device=\"lo\"} 1000");
	HAS("gprofd_network_transmit_drops_total{device=\"eth0\"} 2");
	HAS("gprofd_disk_reads_total{device=\"sda\"} 1000");
	HAS("gprofd_disk_read_bytes_total{device=\"sda\"} 10240000");
	HAS("gprofd_disk_written_bytes_total{device=\"nvme0n1\"} 40960000");
	HAS("gprofd_disk_io_time_seconds_total{device=\"nvme0n1\"} 2.5");
	LACKS("sda1");
	LACKS("nvme0n1p1");
	LACKS("loop0");
	mset_free(&s);
}

/* Malformed lines are skipped; the good ones around them still count. */
static void test_host_malformed(void **state)
{
	struct mset s = { 0 };

	(void)state;
	mhost_sample(FIXTURES "/host-bad", &s);
	render(&s);
	HAS("gprofd_cpu_seconds_total{cpu=\"all\",mode=\"user\"} 10");
	HAS("gprofd_cpu_seconds_total{cpu=\"1\",mode=\"idle\"} 5");  /* 4 fields: enough */
	LACKS("cpu=\"0\"");                                           /* 1 field: skipped */
	LACKS("cpu=\"x\"");
	HAS("gprofd_memory_total_bytes 1024000");
	HAS("gprofd_memory_cached_bytes 20480");
	LACKS("gprofd_memory_available_bytes");
	LACKS("gprofd_memory_used_bytes");
	LACKS("gprofd_load1");
	LACKS("device=\"eth0\"");                                      /* 3 of 16 numbers */
	HAS("gprofd_network_transmit_errors_total{device=\"eth1\"} 70");
	LACKS("nocolon");
	LACKS("device=\"sda\"");
	HAS("gprofd_disk_writes_total{device=\"sdb\"} 2000");
	mset_free(&s);
}

static void test_host_missing_root(void **state)
{
	struct mset s = { 0 };

	(void)state;
	mhost_sample("/nonexistent-root", &s);
	assert_int_equal(s.n, 0);
	mset_free(&s);
}

static void test_gpu_stub(void **state)
{
	char why[256];
	struct mgpu *g;
	struct mset s = { 0 };

	(void)state;
	unsetenv("NVML_STUB");
	g = mgpu_open(NVML_STUB_FULL, why, sizeof(why));
	assert_non_null(g);
	assert_int_equal(mgpu_sample(g, &s), 0);
	render(&s);
	HAS("gprofd_nvml_up 1");
	HAS("gprofd_gpus 2");
	HAS("gprofd_gpu_info{gpu=\"0\",uuid=\"GPU-stub-0\",name=\"Stub H100\"} 1");
	HAS("gprofd_gpu_utilization_ratio{gpu=\"1\",uuid=\"GPU-stub-1\"} 0.6");
	HAS("gprofd_gpu_memory_utilization_ratio{gpu=\"0\",uuid=\"GPU-stub-0\"} 0.2");
	HAS("gprofd_gpu_memory_used_bytes{gpu=\"1\",uuid=\"GPU-stub-1\"} 2000000000");
	HAS("gprofd_gpu_memory_total_bytes{gpu=\"0\",uuid=\"GPU-stub-0\"} 80000000000");
	HAS("gprofd_gpu_power_watts{gpu=\"1\",uuid=\"GPU-stub-1\"} 301");
	HAS("gprofd_gpu_energy_joules_total{gpu=\"1\",uuid=\"GPU-stub-1\"} 2000");
	/* GPM needs two samples: none yet */
	LACKS("gprofd_gpu_sm_active_ratio");
	LACKS("gprofd_gpu_pcie_transmit_bytes_total");
	HAS("gprofd_gpu_temperature_celsius{gpu=\"0\",uuid=\"GPU-stub-0\"} 60");
	HAS("gprofd_gpu_sm_clock_hertz{gpu=\"0\",uuid=\"GPU-stub-0\"} 1980000000");
	HAS("gprofd_gpu_memory_clock_hertz{gpu=\"0\",uuid=\"GPU-stub-0\"} 2619000000");
	HAS("gprofd_gpu_clock_event_active{gpu=\"0\",uuid=\"GPU-stub-0\",reason=\"gpu_idle\"} 1");
	HAS("gprofd_gpu_clock_event_active{gpu=\"1\",uuid=\"GPU-stub-1\",reason=\"sw_power_cap\"} 1");
	HAS("gprofd_gpu_clock_event_active{gpu=\"1\",uuid=\"GPU-stub-1\",reason=\"hw_thermal_slowdown\"} 1");
	HAS("gprofd_gpu_clock_event_active{gpu=\"1\",uuid=\"GPU-stub-1\",reason=\"gpu_idle\"} 0");
	mset_free(&s);
	/* the energy counter and per-process memory (slow NVML calls) are read
	 * every 10th cycle and exported every cycle */
	assert_int_equal(mgpu_sample(g, &s), 0);
	render(&s);
	HAS("gprofd_gpu_energy_joules_total{gpu=\"1\",uuid=\"GPU-stub-1\"} 2000");
	HAS("gprofd_gpu_process_memory_bytes{gpu=\"0\",uuid=\"GPU-stub-0\",pid=\"4242\"} 123456789");
	mset_free(&s);
	mgpu_close(g);
}

static double mono(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The value of a series in the last render, or -1. */
static double value_of(const char *series)
{
	const char *p = strstr(text, series);

	return p ? strtod(p + strlen(series), NULL) : -1;
}

/* GPM (GPU 1 of the stand-in): ratios from a pair of samples, and byte
 * counters summed from the byte rates over the samples' span. The span is
 * the daemon's own clock; the test brackets it with its own readings. */
static void test_gpu_gpm(void **state)
{
	char why[256];
	struct mgpu *g;
	struct mset s = { 0 };
	double t0, t1, t2, t3, tx, rx, nvtx, nvrx;

	(void)state;
	g = mgpu_open(NVML_STUB_FULL, why, sizeof(why));
	assert_non_null(g);
	t0 = mono();
	assert_int_equal(mgpu_sample(g, &s), 0);
	t1 = mono();
	mset_reset(&s);
	assert_int_equal(mgpu_sample(g, &s), 0); /* GPM is sampled every 3rd cycle */
	render(&s);
	LACKS("gprofd_gpu_sm_active_ratio");
	mset_reset(&s);
	assert_int_equal(mgpu_sample(g, &s), 0);
	mset_reset(&s);
	t2 = mono();
	assert_int_equal(mgpu_sample(g, &s), 0);
	t3 = mono();
	render(&s);
	HAS("gprofd_gpu_sm_active_ratio{gpu=\"1\",uuid=\"GPU-stub-1\"} 0.5");
	HAS("gprofd_gpu_tensor_active_ratio{gpu=\"1\",uuid=\"GPU-stub-1\"} 0.25");
	LACKS("gprofd_gpu_sm_active_ratio{gpu=\"0\"");  /* no GPM there */
	LACKS("gprofd_gpu_fp64_active_ratio");           /* not supported */
	tx = value_of("gprofd_gpu_pcie_transmit_bytes_total{gpu=\"1\",uuid=\"GPU-stub-1\"} ");
	rx = value_of("gprofd_gpu_pcie_receive_bytes_total{gpu=\"1\",uuid=\"GPU-stub-1\"} ");
	nvtx = value_of("gprofd_gpu_nvlink_transmit_bytes_total{gpu=\"1\",uuid=\"GPU-stub-1\"} ");
	nvrx = value_of("gprofd_gpu_nvlink_receive_bytes_total{gpu=\"1\",uuid=\"GPU-stub-1\"} ");
	/* rate (MiB/s) x span, the span between (t2 - t1) and (t3 - t0) */
	assert_true(tx >= 100 * 1048576.0 * (t2 - t1) && tx <= 100 * 1048576.0 * (t3 - t0));
	assert_true(rx >= 200 * 1048576.0 * (t2 - t1) && rx <= 200 * 1048576.0 * (t3 - t0));
	assert_true(nvtx > 0 && fabs(nvtx / tx - 3) < 1e-9);
	assert_true(nvrx > 0 && fabs(nvrx / tx - 4) < 1e-9);
	/* exported every cycle from the last pair; counters only grow */
	mset_reset(&s);
	assert_int_equal(mgpu_sample(g, &s), 0);
	render(&s);
	HAS("gprofd_gpu_sm_active_ratio{gpu=\"1\",uuid=\"GPU-stub-1\"} 0.5");
	assert_true(value_of("gprofd_gpu_pcie_transmit_bytes_total{gpu=\"1\",uuid=\"GPU-stub-1\"} ") == tx);
	mset_reset(&s);
	assert_int_equal(mgpu_sample(g, &s), 0);
	mset_reset(&s);
	assert_int_equal(mgpu_sample(g, &s), 0); /* the next pair */
	render(&s);
	assert_true(value_of("gprofd_gpu_pcie_transmit_bytes_total{gpu=\"1\",uuid=\"GPU-stub-1\"} ") > tx);
	mset_free(&s);
	mgpu_close(g);
}

static void test_gpu_stub_minimal(void **state)
{
	char why[256];
	struct mgpu *g;
	struct mset s = { 0 };

	(void)state;
	g = mgpu_open(NVML_STUB_MIN, why, sizeof(why));
	assert_non_null(g);
	assert_int_equal(mgpu_sample(g, &s), 0);
	render(&s);
	HAS("gprofd_gpus 2");
	HAS("gprofd_gpu_memory_used_bytes{gpu=\"0\",uuid=\"unknown\"} 1000000000");
	LACKS("gprofd_gpu_utilization_ratio");
	LACKS("gprofd_gpu_power_watts");
	LACKS("gprofd_gpu_pcie_transmit_bytes_total");
	mset_free(&s);
	mgpu_close(g);
}

static void test_gpu_failures(void **state)
{
	char why[256];
	struct mgpu *g;
	struct mset s = { 0 };

	(void)state;
	assert_null(mgpu_open("/nonexistent/libnvidia-ml.so.1", why, sizeof(why)));
	assert_non_null(strstr(why, "GPU metrics off"));
	setenv("NVML_STUB", "fail", 1);
	assert_null(mgpu_open(NVML_STUB_FULL, why, sizeof(why)));
	assert_non_null(strstr(why, "nvmlInit failed"));
	setenv("NVML_STUB", "count-fails", 1);
	g = mgpu_open(NVML_STUB_FULL, why, sizeof(why));
	assert_non_null(g);
	assert_int_equal(mgpu_sample(g, &s), -1);
	render(&s);
	HAS("gprofd_nvml_up 0");
	LACKS("gprofd_gpus");
	mset_free(&s);
	mgpu_close(g);
	unsetenv("NVML_STUB");
	/* no NVML at all: the sample says so and nothing else */
	assert_int_equal(mgpu_sample(NULL, &s), 0);
	render(&s);
	HAS("gprofd_nvml_up 0");
	mset_free(&s);
}

/* An XID error the driver reports (the stand-in sends one) is counted. */
static void test_gpu_xid(void **state)
{
	char why[256];
	struct mgpu *g;
	struct mset s = { 0 };

	(void)state;
	setenv("NVML_STUB", "xid", 1);
	g = mgpu_open(NVML_STUB_FULL, why, sizeof(why));
	assert_non_null(g);
	/* the event arrives on gprofd's XID thread: sample until it shows (the
	 * stand-in sends it at the thread's first wait, which comes when the
	 * scheduler runs that thread: meson's timeout is the hang guard) */
	for (;;) {
		assert_int_equal(mgpu_sample(g, &s), 0);
		render(&s);
		mset_free(&s);
		if (strstr(text, "gprofd_gpu_xid_errors_total"))
			break;
		usleep(20000);
	}
	HAS("gprofd_gpu_xid_errors_total{gpu=\"1\",uuid=\"GPU-stub-1\",xid=\"79\"} 1");
	mgpu_close(g);
	unsetenv("NVML_STUB");
}

/* The label arena: values keep their labels across growth, a label list is
 * cut at MSET_LABELS_MAX, a copy is equal, a reset keeps the buffers. */
static void test_set_arena(void **state)
{
	struct mset s = { 0 }, c = { 0 };
	char long_label[600], key[MSET_LABELS_MAX + 100];
	struct mval *v;
	void *vbuf, *tbuf;
	int i;

	(void)state;
	memset(long_label, 'x', sizeof(long_label) - 1);
	long_label[sizeof(long_label) - 1] = 0;
	for (i = 0; i < 3000; i++) /* several reallocations of both buffers */
		assert_non_null(mset_add(&s, MF_LOAD1, i, "n=\"%d\"", i));
	/* a list too long to keep whole is left out, never cut (a cut could
	 * end inside an escape: issue 23, item 10); one that fits is kept */
	assert_null(mset_add_labels(&s, MF_LOAD5, 1, long_label));
	assert_null(mset_add(&s, MF_LOAD5, 1, "%s", long_label));
	long_label[MSET_LABELS_MAX] = 0;
	v = mset_add_labels(&s, MF_LOAD5, 1, long_label);
	assert_non_null(v);
	assert_int_equal(strlen(mset_labels(&s, v)), MSET_LABELS_MAX);
	assert_non_null(mset_add(&s, MF_LOAD5, 1, "%s", long_label));
	s.n--;
	assert_null(mset_add_labels(&s, MF_LOAD5, NAN, "a=\"b\""));  /* not finite: dropped */
	assert_non_null(mset_add(&s, MF_LOAD15, 2, NULL));
	assert_string_equal(mset_labels(&s, &s.v[s.n - 1]), "");
	mset_key(&s, &s.v[1234], key, sizeof(key));
	assert_string_equal(key, "gprofd_load1{n=\"1234\"}");
	assert_int_equal(mset_copy(&c, &s), 0);
	assert_int_equal(c.n, s.n);
	for (i = 0; i < (int)s.n; i++) {
		assert_int_equal(c.v[i].fam, s.v[i].fam);
		assert_true(c.v[i].v == s.v[i].v);
		assert_string_equal(mset_labels(&c, &c.v[i]), mset_labels(&s, &s.v[i]));
	}
	vbuf = s.v;
	tbuf = s.text;
	mset_reset(&s);
	assert_int_equal(s.n, 0);
	assert_non_null(mset_add(&s, MF_LOAD1, 7, "n=\"new\""));
	assert_ptr_equal(s.v, vbuf);
	assert_ptr_equal(s.text, tbuf);
	assert_string_equal(mset_labels(&s, &s.v[0]), "n=\"new\"");
	mset_free(&s);
	mset_free(&c);
}

static void test_json_line(void **state)
{
	struct mset s = { 0 };
	struct pbuf b;

	(void)state;
	s.ts_us = 1700000000123456;
	mset_add(&s, MF_LOAD1, 0.5, NULL);
	mset_add(&s, MF_NET_RX_BYTES, 42, "device=\"e\\\"th0\"");
	pbuf_init(&b, 0);
	assert_int_equal(mset_json(&s, "node\"7", &b), 0);
	assert_int_equal(b.len, strlen("{\"ts_us\":1700000000123456,\"host\":\"node\\\"7\",\"metrics\":"
	                               "{\"gprofd_load1\":0.5,\"gprofd_network_receive_bytes_total"
	                               "{device=\\\"e\\\\\\\"th0\\\"}\":42}}\n"));
	assert_memory_equal(b.data, "{\"ts_us\":1700000000123456,\"host\":\"node\\\"7\",\"metrics\":"
	                    "{\"gprofd_load1\":0.5,\"gprofd_network_receive_bytes_total"
	                    "{device=\\\"e\\\\\\\"th0\\\"}\":42}}\n", b.len);
	/* a host name with a control character still makes valid JSON */
	b.len = 0;
	mset_reset(&s);
	s.ts_us = 1700000000123456;
	assert_int_equal(mset_json(&s, "a\tb\\", &b), 0);
	assert_int_equal(b.len, strlen("{\"ts_us\":1700000000123456,\"host\":\"a\\u0009b\\\\\","
	                               "\"metrics\":{}}\n"));
	assert_memory_equal(b.data, "{\"ts_us\":1700000000123456,\"host\":\"a\\u0009b\\\\\","
	                    "\"metrics\":{}}\n", b.len);
	pbuf_deinit(&b);
	mset_free(&s);
}

/* Label values are escaped and valid UTF-8 whatever the source held (an
 * interface or CPU name with a stray byte broke both exports: fuzz-proc). */
static void test_label_escaping(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(mset_label(buf, sizeof(buf), "eth0"), "eth0");
	assert_string_equal(mset_label(buf, sizeof(buf), "a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
	assert_string_equal(mset_label(buf, sizeof(buf), "caf\xc3\xa9"), "caf\xc3\xa9");
	assert_string_equal(mset_label(buf, sizeof(buf), "x\xfey\xc3"), "x?y?");
	assert_string_equal(mset_label(buf, sizeof(buf), "\xed\xa0\x80"), "???"); /* a surrogate */
	assert_string_equal(mset_label(buf, sizeof(buf), "\x01tab\t"), "tab");
}

/* The bytes of the escaped unit that begins at p: 2 for an escape, else
 * the UTF-8 sequence's length. */
static size_t unit_len(const char *p)
{
	unsigned char c = (unsigned char)*p;

	if (c == '\\')
		return 2;
	return c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
}

/* Issue 23, item 10: a value longer than its room is cut at a whole
 * character of the raw value, before the first one that does not fit,
 * never inside an escape or a UTF-8 sequence: for every room size and
 * every position of a quote, a backslash, a newline and 2- and 4-byte
 * characters, the cut is a prefix of the full escape, ends on a unit
 * boundary, and is as long as the room allows. */
static void test_label_cut(void **state)
{
	static const char *const specials[] = { "\"", "\\", "\n", "\xc3\xa9",
	                                         "\xf0\x9f\x98\x80", "\\\"" };
	char raw[64], full[256], cut[64];
	size_t sp, pos, size, len;

	(void)state;
	/* the attack: 59 x a, then "x; escaped, the quote would not fit */
	memset(raw, 'a', 59);
	strcpy(raw + 59, "\"x");
	assert_int_equal(strlen(mset_label(cut, MSET_VALUE_MAX, raw)), MSET_VALUE_MAX - 1);
	assert_null(strchr(cut, '\\'));
	for (sp = 0; sp < sizeof(specials) / sizeof(specials[0]); sp++)
		for (pos = 0; pos < 12; pos++) {
			memset(raw, 'a', pos);
			snprintf(raw + pos, sizeof(raw) - pos, "%s%sbc", specials[sp], specials[sp]);
			mset_label(full, sizeof(full), raw);
			for (size = 1; size <= strlen(full) + 1; size++) {
				size_t bs = 0;

				len = strlen(mset_label(cut, size, raw));
				assert_true(len < size);
				assert_memory_equal(cut, full, len);
				while (bs < len && cut[len - 1 - bs] == '\\')
					bs++;
				assert_int_equal(bs % 2, 0);               /* no dangling escape */
				assert_true(((unsigned char)full[len] & 0xc0) != 0x80); /* whole UTF-8 */
				if (full[len] != 0)                          /* as long as it fits */
					assert_true(len + unit_len(full + len) >= size);
			}
		}
	assert_string_equal(mset_label(cut, 1, "abc"), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label_escaping),
		cmocka_unit_test(test_label_cut),
		cmocka_unit_test(test_host_fixture),
		cmocka_unit_test(test_host_malformed),
		cmocka_unit_test(test_host_missing_root),
		cmocka_unit_test(test_gpu_stub),
		cmocka_unit_test(test_gpu_gpm),
		cmocka_unit_test(test_gpu_stub_minimal),
		cmocka_unit_test(test_gpu_failures),
		cmocka_unit_test(test_gpu_xid),
		cmocka_unit_test(test_set_arena),
		cmocka_unit_test(test_json_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
