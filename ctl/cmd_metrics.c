/*
 * gprofctl metrics [--watch] [--json]: the latest metrics of every host
 * given, as one table: per host CPU and memory use, per GPU utilisation,
 * memory, power, temperature and SM clock, and per traced process its
 * iterations and step times (from the agents' heartbeats). --watch
 * redraws it every sampling interval until interrupted; --json prints the
 * samples as the daemons sent them.
 *
 * Each round asks every daemon for the last few seconds of samples
 * (metrics_query, history 3 s), so CPU use is a rate over the last
 * interval, computed here from the two newest samples.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "jsonint.h"
#include "ctl.h"

struct mrow {
	bool ok;
	int64_t interval_ms;
	cJSON *samples; /* [{ts_us, values:{key: v}}], oldest first (owned) */
};

static void ready(struct host *h)
{
	struct msg m;

	msg_init(&m, MSG_METRICS_QUERY, 0);
	m.u.metrics_query.history_s = 3;
	host_send(h, &m);
}

static void message(struct host *h, const struct msg *m)
{
	struct mrow *r = h->ud;
	size_t i, j;

	if (m->type == MSG_ERROR) {
		host_fail(h, "%s", m->u.error.message);
		return;
	}
	if (m->type != MSG_METRICS_REPLY)
		return;
	r->ok = true;
	r->interval_ms = m->u.metrics_reply.interval_ms;
	r->samples = cJSON_CreateArray();
	for (i = 0; i < m->u.metrics_reply.samples.n; i++) {
		const struct msg_sample *s = &m->u.metrics_reply.samples.v[i];
		cJSON *o = cJSON_CreateObject(), *v = cJSON_AddObjectToObject(o, "values");

		jsonint_add(o, "ts_us", s->ts_us);
		for (j = 0; j < s->values.n; j++)
			cJSON_AddNumberToObject(v, s->values.names[j], s->values.values[j]);
		cJSON_AddItemToArray(r->samples, o);
	}
	host_done(h);
}

static void failed(struct host *h, const char *why)
{
	(void)h;
	(void)why;
}

/* The value of name{labels} in a sample, or NAN. */
static double val(const cJSON *sample, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(sample, "values"), key);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Copies the value of label `name` out of a key's {..} part. */
static bool label(const char *key, const char *name, char *out, size_t size)
{
	char pat[64];
	const char *p, *e;

	snprintf(pat, sizeof(pat), "%s=\"", name);
	if ((p = strstr(key, pat)) == NULL)
		return false;
	p += strlen(pat);
	if ((e = strchr(p, '"')) == NULL)
		return false;
	snprintf(out, size, "%.*s", (int)(e - p), p);
	return true;
}

/* CPU busy fraction between the two newest samples. */
static double cpu_busy(const cJSON *samples)
{
	int n = cJSON_GetArraySize(samples);
	static const char *const modes[] = { "user", "nice", "system", "idle", "iowait", "irq",
	                                     "softirq", "steal" };
	double tot = 0, idle = 0;
	size_t i;

	if (n < 2)
		return NAN;
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char key[96];
		double a, b;

		snprintf(key, sizeof(key), "gprofd_cpu_seconds_total{cpu=\"all\",mode=\"%s\"}", modes[i]);
		a = val(cJSON_GetArrayItem(samples, n - 2), key);
		b = val(cJSON_GetArrayItem(samples, n - 1), key);
		if (isnan(a) || isnan(b))
			continue;
		tot += b - a;
		if (i == 3 || i == 4)
			idle += b - a;
	}
	return tot > 0 ? 1 - idle / tot : NAN;
}

