/* Reading packed storage: iteration to COO, point lookup, dense copies.
 *
 * One recursive walk visits every stored position in level order: a dense
 * level loops over its extent, a compressed level over its segment
 * pos[p]..pos[p+1], a singleton level takes the one coordinate at p.
 * Lookup follows the same levels for one coordinate, by binary search in
 * compressed segments; nonunique levels may hold several matches, which
 * are summed (as the dense view of the tensor sums them).
 */
#include <stdlib.h>

#include "tensor.h"

typedef RtEmitFn EmitFn;

bool rt_level_segment(const tj_storage *s, const tj_level_storage *lv, int64_t p, int64_t *lo,
                      int64_t *hi) {
  if (lv->kind == TJ_LVL_N_OUT_OF_M) {
    *lo = p * lv->n, *hi = *lo + lv->n;
    return lv->crd && *hi <= lv->crd_len;
  }
  int64_t k = lv->kind == TJ_LVL_LOOSE_COMPRESSED ? 2 * p : p;
  if (!lv->pos || k + 1 >= lv->pos_len) return false;
  *lo = rt_idx(lv->pos, s->pos_width, k);
  *hi = rt_idx(lv->pos, s->pos_width, k + 1);
  return true;
}

/* Visits the subtree of position p at level l; coord is indexed by dim. */
static void walk(const tj_storage *s, int l, int64_t p, int64_t *coord,
                 EmitFn emit, void *ctx) {
  if (l == s->order) {
    emit(ctx, coord, p);
    return;
  }
  const tj_level_storage *lv = &s->levels[l];
  int m = s->map[l].dim;
  if (lv->kind == TJ_LVL_DENSE) {
    for (int64_t i = 0; i < lv->size; i++)
      coord[m] = i, walk(s, l + 1, p * lv->size + i, coord, emit, ctx);
  } else if (lv->kind != TJ_LVL_SINGLETON) {
    int64_t lo, hi;
    if (!rt_level_segment(s, lv, p, &lo, &hi)) return;
    for (int64_t q = lo; q < hi; q++) {
      coord[m] = rt_idx(lv->crd, s->crd_width, q);
      walk(s, l + 1, q, coord, emit, ctx);
    }
  } else {
    if (!lv->crd || p >= lv->crd_len) return;
    coord[m] = rt_idx(lv->crd, s->crd_width, p);
    walk(s, l + 1, p, coord, emit, ctx);
  }
}

/* Walks all of s's stored positions (nothing if s holds no values). */
static void walk_all(const tj_storage *s, EmitFn emit, void *ctx) {
  int64_t coord[TJ_MAX_ORDER] = {0};
  if (s->vals && s->vals_len > 0) walk(s, 0, 0, coord, emit, ctx);
}

void rt_storage_walk(const tj_storage *s, RtEmitFn emit, void *ctx) { walk_all(s, emit, ctx); }

typedef struct Collect {
  const tj_storage *s;
  bool drop_zero;
  int64_t n, cap, *coords;
  RtVal *vals;
} Collect;

static void collect(void *ctx, const int64_t *coord, int64_t p) {
  Collect *c = ctx;
  if (p >= c->s->vals_len || c->n == c->cap) return;
  RtVal v = rt_storage_get(c->s, p);
  if (c->drop_zero && rt_val_is_zero(c->s->dtype, v)) return;
  memcpy(c->coords + c->n * c->s->order, coord,
         (size_t)c->s->order * sizeof *coord);
  c->vals[c->n++] = v;
}

/* Whether a walk under rule drop skips s's zero values. Fill (zeros that
 * are no entries) lies under a dense last level (a dense matrix, CSR of
 * dense rows `sd`, BSR's blocks) or in an n_out_of_m level's padding;
 * under a compressed or singleton last level every value is a stored
 * coordinate's, so a zero there is an explicit entry (CSR's `ds`
 * included): min, max and semirings tell it from an absent one, and
 * conversion keeps it. RT_DROP_DENSE_ZEROS drops every zero of a format
 * with any dense level. An order-0 tensor keeps its value. */
static bool drops_zeros(const tj_storage *s, RtDrop drop) {
  if (drop == RT_DROP_NONE || s->order == 0) return false;
  if (drop == RT_DROP_FILL && s->levels[s->order - 1].kind == TJ_LVL_DENSE) return true;
  for (int l = 0; l < s->order; l++) {
    int32_t k = s->levels[l].kind;
    if (k == TJ_LVL_N_OUT_OF_M || (drop == RT_DROP_DENSE_ZEROS && k == TJ_LVL_DENSE))
      return true;
  }
  return false;
}

