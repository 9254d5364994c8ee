/* Duplicates walked one by one: where an operand's nonunique levels may
 * be visited entry by entry, as they are stored, instead of by runs of
 * equal coordinates, so the operand is read in place.
 *
 * A run's duplicates stand for their sum: at a trailing level (`du`,
 * `dw`) the entries of the run, above other levels (`us`, `ud`, `ws`) the
 * fibers of the run's positions. Walking a run as one entry (lower_loops.c:
 * read_coord scans for its end, hoist_value sums it), or merging its
 * fibers into a copy (iter_graph.c), is what co-iteration and nonlinear
 * uses need: A + B, A .* A, max(A, 0), a min.plus sum. Where the access
 * walks its levels alone (every other operand dense there, located) and
 * its value reaches a `+` update (the sum's temp of the level's index, or
 * `+=` / a root sum into a dense output) only through operators linear in
 * it (ir/ops.def's OL_LINEAR), each entry adds its own share to the same
 * target: sum_d f(a_d) = f(sum_d a_d). No order is needed then (each
 * share adds into the same place), so a `dw` needs no sorted copy and a
 * `us` no merged one: its level-0 loop is `ss`'s loop over positions, each
 * position's own fiber below it, and the output's row is added to
 *   for (p0 = ...) { i = crd0[p0]; t = 0; for (p1 = pos1[p0]; ...) t += ...; y[i] += t; }
 * which several positions of one row may do (never in parallel: the row
 * loop is then serial, lower.c; row chunks sum partial outputs).
 * Workspaces, masks, semirings other than plus.times, bool and a tensor
 * read twice keep the runs (or the copy).
 *
 * The plan decides (lower_plan_dups_walked, once per operand), before
 * the copy is made or not, and the lowering reads its decision
 * (lw_dups_walked): one rule for both.
 */
#include "lowerer.h"

/* Whether the nonunique levels of f may be walked entry by entry at all:
 * each has positions and is the last level or owns fibers (no singleton
 * below: COO's runs of `uq` are walked by runs), and f is no view. */
static bool format_walkable(const tj_format *f) {
  bool dups = false;
  for (int l = 0; l < f->order; l++) {
    if (lv_at(f, l, LV_BRANCHLESS)) return false;
    if (lv_at(f, l, LV_UNIQUE)) continue;
    if (!lv_at(f, l, LV_HAS_POS) || (l + 1 < f->order && !lv_runs_own_fibers(f, l)))
      return false;
    dups = true;
  }
  return dups && !lv_format_sliced(f) && !f->ndims;
}

/* Whether e holds a mask or except (its mask's values or pattern decide
 * where the access counts: walked by runs). */
static bool has_mask(const Expr *e) {
  OpKind op = nt_expr_op(e);
  if (op == OP_MASK || op == OP_EXCEPT) return true;
  Expr *k[2];
  int n = e->kind == EX_SUM ? (k[0] = e->u.sum.a, 1) : nt_children(e, k);
  for (int i = 0; i < n; i++)
    if (has_mask(k[i])) return true;
  return false;
}

/* Whether e's value is linear in the access a it holds: a itself, or an
 * operator linear in the operand holding a (a float division's
 * numerator: integer division is not). */
static bool linear_in(const Expr *e, const Expr *a, bool is_float) {
  if (e == a) return true;
  if (e->kind != EX_OP) return false;
  Expr *k[2];
  int n = nt_children(e, k);
  OpKind op = nt_expr_op(e);
  if (op == OP_DIV && !is_float) return false;
  for (int i = 0; i < n; i++) {
    const Expr *acc[LW_MAX_ACCESS];
    int m = 0;
    lw_collect_accesses(k[i], acc, &m, LW_MAX_ACCESS);
    bool holds = false;
    for (int j = 0; j < m && j < LW_MAX_ACCESS; j++) holds |= acc[j] == a;
    if (holds)
      return (nt_op(op)->laws & (i == 0 ? OL_LINEAR_X : OL_LINEAR_Y)) && linear_in(k[i], a, is_float);
  }
  return false;
}

/* Whether access a is found under e. */
static bool holds(const Expr *e, const Expr *a) {
  const Expr *acc[LW_MAX_ACCESS];
  int m = 0;
  lw_collect_accesses(e, acc, &m, LW_MAX_ACCESS);
  for (int j = 0; j < m && j < LW_MAX_ACCESS; j++)
    if (acc[j] == a) return true;
  return false;
}

