/*
 * mset.h: one metrics sample (a set of labelled values taken at one time)
 * and the one table of metric families, with the two text forms it is
 * exported in: Prometheus exposition and a JSON line.
 *
 * Every family is declared once, in mset.c's table (name, type, help), in
 * base units (STYLE and the Prometheus naming rules: _bytes, _seconds,
 * _watts, _celsius, _hertz, _ratio; _total on counters). Samplers add
 * values by family id with a preformatted label list.
 *
 * Memory: a value is 24 bytes; its label list lives in the set's text arena
 * (NUL-terminated, at most MSET_LABELS_MAX bytes). A set keeps its buffers
 * across mset_reset. The history keeps samples in another form (mhist.h):
 * an mset is the working form of one sample, not the stored one.
 *
 * Ownership: an mset owns its value array and text; mset_free releases them.
 *
 * Floor: a leaf under metrics.c, mhost.c and mgpu.c, its callers.
 */
#ifndef GPROFD_MSET_H
#define GPROFD_MSET_H

#include <stddef.h>
#include <stdint.h>

#include "pbuf.h"

enum mfam {
	/* host */
	MF_CPU_SECONDS, MF_MEM_TOTAL, MF_MEM_AVAILABLE, MF_MEM_USED, MF_MEM_CACHED, MF_MEM_BUFFERS,
	MF_SWAP_TOTAL, MF_SWAP_USED, MF_LOAD1, MF_LOAD5, MF_LOAD15,
	MF_NET_RX_BYTES, MF_NET_RX_PACKETS, MF_NET_RX_ERRORS, MF_NET_RX_DROPS,
	MF_NET_TX_BYTES, MF_NET_TX_PACKETS, MF_NET_TX_ERRORS, MF_NET_TX_DROPS,
	MF_DISK_READS, MF_DISK_READ_BYTES, MF_DISK_WRITES, MF_DISK_WRITTEN_BYTES, MF_DISK_IO_SECONDS,
	/* GPU (NVML) */
	MF_NVML_UP, MF_GPUS, MF_GPU_INFO, MF_GPU_UTIL, MF_GPU_MEM_UTIL, MF_GPU_MEM_USED, MF_GPU_MEM_TOTAL,
	MF_GPU_POWER, MF_GPU_ENERGY, MF_GPU_TEMP, MF_GPU_SM_CLOCK, MF_GPU_MEM_CLOCK,
	MF_GPU_CLOCK_EVENTS, MF_GPU_XID, MF_GPU_ECC, MF_GPU_REMAPPED, MF_GPU_PROC_MEM,
	MF_GPU_PCIE_TX, MF_GPU_PCIE_RX, MF_GPU_NVLINK_TX, MF_GPU_NVLINK_RX,
	MF_GPM_SM_ACTIVE, MF_GPM_SM_OCCUPANCY, MF_GPM_TENSOR, MF_GPM_DRAM, MF_GPM_FP16, MF_GPM_FP32,
	MF_GPM_FP64,
	/* traced processes (agents' heartbeats) */
	MF_PROC_STEPS, MF_PROC_LAST_STEP, MF_PROC_MEDIAN_STEP,
	/* the daemon's parts, build, traces and store (component.c) */
	MF_COMPONENT_UP, MF_COMPONENT_DEGRADED, MF_BUILD_INFO, MF_TRACES_TOTAL, MF_STORE_TRACES,
	MF_STORE_BYTES, MF_STORE_FREE_BYTES,
	/* what client connections hold (conn.h) */
	MF_CONN_BYTES, MF_CONN_BYTES_PEAK, MF_CONN_MEMORY_LIMITED,
	/* the daemon itself */
	MF_SAMPLE_SECONDS, MF_SAMPLE_CPU_SECONDS, MF_SAMPLE_SKIPPED, MF_SELF_CPU_SECONDS, MF_SELF_RSS,
	MF_HTTP_EVICTED, MF_SAMPLES_TOTAL, MF_HTTP_RENDERS, MF_HTTP_BODY_BYTES, MF_HTTP_CONNS,
	MF_HISTORY_SAMPLES, MF_HISTORY_BYTES,
	MF_COUNT
};

#define MSET_LABELS_MAX 255
/* Room for one escaped label value a client chose (a job id, a host name),
 * its NUL included. 58 bytes each keep the longest process series' key,
 * gprofd_process_median_step_seconds{job=..,rank=..,pid=..,host=..}, within
 * metrics_reply's 200-byte names (196), so gprofctl metrics shows every
 * series /metrics does; the label list itself stays far below
 * MSET_LABELS_MAX. */
#define MSET_VALUE_MAX 59

struct mval {
	uint16_t fam;
	uint16_t lab_len;  /* 0: no labels */
	uint32_t lab_off;  /* in the set's text: name="value",...; escaped */
	double v;
	int64_t owner; /* uid whose process this value describes, -1: the host's */
};

struct mset {
	struct mval *v;
	size_t n, cap;
	char *text;
	size_t text_len, text_cap;
	int64_t ts_us; /* when the sample was taken (CLOCK_REALTIME) */
};

const char *mset_family_name(int fam);

/* Adds one value (owner -1); labels is a printf format for the label list
 * (or NULL for none). Returns it, or NULL when dropped (not finite, beyond
 * 100,000 values per sample, or a label list longer than MSET_LABELS_MAX:
 * cutting it could end it inside an escape and break the whole exposition,
 * so it is left out instead). */
struct mval *mset_add(struct mset *s, int fam, double v, const char *labels, ...)
	__attribute__((format(printf, 4, 5)));
/* The same with a label list that needs no formatting (or NULL). */
struct mval *mset_add_labels(struct mset *s, int fam, double v, const char *labels);
/* A value's label list ("" for none). */
const char *mset_labels(const struct mset *s, const struct mval *m);
/* Empties s, keeping its buffers. */
void mset_reset(struct mset *s);
/* Makes dst a copy of src, reusing dst's buffers. 0 or -ENOMEM (dst empty). */
int mset_copy(struct mset *dst, const struct mset *src);
/* Escapes a label value for the exposition format (\\, \", \n) into buf
 * and returns buf. The only place a value is shortened: a value that does
 * not fit in size - 1 bytes is cut at a whole character of the raw value,
 * never inside an escape or a UTF-8 sequence, so the result is always a
 * complete escaped string. A caller bounds each client-chosen value with a
 * buf of MSET_VALUE_MAX, so its whole label list fits MSET_LABELS_MAX and
 * is never cut again (issue 23, item 10). */
const char *mset_label(char *buf, size_t size, const char *value);
void mset_free(struct mset *s);

/* Appends the Prometheus text exposition: # HELP and # TYPE once for each
 * family that has values, then its values. 0 or -ENOMEM/-ENOBUFS. */
int mset_prometheus(const struct mset *s, struct pbuf *out);
/* Appends one JSON line: {"ts_us":..,"host":..,"metrics":{"name{labels}":v,..}}\n */
int mset_json(const struct mset *s, const char *host, struct pbuf *out);
/* The key a value has in the JSON line and in metrics_reply: name{labels}. */
void mset_key(const struct mset *s, const struct mval *m, char *buf, size_t size);

#endif
