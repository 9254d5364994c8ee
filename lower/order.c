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
 * across the whole slice B(i,:,:), and TTM A(i,j,k) = B(i,j,l) * C(k,l)
 * keeps A's fiber over k across B's fiber over l (a sparse output's leaf
 * over k is then appended at consecutive positions).
 *
 * lower_plan_vector_layout completes the idea for dense operands stored
 * with the vector index in another than their last mode (TTM's C(k,l)):
 * the kernel reads a copy with that mode last, so the lanes load
 * contiguous values instead of gathering one per lane.
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
    /* One sparse operand times dense ones, whose innermost output index is
     * contiguous everywhere, and an order the sparse operand can be walked
     * in as stored. A sparse output is then appended in loop order with no
     * workspace, its last level storing at unit stride (TTM with C stored
     * column by column: not i,j,l,k through a workspace). */
    int sparse = 0;
    const tj_format *of = &as->tensors[0]->decl.format;
    int last = of->order - 1;
    if (has_sparse_level(as->tensors[0]) && !lv_at(of, last, LV_FULL) &&
        lw_out_run_start(of, last) != last)
      return false;
    if (!is_product(as->rhs, &sparse) || sparse != 1) return false;
    if (!unit_stride_in(as->rhs, as->lhs->u.access.idx[of->mode_order[of->order - 1]]))
      return false;
    if (memcmp(order, plain->order, sizeof *order * (size_t)n) == 0) return false;
    LowerPlan p;
    Diag quiet;
    diag_init(&quiet);
    if (!lower_plan(as, order, n, true, &p, &quiet)) return false;
    if (p.nloops != n || memcmp(order, p.order, sizeof *order * (size_t)n) != 0 ||
        p.ws_depth >= 0)
      return false;
    for (int t = 0; t < as->ntensors; t++)
      if (p.convert[t]) return false;
  }
  SchedDirective *r = &s->d[s->n++];
  *r = (SchedDirective){.kind = SCHED_REORDER};
  for (int v = 0; v < n; v++) r->vars[r->nvars++] = order[v]->name;
  return true;
}

/* The mode of access e that v indexes, or -1. */
static int mode_of(const Expr *e, const IndexVar *v) {
  for (int m = 0; m < e->u.access.n; m++)
    if (e->u.access.idx[m] == v) return m;
  return -1;
}

/* Whether the plan's loops are the output's indices, its innermost stored
 * index v last among them, then at least one reduction: the vectorizer's
 * outer vector loop over v around the reductions (SpMM's j, TTM's k). The
 * output's last level, v's, must store at unit stride in v: dense (also
 * a dense tail under a sparse leaf, "ssd"), or a sparse leaf of its own,
 * not the end of a COO run (lower_loops.c, dense_leaf_loop). */
static bool vector_loop_over(const Assignment *as, const LowerPlan *p, const IndexVar *v) {
  const tj_format *of = &p->fmt[0];
  int last = of->order - 1;
  if (!lv_at(of, last, LV_FULL) && lw_out_run_start(of, last) != last) return false;
  int at = 0;
  while (at < p->nloops && p->order[at] != v) at++;
  if (at + 1 >= p->nloops) return false;
  for (int k = 0; k < p->nloops; k++)
    if (nt_is_reduction_var(as, p->order[k]) != (k > at)) return false;
  return true;
}

bool lower_plan_vector_layout(const Assignment *as, LowerPlan *p, int lanes) {
  int sparse = 0;
  if (lanes < 2 || as->lhs->u.access.n == 0 || p->ws_depth >= 0 || p->vws_depth >= 0 ||
      p->split_sum || !is_product(as->rhs, &sparse) || sparse != 1)
    return false;
  const tj_format *of = &p->fmt[0];
  IndexVar *v = as->lhs->u.access.idx[of->mode_order[of->order - 1]];
  if (!vector_loop_over(as, p, v) || (v->extent > 0 && v->extent < lanes)) return false;
  const Expr *acc[LW_MAX_ACCESS];
  int n = 0;
  if (!lw_collect_accesses(as->rhs, acc, &n, LW_MAX_ACCESS)) return false;
  for (int x = 0; x < n; x++)   /* v is a dense range: no sparse level walks it */
    if (has_sparse_level(acc[x]->u.access.t) && mode_of(acc[x], v) >= 0) return false;
  bool changed = false;
  for (int x = 0; x < n; x++) {
    const TensorVar *t = acc[x]->u.access.t;
    tj_format f = p->fmt[t->id];
    int m = mode_of(acc[x], v), uses = 0;
    for (int y = 0; y < n; y++) uses += acc[y]->u.access.t == t;
    if (m < 0 || uses > 1 || has_sparse_level(t) || p->convert[t->id] ||
        f.mode_order[f.order - 1] == m)
      continue;   /* (read as declared otherwise: the driver's plain variant undoes it) */
    int k = 0;   /* the same mode order with m moved last */
    for (int l = 0; l < f.order; l++)
      if (p->fmt[t->id].mode_order[l] != m) f.mode_order[k++] = p->fmt[t->id].mode_order[l];
    f.mode_order[k] = m;
    p->fmt[t->id] = f;
    p->convert[t->id] = p->vec_layout[t->id] = changed = true;
  }
  return changed;
}
