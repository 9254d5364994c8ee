/* First-error-wins diagnostics with caret lines for source positions. */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void diag_init(Diag *d) {
  d->status = TJ_OK;
  d->msg[0] = 0;
}

bool diag_ok(const Diag *d) { return d->status == TJ_OK; }

bool diag_error(Diag *d, tj_status st, const char *fmt, ...) {
  if (d->status != TJ_OK) return false;
  d->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  return false;
}

bool diag_error_at(Diag *d, tj_status st, const char *src, int col,
                   const char *fmt, ...) {
  if (d->status != TJ_OK) return false;
  d->status = st;
  int n = snprintf(d->msg, sizeof d->msg, "1:%d: ", col);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(d->msg + n, sizeof d->msg - (size_t)n, fmt, ap);
  va_end(ap);
  if (!src || n >= (int)sizeof d->msg - 8) return false;
  size_t len = strcspn(src, "\n");
  if (len > 200) return false; /* long sources: position only */
  n += snprintf(d->msg + n, sizeof d->msg - (size_t)n, "\n  %.*s\n  ",
                (int)len, src);
  for (int i = 1; i < col && n < (int)sizeof d->msg - 2; i++)
    d->msg[n++] = ' ';
  if (n < (int)sizeof d->msg - 2) {
    d->msg[n++] = '^';
    d->msg[n] = 0;
  }
  return false;
}

bool diag_bug(Diag *d, const char *file, int line, const char *what) {
  return diag_error(d, TJ_ERR_INTERNAL, "internal error at %s:%d: %s", file,
                    line, what);
}
