/*
 * mset.c: the table of metric families and the text forms of a sample
 * (mset.h). Naming follows Prometheus's conventions: the gprofd_ prefix,
 * base units in the name, _total on counters, a # HELP and # TYPE line for
 * every family exported.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mset.h"

#define MSET_MAX 100000

struct family { const char *name; const char *type; const char *help; };

static const struct family families[MF_COUNT] = {
	[MF_CPU_SECONDS] = { "gprofd_cpu_seconds_total", "counter", "CPU time by mode, per core and for all (cpu=\"all\")" },
	[MF_MEM_TOTAL] = { "gprofd_memory_total_bytes", "gauge", "Physical memory" },
	[MF_MEM_AVAILABLE] = { "gprofd_memory_available_bytes", "gauge", "Memory available for new work (MemAvailable)" },
	[MF_MEM_USED] = { "gprofd_memory_used_bytes", "gauge", "Memory in use: total minus available" },
	[MF_MEM_CACHED] = { "gprofd_memory_cached_bytes", "gauge", "Page cache (Cached)" },
	[MF_MEM_BUFFERS] = { "gprofd_memory_buffers_bytes", "gauge", "Block device buffers (Buffers)" },
	[MF_SWAP_TOTAL] = { "gprofd_swap_total_bytes", "gauge", "Swap space" },
	[MF_SWAP_USED] = { "gprofd_swap_used_bytes", "gauge", "Swap space in use" },
	[MF_LOAD1] = { "gprofd_load1", "gauge", "Load average over 1 minute" },
	[MF_LOAD5] = { "gprofd_load5", "gauge", "Load average over 5 minutes" },
	[MF_LOAD15] = { "gprofd_load15", "gauge", "Load average over 15 minutes" },
	[MF_NET_RX_BYTES] = { "gprofd_network_receive_bytes_total", "counter", "Bytes received, per interface" },
	[MF_NET_RX_PACKETS] = { "gprofd_network_receive_packets_total", "counter", "Packets received, per interface" },
	[MF_NET_RX_ERRORS] = { "gprofd_network_receive_errors_total", "counter", "Receive errors, per interface" },
	[MF_NET_RX_DROPS] = { "gprofd_network_receive_drops_total", "counter", "Received packets dropped, per interface" },
	[MF_NET_TX_BYTES] = { "gprofd_network_transmit_bytes_total", "counter", "Bytes sent, per interface" },
	[MF_NET_TX_PACKETS] = { "gprofd_network_transmit_packets_total", "counter", "Packets sent, per interface" },
	[MF_NET_TX_ERRORS] = { "gprofd_network_transmit_errors_total", "counter", "Transmit errors, per interface" },
	[MF_NET_TX_DROPS] = { "gprofd_network_transmit_drops_total", "counter", "Packets dropped on transmit, per interface" },
	[MF_DISK_READS] = { "gprofd_disk_reads_total", "counter", "Reads completed, per block device" },
	[MF_DISK_READ_BYTES] = { "gprofd_disk_read_bytes_total", "counter", "Bytes read, per block device" },
	[MF_DISK_WRITES] = { "gprofd_disk_writes_total", "counter", "Writes completed, per block device" },
	[MF_DISK_WRITTEN_BYTES] = { "gprofd_disk_written_bytes_total", "counter", "Bytes written, per block device" },
	[MF_DISK_IO_SECONDS] = { "gprofd_disk_io_time_seconds_total", "counter", "Time the device was busy with I/O" },
	[MF_NVML_UP] = { "gprofd_nvml_up", "gauge", "1 when NVML was loaded and initialised, else 0" },
	[MF_GPUS] = { "gprofd_gpus", "gauge", "GPUs NVML reports" },
	[MF_GPU_INFO] = { "gprofd_gpu_info", "gauge", "Constant 1, labelled with each GPU's name and UUID" },
	[MF_GPU_UTIL] = { "gprofd_gpu_utilization_ratio", "gauge", "Fraction of the last sample period a kernel ran (NVML utilization.gpu)" },
	[MF_GPU_MEM_UTIL] = { "gprofd_gpu_memory_utilization_ratio", "gauge", "Fraction of the last sample period device memory was read or written" },
	[MF_GPU_MEM_USED] = { "gprofd_gpu_memory_used_bytes", "gauge", "Device memory in use" },
	[MF_GPU_MEM_TOTAL] = { "gprofd_gpu_memory_total_bytes", "gauge", "Device memory" },
	[MF_GPU_POWER] = { "gprofd_gpu_power_watts", "gauge", "Power draw" },
	[MF_GPU_ENERGY] = { "gprofd_gpu_energy_joules_total", "counter", "Energy used since the driver loaded (read every 300th cycle: the call costs 3-5 ms of CPU)" },
	[MF_GPU_TEMP] = { "gprofd_gpu_temperature_celsius", "gauge", "GPU temperature" },
	[MF_GPU_SM_CLOCK] = { "gprofd_gpu_sm_clock_hertz", "gauge", "SM clock" },
	[MF_GPU_MEM_CLOCK] = { "gprofd_gpu_memory_clock_hertz", "gauge", "Memory clock" },
	[MF_GPU_CLOCK_EVENTS] = { "gprofd_gpu_clock_event_active", "gauge", "1 for each clock event (throttle) reason now active" },
	[MF_GPU_XID] = { "gprofd_gpu_xid_errors_total", "counter", "XID errors the driver reported since gprofd started, by XID" },
	[MF_GPU_ECC] = { "gprofd_gpu_ecc_errors_total", "counter", "ECC errors since the driver loaded (aggregate), by type" },
	[MF_GPU_REMAPPED] = { "gprofd_gpu_remapped_rows", "gauge", "Memory rows remapped, by cause; pending=1 while a remap waits for a reset" },
	[MF_GPU_PROC_MEM] = { "gprofd_gpu_process_memory_bytes", "gauge", "Device memory used by each compute process (read every 10th cycle)" },
	[MF_GPU_PCIE_TX] = { "gprofd_gpu_pcie_transmit_bytes_total", "counter", "Bytes the GPU sent over PCIe since gprofd started (GPM rates summed; Hopper and newer)" },
	[MF_GPU_PCIE_RX] = { "gprofd_gpu_pcie_receive_bytes_total", "counter", "Bytes the GPU received over PCIe since gprofd started (GPM rates summed; Hopper and newer)" },
	[MF_GPU_NVLINK_TX] = { "gprofd_gpu_nvlink_transmit_bytes_total", "counter", "Bytes sent over all NVLinks since gprofd started (GPM rates summed; Hopper and newer)" },
	[MF_GPU_NVLINK_RX] = { "gprofd_gpu_nvlink_receive_bytes_total", "counter", "Bytes received over all NVLinks since gprofd started (GPM rates summed; Hopper and newer)" },
	[MF_GPM_SM_ACTIVE] = { "gprofd_gpu_sm_active_ratio", "gauge", "Fraction of SM cycles with a warp resident (GPM, Hopper and newer)" },
	[MF_GPM_SM_OCCUPANCY] = { "gprofd_gpu_sm_occupancy_ratio", "gauge", "Resident warps over the SMs' maximum (GPM)" },
	[MF_GPM_TENSOR] = { "gprofd_gpu_tensor_active_ratio", "gauge", "Fraction of cycles any tensor pipe was active (GPM)" },
	[MF_GPM_DRAM] = { "gprofd_gpu_dram_bandwidth_ratio", "gauge", "DRAM bandwidth used over peak (GPM)" },
	[MF_GPM_FP16] = { "gprofd_gpu_fp16_active_ratio", "gauge", "Fraction of cycles the FP16 pipe was active (GPM)" },
	[MF_GPM_FP32] = { "gprofd_gpu_fp32_active_ratio", "gauge", "Fraction of cycles the FP32 pipe was active (GPM)" },
	[MF_GPM_FP64] = { "gprofd_gpu_fp64_active_ratio", "gauge", "Fraction of cycles the FP64 pipe was active (GPM)" },
	[MF_PROC_STEPS] = { "gprofd_process_steps_total", "counter", "Iterations an agent-loaded process reported" },
	[MF_PROC_LAST_STEP] = { "gprofd_process_last_step_seconds", "gauge", "Duration of the process's last iteration" },
	[MF_PROC_MEDIAN_STEP] = { "gprofd_process_median_step_seconds", "gauge", "Median of the process's recent iterations (up to 64)" },
	[MF_COMPONENT_UP] = { "gprofd_component_up", "gauge", "1 while the component serves (unix, tcp, tls, metrics, kineto, nvml, store), else 0 (off, absent or down)" },
	[MF_COMPONENT_DEGRADED] = { "gprofd_component_degraded", "gauge", "1 while the component is wanted but down (gprofctl status exits 4), else 0" },
	[MF_BUILD_INFO] = { "gprofd_build_info", "gauge", "Constant 1, labelled with gprofd's version and source commit" },
	[MF_TRACES_TOTAL] = { "gprofd_traces_total", "counter", "Traces since gprofd started, by outcome (done, partial, failed, cancelled, refused)" },
	[MF_STORE_TRACES] = { "gprofd_store_traces", "gauge", "Traces in the store" },
	[MF_STORE_BYTES] = { "gprofd_store_bytes", "gauge", "Bytes of trace files in the store" },
	[MF_STORE_FREE_BYTES] = { "gprofd_store_free_bytes", "gauge", "Bytes free for gprofd on the store's filesystem" },
	[MF_CONN_BYTES] = { "gprofd_connection_memory_bytes", "gauge", "Memory client connections hold: replies not yet read, partial frames, TLS sessions, their own state" },
	[MF_CONN_BYTES_PEAK] = { "gprofd_connection_memory_peak_bytes", "gauge", "The most client connections held at once since gprofd started" },
	[MF_CONN_MEMORY_LIMITED] = { "gprofd_connections_memory_limited_total", "counter", "Connections closed (action=closed) or refused (action=refused) by limits.connection_memory or limits.connection_memory_per_uid, or not read while 256 KiB of their replies wait unread (action=paused)" },
	[MF_SAMPLE_SECONDS] = { "gprofd_sample_duration_seconds", "gauge", "Wall time the last sample cycle took" },
	[MF_SAMPLE_CPU_SECONDS] = { "gprofd_sample_cpu_seconds", "gauge", "CPU time the last sample cycle took" },
	[MF_SAMPLE_SKIPPED] = { "gprofd_sample_skipped_total", "counter", "Sampling ticks skipped because a cycle overran the interval" },
	[MF_SELF_CPU_SECONDS] = { "gprofd_daemon_cpu_seconds_total", "counter", "CPU time gprofd has used" },
	[MF_SELF_RSS] = { "gprofd_daemon_resident_memory_bytes", "gauge", "gprofd's resident memory" },
	[MF_SAMPLES_TOTAL] = { "gprofd_samples_total", "counter", "Samples taken since gprofd started, this one included" },
	[MF_HTTP_RENDERS] = { "gprofd_metrics_http_renders_total", "counter", "Times the exposition was rendered for /metrics: once per sample scraped, whatever the number of scrapes" },
	[MF_HTTP_BODY_BYTES] = { "gprofd_metrics_http_response_bytes", "gauge", "Bytes of rendered expositions held: the newest, and older ones scrapes are still sending" },
	[MF_HTTP_CONNS] = { "gprofd_metrics_http_connections", "gauge", "Connections to the metrics endpoint kept (each reads at most 32 KiB of request)" },
	[MF_HISTORY_SAMPLES] = { "gprofd_metrics_history_samples", "gauge", "Samples the history holds for gprofctl metrics (sampling.history over sampling.interval, at most)" },
	[MF_HISTORY_BYTES] = { "gprofd_metrics_history_bytes", "gauge", "Heap the sample history holds: its samples, each series named once, and their tables" },
	[MF_HTTP_EVICTED] = { "gprofd_metrics_http_evicted_total", "counter", "Connections to this endpoint closed because a request took over 10 s, or to make room past 128" },
};

const char *mset_family_name(int fam)
{
	return fam >= 0 && fam < MF_COUNT ? families[fam].name : "?";
}

/* Room for one more value and a label list of up to MSET_LABELS_MAX. */
static struct mval *grow(struct mset *s)
{
	if (s->n >= MSET_MAX)
		return NULL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct mval *p = realloc(s->v, cap * sizeof(*p));

