/* SELL-C-sigma copies of CSR matrices, and the SpMV that runs over them
 * (a schedule's method(sell), like MKL's mkl_sparse_optimize).
 *
 * A CSR SpMV loop leaves each row after its last entry: on short rows
 * (cage11: 3-31 entries) that exit and the per-row reduction cost as much
 * as the multiply-adds. SELL-C cuts the rows into slices of C = 8, pads
 * each slice to its longest row and stores the slice column-major: entry
 * k of every row of a slice sits together, so one 8-lane gather of x and
 * one FMA serve 8 rows, with no per-row exit. Sigma: where padding would
 * add more than a tenth to the entries, rows are sorted by length (longest
 * first) within windows of RT_SELL_SIGMA rows (or 16x, or all rows, when
 * the smaller window pads more than that), so that rows of like length
 * share slices; y is then written through the permutation.
 *
 *   slice s: rows perm[8s .. 8s+7], width w_s = max len; entry k of lane r
 *            at col/val[off[s] + 8k + r]; lanes past len[8s+r] are padding
 *            (column 0, value 0; their x never reaches a sum: the portable
 *            loop skips them, the AVX-512 one masks its FMA, the AVX2 one
 *            zeroes their x before its FMA, so x's inf/NaN stay out)
 *
 * The copy pays on short rows only (rt_sell_pays): from about 32 entries
 * a row (4 gathers) the CSR loop's exit and reduction are amortized, and
 * the copy, sorted rows (x read from 256 rows' columns at once) and its
 * padding cost more than they save. Timed against the CSR loops on
 * 600k-entry banded matrices of rows of L +- L/4 (thread CPU, medians of
 * 101 paired runs, real-time priority): CSR / SELL 1.56, 1.23, 1.25, 1.15,
 * 0.98, 1.04, 0.94 for L = 8, 16, 24, 32, 48, 64, 96 with the copy as
 * warm as the CSR arrays; 1.17, 1.27, 1.13, 0.92, 0.78, 0.77, 0.79 with the
 * CSR arrays just read by another loop (the copy colder, as in tjbench's
 * rounds; a second run had 0.82 at L = 24 and 28 there: the cold case
 * varies with what else the machine's L3 holds).
 *
 * Where the copy stands in a cache matters more than its layout: cage11
 * (39k rows, 3-31 entries, 4.7% padding, rows kept in order) with the
 * kernel before the narrow columns, prefetch and masked FMA ran 1.13-1.3x
 * the CSR loops' speed with both warm, 0.98x with both evicted, and 0.6x
 * with the copy evicted and the CSR arrays in L3 (the state tjbench's
 * rounds leave it in: every other row there reads the CSR arrays). Those
 * three cut the copy's bytes and its waits on DRAM: in one process, paired
 * thread-CPU medians, SELL over the CSR loops went from 1.13 to 1.27
 * (warm) and 0.98 to 1.21 (both evicted).
 *
 * Where x passes 4 MB the copy is a chain of column panels, each a SELL
 * copy of the entries in 2 MB of x's columns, run one after another with y
 * added to after the first: a panel's gathers then hit L2 instead of L3
 * (panel_cols; u1M).
 *
 * The copy is the tensor's (tj_tensor.sell), built at the first run that
 * asks for it and dropped by rt_tensor_touch whenever the library changes
 * the tensor (pack, tj_tensor_arrays, a kernel writing it,
 * tj_tensor_changed); a run also rebuilds it when the tensor's arrays or
 * their lengths are not those it was built from.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tensor.h"

#define C RT_SELL_C

struct RtSell {
  int refs;         /* the tensor's reference, and one per run reading it
                       (rt_sell_get / rt_sell_release), under build_lock */
  int32_t dtype;
  int64_t rows, cols, nslices, nnz, padded;
  int64_t clo, chi; /* the column panel it holds: entries with clo <= column < chi */
  struct RtSell *next;   /* the next column panel, or NULL (see panel_cols) */
  int64_t *off;     /* nslices + 1 entry offsets (multiples of C) */
  int32_t *len;     /* nslices * C row lengths, 0 past the last row */
  int32_t *perm;    /* slot -> row (nslices * C, -1 past the last row); NULL: identity */
  int32_t *col;     /* padded entries' columns (padding: 0); NULL when narrow */
  uint16_t *col16;  /* narrow: each column less its slice's base (padding: 0) */
  int32_t *base;    /* narrow: nslices first columns (the slice's least) */
  void *val;        /* padded entries' values, dtype (padding: 0) */
  /* what it was built from: a run compares them (O(1)) */
  const void *src_pos, *src_crd, *src_vals;
  int64_t src_pos_len, src_crd_len, src_vals_len;
};

