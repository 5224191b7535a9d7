/*
 * mhost.c: host metrics from /proc, read under a configurable root
 * (sampling.proc_root) so tests run on fixture trees with known values.
 *
 *   <root>/proc/stat       CPU time by mode, all and per core (USER_HZ ticks)
 *   <root>/proc/meminfo    memory and swap (kB)
 *   <root>/proc/loadavg    load averages
 *   <root>/proc/net/dev    per interface bytes, packets, errors, drops
 *   <root>/proc/diskstats  per block device operations, bytes (512-byte
 *                          sectors), busy time (ms); loop and ram devices
 *                          and partitions are left out
 *
 * A missing or unreadable file leaves its metrics out of the sample; a
 * malformed line is skipped. Runs on one worker thread at a time (metrics.c
 * never has two cycles in flight): the open files below are its state.
 */
#include <ctype.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mhost.h"

/*
 * The files stay open between cycles (one open per file per root, not per
 * second) and are read again from offset 0 with pread, which makes the
 * kernel generate them afresh: on the dev VM that is 25 us for all five
 * against 65 us with open/read/close. The text is parsed in place.
 */
#define F_COUNT MHOST_FILES
static const char *const rel_paths[F_COUNT] = { "proc/stat", "proc/meminfo", "proc/loadavg",
                                                "proc/net/dev", "proc/diskstats" };
static char cached_root[4096];
static int fds[F_COUNT] = { -1, -1, -1, -1, -1 };
static char text[256 * 1024];

/* Reads the file afresh into text (NUL-terminated); its length, or 0. */
static size_t read_at(const char *root, int which)
{
	char path[4096 + 32];
	size_t len = 0;
	ssize_t n;
	int i;

	if (strcmp(root, cached_root) != 0) { /* another tree (tests): start over */
		for (i = 0; i < F_COUNT; i++) {
			if (fds[i] >= 0)
				close(fds[i]);
			fds[i] = -1;
		}
		snprintf(cached_root, sizeof(cached_root), "%s", root);
	}
	if (fds[which] < 0) {
		snprintf(path, sizeof(path), "%s%s%s", root,
		         root[0] && root[strlen(root) - 1] == '/' ? "" : "/", rel_paths[which]);
		fds[which] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[which] < 0)
			return 0; /* tried again next cycle */
	}
	while (len < sizeof(text) - 1 &&
	       (n = pread(fds[which], text + len, sizeof(text) - 1 - len, (off_t)len)) > 0)
		len += (size_t)n;
	text[len] = '\0';
	return len;
}

/*
 * A cursor over the text, line by line and field by field: parsing with
 * stdio (fmemopen, fgets, sscanf) cost several times the reading itself
 * once a second, cold.
 */
struct cur {
	const char *p, *end;
};

/* The next line as a cursor of its own; false at the end. */
static bool next_line(struct cur *c, struct cur *line)
{
	const char *nl;

	if (c->p >= c->end)
		return false;
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	line->p = c->p;
	line->end = nl ? nl : c->end;
	c->p = nl ? nl + 1 : c->end;
	return true;
}

