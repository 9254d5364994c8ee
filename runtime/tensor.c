/* Tensor objects: creation, the COO insertion buffer, accessors, print.
 *
 * tj_tensor_new resolves the format into the kernel-visible tj_storage:
 * level kinds and flags from the letters, map[l] = dim mode_order[l],
 * and the index widths (32 bits by default, see tensor.h). Values are
 * stored in the tensor's dtype; the runtime moves them exactly as RtVal
 * (value.c) and the double-valued API through rt_storage_val /
 * rt_storage_set_val. Storage arrays the caller wrapped are foreign
 * (abi.h): freeing a storage leaves them alone.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tensor.h"

static void advise_huge(void *p, size_t bytes) {
  if (bytes < RT_HUGE_BYTES) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + bytes) & ~(page - 1);
  if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: failure is harmless */
}

/* Tensor arrays start on a cache line: malloc puts a large block 16 bytes
 * past a page boundary, so every 64-byte vector load of a dense row (SpMM's
 * B and C) would straddle two lines, and how a run fared would depend on
 * where the allocator put each operand. */
#define RT_ALIGN ((size_t)64)

void *rt_array_new(int64_t n, size_t w, bool zero) {
  if (n < 0 || (n > 0 && (uint64_t)n > (SIZE_MAX - RT_ALIGN) / w)) return NULL;
  size_t bytes = (size_t)(n ? n : 1) * w;
  void *p = aligned_alloc(RT_ALIGN, (bytes + RT_ALIGN - 1) & ~(RT_ALIGN - 1));
  if (!p) return NULL;
  advise_huge(p, bytes);   /* before the first touch */
  if (zero) memset(p, 0, bytes);
  return p;
}

bool rt_array_grow(void **p, int64_t old, int64_t n, size_t w, bool zero) {
  if (n < old || (uint64_t)n > (SIZE_MAX - RT_ALIGN) / w) return false;
  size_t ob = (size_t)old * w, nb = (size_t)(n ? n : 1) * w;
  char *q;
  if (*p && ob > RT_REMAP_BYTES) {
    /* a mapped block moves by mremap, keeping its page offset (so its
     * alignment) and the advice, without a copy */
    q = realloc(*p, nb);
    if (!q) return false;
    if ((uintptr_t)q % RT_ALIGN) {
      char *r = rt_array_new(n, w, false);
      if (!r) return *p = q, false;
      memcpy(r, q, ob);
      free(q);
      q = r;
    }
  } else {
    /* a fresh aligned array (realloc keeps no alignment), advised before
     * the copy touches it */
    q = rt_array_new(n, w, false);
    if (!q) return false;
    if (*p && ob) memcpy(q, *p, ob);
    free(*p);
  }
  if (zero) memset(q + ob, 0, nb - ob);
  *p = q;
  return true;
}

tj_storage *rt_tensor_storage(tj_tensor *t) {
  rt_view_sync(t);
  return &t->st;
}

bool rt_tensor_is_packed(const tj_tensor *t) {
  return (t->base ? t->base->st.vals : t->st.vals) != NULL;
}

static void count_one(void *ctx, const int64_t *coord, int64_t p) {
  (void)coord, (void)p;
  ++*(int64_t *)ctx;
}

/* vals_len, but under a loose_compressed level the positions its segments
 * reach: the gaps between segments hold no entries. */
int64_t rt_storage_nnz(const tj_storage *s) {
  for (int l = 0; l < s->order; l++)
    if (s->levels[l].kind == TJ_LVL_LOOSE_COMPRESSED) {
      int64_t n = 0;
      rt_storage_walk(s, count_one, &n);
      return n;
    }
  return s->vals_len;
}

void rt_storage_detach(tj_storage *s) {
  for (int l = 0; l < s->order; l++) {
    tj_level_storage *lv = &s->levels[l];
    lv->pos = lv->crd = NULL;
    lv->pos_len = lv->pos_cap = lv->crd_len = lv->crd_cap = 0;
  }
  s->vals = NULL;
  s->vals_len = s->vals_cap = 0;
  s->foreign = 0;
}