/* The scope that sums over v around access a: the innermost sum node over
 * v holding a, or NULL for the root. */
static const Expr *scope_of(const Expr *e, const Expr *a, const IndexVar *v) {
  const Expr *found = NULL;
  while (e != a) {
    if (e->kind == EX_SUM) {
      if (e->u.sum.iv == v) found = e;
      e = e->u.sum.a;
      continue;
    }
    Expr *k[2];
    int n = e->kind == EX_OP ? nt_children(e, k) : 0, i = 0;
    while (i < n && !holds(k[i], a)) i++;
    if (i == n) return NULL;
    e = k[i];
  }
  return found;
}

/* Whether the root scope updates a dense output by +: a root sum, or +=. */
static bool root_adds(const Assignment *as) {
  bool reduces = as->accumulate;
  for (int v = 0; v < as->nindices; v++) reduces |= nt_is_root_reduction(as, as->indices[v]);
  return reduces && as->root_op == OP_ADD && !as->root_def && !as->old_output;
}

/* Whether the scope summing over level l's index of access a adds each
 * entry's share linearly: a sum node's + over a body linear in a, or the
 * root's + update over a rhs linear in a. */
static bool level_adds(const Assignment *as, const Expr *a, const IndexVar *v) {
  bool is_float = lir_type_is_float(lir_dtype_type(as->lhs->dtype));
  const Expr *s = scope_of(as->rhs, a, v);
  if (s) return s->u.sum.op == OP_ADD && !s->u.sum.def && linear_in(s->u.sum.a, a, is_float);
  return root_adds(as) && linear_in(as->rhs, a, is_float);
}

/* Whether no other access of the rhs has a sparse level over v. */
static bool walked_alone(const Assignment *as, const LowerPlan *p, const Expr *a,
                         const IndexVar *v) {
  const Expr *acc[LW_MAX_ACCESS];
  int m = 0;
  lw_collect_accesses(as->rhs, acc, &m, LW_MAX_ACCESS);
  for (int k = 0; k < m && k < LW_MAX_ACCESS; k++) {
    if (acc[k] == a) continue;
    const tj_format *f = &p->fmt[acc[k]->u.access.t->id];
    for (int l = 0; l < f->order; l++)
      if (acc[k]->u.access.idx[f->mode_order[l]] == v && !lv_at(f, l, LV_FULL)) return false;
  }
  return true;
}

/* The one access of tensor t in e, or NULL (none, or several). */
static const Expr *only_access(const Expr *e, TensorId t) {
  const Expr *acc[LW_MAX_ACCESS], *one = NULL;
  int m = 0;
  if (!lw_collect_accesses(e, acc, &m, LW_MAX_ACCESS)) return NULL;
  for (int k = 0; k < m; k++) {
    if (acc[k]->u.access.t->id != t) continue;
    if (one) return NULL;
    one = acc[k];
  }
  return one;
}

bool lower_plan_dups_walked(const Assignment *as, const LowerPlan *p, TensorId t) {
  const tj_format *f = &p->fmt[t];
  const NtSemiring *sr = as->semiring;
  if (!format_walkable(f) || (sr && (sr->add != OP_ADD || sr->mul != OP_MUL)) ||
      as->lhs->dtype == TJ_BOOL || lv_format_has_sparse(&p->fmt[0]) || has_mask(as->rhs) ||
      p->ws_depth >= 0 || p->vws_depth >= 0 || p->split_sum || p->out_like)
    return false;
  const Expr *a = only_access(as->rhs, t);
  if (!a) return false;
  for (int l = 0; l < f->order; l++) {
    const IndexVar *v = a->u.access.idx[f->mode_order[l]];
    if (!walked_alone(as, p, a, v)) return false;
    if (!lv_at(f, l, LV_UNIQUE) && !level_adds(as, a, v)) return false;
  }
  return true;
}

bool lw_dups_walked(const Lowerer *lw, int x, int l) {
  const tj_format *f = lw->acc[x].f;
  TensorId t = lw->acc[x].t;
  return x > 0 && t < lw->ops.ntensors && !lv_at(f, l, LV_UNIQUE) && lv_at(f, l, LV_HAS_POS) &&
         lw->plan->dups_walked[t];
}

bool lw_walks_dups_at(const Lowerer *lw, int depth) {
  for (int x = 1; x < lw->nacc; x++) {
    int l = lw_level_at(lw, x, depth);
    if (l >= 0 && lw_dups_walked(lw, x, l)) return true;
  }
  return false;
}
