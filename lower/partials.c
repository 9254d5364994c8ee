/* Per-thread partial outputs for a parallel inner reduction loop:
 * parallelize(k, partials) where k is not the outermost loop (the
 * outermost one's partials are the driver's row-range kernels).
 *
 *   A(i,j) = B(i,k) * C(k,j), order i, k, j, parallelize(k, partials):
 *     rows = tj_rt_threads(); part = alloc(rows * out_size), the identity
 *     for i: parallel for k: { slot = tj_rt_thread_slot(rows);
 *                              for j: part[slot * out_size + (i,j)] += ... }
 *     for r < rows: for p < out_size: A[p] = A[p] op part[r * out_size + p]
 *
 * The loops above k run serially, so every thread keeps its copy across
 * their iterations, and the copies are folded into the output once, in
 * thread order, by the root operator (or its definition). A reduction
 * below k that would sum into a scalar temp updates the copy directly
 * instead (the temp would be shared by the threads). The interpreter and
 * the C rendering run the loop serially: slot 0 holds everything. */
#include "lowerer.h"

#include <string.h>

bool lw_partials_setup(Lowerer *lw, bool reduction, bool *in_temp) {
  const LoopNest *nest = &lw->nest;
  const char *v = nest->order[lw->par_depth]->name;
  const Expr *sum[1];
  const char *why = lw_out_appended(lw) || lw->plan->out_sparse || lw->plan->out_like
                        ? "per-thread partial outputs are dense copies of the output, which "
                          "is sparse here; use atomics, or parallelize an outer loop"
                    : !reduction ? "its iterations write disjoint entries of the output: there "
                                   "is nothing to combine"
                    : lw->out_op == OP_NONE && !lw->out_def
                        ? "the output is stored once, not updated"
                    : nt_sums(lw->nest.rhs, sum, 1) > 0
                        ? "the right-hand side sums inside a subexpression, whose temp "
                          "the output's update reads above the loop; per-thread partials "
                          "are lowered for a sum of the whole right-hand side"
                    : nest->ws_depth >= 0 || nest->vws_depth >= 0
                        ? "the kernel has a workspace; per-thread partials are lowered "
                          "without one"
                    : lw->phase == PHASE_ASSEMBLE ? NULL
                    : lw->ranged ? "row-range kernels build their chunks in parallel already"
                                 : NULL;
  if (why)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "parallelize(%s, partials): %s", v, why);
  lw->partials = true;
  if (*in_temp) lw->first_red = -1, *in_temp = false;   /* update the copy directly */
  return true;
}

LirStmt *lw_partials_alloc(Lowerer *lw) {
  Arena *a = lw->a;
  LirVar *rows = lw->part_rows = lw_var(lw, "part_rows", LT_I64);
  LirStmt *s = lir_decl(a, rows, lw_i64(lw, 1));
  LirStmt *c = lir_call(a, LH_THREADS);
  c->u.call.ptr = rows;
  lir_append(&s, c);
  LirVar *p = lw->part_vals = lw_var(lw, "part_vals", lir_ptr_type(lw->vtype));
  lir_append(&s, lir_decl(a, p, NULL));
  LirExpr *len = lir_bin(a, LOP_MUL, lw_ref(lw, lw->out_size), lw_ref(lw, rows));
  LirStmt *al = lir_call(a, LH_ALLOC);   /* zeroed */
  al->u.call.ptr = p;
  al->u.call.a = lir_bin(a, LOP_MUL, len, lw_i64(lw, lir_type_bytes(lw->vtype)));
  lir_append(&s, al);
  LirStmt *fr = lir_call(a, LH_FREE);
  fr->u.call.ptr = p;
  lir_append(&lw->k->cleanup, fr);
  if (lw->out_init != 0) lir_append(&s, lw_fill(lw, p, lw_i64(lw, 0), len, lw->out_init));
  return s;
}

LirStmt *lw_partials_slot(Lowerer *lw, int depth, AMask alive, bool in_temp) {
  Arena *a = lw->a;
  lw->part_slot = lw_var(lw, "part_slot", LT_I64);
  LirStmt *s = lir_decl(a, lw->part_slot, lw_i64(lw, 0));
  LirStmt *c = lir_call(a, LH_THREAD_SLOT);
  c->u.call.ptr = lw->part_slot;
  c->u.call.a = lw_ref(lw, lw->part_rows);
  lir_append(&s, c);
  lir_append(&s, lw_loops(lw, depth, alive, in_temp));
  lw->part_slot = NULL;
  return lir_block(a, s);
}

bool lw_partials_here(const Lowerer *lw, int depth) {
  return lw->partials && lw->emit_values && !lw->part_slot && depth == lw->par_depth + 1 &&
         lw->target == T_OUT;
}

LirExpr *lw_partials_index(Lowerer *lw) {
  Arena *a = lw->a;
  LirExpr *row = lir_bin(a, LOP_MUL, lw_ref(lw, lw->part_slot), lw_ref(lw, lw->out_size));
  return lir_bin(a, LOP_ADD, row, lw_out_linear(lw));
}

/* The combine loop's position. */
static LirExpr *combine_index(Lowerer *lw) { return lw_ref(lw, lw->part_q); }

LirStmt *lw_partials_combine(Lowerer *lw) {
  Arena *a = lw->a;
  LirVar *r = lw_var(lw, "part_r", LT_I64);
  lw->part_q = lw_var(lw, "part_q", LT_I64);
  LirExpr *at = lir_bin(a, LOP_ADD, lir_bin(a, LOP_MUL, lw_ref(lw, r), lw_ref(lw, lw->out_size)),
                        lw_ref(lw, lw->part_q));
  LirExpr *v = lir_load(a, lw_ref(lw, lw->part_vals), at);
  LirStmt *upd = lw_update_output(lw, lw->vals_ptr[0], combine_index, v);
  if (!upd) return NULL;
  LirStmt *inner = lir_for(a, lw->part_q, lw_i64(lw, 0), lw_ref(lw, lw->out_size), upd);
  LirStmt *s = lir_comment(a, "the threads' partial outputs folded into the output, in order");
  lir_append(&s, lir_for(a, r, lw_i64(lw, 0), lw_ref(lw, lw->part_rows), inner));
  return s;
}
