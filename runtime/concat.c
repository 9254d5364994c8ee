/* Combining the outputs of row-range kernels. Sparse outputs: the
 * concatenation of row chunks, the second phase of parallel assembly.
 * Dense outputs of a parallel reduction: the sum of per-chunk partials, in
 * chunk order, so a given thread count always gives the same result. Each chunk was built by a row-range kernel over rows
 * [lo, hi) with chunk-local positions; its first level is dense (one entry
 * per row) and the levels below are compressed. Level by level, positions
 * are shifted by the coordinates of the chunks before it, and coordinate
 * and value arrays are copied end to end.
 */
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

void rt_storage_empty_like(const tj_storage *s, tj_storage *out) {
  memset(out, 0, sizeof *out);
  out->order = s->order;
  out->dtype = s->dtype;
  out->pos_width = s->pos_width;
  out->crd_width = s->crd_width;
  memcpy(out->dims, s->dims, sizeof out->dims);
  memcpy(out->map, s->map, sizeof out->map);
  for (int l = 0; l < s->order; l++) {
    out->levels[l].kind = s->levels[l].kind;
    out->levels[l].flags = s->levels[l].flags;
    out->levels[l].size = s->levels[l].size;
  }
}

void rt_storage_release(tj_storage *s) {
  for (int l = 0; l < s->order; l++) {
    free(s->levels[l].pos);
    free(s->levels[l].crd);
  }
  free(s->vals);
  memset(s, 0, sizeof *s);
}

/* Entries of level l's parent in chunk c (rows for level 1). */
static int64_t parents(const tj_storage *c, int l) {
  return l == 1 ? c->levels[1].pos_len - 1 : c->levels[l - 1].crd_len;
}

/* Where each chunk's part of the output starts: per level, its first
 * parent (at) and first coordinate (base); and its first value. */
typedef struct {
  tj_storage *out;
  tj_storage *const *chunks;
  int64_t (*at)[TJ_MAX_ORDER], (*base)[TJ_MAX_ORDER], *vbase;
} ConcatJob;

/* Copies chunks [lo, hi) into their parts of the output: positions
 * shifted by the coordinates of the chunks before, coordinates and values
 * end to end. Chunks write disjoint ranges, so they copy in parallel. */
static void copy_chunks(void *ctx, int64_t lo, int64_t hi) {
  const ConcatJob *j = ctx;
  const tj_storage *out = j->out;
  int32_t pw = out->pos_width, cw = out->crd_width, w = rt_dtype_size((tj_dtype)out->dtype);
  for (int64_t c = lo; c < hi; c++) {
    const tj_storage *ch = j->chunks[c];
    for (int l = 1; l < out->order; l++) {
      const tj_level_storage *s = &ch->levels[l];
      const tj_level_storage *o = &out->levels[l];
      int64_t at = j->at[c][l], base = j->base[c][l], np = parents(ch, l);
      for (int64_t q = 1; q <= np; q++) rt_idx_set(o->pos, pw, at + q, rt_idx(s->pos, pw, q) + base);
      if (s->crd_len) memcpy((char *)o->crd + base * cw, s->crd, (size_t)(s->crd_len * cw));
    }
    if (ch->vals_len)
      memcpy((char *)out->vals + j->vbase[c] * w, ch->vals, (size_t)(ch->vals_len * w));
  }
}

/* Sizes the output's arrays for the n chunks and records where each
 * chunk's part starts (job's at, base, vbase). The copy writes every
 * entry (pos[0] here), so the new space is not zeroed first: a fresh
 * output's pages are then touched by the copy, on all its threads. */
static tj_status concat_layout(tj_storage *out, tj_storage *const *chunks, int n,
                               const ConcatJob *job) {
  for (int l = 1; l < out->order; l++) {
    int64_t npar = 0, ncrd = 0;
    for (int c = 0; c < n; c++) {
      job->at[c][l] = npar;
      job->base[c][l] = ncrd;
      npar += parents(chunks[c], l);
      ncrd += chunks[c]->levels[l].crd_len;
    }
    if (tj_rt_reserve(out, TJ_ARR_POS | TJ_ARR_NOZERO, l, npar + 1) ||
        tj_rt_reserve(out, TJ_ARR_CRD | TJ_ARR_NOZERO, l, ncrd))
      return rt_set_error(TJ_ERR_NOMEM, "out of memory assembling %lld entries", (long long)ncrd);
    rt_idx_set(out->levels[l].pos, out->pos_width, 0, 0);
    out->levels[l].pos_len = npar + 1;
    out->levels[l].crd_len = ncrd;
  }
  int64_t nv = 0;
  for (int c = 0; c < n; c++) {
    job->vbase[c] = nv;
    nv += chunks[c]->vals_len;
  }
  if (tj_rt_reserve(out, TJ_ARR_VALS | TJ_ARR_NOZERO, 0, nv))
    return rt_set_error(TJ_ERR_NOMEM, "out of memory assembling %lld values", (long long)nv);
  out->vals_len = nv;
  return TJ_OK;
}

