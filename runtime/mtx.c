/* Matrix Market (.mtx) reading (writing is io.c's write_entries).
 *
 * Reads `coordinate` and `array` objects with real, integer or pattern
 * fields (pattern entries are 1) and general, symmetric or skew-symmetric
 * storage, expanded on read: an off-diagonal (i,j,v) also stores (j,i,v),
 * or (j,i,-v) when skew; the diagonal is never duplicated. Explicit zeros
 * stay stored entries.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <zlib.h>

#include "reader.h"

typedef enum { SYM_GENERAL, SYM_SYMMETRIC, SYM_SKEW } Symmetry;

typedef struct Header {
  bool is_array, is_pattern;
  Symmetry sym;
  int64_t rows, cols, nnz;
} Header;

static tj_status banner_error(RtReader *r) {
  return rd_error(r, "bad Matrix Market banner (expected '%%%%MatrixMarket "
                  "matrix coordinate|array real|integer|pattern "
                  "general|symmetric|skew-symmetric')");
}

static tj_status parse_banner(RtReader *r, Header *h) {
  char *line, w[5][48];
  tj_status st = rd_line(r, &line);
  if (st != TJ_OK) return st;
  if (!line) return rt_set_error(TJ_ERR_IO, "%s:1: empty file", rd_path(r));
  if (sscanf(line, "%47s %47s %47s %47s %47s", w[0], w[1], w[2], w[3],
             w[4]) != 5 || strcasecmp(w[0], "%%MatrixMarket") != 0 ||
      strcasecmp(w[1], "matrix") != 0)
    return banner_error(r);
  if (!strcasecmp(w[2], "array")) h->is_array = true;
  else if (strcasecmp(w[2], "coordinate")) return banner_error(r);
  if (!strcasecmp(w[3], "pattern")) h->is_pattern = true;
  else if (!strcasecmp(w[3], "complex"))
    return rd_error(r, "complex Matrix Market files are not supported");
  else if (strcasecmp(w[3], "real") && strcasecmp(w[3], "integer") &&
           strcasecmp(w[3], "double"))
    return banner_error(r);
  if (!strcasecmp(w[4], "symmetric")) h->sym = SYM_SYMMETRIC;
  else if (!strcasecmp(w[4], "skew-symmetric")) h->sym = SYM_SKEW;
  else if (!strcasecmp(w[4], "hermitian"))
    return rd_error(r, "hermitian Matrix Market files are not supported");
  else if (strcasecmp(w[4], "general")) return banner_error(r);
  if (h->is_array && h->is_pattern)
    return rd_error(r, "an array Matrix Market file cannot be 'pattern'");
  return TJ_OK;
}

/* Next line that is neither blank nor a % comment (NULL at the end). */
static tj_status data_line(RtReader *r, char **line) {
  for (;;) {
    tj_status st = rd_line(r, line);
    if (st != TJ_OK || !*line) return st;
    if (!rd_at_end(*line) && **line != '%') return TJ_OK;
  }
}

static tj_status scan_size(RtReader *r, const char **p, const char *what,
                           int64_t *out) {
  char tok[48];
  const char *at = *p;
  int rc = rd_int(p, out);
  if (rc == RD_NONE)
    return rd_error(r, "size line ends before the %s", what);
  if (rc == RD_BAD)
    return rd_error(r, "bad %s '%s' in the size line", what,
                    rd_token(at, tok, sizeof tok));
  if (rc == RD_RANGE)
    return rd_error(r, "%s '%s' overflows 64 bits", what,
                    rd_token(at, tok, sizeof tok));
  if (*out < 0) return rd_error(r, "negative %s %" PRId64, what, *out);
  return TJ_OK;
}

