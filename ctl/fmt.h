/*
 * fmt: gprofctl's text for people, in one place, so every command writes a
 * size, a duration or a time the same way: "12.3 MB", "5m", "2026-11-29
 * 05:42:49". Also the one HTML escaper the report's page uses.
 *
 * Each function writes into the caller's buffer (always terminated, cut to
 * size) or to the caller's stream; none allocates or keeps anything.
 */
#ifndef GPROFCTL_FMT_H
#define GPROFCTL_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A byte count: "512 B", "12.3 kB", "4.5 MB", "1.2 GB" (powers of ten). */
void fmt_bytes(uint64_t b, char *out, size_t size);
/* A length of time in whole seconds, coarse: "59s", "12m", "5h07m", "3d". */
void fmt_duration(int64_t s, char *out, size_t size);
/* A wall-clock time (microseconds since the epoch) in local time,
 * "YYYY-MM-DD HH:MM:SS"; "-" when none (0 or less). */
void fmt_time(int64_t us, char *out, size_t size);
/* s escaped for HTML text and attribute values (& < > " '). */
void fmt_html_esc(FILE *f, const char *s);

#endif
