/* Tensors over the caller's arrays: wrap (borrow), adopt (own), validate,
 * and read a tensor's arrays back without copying.
 *
 * A wrapped tensor is an ordinary tensor whose storage points at the
 * caller's pos/crd/vals arrays, each marked foreign in tj_storage.foreign,
 * so nothing in tensorjit frees or reallocs them (abi.h). Before the
 * pointers are installed, the lengths are checked level by level (always:
 * a kernel trusts them for its loop bounds) and then, unless the caller
 * says TJ_WRAP_TRUSTED, every position and coordinate: a malformed array
 * is an error value naming its first bad entry, never a kernel reading
 * out of bounds. Dense data may come with strides, accepted when they are
 * a permutation of a contiguous layout (that permutation is the mode
 * order): the kernel ABI has no strides, so anything else is refused.
 * A blocked format (BSR) is wrapped as the tensor of its levels
 * (runtime/blocked.c): the arrays are per level, as tj_tensor_arrays
 * hands them out (BSR 4x4: pos and crd of level 1, the block columns,
 * and 16 values per stored block), checked against the level extents
 * ceil(m/4), ceil(n/4), 4, 4; values in a block's padding past an extent
 * are never entries and must be zero (checked unless trusted: a sum over
 * the blocks, `s = A(i,j)`, reads them).
 * An n_out_of_m level takes a crd array only, n entries per parent
 * position, each block's ascending and unique (2:4 over m x n: crd and
 * vals of m * ceil(n/4) * 2 entries).
 * A loose_compressed level takes MLIR's arrays as they are: a lo and a hi
 * per parent position (pos of 2 * parents entries), segments in any order
 * with gaps, crd as long as the caller's (the next level's parents, or
 * vals, count its gap positions too). Validation checks each segment's
 * bounds and that no position lies in two, and from there down checks
 * only positions some segment reaches (a live mask per level): gaps and
 * what lies below them may hold anything, as no reader visits them.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

static const char *kind_name(const tj_level_storage *lv) {
  return lv->kind == TJ_LVL_DENSE ? "dense"
         : lv->kind == TJ_LVL_COMPRESSED ? "compressed"
         : lv->kind == TJ_LVL_LOOSE_COMPRESSED ? "loose_compressed"
         : lv->kind == TJ_LVL_N_OUT_OF_M ? "n_out_of_m" : "singleton";
}

/* The mode order of a contiguous layout with these element strides:
 * extent-1 dims outermost, then by decreasing stride. */
static tj_status strided_order(const char *name, int order, const int64_t *dims,
                               const int64_t *strides, int32_t *mode_order) {
  int n = 0;
  bool empty = false;
  for (int d = 0; d < order; d++) {
    if (strides[d] < 0)
      return rt_set_error(TJ_ERR_UNSUPPORTED, "tensor %s: dim %d has a negative stride "
                          "(%" PRId64 "); copy the array to a contiguous one", name, d, strides[d]);
    if (dims[d] <= 1) mode_order[n++] = d;
    empty |= dims[d] == 0;
  }
  int first = n;
  for (int d = 0; d < order; d++) {
    if (dims[d] <= 1) continue;
    int at = n++;
    while (at > first && strides[mode_order[at - 1]] < strides[d]) {
      mode_order[at] = mode_order[at - 1];
      at--;
    }
    mode_order[at] = d;
  }
  if (empty) return TJ_OK;
  int64_t expect = 1;
  for (int l = order - 1; l >= first; l--) {
    int d = mode_order[l];
    if (strides[d] != expect)
      return rt_set_error(TJ_ERR_UNSUPPORTED, "tensor %s: dim %d has stride %" PRId64
                          " but a contiguous layout needs %" PRId64 " there (kernels "
                          "read dense arrays without gaps); copy the array to a "
                          "contiguous one", name, d, strides[d], expect);
    expect *= dims[d];
  }
  return TJ_OK;
}

/* The format of the wrapped tensor: a's, or all dense in the order its
 * strides give; widths 0 mean 32 (the caller's arrays have a width). */
