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
#include <inttypes.h>
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

/* One array slot of a level view's output storage back to t: a kernel that
 * cleared or grew it left another array there (its own: the view's foreign
 * bit went with the old one), which t takes, freeing what it had. */
static void take_array(tj_storage *ts, const tj_storage *vs, void **tp, void *vp, uint32_t bit) {
  if (*tp == vp) return;
  if (!(ts->foreign & bit)) free(*tp);
  *tp = vp;
  ts->foreign = (ts->foreign & ~bit) | (vs->foreign & bit);
}

/* The walk that zeroes a blocked tensor's padding (or, check, finds the
 * first nonzero value there). */
typedef struct PadWalk {
  const tj_tensor *t;
  RtVal zero;
  int64_t base[TJ_MAX_ORDER];   /* per dim: its block's first coordinate */
  bool check;
  int64_t bad;                  /* check: the first nonzero's position, or -1 */
} PadWalk;

static void zero_subtree(PadWalk *w, int l, int64_t p);
static void pad_walk(PadWalk *w, int l, int64_t p, uint32_t unknown, uint32_t edge);

/* The children of position p at level l: coordinates and positions. */
#define FOR_CHILDREN(s, lv, l, p, c, q, BODY)                                   \
  do {                                                                          \
    if ((lv)->kind == TJ_LVL_DENSE) {                                           \
      for (int64_t c = 0; c < (lv)->size; c++) {                                \
        int64_t q = (p) * (lv)->size + c;                                       \
        BODY                                                                    \
      }                                                                         \
    } else if ((lv)->kind == TJ_LVL_SINGLETON) {                                \
      if ((lv)->crd && (p) < (lv)->crd_len) {                                   \
        int64_t q = (p), c = rt_idx((lv)->crd, (s)->crd_width, q);              \
        BODY                                                                    \
      }                                                                         \
    } else {                                                                    \
      int64_t lo_, hi_;                                                         \
      if (rt_level_segment((s), (lv), (p), &lo_, &hi_))                         \
        for (int64_t q = lo_; q < hi_; q++) {                                   \
          int64_t c = rt_idx((lv)->crd, (s)->crd_width, q);                     \
          BODY                                                                  \
        }                                                                       \
    }                                                                           \
  } while (0)

static void zero_subtree(PadWalk *w, int l, int64_t p) {
  const tj_storage *s = &w->t->st;
  if (l == s->order) {
    if (p >= s->vals_len) return;
    if (!w->check) rt_storage_put((tj_storage *)s, p, w->zero);
    else if (w->bad < 0 && !rt_val_is_zero(s->dtype, rt_storage_get(s, p))) w->bad = p;
    return;
  }
  const tj_level_storage *lv = &s->levels[l];
  FOR_CHILDREN(s, lv, l, p, c, q, { (void)c; zero_subtree(w, l + 1, q); });
}

/* unknown: blocked dims with padding whose block level is still below;
 * edge: dims whose block (above) is their last, padded one. A subtree
 * with neither holds no padding and is skipped. */
static void pad_walk(PadWalk *w, int l, int64_t p, uint32_t unknown, uint32_t edge) {
  const tj_tensor *t = w->t;
  const tj_storage *s = &t->st;
  if (l == s->order || !(unknown | edge)) return;
  const tj_level_storage *lv = &s->levels[l];
  int m = t->ufmt.mode_order[l], op = t->ufmt.lvl_op[l];
  int64_t k = t->ufmt.lvl_k[l], last = k ? (t->dims[m] - 1) / k : 0;
  uint32_t bit = 1u << m;
  FOR_CHILDREN(s, lv, l, p, c, q, {
    if (op == TJ_LVL_FLOORDIV && (unknown & bit)) {
      w->base[m] = c * k;
      pad_walk(w, l + 1, q, unknown & ~bit, c == last ? edge | bit : edge);
    } else if (op == TJ_LVL_MOD && (edge & bit)) {
      if (w->base[m] + c >= t->dims[m]) zero_subtree(w, l + 1, q);
      else pad_walk(w, l + 1, q, unknown, edge & ~bit);
    } else {
      pad_walk(w, l + 1, q, unknown, edge);
    }
  });
}