		if (p == NULL)
			return NULL;
		s->v = p;
		s->cap = cap;
	}
	if (s->text_cap - s->text_len < MSET_LABELS_MAX + 1) {
		size_t cap = s->text_cap ? s->text_cap * 2 : 4096;
		char *p = realloc(s->text, cap);

		if (p == NULL)
			return NULL;
		s->text = p;
		s->text_cap = cap;
	}
	return &s->v[s->n];
}

/* Takes the value whose label list (len bytes) was written at the end of
 * the text arena; a list too long to keep whole is not kept at all. */
static struct mval *commit(struct mset *s, struct mval *m, int fam, double v, size_t len)
{
	if (len > MSET_LABELS_MAX)
		return NULL;
	s->text[s->text_len + len] = '\0';
	m->fam = (uint16_t)fam;
	m->v = v;
	m->owner = -1;
	m->lab_off = (uint32_t)s->text_len;
	m->lab_len = (uint16_t)len;
	s->text_len += len + 1;
	s->n++;
	return m;
}

struct mval *mset_add(struct mset *s, int fam, double v, const char *labels, ...)
{
	struct mval *m;
	va_list ap;
	int len = 0;

	if (!isfinite(v) || (m = grow(s)) == NULL)
		return NULL;
	if (labels != NULL) {
		va_start(ap, labels);
		len = vsnprintf(s->text + s->text_len, MSET_LABELS_MAX + 1, labels, ap);
		va_end(ap);
	}
	return commit(s, m, fam, v, len > 0 ? (size_t)len : 0);
}