static tj_status wrap_format(const char *name, const tj_arrays *a, tj_format *f) {
  *f = a->fmt ? *a->fmt : tj_format_dense(a->order);
  if (a->strides) {
    if (a->fmt && !rt_format_all_dense(a->fmt))
      return rt_set_error(TJ_ERR_INVALID, "tensor %s: strides describe dense data, but "
                          "the format has sparse levels", name);
    if (a->order < 0 || a->order > TJ_MAX_ORDER || !a->dims)
      return rt_set_error(TJ_ERR_INVALID, "tensor %s: bad order or NULL dims", name);
    *f = tj_format_dense(a->order);
    tj_status st = strided_order(name, a->order, a->dims, a->strides, f->mode_order);
    if (st != TJ_OK) return st;
  }
  if (f->pos_width == 0) f->pos_width = 32;
  if (f->crd_width == 0) f->crd_width = 32;
  return TJ_OK;
}

/* Checks the array lengths against the levels, top down (O(order)). */
static tj_status check_lengths(const tj_tensor *t, const tj_arrays *a) {
  const tj_storage *s = &t->st;
  int64_t P = 1;
  for (int l = 0; l < s->order; l++) {
    const tj_level_storage *lv = &s->levels[l];
    if (lv->kind == TJ_LVL_DENSE) {
      if (a->pos[l] || a->crd[l])
        return rt_set_error(TJ_ERR_INVALID, "tensor %s: level %d is dense and takes no "
                            "pos or crd array", t->name, l);
      if (lv->size > 0 && P > INT64_MAX / lv->size)
        return rt_set_error(TJ_ERR_SHAPE, "tensor %s: dense level %d would hold more "
                            "than 2^63 positions", t->name, l);
      P *= lv->size;
      continue;
    }
    if (lv->kind == TJ_LVL_COMPRESSED) {
      tj_status fits = rt_check_positions(t->name, l, a->crd_len[l], s->pos_width);
      if (fits != TJ_OK) return fits;
      if (!a->pos[l] || a->pos_len[l] != P + 1)
        return rt_set_error(TJ_ERR_SHAPE, "tensor %s: level %d (compressed) needs a pos "
                            "array of %" PRId64 " entries (parent positions + 1), got %"
                            PRId64 "%s", t->name, l, P + 1, a->pos_len[l],
                            a->pos[l] ? "" : " (NULL)");
      int64_t first = rt_idx(a->pos[l], s->pos_width, 0);
      int64_t last = rt_idx(a->pos[l], s->pos_width, P);
      if (first != 0)
        return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d (compressed): pos[0] = %"
                            PRId64 ", must be 0", t->name, l, first);
      if (last != a->crd_len[l])
        return rt_set_error(TJ_ERR_SHAPE, "tensor %s: level %d (compressed): pos[%" PRId64
                            "] = %" PRId64 " but the crd array has %" PRId64 " entries",
                            t->name, l, P, last, a->crd_len[l]);
    } else if (lv->kind == TJ_LVL_LOOSE_COMPRESSED) {
      /* lo and hi per parent position; each segment's bounds are content
       * (validate), the caller's crd and vals may hold gaps */
      tj_status fits = rt_check_positions(t->name, l, a->crd_len[l], s->pos_width);
      if (fits != TJ_OK) return fits;
      if (P > INT64_MAX / 2 || (!a->pos[l] && P > 0) || a->pos_len[l] != 2 * P)
        return rt_set_error(TJ_ERR_SHAPE, "tensor %s: level %d (loose_compressed) needs a "
                            "pos array of %" PRId64 " entries (a lo and a hi per parent "
                            "position), got %" PRId64 "%s", t->name, l,
                            P > INT64_MAX / 2 ? INT64_MAX : 2 * P, a->pos_len[l],
                            a->pos[l] ? "" : " (NULL)");
    } else if (lv->kind == TJ_LVL_N_OUT_OF_M) {
      if (a->pos[l])
        return rt_set_error(TJ_ERR_INVALID, "tensor %s: level %d is n_out_of_m and takes no "
                            "pos array (block p holds crd[p*%" PRId64 " .. p*%" PRId64 "+%"
                            PRId64 "))", t->name, l, lv->n, lv->n, lv->n);
      if (P > INT64_MAX / lv->n || a->crd_len[l] != P * lv->n)
        return rt_set_error(TJ_ERR_SHAPE, "tensor %s: level %d (n_out_of_m %" PRId64 ":%"
                            PRId64 ") needs a crd array of %" PRId64 " entries (%" PRId64
                            " per parent position), got %" PRId64, t->name, l, lv->n,
                            lv->size, P * lv->n, lv->n, a->crd_len[l]);
    } else if (a->crd_len[l] != P) {
      return rt_set_error(TJ_ERR_SHAPE, "tensor %s: level %d (singleton) needs a crd "
                          "array of %" PRId64 " entries (one per parent position), got %"
                          PRId64, t->name, l, P, a->crd_len[l]);
    }
    if (a->crd_len[l] < 0 || (a->crd_len[l] > 0 && !a->crd[l]))
      return rt_set_error(TJ_ERR_INVALID, "tensor %s: level %d: crd is NULL or its "
                          "length negative", t->name, l);
    P = a->crd_len[l];
  }
  if (a->vals_len != P || (P > 0 && !a->vals))
    return rt_set_error(TJ_ERR_SHAPE, "tensor %s: needs %" PRId64 " values (one per "
                        "position of the last level), got %" PRId64 "%s", t->name, P,
                        a->vals_len, P > 0 && !a->vals ? " (vals is NULL)" : "");
  return TJ_OK;
}

