/* Merge lattices (TACO): per loop index, the set of iterator combinations
 * whose co-iteration covers every coordinate where the expression can be
 * nonzero. Leaves: a sparse level is a point of its own; a dense level, an
 * access without this index or a literal is a full point. Each operator's
 * algebra (OpAlgebra, ir/ops.def) gives its rule: OA_INTERSECT (`*`) takes
 * the conjunction, OA_UNION (`+ - min max`) the disjunction, OA_KEEP
 * (neg, sqrt, abs) keeps the operand's lattice, OA_DENSE (exp, log) adds a
 * full point. Then: points whose expression is zero are dropped, and when the
 * top point is full every non-full point goes (dense exhausts last).
 */
#include <stdio.h>

#include "lowerer.h"

int lw_access_index(const Lowerer *lw, const Expr *e) {
  for (int x = 0; x < lw->nacc; x++)
    if (lw->acc[x].e == e) return x;
  return -1;
}

int lw_level_at(const Lowerer *lw, int x, int depth) {
  const Access *ac = &lw->acc[x];
  if (ac->located) return -1;
  int bound = 0;
  for (int l = 0; l < ac->f->order; l++) {
    const IndexVar *v = ac->e->u.access.idx[ac->f->mode_order[l]];
    if (lw->depth_of[v->id] < depth) bound++;
  }
  if (bound >= ac->f->order) return -1;
  const IndexVar *v = ac->e->u.access.idx[ac->f->mode_order[bound]];
  return lw->depth_of[v->id] == depth ? bound : -1;
}

AMask lw_sparse_at(const Lowerer *lw, AMask alive, int depth) {
  AMask m = 0;
  for (int x = 1; x < lw->nacc; x++) {
    if (!(alive >> x & 1)) continue;
    int l = lw_level_at(lw, x, depth);
    if (l >= 0 && lw_is_sparse_level(lw, x, l)) m |= (AMask)1 << x;
  }
  return m;
}

typedef struct Alive {
  const Lowerer *lw;
  AMask alive;
  int depth;         /* the loops bound so far end here (-1: none known) */
} Alive;

static bool not_alive(const Expr *access, const void *ctx) {
  const Alive *a = ctx;
  return !(a->alive >> lw_access_index(a->lw, access) & 1);
}

/* Alive, all its levels bound by depth, and not one a merged loop may
 * have missed (its hit flag decides at run time). */
static bool certainly_present(const Expr *access, const void *ctx) {
  const Alive *a = ctx;
  int x = lw_access_index(a->lw, access);
  return (a->alive >> x & 1) && a->lw->acc[x].last_depth <= a->depth && !a->lw->live[x] &&
         !a->lw->acc[x].located; /* an all-dense mask is valued: its value decides */
}

bool lw_reduces_to_zero(const Lowerer *lw, const Expr *sum) {
  return nt_sum_identity(sum) == nt_semiring_zero(lw->nest.semiring);
}

bool lw_expr_zero(const Lowerer *lw, const Expr *e, AMask alive) {
  Alive a = {lw, alive, -1};
  return nt_expr_zero(e, lw->nest.semiring, &(NtPresence){not_alive, NULL}, &a);
}

bool lw_expr_excluded(const Lowerer *lw, const Expr *e, AMask alive, int depth) {
  Alive a = {lw, alive, depth};
  return nt_expr_zero(e, lw->nest.semiring, &(NtPresence){not_alive, certainly_present}, &a);
}

static void add_point(Lattice *L, AMask m, bool full) {
  for (int q = 0; q < L->n; q++)
    if (L->p[q].sparse == m && L->p[q].full == full) return;
  if (L->n < LAT_MAX_POINTS) L->p[L->n++] = (LatPoint){m, full};
  else L->overflow = true;
}

