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
 * is. The planner takes this path for a sparse or all-dense output written
 * by its innermost loop, with no reduction, mask or semiring, once there are at
 * least LOWER_SCATTER_MIN (3) terms, or TJ_SCATTER_UNION_MIN (bench/README.md,
 * wide unions: from 3 terms it computes 2-60x faster than the lattice or
 * merged loop and assembles about as fast; at 2 its assembly, which sorts
 * each row's coordinates, is 1.4x the lattice's).
 */
#include "lowerer.h"

/* Whether e may be split into terms, or be one: no sum node (its loops
 * nest below the output's) and no structural mask (masks decide where
 * entries exist, not how much they add). */
static bool splittable(const Expr *e) {
  if (e->kind == EX_SUM) return false;
  OpKind op = nt_expr_op(e);
  if (op == OP_MASK || op == OP_EXCEPT) return false;
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++)
    if (!splittable(k[i])) return false;
  return true;
}

static int64_t sat_mul(int64_t x, int64_t y) {
  return x > (int64_t)1 << 30 || y > (int64_t)1 << 30 ? (int64_t)1 << 60 : x * y;
}

/* The number of additive terms of e once products are distributed. */
static int64_t count_terms(const Expr *e) {
  switch (nt_expr_op(e)) {
  case OP_ADD:
  case OP_SUB: return count_terms(e->u.op.a) + count_terms(e->u.op.b);
  case OP_NEG: return count_terms(e->u.op.a);
  case OP_MUL: return sat_mul(count_terms(e->u.op.a), count_terms(e->u.op.b));
  default: return 1;
  }
}

int lower_union_term_count(const Expr *e) {
  if (!splittable(e)) return 0;
  int64_t n = count_terms(e);
  return n > LW_MAX_ACCESS ? 0 : (int)n;
}

static Expr *node(Arena *a, OpKind op, Expr *x, Expr *y, const Expr *like) {
  Expr *e = nt_op_node(a, op, x, y, like->col);
  if (e) e->dtype = like->dtype;
  return e;
}

/* Appends e's terms (negated when neg) to out[*n]; false when out of memory. */
static bool split(Arena *a, const Expr *e, bool neg, Expr **out, int *n) {
  switch (nt_expr_op(e)) {
  case OP_ADD:
  case OP_SUB:
    return split(a, e->u.op.a, neg, out, n) &&
           split(a, e->u.op.b, e->u.op.id == OP_SUB ? !neg : neg, out, n);
  case OP_NEG: return split(a, e->u.op.a, !neg, out, n);
  case OP_MUL: {
    Expr *x[LW_MAX_ACCESS], *y[LW_MAX_ACCESS];
    int nx = 0, ny = 0;
    if (!split(a, e->u.op.a, neg, x, &nx) || !split(a, e->u.op.b, false, y, &ny))
      return false;
    for (int i = 0; i < nx; i++)
      for (int j = 0; j < ny; j++)
        if (!(out[(*n)++] = node(a, OP_MUL, x[i], y[j], e))) return false;
    return true;
  }
  default:
    out[*n] = neg ? node(a, OP_NEG, (Expr *)e, NULL, e) : (Expr *)e;
    return out[(*n)++] != NULL;
  }
}

int lw_union_terms(Lowerer *lw, Expr **out) {
  int n = lower_union_term_count(lw->root);
  if (n < 2) return 0;
  int got = 0;
  if (!split(lw->a, lw->root, false, out, &got) || got != n)
    return diag_error(lw->d, TJ_ERR_NOMEM, "out of memory while lowering"), -1;
  return n;
}

bool lw_scatters_terms(const Lowerer *lw, int depth) {
  return depth == lw->nest.ws_depth && lw->nest.order[depth] == lw->nest.ws_var &&
         depth + 1 == lw->nest.nloops && lw->scope_end == lw->nest.nloops &&
         !lw->root_reduces && !lw->valued_masks && !lw->as->semiring && !lw->as->accumulate &&
         lw->out_init == 0 && lower_union_term_count(lw->as->rhs) >= 2;
}

bool lower_plan_scatter_union(const Assignment *as, LowerPlan *p, int min_terms) {
  const tj_format *f = &p->fmt[0];
  /* a sparse output appends its last level; a dense one is all dense (the
   * workspace drains into located entries) */
  bool dense_out = !p->out_sparse && f->order > 0 && !lv_format_has_sparse(f);
  if (p->ws_depth >= 0 || p->vws_depth >= 0 || (!p->out_sparse && !dense_out) || as->semiring || as->accumulate ||
      p->nloops == 0 || f->order == 0 ||
      (p->out_sparse && !lv_at(f, f->order - 1, LV_HAS_POS)))
    return false;
  IndexVar *v = as->lhs->u.access.idx[f->mode_order[f->order - 1]];
  if (p->order[p->nloops - 1] != v) return false; /* a reduction loop below it */
  for (int k = 0; k < p->nloops; k++)
    if (nt_is_reduction_var(as, p->order[k])) return false;
  int n = lower_union_term_count(as->rhs);
  if (n < 2 || n < min_terms) return false;
  p->ws_depth = p->nloops - 1;
  p->ws_var = v;
  return true;
}
