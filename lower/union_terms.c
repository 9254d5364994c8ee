/* Wide unions scattered term by term into a dense workspace.
 *
 * A sum of k sparse operands co-iterated in one loop (a lattice, or the
 * merged loop of a wide one) does O(k) work per output coordinate. Its
 * additive terms can instead each walk their own fiber and add into a
 * dense workspace row, which records first touches in a list:
 *
 *   A(i,j) = B1(i,j) + ... + Bk(i,j)
 *     -> forall(i, where(forall(j, A(i,j) = w(j)),
 *                        forall(j, w(j) += B1(i,j)) ... forall(j, w(j) += Bk(i,j))))
 *
 * O(nnz) per row whatever k. Products distribute over the sums
 * ((B1 + B2) * C -> B1 * C + B2 * C, each term an intersection), a
 * difference negates its right terms, and any other node is one term as it
 * is. Under a semiring its add splits and its mul distributes (min.plus:
 * min(B1, B2) + C -> min(B1 + C, B2 + C)) where mul distributes over add
 * for every value; elsewhere (plus.pair, plus.min, min.times) only the add
 * splits, and an or adds no terms (or(0, 0.5) is 1, not 0.5).
 * mask(M, y) and except(M, y) are linear in y: each term of y is masked.
 * The planner takes this path for a sparse or all-dense output written
 * by its innermost loop, with no reduction (+= into a dense output
 * only), once there are at least LOWER_SCATTER_MIN (3) terms (a plain sum
 * into a sparse output: LOWER_SCATTER_MIN_SPARSE_SUM, 4), or
 * TJ_SCATTER_UNION_MIN (bench/README.md, wide unions: from 3 terms it
 * computes 2-60x faster than the lattice or merged loop and assembles
 * about as fast; at 2 its assembly, which sorts each row's coordinates, is
 * 1.4x the lattice's). A root sum over such a union needs no workspace:
 * its temp adds each term's own loop nest (split_sum),
 *   y(i) = sum_j (B1 + ... + Bk)(i,j) * x(j) -> t += sum_j B1 * x; ... t += sum_j Bk * x
 */
#include "lowerer.h"

/* Whether e may be split into terms, or be one: no sum node (its loops
 * nest below the output's). */
static bool splittable(const Expr *e) {
  if (e->kind == EX_SUM) return false;
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++)
    if (!splittable(k[i])) return false;
  return true;
}

static int64_t sat_mul(int64_t x, int64_t y) {
  return x > (int64_t)1 << 30 || y > (int64_t)1 << 30 ? (int64_t)1 << 60 : x * y;
}

/* The operators a union's terms are split at and distributed over: the
 * semiring's add and mul (+ and * under plus.times, where - and unary -
 * split too; a semiring refuses them). */
typedef struct TermOps {
  OpKind add, mul;   /* mul is OP_NONE where it does not distribute over add */
} TermOps;

/* Whether mul(a, add(b, c)) = add(mul(a, b), mul(a, c)) for every value:
 * not for plus.pair (1 + 1 against 1), plus.min, nor min.times and
 * max.times over negative values. */
static bool distributes(OpKind add, OpKind mul) {
  return (add == OP_ADD && mul == OP_MUL) || ((add == OP_MIN || add == OP_MAX) && mul == OP_ADD) ||
         (add == OP_MIN && mul == OP_MAX) || (add == OP_MAX && mul == OP_MIN) ||
         (add == OP_OR && mul == OP_AND);
}

/* Those of semiring sr (NULL: plus.times). */
static TermOps term_ops(const NtSemiring *sr) {
  TermOps o = sr ? (TermOps){sr->add, sr->mul} : (TermOps){OP_ADD, OP_MUL};
  if (!distributes(o.add, o.mul)) o.mul = OP_NONE;
  return o;
}

/* Whether terms may be added one by one onto the add's identity: add(0, x)
 * is x for +, min and max, but or(0, 0.5) is 1 where the merged loop keeps
 * a lone 0.5 (or.and over f64 values). */
static bool adds_onto_identity(const NtSemiring *sr) {
  OpKind add = term_ops(sr).add;
  return add == OP_ADD || add == OP_MIN || add == OP_MAX;
}

/* mask(M, y) and except(M, y): y where M has (has no) an entry, linear in
 * y, so a sum under it splits into masked terms. */
static bool is_mask(OpKind op) { return op == OP_MASK || op == OP_EXCEPT; }

/* The number of additive terms of e once products are distributed. */
static int64_t count_terms(const Expr *e, TermOps o) {
  OpKind op = nt_expr_op(e);
  if (op == OP_SUB) return count_terms(e->u.op.a, o) + count_terms(e->u.op.b, o);
  if (op == OP_NEG) return count_terms(e->u.op.a, o);
  Expr *k[2];
  if (is_mask(op) && nt_children(e, k) == 2) return count_terms(k[1], o);
  if ((op != o.add && op != o.mul) || nt_children(e, k) != 2) return 1;
  int64_t x = count_terms(k[0], o), y = count_terms(k[1], o);
  return op == o.add ? x + y : sat_mul(x, y);
}

/* lower_union_term_count under semiring sr. */
static int term_count(const NtSemiring *sr, const Expr *e) {
  if (!splittable(e)) return 0;
  int64_t n = count_terms(e, term_ops(sr));
  return n > LW_MAX_ACCESS ? 0 : (int)n;
}

int lower_union_term_count(const Assignment *as, const Expr *e) {
  return term_count(as->semiring, e);
}

/* A node op(x, y) of like's column and dtype; NULL when out of memory. */
static Expr *node(Arena *a, OpKind op, Expr *x, Expr *y, const Expr *like) {
  Expr *e = nt_op_node(a, op, x, y, like->col);
  if (e) e->dtype = like->dtype;
  return e;
}

