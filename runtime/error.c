/* The thread-local error message behind tj_last_error().
 *
 * Every failing runtime function records one message with rt_set_error and
 * returns the status it was given, so callers can `return rt_set_error(..)`.
 * The message buffer is per thread: two threads never see each other's
 * errors. */
#include <stdarg.h>
#include <stdio.h>

#include "tensor.h"

static _Thread_local char last_error[1024];

const char *tj_last_error(void) { return last_error; }

tj_status rt_set_error(tj_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return st;
}
