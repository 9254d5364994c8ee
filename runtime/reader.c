/* Line reader over gzFile, plus the number scanners of the text formats.
 *
 * gzgets fills a growing buffer until a newline, so lines of any length
 * work. At the end of input gzerror tells a clean EOF from a truncated or
 * corrupt stream, which becomes a `file:line:` error, and a NUL byte in a
 * line is an error too (not a silent cut). The scanners take
 * one blank-separated token and reject trailing junk ("1.5x") and values
 * out of range, so parsers can name the bad token.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>

#include "reader.h"

struct RtReader {
  gzFile gz;
  char *path;
  int64_t line;
  char *buf;
  size_t cap;
  int pushed;
  int at_eof;
};

tj_status rd_open(const char *path, RtReader **out) {
  *out = NULL;
  struct stat sb;
  if (stat(path, &sb) != 0)
    return rt_set_error(TJ_ERR_IO, "%s: cannot open: %s", path,
                        strerror(errno));
  if (S_ISDIR(sb.st_mode))
    return rt_set_error(TJ_ERR_IO, "%s: is a directory, not a tensor file",
                        path);
  RtReader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path)) || !(r->buf = malloc(r->cap = 256))) {
    rd_close(r);
    return rt_set_error(TJ_ERR_NOMEM, "%s: out of memory", path);
  }
  errno = 0;
  r->gz = gzopen(path, "rb");
  if (!r->gz) {
    tj_status st = rt_set_error(TJ_ERR_IO, "%s: cannot open: %s", path,
                                errno ? strerror(errno) : "zlib error");
    rd_close(r);
    return st;
  }
  gzbuffer(r->gz, 1 << 17);
  *out = r;
  return TJ_OK;
}

void rd_close(RtReader *r) {
  if (!r) return;
  if (r->gz) gzclose(r->gz);
  free(r->path);
  free(r->buf);
  free(r);
}

/* After gzgets returned NULL: an error unless the stream ended cleanly. */
static tj_status check_stream(RtReader *r) {
  int err = Z_OK;
  const char *msg = gzerror(r->gz, &err);
  if (err == Z_OK || err == Z_STREAM_END) return TJ_OK;
  return rd_error(r, "%s (truncated or corrupt gzip data?)",
                  err == Z_BUF_ERROR ? "unexpected end of compressed data"
                                     : msg);
}

tj_status rd_line(RtReader *r, char **line) {
  *line = NULL;
  if (r->pushed) {
    r->pushed = 0;
    *line = r->buf;
    return TJ_OK;
  }
  if (r->at_eof) return TJ_OK;
  size_t len = 0;
  r->buf[0] = 0;
  for (;;) {
    if (r->cap - len < 2) {
      char *nb = realloc(r->buf, r->cap * 2);
      if (!nb) return rd_nomem(r);
      r->buf = nb, r->cap *= 2;
    }
    size_t room = r->cap - len > INT32_MAX ? INT32_MAX : r->cap - len;
    if (!gzgets(r->gz, r->buf + len, (int)room)) {
      tj_status st = check_stream(r);
      if (st != TJ_OK) return st;
      r->at_eof = 1;
      if (len == 0) return TJ_OK;
      break;
    }
    size_t k = strlen(r->buf + len);
    len += k;
    if (len > 0 && r->buf[len - 1] == '\n') break;
    /* gzgets stops at a newline, a full buffer or the end: short of all
     * three, the chunk held a NUL (and the line would be cut and joined
     * to the next one) */
    if (k + 1 < room && !gzeof(r->gz)) {
      r->line++;
      return rd_error(r, "NUL byte in the text (not a text file?)");
    }
  }
  r->line++;
  while (len > 0 && (r->buf[len - 1] == '\n' || r->buf[len - 1] == '\r'))
    r->buf[--len] = 0;
  if (r->at_eof) {
    tj_status st = check_stream(r);
    if (st != TJ_OK) return st;
  }
  *line = r->buf;
  return TJ_OK;
}

void rd_unread(RtReader *r) { r->pushed = 1; }

int64_t rd_lineno(const RtReader *r) { return r->line; }

const char *rd_path(const RtReader *r) { return r->path; }

tj_status rd_error(const RtReader *r, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return rt_set_error(TJ_ERR_IO, "%s:%lld: %s", r->path, (long long)r->line,
                      msg);
}

tj_status rd_nomem(const RtReader *r) {
  return rt_set_error(TJ_ERR_NOMEM, "%s:%lld: out of memory", r->path, (long long)r->line);
}

static const char *skip_blank(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\v' || *p == '\f')
    p++;
  return p;
}

static int ends_token(char c) { return c == 0 || isspace((unsigned char)c); }

int rd_int(const char **p, int64_t *out) {
  const char *s = skip_blank(*p);
  if (*s == 0) return RD_NONE;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || !ends_token(*end)) return RD_BAD;
  *p = end;
  if (errno == ERANGE) return RD_RANGE;
  *out = v;
  return RD_OK;
}

int rd_real(const char **p, double *out) {
  const char *s = skip_blank(*p);
  if (*s == 0) return RD_NONE;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || !ends_token(*end)) return RD_BAD;
  *p = end;
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL)) return RD_RANGE;
  *out = v;
  return RD_OK;
}

/* A decimal token of at most 20 digits at *p read as an unsigned 64-bit
 * integer: RD_OK, RD_RANGE past 2^64 - 1, else RD_BAD (a sign, a '.'). */
static int rd_u64(const char **p, uint64_t *out) {
  const char *s = skip_blank(*p);
  if (*s == '+') s++;
  if (!isdigit((unsigned char)*s)) return RD_BAD;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (!ends_token(*end)) return RD_BAD;
  if (errno == ERANGE) return RD_RANGE;
  *p = end;
  *out = v;
  return RD_OK;
}

int rd_value(const char **p, int dt, RtVal *out) {
  if (dt == TJ_U64) { /* above 2^63 too; a negative or real token saturates below */
    uint64_t u;
    const char *q = *p;
    if (rd_u64(&q, &u) == RD_OK) {
      *p = q;
      out->i = (int64_t)u;
      return RD_OK;
    }
  } else if (rt_dtype_is_int(dt)) {
    int64_t i;
    const char *q = *p;
    if (rd_int(&q, &i) == RD_OK) {
      *p = q;
      *out = rt_val_from_int(dt, i);
      return RD_OK;
    }
  }
  double v;
  int rc = rd_real(p, &v);
  if (rc == RD_OK) *out = rt_val_from_double(dt, v);
  return rc;
}

const char *rd_token(const char *p, char *buf, int n) {
  p = skip_blank(p);
  int k = 0;
  while (k < n - 1 && k < 40 && !ends_token(p[k])) buf[k] = p[k], k++;
  buf[k] = 0;
  return buf;
}

int rd_at_end(const char *p) { return *skip_blank(p) == 0; }
