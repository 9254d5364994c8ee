/* The vector workspace of a subexpression: precompute(e, {j}, w) computes
 * e into a dense row w(j), then reads it where e was (TACO's precompute,
 * the workspace paper's where()):
 *
 *   y(i) = (B(i,j) + C(i,j)) * x(j)        precompute(B(i,j) + C(i,j), {j}, w)
 *     forall(i, where(forall(j, y(i) += w(j) * x(j)), forall(j, w(j) = B(i,j) + C(i,j))))
 *   A(i,j) = B(i,k,l) * D(l,j) * C(k,j)     precompute(B(i,k,l) * D(l,j), {j}, w)
 *     forall(i, forall(k, where(forall(j, A(i,j) += w(j) * C(k,j)),
 *                               forall(l, forall(j, w(j) += B(i,k,l) * D(l,j))))))
 *
 *   A(i,j) = B(i,k) * C(k,j) + D(i,j)       precompute(B(i,k) * C(k,j), {i,j}, w)
 *     where(forall(i, forall(j, A(i,j) = w(i,j) + D(i,j))),
 *           forall(i, forall(j, forall(k, w(i,j) += B(i,k) * C(k,j)))))
 *
 * Over {i, j, ...} w is dense over the indices in loop order; the where
 * sits at the outermost one's loop, and a loop between theirs must be of an
 * index summed only inside e (the producer's alone: the consumer skips it,
 * lw_subexpr_skips). When e is the whole body of the rhs's one sum, over
 * an index outside the set, the producer takes that sum's loop and the
 * consumer reads w in the sum's place (LowerPlan.vws_sum).
 *
 * The where sits at j's loop of the plan's order, or higher: the loops
 * right above j of indices summed only inside e move into the producer
 * (w then sums over them) when the operators between e and the root
 * distribute over a sum. The plan keeps its order: the producer walks the
 * where's loops down to j, the consumer j and the loops below it (which e
 * does not use), so every operand is walked as the plan converted it.
 *
 * Emitted at the where (lw_subexpr_where):
 *   <producer loops: w[j] = e (+= under its sums)>
 *   <consumer loops over j: ... w[j] ... in e's place; w[j] = 0 after the read>
 * The read resets w when the consumer's loop over j visits every j (one
 * dense point); otherwise the producer's loops run again to set what they
 * wrote back to 0, so the workspace costs no pass over all of j for a
 * sparse row. Under a parallel loop the workspace has one row per thread
 * (tj_rt_threads() rows, allocated zeroed once; each where takes its
 * thread's, tj_rt_thread_slot, and leaves it zeroed); row chunks of the
 * driver each allocate their own. A sparse output takes
 * the entries the consumer's loop visits, so that loop must walk a sparse
 * operand (not every j); the assembly runs the consumer alone.
 */
#include <stdlib.h>
#include <string.h>

#include "lowerer.h"

static bool refuse(Diag *d, const char *arg, const char *why, const char *x) {
  char msg[400];
  snprintf(msg, sizeof msg, why, x);
  return diag_error(d, TJ_ERR_UNSUPPORTED, "precompute(%s): %s", arg, msg);
}

/* The ancestors of node e in x, root first, into path; their number, or
 * -1 when e is not in x. */
static int path_to(const Expr *x, const Expr *e, const Expr **path, int depth) {
  if (x == e) return depth;
  if (depth >= NT_MAX_HEIGHT) return -1;
  Expr *k[2];
  int n = nt_children(x, k);
  path[depth] = x;
  for (int i = 0; i < n; i++) {
    int r = path_to(k[i], e, path, depth + 1);
    if (r >= 0) return r;
  }
  return -1;
}

/* Whether a plain sum around e may move out to the root through the nodes
 * of path (each linear in the operand on the path). */
static bool sums_pass(const Assignment *as, const Expr *const *path, int n, const Expr *e) {
  if (as->root_op != OP_ADD || as->root_def || as->semiring) return false;
  for (int k = 0; k < n; k++) {
    /* no sum nodes on the path (refused before): only operators pass */
    if (path[k]->kind != EX_OP || !nt_sum_passes(path[k], k + 1 < n ? path[k + 1] : e))
      return false;
  }
  return true;
}

/* The refusal of a workspace beside a sum over a subexpression that it is
 * not inside of (or that is inside it), naming the sum and the way around
 * it. */
