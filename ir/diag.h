/* The diagnostic sink threaded through one compilation: a status plus a
 * message; the first error wins and callers return at once. The public API
 * copies it into the thread-local tj_last_error(). */
#ifndef TJ_IR_DIAG_H
#define TJ_IR_DIAG_H

#include <stdbool.h>
#include "../include/tensorjit.h"

typedef struct Diag {
  tj_status status;      /* TJ_OK until the first error */
  char msg[1024];
} Diag;

void diag_init(Diag *d);
bool diag_ok(const Diag *d);
/* Records an error unless one is already recorded; returns false so callers
 * can write `return diag_error(d, ...)`. */
bool diag_error(Diag *d, tj_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records an error at 1-based column col of the one-line source src, and
 * appends the source line and a caret under the column. */
bool diag_error_at(Diag *d, tj_status st, const char *src, int col,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* An internal invariant failed: records TJ_ERR_INTERNAL with file:line. */
bool diag_bug(Diag *d, const char *file, int line, const char *what);
#define TJ_BUG(d, what) diag_bug((d), __FILE__, __LINE__, (what))

#endif
