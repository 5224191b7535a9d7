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
 * against 65 us with open/read/close. The text is parsed from memory.
 */
enum { F_STAT, F_MEMINFO, F_LOADAVG, F_NETDEV, F_DISKSTATS, F_COUNT };
static const char *const rel_paths[F_COUNT] = { "proc/stat", "proc/meminfo", "proc/loadavg",
                                                "proc/net/dev", "proc/diskstats" };
static char cached_root[4096];
static int fds[F_COUNT] = { -1, -1, -1, -1, -1 };
static char text[256 * 1024];

static FILE *open_at(const char *root, int which)
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
			return NULL; /* tried again next cycle */
	}
	while (len < sizeof(text) - 1 &&
	       (n = pread(fds[which], text + len, sizeof(text) - 1 - len, (off_t)len)) > 0)
		len += (size_t)n;
	if (len == 0)
		return NULL;
	text[len] = '\0';
	return fmemopen(text, len, "r");
}

static void cpu(const char *root, struct mset *s, double hz)
{
	static const char *const modes[] = { "user", "nice", "system", "idle", "iowait", "irq",
	                                     "softirq", "steal" };
	char line[1024], name[32];
	FILE *f = open_at(root, F_STAT);

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v[8] = { 0 };
		int n, i;

		if (strncmp(line, "cpu", 3) != 0)
			continue;
		n = sscanf(line, "%31s %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0], &v[1],
		           &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
		if (n < 5)
			continue;
		for (i = 0; i < n - 1; i++)
			mset_add(s, MF_CPU_SECONDS, (double)v[i] / hz, "cpu=\"%s\",mode=\"%s\"",
			         name[3] ? name + 3 : "all", modes[i]);
	}
	fclose(f);
}

static void memory(const char *root, struct mset *s)
{
	char line[256], key[64];
	unsigned long long kb, total = 0, avail = 0, swap_total = 0, swap_free = 0;
	int have = 0;
	FILE *f = open_at(root, F_MEMINFO);

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63[^:]: %llu", key, &kb) != 2)
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
	fclose(f);
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

static void load(const char *root, struct mset *s)
{
	double l1, l5, l15;
	FILE *f = open_at(root, F_LOADAVG);

	if (f == NULL)
		return;
	if (fscanf(f, "%lf %lf %lf", &l1, &l5, &l15) == 3) {
		mset_add(s, MF_LOAD1, l1, NULL);
		mset_add(s, MF_LOAD5, l5, NULL);
		mset_add(s, MF_LOAD15, l15, NULL);
	}
	fclose(f);
}

static void net(const char *root, struct mset *s)
{
	static const int fams[8] = { MF_NET_RX_BYTES, MF_NET_RX_PACKETS, MF_NET_RX_ERRORS,
	                             MF_NET_RX_DROPS, MF_NET_TX_BYTES, MF_NET_TX_PACKETS,
	                             MF_NET_TX_ERRORS, MF_NET_TX_DROPS };
	char line[512], dev[64], esc[160];
	FILE *f = open_at(root, F_NETDEV);

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v[16];
		char *colon = strchr(line, ':');
		int i;

		if (colon == NULL)
			continue; /* the two header lines */
		*colon = ' ';
		if (sscanf(line, "%63s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
		           "%llu %llu %llu %llu", dev, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
		           &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &v[14], &v[15]) != 17)
			continue;
		mset_label(esc, sizeof(esc), dev);
		for (i = 0; i < 4; i++) {
			mset_add(s, fams[i], (double)v[i], "device=\"%s\"", esc);
			mset_add(s, fams[4 + i], (double)v[8 + i], "device=\"%s\"", esc);
		}
	}
	fclose(f);
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

static void disk(const char *root, struct mset *s)
{
	char line[512], dev[64], esc[160];
	FILE *f = open_at(root, F_DISKSTATS);

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v[11];
		unsigned maj, min;

		if (sscanf(line, "%u %u %63s %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		           &maj, &min, dev, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
		           &v[8], &v[9], &v[10]) != 14 || !whole_device(dev))
			continue;
		mset_label(esc, sizeof(esc), dev);
		mset_add(s, MF_DISK_READS, (double)v[0], "device=\"%s\"", esc);
		mset_add(s, MF_DISK_READ_BYTES, (double)v[2] * 512, "device=\"%s\"", esc);
		mset_add(s, MF_DISK_WRITES, (double)v[4], "device=\"%s\"", esc);
		mset_add(s, MF_DISK_WRITTEN_BYTES, (double)v[6] * 512, "device=\"%s\"", esc);
		mset_add(s, MF_DISK_IO_SECONDS, (double)v[9] / 1000, "device=\"%s\"", esc);
	}
	fclose(f);
}

void mhost_sample(const char *root, struct mset *s)
{
	long hz = sysconf(_SC_CLK_TCK);

	cpu(root, s, hz > 0 ? (double)hz : 100.0);
	memory(root, s);
	load(root, s);
	net(root, s);
	disk(root, s);
}
