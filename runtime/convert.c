/* Conversions between formats and dtypes, and to/from dense arrays.
 *
 * Format conversion goes through COO: the source's entries (in its level
 * order) become the insertion buffer of a fresh tensor, which pack sorts
 * into the target's level order. Zeros that may be fill in the source
 * (its last level is dense, or an n_out_of_m level pads) are dropped by
 * tj_tensor_convert and kept by
 * rt_tensor_convert_all (a kernel's operand read in another format: its
 * stored entries, zeros included, are what min, max and semirings reduce
 * over); explicit zeros under a sparse last level (CSR, COO) are kept.
 * An all-dense tensor to another all-dense level order (a
 * transpose; not a view, whose values are its base's) moves its values
 * directly (permute_dense). A dtype cast keeps
 * the index arrays and converts the values.
 */
#include <stdlib.h>

#include "tensor.h"

/* src's entries (dim coordinates) as t's insertion buffer, mapped to t's
 * levels when t is blocked, less the zeros drop names. */
static tj_status take_entries(tj_tensor *t, const tj_tensor *src, RtDrop drop) {
  int64_t n, *coords;
  RtVal *vals;
  tj_status st = rt_tensor_entries_val(src, drop, &coords, &vals, &n);
  if (st != TJ_OK) return st;
  if (t->blocked) {
    int nl = t->fmt.order;
    int64_t *lc = malloc((size_t)(n * nl + 1) * sizeof *lc);
    if (!lc) {
      free(coords), free(vals);
      return rt_set_error(TJ_ERR_NOMEM, "out of memory converting tensor %s", src->name);
    }
    for (int64_t e = 0; e < n; e++) rt_block_to_levels(t, coords + e * src->order, lc + e * nl);
    free(coords);
    coords = lc;
  }
  t->coo.coords = coords, t->coo.vals = vals;
  t->coo.n = t->coo.cap = n;
  return TJ_OK;
}

/* Copies n values of width w from src (every step-th) to dst (contiguous). */
static void copy_strided(char *dst, const char *src, int64_t n, int64_t step, size_t w) {
  switch (w) {
  case 8:
    for (int64_t e = 0; e < n; e++) ((uint64_t *)dst)[e] = ((const uint64_t *)src)[e * step];
    break;
  case 4:
    for (int64_t e = 0; e < n; e++) ((uint32_t *)dst)[e] = ((const uint32_t *)src)[e * step];
    break;
  default:
    for (int64_t e = 0; e < n; e++) memcpy(dst + (size_t)e * w, src + (size_t)(e * step) * w, w);
  }
}

/* An all-dense src into all-dense t of another level order (a transpose):
 * the values move position by position, one strided run per row of t,
 * with no coordinate list. t is fresh (no values yet). */
static tj_status permute_dense(const tj_tensor *src, tj_tensor *t) {
  const tj_storage *s = &src->st;
  tj_storage *d = &t->st;
  int n = s->order;
  int64_t stride[TJ_MAX_ORDER], P = 1;
  for (int l = n - 1; l >= 0; l--) {
    stride[s->map[l].dim] = P;
    P *= s->levels[l].size;
  }
  size_t w = (size_t)rt_dtype_size(s->dtype);
  d->vals = rt_array_new(P, w, false);
  if (!d->vals) return rt_set_error(TJ_ERR_NOMEM, "out of memory converting tensor %s", src->name);
  d->vals_len = d->vals_cap = P;
  int64_t c[TJ_MAX_ORDER] = {0};   /* t's coordinates per level above its last */
  int64_t row = d->levels[n - 1].size, step = stride[d->map[n - 1].dim];
  for (int64_t q = 0; row > 0 && q < P; q += row) {
    int64_t from = 0;
    for (int l = 0; l < n - 1; l++) from += c[l] * stride[d->map[l].dim];
    copy_strided((char *)d->vals + (size_t)q * w, (const char *)s->vals + (size_t)from * w, row,
                 step, w);
    for (int l = n - 2; l >= 0 && ++c[l] == d->levels[l].size; l--) c[l] = 0;
  }
  return TJ_OK;
}

static tj_status convert(const tj_tensor *src, const tj_format *fmt, RtDrop drop,
                         tj_tensor **out);

tj_status tj_tensor_convert(const tj_tensor *src, const tj_format *fmt,
                            tj_tensor **out) {
  if (!src || !fmt || !out)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_convert: NULL argument");
  return convert(src, fmt, RT_DROP_FILL, out);
}

tj_status rt_tensor_convert_all(const tj_tensor *src, const tj_format *fmt, tj_tensor **out) {
  return convert(src, fmt, RT_DROP_NONE, out);
}