void rt_sell_free(RtSell *s) {
  if (!s) return;
  rt_sell_free(s->next);
  free(s->off);
  free(s->len);
  free(s->perm);
  free(s->col);
  free(s->col16);
  free(s->base);
  free(s->val);
  free(s);
}

static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

/* Drops one reference to s (build_lock held); the last frees it. */
static void unref(RtSell *s) {
  if (s && --s->refs == 0) rt_sell_free(s);
}

/* The copy leaves the tensor at once; a run still reading it keeps it
 * until rt_sell_release (tj_tensor_arrays in one thread while a kernel
 * over the tensor runs in another freed the copy under the kernel). */
void rt_tensor_touch(tj_tensor *t) {
  if (!t) return;
  pthread_mutex_lock(&build_lock);
  RtSell *s = t->sell;
  t->sell = NULL;
  unref(s);
  pthread_mutex_unlock(&build_lock);
}

void rt_sell_release(const RtSell *s) {
  pthread_mutex_lock(&build_lock);
  unref((RtSell *)s);
  pthread_mutex_unlock(&build_lock);
}

bool rt_sell_form(const tj_storage *a) {
  return a->order == 2 && a->levels[0].kind == TJ_LVL_DENSE &&
         a->levels[1].kind == TJ_LVL_COMPRESSED && a->map[0].dim == 0 && a->map[1].dim == 1 &&
         (a->dtype == TJ_F64 || a->dtype == TJ_F32) && a->dims[0] <= INT32_MAX &&
         a->dims[1] <= INT32_MAX && a->levels[1].pos && a->levels[1].pos_len == a->dims[0] + 1;
}

/* On AVX2 + FMA (Zen 2) the copy paid at every mean row length timed,
 * where the AVX-512 loop stops paying at 32: thread CPU medians of 41,
 * the CSR loops over SELL, 64 MB written between runs: cage11 (14 a row)
 * 1.73, bcsstk33 (68) 1.38, banded rows of L +- L/4 at L = 64: 1.18-1.37
 * and L = 128: 1.28-1.39 (x lane by lane costs no more per entry than the
 * CSR loop's 4-wide gathers, and the copy has no per-row exit). */
double rt_sell_max_mean(tj_dtype dt) {
  const char *env = getenv("TJ_SELL_MAX_MEAN");
  if (env && *env) return atof(env);
  /* f32 runs the portable loop on every host: the AVX2 bound is f64's
   * (review: a banded f32 matrix of 64 a row ran 1.20-1.26x slower through
   * the copy than through the CSR loops) */
  return dt == TJ_F64 && !strcmp(rt_sell_isa(), "avx2") ? RT_SELL_MAX_MEAN_AVX2
                                                       : RT_SELL_MAX_MEAN;
}

bool rt_sell_pays(const tj_storage *a) {
  int64_t rows = a->dims[0], nnz = rt_idx(a->levels[1].pos, a->pos_width, rows);
  return (double)nnz < rt_sell_max_mean((tj_dtype)a->dtype) * (double)rows;
}

static bool built_from(const RtSell *s, const tj_storage *a) {
  return s->src_pos == a->levels[1].pos && s->src_crd == a->levels[1].crd &&
         s->src_vals == a->vals && s->src_pos_len == a->levels[1].pos_len &&
         s->src_crd_len == a->levels[1].crd_len && s->src_vals_len == a->vals_len &&
         s->dtype == a->dtype && s->rows == a->dims[0];
}

/* Whether column c lies in s's panel. */
static bool in_panel(const RtSell *s, int64_t c) { return c >= s->clo && c < s->chi; }

/* Entries after padding rows [0, n) in slices of C in the order of
 * slot (NULL: identity). */
static int64_t padded_size(const int32_t *rowlen, const int32_t *slot, int64_t n) {
  int64_t total = 0;
  for (int64_t s = 0; s * C < n; s++) {
    int32_t w = 0;
    for (int64_t r = s * C; r < n && r < (s + 1) * C; r++) {
      int32_t l = rowlen[slot ? slot[r] : r];
      if (l > w) w = l;
    }
    total += (int64_t)w * C;
  }
  return total;
}

static const int32_t *sort_len;   /* qsort's key, under sort_lock */
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int longer_first(const void *a, const void *b) {
  int32_t ra = *(const int32_t *)a, rb = *(const int32_t *)b;
  int32_t la = sort_len[ra], lb = sort_len[rb];
  return la != lb ? (la < lb) - (la > lb) : (ra > rb) - (ra < rb);   /* stable: by row */
}

