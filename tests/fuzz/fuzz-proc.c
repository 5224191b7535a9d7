/*
 * Fuzz target: the daemon's /proc parsers. The first byte picks one, the
 * rest is the text:
 *   0-4  a host metrics file (mhost_parse: stat, meminfo, loadavg,
 *        net/dev, diskstats); interface and device names reach labels
 *   5    a process's environment (ident_read_environ): written by the
 *        traced user, so hostile
 *   6    a /proc/<pid>/stat line (peer_stat_ppid): the command name is
 *        the process's own choice
 *   7    a /proc/net/unix line (peer_unix_line_inode): abstract names are
 *        any local user's choice
 *   8    a /proc/net/tcp line (peer_tcp_line_uid)
 * Properties beyond "no crash, no leak, no UB": a parsed sample renders as
 * Prometheus text whose every sample line is well formed (name, escaped
 * labels, a number) and as a JSON line that parses; parsing is
 * deterministic; the environment's numbers are -1 or in [0, 2^24] and its
 * job id is one of its values; a parent pid is -1 or positive.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz.h"
#include "ident.h"
#include "jsoncheck.h"
#include "mhost.h"
#include "mset.h"
#include "peer.h"

/* One Prometheus sample line: name{label="value",...} number */
static int sample_line_ok(const char *p, const char *end)
{
	char num[64];
	size_t n;
	char *stop;

	if (p == end || !(isalpha((unsigned char)*p) || *p == '_' || *p == ':'))
		return 0;
	while (p < end && (isalnum((unsigned char)*p) || *p == '_' || *p == ':'))
		p++;
	if (p < end && *p == '{') {
		p++;
		while (p < end && *p != '}') {
			if (!(isalpha((unsigned char)*p) || *p == '_'))
				return 0;
			while (p < end && (isalnum((unsigned char)*p) || *p == '_'))
				p++;
			if (end - p < 2 || p[0] != '=' || p[1] != '"')
				return 0;
			for (p += 2; p < end && *p != '"'; p++) {
				if (*p == '\\') {
					if (++p == end || (*p != '\\' && *p != '"' && *p != 'n'))
						return 0;
				} else if (*p == '\n') {
					return 0;
				}
			}
			if (p == end)
				return 0;
			p++; /* the closing quote */
			if (p < end && *p == ',')
				p++;
		}
		if (p == end)
			return 0;
		p++;
	}
	if (p == end || *p++ != ' ')
		return 0;
	n = (size_t)(end - p);
	if (n == 0 || n >= sizeof(num))
		return 0;
	memcpy(num, p, n);
	num[n] = '\0';
	if (strcmp(num, "+Inf") == 0 || strcmp(num, "-Inf") == 0 || strcmp(num, "NaN") == 0)
		return 1;
	(void)strtod(num, &stop);
	return *stop == '\0';
}

static void check_host(enum mhost_file f, const char *text, size_t len)
{
	struct mset a, b;
	struct pbuf pa, pb, j;
	struct perr err;
	const char *p, *end, *nl;
	cJSON *json;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	mhost_parse(f, text, len, &a);
	mhost_parse(f, text, len, &b);
	pbuf_init(&pa, 0);
	pbuf_init(&pb, 0);
	pbuf_init(&j, 0);
	FUZZ_CHECK(mset_prometheus(&a, &pa) == 0);
	FUZZ_CHECK(mset_prometheus(&b, &pb) == 0);
	FUZZ_CHECK(pa.len == pb.len && (pa.len == 0 || memcmp(pa.data, pb.data, pa.len) == 0));
	for (p = (const char *)pa.data, end = p + pa.len; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		FUZZ_CHECK(nl != NULL); /* every line ends */
		if (*p != '#')
			FUZZ_CHECK(sample_line_ok(p, nl));
	}
	FUZZ_CHECK(mset_json(&a, "host", &j) == 0);
	FUZZ_CHECK(j.len > 0 && j.data[j.len - 1] == '\n');
	FUZZ_CHECK(jsoncheck_text((const char *)j.data, j.len - 1, 64, &err) == 0);
	FUZZ_CHECK((json = cJSON_ParseWithLength((const char *)j.data, j.len - 1)) != NULL);
	cJSON_Delete(json);
	pbuf_deinit(&pa);
	pbuf_deinit(&pb);
	pbuf_deinit(&j);
	mset_free(&a);
	mset_free(&b);
}

static int in_env(const char *v, const char *env, size_t len)
{
	size_t n = strlen(v), i;

	for (i = 0; i + n <= len; i++)
		if (memcmp(env + i, v, n) == 0 && (i + n == len || env[i + n] == '\0') && i > 0 &&
		    env[i - 1] == '=')
			return 1;
	return 0;
}

static void check_env(const char *env, size_t len)
{
	struct ident a, b;

	memset(&a, 0xff, sizeof(a)); /* job_id must come back terminated */
	ident_read_environ(&a, env, len);
	ident_read_environ(&b, env, len);
	FUZZ_CHECK(strcmp(a.job_id, b.job_id) == 0 && a.rank == b.rank &&
	           a.local_rank == b.local_rank && a.world_size == b.world_size);
	FUZZ_CHECK(a.rank == -1 || (a.rank >= 0 && a.rank <= 16777216));
	FUZZ_CHECK(a.local_rank == -1 || (a.local_rank >= 0 && a.local_rank <= 16777216));
	FUZZ_CHECK(a.world_size == -1 || (a.world_size >= 0 && a.world_size <= 16777216));
	FUZZ_CHECK(a.job_id[0] == '\0' || in_env(a.job_id, env, len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	size_t len;
	uid_t uid = 7;

	if (size == 0)
		return 0;
	len = size - 1;
	if ((text = malloc(len + 1)) == NULL)
		return 0;
	memcpy(text, data + 1, len);
	text[len] = '\0'; /* as mhost's reader and fgets leave it */
	switch (data[0] % 9) {
	case 0: case 1: case 2: case 3: case 4:
		check_host((enum mhost_file)(data[0] % 9), text, len);
		break;
	case 5:
		check_env(text, len);
		break;
	case 6: {
		int ppid = peer_stat_ppid(text);

		FUZZ_CHECK(ppid == -1 || ppid > 0);
		FUZZ_CHECK(ppid == peer_stat_ppid(text));
		break;
	}
	case 7: {
		unsigned long inode = peer_unix_line_inode(text, "dynolog");

		FUZZ_CHECK(inode == 0 || strstr(text, "@dynolog@") != NULL);
		break;
	}
	case 8:
		if (peer_tcp_line_uid(text, "0100007F", 40000, "0100007F", 1778, &uid))
			FUZZ_CHECK(strcasestr(text, "0100007F:") != NULL);
		else
			FUZZ_CHECK(uid == 7); /* untouched when not that socket */
		break;
	}
	free(text);
	return 0;
}
