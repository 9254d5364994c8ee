/* FROSTT .tns reading (writing is io.c's write_entries).
 *
 * A .tns line holds 1-based coordinates and then a value; the first data
 * line fixes the order (fields - 1) and every later line must match it.
 * `#` comments and blank lines are skipped; dims are the largest
 * coordinate per mode. Entries go straight into the new tensor's COO
 * buffer, which pack sorts. An order-0 tensor is one line: its value.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "reader.h"

/* The COO list being read. */
typedef struct TnsData {
  int order;         /* -1 until the first data line */
  int dtype;         /* of the values */
  int64_t n, cap;
  int64_t *coords;
  RtVal *vals;
  int64_t dims[TJ_MAX_ORDER];
} TnsData;

static int count_fields(const char *p) {
  int n = 0;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (!*p) break;
    n++;
    while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
  }
  return n;
}

static tj_status grow(RtReader *r, TnsData *d) {
  int64_t cap = d->cap ? d->cap * 2 : 1024;
  int w = d->order ? d->order : 1;
  int64_t *c = realloc(d->coords, (size_t)(cap * w) * sizeof *c);
  if (c) d->coords = c;
  RtVal *v = c ? realloc(d->vals, (size_t)cap * sizeof *v) : NULL;
  if (!v) return rd_nomem(r);
  d->vals = v;
  d->cap = cap;
  return TJ_OK;
}

/* Parses one data line into d. */
static tj_status parse_entry(RtReader *r, const char *line, TnsData *d) {
  int nf = count_fields(line);
  if (d->order < 0) {
    if (nf - 1 > TJ_MAX_ORDER)
      return rd_error(r, "%d coordinates per line; at most %d modes are "
                      "supported", nf - 1, TJ_MAX_ORDER);
    d->order = nf - 1;
  } else if (nf != d->order + 1) {
    return rd_error(r, "expected %d fields (%d coordinates and a value) as "
                    "on the first data line, found %d", d->order + 1,
                    d->order, nf);
  }
  tj_status st = d->n == d->cap ? grow(r, d) : TJ_OK;
  if (st != TJ_OK) return st;
  const char *p = line;
  char tok[48];
  for (int m = 0; m < d->order; m++) {
    int64_t c;
    const char *at = p;
    int rc = rd_int(&p, &c);
    if (rc != RD_OK)
      return rd_error(r, "bad coordinate '%s' in mode %d",
                      rd_token(at, tok, sizeof tok), m);
    if (c < 1)
      return rd_error(r, "coordinate %" PRId64 " in mode %d is out of range "
                      "(coordinates are 1-based)", c, m);
    d->coords[d->n * d->order + m] = c - 1;
    if (c > d->dims[m]) d->dims[m] = c;
  }
  const char *at = p;
  int rc = rd_value(&p, d->dtype, &d->vals[d->n]);
  if (rc == RD_BAD || rc == RD_NONE)
    return rd_error(r, "bad value '%s' (not a number)",
                    rd_token(at, tok, sizeof tok));
  if (rc == RD_RANGE)
    return rd_error(r, "value '%s' is out of range",
                    rd_token(at, tok, sizeof tok));
  d->n++;
  return TJ_OK;
}

static bool is_skipped(const char *line) {
  while (*line == ' ' || *line == '\t' || *line == '\r') line++;
  return *line == 0 || *line == '#';
}

tj_status tns_read(RtReader *r, const char *name, const tj_format *fmt, tj_dtype dt,
                   tj_tensor **out) {
  TnsData d = {.order = -1, .dtype = dt};
  tj_status st = TJ_OK;
  for (;;) {
    char *line;
    if ((st = rd_line(r, &line)) != TJ_OK || !line) break;
    if (!is_skipped(line) && (st = parse_entry(r, line, &d)) != TJ_OK) break;
  }
  if (st == TJ_OK && d.order < 0)
    st = rd_error(r, "no entries (the order of a .tns file comes from its "
                  "first data line)");
  tj_tensor *t = NULL;
  if (st == TJ_OK) {
    tj_format f = fmt ? *fmt : rt_format_default(d.order);
    st = tj_tensor_new(name, dt, d.order, d.dims, &f, &t);
  }
  if (st == TJ_OK) {
    t->coo = (RtCoo){d.coords, d.vals, d.n, d.cap};
    d.coords = NULL, d.vals = NULL;
    st = tj_tensor_pack(t);
  }
  free(d.coords), free(d.vals);
  if (st != TJ_OK) {
    tj_tensor_free(t);
    return st;
  }
  *out = t;
  return TJ_OK;
}