/* perm: rows 0..n-1 (then -1s) sorted by length, longest first, within
 * windows of sigma rows. */
static void sort_windows(int32_t *perm, int64_t slots, const int32_t *rowlen, int64_t n,
                         int64_t sigma) {
  for (int64_t r = 0; r < slots; r++) perm[r] = r < n ? (int32_t)r : -1;
  pthread_mutex_lock(&sort_lock);
  sort_len = rowlen;
  for (int64_t w = 0; w < n; w += sigma) {
    int64_t m = n - w < sigma ? n - w : sigma;
    qsort(perm + w, (size_t)m, sizeof *perm, longer_first);
  }
  pthread_mutex_unlock(&sort_lock);
}

/* The row order of the copy: none (NULL: row order) when padding adds at
 * most a tenth to the entries; else sorted within the smallest window
 * (RT_SELL_SIGMA, 16 x that, all rows) that brings it there, or the one
 * padding least. Small windows keep a slice's rows near each other (their
 * x reads share cache lines). false: out of memory. */
static bool choose_order(RtSell *s, const int32_t *rowlen, int64_t n) {
  int64_t slots = s->nslices * C, best = padded_size(rowlen, NULL, n), enough = s->nnz + s->nnz / 10;
  if (best <= enough) return true;
  int32_t *perm = malloc((size_t)(slots ? slots : 1) * sizeof *perm);
  if (!perm) return false;
  int64_t best_sigma = 0;
  for (int64_t sigma = RT_SELL_SIGMA; best > enough; sigma *= 16) {
    if (sigma > n) sigma = n;
    sort_windows(perm, slots, rowlen, n, sigma);
    int64_t p = padded_size(rowlen, perm, n);
    if (p < best) best = p, best_sigma = sigma;
    if (sigma == n) break;
  }
  if (best_sigma) sort_windows(perm, slots, rowlen, n, best_sigma);
  if (best_sigma) s->perm = perm;
  else free(perm);
  return true;
}

/* Narrow columns: when every slice's columns lie within 65536 of its
 * least, the copy keeps 16-bit offsets from that least (base) instead of
 * 32-bit columns: 10 bytes an f64 entry instead of 12, and the copy is
 * read once a run, often from DRAM (cage11, copy evicted: -3 to -6% time;
 * any matrix of at most 65536 columns qualifies). Sets *narrow and, when
 * it is, s->base (each slice's least column); false: out of memory. */
static bool choose_narrow(RtSell *s, const tj_storage *a, bool *narrow) {
  const tj_level_storage *lv = &a->levels[1];
  *narrow = false;
  s->base = malloc((size_t)(s->nslices ? s->nslices : 1) * sizeof *s->base);
  if (!s->base) return false;
  bool fits = true;
  for (int64_t sl = 0; sl < s->nslices && fits; sl++) {
    int64_t lo = INT64_MAX, hi = -1;
    for (int r = 0; r < C; r++) {
      int64_t slot = sl * C + r, row = s->perm ? s->perm[slot] : slot;
      if (row < 0 || row >= s->rows) continue;
      int64_t p0 = rt_idx(lv->pos, a->pos_width, row), p1 = rt_idx(lv->pos, a->pos_width, row + 1);
      for (int64_t q = p0; q < p1; q++) {
        int64_t c = rt_idx(lv->crd, a->crd_width, q);
        if (!in_panel(s, c)) continue;
        if (c < lo) lo = c;
        if (c > hi) hi = c;
      }
    }
    s->base[sl] = hi < 0 ? 0 : (int32_t)lo;
    if (hi >= 0 && hi - lo > UINT16_MAX) fits = false;
  }
  *narrow = fits;
  if (!fits) free(s->base), s->base = NULL;
  return true;
}

/* Lays out the entries of a (CSR, rt_sell_form) into s, whose rows,
 * nslices, off, len, perm and (narrow) base are set. */
static void fill(RtSell *s, const tj_storage *a) {
  const tj_level_storage *lv = &a->levels[1];
  int vw = rt_dtype_size(a->dtype);
  for (int64_t sl = 0; sl < s->nslices; sl++)
    for (int r = 0; r < C; r++) {
      int64_t slot = sl * C + r;
      int64_t row = s->perm ? s->perm[slot] : slot;
      if (row < 0 || row >= s->rows) continue;
      int64_t p0 = rt_idx(lv->pos, a->pos_width, row), p1 = rt_idx(lv->pos, a->pos_width, row + 1);
      int32_t k = 0;
      for (int64_t q = p0; q < p1; q++) {
        int64_t c = rt_idx(lv->crd, a->crd_width, q);
        if (!in_panel(s, c)) continue;
        int64_t at = s->off[sl] + (int64_t)k++ * C + r;
        if (s->col16) s->col16[at] = (uint16_t)(c - s->base[sl]);
        else s->col[at] = (int32_t)c;
        memcpy((char *)s->val + at * vw, (const char *)a->vals + q * vw, (size_t)vw);
      }
    }
}