/* One level's content check. tie_in[p] (NULL: all false) says parent
 * position p has the same coordinates, at every level above, as p - 1;
 * tie_out, when non-NULL, receives the same for this level's positions. */
typedef struct LevelCheck {
  const tj_tensor *t;
  int l;
  int64_t parents;
  const uint8_t *tie_in;
  uint8_t *tie_out;
  /* live_in[p] (NULL: all live) says parent position p is an entry's: under
   * a loose_compressed level, positions no segment covers (gaps) are not,
   * and nothing below them is read or checked. live_out, when non-NULL,
   * receives the same for this level's positions. */
  const uint8_t *live_in;
  uint8_t *live_out;
} LevelCheck;

static bool is_live(const LevelCheck *c, int64_t p) { return !c->live_in || c->live_in[p]; }

static tj_status bad_order(const LevelCheck *c, int64_t q, int64_t prev, int64_t cur,
                           int64_t seg) {
  const tj_level_storage *lv = &c->t->st.levels[c->l];
  bool unique = !(lv->flags & TJ_LVL_NONUNIQUE);
  bool segmented = lv->kind == TJ_LVL_COMPRESSED || lv->kind == TJ_LVL_LOOSE_COMPRESSED;
  return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d (%s): crd[%" PRId64 "] = %" PRId64
                      " %s crd[%" PRId64 "] = %" PRId64 " %s %" PRId64 " (the level is "
                      "ordered%s)", c->t->name, c->l, kind_name(lv), q, cur,
                      unique ? "does not increase over" : "is less than", q - 1, prev,
                      segmented ? "in the segment of parent position"
                                : "under equal coordinates at parent position",
                      seg, unique ? " and unique" : "");
}

/* True when crd cur may follow prev in an ordered level. */
static bool in_order(const tj_level_storage *lv, int64_t prev, int64_t cur) {
  if (lv->flags & TJ_LVL_NONORDERED) return true;
  return (lv->flags & TJ_LVL_NONUNIQUE) ? prev <= cur : prev < cur;
}

static tj_status crd_range(const LevelCheck *c, int64_t q, int64_t v) {
  const tj_level_storage *lv = &c->t->st.levels[c->l];
  if (v >= 0 && v < lv->size) return TJ_OK;
  return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d (%s): crd[%" PRId64 "] = %" PRId64
                      " is out of range 0..%" PRId64, c->t->name, c->l, kind_name(lv), q, v,
                      lv->size - 1);
}

/* Parent positions lo < hi have equal coordinates above (all ties). */
static bool parents_tie(const uint8_t *tie_in, int64_t lo, int64_t hi) {
  if (!tie_in) return false;
  for (int64_t p = lo + 1; p <= hi; p++)
    if (!tie_in[p]) return false;
  return true;
}

/* pos never decreases (so every segment lies inside crd: pos[0] = 0 and
 * pos[parents] = crd_len are checked with the lengths). */