/* Joins the chunks end to end. The copy runs on the runtime's threads
 * when the output is large enough to pay for them: serially it was half
 * of a 2-thread sparse add's time (u200k + u200k': 6.4 M entries, the
 * chunks built in 14 ms and copied in about as long, page faults of the
 * fresh output included). */
tj_status rt_storage_concat(tj_storage *out, tj_storage *const *chunks, int n) {
  if (out->order < 2 || out->levels[0].kind != TJ_LVL_DENSE)
    return rt_set_error(TJ_ERR_INTERNAL, "concat: output's first level is not dense");
  int64_t (*at)[TJ_MAX_ORDER] = calloc((size_t)n, sizeof *at);
  int64_t (*base)[TJ_MAX_ORDER] = calloc((size_t)n, sizeof *base);
  int64_t *vbase = calloc((size_t)n, sizeof *vbase);
  ConcatJob job = {out, chunks, at, base, vbase};
  tj_status st = !at || !base || !vbase
                     ? rt_set_error(TJ_ERR_NOMEM, "out of memory joining %d chunks", n)
                     : concat_layout(out, chunks, n, &job);
  if (st == TJ_OK) {
    int64_t work = out->vals_len + out->levels[1].pos_len;
    if (work >= tj_rt_par_min_work())
      tj_rt_parallel_for_sched(0, n, NULL, 0, NULL, 0, TJ_PAR_DYNAMIC, copy_chunks, &job);
    else
      copy_chunks(&job, 0, n);
  }
  free(at);
  free(base);
  free(vbase);
  return st;
}

/* a how b on integers (u64: the bits of an unsigned value, compared so;
 * narrower unsigned values are zero-extended, so compare as int64). */
static int64_t combine_int(RtCombine how, bool is_u64, int64_t a, int64_t b) {
  bool less = is_u64 ? (uint64_t)a < (uint64_t)b : a < b;
  switch (how) {
  case RT_COMBINE_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
  case RT_COMBINE_MIN: return less ? a : b;
  case RT_COMBINE_MAX: return less ? b : a;
  case RT_COMBINE_OR: return a != 0 || b != 0;
  case RT_COMBINE_AND: return a != 0 && b != 0;
  default: return (int64_t)((uint64_t)a + (uint64_t)b);
  }
}

static double combine_fp(RtCombine how, double a, double b) {
  switch (how) {
  case RT_COMBINE_MUL: return a * b;
  case RT_COMBINE_MIN: return a < b ? a : b;
  case RT_COMBINE_MAX: return a > b ? a : b;
  case RT_COMBINE_OR: return a != 0 || b != 0;
  case RT_COMBINE_AND: return a != 0 && b != 0;
  default: return a + b;
  }
}

/* o[q] = o[q] how p[q] for q < n, the operator outside the loop (a
 * partial sum of a CSC SpMV on bcsstk33 took as long as the kernel
 * through per-element typed accessors). */
static void combine_f64(RtCombine how, double *restrict o, const double *restrict p, int64_t n) {
  switch (how) {
  case RT_COMBINE_ADD:
    for (int64_t q = 0; q < n; q++) o[q] += p[q];
    return;
  case RT_COMBINE_MUL:
    for (int64_t q = 0; q < n; q++) o[q] *= p[q];
    return;
  default:
    for (int64_t q = 0; q < n; q++) o[q] = combine_fp(how, o[q], p[q]);
    return;
  }
}