/* Row r's entries in s's panel. */
static int64_t panel_len(const RtSell *s, const tj_storage *a, int64_t r) {
  const tj_level_storage *lv = &a->levels[1];
  int64_t p0 = rt_idx(lv->pos, a->pos_width, r), p1 = rt_idx(lv->pos, a->pos_width, r + 1);
  if (s->clo == 0 && s->chi >= s->cols) return p1 - p0;
  int64_t l = 0;
  for (int64_t q = p0; q < p1; q++) l += in_panel(s, rt_idx(lv->crd, a->crd_width, q));
  return l;
}

/* A SELL copy of a's entries in columns [clo, chi) into *out; on failure
 * *out is NULL and the error recorded. */
static tj_status build_panel(const tj_storage *a, const char *name, int64_t clo, int64_t chi,
                             RtSell **out) {
  const tj_level_storage *lv = &a->levels[1];
  int64_t n = a->dims[0];
  *out = NULL;
  RtSell *s = calloc(1, sizeof *s);
  int32_t *rowlen = malloc((size_t)(n ? n : 1) * sizeof *rowlen);
  if (!s || !rowlen) goto nomem;
  s->dtype = a->dtype;
  s->rows = n;
  s->cols = a->dims[1];
  s->clo = clo, s->chi = chi;
  s->nslices = (n + C - 1) / C;
  s->nnz = 0;
  for (int64_t r = 0; r < n; r++) {
    int64_t l = panel_len(s, a, r);
    s->nnz += l;
    if (l > INT32_MAX) {
      free(rowlen);
      rt_sell_free(s);
      return rt_set_error(TJ_ERR_UNSUPPORTED, "method(sell): row %lld of %s has more than "
                          "2^31 entries", (long long)r, name);
    }
    rowlen[r] = (int32_t)l;
  }
  int64_t slots = s->nslices * C;
  if (!choose_order(s, rowlen, n)) goto nomem;
  s->off = malloc((size_t)(s->nslices + 1) * sizeof *s->off);
  s->len = calloc((size_t)(slots ? slots : 1), sizeof *s->len);
  if (!s->off || !s->len) goto nomem;
  s->off[0] = 0;
  for (int64_t sl = 0; sl < s->nslices; sl++) {
    int32_t w = 0;
    for (int r = 0; r < C; r++) {
      int64_t slot = sl * C + r;
      int64_t row = s->perm ? s->perm[slot] : slot;
      s->len[slot] = row >= 0 && row < n ? rowlen[row] : 0;
      if (s->len[slot] > w) w = s->len[slot];
    }
    s->off[sl + 1] = s->off[sl] + (int64_t)w * C;
  }
  s->padded = s->off[s->nslices];
  bool narrow;
  if (!choose_narrow(s, a, &narrow)) goto nomem;
  tj_status fits = rt_check_fits("a SELL copy", (double)s->padded * ((narrow ? 2.0 : 4.0) +
                                                                     rt_dtype_size(a->dtype)));
  if (fits != TJ_OK) {
    free(rowlen);
    rt_sell_free(s);
    return fits;
  }
  /* as the tensor's own arrays (rt_array_new): on a cache line, so each
   * step's 64-byte load of values is one line, not two (calloc put them 16
   * bytes past a page), and advised huge pages */
  if (narrow) s->col16 = rt_array_new(s->padded, sizeof *s->col16, true);
  else s->col = rt_array_new(s->padded, sizeof *s->col, true);
  s->val = rt_array_new(s->padded, (size_t)rt_dtype_size(a->dtype), true);
  if (!(s->col || s->col16) || !s->val) goto nomem;
  fill(s, a);
  s->src_pos = lv->pos, s->src_crd = lv->crd, s->src_vals = a->vals;
  s->src_pos_len = lv->pos_len, s->src_crd_len = lv->crd_len, s->src_vals_len = a->vals_len;
  free(rowlen);
  *out = s;
  return TJ_OK;
nomem:
  free(rowlen);
  rt_sell_free(s);
  return rt_set_error(TJ_ERR_NOMEM, "out of memory for the SELL copy of %s", name);
}