static tj_status parse_size(RtReader *r, Header *h) {
  char *line;
  tj_status st = data_line(r, &line);
  if (st != TJ_OK) return st;
  if (!line) return rd_error(r, "missing size line");
  const char *p = line;
  if ((st = scan_size(r, &p, "row count", &h->rows)) ||
      (st = scan_size(r, &p, "column count", &h->cols)))
    return st;
  if (h->is_array) {
    if (h->cols > 0 && h->rows > INT64_MAX / h->cols)
      return rd_error(r, "array of %" PRId64 " x %" PRId64 " overflows 64 "
                      "bits", h->rows, h->cols);
    h->nnz = h->rows * h->cols;
    /* a triangle of a square array (not square: refused below); r (r + 1)
     * / 2 with the even factor halved first, never past r * r */
    int64_t n = h->rows;
    if (h->sym != SYM_GENERAL && h->rows == h->cols) {
      int64_t half_up = n % 2 ? n * ((n + 1) / 2) : n / 2 * (n + 1);
      h->nnz = h->sym == SYM_SYMMETRIC ? half_up : half_up - n;
    }
  } else if ((st = scan_size(r, &p, "entry count", &h->nnz))) {
    return st;
  }
  if (!rd_at_end(p)) return rd_error(r, "unexpected text after the size line");
  /* the mirror of an entry of a non-square one would lie outside it */
  if (h->sym != SYM_GENERAL && h->rows != h->cols)
    return rd_error(r, "a %s matrix must be square, not %" PRId64 " x %" PRId64,
                    h->sym == SYM_SKEW ? "skew-symmetric" : "symmetric", h->rows, h->cols);
  return TJ_OK;
}

static tj_status scan_index(RtReader *r, const char **p, const char *what,
                            int64_t n, int64_t *out) {
  char tok[48];
  const char *at = *p;
  int rc = rd_int(p, out);
  if (rc == RD_NONE) return rd_error(r, "entry has no %s index", what);
  if (rc != RD_OK)
    return rd_error(r, "bad %s index '%s'", what, rd_token(at, tok, sizeof tok));
  if (*out < 1 || *out > n)
    return rd_error(r, "%s %" PRId64 " is out of range 1..%" PRId64, what,
                    *out, n);
  (*out)--;
  return TJ_OK;
}

static tj_status scan_value(RtReader *r, const char **p, int dt, RtVal *v) {
  char tok[48];
  const char *at = *p;
  int rc = rd_value(p, dt, v);
  if (rc == RD_NONE) return rd_error(r, "entry has no value");
  if (rc == RD_BAD)
    return rd_error(r, "bad value '%s' (not a number)",
                    rd_token(at, tok, sizeof tok));
  if (rc == RD_RANGE)
    return rd_error(r, "value '%s' is out of range",
                    rd_token(at, tok, sizeof tok));
  return TJ_OK;
}

/* Stores (i,j,v) and, for symmetric storage, its mirror. */
static tj_status add_entry(tj_tensor *t, const Header *h, int64_t i,
                           int64_t j, RtVal v) {
  int64_t c[2] = {i, j};
  tj_status st = rt_coo_push_val(t, c, v);
  if (st != TJ_OK || h->sym == SYM_GENERAL || i == j) return st;
  c[0] = j, c[1] = i;
  return rt_coo_push_val(t, c, h->sym == SYM_SKEW ? rt_val_neg(t->st.dtype, v) : v);
}

/* How a reader names the items it counts, in its messages:
 * "file ends after K of the N <all>", "more <noun> than the N <source>". */
typedef struct Counted {
  const char *all, *noun, *source;
} Counted;

/* The data line of item k (0-based) of the n the header promised, in *line;
 * *line is NULL when the file ends right after the n-th item. A file that
 * ends sooner, or has a line after the n-th item, is an error. */
static tj_status item_line(RtReader *r, int64_t k, int64_t n, const Counted *c,
                           char **line) {
  tj_status st = data_line(r, line);
  if (st != TJ_OK) return st;
  if (!*line && k < n)
    return rd_error(r, "file ends after %" PRId64 " of the %" PRId64 " %s", k,
                    n, c->all);
  if (*line && k == n)
    return rd_error(r, "more %s than the %" PRId64 " %s", c->noun, n,
                    c->source);
  return TJ_OK;
}