static void skip_blank(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

/* The next field, up to a blank or stop (stop is consumed); false if
 * empty or longer than size - 1. */
static bool word(struct cur *c, char *buf, size_t size, char stop)
{
	size_t n = 0;

	skip_blank(c);
	while (c->p < c->end && *c->p != ' ' && *c->p != '\t' && *c->p != stop) {
		if (n + 1 >= size)
			return false;
		buf[n++] = *c->p++;
	}
	buf[n] = '\0';
	if (c->p < c->end && *c->p == stop)
		c->p++;
	return n > 0;
}

static bool u64(struct cur *c, unsigned long long *v)
{
	unsigned long long x = 0;
	const char *start;

	skip_blank(c);
	start = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
		x = x * 10 + (unsigned long long)(*c->p++ - '0');
	*v = x;
	return c->p > start;
}

/* Up to n numbers into v; how many were read. */
static int u64s(struct cur *c, unsigned long long *v, int n)
{
	int i;

	for (i = 0; i < n && u64(c, &v[i]); i++)
		;
	return i;
}

/* name="value" pairs built by copying, not formatting (a few hundred a
 * cycle on a large host). */
static size_t put(char *buf, size_t o, size_t size, const char *s)
{
	size_t n = strlen(s);

	if (o + n >= size)
		n = o < size ? size - 1 - o : 0;
	memcpy(buf + o, s, n);
	buf[o + n] = '\0';
	return o + n;
}

static void cpu(struct cur c, struct mset *s, double hz)
{
	static const char *const modes[] = { "user", "nice", "system", "idle", "iowait", "irq",
	                                     "softirq", "steal" };
	struct cur l;
	char name[32], esc[100], lab[160];

	while (next_line(&c, &l)) {
		unsigned long long v[8];
		size_t o;
		int n, i;

		if (l.end - l.p < 4 || memcmp(l.p, "cpu", 3) != 0 || !word(&l, name, sizeof(name), 0))
			continue;
		if ((n = u64s(&l, v, 8)) < 4)
			continue;
		o = put(lab, 0, sizeof(lab), "cpu=\"");
		o = put(lab, o, sizeof(lab), name[3] ? mset_label(esc, sizeof(esc), name + 3) : "all");
		o = put(lab, o, sizeof(lab), "\",mode=\"");
		for (i = 0; i < n; i++) {
			put(lab, put(lab, o, sizeof(lab), modes[i]), sizeof(lab), "\"");
			mset_add_labels(s, MF_CPU_SECONDS, (double)v[i] / hz, lab);
		}
	}
}

static void memory(struct cur c, struct mset *s)
{
	struct cur l;
	unsigned long long kb, total = 0, avail = 0, swap_total = 0, swap_free = 0;
	char key[64];
	int have = 0;

	while (next_line(&c, &l)) {
		if (!word(&l, key, sizeof(key), ':') || !u64(&l, &kb))
			continue;
		if (strcmp(key, "MemTotal") == 0) {
			total = kb;
			have |= 1;
		} else if (strcmp(key, "MemAvailable") == 0) {
			avail = kb;
			have |= 2;
		} else if (strcmp(key, "Cached") == 0) {
			mset_add(s, MF_MEM_CACHED, (double)kb * 1024, NULL);
		} else if (strcmp(key, "Buffers") == 0) {
			mset_add(s, MF_MEM_BUFFERS, (double)kb * 1024, NULL);
		} else if (strcmp(key, "SwapTotal") == 0) {
			swap_total = kb;
			have |= 4;
		} else if (strcmp(key, "SwapFree") == 0) {
			swap_free = kb;
			have |= 8;
		}
	}
	if (have & 1)
		mset_add(s, MF_MEM_TOTAL, (double)total * 1024, NULL);
	if (have & 2)
		mset_add(s, MF_MEM_AVAILABLE, (double)avail * 1024, NULL);
	if ((have & 3) == 3)
		mset_add(s, MF_MEM_USED, (double)(total > avail ? total - avail : 0) * 1024, NULL);
	if (have & 4)
		mset_add(s, MF_SWAP_TOTAL, (double)swap_total * 1024, NULL);
	if ((have & 12) == 12)
		mset_add(s, MF_SWAP_USED,
		         (double)(swap_total > swap_free ? swap_total - swap_free : 0) * 1024, NULL);
}

static void load(struct cur c, struct mset *s)
{
	double l1, l5, l15;
	char *p, *q;

	if (c.p == c.end)
		return;
	l1 = strtod(c.p, &p);
	l5 = strtod(p, &q);
	l15 = strtod(q, &p);
	if (p == q)
		return;
	mset_add(s, MF_LOAD1, l1, NULL);
	mset_add(s, MF_LOAD5, l5, NULL);
	mset_add(s, MF_LOAD15, l15, NULL);
}

static void device_label(char *lab, size_t size, const char *dev)
{
	char esc[160];

	put(lab, put(lab, put(lab, 0, size, "device=\""), size, mset_label(esc, sizeof(esc), dev)),
	    size, "\"");
}

static void net(struct cur c, struct mset *s)
{
	static const int fams[8] = { MF_NET_RX_BYTES, MF_NET_RX_PACKETS, MF_NET_RX_ERRORS,
	                             MF_NET_RX_DROPS, MF_NET_TX_BYTES, MF_NET_TX_PACKETS,
	                             MF_NET_TX_ERRORS, MF_NET_TX_DROPS };
	struct cur l;
	char dev[64], lab[200];

	while (next_line(&c, &l)) {
		unsigned long long v[16];
		int i;

		if (memchr(l.p, ':', (size_t)(l.end - l.p)) == NULL)
			continue; /* the two header lines */
		if (!word(&l, dev, sizeof(dev), ':') || u64s(&l, v, 16) != 16)
			continue;
		device_label(lab, sizeof(lab), dev);
		for (i = 0; i < 4; i++) {
			mset_add_labels(s, fams[i], (double)v[i], lab);
			mset_add_labels(s, fams[4 + i], (double)v[8 + i], lab);
		}
	}
}

/* Whole devices only: sda but not sda1, nvme0n1 but not nvme0n1p1. */
static int whole_device(const char *d)
{
	size_t n = strlen(d);

	if (strncmp(d, "loop", 4) == 0 || strncmp(d, "ram", 3) == 0 || n == 0)
		return 0;
	if (strncmp(d, "nvme", 4) == 0 || strncmp(d, "mmcblk", 6) == 0)
		return strchr(d + 4, 'p') == NULL;
	return !isdigit((unsigned char)d[n - 1]) || strncmp(d, "md", 2) == 0 ||
	       strncmp(d, "dm-", 3) == 0;
}

static void disk(struct cur c, struct mset *s)
{
	struct cur l;
	char dev[64], lab[200];

	while (next_line(&c, &l)) {
		unsigned long long majmin[2], v[11];

		if (u64s(&l, majmin, 2) != 2 || !word(&l, dev, sizeof(dev), 0) ||
		    u64s(&l, v, 11) != 11 || !whole_device(dev))
			continue;
		device_label(lab, sizeof(lab), dev);
		mset_add_labels(s, MF_DISK_READS, (double)v[0], lab);
		mset_add_labels(s, MF_DISK_READ_BYTES, (double)v[2] * 512, lab);
		mset_add_labels(s, MF_DISK_WRITES, (double)v[4], lab);
		mset_add_labels(s, MF_DISK_WRITTEN_BYTES, (double)v[6] * 512, lab);
		mset_add_labels(s, MF_DISK_IO_SECONDS, (double)v[9] / 1000, lab);
	}
}

void mhost_parse(enum mhost_file f, const char *t, size_t len, struct mset *s)
{
	static double hz;
	struct cur c = { t, t + len };

	if (hz == 0) {
		long tck = sysconf(_SC_CLK_TCK);

		hz = tck > 0 ? (double)tck : 100.0;
	}
	switch (f) {
	case MHOST_STAT:
		cpu(c, s, hz);
		break;
	case MHOST_MEMINFO:
		memory(c, s);
		break;
	case MHOST_LOADAVG:
		load(c, s);
		break;
	case MHOST_NETDEV:
		net(c, s);
		break;
	case MHOST_DISKSTATS:
		disk(c, s);
		break;
	default:
		break;
	}
}

void mhost_sample(const char *root, struct mset *s)
{
	int f;

	for (f = 0; f < MHOST_FILES; f++)
		mhost_parse((enum mhost_file)f, text, read_at(root, f), s);
}