static tj_status check_pos(const LevelCheck *c) {
  const tj_storage *s = &c->t->st;
  const tj_level_storage *lv = &s->levels[c->l];
  for (int64_t p = 0; p < c->parents; p++) {
    int64_t lo = rt_idx(lv->pos, s->pos_width, p), hi = rt_idx(lv->pos, s->pos_width, p + 1);
    if (hi < lo)
      return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d (compressed): pos[%" PRId64
                          "] = %" PRId64 " is less than pos[%" PRId64 "] = %" PRId64
                          " (positions must not decrease)", c->t->name, c->l, p + 1, hi,
                          p, lo);
  }
  return TJ_OK;
}

/* The coordinates of segment lo..hi of parent p: in range, in order;
 * tie_out and live_out for its positions. prev_parent is the last parent
 * before p with a non-empty segment, prev_hi the end of that segment. */
static tj_status check_segment(const LevelCheck *c, int64_t p, int64_t lo, int64_t hi,
                               int64_t prev_parent, int64_t prev_hi) {
  const tj_storage *s = &c->t->st;
  const tj_level_storage *lv = &s->levels[c->l];
  for (int64_t q = lo; q < hi; q++) {
    int64_t v = rt_idx(lv->crd, s->crd_width, q);
    tj_status st = crd_range(c, q, v);
    if (st != TJ_OK) return st;
    int64_t prev = q > 0 ? rt_idx(lv->crd, s->crd_width, q - 1) : -1;
    if (q > lo && !in_order(lv, prev, v)) return bad_order(c, q, prev, v, p);
    if (c->tie_out)   /* q - 1 ends the previous parent's segment, or is in p's */
      c->tie_out[q] = q > 0 && prev == v &&
                      (q > lo || (prev_hi == q && parents_tie(c->tie_in, prev_parent, p)));
    if (c->live_out) c->live_out[q] = 1;
  }
  return TJ_OK;
}

static tj_status check_compressed(const LevelCheck *c) {
  const tj_storage *s = &c->t->st;
  const tj_level_storage *lv = &s->levels[c->l];
  tj_status st = check_pos(c);
  if (st != TJ_OK) return st;
  int64_t prev_parent = -1, prev_hi = -1;
  for (int64_t p = 0; p < c->parents; p++) {
    if (!is_live(c, p)) continue;
    int64_t lo = rt_idx(lv->pos, s->pos_width, p), hi = rt_idx(lv->pos, s->pos_width, p + 1);
    if ((st = check_segment(c, p, lo, hi, prev_parent, prev_hi)) != TJ_OK) return st;
    if (hi > lo) prev_parent = p, prev_hi = hi;
  }
  return TJ_OK;
}

/* The parent before p whose segment covers position q (an overlap). */
static int64_t loose_owner(const LevelCheck *c, int64_t p, int64_t q) {
  const tj_storage *s = &c->t->st;
  const tj_level_storage *lv = &s->levels[c->l];
  for (int64_t o = 0; o < p; o++) {
    if (!is_live(c, o)) continue;
    int64_t lo = rt_idx(lv->pos, s->pos_width, 2 * o);
    int64_t hi = rt_idx(lv->pos, s->pos_width, 2 * o + 1);
    if (lo <= q && q < hi) return o;
  }
  return -1;
}

/* loose_compressed: each live parent's segment pos[2p] .. pos[2p+1] lies
 * in 0..crd_len, no position lies in two segments (one entry, one
 * parent), and each segment's coordinates are checked as compressed's.
 * Positions no segment covers are gaps: neither checked nor live. The
 * live mask of this level's positions (live_out) is the record of the
 * positions a segment covered so far. */