/* The dims of blocked tensor t whose extents are not block multiples. */
static uint32_t padded_dims(const tj_tensor *t) {
  uint32_t padded = 0;
  for (int l = 0; l < t->ufmt.order; l++) {
    int m = t->ufmt.mode_order[l];
    if (t->ufmt.lvl_op[l] == TJ_LVL_FLOORDIV && t->dims[m] % t->ufmt.lvl_k[l])
      padded |= 1u << m;
  }
  return padded;
}

void rt_tensor_zero_padding(tj_tensor *t) {
  if (!t->blocked || !t->st.vals) return;
  uint32_t padded = padded_dims(t);
  PadWalk w = {.t = t, .zero = rt_val_from_double(t->st.dtype, 0), .bad = -1};
  if (padded) pad_walk(&w, 0, 0, padded, 0);
}

tj_status rt_tensor_check_padding(const tj_tensor *t) {
  if (!t->blocked || !t->st.vals) return TJ_OK;
  uint32_t padded = padded_dims(t);
  PadWalk w = {.t = t, .check = true, .bad = -1};
  if (padded) pad_walk(&w, 0, 0, padded, 0);
  if (w.bad < 0) return TJ_OK;
  return rt_set_error(TJ_ERR_FORMAT, "tensor %s: vals[%" PRId64 "] = %g lies in a block's padding "
                      "past the extents; padding holds zeros, never entries (a sum over the "
                      "blocks would read it)", t->name, w.bad,
                      rt_val_to_double(t->st.dtype, rt_storage_get(&t->st, w.bad)));
}

void rt_tensor_view_levels_finish(tj_tensor *t, const tj_tensor *v) {
  tj_storage *ts = &t->st;
  const tj_storage *vs = &v->st;
  for (int l = 0; l < ts->order; l++) {
    tj_level_storage *tl = &ts->levels[l];
    const tj_level_storage *vl = &vs->levels[l];
    take_array(ts, vs, &tl->pos, vl->pos, TJ_FOREIGN_POS(l));
    take_array(ts, vs, &tl->crd, vl->crd, TJ_FOREIGN_CRD(l));
    tl->pos_len = vl->pos_len, tl->pos_cap = vl->pos_cap;
    tl->crd_len = vl->crd_len, tl->crd_cap = vl->crd_cap;
  }
  take_array(ts, vs, &ts->vals, vs->vals, TJ_FOREIGN_VALS);
  ts->vals_len = vs->vals_len, ts->vals_cap = vs->vals_cap;
  rt_tensor_zero_padding(t);   /* f(0) may be nonzero (B + 1): padding stays 0 */
}

/* Position in t's values of each coordinate (odometer over t's levels),
 * and the position of the same coordinate in view v (whose level order
 * splits t's levels in place): copies between them, in (to_view) or out. */
/* The blocks of dim m of t in its split view: ceil(dims / k), or over the
 * frame lead + c * stride. */
static int64_t split_blocks(const tj_tensor *t, const int32_t *split,
                            const int64_t (*frame)[2], int m) {
  int64_t k = split[m], n = t->dims[m];
  if (frame && frame[m][1] > 0) return n ? (frame[m][0] + (n - 1) * frame[m][1]) / k + 1 : 0;
  return (n + k - 1) / k;
}

/* Copies between t's values and its split view v's (to_view: into v),
 * coordinate by coordinate, or a run of the last level at a time when
 * its coordinates stay consecutive in v (not framed, or by stride 1): one
 * memcpy per row, so a framed SpMM operand costs a copy of its values per
 * run and not a walk of their coordinates. */
