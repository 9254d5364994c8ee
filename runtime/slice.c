/* Slices: views over a stored tensor without copying (MLIR's dimSlices).
 *
 * A view is a tensor whose format is its base's plus, per dim, an offset,
 * a size and a stride (tj_format.slice): its coordinate i along dim d is
 * the base's offset + i * stride. It owns no arrays: rt_view_sync copies
 * the base's storage struct into the view's at each use (every array
 * marked foreign, so nothing is freed or grown through the view), with
 * dims set to the slice sizes; levels keep the base's sizes, which a
 * kernel's dense locate needs (lower/level.c maps coordinates through the
 * format's slices). The runtime reads a view through its base: entries
 * are the base's inside the slice, mapped to view coordinates (the map is
 * increasing, so the base's level order is kept); lookup maps the point
 * the other way. A view of a blocked tensor (BSR) is read the same way;
 * kernels read it through the level view jit/driver_blocked.c builds
 * (rt_tensor_view_levels_sliced).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "tensor.h"

bool tj_tensor_is_view(const tj_tensor *t) { return t && t->base; }

void rt_view_sync(tj_tensor *v) {
  if (!v->base) return;
  v->st = v->base->st;
  v->st.foreign = ~0u;   /* the base's arrays: never freed or grown here */
  if (v->blocked) {   /* the base's levels; kernels read their level view (driver_blocked.c) */
    memset(v->st.slice, 0, sizeof v->st.slice);
    return;
  }
  for (int d = 0; d < v->order; d++) v->st.dims[d] = v->dims[d];
  memcpy(v->st.slice, v->fmt.slice, sizeof v->st.slice);
}

bool rt_view_from_base(const tj_tensor *v, const int64_t *bc, int64_t *vc) {
  for (int d = 0; d < v->order; d++) {
    const int64_t *sl = v->fmt.slice[d];
    if (!sl[2]) {
      vc[d] = bc[d];
      continue;
    }
    int64_t c = bc[d] - sl[0];
    if (c < 0 || c % sl[2] != 0 || c / sl[2] >= sl[1]) return false;
    vc[d] = c / sl[2];
  }
  return true;
}

void rt_view_to_base(const tj_tensor *v, const int64_t *vc, int64_t *bc) {
  for (int d = 0; d < v->order; d++) {
    const int64_t *sl = v->fmt.slice[d];
    bc[d] = sl[2] ? sl[0] + vc[d] * sl[2] : vc[d];
  }
}

tj_status rt_view_entries(const tj_tensor *v, RtDrop drop, int64_t **coords,
                          RtVal **vals, int64_t *n) {
  tj_status st = rt_tensor_entries_val(v->base, drop, coords, vals, n);
  if (st != TJ_OK) return st;
  int order = v->order;
  int64_t k = 0, c[TJ_MAX_ORDER];
  for (int64_t e = 0; e < *n; e++) {
    if (!rt_view_from_base(v, *coords + e * order, c)) continue;
    memcpy(*coords + k * order, c, (size_t)order * sizeof *c);
    (*vals)[k++] = (*vals)[e];
  }
  *n = k;
  return TJ_OK;
}

/* The slices of fmt fit base: same format apart from slices, each slice
 * inside its dim's extent. */
static tj_status check_view(const tj_tensor *base, const tj_format *fmt) {
  if (base->base)
    return rt_set_error(TJ_ERR_UNSUPPORTED, "tensor %s is a view already; slice its base "
                        "(a view of a view is not supported)", base->name);
  tj_format a = *fmt, b = base->ufmt;
  rt_format_unslice(&a), rt_format_unslice(&b);
  a.pos_width = b.pos_width, a.crd_width = b.crd_width;   /* 0 = the base's */
  if (memcmp(&a, &b, sizeof a) != 0) {
    char fa[128], fb[128];
    tj_format_print(fmt, fa, sizeof fa), tj_format_print(&base->ufmt, fb, sizeof fb);
    return rt_set_error(TJ_ERR_FORMAT, "a view of tensor %s has its format (%s) with "
                        "slices, not %s", base->name, fb, fa);
  }
  tj_status st = rt_format_check(fmt, base->order);
  if (st != TJ_OK) return st;
  for (int d = 0; d < base->order; d++) {
    const int64_t *sl = fmt->slice[d];
    int64_t ext = base->dims[d];
    if (!sl[2]) continue;
    /* the last coordinate offset + (size - 1) * stride, without overflow */
    bool past = sl[0] > ext || (sl[1] > 0 && (sl[0] >= ext || (sl[1] - 1) > (ext - 1 - sl[0]) / sl[2]));
    if (past)
      return rt_set_error(TJ_ERR_SHAPE, "slice (%" PRId64 ", %" PRId64 ", %" PRId64 ") of "
                          "tensor %s's dim %d reaches past its extent %" PRId64
                          " (offset + (size - 1) * stride must be < %" PRId64 ")",
                          sl[0], sl[1], sl[2], base->name, d, ext, ext);
  }
  return TJ_OK;
}

static bool dynamic_dim(const int64_t *sl) {
  return sl[0] == TJ_SLICE_DYNAMIC || sl[1] == TJ_SLICE_DYNAMIC || sl[2] == TJ_SLICE_DYNAMIC;
}

/* fmt with each dynamic ('?') slice value replaced by its default: offset
 * 0, stride 1, the size reaching base's extent. */