static tj_status check_loose(const LevelCheck *c) {
  const tj_storage *s = &c->t->st;
  const tj_level_storage *lv = &s->levels[c->l];
  int64_t prev_parent = -1, prev_hi = -1;
  for (int64_t p = 0; p < c->parents; p++) {
    if (!is_live(c, p)) continue;
    int64_t lo = rt_idx(lv->pos, s->pos_width, 2 * p);
    int64_t hi = rt_idx(lv->pos, s->pos_width, 2 * p + 1);
    if (lo < 0 || hi < lo || hi > lv->crd_len)
      return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d (loose_compressed): the segment "
                          "of parent position %" PRId64 ", pos[%" PRId64 "] = %" PRId64
                          " .. pos[%" PRId64 "] = %" PRId64 ", %s", c->t->name, c->l, p,
                          2 * p, lo, 2 * p + 1, hi,
                          hi < lo ? "ends before it starts"
                                  : "lies outside the crd array");
    for (int64_t q = lo; q < hi; q++) {
      if (c->live_out[q])
        return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d (loose_compressed): "
                            "position %" PRId64 " lies in the segments of parent positions %"
                            PRId64 " and %" PRId64 " (segments must not overlap)",
                            c->t->name, c->l, q, loose_owner(c, p, q), p);
    }
    tj_status st = check_segment(c, p, lo, hi, prev_parent, prev_hi);
    if (st != TJ_OK) return st;
    if (hi > lo) prev_parent = p, prev_hi = hi;
  }
  return TJ_OK;
}

static tj_status check_singleton(const LevelCheck *c) {
  const tj_storage *s = &c->t->st;
  const tj_level_storage *lv = &s->levels[c->l];
  for (int64_t q = 0; q < c->parents; q++) {
    if (!is_live(c, q)) continue;
    int64_t v = rt_idx(lv->crd, s->crd_width, q);
    tj_status st = crd_range(c, q, v);
    if (st != TJ_OK) return st;
    bool same_above = q > 0 && c->tie_in && c->tie_in[q];
    int64_t prev = q > 0 ? rt_idx(lv->crd, s->crd_width, q - 1) : -1;
    if (same_above && !in_order(lv, prev, v)) return bad_order(c, q, prev, v, q);
    if (c->tie_out) c->tie_out[q] = same_above && prev == v;
    if (c->live_out) c->live_out[q] = 1;
  }
  return TJ_OK;
}

/* Each block's n coordinates lie in 0..m-1 and increase strictly (as
 * pack stores them: unique, ascending, the slots pack fills included). */
static tj_status check_structured(const LevelCheck *c) {
  const tj_storage *s = &c->t->st;
  const tj_level_storage *lv = &s->levels[c->l];
  for (int64_t q = 0; q < c->parents * lv->n; q++) {
    if (!is_live(c, q / lv->n)) continue;
    if (c->live_out) c->live_out[q] = 1;
    int64_t v = rt_idx(lv->crd, s->crd_width, q);
    tj_status st = crd_range(c, q, v);
    if (st != TJ_OK) return st;
    int64_t prev = q % lv->n ? rt_idx(lv->crd, s->crd_width, q - 1) : -1;
    if (q % lv->n && prev >= v)
      return rt_set_error(TJ_ERR_FORMAT, "tensor %s: level %d (n_out_of_m): crd[%" PRId64
                          "] = %" PRId64 " does not increase over crd[%" PRId64 "] = %"
                          PRId64 " in the block of parent position %" PRId64 " (a block's "
                          "coordinates are ascending and unique)", c->t->name, c->l, q, v,
                          q - 1, prev, q / lv->n);
  }
  return TJ_OK;
}

static bool has_singleton_below(const tj_storage *s, int l) {
  for (int k = l + 1; k < s->order; k++)
    if (s->levels[k].kind == TJ_LVL_SINGLETON) return true;
  return false;
}

static uint8_t *bytes(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), 1); }

/* The live mask below a dense level of the given size. */
static uint8_t *live_dense(const uint8_t *live, int64_t parents, int64_t size) {
  uint8_t *out = bytes(parents * size);
  for (int64_t p = 0; out && p < parents; p++)
    if (live[p]) memset(out + p * size, 1, (size_t)size);
  return out;
}

/* Checks every position and coordinate of t's (installed) storage. Once a
 * loose_compressed level is met, a live mask per level says which
 * positions are entries' (gaps and what hangs below them are skipped). */