static bool refuse_sum(Diag *d, const char *arg, const Expr *sum, const char *ws) {
  char *text = nt_expr_text(sum);
  bool ok = diag_error(d, TJ_ERR_UNSUPPORTED, "precompute(%s): the right-hand side sums over "
                       "a subexpression, %s (a where() of its own, which the workspace would "
                       "sit in); a vector workspace is lowered where every reduction is over "
                       "the whole right-hand side or inside the sum over its index: compute "
                       "that sum in a statement of its own (t(...) = the sum, with "
                       "precompute(..., %s)), then use t", arg, text ? text : "a sum", ws);
  free(text);
  return ok;
}

/* The plan's depth of v, or p->nloops. */
static int depth_in(const LowerPlan *p, const IndexVar *v) {
  int k = 0;
  while (k < p->nloops && p->order[k] != v) k++;
  return k;
}

/* Whether v's loop may belong to the producer alone: an index summed over
 * the whole rhs that only e uses (the sum moves into the producer). */
static bool producer_only(const Assignment *as, const Expr *e, const IndexVar *v) {
  return nt_is_root_reduction(as, v) && nt_uses_index(e, v) && !nt_uses_outside(as->rhs, e, v);
}

/* The workspace's indices in p's loop order into out (their depths into
 * at); false with d set when one has no loop. */
static bool order_vars(const LowerPlan *p, IndexVar *const *vars, int nvars, IndexVar **out,
                       int *at, const char *arg, Diag *d) {
  for (int q = 0; q < nvars; q++) {
    int dv = depth_in(p, vars[q]), k = q;
    if (dv == p->nloops) return refuse(d, arg, "no loop runs over %s", vars[q]->name);
    while (k > 0 && at[k - 1] > dv) out[k] = out[k - 1], at[k] = at[k - 1], k--;
    out[k] = vars[q], at[k] = dv;
  }
  return true;
}

bool lower_plan_subexpr_workspace(const Assignment *as, LowerPlan *p, const Expr *e,
                                  IndexVar *const *vars, int nvars, const char *name,
                                  const char *arg, Diag *d) {
  const Expr *sum[NT_MAX_INDICES];
  if (p->ws_depth >= 0 || p->vws_depth >= 0)
    return refuse(d, arg, "the kernel has a workspace already; one is lowered%s", "");
  const Expr *anc[NT_MAX_HEIGHT];
  int n = path_to(as->rhs, e, anc, 0);
  if (n < 0) return TJ_BUG(d, "the precomputed node is not in the right-hand side");
  IndexVar *ws[NT_MAX_INDICES] = {0};
  int wd[NT_MAX_INDICES];
  if (nvars < 1) return TJ_BUG(d, "a workspace over no index");
  if (!order_vars(p, vars, nvars, ws, wd, arg, d)) return false;
  IndexVar *j = ws[nvars - 1];
  /* A sum over a subexpression: the workspace is built inside its loop over
   * j when e lies in that sum's body (the residual's b(i) - sum(j, (B(i,j) +
   * C(i,j)) * x(j))), with no other sum on the way or inside e; or, when e
   * is the whole body of a plain sum over an index not in the set (GEMM
   * plus a matrix: sum(k, B(i,k) * C(k,j)) + D(i,j) over {i, j}), the
   * producer takes the sum's loop: w(i,j) += B(i,k) * C(k,j), and the
   * consumer reads w in the sum's place. */
  int nsums = nt_sums(as->rhs, sum, NT_MAX_INDICES), on_path = 0;
  const Expr *in_sum = NULL, *absorb = NULL;
  for (int k = 0; k < n; k++)
    if (anc[k]->kind == EX_SUM) on_path++, in_sum = anc[k];
  bool in_set = false;
  for (int q = 0; in_sum && q < nvars; q++) in_set |= ws[q] == in_sum->u.sum.iv;
  if (nsums == 1 && on_path == 1 && anc[n - 1] == in_sum && !in_set &&
      in_sum->u.sum.op == OP_ADD && !in_sum->u.sum.def && nt_sums(e, sum, 1) == 0)
    absorb = in_sum;
  else if (nsums > 0 && (nvars > 1 || on_path != 1 || in_sum->u.sum.iv != j ||
                         nt_sums(e, sum, 1) > 0))
    return refuse_sum(d, arg, in_sum ? in_sum : sum[0], name);
  for (int k = 0; k < n; k++) {
    if (anc[k]->kind == EX_SUM) continue;
    OpAlgebra al = nt_expr_algebra(anc[k], as->semiring);
    if (al != OA_INTERSECT && al != OA_UNION && al != OA_KEEP && al != OA_DENSE &&
        al != OA_NUMERATOR)
      return refuse(d, arg, "the subexpression is an operand of a mask or of a definition's "
                    "cases, whose value depends on which entries exist; a workspace reads "
                    "every entry of its row%s", "");
  }
  int dj = wd[nvars - 1];
  for (int k = dj + 1; k < p->nloops; k++)
    if (nt_uses_index(e, p->order[k]) && !(absorb && p->order[k] == absorb->u.sum.iv))
      return refuse(d, arg, "the subexpression uses %s, whose loop runs inside the loop of "
                    "the workspace's innermost index; reorder so that the workspace's indices "
                    "are the subexpression's innermost loops", p->order[k]->name);
  bool pass = sums_pass(as, anc, n, e);
  /* loops between the workspace's own: the producer's alone (a sum that
   * moves into it), skipped by the consumer */
  for (int k = wd[0] + 1, q = 1; k < dj; k++) {
    if (p->order[k] == ws[q]) { q++; continue; }
    if ((!pass || !producer_only(as, e, p->order[k])) &&
        !(absorb && p->order[k] == absorb->u.sum.iv))
      return diag_error(d, TJ_ERR_UNSUPPORTED, "precompute(%s): the loop of %s runs between "
                        "the loops of the workspace's indices, and %s is not an index summed "
                        "only inside the subexpression (whose sum could move into the "
                        "workspace); reorder so that the workspace's indices are the "
                        "subexpression's innermost loops", arg, p->order[k]->name,
                        p->order[k]->name);
  }
  int at = wd[0];
  if (pass)
    while (at > 0 && producer_only(as, e, p->order[at - 1])) at--;
  p->vws_depth = at;
  p->vws_var = j;
  p->vws_nvars = nvars;
  memcpy(p->vws_vars, ws, (size_t)nvars * sizeof *ws);
  p->vws_node = e;
  p->vws_sum = absorb;
  p->vws_name = name;
  return true;
}