/* Columns a panel of the copy spans: all of x's (one panel) while x
 * takes at most PANEL_MIN_X bytes, else PANEL_X bytes of x. A gather of
 * u1M's x (1 M columns, 8 MB, random columns) misses the 2 MB L2 of the
 * Intel Xeon host and waits on L3: the whole copy ran no faster than
 * MKL's ESB loop (paired in one process, 15-21 rounds, MKL / SELL
 * 0.91-1.08). In panels of 2 MB of x, the copy read panel by panel (y
 * added to after the first), x's panel stays in L2 and the same loop ran
 * 1.89x MKL's speed (1.67-2.17), though row-ordered panels padded 1.64x.
 * TJ_SELL_PANEL_X sets PANEL_X (bytes; tests make small panels). */
#define PANEL_MIN_X (4 << 20)
#define PANEL_X (2 << 20)
static int64_t panel_cols(const tj_storage *a) {
  int64_t cols = a->dims[1], xb = cols * rt_dtype_size(a->dtype), px = PANEL_X;
  const char *env = getenv("TJ_SELL_PANEL_X");
  if (env && *env) px = atoll(env);
  else if (xb <= PANEL_MIN_X) return cols > 0 ? cols : 1;
  int64_t w = px / rt_dtype_size(a->dtype);
  return w < 1 ? 1 : w < cols ? w : cols > 0 ? cols : 1;
}

/* A SELL copy of a into *out: a chain of column panels (panel_cols); on
 * failure *out is NULL and the error recorded. */
static tj_status build(const tj_storage *a, const char *name, RtSell **out) {
  int64_t w = panel_cols(a), cols = a->dims[1];
  RtSell *head = NULL, **tail = &head;
  *out = NULL;
  for (int64_t clo = 0; clo < cols || clo == 0; clo += w) {
    tj_status st = build_panel(a, name, clo, clo + w < cols ? clo + w : cols, tail);
    if (st != TJ_OK) {
      rt_sell_free(head);
      return st;
    }
    tail = &(*tail)->next;
  }
  *out = head;
  return TJ_OK;
}


tj_status rt_sell_get(tj_tensor *t, const RtSell **out) {
  *out = NULL;
  const tj_storage *a = &t->st;
  if (!rt_sell_form(a))
    return rt_set_error(TJ_ERR_UNSUPPORTED, "method(sell): %s is not a CSR matrix of f64 or "
                        "f32 with fewer than 2^31 rows and columns", t->name);
  pthread_mutex_lock(&build_lock);   /* two runs over one tensor build one copy */
  if (t->sell && !built_from(t->sell, a)) {
    unref(t->sell);
    t->sell = NULL;
  }
  tj_status st = t->sell ? TJ_OK : build(a, t->name, &t->sell);
  if (t->sell && !t->sell->refs) t->sell->refs = 1;   /* the tensor's */
  if (st == TJ_OK) t->sell->refs++, *out = t->sell;    /* the caller's */
  pthread_mutex_unlock(&build_lock);
  return st;
}

void rt_sell_stats(const RtSell *s, int64_t *nnz, int64_t *padded, bool *sorted) {
  *nnz = 0, *padded = 0, *sorted = false;
  for (; s; s = s->next) *nnz += s->nnz, *padded += s->padded, *sorted |= s->perm != NULL;
}

bool rt_sell_narrow(const RtSell *s) {
  for (; s; s = s->next)
    if (!s->col16) return false;
  return true;
}

int64_t rt_sell_panels(const RtSell *s) {
  int64_t n = 0;
  for (; s; s = s->next) n++;
  return n;
}

/* ---- the kernel ---- */

typedef struct Job {
  const RtSell *s;
  const void *x;
  void *y;
  bool acc;
  int64_t ahead;   /* entries the SIMD loops prefetch ahead (0: none, see PREFETCH) */
} Job;

/* Writes (or adds) slice sl's C sums to y. */
#define STORE_SLICE(T, s, sl, sum, y, acc)                                  \
  for (int r = 0; r < C; r++) {                                           \
    int64_t slot = (sl) * C + r;                                          \
    int64_t row = (s)->perm ? (s)->perm[slot] : slot;                     \
    if (row < 0 || row >= (s)->rows) continue;                            \
    ((T *)(y))[row] = (acc) ? ((T *)(y))[row] + (sum)[r] : (sum)[r];      \
  }

/* The column of padded entry at of slice sl. */
#define COLUMN(s, sl, at) ((s)->col16 ? (s)->base[sl] + (int64_t)(s)->col16[at] : (s)->col[at])