tj_status rt_storage_clear(tj_storage *s) {
  for (int l = 0; l < s->order; l++) {
    if (!(s->foreign & TJ_FOREIGN_POS(l))) free(s->levels[l].pos);
    if (!(s->foreign & TJ_FOREIGN_CRD(l))) free(s->levels[l].crd);
  }
  if (!(s->foreign & TJ_FOREIGN_VALS)) free(s->vals);
  rt_storage_detach(s);
  return TJ_OK;
}

double rt_storage_val(const tj_storage *s, int64_t i) {
  return rt_val_to_double(s->dtype, rt_storage_get(s, i));
}

void rt_storage_set_val(tj_storage *s, int64_t i, double v) {
  rt_storage_put(s, i, rt_val_from_double(s->dtype, v));
}

/* The leading dense levels are allocated whole (values, or the next
 * level's positions): refused up front when they cannot fit in memory. */
static tj_status dense_prefix_fits(const tj_tensor *t, tj_dtype dtype) {
  const tj_storage *s = &t->st;
  double slots = 1;
  int l = 0;
  for (; l < s->order && s->levels[l].kind == TJ_LVL_DENSE; l++) slots *= (double)s->levels[l].size;
  double bytes = slots * (l == s->order ? (double)rt_dtype_size(dtype) : (double)s->pos_width);
  if (bytes < (double)(1u << 30)) return TJ_OK;   /* the message costs more than the check */
  char what[160];
  snprintf(what, sizeof what, "tensor %s: its dense levels (%.3g %s)", t->name, slots,
           l == s->order ? "values" : "positions");
  return rt_check_fits(what, bytes);
}

/* Fills t->st's static part (kinds, flags, sizes, map, widths) from
 * t->fmt; resolves default widths into t->fmt. */
static tj_status setup_storage(tj_tensor *t, tj_dtype dtype,
                               const int64_t *dims) {
  tj_format *f = &t->fmt;
  tj_storage *s = &t->st;
  s->order = f->order;
  s->dtype = dtype;
  bool wide = false;
  for (int l = 0; l < f->order; l++) {
    int d = f->mode_order[l];
    const RtLevelType *lt = rt_level_type(f->levels[l]);
    tj_level_storage *lv = &s->levels[l];
    s->dims[d] = dims[d];
    s->map[l] = (tj_lvl_expr){.dim = d, .op = TJ_LX_DIM, .k = 0};
    lv->size = dims[d];
    lv->kind = lt->kind;
    lv->flags = (lt->flags & ~TJ_LVL_NONUNIQUE) |
                (rt_format_level_nonunique(f, l) ? TJ_LVL_NONUNIQUE : 0);
    lv->n = lt->kind == TJ_LVL_N_OUT_OF_M ? f->lvl_n[l] : 0;
    if (lt->kind != TJ_LVL_DENSE && dims[d] > INT32_MAX) wide = true;
  }
  if (f->crd_width == 0) f->crd_width = wide ? 64 : 32;
  for (int l = 0; l < f->order; l++) {   /* every coordinate fits crd_width */
    int64_t size = dims[f->mode_order[l]];
    if (rt_level_type(f->levels[l])->kind != TJ_LVL_DENSE && size - 1 > rt_idx_max(f->crd_width / 8))
      return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d has extent %" PRId64 "; its "
                          "coordinates up to %" PRId64 " do not fit crdWidth %d (at most %"
                          PRId64 ")", t->name, l, size, size - 1, f->crd_width,
                          rt_idx_max(f->crd_width / 8));
  }
  if (f->pos_width == 0) f->pos_width = 32;
  s->pos_width = f->pos_width / 8;
  s->crd_width = f->crd_width / 8;
  return dense_prefix_fits(t, dtype);
}