/* Appends e's terms (negated when neg) to out[*n]; false when out of memory. */
static bool split(Arena *a, const Expr *e, TermOps o, bool neg, Expr **out, int *n) {
  OpKind op = nt_expr_op(e);
  if (op == OP_SUB)
    return split(a, e->u.op.a, o, neg, out, n) && split(a, e->u.op.b, o, !neg, out, n);
  if (op == OP_NEG) return split(a, e->u.op.a, o, !neg, out, n);
  Expr *k[2];
  if (is_mask(op) && nt_children(e, k) == 2) { /* mask(M, x + y) = mask(M, x) + mask(M, y) */
    Expr *y[LW_MAX_ACCESS];
    int ny = 0;
    if (!split(a, k[1], o, neg, y, &ny)) return false;
    for (int j = 0; j < ny; j++)
      if (!(out[(*n)++] = node(a, op, k[0], y[j], e))) return false;
    return true;
  }
  if ((op == o.add || op == o.mul) && nt_children(e, k) == 2) {
    if (op == o.add) return split(a, k[0], o, neg, out, n) && split(a, k[1], o, neg, out, n);
    Expr *x[LW_MAX_ACCESS], *y[LW_MAX_ACCESS];
    int nx = 0, ny = 0;
    if (!split(a, k[0], o, neg, x, &nx) || !split(a, k[1], o, false, y, &ny)) return false;
    for (int i = 0; i < nx; i++)
      for (int j = 0; j < ny; j++)
        if (!(out[(*n)++] = node(a, o.mul, x[i], y[j], e))) return false;
    return true;
  }
  out[*n] = neg ? node(a, OP_NEG, (Expr *)e, NULL, e) : (Expr *)e;
  return out[(*n)++] != NULL;
}

int lw_union_terms(Lowerer *lw, Expr **out) {
  int n = term_count(lw->nest.semiring, lw->root);
  if (n < 2) return 0;
  int got = 0;
  if (!split(lw->a, lw->root, term_ops(lw->nest.semiring), false, out, &got) || got != n)
    return diag_error(lw->d, TJ_ERR_NOMEM, "out of memory while lowering"), -1;
  return n;
}

OpKind lw_term_add(const Lowerer *lw) { return term_ops(lw->nest.semiring).add; }

bool lw_scatters_terms(const Lowerer *lw, int depth) {
  return depth == lw->nest.ws_depth && lw->nest.order[depth] == lw->nest.ws_var &&
         depth + 1 == lw->nest.nloops && lw->scope_end == lw->nest.nloops &&
         !lw->root_reduces && !lw->valued_masks &&
         (!lw->nest.keeps_old || !lw->plan->out_sparse) &&
         term_count(lw->nest.semiring, lw->nest.rhs) >= 2;
}

/* Whether a root sum over a union may add the union's terms into its temp
 * one loop nest each: sum_j (B1 + ... + Bk) = sum_j B1 + ... + sum_j Bk
 * (plus only: no semiring, no user-defined reduction, no sum node below). */
static bool plan_split_sum(const Assignment *as, const LowerPlan *p, int min_terms) {
  if (as->root_def || as->root_op != term_ops(as->semiring).add ||
      !adds_onto_identity(as->semiring))
    return false;
  bool sums = false;
  for (int k = 0; k < p->nloops; k++) sums |= nt_is_root_reduction(as, p->order[k]);
  int n = lower_union_term_count(as, as->rhs);
  return sums && n >= 2 && n >= min_terms;
}

/* Whether e is a sum or difference of accesses (no products, no scale). */
static bool plain_sum(const Expr *e) {
  OpKind op = nt_expr_op(e);
  if (op == OP_ADD || op == OP_SUB) return plain_sum(e->u.op.a) && plain_sum(e->u.op.b);
  if (op == OP_NEG) return plain_sum(e->u.op.a);
  return e->kind == EX_ACCESS;
}

bool lower_plan_scatter_union(const Assignment *as, LowerPlan *p, int min_terms,
                              int min_sum_terms) {
  p->split_sum = p->ws_depth < 0 && p->vws_depth < 0 && plan_split_sum(as, p, min_sum_terms);
  if (p->split_sum) return true;
  const tj_format *f = &p->fmt[0];
  /* a sparse output appends its last level; a dense one is all dense (the
   * workspace drains into located entries) */
  bool dense_out = !p->out_sparse && f->order > 0 && !lv_format_has_sparse(f);
  if (p->ws_depth >= 0 || p->vws_depth >= 0 || (!p->out_sparse && !dense_out) ||
      !adds_onto_identity(as->semiring) ||
      (as->accumulate && (!dense_out || as->semiring || as->lhs->dtype == TJ_BOOL)) ||
      p->nloops == 0 || f->order == 0 ||
      (p->out_sparse && !lv_at(f, f->order - 1, LV_HAS_POS)))
    return false;
  IndexVar *v = as->lhs->u.access.idx[f->mode_order[f->order - 1]];
  if (p->order[p->nloops - 1] != v) return false; /* a reduction loop below it */
  for (int k = 0; k < p->nloops; k++)
    if (nt_is_reduction_var(as, p->order[k])) return false;
  int n = lower_union_term_count(as, as->rhs);
  if (min_terms <= 0)
    min_terms = p->out_sparse && plain_sum(as->rhs) ? LOWER_SCATTER_MIN_SPARSE_SUM
                                                    : LOWER_SCATTER_MIN;
  if (n < 2 || n < min_terms) return false;
  p->ws_depth = p->nloops - 1;
  p->ws_var = v;
  return true;
}