#define PORTABLE(T, name)                                                 \
  static void name(const Job *j, int64_t lo, int64_t hi) {                 \
    const RtSell *s = j->s;                                               \
    const T *val = s->val, *x = j->x;                                     \
    for (int64_t sl = lo; sl < hi; sl++) {                                \
      T sum[C] = {0};                                                     \
      const int32_t *len = s->len + sl * C;                               \
      int64_t w = (s->off[sl + 1] - s->off[sl]) / C;                      \
      for (int64_t k = 0; k < w; k++) {                                   \
        int64_t at = s->off[sl] + k * C;                                  \
        for (int r = 0; r < C; r++)                                       \
          if (k < len[r]) sum[r] += val[at + r] * x[COLUMN(s, sl, at + r)]; \
      }                                                                   \
      STORE_SLICE(T, s, sl, sum, j->y, j->acc)                            \
    }                                                                     \
  }
PORTABLE(double, slices_f64)
PORTABLE(float, slices_f32)

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define HAVE_X86_SIMD 1
/* How far ahead (entries) the AVX-512 loop prefetches the copy's values
 * and columns: the copy is read once a run, often from DRAM while the CSR
 * arrays sit in cache, and the hardware prefetcher alone leaves the loop
 * waiting on it (cage11, copy evicted: -10 to -18% time with 128-1024;
 * u200k: -15%). On AMD not where x passes PREFETCH_MAX_X_AMD bytes: there
 * the gathers' misses on x bound the loop and the prefetches compete with
 * them (Zen, u1M, x of 8 MB: +7 to +9%); the loop then prefetches the line
 * it is about to read (ahead 0), which costs next to nothing. On the
 * Intel Xeon host (2 MB L2 a core) the prefetch ahead paid on u1M as well
 * (paired with MKL in one process, 21 rounds: MKL / SELL 0.88-0.96 ahead
 * 0, 0.99-1.01 ahead 512), so other vendors prefetch at every size. */
#define PREFETCH 512
#define PREFETCH_MAX_X_AMD (4 << 20)

/* The 8 columns of step at as 32-bit lanes: wide, or narrow (16-bit
 * offsets, the gather then reading from x + the slice's base). */
#define WIDE_COLS(at) _mm256_loadu_si256((const __m256i *)(s->col + (at)))
#define NARROW_COLS(at) _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s->col16 + (at))))

/* One step of the AVX-512 loop: the 8 lanes' x gathered unmasked (padding
 * lanes read column 0 or the slice's base, both inside x) and summed by
 * an FMA masked to the lanes still in their rows, so a padding lane's x
 * (inf, NaN) never reaches a sum. On AMD Zen 4 a masked gather is the
 * slower: -14 to -17% time on cage11 for the masked FMA. */
#define STEP(acc, m, at, COLS, xs)                                                     \
  acc = _mm512_mask3_fmadd_pd(_mm512_loadu_pd(val + (at)), _mm512_i32gather_pd(COLS(at), xs, 8), \
                              acc, m)

/* slices_f64 in AVX-512 over the wide (col) or narrow (col16, xs = x +
 * base[sl]) copy: per step k one 8-lane gather of x and one FMA masked to
 * the lanes with k < their row's length; two accumulators alternate so
 * consecutive FMAs do not wait on each other. */
#define AVX512_SLICES(name, cols, COLS, XS)                                              \
  __attribute__((target("avx512f,avx512vl"))) static void name(const Job *j, int64_t lo,  \
                                                               int64_t hi) {              \
    const RtSell *s = j->s;                                                              \
    const double *val = s->val, *x = j->x;                                               \
    double *y = j->y;                                                                    \
    const __m256i one = _mm256_set1_epi32(1);                                            \
    for (int64_t sl = lo; sl < hi; sl++) {                                               \
      __m256i len = _mm256_loadu_si256((const __m256i *)(s->len + sl * C));              \
      const double *xs = XS;                                                             \
      int64_t at = s->off[sl], end = s->off[sl + 1];                                     \
      __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();                        \
      __m256i k = _mm256_setzero_si256();                                                \
      for (; at + 2 * C <= end; at += 2 * C) {                                           \
        _mm_prefetch((const char *)(val + at + j->ahead), _MM_HINT_T0);                  \
        _mm_prefetch((const char *)(val + at + j->ahead + C), _MM_HINT_T0);              \
        _mm_prefetch((const char *)(s->cols + at + j->ahead), _MM_HINT_T0);              \
        __mmask8 m0 = _mm256_cmplt_epi32_mask(k, len);                                   \
        k = _mm256_add_epi32(k, one);                                                    \
        __mmask8 m1 = _mm256_cmplt_epi32_mask(k, len);                                   \
        k = _mm256_add_epi32(k, one);                                                    \
        STEP(a0, m0, at, COLS, xs);                                                      \
        STEP(a1, m1, at + C, COLS, xs);                                                  \
      }                                                                                  \
      if (at < end) STEP(a0, _mm256_cmplt_epi32_mask(k, len), at, COLS, xs);             \
      __m512d sum = _mm512_add_pd(a0, a1);                                               \
      int64_t row0 = sl * C;                                                             \
      if (!s->perm && row0 + C <= s->rows) {                                             \
        if (j->acc) sum = _mm512_add_pd(sum, _mm512_loadu_pd(y + row0));                 \
        _mm512_storeu_pd(y + row0, sum);                                                 \
      } else {                                                                           \
        double lanes[C];                                                                 \
        _mm512_storeu_pd(lanes, sum);                                                    \
        STORE_SLICE(double, s, sl, lanes, y, j->acc)                                     \
      }                                                                                  \
    }                                                                                    \
  }