void rt_storage_combine_range(tj_storage *out, tj_storage *const *parts, int n,
                              bool accumulate, RtCombine how, int64_t lo, int64_t hi) {
  int first = accumulate ? 0 : 1;
  bool own = !accumulate && parts[0]->vals == out->vals;   /* out holds the first */
  if (rt_dtype_is_int(out->dtype)) {  /* exact integers (stored wrapped; bool: nonzero) */
    for (int64_t q = lo; q < hi; q++) {
      int64_t v = (accumulate ? rt_storage_get(out, q) : rt_storage_get(parts[0], q)).i;
      for (int c = first; c < n; c++) v = combine_int(how, out->dtype == TJ_U64, v, rt_storage_get(parts[c], q).i);
      rt_storage_put(out, q, (RtVal){.i = v});
    }
  } else if (out->dtype == TJ_F64) {
    double *o = (double *)out->vals + lo;
    if (!accumulate && !own && hi > lo)
      memcpy(o, (const double *)parts[0]->vals + lo, (size_t)(hi - lo) * sizeof *o);
    for (int c = first; c < n; c++) combine_f64(how, o, (const double *)parts[c]->vals + lo, hi - lo);
  } else {   /* f32: each element combined in double, rounded once */
    float *o = out->vals;
    for (int64_t q = lo; q < hi; q++) {
      double v = accumulate ? o[q] : ((const float *)parts[0]->vals)[q];
      for (int c = first; c < n; c++) v = combine_fp(how, v, ((const float *)parts[c]->vals)[q]);
      o[q] = (float)v;
    }
  }
}

tj_status rt_storage_sum_partials(tj_storage *out, tj_storage *const *parts, int n,
                                  bool accumulate, RtCombine how) {
  int64_t size = 1;
  for (int m = 0; m < out->order; m++) size *= out->dims[m];
  if (tj_rt_reserve(out, TJ_ARR_VALS, 0, size ? size : 1))
    return rt_set_error(TJ_ERR_NOMEM, "out of memory for the output's values");
  rt_storage_combine_range(out, parts, n, accumulate, how, 0, size);
  out->vals_len = size;
  return TJ_OK;
}

tj_status rt_storage_fold_partials(tj_storage *out, tj_storage *const *parts, int n,
                                   bool accumulate, int32_t (*fn)(tj_storage **)) {
  int64_t size = 1;
  for (int m = 0; m < out->order; m++) size *= out->dims[m];
  if (tj_rt_reserve(out, TJ_ARR_VALS, 0, size ? size : 1))
    return rt_set_error(TJ_ERR_NOMEM, "out of memory for the output's values");
  int first = accumulate ? 0 : 1;
  if (!accumulate && size && parts[0]->vals != out->vals)
    memcpy(out->vals, parts[0]->vals, (size_t)size * (size_t)rt_dtype_size(out->dtype));
  for (int c = first; c < n; c++) {
    tj_storage *ops[2] = {out, parts[c]};
    if (fn(ops)) return rt_set_error(TJ_ERR_INTERNAL, "combining partial outputs failed");
  }
  out->vals_len = size;
  return TJ_OK;
}

/* ---- merging sparse partial outputs (rt_storage_merge) ----
 * Level by level from the root, the parts' positions under one output
 * position walked together: a dense level's coordinates all, a compressed
 * level's by a k-way merge of the parts' segments (the least coordinate
 * next, taken from every part that stores it). A part that lacks the
 * parent is absent below it (position -1). At the leaves the present
 * parts' values are combined in chunk order. */
typedef struct Merge {
  tj_storage *out;
  tj_storage *const *parts;
  int n;
  RtCombine how;
  int64_t *at;         /* at[l * n + c]: part c's position at level l - 1, or -1 */
  int64_t *cur, *end;  /* cur/end[l * n + c]: part c's segment at level l */
} Merge;

static void merge_values(const Merge *m, const int64_t *at, int64_t q) {
  tj_storage *o = m->out;
  bool is_int = rt_dtype_is_int(o->dtype), any = false;
  RtVal v = {0};
  for (int c = 0; c < m->n; c++) {
    if (at[c] < 0) continue;
    RtVal x = rt_storage_get(m->parts[c], at[c]);
    if (!any) v = x;
    else if (is_int) v.i = combine_int(m->how, o->dtype == TJ_U64, v.i, x.i);
    else v.f = combine_fp(m->how, v.f, x.f);
    any = true;
  }
  rt_storage_put(o, q, v);
}

/* The least coordinate of level l at the parts' current positions cur
 * (each below its end), or -1 when every part is done. */
static int64_t least_crd(const Merge *m, int l, const int64_t *cur, const int64_t *end) {
  int64_t least = -1;
  for (int c = 0; c < m->n; c++) {
    if (cur[c] >= end[c]) continue;
    int64_t x = rt_idx(m->parts[c]->levels[l].crd, m->out->crd_width, cur[c]);
    if (least < 0 || x < least) least = x;
  }
  return least;
}