static tj_status convert(const tj_tensor *src, const tj_format *fmt, RtDrop drop,
                         tj_tensor **out) {
  *out = NULL;
  tj_format f = *fmt;
  if (rt_format_dims(&f) != src->order)
    return rt_set_error(TJ_ERR_SHAPE, "cannot convert tensor %s of order %d "
                        "to a format with %d %s", src->name, src->order,
                        rt_format_dims(&f), f.ndims ? "dims" : "levels");
  tj_tensor *t;
  tj_status st = tj_tensor_new(src->name, tj_tensor_dtype(src), src->order,
                               src->dims, &f, &t);
  if (st != TJ_OK) return st;
  if (src->order > 0 && !src->base && !src->blocked && !t->blocked && src->st.vals &&
      rt_format_all_dense(&src->fmt) && rt_format_all_dense(&t->fmt)) {
    st = permute_dense(src, t);
  } else {
    st = take_entries(t, src, drop);
    if (st == TJ_OK) st = tj_tensor_pack(t);
  }
  if (st != TJ_OK) {
    tj_tensor_free(t);
    return st;
  }
  *out = t;
  return TJ_OK;
}

tj_status rt_tensor_pattern(const tj_tensor *src, const tj_format *fmt, tj_tensor **out) {
  RtPattern p = {0};
  bool rebuilt;
  *out = NULL;
  tj_status st = rt_pattern_refresh(&p, src, fmt, out, &rebuilt);
  p.pat = NULL;   /* *out is the caller's */
  rt_pattern_free(&p);
  return st;
}

/* Copies n entries of width w from src into a fresh array (*dst). */
static bool copy_array(void **dst, const void *src, int64_t n, int w) {
  *dst = NULL;
  if (!src) return true;
  *dst = rt_array_new(n, (size_t)w, false);
  if (*dst && n) memcpy(*dst, src, (size_t)n * (size_t)w);
  return *dst != NULL;
}

bool rt_copy_index_arrays(const tj_storage *s, tj_storage *d) {
  bool ok = true;
  for (int l = 0; l < s->order && ok; l++) {
    const tj_level_storage *a = &s->levels[l];
    tj_level_storage *b = &d->levels[l];
    ok = copy_array(&b->pos, a->pos, a->pos_len, s->pos_width) &&
         copy_array(&b->crd, a->crd, a->crd_len, s->crd_width);
    b->pos_len = b->pos_cap = b->pos ? a->pos_len : 0;
    b->crd_len = b->crd_cap = b->crd ? a->crd_len : 0;
  }
  return ok;
}

tj_status tj_tensor_cast(const tj_tensor *src, tj_dtype dt, tj_tensor **out) {
  if (!src || !out)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_cast: NULL argument");
  *out = NULL;
  tj_tensor *t;
  if (src->base) {   /* a view: its entries in a tensor of their own first */
    tj_format f = src->ufmt;
    rt_format_unslice(&f);
    tj_tensor *own;
    tj_status st = tj_tensor_convert(src, &f, &own);
    if (st != TJ_OK) return st;
    st = tj_tensor_cast(own, dt, out);
    tj_tensor_free(own);
    return st;
  }
  tj_status st = tj_tensor_new(src->name, dt, src->order, src->dims, &src->ufmt, &t);
  if (st != TJ_OK) return st;
  const tj_storage *s = &src->st;
  tj_storage *d = &t->st;
  bool ok = rt_copy_index_arrays(s, d);
  if (ok && s->vals) {
    d->vals = rt_array_new(s->vals_len, (size_t)rt_dtype_size(dt), false);
    ok = d->vals != NULL;
    d->vals_len = d->vals_cap = ok ? s->vals_len : 0;
    for (int64_t i = 0; ok && i < s->vals_len; i++)
      rt_storage_put(d, i, rt_val_cast(s->dtype, dt, rt_storage_get(s, i)));
  }
  if (!ok) {
    tj_tensor_free(t);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory casting tensor %s",
                        src->name);
  }
  *out = t;
  return TJ_OK;
}

tj_status rt_tensor_from_dense(tj_tensor *t, const double *dense, const uint8_t *keep) {
  int order = t->order;
  int64_t total = 1;
  for (int m = 0; m < order; m++) total *= t->dims[m];
  bool all_dense = rt_format_all_dense(&t->fmt);
  RtCoo saved = t->coo;
  memset(&t->coo, 0, sizeof t->coo);
  tj_status st = TJ_OK;
  int64_t coord[TJ_MAX_ORDER] = {0};
  for (int64_t lin = 0; lin < total && st == TJ_OK; lin++) {
    if (all_dense || (keep ? keep[lin] : dense[lin] != 0)) st = rt_coo_push(t, coord, dense[lin]);
    for (int m = order - 1; m >= 0 && ++coord[m] == t->dims[m]; m--)
      coord[m] = 0;
  }
  tj_storage old = t->st;
  if (st == TJ_OK) {
    rt_storage_detach(&t->st);
    st = tj_tensor_pack(t);
    if (st != TJ_OK) {
      rt_storage_clear(&t->st);
      t->st = old;
    }
  }
  if (st != TJ_OK) {   /* t->st is old again (and still owns its arrays) */
    free(t->coo.coords), free(t->coo.vals);
    t->coo = saved;
    return st;
  }
  rt_storage_clear(&old);
  free(saved.coords), free(saved.vals);
  return TJ_OK;
}