static tj_status validate(const tj_tensor *t) {
  const tj_storage *s = &t->st;
  uint8_t *tie_in = NULL, *live = NULL;
  int64_t P = 1;
  tj_status st = TJ_OK;
  for (int l = 0; l < s->order && st == TJ_OK; l++) {
    const tj_level_storage *lv = &s->levels[l];
    if (lv->kind == TJ_LVL_DENSE) {
      if (lv->size != 1) {   /* neighbouring positions differ at this level */
        free(tie_in);
        tie_in = NULL;
      }
      if (live) {
        uint8_t *next = live_dense(live, P, lv->size);
        free(live);
        if (!(live = next)) st = rt_set_error(TJ_ERR_NOMEM, "out of memory validating tensor %s", t->name);
      }
      P *= lv->size;
      continue;
    }
    bool loose = lv->kind == TJ_LVL_LOOSE_COMPRESSED;
    LevelCheck c = {t, l, P, tie_in, NULL, live, NULL};
    if (has_singleton_below(s, l) && !(c.tie_out = bytes(lv->crd_len)))
      st = rt_set_error(TJ_ERR_NOMEM, "out of memory validating tensor %s", t->name);
    if (st == TJ_OK && (live || loose) && !(c.live_out = bytes(lv->crd_len)))
      st = rt_set_error(TJ_ERR_NOMEM, "out of memory validating tensor %s", t->name);
    if (st == TJ_OK)
      st = lv->kind == TJ_LVL_COMPRESSED    ? check_compressed(&c)
           : loose                          ? check_loose(&c)
           : lv->kind == TJ_LVL_N_OUT_OF_M ? check_structured(&c) : check_singleton(&c);
    free(tie_in);
    free(live);
    tie_in = c.tie_out;
    live = c.live_out;
    P = lv->crd_len;
  }
  free(tie_in);
  free(live);
  return st;
}

/* Points t's storage at a's arrays, all marked foreign. */
static void install(tj_tensor *t, const tj_arrays *a) {
  tj_storage *s = &t->st;
  for (int l = 0; l < s->order; l++) {
    tj_level_storage *lv = &s->levels[l];
    if (lv->kind == TJ_LVL_DENSE) continue;
    if (lv->kind == TJ_LVL_COMPRESSED || lv->kind == TJ_LVL_LOOSE_COMPRESSED) {
      lv->pos = a->pos[l];
      lv->pos_len = lv->pos_cap = a->pos_len[l];
      s->foreign |= TJ_FOREIGN_POS(l);
    }
    lv->crd = a->crd[l];
    lv->crd_len = lv->crd_cap = a->crd_len[l];
    s->foreign |= TJ_FOREIGN_CRD(l);
  }
  s->vals = a->vals;
  s->vals_len = s->vals_cap = a->vals_len;
  s->foreign |= TJ_FOREIGN_VALS;
}

tj_status tj_tensor_wrap(const char *name, const tj_arrays *a, unsigned flags,
                         tj_tensor **out) {
  if (!out) return rt_set_error(TJ_ERR_INVALID, "tj_tensor_wrap: out is NULL");
  *out = NULL;
  if (!a) return rt_set_error(TJ_ERR_INVALID, "tj_tensor_wrap: arrays is NULL");
  name = name ? name : "";
  tj_format f;
  tj_status st = wrap_format(name, a, &f);
  tj_tensor *t = NULL;
  if (st == TJ_OK) st = tj_tensor_new(name, a->dtype, a->order, a->dims, &f, &t);
  if (st == TJ_OK) st = check_lengths(t, a);
  if (st == TJ_OK) {
    install(t, a);
    if (!(flags & TJ_WRAP_TRUSTED)) st = validate(t);
    if (!(flags & TJ_WRAP_TRUSTED) && st == TJ_OK) st = rt_tensor_check_padding(t);
  }
  if (st != TJ_OK) {
    tj_tensor_free(t);   /* foreign arrays are not freed */
    return st;
  }
  *out = t;
  return TJ_OK;
}

/* Adds p to t's adopted arrays unless NULL or already there. */
static void adopt_one(RtAdopted *ad, void *p) {
  if (!p) return;
  for (int i = 0; i < ad->n; i++)
    if (ad->arrays[i] == p) return;
  ad->arrays[ad->n++] = p;
}

