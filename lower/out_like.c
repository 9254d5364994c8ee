/* A sparse output shaped like an operand (LowerPlan.out_like). Where the
 * output's pattern is exactly one operand's — a product of that operand,
 * accessed as the output is and stored in its format, with dense factors
 * (SDDMM's A(i,j) = B(i,j) * C(i,k) * D(k,j)) — the output need not be
 * appended in loop order: its index arrays are copies of B's, and the
 * body updates the value at B's position, as it would a dense output's:
 *
 *   assemble:  A.pos/crd = B.pos/crd;  A.vals[0 .. nnz(B)) = 0
 *   compute:   A.vals[0 .. nnz(B)) = 0;  <loops>  A.vals[pB] += B.vals[pB] * ...
 *
 * So loops that repeat (a reorder between a split's halves, TACO's SDDMM
 * order i0, i1, jpos0, k, jpos1) or a fused loop over B's positions write
 * a sparse output, and the row loop runs in parallel like a dense one's.
 * Taken only for such schedules: the appended output stays the default.
 * The planner's row workspace for a reduction between the output's levels
 * (SDDMM's k between i and j) is then not needed: the caller drops it.
 */
#include "lowerer.h"

/* A factor that keeps B's pattern: an access, a nonzero literal, a
 * negation or product of them. */
static bool product_of(const Expr *e) {
  if (e->kind == EX_ACCESS) return true;
  if (e->kind == EX_LITERAL) return e->u.lit.value != 0;
  switch (nt_expr_op(e)) {
  case OP_NEG: return product_of(e->u.op.a);
  case OP_MUL: return product_of(e->u.op.a) && product_of(e->u.op.b);
  default: return false;
  }
}

/* Whether a level of B can be copied position for position: dense, or
 * compressed with unique coordinates (one position per entry). */
static bool copyable_level(const tj_format *f, int l) {
  return lv_at(f, l, LV_FULL) ||
         (lv_at(f, l, LV_HAS_POS) && lv_at(f, l, LV_HAS_CRD) && lv_at(f, l, LV_UNIQUE) &&
          lv_at(f, l, LV_COMPACT));
}

static int width_or_32(int w) { return w ? w : 32; }

/* Whether the output (format o, access lhs) can be a copy of access e's
 * index arrays (format f): the same indices in the same modes, the same
 * levels and mode order, and widths that hold B's positions. */
static bool same_shape(const Expr *lhs, const tj_format *o, const Expr *e, const tj_format *f) {
  if (e->u.access.n != lhs->u.access.n || f->order != o->order ||
      width_or_32(o->pos_width) < width_or_32(f->pos_width) ||
      width_or_32(o->crd_width) < width_or_32(f->crd_width))
    return false;
  for (int m = 0; m < f->order; m++)
    if (e->u.access.idx[m] != lhs->u.access.idx[m] || f->mode_order[m] != o->mode_order[m] ||
        f->levels[m] != o->levels[m] || !copyable_level(f, m))
      return false;
  return true;
}

/* Whether the notation repeats loops between a split's halves or fuses
 * loops: the schedules an appended output cannot take. */
static bool repeats_loops(const Cin *c) {
  switch (c->kind) {
  case CIN_FORALL:
    if (c->u.forall.form.outer_at || c->u.forall.form.fuse) return true;
    return repeats_loops(c->u.forall.body);
  case CIN_WHERE:
    return repeats_loops(c->u.where.consumer) || repeats_loops(c->u.where.producer);
  case CIN_SEQUENCE: return repeats_loops(c->u.seq.first) || repeats_loops(c->u.seq.second);
  case CIN_ASSIGN: return false;
  }
  return false;
}