static void lat_conj(const Lattice *x, const Lattice *y, Lattice *out) {
  out->n = 0;
  out->overflow = x->overflow || y->overflow;
  for (int a = 0; a < x->n; a++)
    for (int b = 0; b < y->n; b++)
      add_point(out, x->p[a].sparse | y->p[b].sparse,
                x->p[a].full && y->p[b].full);
}

static void disj(const Lattice *x, const Lattice *y, Lattice *out) {
  Lattice r = {.overflow = x->overflow || y->overflow};
  for (int a = 0; a < x->n; a++)
    for (int b = 0; b < y->n; b++)
      add_point(&r, x->p[a].sparse | y->p[b].sparse,
                x->p[a].full || y->p[b].full);
  for (int a = 0; a < x->n; a++) add_point(&r, x->p[a].sparse, x->p[a].full);
  for (int b = 0; b < y->n; b++) add_point(&r, y->p[b].sparse, y->p[b].full);
  *out = r;
}

static const Lattice FULL = {1, false, {{0, true}}};

static void build(const Lowerer *lw, const Expr *e, AMask alive, int depth,
                  Lattice *out) {
  Lattice x = {0}, y = {0};
  out->n = 0;
  out->overflow = false;
  switch (e->kind) {
  case EX_ACCESS: {
    int ax = lw_access_index(lw, e);
    if (!(alive >> ax & 1)) return;
    int l = lw_level_at(lw, ax, depth);
    if (l >= 0 && lw_is_sparse_level(lw, ax, l))
      add_point(out, (AMask)1 << ax, false);
    else
      *out = FULL;
    return;
  }
  case EX_LITERAL:
    if (e->u.lit.value != nt_semiring_zero(lw->nest.semiring)) *out = FULL;
    return;
  case EX_SUM: /* sum_j e is 0 where e is; min_j over nothing is +inf */
    build(lw, e->u.sum.a, alive, depth, out);
    if (!lw_reduces_to_zero(lw, e)) disj(out, &FULL, out);
    return;
  default: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  build(lw, k[0], alive, depth, &x);
  if (n == 2) build(lw, k[1], alive, depth, &y);
  switch (nt_expr_algebra(e, lw->nest.semiring)) {
  case OA_LEFT: /* x's points, each also co-iterating y's (which case applies) */
    *out = x;
    for (int p = 0; p < x.n; p++)
      for (int q = 0; q < y.n; q++) add_point(out, x.p[p].sparse | y.p[q].sparse, x.p[p].full);
    out->overflow |= y.overflow;
    return;
  case OA_NUMERATOR:
    if (y.n == 0) y = FULL; /* x / 0: keep x's points */
    lat_conj(&x, &y, out);
    return;
  case OA_INTERSECT: lat_conj(&x, &y, out); return;
  case OA_UNION: disj(&x, &y, out); return;
  case OA_KEEP: *out = x; return;
  case OA_DENSE:
    if (n == 2) disj(&x, &y, &x);
    disj(&x, &FULL, out);
    return;
  case OA_RIGHT:
  case OA_EXCEPT: /* y's points, each also co-iterating x's iterators (the
                     cases that exclude): y's range, not the intersection */
    *out = y;
    for (int p = 0; p < y.n; p++)
      for (int q = 0; q < x.n; q++) add_point(out, y.p[p].sparse | x.p[q].sparse, y.p[p].full);
    out->overflow |= x.overflow;
    return;
  }
}

static int popcount(AMask m) { return __builtin_popcountll(m); }

void lw_lattice(const Lowerer *lw, AMask alive, int depth, Lattice *out) {
  Lattice raw;
  build(lw, lw->root, alive, depth, &raw);
  AMask at = lw_sparse_at(lw, alive, depth);
  out->n = 0;
  out->overflow = raw.overflow;
  /* Top first: more iterators first, full before not full. */
  for (int want = 64; want >= 0; want--)
    for (int full = 1; full >= 0; full--)
      for (int q = 0; q < raw.n; q++) {
        const LatPoint *p = &raw.p[q];
        if (popcount(p->sparse) != want || p->full != (bool)full) continue;
        AMask keep = alive & ~(at & ~p->sparse);
        if (lw_expr_zero(lw, lw->root, keep)) continue;
        out->p[out->n++] = *p;
      }
  if (out->n && out->p[0].full) {
    int n = 0;
    for (int q = 0; q < out->n; q++)
      if (out->p[q].full) out->p[n++] = out->p[q];
    out->n = n;
  }
}

/* A bound of the points of e's lattice: n with a sparse iterator, and
 * whether one without (full) may exist. Mirrors build(). */
typedef struct Bound {
  int64_t n;
  bool full;
} Bound;

enum { BOUND_CAP = 1 << 30 };

static int64_t sat(int64_t v) { return v > BOUND_CAP ? BOUND_CAP : v; }

/* Points of x AND y: the pairs whose union has a sparse iterator. */
static Bound bound_conj(Bound x, Bound y) {
  return (Bound){sat(x.n * y.n + x.n * y.full + x.full * y.n), x.full && y.full};
}

/* Points of x OR y: the pairs, then x's and y's own. */
static Bound bound_disj(Bound x, Bound y) {
  Bound c = bound_conj(x, y);
  return (Bound){sat(c.n + x.n + y.n), x.full || y.full};
}

static Bound bound(const Lowerer *lw, const Expr *e, AMask alive, int depth) {
  const Bound zero = {0, false}, full = {0, true};
  switch (e->kind) {
  case EX_ACCESS: {
    int ax = lw_access_index(lw, e);
    if (!(alive >> ax & 1)) return zero;
    return lw_sparse_at(lw, (AMask)1 << ax, depth) ? (Bound){1, false} : full;
  }
  case EX_LITERAL: return e->u.lit.value != nt_semiring_zero(lw->nest.semiring) ? full : zero;
  case EX_SUM: {
    Bound b = bound(lw, e->u.sum.a, alive, depth);
    return lw_reduces_to_zero(lw, e) ? b : bound_disj(b, full);
  }
  default: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  Bound x = bound(lw, k[0], alive, depth), y = n == 2 ? bound(lw, k[1], alive, depth) : zero;
  switch (nt_expr_algebra(e, lw->nest.semiring)) {
  case OA_LEFT: {
    Bound c = bound_conj(x, y);
    return (Bound){sat(c.n + x.n), x.full};
  }
  case OA_NUMERATOR:
    if (!y.n && !y.full) y = full;
    return bound_conj(x, y);
  case OA_INTERSECT: return bound_conj(x, y);
  case OA_UNION: return bound_disj(x, y);
  case OA_KEEP: return x;
  case OA_DENSE: return bound_disj(n == 2 ? bound_disj(x, y) : x, full);
  case OA_RIGHT:
  case OA_EXCEPT: {
    Bound c = bound_conj(x, y);
    return (Bound){sat(c.n + y.n), y.full};
  }
  }
  return zero;
}

int64_t lw_lattice_bound(const Lowerer *lw, AMask alive, int depth) {
  Bound b = bound(lw, lw->root, alive, depth);
  return b.n + b.full;
}

bool lw_wide_at(const Lowerer *lw, AMask alive, int depth) {
  int max = lw->opt->lattice_max > 0 ? lw->opt->lattice_max : LOWER_LATTICE_MAX;
  if (max > LAT_MAX_POINTS) max = LAT_MAX_POINTS;
  return lw_lattice_bound(lw, alive, depth) > max;
}

void lw_print_point(FILE *out, const Lowerer *lw, const LatPoint *p) {
  fputc('[', out);
  bool first = true;
  for (int x = 1; x < lw->nacc; x++) {
    if (!(p->sparse >> x & 1)) continue;
    fprintf(out, "%s%s", first ? "" : " ", lw->acc[x].e->u.access.t->name);
    first = false;
  }
  if (p->full) fprintf(out, "%sfull", first ? "" : " ");
  fputc(']', out);
}
