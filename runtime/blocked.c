/* Blocked tensors (formats with floordiv / mod levels, e.g. BSR): the map
 * between a tensor's dims and the levels it is stored as, and the views a
 * kernel runs on.
 *
 * A blocked tensor is stored as the tensor of its levels (runtime/tensor.h):
 * BSR with 4x4 blocks over an m x n matrix is the order-4 tensor
 * A4(ib, jb, ii, jj) of extents ceil(m/4), ceil(n/4), 4, 4 in format dsdd,
 * with A(i, j) = A4(i / 4, j / 4, i % 4, j % 4); coordinates past m or n
 * are padding (zero, never an entry). A kernel over A runs on that level
 * tensor (rt_tensor_view_levels) and on its dense operands reshaped so a
 * blocked index i is the pair (ib, ii) with i = ib * 4 + ii
 * (rt_tensor_view_split: a row-major dense array is already that array,
 * so the view copies nothing). jit/driver_blocked.c rewrites the
 * expression to match.
 */
#include <stdlib.h>

#include "tensor.h"

void rt_block_to_levels(const tj_tensor *t, const int64_t *coord, int64_t *lc) {
  const tj_format *f = &t->ufmt;
  for (int l = 0; l < f->order; l++) {
    int64_t c = coord[f->mode_order[l]], k = f->lvl_k[l];
    lc[l] = f->lvl_op[l] == TJ_LVL_FLOORDIV ? c / k : f->lvl_op[l] == TJ_LVL_MOD ? c % k : c;
  }
}

bool rt_block_to_dims(const tj_tensor *t, const int64_t *lc, int64_t *coord) {
  const tj_format *f = &t->ufmt;
  for (int d = 0; d < t->order; d++) coord[d] = 0;
  for (int l = 0; l < f->order; l++) {
    int64_t *c = &coord[f->mode_order[l]];
    *c += f->lvl_op[l] == TJ_LVL_FLOORDIV ? lc[l] * f->lvl_k[l] : lc[l];
  }
  for (int d = 0; d < t->order; d++)
    if (coord[d] >= t->dims[d]) return false;
  return true;
}

void rt_tensor_view_levels(const tj_tensor *t, tj_tensor *v) {
  *v = *t;
  memset(&v->coo, 0, sizeof v->coo);
  memset(&v->adopted, 0, sizeof v->adopted);
  v->sell = NULL;   /* t's copy stays t's */
  v->blocked = false;
  v->order = t->fmt.order;
  memcpy(v->dims, t->st.dims, sizeof v->dims);
  v->ufmt = t->fmt;
  v->st.foreign = ~0u;   /* the arrays stay t's */
}

/* Position in t's values of each coordinate (odometer over t's levels),
 * and the position of the same coordinate in view v (whose level order
 * splits t's levels in place): copies between them, in (to_view) or out. */
static void copy_padded(const tj_tensor *t, const int32_t *split, tj_tensor *v, bool to_view) {
  int nl = t->fmt.order, sz = rt_dtype_size(t->st.dtype);
  int64_t c[TJ_MAX_ORDER] = {0}, total = 1;
  for (int l = 0; l < nl; l++) total *= t->dims[t->fmt.mode_order[l]];
  for (int64_t p = 0; p < total; p++) {
    int64_t q = 0;
    for (int l = 0; l < nl; l++) {
      int m = t->fmt.mode_order[l];
      if (split[m] > 0) {
        q = q * ((t->dims[m] + split[m] - 1) / split[m]) + c[l] / split[m];
        q = q * split[m] + c[l] % split[m];
      } else {
        q = q * t->dims[m] + c[l];
      }
    }
    if (t->base) {   /* a view (an input): its values through its base */
      int64_t coord[TJ_MAX_ORDER];
      for (int l = 0; l < nl; l++) coord[t->fmt.mode_order[l]] = c[l];
      rt_storage_put(&v->st, q, rt_tensor_lookup(t, coord));
    } else {
      char *tv = (char *)t->st.vals + p * sz, *vv = (char *)v->st.vals + q * sz;
      if (to_view) memcpy(vv, tv, (size_t)sz);
      else memcpy(tv, vv, (size_t)sz);
    }
    for (int l = nl - 1; l >= 0 && ++c[l] == t->dims[t->fmt.mode_order[l]]; l--) c[l] = 0;
  }
}