/* ---- lowering ---- */

LirStmt *lw_subexpr_alloc(Lowerer *lw) {
  Arena *a = lw->a;
  int t = lw->vws_t;
  const Expr *wa = lw->nest.vws_access;
  const char *name = wa->u.access.t->name;
  LirStmt *s = NULL;
  LirExpr *len = NULL;
  for (int m = 0; m < wa->u.access.n; m++) {   /* dense, its modes in loop order */
    LirVar *n = lw_var(lw, arena_printf(a, "%s_dim%d", name, m), LT_I64);
    lir_append(&s, lir_decl(a, n, lw_extent_of(lw, wa->u.access.idx[m])));
    lw->dim[t][m] = n;
    len = len ? lir_bin(a, LOP_MUL, len, lw_ref(lw, n)) : lw_ref(lw, n);
  }
  lw->vws_slots = NULL;
  if (lw->par_ok && lw->par_depth < lw->nest.vws_depth) {   /* a row per thread */
    lw->vws_slots = lw_var(lw, arena_printf(a, "%s_rows", name), LT_I64);
    lir_append(&s, lir_decl(a, lw->vws_slots, lw_i64(lw, 1)));
    LirStmt *c = lir_call(a, LH_THREADS);
    c->u.call.ptr = lw->vws_slots;
    lir_append(&s, c);
    len = lir_bin(a, LOP_MUL, len, lw_ref(lw, lw->vws_slots));
  }
  LirVar *w = lw->vals_ptr[t] = lw_var(lw, arena_printf(a, "%s_vals", name),
                                        lir_ptr_type(lw->vtype));
  lir_append(&s, lir_decl(a, w, NULL));
  LirStmt *al = lir_call(a, LH_ALLOC);   /* zeroed */
  al->u.call.ptr = w;
  al->u.call.a = lir_bin(a, LOP_MUL, len, lw_i64(lw, lir_type_bytes(lw->vtype)));
  lir_append(&s, al);
  LirStmt *fr = lir_call(a, LH_FREE);
  fr->u.call.ptr = w;
  lir_append(&lw->k->cleanup, fr);
  if (lw_fill_value(lw) != 0)
    lir_append(&s, lw_fill(lw, w, lw_i64(lw, 0), len, lw_fill_value(lw)));
  return s;
}

/* Whether the loop at dj visits every coordinate in some case (the
 * lattice has a full point). */
static bool has_full_point(Lowerer *lw, AMask alive, int dj) {
  if (lw_wide_at(lw, alive, dj)) return !lw_expr_zero(lw, lw->root, alive & ~lw_sparse_at(lw, alive, dj));
  Lattice L;
  lw_lattice(lw, alive, dj, &L);
  for (int q = 0; q < L.n; q++)
    if (L.p[q].full) return true;
  return false;
}

/* Whether the consumer's loop at dj visits every coordinate once, in one
 * dense for. */
static bool loop_dense(Lowerer *lw, AMask alive, int dj) {
  if (lw_wide_at(lw, alive, dj) || lw->valued_masks) return false;
  Lattice L;
  lw_lattice(lw, alive, dj, &L);
  return !L.overflow && L.n == 1 && L.p[0].sparse == 0 && L.p[0].full;
}