struct mval *mset_add_labels(struct mset *s, int fam, double v, const char *labels)
{
	struct mval *m;
	size_t len = labels ? strnlen(labels, MSET_LABELS_MAX + 1) : 0;

	if (!isfinite(v) || len > MSET_LABELS_MAX || (m = grow(s)) == NULL)
		return NULL;
	memcpy(s->text + s->text_len, labels ? labels : "", len);
	return commit(s, m, fam, v, len);
}

const char *mset_labels(const struct mset *s, const struct mval *m)
{
	return m->lab_len ? s->text + m->lab_off : "";
}

void mset_reset(struct mset *s)
{
	s->n = 0;
	s->text_len = 0;
	s->ts_us = 0;
}

int mset_copy(struct mset *dst, const struct mset *src)
{
	mset_reset(dst);
	if (dst->cap < src->n) {
		struct mval *p = realloc(dst->v, src->n * sizeof(*p));

		if (p == NULL)
			return -ENOMEM;
		dst->v = p;
		dst->cap = src->n;
	}
	if (dst->text_cap < src->text_len) {
		char *p = realloc(dst->text, src->text_len);

		if (p == NULL)
			return -ENOMEM;
		dst->text = p;
		dst->text_cap = src->text_len;
	}
	if (src->n)
		memcpy(dst->v, src->v, src->n * sizeof(*src->v));
	if (src->text_len)
		memcpy(dst->text, src->text, src->text_len);
	dst->n = src->n;
	dst->text_len = src->text_len;
	dst->ts_us = src->ts_us;
	return 0;
}