tj_status rt_tensor_level_entries_val(const tj_tensor *t, RtDrop drop,
                                      int64_t **coords, RtVal **vals, int64_t *n) {
  if (t->base) return rt_view_entries(t, drop, coords, vals, n);
  const tj_storage *s = &t->st;
  Collect c = {.s = s, .drop_zero = drops_zeros(s, drop), .cap = s->vals_len};
  c.coords = malloc((size_t)(c.cap * s->order + 1) * sizeof *c.coords);
  c.vals = malloc((size_t)(c.cap + 1) * sizeof *c.vals);
  if (!c.coords || !c.vals) {
    free(c.coords), free(c.vals);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory reading tensor %s",
                        t->name);
  }
  walk_all(s, collect, &c);
  *coords = c.coords, *vals = c.vals, *n = c.n;
  return TJ_OK;
}

/* A blocked tensor's entries in level coordinates become dim coordinates
 * in place (the order shrinks from levels to dims); entries in the padding
 * past an extent are dropped. */
static void entries_to_dims(const tj_tensor *t, int64_t *coords, RtVal *vals, int64_t *n) {
  int nl = t->fmt.order, nd = t->order;
  int64_t k = 0, c[TJ_MAX_ORDER];
  for (int64_t e = 0; e < *n; e++) {
    if (!rt_block_to_dims(t, coords + e * nl, c)) continue;
    memcpy(coords + k * nd, c, (size_t)nd * sizeof *c);
    vals[k++] = vals[e];
  }
  *n = k;
}

tj_status rt_tensor_entries_val(const tj_tensor *t, RtDrop drop,
                                int64_t **coords, RtVal **vals, int64_t *n) {
  if (t->base) return rt_view_entries(t, drop, coords, vals, n);   /* in dims already */
  tj_status st = rt_tensor_level_entries_val(t, drop, coords, vals, n);
  if (st == TJ_OK && t->blocked) entries_to_dims(t, *coords, *vals, n);
  return st;
}

tj_status rt_tensor_entries(const tj_tensor *t, RtDrop drop,
                            int64_t **coords, double **vals, int64_t *n) {
  RtVal *v;
  tj_status st = rt_tensor_entries_val(t, drop, coords, &v, n);
  if (st != TJ_OK) return st;
  double *d = malloc((size_t)(*n + 1) * sizeof *d);
  if (!d) {
    free(*coords), free(v);
    *coords = NULL;
    return rt_set_error(TJ_ERR_NOMEM, "out of memory reading tensor %s", t->name);
  }
  for (int64_t e = 0; e < *n; e++) d[e] = rt_val_to_double(t->st.dtype, v[e]);
  free(v);
  *vals = d;
  return TJ_OK;
}

tj_status tj_tensor_unpack(const tj_tensor *t, int64_t **coords,
                           double **vals, int64_t *nnz) {
  if (!t || !coords || !vals || !nnz)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_unpack: NULL argument");
  return rt_tensor_entries(t, RT_DROP_NONE, coords, vals, nnz);
}

/* First position in [lo, hi) whose coordinate is >= c. */
static int64_t lower_bound(const tj_storage *s, const tj_level_storage *lv,
                           int64_t lo, int64_t hi, int64_t c) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (rt_idx(lv->crd, s->crd_width, mid) < c) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Sum of the values stored at coord below position p of level l. */
static RtVal lookup(const tj_storage *s, int l, int64_t p, const int64_t *coord) {
  const RtVal zero = {.i = 0};   /* all bits 0: integer 0 and 0.0 alike */
  if (l == s->order) return p < s->vals_len ? rt_storage_get(s, p) : zero;
  const tj_level_storage *lv = &s->levels[l];
  int64_t c = coord[s->map[l].dim];
  if (lv->kind == TJ_LVL_DENSE) return lookup(s, l + 1, p * lv->size + c, coord);
  if (lv->kind == TJ_LVL_SINGLETON)
    return p < lv->crd_len && rt_idx(lv->crd, s->crd_width, p) == c
               ? lookup(s, l + 1, p, coord) : zero;
  int64_t lo, hi;
  if (!rt_level_segment(s, lv, p, &lo, &hi)) return zero;
  RtVal sum = zero;
  if (lv->flags & TJ_LVL_NONORDERED) { /* a segment in any order: scan it */
    for (int64_t q = lo; q < hi; q++)
      if (rt_idx(lv->crd, s->crd_width, q) == c)
        sum = rt_val_add(s->dtype, sum, lookup(s, l + 1, q, coord));
    return sum;
  }
  for (int64_t q = lower_bound(s, lv, lo, hi, c);
       q < hi && rt_idx(lv->crd, s->crd_width, q) == c; q++)
    sum = rt_val_add(s->dtype, sum, lookup(s, l + 1, q, coord));
  return sum;
}

