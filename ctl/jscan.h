/*
 * jscan: a streaming JSON scanner for gprofctl report (RFC 8259, the whole
 * grammar, strictly: no comments, no trailing commas, one top-level value).
 *
 * Why not yajl, which report used first: on a 1,000,000-event trace its
 * lexer took 64 % of the time and held report under 0.8 M events/s, where
 * issue 14 asks for 1 M. This scanner looks for the end of a string eight
 * bytes at a time and hands back the text of numbers unconverted; yajl is
 * its oracle: tests/fuzz/fuzz-jscan.c feeds both the same input, whole and
 * in pieces, and requires the same verdict and the same events.
 *
 * Data flow: the caller feeds pieces of any size (jscan_feed) and ends
 * with jscan_finish; each token is reported through the callbacks as it
 * completes: containers opened and closed, object keys, strings (escapes
 * decoded, UTF-8 not checked), numbers as their text, literals. A token
 * cut by the end of a piece is copied into the scanner's carry buffer and
 * completed from the next piece. A callback that returns 0 stops the scan
 * (jscan_error then says "stopped by the reader").
 *
 * Ownership: the scanner owns its carry buffer, decode buffer and
 * container stack; strings passed to callbacks live until the callback
 * returns. One scanner per document; not thread-safe.
 */
#ifndef GPROFCTL_JSCAN_H
#define GPROFCTL_JSCAN_H

#include <stddef.h>
#include <stdint.h>

enum jscan_literal { JSCAN_NULL, JSCAN_FALSE, JSCAN_TRUE };

struct jscan_cb {
	int (*start_map)(void *ctx);
	int (*end_map)(void *ctx);
	int (*start_array)(void *ctx);
	int (*end_array)(void *ctx);
	int (*key)(void *ctx, const char *s, size_t n);
	int (*string)(void *ctx, const char *s, size_t n);
	int (*number)(void *ctx, const char *s, size_t n);
	int (*literal)(void *ctx, enum jscan_literal which);
};

struct jscan;

/* Bytes of a carried token (one cut by the end of a piece) the tokenizer
 * reads again, in this process: what such a token costs beyond one read
 * (tests hold it linear). */
extern uint64_t jscan_carry_scanned;

struct jscan *jscan_new(const struct jscan_cb *cb, void *ctx);
void jscan_free(struct jscan *j);
/* 0, or -1 once the input is not JSON (or a callback stopped it); every
 * later call then returns -1 too. */
int jscan_feed(struct jscan *j, const char *buf, size_t n);
/* The end of the input: 0 when it held exactly one complete value. */
int jscan_finish(struct jscan *j);
/* After an error: what was wrong (NULL: no error), and the byte offset. */
const char *jscan_error(const struct jscan *j);
uint64_t jscan_error_offset(const struct jscan *j);
/* Whether the error was only that the input ended early. */
int jscan_truncated(const struct jscan *j);

#endif