int lower_plan_out_like(const Assignment *as, const LowerPlan *p, const Cin *cin) {
  if (!p->out_sparse || as->accumulate || as->semiring || as->root_def ||
      (as->root_op != OP_ADD && as->root_op != OP_NONE) || p->vws_depth >= 0 ||
      !product_of(as->rhs) || !repeats_loops(cin))
    return 0;
  const Expr *acc[LW_MAX_ACCESS];
  int n = 0;
  if (!lw_collect_accesses(as->rhs, acc, &n, LW_MAX_ACCESS)) return 0;
  int like = 0;
  for (int x = 0; x < n; x++) {
    const TensorVar *t = acc[x]->u.access.t;
    const tj_format *f = &p->fmt[t->id];
    if (!lv_format_has_sparse(f)) continue;        /* dense: located, any pattern */
    /* a view's arrays are its base's, unsliced: not the output's pattern */
    if (like || lv_format_sliced(f) || !same_shape(as->lhs, &p->fmt[0], acc[x], f)) return 0;
    like = t->id;
  }
  return like;
}

bool lw_out_appended(const Lowerer *lw) { return lw->plan->out_sparse && !lw->plan->out_like; }

/* dst[0 .. n) = src[0 .. n): the index array of B copied into A's (the
 * widths may differ: each entry is cast). */
static LirStmt *copy_array(Lowerer *lw, LirVar *dst, LirVar *src, LirExpr *n) {
  LirVar *q = lw_var(lw, "q", LT_I64);
  LirStmt *body = lw_store_index(lw, dst, lw_ref(lw, q), lw_load_index(lw, src, lw_ref(lw, q)));
  return lir_for(lw->a, q, lw_i64(lw, 0), n, body);
}

LirStmt *lw_out_like_prepare(Lowerer *lw) {
  Arena *a = lw->a;
  int t = lw->plan->out_like;
  const tj_format *f = lw->acc[0].f;
  LirStmt *s = lir_comment(a, arena_printf(a, "the output is shaped like %s: its index arrays "
                                           "are %s's, its values at %s's positions",
                                           lw->ops.tensors[t]->name, lw->ops.tensors[t]->name,
                                           lw->ops.tensors[t]->name));
  for (int l = 0; l < f->order && lw->emit_index; l++) {
    static const struct { int arr; LirField ptr, len; } arrays[] = {
        {TJ_ARR_POS, LF_POS, LF_POS_LEN}, {TJ_ARR_CRD, LF_CRD, LF_CRD_LEN}};
    for (int k = 0; k < 2; k++) {
      LirVar *dst = k ? lw->crd_ptr[0][l] : lw->pos_ptr[0][l];
      LirVar *src = k ? lw->crd_ptr[t][l] : lw->pos_ptr[t][l];
      if (!dst || !src) continue;
      LirVar *n = lw_var(lw, k ? "crd_len" : "pos_len", LT_I64);
      lir_append(&s, lir_decl(a, n, lir_field(a, lw->k, t, arrays[k].len, l)));
      lir_append(&s, lw_reserve(lw, arrays[k].arr, l, lw_ref(lw, n)));
      lir_append(&s, lw_reload(lw, dst, arrays[k].ptr, l));
      lir_append(&s, copy_array(lw, dst, src, lw_ref(lw, n)));
      lir_append(&s, lir_setfield(a, 0, arrays[k].len, l, lw_ref(lw, n)));
    }
  }
  /* the values: one per value of B, from the output's start (zero) */
  LirVar *nv = lw_var(lw, "out_size", LT_I64);
  lir_append(&s, lir_decl(a, nv, lir_field(a, lw->k, t, LF_VALS_LEN, 0)));
  lir_append(&s, lw_reserve(lw, TJ_ARR_VALS, 0, lw_ref(lw, nv)));
  lir_append(&s, lw_reload(lw, lw->vals_ptr[0], LF_VALS, 0));
  lir_append(&s, lw_fill(lw, lw->vals_ptr[0], lw_i64(lw, 0), lw_ref(lw, nv),
                         lw->phase == PHASE_ASSEMBLE ? 0 : lw->out_init));
  lir_append(&s, lir_setfield(a, 0, LF_VALS_LEN, 0, lw_ref(lw, nv)));
  return s;
}

/* The output's position: B's, at its last level. */
LirExpr *lw_out_like_index(Lowerer *lw) {
  for (int x = 1; x < lw->nacc; x++)
    if (lw->acc[x].t == lw->plan->out_like && lw->pos[x]) return lw->pos[x];
  TJ_BUG(lw->d, "an output shaped like an operand written where that operand's position is "
         "not bound");
  return lw_i64(lw, 0);
}