/* The length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_len(const unsigned char *p)
{
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		return (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (p[0] >= 0xe0 && p[0] <= 0xef) {
		if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 ||
		    (p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f))
			return 0; /* overlong, or a surrogate */
		return 3;
	}
	if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80 ||
		    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

const char *mset_label(char *buf, size_t size, const char *value)
{
	const unsigned char *v = (const unsigned char *)value;
	size_t o = 0, n;

	/* Both exports must be valid UTF-8 (Prometheus' text format, JSON):
	 * a byte that does not begin a valid sequence becomes '?'. Each
	 * character is written whole or not at all: the value is cut before
	 * the first one that does not fit, never inside an escape. */
	for (; *v; v += n) {
		const char *out = (const char *)v;
		size_t len;

		n = 1;
		if (*v == '\\' || *v == '"') {
			out = *v == '"' ? "\\\"" : "\\\\";
			len = 2;
		} else if (*v == '\n') {
			out = "\\n";
			len = 2;
		} else if (*v < 0x20) {
			continue;
		} else if ((n = utf8_len(v)) == 0) {
			out = "?";
			len = n = 1;
		} else
			len = n;
		if (o + len >= size)
			break;
		memcpy(buf + o, out, len);
		o += len;
	}
	if (size > 0)
		buf[o] = '\0';
	return buf;
}

