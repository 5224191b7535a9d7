/*
 * fmt: see fmt.h. Depends on nothing of gprofctl's, so the fuzz targets
 * link it as they link the report.
 */
#include <time.h>

#include "fmt.h"

void fmt_bytes(uint64_t b, char *out, size_t size)
{
	if (b < 10000)
		snprintf(out, size, "%llu B", (unsigned long long)b);
	else if (b < 10000000)
		snprintf(out, size, "%.1f kB", (double)b / 1e3);
	else if (b < 10000000000ull)
		snprintf(out, size, "%.1f MB", (double)b / 1e6);
	else
		snprintf(out, size, "%.1f GB", (double)b / 1e9);
}

void fmt_duration(int64_t s, char *out, size_t size)
{
	if (s < 120)
		snprintf(out, size, "%llds", (long long)s);
	else if (s < 7200)
		snprintf(out, size, "%lldm", (long long)(s / 60));
	else if (s < 172800)
		snprintf(out, size, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
	else
		snprintf(out, size, "%lldd", (long long)(s / 86400));
}

void fmt_time(int64_t us, char *out, size_t size)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;

	if (us <= 0 || localtime_r(&t, &tm) == NULL)
		snprintf(out, size, "-");
	else
		strftime(out, size, "%Y-%m-%d %H:%M:%S", &tm);
}

void fmt_html_esc(FILE *f, const char *s)
{
	for (; *s; s++)
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
}