tj_status tj_tensor_adopt(const char *name, const tj_arrays *a, unsigned flags,
                          tj_free_fn free_fn, void *user, tj_tensor **out) {
  if (!free_fn) {
    if (out) *out = NULL;
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_adopt: free_fn is NULL");
  }
  tj_status st = tj_tensor_wrap(name, a, flags, out);
  if (st != TJ_OK) return st;
  RtAdopted *ad = &(*out)->adopted;
  ad->free_fn = free_fn;
  ad->user = user;
  for (int l = 0; l < (*out)->st.order; l++) {   /* levels: more than dims when blocked */
    adopt_one(ad, a->pos[l]);
    adopt_one(ad, a->crd[l]);
  }
  adopt_one(ad, a->vals);
  return TJ_OK;
}

tj_status tj_tensor_arrays(tj_tensor *t, tj_arrays *out) {
  if (!t || !out) return rt_set_error(TJ_ERR_INVALID, "tj_tensor_arrays: NULL argument");
  if (t->base)
    return rt_set_error(TJ_ERR_INVALID, "tensor %s is a view (a slice of %s): its arrays "
                        "are %s's (tj_tensor_arrays of the base, or convert the view)",
                        t->name, t->base->name, t->base->name);
  memset(out, 0, sizeof *out);
  rt_tensor_touch(t);   /* the caller may now write them */
  tj_storage *s = &t->st;
  out->dtype = (tj_dtype)s->dtype;
  out->order = t->order;   /* a blocked tensor: its dims, and its levels' arrays */
  out->dims = t->dims;
  out->fmt = &t->ufmt;
  for (int l = 0; l < s->order; l++) {
    out->pos[l] = s->levels[l].pos;
    out->pos_len[l] = s->levels[l].pos ? s->levels[l].pos_len : 0;
    out->crd[l] = s->levels[l].crd;
    out->crd_len[l] = s->levels[l].crd ? s->levels[l].crd_len : 0;
  }
  out->vals = s->vals;
  out->vals_len = s->vals ? s->vals_len : 0;
  return TJ_OK;
}

tj_status tj_tensor_changed(tj_tensor *t) {
  if (!t) return rt_set_error(TJ_ERR_INVALID, "tj_tensor_changed: NULL tensor");
  rt_tensor_touch(t);
  return TJ_OK;
}

/* One array of s and the caller's in its place (was: NULL, or not
 * foreign in bit, when the caller had none there). */
typedef struct {
  void **p;
  void *was;
  int64_t *cap, was_cap, len;
  int width;
  uint32_t bit;
} CallerSlot;

static int caller_slots(tj_storage *s, const tj_storage *callers, CallerSlot *slot) {
  int n = 0;
  for (int l = 0; l < s->order; l++) {
    tj_level_storage *lv = &s->levels[l];
    const tj_level_storage *cl = &callers->levels[l];
    slot[n++] = (CallerSlot){&lv->pos, cl->pos, &lv->pos_cap, cl->pos_cap, lv->pos_len,
                             s->pos_width, TJ_FOREIGN_POS(l)};
    slot[n++] = (CallerSlot){&lv->crd, cl->crd, &lv->crd_cap, cl->crd_cap, lv->crd_len,
                             s->crd_width, TJ_FOREIGN_CRD(l)};
  }
  slot[n++] = (CallerSlot){&s->vals, callers->vals, &s->vals_cap, callers->vals_cap,
                           s->vals_len, rt_dtype_size(s->dtype), TJ_FOREIGN_VALS};
  return n;
}

/* Whether the caller had an array of its own in c's place. */
static bool callers_own(const tj_storage *callers, const CallerSlot *c) {
  return (callers->foreign & c->bit) && c->was;
}

void rt_storage_keep_callers(tj_storage *s, const tj_storage *callers) {
  CallerSlot slot[2 * TJ_MAX_ORDER + 1];
  int n = caller_slots(s, callers, slot);
  for (int k = 0; k < n; k++)
    if (callers_own(callers, &slot[k]) && slot[k].len > slot[k].was_cap)
      return;   /* one does not fit: none goes back */
  for (int k = 0; k < n; k++) {
    const CallerSlot *c = &slot[k];
    if (!callers_own(callers, c)) continue;
    if (*c->p != c->was) {
      if (c->len > 0) memcpy(c->was, *c->p, (size_t)(c->len * c->width));
      if (!(s->foreign & c->bit)) free(*c->p);
      *c->p = c->was;
    }
    *c->cap = c->was_cap;
    s->foreign |= c->bit;
  }
}
