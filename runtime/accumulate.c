/* Values carried through the assembly of a `+=` into a sparse output.
 *
 * `A(i,j) += rhs` into a sparse A runs as `A = A_old + rhs` over a copy of
 * A (jit/driver.c, accumulate_sparse): its ASSEMBLE phase builds the union
 * of A's old pattern and the rhs's, with zero values, and A's old values
 * must survive it (a later COMPUTE adds the rhs to them). When every level
 * is ordered, both tensors list their entries in the same order (level by
 * level, coordinates ascending), so one walk over the new positions with a
 * cursor in the old entries sets every value; a nonordered level has no
 * such order, and each old entry is located instead (rt_storage_locate).
 */
#include <stdlib.h>
#include <string.h>

#include "tensor.h"


tj_status rt_tensor_copy(const tj_tensor *src, tj_tensor **out) {
  *out = NULL;
  tj_tensor *t;
  tj_status st = tj_tensor_new(src->name, tj_tensor_dtype(src), src->order, src->dims,
                               &src->ufmt, &t);
  if (st != TJ_OK) return st;
  const tj_storage *s = &src->st;
  tj_storage *d = &t->st;
  bool ok = rt_copy_index_arrays(s, d);
  if (ok && s->vals) {
    /* a packed tensor keeps a vals array even when it holds no entry */
    d->vals = rt_array_new(s->vals_len > 0 ? s->vals_len : 1, (size_t)rt_dtype_size(s->dtype), false);
    ok = d->vals != NULL;
    if (ok && s->vals_len > 0) memcpy(d->vals, s->vals, (size_t)s->vals_len * rt_dtype_size(s->dtype));
    d->vals_len = ok ? s->vals_len : 0;
    d->vals_cap = ok ? (s->vals_len > 0 ? s->vals_len : 1) : 0;
  }
  if (!ok) {
    tj_tensor_free(t);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory copying tensor %s", src->name);
  }
  *out = t;
  return TJ_OK;
}

/* The old entries in level order: coordinates by level, values. */
typedef struct Entries {
  const tj_storage *s;
  int64_t n, cap, *crd;
  RtVal *vals;
} Entries;

static void collect(void *ctx, const int64_t *coord, int64_t p) {
  Entries *e = ctx;
  if (e->n == e->cap || p >= e->s->vals_len) return;
  for (int l = 0; l < e->s->order; l++) e->crd[e->n * e->s->order + l] = coord[e->s->map[l].dim];
  e->vals[e->n++] = rt_storage_get(e->s, p);
}

/* The merge walk over dst: cursor k in the old entries. */
typedef struct Merge {
  tj_storage *dst;
  const Entries *old;
  int64_t k, skipped;
  RtVal fill;
} Merge;

/* <0, 0, >0 as level coordinates a are before, at, after dst's coord. */
static int compare(const tj_storage *s, const int64_t *a, const int64_t *coord) {
  for (int l = 0; l < s->order; l++) {
    int64_t c = coord[s->map[l].dim];
    if (a[l] != c) return a[l] < c ? -1 : 1;
  }
  return 0;
}

static void merge(void *ctx, const int64_t *coord, int64_t p) {
  Merge *m = ctx;
  const Entries *o = m->old;
  int c = 1;
  while (m->k < o->n && (c = compare(m->dst, o->crd + m->k * o->s->order, coord)) < 0)
    m->k++, m->skipped++;
  bool hit = m->k < o->n && c == 0;
  rt_storage_put(m->dst, p, hit ? o->vals[m->k++] : m->fill);
}

/* The locating walk over old (some level nonordered). */
typedef struct Place {
  tj_storage *dst;
  const tj_storage *old;
  int64_t lost;
} Place;

static void place(void *ctx, const int64_t *coord, int64_t p) {
  Place *pl = ctx;
  int64_t q = rt_storage_locate(pl->dst, coord);
  if (q < 0 || p >= pl->old->vals_len) {
    pl->lost++;
    return;
  }
  rt_storage_put(pl->dst, q, rt_storage_get(pl->old, p));
}

static bool ordered(const tj_storage *s) {
  for (int l = 0; l < s->order; l++)
    if (s->levels[l].flags & TJ_LVL_NONORDERED) return false;
  return true;
}

tj_status rt_storage_carry(tj_storage *dst, const tj_storage *old, RtVal fill, int64_t *lost) {
  *lost = 0;
  if (!ordered(dst) || !ordered(old)) {
    for (int64_t p = 0; p < dst->vals_len; p++) rt_storage_put(dst, p, fill);
    Place pl = {dst, old, 0};
    rt_storage_walk(old, place, &pl);
    *lost = pl.lost;
    return TJ_OK;
  }
  int64_t n = old->vals ? old->vals_len : 0;
  Entries e = {.s = old, .cap = n};
  e.crd = malloc((size_t)(n * old->order + 1) * sizeof *e.crd);
  e.vals = malloc((size_t)(n + 1) * sizeof *e.vals);
  if (!e.crd || !e.vals) {
    free(e.crd), free(e.vals);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory keeping the values of a '+=' output");
  }
  rt_storage_walk(old, collect, &e);
  Merge m = {dst, &e, 0, 0, fill};
  rt_storage_walk(dst, merge, &m);
  *lost = m.skipped + (e.n - m.k);   /* stepped over, or past dst's last entry */
  free(e.crd), free(e.vals);
  return TJ_OK;
}