/* Reads the entries of a coordinate file. */
static tj_status read_coordinate(RtReader *r, const Header *h, tj_tensor *t) {
  static const Counted entries = {"entries declared in the header", "entries",
                                  "declared in the header"};
  for (int64_t k = 0;; k++) {
    char *line;
    tj_status st = item_line(r, k, h->nnz, &entries, &line);
    if (st != TJ_OK || !line) return st;
    const char *p = line;
    int64_t i, j;
    RtVal v = rt_val_from_int(t->st.dtype, 1);
    if ((st = scan_index(r, &p, "row", h->rows, &i)) ||
        (st = scan_index(r, &p, "column", h->cols, &j)) ||
        (!h->is_pattern && (st = scan_value(r, &p, t->st.dtype, &v))))
      return st;
    if (!rd_at_end(p)) return rd_error(r, "unexpected text after the entry");
    if ((st = add_entry(t, h, i, j, v))) return st;
  }
}

/* Reads the column-major values of an array file (lower triangle only
 * when symmetric, strictly lower when skew). */
static tj_status read_array(RtReader *r, const Header *h, tj_tensor *t) {
  int64_t i = 0, j = 0, k = 0;
  if (h->sym == SYM_SKEW) i = 1;
  static const Counted values = {"array values", "values",
                                 "the size line implies"};
  for (;;) {
    char *line;
    tj_status st = item_line(r, k, h->nnz, &values, &line);
    if (st != TJ_OK || !line) return st;
    const char *p = line;
    RtVal v;
    if ((st = scan_value(r, &p, t->st.dtype, &v))) return st;
    if (!rd_at_end(p)) return rd_error(r, "unexpected text after the value");
    if ((st = add_entry(t, h, i, j, v))) return st;
    k++;
    if (++i == h->rows) {
      j++;
      i = h->sym == SYM_GENERAL ? 0 : h->sym == SYM_SYMMETRIC ? j : j + 1;
    }
  }
}

tj_status mtx_read(RtReader *r, const char *name, const tj_format *fmt, tj_dtype dt,
                   tj_tensor **out) {
  Header h = {0};
  tj_status st = parse_banner(r, &h);
  if (st == TJ_OK) st = parse_size(r, &h);
  if (st != TJ_OK) return st;
  /* Refused before reading a line: a coordinate entry costs its COO
   * record (two int64 coordinates and a value) and its packed crd and
   * value; a symmetric one may be stored twice. */
  double entries = (double)h.nnz * (h.sym == SYM_GENERAL ? 1 : 2);
  char what[1200];
  snprintf(what, sizeof what, "%s: the %.0f %s its header declares", rd_path(r), entries,
           h.is_array ? "values" : "entries");
  if ((st = rt_check_fits(what, entries * (h.is_array ? 8 : 36)))) return st;
  tj_format f = fmt ? *fmt : rt_format_default(2);
  tj_tensor *t;
  int64_t dims[2] = {h.rows, h.cols};
  if ((st = tj_tensor_new(name, dt, 2, dims, &f, &t))) return st;
  int64_t want = h.sym == SYM_GENERAL ? h.nnz : 2 * (h.nnz < INT64_MAX / 2 ? h.nnz : 0);
  /* Room for the declared entries, up to 2^20: a header may promise more
   * than the file holds, and growth doubles from there. */
  if (want > (1 << 20)) want = 1 << 20;
  if (want > 0) {
    t->coo.coords = malloc((size_t)want * (size_t)t->fmt.order * sizeof(int64_t));   /* levels */
    t->coo.vals = malloc((size_t)want * sizeof *t->coo.vals);
    t->coo.cap = t->coo.coords && t->coo.vals ? want : 0;
  }
  st = h.is_array ? read_array(r, &h, t) : read_coordinate(r, &h, t);
  if (st == TJ_OK) st = tj_tensor_pack(t);
  if (st != TJ_OK) {
    tj_tensor_free(t);
    return st;
  }
  *out = t;
  return TJ_OK;
}