/* The last level when compressed, in f64: the k-way merge with the values
 * combined in place (no call per entry: the general walk's took 23 ns an
 * entry of a 173 k-entry vector, most of a 2-thread run). */
static void merge_leaf_f64(const Merge *m, int l, int64_t *cur, const int64_t *end) {
  tj_level_storage *o = &m->out->levels[l];
  int32_t cw = m->out->crd_width;
  double *ov = m->out->vals;
  for (;;) {
    int64_t least = least_crd(m, l, cur, end);
    if (least < 0) return;
    bool any = false;
    double v = 0;
    for (int c = 0; c < m->n; c++) {
      if (cur[c] >= end[c] || rt_idx(m->parts[c]->levels[l].crd, cw, cur[c]) != least) continue;
      double x = ((const double *)m->parts[c]->vals)[cur[c]++];
      v = any ? combine_fp(m->how, v, x) : x;
      any = true;
    }
    ov[o->crd_len] = v;
    rt_idx_set(o->crd, cw, o->crd_len++, least);
  }
}

/* Level l of the output under its position q at level l - 1, the parts'
 * positions there at (m->at's row l). */
static void merge_level(const Merge *m, int l, int64_t q) {
  const int64_t *at = m->at + (int64_t)l * m->n;
  if (l == m->out->order) {
    merge_values(m, at, q);
    return;
  }
  int64_t *next = m->at + (int64_t)(l + 1) * m->n;
  tj_level_storage *o = &m->out->levels[l];
  if (o->kind == TJ_LVL_DENSE) {
    for (int64_t x = 0; x < o->size; x++) {
      for (int c = 0; c < m->n; c++) next[c] = at[c] < 0 ? -1 : at[c] * o->size + x;
      merge_level(m, l + 1, q * o->size + x);
    }
    return;
  }
  int32_t pw = m->out->pos_width, cw = m->out->crd_width;
  int64_t *cur = m->cur + (int64_t)l * m->n, *end = m->end + (int64_t)l * m->n;
  for (int c = 0; c < m->n; c++) {
    const tj_level_storage *s = &m->parts[c]->levels[l];
    cur[c] = at[c] < 0 ? 0 : rt_idx(s->pos, pw, at[c]);
    end[c] = at[c] < 0 ? 0 : rt_idx(s->pos, pw, at[c] + 1);
  }
  if (l == m->out->order - 1 && m->out->dtype == TJ_F64) {
    merge_leaf_f64(m, l, cur, end);
    rt_idx_set(o->pos, pw, q + 1, o->crd_len);
    return;
  }
  for (;;) {
    int64_t least = least_crd(m, l, cur, end);
    if (least < 0) break;
    for (int c = 0; c < m->n; c++) {
      bool here = cur[c] < end[c] && rt_idx(m->parts[c]->levels[l].crd, cw, cur[c]) == least;
      next[c] = here ? cur[c]++ : -1;
    }
    int64_t k = o->crd_len++;
    rt_idx_set(o->crd, cw, k, least);
    merge_level(m, l + 1, k);
  }
  rt_idx_set(o->pos, pw, q + 1, o->crd_len);
}

/* Positions of level l in s: a dense level's, its parent's times its size. */
static int64_t level_entries(const tj_storage *s, int l) {
  if (l < 0) return 1;
  const tj_level_storage *lv = &s->levels[l];
  return lv->kind == TJ_LVL_DENSE ? level_entries(s, l - 1) * lv->size : lv->crd_len;
}

/* Room in out for the merge: at each level at most the parts' entries
 * together (and at most the parent's bound times the level's size). */
static tj_status merge_reserve(tj_storage *out, tj_storage *const *parts, int n) {
  int64_t bound = 1;
  for (int l = 0; l < out->order; l++) {
    tj_level_storage *o = &out->levels[l];
    int64_t parents = bound, sum = 0;
    bound = parents * o->size;
    if (o->kind == TJ_LVL_DENSE) continue;
    for (int c = 0; c < n; c++) sum += level_entries(parts[c], l);
    if (sum < bound) bound = sum;
    if (tj_rt_reserve(out, TJ_ARR_POS, l, parents + 1) ||
        tj_rt_reserve(out, TJ_ARR_CRD, l, bound + 1))   /* + 1: merge_vector_dense's */
      return rt_set_error(TJ_ERR_NOMEM, "out of memory merging %lld entries", (long long)bound);
    rt_idx_set(o->pos, out->pos_width, 0, 0);
    o->pos_len = parents + 1;
    o->crd_len = 0;
  }
  if (tj_rt_reserve(out, TJ_ARR_VALS, 0, bound + 1))
    return rt_set_error(TJ_ERR_NOMEM, "out of memory merging %lld values", (long long)bound);
  out->vals_len = bound;   /* set to the merged count after */
  return TJ_OK;
}