AVX512_SLICES(slices_f64_avx512, col, WIDE_COLS, x)
AVX512_SLICES(slices_f64_avx512_narrow, col16, NARROW_COLS, x + s->base[sl])
#undef STEP


/* One 4-lane half of an AVX2 step: x read lane by lane (4 scalar loads;
 * padding lanes read column 0 or the slice's base, both inside x), the
 * lanes past their row's length zeroed by the mask k < len (so a padding
 * lane's inf/NaN never reaches a sum), then one FMA with the 4 values.
 * Not vgatherdpd: on Zen 2 the gather ran the cage11 loop 1.5x slower
 * (1.00-1.05 ms against 0.64-0.71, cache flushed between runs, thread
 * CPU medians of 41, three alternating runs). */
#define HALF(acc, lenh, k, at, COLS4, xs)                                               \
  do {                                                                                 \
    __m128i c4 = COLS4(at);                                                            \
    __m256d xv = _mm256_set_pd(xs[_mm_extract_epi32(c4, 3)], xs[_mm_extract_epi32(c4, 2)], \
                               xs[_mm_extract_epi32(c4, 1)], xs[_mm_cvtsi128_si32(c4)]); \
    xv = _mm256_and_pd(xv, _mm256_castsi256_pd(_mm256_cmpgt_epi64(lenh, k)));          \
    acc = _mm256_fmadd_pd(_mm256_loadu_pd(val + (at)), xv, acc);                       \
  } while (0)

/* 4 columns of step at as 32-bit lanes: wide, or narrow (16-bit offsets). */
#define WIDE_COLS4(at) _mm_loadu_si128((const __m128i *)(s->col + (at)))
#define NARROW_COLS4(at) _mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)(s->col16 + (at))))

/* slices_f64 in AVX2 + FMA over the wide (col) or narrow (col16, xs = x +
 * base[sl]) copy: an 8-row slice is two 4-lane halves, each with its own
 * accumulator, its lengths widened to 64 bits once a slice; per step k
 * four loads of x and one FMA a half (HALF). Prefetches the copy as the
 * AVX-512 loop does. */
#define AVX2_SLICES(name, cols, COLS4, XS)                                                \
  __attribute__((target("avx2,fma"))) static void name(const Job *j, int64_t lo,          \
                                                        int64_t hi) {                     \
    const RtSell *s = j->s;                                                              \
    const double *val = s->val, *x = j->x;                                               \
    double *y = j->y;                                                                    \
    const __m256i one = _mm256_set1_epi64x(1);                                           \
    for (int64_t sl = lo; sl < hi; sl++) {                                               \
      const int32_t *len = s->len + sl * C;                                              \
      __m256i len0 = _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i *)len));       \
      __m256i len1 = _mm256_cvtepi32_epi64(_mm_loadu_si128((const __m128i *)(len + 4))); \
      const double *xs = XS;                                                             \
      __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();                        \
      __m256i k = _mm256_setzero_si256();                                                \
      for (int64_t at = s->off[sl], end = s->off[sl + 1]; at < end; at += C) {           \
        _mm_prefetch((const char *)(val + at + j->ahead), _MM_HINT_T0);                  \
        _mm_prefetch((const char *)(s->cols + at + j->ahead), _MM_HINT_T0);              \
        HALF(a0, len0, k, at, COLS4, xs);                                                \
        HALF(a1, len1, k, at + 4, COLS4, xs);                                            \
        k = _mm256_add_epi64(k, one);                                                    \
      }                                                                                  \
      int64_t row0 = sl * C;                                                             \
      if (!s->perm && row0 + C <= s->rows) {                                             \
        if (j->acc) {                                                                    \
          a0 = _mm256_add_pd(a0, _mm256_loadu_pd(y + row0));                             \
          a1 = _mm256_add_pd(a1, _mm256_loadu_pd(y + row0 + 4));                         \
        }                                                                                \
        _mm256_storeu_pd(y + row0, a0);                                                  \
        _mm256_storeu_pd(y + row0 + 4, a1);                                              \
      } else {                                                                           \
        double lanes[C];                                                                 \
        _mm256_storeu_pd(lanes, a0);                                                     \
        _mm256_storeu_pd(lanes + 4, a1);                                                 \
        STORE_SLICE(double, s, sl, lanes, y, j->acc)                                     \
      }                                                                                  \
    }                                                                                    \
  }