tj_status tj_tensor_new(const char *name, tj_dtype dtype, int order,
                        const int64_t *dims, const tj_format *fmt,
                        tj_tensor **out) {
  if (!out) return rt_set_error(TJ_ERR_INVALID, "tj_tensor_new: out is NULL");
  *out = NULL;
  if (order < 0 || order > TJ_MAX_ORDER)
    return rt_set_error(TJ_ERR_SHAPE, "tensor %s: order %d is outside 0..%d",
                        name ? name : "", order, TJ_MAX_ORDER);
  if (order > 0 && !dims)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_new: dims is NULL");
  if (!rt_dtype_valid(dtype))
    return rt_set_error(TJ_ERR_DTYPE, "tensor %s: unknown dtype %d",
                        name ? name : "", (int)dtype);
  for (int d = 0; d < order; d++)
    if (dims[d] < 0)
      return rt_set_error(TJ_ERR_SHAPE, "tensor %s: dim %d is negative "
                          "(%" PRId64 ")", name ? name : "", d, dims[d]);
  tj_format f = fmt ? *fmt : tj_format_dense(order);
  if (rt_format_sliced(&f)) {
    char fs[128];
    tj_format_print(&f, fs, sizeof fs);
    return rt_set_error(TJ_ERR_FORMAT, "tensor %s: format %s has slices (dimSlices), "
                        "which describe a view: make it with tj_tensor_slice or "
                        "tj_tensor_view over a stored tensor", name ? name : "", fs);
  }
  tj_status st = rt_format_check(&f, order);
  if (st != TJ_OK) return st;
  tj_tensor *t = calloc(1, sizeof *t);
  if (!t || !(t->name = strdup(name ? name : ""))) {
    free(t);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory creating a tensor");
  }
  t->order = order;
  for (int d = 0; d < order; d++) t->dims[d] = dims[d];
  t->blocked = rt_format_blocked(&f);
  int64_t edims[TJ_MAX_ORDER];
  if (t->blocked) rt_format_expand(&f, dims, &t->fmt, edims);
  else t->fmt = f;
  st = setup_storage(t, dtype, t->blocked ? edims : dims);
  if (st != TJ_OK) {
    tj_tensor_free(t);
    return st;
  }
  t->ufmt = f;
  t->ufmt.pos_width = t->fmt.pos_width, t->ufmt.crd_width = t->fmt.crd_width;
  *out = t;
  return TJ_OK;
}

void tj_tensor_free(tj_tensor *t) {
  if (!t) return;
  if (t->owns_base) tj_tensor_free((tj_tensor *)t->base);
  rt_tensor_touch(t);
  rt_storage_clear(&t->st);
  for (int i = 0; i < t->adopted.n; i++) t->adopted.free_fn(t->adopted.arrays[i], t->adopted.user);
  free(t->coo.coords);
  free(t->coo.vals);
  free(t->name);
  free(t);
}

tj_status rt_coo_push_val(tj_tensor *t, const int64_t *coord, RtVal v) {
  if (t->base) return rt_check_writable(t, "inserted into");
  RtCoo *c = &t->coo;
  int order = t->fmt.order;
  if (c->n == c->cap) {
    int64_t cap = c->cap ? c->cap * 2 : 64;
    int64_t *nc = realloc(c->coords, (size_t)(cap * (order ? order : 1)) *
                                         sizeof *nc);
    if (nc) c->coords = nc;
    RtVal *nv = nc ? realloc(c->vals, (size_t)cap * sizeof *nv) : NULL;
    if (!nv) return rt_set_error(TJ_ERR_NOMEM, "out of memory inserting "
                                 "into tensor %s", t->name);
    c->vals = nv;
    c->cap = cap;
  }
  if (t->blocked) rt_block_to_levels(t, coord, c->coords + c->n * order);
  else if (order > 0)
    memcpy(c->coords + c->n * order, coord, (size_t)order * sizeof *coord);
  c->vals[c->n++] = v;
  return TJ_OK;
}

tj_status rt_coo_push(tj_tensor *t, const int64_t *coord, double v) {
  return rt_coo_push_val(t, coord, rt_val_from_double(t->st.dtype, v));
}

tj_status rt_check_coord(const tj_tensor *t, const int64_t *coord) {
  for (int d = 0; d < t->order; d++)
    if (coord[d] < 0 || coord[d] >= t->dims[d])
      return rt_set_error(TJ_ERR_SHAPE, "tensor %s: coordinate %" PRId64
                          " in mode %d is out of range 0..%" PRId64, t->name,
                          coord[d], d, t->dims[d] - 1);
  return TJ_OK;
}