tj_status rt_tensor_view_split(const tj_tensor *t, const int32_t *split, tj_tensor *v) {
  if (t->blocked || !rt_format_all_dense(&t->fmt))
    return rt_set_error(TJ_ERR_UNSUPPORTED, "tensor %s: an index of a blocked operand "
                        "splits one of its dims, which needs a dense tensor; convert %s to "
                        "a dense format", t->name, t->name);
  int64_t total = 1, padded_total = 1;
  bool padded = false;
  for (int m = 0; m < t->order; m++) {
    int64_t k = split[m] > 0 ? split[m] : 1, nb = (t->dims[m] + k - 1) / k;
    padded |= nb * k != t->dims[m] || t->base;   /* a slice: copied, in the split's order */
    total *= t->dims[m];
    padded_total *= nb * k;
  }
  int first[TJ_MAX_ORDER], n = 0;   /* mode m becomes view mode first[m] (and the next) */
  for (int m = 0; m < t->order; m++) first[m] = n, n += split[m] > 0 ? 2 : 1;
  if (n > TJ_MAX_ORDER)
    return rt_set_error(TJ_ERR_UNSUPPORTED, "tensor %s: splitting its blocked dims gives "
                        "%d dims, more than %d", t->name, n, TJ_MAX_ORDER);
  tj_tensor *w = (tj_tensor *)t;   /* a dense output gets its values before the view */
  if (!w->st.vals && !t->base) {
    w->st.vals = rt_array_new(total, (size_t)rt_dtype_size(t->st.dtype), true);
    if (!w->st.vals) return rt_set_error(TJ_ERR_NOMEM, "out of memory for tensor %s", t->name);
    w->st.vals_len = w->st.vals_cap = total;
  }
  *v = *t;
  v->base = NULL, v->owns_base = false;   /* a slice: the copy below is its own */
  memset(&v->coo, 0, sizeof v->coo);
  memset(&v->adopted, 0, sizeof v->adopted);
  v->sell = NULL;
  v->order = n;
  tj_format f = tj_format_dense(n);
  f.pos_width = t->fmt.pos_width, f.crd_width = t->fmt.crd_width;
  int l = 0;
  for (int k = 0; k < t->fmt.order; k++) {
    int m = t->fmt.mode_order[k];
    f.mode_order[l++] = first[m];
    if (split[m] > 0) f.mode_order[l++] = first[m] + 1;
  }
  for (int m = 0; m < t->order; m++) {
    if (split[m] > 0) {
      v->dims[first[m]] = (t->dims[m] + split[m] - 1) / split[m];
      v->dims[first[m] + 1] = split[m];
    } else {
      v->dims[first[m]] = t->dims[m];
    }
  }
  v->fmt = v->ufmt = f;
  v->st.order = n;
  for (int k = 0; k < n; k++) {
    int d = f.mode_order[k];
    v->st.dims[d] = v->dims[d];
    v->st.map[k] = (tj_lvl_expr){.dim = d, .op = TJ_LX_DIM, .k = 0};
    v->st.levels[k] = (tj_level_storage){.kind = TJ_LVL_DENSE, .size = v->dims[d]};
  }
  v->st.foreign = TJ_FOREIGN_VALS;
  v->padded = padded;
  if (padded) {   /* a zero-padded copy, the view's own */
    tj_status st = rt_check_fits("a padded copy for a blocked kernel",
                                 (double)padded_total * rt_dtype_size(t->st.dtype));
    if (st != TJ_OK) return st;
    v->st.vals = rt_array_new(padded_total, (size_t)rt_dtype_size(t->st.dtype), true);
    if (!v->st.vals) return rt_set_error(TJ_ERR_NOMEM, "out of memory for tensor %s", t->name);
    v->st.vals_len = v->st.vals_cap = padded_total;
    v->st.foreign = 0;
    memcpy(v->split, split, sizeof v->split);
    copy_padded(t, split, v, true);
  }
  return TJ_OK;
}

void rt_tensor_view_finish(tj_tensor *t, tj_tensor *v, bool output) {
  if (v->padded) {   /* the values inside t's extents go back; the copy goes */
    if (output) copy_padded(t, v->split, v, false);
    free(v->st.vals);
    v->st.vals = NULL;
    return;
  }
  if (!output) return;
  if (v->st.vals != t->st.vals) {   /* the kernel grew the view's values: now t's */
    if (!(t->st.foreign & TJ_FOREIGN_VALS)) free(t->st.vals);
    t->st.vals = v->st.vals;
    t->st.vals_cap = v->st.vals_cap;
    t->st.foreign &= ~(uint32_t)TJ_FOREIGN_VALS;
  }
  t->st.vals_len = v->st.vals_len;
}