AVX2_SLICES(slices_f64_avx2, col, WIDE_COLS4, x)
AVX2_SLICES(slices_f64_avx2_narrow, col16, NARROW_COLS4, x + s->base[sl])
#undef HALF
#endif

typedef void (*SliceLoop)(const Job *j, int64_t lo, int64_t hi);

/* The f64 loops this CPU runs, wide and narrow columns: AVX-512, else
 * AVX2 + FMA, else (or TJ_SELL_PORTABLE=1) the portable one;
 * TJ_SELL_AVX2=1 keeps an AVX-512 CPU on AVX2 (tests run each). Chosen
 * once, by pick_loops under pthread_once. */
static SliceLoop f64_wide = slices_f64, f64_narrow = slices_f64;
static const char *f64_isa = "portable";
static int64_t prefetch_max_x = INT64_MAX;   /* x's bytes up to which the loops prefetch ahead */
static pthread_once_t picked = PTHREAD_ONCE_INIT;

static void pick_loops(void) {
  const char *portable = getenv("TJ_SELL_PORTABLE"), *avx2 = getenv("TJ_SELL_AVX2");
  if (portable && *portable && strcmp(portable, "0")) return;
#ifdef HAVE_X86_SIMD
  bool only_avx2 = avx2 && *avx2 && strcmp(avx2, "0");
  if (__builtin_cpu_is("amd")) prefetch_max_x = PREFETCH_MAX_X_AMD;
  if (!only_avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) {
    f64_wide = slices_f64_avx512, f64_narrow = slices_f64_avx512_narrow, f64_isa = "avx512";
    return;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    f64_wide = slices_f64_avx2, f64_narrow = slices_f64_avx2_narrow, f64_isa = "avx2";
#else
  (void)avx2;
#endif
}

const char *rt_sell_isa(void) {
  pthread_once(&picked, pick_loops);
  return f64_isa;
}

static void run_slices(void *ctx, int64_t lo, int64_t hi) {
  const Job *j = ctx;
  if (j->s->dtype == TJ_F32) slices_f32(j, lo, hi);
  else if (j->s->col16) f64_narrow(j, lo, hi);
  else f64_wide(j, lo, hi);
}

/* Work (padded entries plus rows) from which a panel splits across
 * threads: TJ_PAR_MIN_WORK when set, else 2^18. On the Intel Xeon host
 * (2 cores shared, 2-thread rows by wall clock, 31 reps) wiki-Vote's copy
 * (117 k) ran 0.98-1.02x its 1-thread time on 2 threads, waking the
 * second thread costing what it saved; luxembourg_osm (360 k) ran 1.62-1.87x
 * and cage11 (625 k) 1.93-2.08x. */
#define SELL_PAR_MIN_WORK (1 << 18)
static int64_t par_min_work(void) {
  const char *env = getenv("TJ_PAR_MIN_WORK");
  return env && *env ? tj_rt_par_min_work() : SELL_PAR_MIN_WORK;
}

/* y (+)= the product of one panel s with x. */
static void spmv_panel(const RtSell *s, const void *x, void *y, bool accumulate) {
  Job j = {s, x, y, accumulate, 0};
  pthread_once(&picked, pick_loops);
#ifdef HAVE_X86_SIMD
  j.ahead = (s->chi - s->clo) * (int64_t)sizeof(double) <= prefetch_max_x ? PREFETCH : 0;
#endif
  if (s->nslices == 0) return;
  if (tj_rt_threads() > 1 && s->padded + s->rows >= par_min_work())
    tj_rt_parallel_for(0, s->nslices, s->off, 8, run_slices, &j);
  else
    run_slices(&j, 0, s->nslices);
}

void rt_sell_spmv(const RtSell *s, const void *x, void *y, bool accumulate) {
  for (bool acc = accumulate; s; s = s->next, acc = true) spmv_panel(s, x, y, acc);
}
