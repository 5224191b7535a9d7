/* log: see log.h. One write(2) per line, so concurrent lines never mix. */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

int log_level = LOG_INFO;

void log_init(int level)
{
	log_level = level;
}

void log_write(int prio, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "<%d>", prio);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)n);
}