/* Whether v is one of the workspace's indices. */
static bool is_ws_var(const Lowerer *lw, const IndexVar *v) {
  const Expr *wa = lw->nest.vws_access;
  for (int m = 0; m < wa->u.access.n; m++)
    if (wa->u.access.idx[m] == v) return true;
  return false;
}

/* Whether the consumer's loops over the workspace's indices visit every
 * entry once, each one dense for: its reads can reset the workspace. */
static bool consumer_dense(Lowerer *lw, AMask alive) {
  const Expr *wa = lw->nest.vws_access;
  for (int m = 0; m < wa->u.access.n; m++)
    if (!loop_dense(lw, alive, lw->depth_of[wa->u.access.idx[m]->id])) return false;
  return true;
}

bool lw_subexpr_skips(const Lowerer *lw, int depth) {
  if (!lw->vws_consumer) return false;
  int first = lw->depth_of[lw->nest.vws_first->id];
  return depth > first && depth < lw->nest.vws_end && !is_ws_var(lw, lw->nest.order[depth]);
}

AMask lw_subexpr_consumer(const Lowerer *lw, AMask alive) {
  AMask in_e = lw_accesses_in(lw, lw->nest.vws_node, ~(AMask)0);
  return (alive & ~in_e) | (AMask)1 << lw->vws_x;
}

LirStmt *lw_subexpr_where(Lowerer *lw, int depth, AMask alive, bool in_temp) {
  const LoopNest *nest = &lw->nest;
  int dj = lw->depth_of[nest->vws_var->id], dfirst = lw->depth_of[nest->vws_first->id];
  AMask in_e = lw_accesses_in(lw, nest->vws_node, alive);
  AMask consumer = lw_subexpr_consumer(lw, alive);
  const Expr *root = lw->root;
  int end = lw->scope_end, target = lw->target;
  lw->vws_in = true;
  LirStmt *s = NULL;
  if (lw->vws_slots) {   /* this thread's row */
    const char *name = nest->vws_access->u.access.t->name;
    lw->vws_slot = lw_var(lw, arena_printf(lw->a, "%s_row", name), LT_I64);
    s = lir_decl(lw->a, lw->vws_slot, lw_i64(lw, 0));
    LirStmt *c = lir_call(lw->a, LH_THREAD_SLOT);
    c->u.call.ptr = lw->vws_slot;
    c->u.call.a = lw_ref(lw, lw->vws_slots);
    lir_append(&s, c);
  }
  lw->root = nest->vws_node;
  lw->scope_end = nest->vws_end;
  lw->target = T_VWS;
  if (lw->emit_values) {  /* the assembly reads no values */
    lir_append(&s, lir_comment(lw->a, arena_printf(lw->a, "the workspace %s: the producer",
                                                   nest->vws_access->u.access.t->name)));
    lir_append(&s, lw_loops(lw, depth, in_e, true));
  }
  lw->root = nest->vws_rhs;
  lw->scope_end = end;
  lw->target = target;
  /* (a consumer summing into a temp stores no output entry itself) */
  if (lw->plan->out_sparse && target == T_OUT && has_full_point(lw, consumer, dj))
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "precompute: the loop over %s that reads "
                      "the workspace %s walks every %s (nothing else it reads is sparse "
                      "there), so it would store every entry of a sparse output's row; "
                      "write a dense output, or precompute the whole right-hand side",
                      nest->vws_var->name, nest->vws_access->u.access.t->name,
                      nest->vws_var->name), NULL;
  lw->vws_reset_on_read = consumer_dense(lw, consumer);
  lir_append(&s, lir_comment(lw->a, lw->vws_reset_on_read
                                        ? "the consumer (its reads reset the workspace)"
                                        : "the consumer"));
  lw->vws_consumer = true;   /* its loops: the workspace's indices and those below */
  lir_append(&s, lw_loops(lw, dfirst, consumer, in_temp));
  lw->vws_consumer = false;
  if (!lw->vws_reset_on_read && lw->emit_values) {   /* the producer's entries back */
    lw->root = nest->vws_node;
    lw->scope_end = nest->vws_end;
    lw->target = T_VWS_RESET;
    lir_append(&s, lir_comment(lw->a, "the workspace's entries back to 0"));
    lir_append(&s, lw_loops(lw, depth, in_e, true));
  }
  lw->root = root;
  lw->scope_end = end;
  lw->target = target;
  lw->vws_in = false;
  lw->vws_slot = NULL;
  return lir_block(lw->a, s);
}