/* A sparse f64 vector whose extent is at most 16 times the parts' entries:
 * merged through a dense row of the extent and its marks, branch-free,
 * then the marks read in order (the k-way merge mispredicts a branch or
 * two an entry: 20 ns an entry of a 173 k-entry vector of two random
 * parts). */
static bool merge_vector_dense(tj_storage *out, tj_storage *const *parts, int n, RtCombine how) {
  int64_t size = out->levels[0].size;
  double *row = malloc((size_t)(size ? size : 1) * sizeof *row);
  uint8_t *mark = calloc((size_t)(size ? size : 1), 1);
  if (!row || !mark) {
    free(row), free(mark);
    return false;
  }
  int32_t cw = out->crd_width, pw = out->pos_width;
  for (int c = 0; c < n; c++) {
    const tj_level_storage *s = &parts[c]->levels[0];
    const double *v = parts[c]->vals;
    int64_t lo = rt_idx(s->pos, pw, 0), hi = rt_idx(s->pos, pw, 1);
    if (how == RT_COMBINE_ADD) {
      for (int64_t p = lo; p < hi; p++) {
        int64_t x = rt_idx(s->crd, cw, p);
        row[x] = (mark[x] ? row[x] : 0) + v[p];
        mark[x] = 1;
      }
    } else {
      for (int64_t p = lo; p < hi; p++) {
        int64_t x = rt_idx(s->crd, cw, p);
        row[x] = mark[x] ? combine_fp(how, row[x], v[p]) : v[p];
        mark[x] = 1;
      }
    }
  }
  tj_level_storage *o = &out->levels[0];
  double *ov = out->vals;
  int64_t k = 0;   /* stored at k before counting: one spare slot (merge_reserve) */
  for (int64_t x = 0; x < size; x++) {
    rt_idx_set(o->crd, cw, k, x);
    ov[k] = row[x];
    k += mark[x];
  }
  o->crd_len = k;
  rt_idx_set(o->pos, pw, 1, k);
  out->vals_len = k;
  free(row), free(mark);
  return true;
}

tj_status rt_storage_merge(tj_storage *out, tj_storage *const *parts, int n, RtCombine how) {
  for (int l = 0; l < out->order; l++)
    if (out->levels[l].kind != TJ_LVL_DENSE && (out->levels[l].kind != TJ_LVL_COMPRESSED ||
                                                out->levels[l].flags))
      return rt_set_error(TJ_ERR_INTERNAL, "merge: level %d is neither dense nor compressed", l);
  tj_status st = merge_reserve(out, parts, n);
  size_t rows = (size_t)(out->order + 1) * (size_t)n;
  Merge m = {out, parts, n, how, calloc(rows, sizeof(int64_t)), calloc(rows, sizeof(int64_t)),
             calloc(rows, sizeof(int64_t))};
  if (st == TJ_OK && (!m.at || !m.cur || !m.end))
    st = rt_set_error(TJ_ERR_NOMEM, "out of memory merging partial outputs");
  int64_t entries = 0;
  for (int c = 0; c < n && out->order == 1; c++) entries += parts[c]->levels[0].crd_len;
  bool dense_row = st == TJ_OK && out->order == 1 && out->dtype == TJ_F64 &&
                   out->levels[0].kind == TJ_LVL_COMPRESSED && out->levels[0].size <= 16 * entries;
  if (dense_row && merge_vector_dense(out, parts, n, how)) {
    out->levels[0].pos_len = 2;
  } else if (st == TJ_OK) {
    merge_level(&m, 0, 0);   /* every part has the root: at row 0 is zeros */
    out->vals_len = level_entries(out, out->order - 1);
    for (int l = 0; l < out->order; l++)   /* a compressed level's parents, now known */
      if (out->levels[l].kind != TJ_LVL_DENSE)
        out->levels[l].pos_len = level_entries(out, l - 1) + 1;
  }
  free(m.at);
  free(m.cur);
  free(m.end);
  return st;
}
