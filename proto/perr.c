/* perr: see perr.h. */
#include <stdarg.h>
#include <stdio.h>

#include "perr.h"

int perr_set(struct perr *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}