/* The first position below position p of level l that stores coord, or -1. */
static int64_t locate(const tj_storage *s, int l, int64_t p, const int64_t *coord) {
  if (l == s->order) return p < s->vals_len ? p : -1;
  const tj_level_storage *lv = &s->levels[l];
  int64_t c = coord[s->map[l].dim];
  if (lv->kind == TJ_LVL_DENSE)
    return c >= 0 && c < lv->size ? locate(s, l + 1, p * lv->size + c, coord) : -1;
  if (lv->kind == TJ_LVL_SINGLETON)
    return p < lv->crd_len && rt_idx(lv->crd, s->crd_width, p) == c
               ? locate(s, l + 1, p, coord) : -1;
  int64_t lo, hi;
  if (!rt_level_segment(s, lv, p, &lo, &hi)) return -1;
  bool scan = lv->flags & TJ_LVL_NONORDERED;   /* a segment in any order */
  for (int64_t q = scan ? lo : lower_bound(s, lv, lo, hi, c); q < hi; q++) {
    bool hit = rt_idx(lv->crd, s->crd_width, q) == c;
    if (!hit && !scan) break;
    int64_t r = hit ? locate(s, l + 1, q, coord) : -1;
    if (r >= 0) return r;
  }
  return -1;
}

int64_t rt_storage_locate(const tj_storage *s, const int64_t *coord) {
  return s->vals && s->vals_len > 0 ? locate(s, 0, 0, coord) : -1;
}

RtVal rt_tensor_lookup(const tj_tensor *t, const int64_t *coord) {
  int64_t lc[TJ_MAX_ORDER];
  if (t->base) {
    rt_view_to_base(t, coord, lc);
    return rt_tensor_lookup(t->base, lc);
  }
  if (t->blocked) rt_block_to_levels(t, coord, lc);
  if (t->st.vals && t->st.vals_len > 0) return lookup(&t->st, 0, 0, t->blocked ? lc : coord);
  return (RtVal){.i = 0};
}

tj_status tj_tensor_get(const tj_tensor *t, const int64_t *coord, double *out) {
  if (!t || !out || (!coord && t->order > 0))
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_get: NULL argument");
  tj_status st = rt_check_coord(t, coord);
  if (st == TJ_OK) *out = rt_val_to_double(t->st.dtype, rt_tensor_lookup(t, coord));
  return st;
}

typedef struct DenseOut {
  const tj_storage *s;
  double *out;
  uint8_t *stored;   /* or NULL */
} DenseOut;

static void add_dense(void *ctx, const int64_t *coord, int64_t p) {
  DenseOut *d = ctx;
  int64_t lin = 0;
  for (int m = 0; m < d->s->order; m++) lin = lin * d->s->dims[m] + coord[m];
  if (p < d->s->vals_len) d->out[lin] += rt_storage_val(d->s, p);
  if (d->stored) d->stored[lin] = 1;
}

/* rt_tensor_to_dense of a blocked tensor or a view, through its entries. */
static tj_status blocked_to_dense(const tj_tensor *t, double *out, uint8_t *stored) {
  int64_t *coords, n;
  double *vals;
  tj_status st = rt_tensor_entries(t, RT_DROP_NONE, &coords, &vals, &n);
  for (int64_t e = 0; st == TJ_OK && e < n; e++) {
    int64_t lin = 0;
    for (int m = 0; m < t->order; m++) lin = lin * t->dims[m] + coords[e * t->order + m];
    out[lin] += vals[e];
    if (stored) stored[lin] = 1;
  }
  if (st == TJ_OK) free(coords), free(vals);
  return st;
}

tj_status rt_tensor_to_dense(const tj_tensor *t, double *out, uint8_t *stored) {
  int64_t total = 1;
  for (int m = 0; m < t->order; m++) total *= t->dims[m];
  memset(out, 0, (size_t)total * sizeof *out);
  if (stored) memset(stored, 0, (size_t)total);
  if (t->blocked || t->base) return blocked_to_dense(t, out, stored);
  DenseOut d = {&t->st, out, stored};
  walk_all(&t->st, add_dense, &d);
  return TJ_OK;
}
