/*
 * textout: the one place gprofctl report's text is made safe for a
 * terminal. Names in a trace (kernels, ranges, operators, frames, file
 * names) are whatever its writer put there, and printed raw they can set
 * the window title, clear the screen or recolour it (ESC sequences, C1
 * controls). The text report is written through a stream from
 * textout_open, which passes printable ASCII, newlines and well-formed
 * UTF-8 of printable characters, and writes every other byte visibly as
 * \xHH: control characters (but the newline), DEL, C1 controls (U+0080 to
 * U+009F) and bytes that are not UTF-8. So no call site has to remember.
 * The newline passes, since the report's own lines need it: a name with one
 * can start a line of its own, but cannot change the terminal.
 *
 * Ownership: textout_close flushes, frees the stream and leaves the
 * underlying one open. Bytes escaped are counted in textout_escaped.
 */
#ifndef GPROFCTL_TEXTOUT_H
#define GPROFCTL_TEXTOUT_H

#include <stdint.h>
#include <stdio.h>

extern uint64_t textout_escaped;

/* A stream writing to `to`, escaped; NULL when out of memory. */
FILE *textout_open(FILE *to);
/* 0, or EOF when a write failed. */
int textout_close(FILE *f);

#endif
