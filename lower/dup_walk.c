/* Duplicates walked one by one: where the loop over a trailing nonunique
 * level (`du`, `ddu`, `dsu`) may visit its entries as they are stored
 * instead of by runs of equal coordinates.
 *
 * A run's duplicates stand for their sum. Walking a run as one entry
 * (lower_loops.c: read_coord scans for its end, hoist_value sums it) is
 * what co-iteration and nonlinear uses need: A + B, A .* A, max(A, 0), a
 * min.plus sum. Where the loop walks the level alone (every other operand
 * there is dense, located) and the entry's value reaches a `+` update
 * (a sum's temp, or `+=` into a dense output) only through operators
 * linear in it (ir/ops.def's OL_LINEAR), each duplicate adds its own
 * share to the same target: sum_d f(a_d) = f(sum_d a_d). The loop is
 * then the one a unique level gets, one position per iteration:
 *   for (pA1 = pos[i]; pA1 < pos[i + 1]; pA1++) { j = crd[pA1]; t += vals[pA1] * x[j]; }
 * which the vectorizer takes. Workspaces, masks, semirings other than
 * plus.times and bool (+ is max) keep the runs.
 */
#include "lowerer.h"

/* Whether the current scope's update adds its value: a sum's temp by +,
 * or a dense output by += (a root reduction or the statement's +=). */
static bool update_adds(const Lowerer *lw) {
  const NtSemiring *sr = lw->nest.semiring;
  if (sr && (sr->add != OP_ADD || sr->mul != OP_MUL)) return false;
  if (lw->is_bool || lw->valued_masks || lw->nest.ws_depth >= 0 || lw->nest.vws_depth >= 0)
    return false;
  if (lw->target == T_TEMP) return lw->temp_op == OP_ADD && !lw->temp_def;
  if (lw->target != T_OUT) return false;
  return !lw->plan->out_sparse && !lw->plan->out_like && lw->out_op == OP_ADD &&
         !lw->out_def && !lw->stores_all;
}

/* Whether e's value is linear in the access a it holds: a itself, or an
 * operator linear in the operand holding a (a float division's
 * numerator: integer division is not). */
static bool linear_in(const Lowerer *lw, const Expr *e, const Expr *a) {
  if (e == a) return true;
  if (e->kind != EX_OP) return false;
  Expr *k[2];
  int n = nt_children(e, k);
  OpKind op = nt_expr_op(e);
  if (op == OP_DIV && !lir_type_is_float(lw->vtype)) return false;
  for (int i = 0; i < n; i++) {
    const Expr *acc[LW_MAX_ACCESS];
    int m = 0;
    lw_collect_accesses(k[i], acc, &m, LW_MAX_ACCESS);
    bool holds = false;
    for (int j = 0; j < m && j < LW_MAX_ACCESS; j++) holds |= acc[j] == a;
    if (holds)
      return (nt_op(op)->laws & (i == 0 ? OL_LINEAR_X : OL_LINEAR_Y)) && linear_in(lw, k[i], a);
  }
  return false;
}

/* Whether access x alone has a sparse level at depth among the accesses
 * of the current scope (no co-iteration there). */
static bool walks_alone(const Lowerer *lw, int x, int depth) {
  AMask in = lw_accesses_in(lw, lw->root, ~(AMask)0);
  for (int y = 1; y < lw->nacc; y++) {
    if (y == x || !(in >> y & 1)) continue;
    int l = lw_level_at(lw, y, depth);
    if (l >= 0 && lw_is_sparse_level(lw, y, l)) return false;
  }
  return true;
}

bool lw_dups_walked(const Lowerer *lw, int x, int l) {
  const tj_format *f = lw->acc[x].f;
  if (l != f->order - 1 || lv_at(f, l, LV_UNIQUE) || !lv_at(f, l, LV_HAS_POS)) return false;
  for (int k = 0; k < l; k++)
    if (lw_level_segmented(f, k)) return false;
  if (lw->live[x] || lw_access_sliced(lw, x) || !update_adds(lw)) return false;
  int depth = -1;
  for (int d = 0; d < lw->nest.nloops && depth < 0; d++)
    if (lw_level_at(lw, x, d) == l) depth = d;
  return depth >= 0 && walks_alone(lw, x, depth) && linear_in(lw, lw->root, lw->acc[x].e);
}