tj_status rt_check_writable(const tj_tensor *t, const char *what) {
  if (!t->base) return TJ_OK;
  return rt_set_error(TJ_ERR_INVALID, "tensor %s is a view (a slice of %s) and cannot be %s; "
                      "convert it to a tensor of its own first", t->name, t->base->name, what);
}

tj_status tj_tensor_insert(tj_tensor *t, const int64_t *coord, double value) {
  if (!t || (!coord && t->order > 0))
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_insert: NULL argument");
  tj_status st = rt_check_coord(t, coord);
  return st == TJ_OK ? rt_coo_push(t, coord, value) : st;
}

const char *tj_tensor_name(const tj_tensor *t) { return t->name; }

tj_status tj_tensor_rename(tj_tensor *t, const char *name) {
  if (!t || !name)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_rename: NULL argument");
  char *n = strdup(name);
  if (!n) return rt_set_error(TJ_ERR_NOMEM, "out of memory renaming a tensor");
  free(t->name);
  t->name = n;
  return TJ_OK;
}

int tj_tensor_order(const tj_tensor *t) { return t->order; }

int64_t tj_tensor_dim(const tj_tensor *t, int mode) {
  return mode >= 0 && mode < t->order ? t->dims[mode] : -1;
}

tj_dtype tj_tensor_dtype(const tj_tensor *t) { return (tj_dtype)t->st.dtype; }

const tj_format *tj_tensor_format(const tj_tensor *t) { return &t->ufmt; }

int64_t tj_tensor_nnz(const tj_tensor *t) {
  if (!t->base) return rt_storage_nnz(&t->st);
  int64_t *coords, n = 0;   /* a view: the stored entries inside its slice */
  RtVal *vals;
  if (rt_view_entries(t, RT_DROP_NONE, &coords, &vals, &n) != TJ_OK) return 0;
  free(coords), free(vals);
  return n;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

int64_t tj_tensor_bytes(const tj_tensor *t) {
  if (t->base) return 0;   /* a view holds no arrays of its own */
  const tj_storage *s = &t->st;
  int64_t b = max64(s->vals_len, s->vals_cap) * rt_dtype_size(s->dtype);
  for (int l = 0; l < s->order; l++) {
    b += max64(s->levels[l].pos_len, s->levels[l].pos_cap) * s->pos_width;
    b += max64(s->levels[l].crd_len, s->levels[l].crd_cap) * s->crd_width;
  }
  return b;
}

void tj_tensor_print(const tj_tensor *t, void *file, int64_t max_entries) {
  FILE *out = file ? file : stdout;
  char fs[640];
  tj_format_print(&t->ufmt, fs, sizeof fs);
  fprintf(out, "%s: %s ", t->name, tj_dtype_name(tj_tensor_dtype(t)));
  for (int d = 0; d < t->order; d++)
    fprintf(out, "%s%" PRId64, d ? "x" : "", t->dims[d]);
  fprintf(out, "%s%s nnz=%" PRId64 "%s%s\n", t->order ? " " : "scalar ", fs,
          tj_tensor_nnz(t), t->base ? " view of " : "", t->base ? t->base->name : "");
  int64_t *coords = NULL, n = 0;
  double *vals = NULL;
  if (rt_tensor_entries(t, RT_DROP_NONE, &coords, &vals, &n) != TJ_OK) {
    fprintf(out, "  (entries unavailable: %s)\n", tj_last_error());
    return;
  }
  int64_t shown = max_entries > 0 && max_entries < n ? max_entries : n;
  for (int64_t e = 0; e < shown; e++) {
    fputs("  (", out);
    for (int d = 0; d < t->order; d++)
      fprintf(out, "%s%" PRId64, d ? "," : "", coords[e * t->order + d]);
    fprintf(out, ") %.17g\n", vals[e]);
  }
  if (shown < n) fprintf(out, "  ... (%" PRId64 " more)\n", n - shown);
  free(coords);
  free(vals);
}

tj_status rt_check_positions(const char *name, int l, int64_t n, int32_t w) {
  if (n <= rt_idx_max(w)) return TJ_OK;
  return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d has %" PRId64 " positions, more "
                      "than posWidth %d holds (at most %" PRId64 "); use a wider posWidth",
                      name, l, n, 8 * w, rt_idx_max(w));
}
