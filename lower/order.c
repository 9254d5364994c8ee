/* The default loop order of contractions that will be vectorized: output
 * indices outermost (in the output's storage order), reductions inside.
 *
 * The vectorizer then takes the innermost output loop as an outer vector
 * loop around the reductions: the output's lanes accumulate in registers
 * across the whole reduction, and every load is unit-stride. For dense
 * GEMM that is the micro-kernel (unroll-and-jam then blocks the rows). For
 * a sparse operand times dense ones it is the same idea over the sparse
 * fiber: SpMM C(i,j) = A(i,k) * B(k,j) runs for i { for j-vector { for k
 * in row i {...} } } instead of storing the row of C once per nonzero, and
 * MTTKRP A(i,j) = B(i,k,l) * C(k,j) * D(l,j) keeps A's row in registers
 * across the whole slice B(i,:,:).
 *
 * The order is added as a reorder directive when the user gave none: a
 * rewrite of the concrete notation beside the planner, so the notation
 * shows it. It depends on code generation (only vectorized kernels want
 * it), which is why the driver asks for it after a first plan.
 */
#include <string.h>

#include "lowerer.h"

static bool has_sparse_level(const TensorVar *t) { return lv_format_has_sparse(&t->decl.format); }

/* A product of accesses and literals, with `sparse` counting the accesses
 * of tensors that have a sparse level. */
static bool is_product(const Expr *e, int *sparse) {
  switch (e->kind) {
  case EX_LITERAL: return true;
  case EX_ACCESS:
    *sparse += has_sparse_level(e->u.access.t);
    return true;
  case EX_OP:
    return e->u.op.id == OP_MUL && is_product(e->u.op.a, sparse) && is_product(e->u.op.b, sparse);
  default: return false;
  }
}

/* Every access that uses v has it as its last stored mode, on a dense
 * level: the vector lanes of a loop over v are then contiguous. */
static bool unit_stride_in(const Expr *e, const IndexVar *v) {
  switch (e->kind) {
  case EX_LITERAL: return true;
  case EX_ACCESS: {
    const tj_format *f = &e->u.access.t->decl.format;
    for (int l = 0; l < f->order; l++)
      if (e->u.access.idx[f->mode_order[l]] == v && (l != f->order - 1 || !lv_at(f, l, LV_FULL)))
        return false;
    return true;
  }
  case EX_OP:
    return e->u.op.id == OP_MUL && unit_stride_in(e->u.op.a, v) && unit_stride_in(e->u.op.b, v);
  default: return false;
  }
}

/* The output-first order for as, given the planner's own order: the output
 * indices in storage order, then the others as the planner had them.
 * Returns how many indices it wrote. */
static int output_first(const Assignment *as, const LowerPlan *plain, IndexVar **order) {
  const Expr *lhs = as->lhs;
  const tj_format *of = &as->tensors[0]->decl.format;
  int n = 0;
  for (int l = 0; l < of->order; l++) order[n++] = lhs->u.access.idx[of->mode_order[l]];
  for (int v = 0; v < plain->nloops; v++)
    if (nt_is_reduction_var(as, plain->order[v])) order[n++] = plain->order[v];
  return n;
}

bool lower_order_contraction(const Assignment *as, const LowerPlan *plain, bool vectorizing,
                             Schedule *s) {
  if (!vectorizing || s->n >= 16 || as->lhs->u.access.n == 0) return false;
  for (int k = 0; k < s->n; k++)
    if (s->d[k].kind == SCHED_REORDER || s->d[k].kind == SCHED_PRECOMPUTE ||
        s->d[k].kind == SCHED_FUSE) return false;
  bool reduction = false, all_dense = true;
  const Expr *sums[1];
  if (nt_sums(as->rhs, sums, 1) > 0) return false; /* already output first */
  for (int v = 0; v < as->nindices; v++) reduction |= nt_is_reduction_var(as, as->indices[v]);
  for (int t = 0; t < as->ntensors; t++) all_dense &= !has_sparse_level(as->tensors[t]);
  if (!reduction) return false;

  IndexVar *order[NT_MAX_INDICES];
  int n = output_first(as, plain, order);
  if (n != plain->nloops) return false;
  if (!all_dense) {
    /* One sparse operand times dense ones into a dense output, whose
     * innermost index is contiguous everywhere, and an order the sparse
     * operand can be walked in as stored. */
    int sparse = 0;
    const tj_format *of = &as->tensors[0]->decl.format;
    if (has_sparse_level(as->tensors[0]) || !is_product(as->rhs, &sparse) || sparse != 1) return false;
    if (!unit_stride_in(as->rhs, as->lhs->u.access.idx[of->mode_order[of->order - 1]]))
      return false;
    if (memcmp(order, plain->order, sizeof *order * (size_t)n) == 0) return false;
    LowerPlan p;
    Diag quiet;
    diag_init(&quiet);
    if (!lower_plan(as, order, n, true, &p, &quiet)) return false;
    if (p.nloops != n || memcmp(order, p.order, sizeof *order * (size_t)n) != 0) return false;
    for (int t = 0; t < as->ntensors; t++)
      if (p.convert[t]) return false;
  }
  SchedDirective *r = &s->d[s->n++];
  *r = (SchedDirective){.kind = SCHED_REORDER};
  for (int v = 0; v < n; v++) r->vars[r->nvars++] = order[v]->name;
  return true;
}