static tj_format default_values(const tj_tensor *base, const tj_format *fmt) {
  tj_format f = *fmt;
  for (int d = 0; d < base->order && d < TJ_MAX_ORDER; d++) {
    int64_t *sl = f.slice[d];
    if (!dynamic_dim(sl)) continue;
    if (sl[0] == TJ_SLICE_DYNAMIC) sl[0] = 0;
    if (sl[2] == TJ_SLICE_DYNAMIC) sl[2] = 1;
    if (sl[1] == TJ_SLICE_DYNAMIC)
      sl[1] = sl[0] < base->dims[d] ? (base->dims[d] - sl[0] + sl[2] - 1) / sl[2] : 0;
  }
  return f;
}

tj_status tj_tensor_view(const tj_tensor *base, const char *name, const tj_format *dfmt,
                         tj_tensor **out) {
  if (!base || !dfmt || !out)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_view: NULL argument");
  *out = NULL;
  tj_status st = base->order <= TJ_MAX_ORDER ? rt_format_check(dfmt, base->order) : TJ_OK;
  if (st != TJ_OK) return st;
  tj_format values = default_values(base, dfmt), *fmt = &values;
  st = check_view(base, fmt);
  if (st != TJ_OK) return st;
  int64_t dims[TJ_MAX_ORDER];
  for (int d = 0; d < base->order; d++) dims[d] = fmt->slice[d][2] ? fmt->slice[d][1] : base->dims[d];
  tj_tensor *v;
  st = tj_tensor_new(name ? name : base->name, tj_tensor_dtype(base), base->order, dims,
                     &base->ufmt, &v);
  if (st != TJ_OK) return st;
  rt_storage_clear(&v->st);
  memcpy(v->fmt.slice, fmt->slice, sizeof v->fmt.slice);
  for (int d = 0; d < base->order; d++) {   /* a slice of the whole dim is none: no code */
    int64_t *sl = v->fmt.slice[d];
    if (!dynamic_dim(dfmt->slice[d]) && sl[0] == 0 && sl[1] == base->dims[d] && sl[2] == 1)
      sl[1] = sl[2] = 0;
  }
  /* the format kernels compile for: '?' where the values are the view's */
  memcpy(v->ufmt.slice, v->fmt.slice, sizeof v->ufmt.slice);
  for (int d = 0; d < base->order; d++)
    if (dynamic_dim(dfmt->slice[d])) memcpy(v->ufmt.slice[d], dfmt->slice[d], sizeof v->ufmt.slice[d]);
  v->base = base;
  rt_view_sync(v);
  *out = v;
  return TJ_OK;
}

tj_status tj_tensor_slice(const tj_tensor *base, const char *name, const int64_t *offset,
                          const int64_t *size, const int64_t *stride, tj_tensor **out) {
  if (!base || !offset || !size || !out)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_slice: NULL argument");
  tj_format f = base->ufmt;
  for (int d = 0; d < base->order; d++) {
    f.slice[d][0] = offset[d], f.slice[d][1] = size[d];
    f.slice[d][2] = stride ? stride[d] : 1;
    if (f.slice[d][2] < 1)
      return rt_set_error(TJ_ERR_FORMAT, "tj_tensor_slice: dim %d has stride %" PRId64
                          " (expected >= 1)", d, f.slice[d][2]);
  }
  return tj_tensor_view(base, name, &f, out);
}

tj_status tj_tensor_slice_set(tj_tensor *v, const int64_t *offset, const int64_t *size,
                              const int64_t *stride) {
  if (!v || !offset || !size)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_slice_set: NULL argument");
  bool any = false;
  for (int d = 0; v->base && d < v->order; d++) any |= dynamic_dim(v->ufmt.slice[d]);
  if (!any)
    return rt_set_error(TJ_ERR_INVALID, "tensor %s %s no dynamic ('?') slice values to set; "
                        "make a view with '?' in its slices (\"ds[?:?:1,:]\")", v->name,
                        v->base ? "has" : "is no view and has");
  static const char *const what[3] = {"offset", "size", "stride"};
  tj_format f = v->ufmt;   /* the dims' format (a blocked view's fmt is its levels') */
  memcpy(f.slice, v->fmt.slice, sizeof f.slice);
  for (int d = 0; d < v->order; d++) {
    const int64_t *u = v->ufmt.slice[d];
    int64_t given[3] = {offset[d], size[d], stride ? stride[d] : 1};
    if (!u[2]) {
      if (given[0] != 0 || given[1] != v->base->dims[d] || given[2] != 1)
        return rt_set_error(TJ_ERR_INVALID, "tj_tensor_slice_set: view %s's dim %d is not "
                            "sliced; give it (0, %" PRId64 ", 1), not (%" PRId64 ", %" PRId64
                            ", %" PRId64 ")", v->name, d, v->base->dims[d], given[0],
                            given[1], given[2]);
      continue;
    }
    for (int c = 0; c < 3; c++)
      if (u[c] != TJ_SLICE_DYNAMIC && u[c] != given[c])
        return rt_set_error(TJ_ERR_INVALID, "tj_tensor_slice_set: view %s's dim %d has its "
                            "%s fixed at %" PRId64 " by its format; got %" PRId64, v->name, d,
                            what[c], u[c], given[c]);
    if (given[0] < 0 || given[1] < 0 || given[2] < 1)
      return rt_set_error(TJ_ERR_INVALID, "tj_tensor_slice_set: dim %d's slice (%" PRId64
                          ", %" PRId64 ", %" PRId64 ") needs offset >= 0, size >= 0 and "
                          "stride >= 1", d, given[0], given[1], given[2]);
    memcpy(f.slice[d], given, sizeof given);
  }
  tj_status st = check_view(v->base, &f);
  if (st != TJ_OK) return st;
  for (int d = 0; d < v->order; d++)
    if (f.slice[d][2]) v->dims[d] = f.slice[d][1];
  memcpy(v->fmt.slice, f.slice, sizeof v->fmt.slice);
  rt_view_sync(v);
  return TJ_OK;
}
