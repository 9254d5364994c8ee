/* Errors and small parsers shared by the command line and the REPL.
 *
 * The tool keeps one current error message: a failing function records it
 * with tool_fail() and returns false, and the caller that reports to the
 * user prints tool_msg(). Numbers are parsed whole: "12x" or "" is an
 * error, never a silent 12 or 0.
 */
#include "tool.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

static char msg[1024];

bool tool_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return false;
}

bool tool_fail_lib(const char *what) {
  const char *e = tj_last_error();
  return tool_fail("%s: %s", what, e && *e ? e : "unknown error");
}

const char *tool_msg(void) { return msg; }

bool tool_parse_int(const char *s, int64_t min, int64_t *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || end == s || v < min) return false;
  *out = v;
  return true;
}

bool tool_parse_double(const char *s, double *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !isfinite(v)) return false;
  *out = v;
  return true;
}

double tool_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