void mset_free(struct mset *s)
{
	free(s->v);
	free(s->text);
	memset(s, 0, sizeof(*s));
}

static int put(struct pbuf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put(struct pbuf *out, const char *fmt, ...)
{
	va_list ap;
	int n, r;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((r = pbuf_reserve(out, (size_t)n + 1)) < 0)
		return r;
	va_start(ap, fmt);
	vsnprintf((char *)out->data + out->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	out->len += (size_t)n;
	return 0;
}

/* The shortest text that reads back as the same double; integers print
 * without a fraction. */
static int put_value(struct pbuf *out, double v)
{
	char b[40];

	if (v == floor(v) && fabs(v) < 1e15)
		return put(out, "%.0f", v);
	snprintf(b, sizeof(b), "%.15g", v);
	if (strtod(b, NULL) != v)
		snprintf(b, sizeof(b), "%.17g", v);
	return put(out, "%s", b);
}

int mset_prometheus(const struct mset *s, struct pbuf *out)
{
	size_t i;
	int f, r = 0;

	for (f = 0; f < MF_COUNT && r == 0; f++) {
		bool seen = false;

		for (i = 0; i < s->n && r == 0; i++) {
			const struct mval *m = &s->v[i];

			if (m->fam != f)
				continue;
			if (!seen) {
				r = put(out, "# HELP %s %s\n# TYPE %s %s\n", families[f].name,
				        families[f].help, families[f].name, families[f].type);
				seen = true;
			}
			if (r == 0)
				r = m->lab_len ? put(out, "%s{%s} ", families[f].name, mset_labels(s, m))
				               : put(out, "%s ", families[f].name);
			if (r == 0)
				r = put_value(out, m->v);
			if (r == 0)
				r = put(out, "\n");
		}
	}
	return r;
}

void mset_key(const struct mset *s, const struct mval *m, char *buf, size_t size)
{
	if (m->lab_len)
		snprintf(buf, size, "%s{%s}", mset_family_name(m->fam), mset_labels(s, m));
	else
		snprintf(buf, size, "%s", mset_family_name(m->fam));
}

/* A JSON string: runs of plain text appended whole (one printf per
 * character made this most of a JSON line's cost); quotes, backslashes
 * and, should one get here, control characters escaped. */
static int put_json_str(struct pbuf *out, const char *s)
{
	const char *run = s;
	char esc[8];
	int r = pbuf_append(out, "\"", 1);

	for (; *s && r == 0; s++) {
		unsigned char c = (unsigned char)*s;

		if (c != '"' && c != '\\' && c >= 0x20)
			continue;
		if (c == '"' || c == '\\')
			snprintf(esc, sizeof(esc), "\\%c", c);
		else
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		r = pbuf_append(out, run, (size_t)(s - run));
		if (r == 0)
			r = pbuf_append(out, esc, strlen(esc));
		run = s + 1;
	}
	if (r == 0)
		r = pbuf_append(out, run, (size_t)(s - run));
	return r ? r : pbuf_append(out, "\"", 1);
}

int mset_json(const struct mset *s, const char *host, struct pbuf *out)
{
	char key[MSET_LABELS_MAX + 100];
	size_t i;
	int r;

	r = put(out, "{\"ts_us\":%lld,\"host\":", (long long)s->ts_us);
	if (r == 0)
		r = put_json_str(out, host);
	if (r == 0)
		r = put(out, ",\"metrics\":{");
	for (i = 0; i < s->n && r == 0; i++) {
		mset_key(s, &s->v[i], key, sizeof(key));
		r = put(out, i ? "," : "");
		if (r == 0)
			r = put_json_str(out, key);
		if (r == 0)
			r = put(out, ":");
		if (r == 0)
			r = put_value(out, s->v[i].v);
	}
	return r ? r : put(out, "}}\n");
}