static void print_host(const char *host, const struct mrow *r)
{
	const cJSON *last = cJSON_GetArrayItem(r->samples, cJSON_GetArraySize(r->samples) - 1);
	const cJSON *v, *values = cJSON_GetObjectItem(last, "values");
	double busy = cpu_busy(r->samples), mt = val(last, "gprofd_memory_total_bytes"),
	       mu = val(last, "gprofd_memory_used_bytes");
	int gpus = 0;

	if (isnan(busy)) /* one sample, or counters that did not move */
		printf("%-20s CPU      -  memory %.1f/%.1f GiB", host, mu / 1073741824.0,
		       mt / 1073741824.0);
	else
		printf("%-20s CPU %5.1f%%  memory %.1f/%.1f GiB", host, busy * 100,
		       mu / 1073741824.0, mt / 1073741824.0);
	if (val(last, "gprofd_nvml_up") != 1)
		printf("  (no GPU metrics: NVML off)");
	printf("\n");
	cJSON_ArrayForEach(v, values) {
		char gpu[16], uuid[96], key[300];

		if (strncmp(v->string, "gprofd_gpu_info{", 16) != 0 || !label(v->string, "gpu", gpu,
		    sizeof(gpu)) || !label(v->string, "uuid", uuid, sizeof(uuid)))
			continue;
		if (gpus++ == 0)
			printf("  %-4s %6s %6s %18s %8s %6s %9s\n", "GPU", "UTIL", "SM ACT", "MEMORY",
			       "POWER", "TEMP", "SM CLOCK");
#define G(name) (snprintf(key, sizeof(key), name "{gpu=\"%s\",uuid=\"%s\"}", gpu, uuid), \
                 val(last, key))
		{
			double act = G("gprofd_gpu_sm_active_ratio");
			char a[16];

			if (isnan(act)) /* GPM: Hopper and newer */
				snprintf(a, sizeof(a), "-");
			else
				snprintf(a, sizeof(a), "%.0f%%", act * 100);
			printf("  %-4s %5.0f%% %6s", gpu, G("gprofd_gpu_utilization_ratio") * 100, a);
		}
		printf(" %7.1f/%5.1f GiB %6.0f W %4.0f C %5.0f MHz\n",
		       G("gprofd_gpu_memory_used_bytes") / 1073741824.0,
		       G("gprofd_gpu_memory_total_bytes") / 1073741824.0, G("gprofd_gpu_power_watts"),
		       G("gprofd_gpu_temperature_celsius"), G("gprofd_gpu_sm_clock_hertz") / 1e6);
#undef G
	}
	gpus = 0;
	cJSON_ArrayForEach(v, values) {
		char job[128], rank[16], pid[16], key[300], tail[200];

		if (strncmp(v->string, "gprofd_process_steps_total{", 27) != 0 ||
		    !label(v->string, "job", job, sizeof(job)) ||
		    !label(v->string, "rank", rank, sizeof(rank)) ||
		    !label(v->string, "pid", pid, sizeof(pid)))
			continue;
		if (gpus++ == 0)
			printf("  %-16s %5s %8s %10s %12s %12s\n", "JOB", "RANK", "PID", "STEPS",
			       "LAST STEP", "MEDIAN STEP");
		snprintf(tail, sizeof(tail), "%s", strchr(v->string, '{'));
		snprintf(key, sizeof(key), "gprofd_process_last_step_seconds%s", tail);
		printf("  %-16s %5s %8s %10.0f %9.2f ms", job, rank, pid, v->valuedouble,
		       val(last, key) * 1e3);
		snprintf(key, sizeof(key), "gprofd_process_median_step_seconds%s", tail);
		printf(" %9.2f ms\n", val(last, key) * 1e3);
	}
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int one_round(struct opts *o, bool watch, bool clear, int64_t *interval_ms)
{
	static const struct client_ops ops = { ready, message, NULL, failed, NULL };
	struct client cl;
	struct mrow *rows;
	size_t i, ok = 0;
	int code;

	if (client_init(&cl, o, &ops) < 0)
		return EXIT_USAGE;
	rows = calloc(cl.n, sizeof(*rows));
	for (i = 0; i < cl.n; i++)
		cl.hosts[i].ud = &rows[i];
	client_run(&cl);
	for (i = 0; i < cl.n; i++)
		ok += rows[i].ok;
	code = ok == cl.n ? EXIT_OK : ok == 0 ? EXIT_USAGE : EXIT_FAILED;
	if (clear)
		printf("\033[H\033[2J");
	if (o->json) {
		cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "hosts");
		char *text;

		for (i = 0; i < cl.n; i++) {
			cJSON *h = cJSON_CreateObject();

			cJSON_AddStringToObject(h, "host", cl.hosts[i].label);
			if (rows[i].ok) {
				jsonint_add(h, "interval_ms", rows[i].interval_ms);
				cJSON_AddItemToObject(h, "samples", rows[i].samples);
				rows[i].samples = NULL; /* transferred */
			} else {
				cJSON_AddStringToObject(h, "error", cl.hosts[i].error);
			}
			cJSON_AddItemToArray(arr, h);
		}
		jsonint_add(root, "exit", code);
		text = watch ? cJSON_PrintUnformatted(root) : cJSON_Print(root);
		printf("%s\n", text);
		cJSON_free(text);
		cJSON_Delete(root);
	} else {
		for (i = 0; i < cl.n; i++) {
			if (!rows[i].ok || cJSON_GetArraySize(rows[i].samples) == 0)
				printf("%-20s %s\n", cl.hosts[i].label, cl.hosts[i].error[0] ?
				       cl.hosts[i].error : "no sample");
			else
				print_host(cl.hosts[i].label, &rows[i]);
		}
	}
	fflush(stdout);
	for (i = 0; i < cl.n; i++) {
		if (rows[i].ok && rows[i].interval_ms > 0)
			*interval_ms = rows[i].interval_ms;
		cJSON_Delete(rows[i].samples);
	}
	free(rows);
	client_deinit(&cl);
	return code;
}

int cmd_metrics(struct opts *o, int argc, char **argv)
{
	static const struct option mopts[] = {
		{ "watch", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool watch = false;
	int64_t interval_ms = 1000;
	int c, code;

	while ((c = getopt_long(argc, argv, "+h", mopts, NULL)) != -1) {
		if (c == 'w') {
			watch = true;
		} else if (c == 'j') {
			o->json = true;
		} else if (c == 'h') {
			printf("usage: gprofctl [GLOBAL OPTIONS] metrics [--watch] [--json]\n"
			       "Prints the latest metrics of every host: CPU and memory use, per GPU\n"
			       "utilisation, memory, power, temperature and SM clock, and per traced\n"
			       "process its iterations and step times. --watch redraws every sampling\n"
			       "interval until Ctrl-C; --json prints the samples as sent (one line per\n"
			       "round with --watch).\n");
			return EXIT_OK;
		} else {
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gprofctl metrics: unexpected argument \"%s\"\n", argv[optind]);
		return EXIT_USAGE;
	}
	if (o->timeout_s == 0)
		o->timeout_s = 10;
	if (!watch)
		return one_round(o, false, false, &interval_ms);
	signal(SIGINT, on_sigint);
	do {
		struct timespec ts;

		code = one_round(o, true, !o->json && isatty(1), &interval_ms);
		ts.tv_sec = interval_ms / 1000;
		ts.tv_nsec = (interval_ms % 1000) * 1000000;
		if (!interrupted)
			nanosleep(&ts, NULL);
	} while (!interrupted);
	return code;
}