static void copy_padded(const tj_tensor *t, const int32_t *split, tj_tensor *v, bool to_view) {
  int nl = t->fmt.order, sz = rt_dtype_size(t->st.dtype);
  int64_t c[TJ_MAX_ORDER] = {0}, total = 1;
  for (int l = 0; l < nl; l++) total *= t->dims[t->fmt.mode_order[l]];
  int last = nl ? t->fmt.mode_order[nl - 1] : 0;
  int64_t run = 1;
  if (nl && !t->base && (split[last] <= 0 || v->frame[last][1] <= 1)) run = t->dims[last];
  for (int64_t p = 0; p < total; p += run) {
    int64_t q = 0;
    for (int l = 0; l < nl; l++) {
      int m = t->fmt.mode_order[l];
      if (split[m] > 0) {
        int64_t j = v->frame[m][1] > 0 ? v->frame[m][0] + c[l] * v->frame[m][1] : c[l];
        q = q * split_blocks(t, split, v->frame, m) + j / split[m];
        q = q * split[m] + j % split[m];
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
      if (to_view) memcpy(vv, tv, (size_t)(sz * run));
      else memcpy(tv, vv, (size_t)(sz * run));
    }
    if (run > 1 && nl) c[nl - 1] = t->dims[last] - 1;   /* the run's last coordinate */
    for (int l = nl - 1; l >= 0 && ++c[l] == t->dims[t->fmt.mode_order[l]]; l--) c[l] = 0;
  }
}

/* Element offset of t's coordinate 0 from frame position 0 when t can be
 * read in place through frame (RT_SPLIT_IN_PLACE): the first level's dim
 * framed by stride 1, no other dim framed or padded; -1 when it cannot. */
static int64_t in_place_shift(const tj_tensor *t, const int32_t *split,
                              const int64_t (*frame)[2]) {
  if (t->base || !t->st.vals || !frame || !t->fmt.order) return -1;
  int outer = t->fmt.mode_order[0];
  int64_t row = 1;
  for (int m = 0; m < t->order; m++) {
    bool framed = split[m] > 0 && frame[m][1] > 0 && (frame[m][0] || frame[m][1] != 1);
    if (m == outer) {
      if (split[m] <= 0 || (framed && frame[m][1] != 1)) return -1;
      continue;
    }
    if (framed || (split[m] > 0 && t->dims[m] % split[m])) return -1;
    row *= t->dims[m];
  }
  return frame[outer][1] > 0 ? frame[outer][0] * row : 0;
}

tj_status rt_tensor_view_split(const tj_tensor *t, const int32_t *split,
                               const int64_t (*frame)[2], unsigned how, tj_tensor *v) {
  if (t->blocked || !rt_format_all_dense(&t->fmt))
    return rt_set_error(TJ_ERR_UNSUPPORTED, "tensor %s: an index of a blocked operand "
                        "splits one of its dims, which needs a dense tensor; convert %s to "
                        "a dense format", t->name, t->name);
  int64_t total = 1, padded_total = 1;
  bool padded = false;
  for (int m = 0; m < t->order; m++) {
    int64_t k = split[m] > 0 ? split[m] : 1;
    int64_t nb = split[m] > 0 ? split_blocks(t, split, frame, m) : t->dims[m];
    padded |= nb * k != t->dims[m] || t->base;   /* a slice: copied, in the split's order */
    padded |= split[m] > 0 && frame && frame[m][1] > 0 && (frame[m][0] || frame[m][1] != 1);
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
  memset(v->frame, 0, sizeof v->frame);
  for (int m = 0; m < t->order; m++) {
    if (split[m] > 0 && frame && frame[m][1] > 0) memcpy(v->frame[m], frame[m], sizeof frame[m]);
    if (split[m] > 0) {
      v->dims[first[m]] = split_blocks(t, split, frame, m);
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
  int64_t shift = padded && (how & RT_SPLIT_IN_PLACE) ? in_place_shift(t, split, frame) : -1;
  if (shift >= 0) {   /* t's array, shifted: the kernel reads only the view's positions */
    v->st.vals = (void *)((uintptr_t)t->st.vals - (uintptr_t)shift * (uintptr_t)rt_dtype_size(t->st.dtype));
    v->st.vals_len = v->st.vals_cap = padded_total;
    padded = false;
  }
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
    if (!(how & RT_SPLIT_NO_COPY_IN)) copy_padded(t, split, v, true);
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

bool rt_format_structured(const tj_format *f) {
  return f->ndims && f->order > 0 && f->levels[f->order - 1] == 'n';
}

void rt_format_unstructure(tj_format *f) {
  for (int l = 0; l < f->order; l++)
    if (f->levels[l] == 'n') f->levels[l] = 's', f->lvl_n[l] = 0;
}

tj_status rt_tensor_structured_temp(const tj_tensor *t, bool with_contents, tj_tensor **out) {
  tj_format f = t->fmt;
  rt_format_unstructure(&f);
  tj_tensor *w;
  tj_status st = tj_tensor_new(t->name, (tj_dtype)t->st.dtype, t->st.order, t->st.dims, &f, &w);
  if (st != TJ_OK) return st;
  st = with_contents && rt_tensor_is_packed(t) ? rt_tensor_assign_levels(w, t, false) : tj_tensor_pack(w);
  if (st != TJ_OK) {
    tj_tensor_free(w);
    return st;
  }
  *out = w;
  return TJ_OK;
}

tj_status rt_tensor_assign_levels(tj_tensor *dst, const tj_tensor *src, bool restore) {
  int64_t *c = NULL, n = 0, dc[TJ_MAX_ORDER];
  RtVal *v = NULL;
  tj_tensor *before = NULL;   /* restore: a failed repack gives dst back as it was */
  tj_status st = restore ? rt_tensor_copy(dst, &before) : TJ_OK;
  if (st != TJ_OK) return st;
  tj_storage old = dst->st;   /* the caller's arrays, if wrapped, are refilled */
  rt_storage_clear(&dst->st);
  free(dst->coo.coords), free(dst->coo.vals);
  memset(&dst->coo, 0, sizeof dst->coo);
  st = rt_tensor_level_entries_val(src, RT_DROP_NONE, &c, &v, &n);
  int nl = src->st.order;
  for (int64_t e = 0; e < n && st == TJ_OK; e++) {
    const int64_t *lc = c + e * nl;
    if (!dst->blocked) st = rt_coo_push_val(dst, lc, v[e]);
    else if (rt_block_to_dims(dst, lc, dc)) st = rt_coo_push_val(dst, dc, v[e]);
  }
  free(c), free(v);
  if (st == TJ_OK) st = tj_tensor_pack(dst);
  if (st == TJ_OK && old.foreign) rt_storage_keep_callers(&dst->st, &old);
  if (st != TJ_OK) {   /* dst empty, or as it was under restore; its buffer empty */
    free(dst->coo.coords), free(dst->coo.vals);
    memset(&dst->coo, 0, sizeof dst->coo);
    rt_storage_clear(&dst->st);
    if (before) {
      dst->st = before->st;
      rt_storage_detach(&before->st);
      if (old.foreign) rt_storage_keep_callers(&dst->st, &old);
    }
  }
  tj_tensor_free(before);
  return st;
}

/* The level of t storing dim m floordiv k, or -1. */
static int floordiv_level(const tj_format *f, int m) {
  for (int l = 0; l < f->order; l++)
    if (f->lvl_op[l] == TJ_LVL_FLOORDIV && f->mode_order[l] == m) return l;
  return -1;
}

bool rt_block_frame(const tj_tensor *t, int m, RtBlockFrame *fr) {
  const tj_tensor *b = t->base ? t->base : t;
  int l = floordiv_level(&b->ufmt, m);
  if (l < 0) return false;
  int64_t k = b->ufmt.lvl_k[l], ext = b->dims[m];
  const int64_t *sl = t->base ? t->fmt.slice[m] : NULL;
  int64_t o = sl && sl[2] ? sl[0] : 0, n = sl && sl[2] ? sl[1] : ext, st = sl && sl[2] ? sl[2] : 1;
  *fr = (RtBlockFrame){.k = k, .first = o / k, .lead = o % k, .stride = st, .size = n};
  fr->nb = n ? (fr->lead + (n - 1) * st) / k + 1 : 0;
  fr->masked = n && !(fr->lead == 0 && st == 1 && (n % k == 0 || o + n == ext));
  return true;
}

/* The level of t storing dim m mod k, or -1. */
static int mod_level(const tj_format *f, int m) {
  for (int l = 0; l < f->order; l++)
    if (f->lvl_op[l] == TJ_LVL_MOD && f->mode_order[l] == m) return l;
  return -1;
}

bool rt_block_windowed(const tj_tensor *t, int m) {
  const tj_tensor *b = t->base ? t->base : t;
  int lb = floordiv_level(&b->ufmt, m), li = mod_level(&b->ufmt, m);
  return lb >= 0 && li >= 0 && (b->ufmt.levels[li] == 'd' || b->ufmt.levels[li] == 'n');
}

/* Gives mod level li of level view v the window of frame fr, its blocks
 * at level lb. */
static void set_window(tj_format *f, int lb, int li, const RtBlockFrame *fr) {
  f->win[li] = (tj_window){.block = lb + 1, .k = (int32_t)fr->k, .lead = fr->lead,
                           .size = fr->size, .stride = fr->stride};
}

void rt_tensor_view_levels_sliced(const tj_tensor *t, uint32_t windowed, tj_tensor *v) {
  const tj_tensor *b = t->base;
  rt_tensor_view_levels(b, v);
  v->name = t->name;   /* borrowed, as the arrays are */
  tj_format *f = &v->ufmt;
  for (int l = 0; l < f->order; l++) {
    int m = b->ufmt.mode_order[l];
    const int64_t *sl = t->fmt.slice[m];
    RtBlockFrame fr;
    if (!sl[2] || b->ufmt.lvl_op[l] == TJ_LVL_MOD) continue;
    if (b->ufmt.lvl_op[l] == TJ_LVL_DIM) {
      memcpy(f->slice[l], sl, sizeof f->slice[l]);
      v->dims[l] = sl[1];
    } else if (rt_block_frame(t, m, &fr) && (fr.first || fr.nb != v->dims[l])) {
      f->slice[l][0] = fr.first, f->slice[l][1] = fr.nb, f->slice[l][2] = 1;
      v->dims[l] = fr.nb;
    }
    if (b->ufmt.lvl_op[l] == TJ_LVL_FLOORDIV && (windowed >> m & 1) && fr.masked &&
        rt_block_windowed(t, m))
      set_window(f, l, mod_level(&b->ufmt, m), &fr);
  }
  v->fmt = *f;
  memcpy(v->st.dims, v->dims, sizeof v->st.dims);
  memcpy(v->st.slice, f->slice, sizeof v->st.slice);
}

tj_status rt_block_frame_mask(const char *name, const RtBlockFrame *fr, tj_tensor **out) {
  tj_format f = tj_format_dense(2);
  tj_tensor *m = NULL;
  tj_status st = tj_tensor_new(name, TJ_BOOL, 2, (int64_t[]){fr->nb, fr->k}, &f, &m);
  for (int64_t i = 0; st == TJ_OK && i < fr->size; i++) {
    int64_t j = fr->lead + i * fr->stride;
    st = tj_tensor_insert(m, (int64_t[]){j / fr->k, j % fr->k}, 1);
  }
  if (st == TJ_OK) st = tj_tensor_pack(m);
  if (st != TJ_OK) {
    tj_tensor_free(m);
    return st;
  }
  *out = m;
  return TJ_OK;
}

void rt_tensor_become_levels(tj_tensor *t) {
  t->blocked = false;
  t->order = t->fmt.order;
  memcpy(t->dims, t->st.dims, sizeof t->dims);
  t->ufmt = t->fmt;
}
