/* Loop emission, in the shape of the TACO paper and MLIR's genStmt: for the
 * loop at depth d, build the merge lattice; start the loop sequence
 * (initialize one iterator per sparse level); per lattice point emit a
 * loop; per dominated point an if case; recurse; advance the iterators.
 * For sparse b + c (point [b c] then [b], [c]) it emits:
 *   while (pb < pb_end && pc < pc_end) {
 *     cb = b_crd[pb]; cc = c_crd[pc]; i = min(cb, cc);
 *     if (cb == i && cc == i) ... else if (cb == i) ... else if (cc == i) ...
 *     pb += cb == i; pc += cc == i;
 *   }
 *   while (pb < pb_end) ...   while (pc < pc_end) ...
 * Outputs: dense outputs are scattered into; sparse ones appended in loop
 * order; a reduction below the output's last index goes to a scalar temp,
 * one between its indices to a dense workspace (see lower.c).
 */
#include <stdio.h>
#include <string.h>

#include "lowerer.h"

typedef struct Iter {
  LirVar *p, *end, *c, *seg;   /* position, end, coordinate, segment end */
} Iter;

typedef struct LoopCtx {
  int depth;
  AMask alive;
  bool in_temp;
  IndexVar *v;
  const Lattice *L;
  Iter it[LW_MAX_ACCESS];
} LoopCtx;

static Arena *A(Lowerer *lw) { return lw->a; }

/* A segmented level (lw_level_segmented) is walked by segments of equal
 * coordinates; its children see the whole segment, and a leaf segment's
 * values are summed; except a trailing one whose duplicates may be
 * visited one by one (lw_dups_walked): its loop is a unique level's. */
static bool level_segmented(const Lowerer *lw, int x, int l) {
  return lw_level_segmented(lw->acc[x].f, l) && !lw_dups_walked(lw, x, l);
}

static LirExpr *parent_pos(Lowerer *lw, int x) {
  return lw->pos[x] ? lw->pos[x] : lw_i64(lw, 0);
}

/* The extent of index v: a dim of the first access (output first) using it. */
LirExpr *lw_extent_of(Lowerer *lw, const IndexVar *v) {
  for (int x = 0; x < lw->nacc; x++) {
    const Expr *e = lw->acc[x].e;
    for (int m = 0; m < e->u.access.n; m++)
      if (e->u.access.idx[m] == v) return lw_ref(lw, lw->dim[lw->acc[x].t][m]);
  }
  return lw_i64(lw, v->extent);
}

/* The range of an access that may have missed a merged loop above:
 *   p = 0; p_end = 0; if (live) { p = lo; p_end = hi; } */
static LirStmt *guarded_range(Lowerer *lw, int x, Iter *it, LirExpr *lo, LirExpr *hi) {
  Arena *a = A(lw);
  LirStmt *s = lir_decl(a, it->p, lw_i64(lw, 0));
  lir_append(&s, lir_decl(a, it->end, lw_i64(lw, 0)));
  LirStmt *set = lir_assign(a, it->p, lo);
  lir_append(&set, lir_assign(a, it->end, hi));
  lir_append(&s, lir_if(a, lw_ref(lw, lw->live[x]), set, NULL));
  return s;
}

void lw_seg_end_read(Lowerer *lw, int x) {
  if (lw->lazy[x].seg && lw->seg_end[x] == lw->lazy[x].seg) lw->lazy[x].spoiled = true;
}

static LirStmt *init_iter(Lowerer *lw, int x, int l, Iter *it) {
  char base[64];
  const char *tn = lw->acc[x].e->u.access.t->name;
  snprintf(base, sizeof base, "p%s%d", tn, l);
  it->p = lw_var(lw, base, LT_I64);
  snprintf(base, sizeof base, "p%s%d_end", tn, l);
  it->end = lw_var(lw, base, LT_I64);
  const LwHoist *h = &lw->hoist[x];   /* narrowed above, under this parent (hoist_narrowing) */
  if (h->p && h->level == l && h->parent == lw->pos[x] && !lw->live[x]) {
    LirStmt *s = lir_decl(A(lw), it->p, lw_ref(lw, lw->hoist[x].p));
    lir_append(&s, lir_decl(A(lw), it->end, lw_ref(lw, lw->hoist[x].end)));
    return s;
  }
  LirExpr *lo, *hi;
  lw->slice_bounded = true;   /* a slice narrows [p, end) below */
  lw_pos_bounds(lw, x, l, parent_pos(lw, x), &lo, &hi);
  lw->slice_bounded = false;
  LirStmt *s;
  if (lw->live[x]) {
    s = guarded_range(lw, x, it, lo, hi);
  } else {
    s = lir_decl(A(lw), it->p, lo);
    if (lv_at(lw->acc[x].f, l, LV_FIXED_SEG))   /* end = p + n: a constant trip count */
      hi = lir_bin(A(lw), LOP_ADD, lw_ref(lw, it->p), lw_i64(lw, lw->acc[x].f->lvl_n[l]));
    lir_append(&s, lir_decl(A(lw), it->end, hi));
  }
  lir_append(&s, lw_slice_bounds(lw, x, l, it->p, it->end));
  return s;
}

/* Reads the coordinate of iterator x (and the end of its segment). */
static LirStmt *read_coord(Lowerer *lw, int x, int l, Iter *it) {
  char base[64];
  snprintf(base, sizeof base, "%s%d", lw->acc[x].e->u.access.t->name, l);
  it->c = lw_var(lw, base, LT_I64);
  LirStmt *s = lir_decl(A(lw), it->c, lw_coord_at(lw, x, l, lw_ref(lw, it->p)));
  it->seg = NULL;
  if (!level_segmented(lw, x, l)) return s;
  /* seg = p + 1; more = seg < end;
   * while (more) { if (crd[seg] == c) { seg++; more = seg < end; } else more = 0; } */
  snprintf(base, sizeof base, "%s_seg", it->p->name);
  it->seg = lw_var(lw, base, LT_I64);
  LirVar *more = lw_var(lw, "more", LT_BOOL);
  Arena *a = A(lw);
  LirExpr *next = lir_bin(a, LOP_ADD, lw_ref(lw, it->p), lw_i64(lw, 1));
  lir_append(&s, lir_decl(a, it->seg, next));
  LirExpr *in = lir_bin(a, LOP_LT, lw_ref(lw, it->seg), lw_ref(lw, it->end));
  lir_append(&s, lir_decl(a, more, in));
  LirStmt *step = lir_update(a, it->seg, LOP_ADD, lw_i64(lw, 1));
  lir_append(&step, lir_assign(a, more, lir_bin(a, LOP_LT, lw_ref(lw, it->seg),
                                               lw_ref(lw, it->end))));
  LirExpr *same = lir_bin(a, LOP_EQ, lw_coord_at(lw, x, l, lw_ref(lw, it->seg)),
                          lw_ref(lw, it->c));
  if (lw_slice_filtered(lw, x, l)) {   /* a run is of equal stored coordinates: (c - o) / s
                                          maps others (off the stride) to c too */
    LirVar *crd = lw->crd_ptr[lw->acc[x].t][l];
    same = lir_bin(a, LOP_EQ, lw_load_index(lw, crd, lw_ref(lw, it->seg)),
                   lw_load_index(lw, crd, lw_ref(lw, it->p)));
  }
  LirStmt *stop = lir_assign(a, more, lir_const_int(a, LT_BOOL, 0));
  lir_append(&s, lir_while(a, lw_ref(lw, more), lir_if(a, same, step, stop)));
  return s;
}

/* ---- values ---- */

static LirExpr *vconst(Lowerer *lw, double v) { return lw_value(lw, lw->vtype, v); }

/* x op y through op's loop-IR operation; the rows without one (ir/ops.def)
 * from comparisons: or / and are 1 where x != 0 || / && y != 0, else 0, and
 * pair is 1 (it exists only where both operands do). */
/* op's loop-IR operation on the expression's values: in a bool expression
 * (0/1) + is or and * is and, so max and min. */
int lw_lir_op(const Lowerer *lw, OpKind op) {
  int l = nt_op(op)->lir;
  if (lw->is_bool && l == LOP_ADD) return LOP_MAX;
  if (lw->is_bool && l == LOP_MUL) return LOP_MIN;
  return l;
}

static LirExpr *apply_op(Lowerer *lw, OpKind op, LirExpr *x, LirExpr *y) {
  Arena *a = A(lw);
  if (lw_lir_op(lw, op) != LOP_NONE) return lir_bin(a, (LirBinOp)lw_lir_op(lw, op), x, y);
  switch (op) {
  case OP_PAIR: return vconst(lw, 1);
  case OP_MASK:
  case OP_EXCEPT: return y;
  case OP_OR:
  case OP_AND: {
    LirExpr *c = lir_bin(a, op == OP_OR ? LOP_OR : LOP_AND, lir_bin(a, LOP_NE, x, vconst(lw, 0)),
                         lir_bin(a, LOP_NE, y, vconst(lw, 0)));
    return lir_select(a, c, vconst(lw, 1), vconst(lw, 0));
  }
  default: return TJ_BUG(lw->d, "an operator without a loop-IR operation"), NULL;
  }
}

static LirExpr *unary_op(Lowerer *lw, const NtOp *op, LirExpr *x);

/* The body of definition def with p[k] for parameter k, inlined: both
 * parameters exist, so it is plain arithmetic (no lattice). */
static LirExpr *gen_def_body(Lowerer *lw, const Expr *e, LirExpr *const p[2]) {
  switch (e->kind) {
  case EX_ACCESS: return p[-1 - e->u.access.t->id];
  case EX_LITERAL: return vconst(lw, e->u.lit.value);
  case EX_SUM: return TJ_BUG(lw->d, "a reduction in a definition's body"), NULL;
  default: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  LirExpr *x = gen_def_body(lw, k[0], p);
  if (n == 1) return x ? unary_op(lw, nt_op(nt_expr_op(e)), x) : NULL;
  LirExpr *y = gen_def_body(lw, k[1], p);
  return x && y ? apply_op(lw, nt_expr_op(e), x, y) : NULL;
}

LirExpr *lw_def_apply(Lowerer *lw, const NtDef *def, LirExpr *x, LirExpr *y) {
  LirExpr *p[2] = {x, y};
  return gen_def_body(lw, def->body, p);
}

/* var = def(var, v), def's body inlined; for a definition that may be
 * reordered, through w = v and a fold (lir_fold) the vectorizer knows:
 *   w = v; var = def(var, w)   (a fold of w) */
static LirStmt *fold_def(Lowerer *lw, const NtDef *def, LirVar *var, LirExpr *v) {
  Arena *a = A(lw);
  if (!nt_def_reorders(def)) {
    LirExpr *p[2] = {lw_ref(lw, var), v};
    LirExpr *r = gen_def_body(lw, def->body, p);
    return r ? lir_assign(a, var, r) : NULL;
  }
  LirVar *w = lw_var(lw, "w", var->type);
  LirExpr *p[2] = {lw_ref(lw, var), lw_ref(lw, w)};
  LirExpr *r = gen_def_body(lw, def->body, p);
  if (!r) return NULL;
  LirStmt *s = lir_decl(a, w, v);
  lir_append(&s, lir_fold(a, var, w, r, vconst(lw, def->identity)));
  return lir_block(a, s);
}

/* var = var op v: var op= v where op is one loop-IR operation (which the
 * vectorizer recognizes as a reduction); var = def(var, v) for a
 * definition's reduction (lw->temp_def, when var is lw->temp). */
static LirStmt *update_var(Lowerer *lw, LirVar *var, OpKind op, LirExpr *v) {
  if (lw->temp_def && var == lw->temp) return fold_def(lw, lw->temp_def, var, v);
  if (lw_lir_op(lw, op) != LOP_NONE) return lir_update(A(lw), var, (LirBinOp)lw_lir_op(lw, op), v);
  return lir_assign(A(lw), var, apply_op(lw, op, lw_ref(lw, var), v));
}

/* An atomic update with no atomicrmw (*, a definition, an operator
 * without a loop-IR operation), which LLVM lowers to a compare-and-swap
 * loop:  old = vals[idx]; atomic vals[idx] = f(old, v) */
static LirStmt *atomic_fold(Lowerer *lw, LirVar *vals, LirExpr *(*out_at)(Lowerer *),
                            LirExpr *v) {
  Arena *a = A(lw);
  LirVar *old = lw_var(lw, "old", lir_elem_type(vals->type));
  LirStmt *s = lir_decl(a, old, lir_load(a, lw_ref(lw, vals), out_at(lw)));
  LirExpr *p[2] = {lw_ref(lw, old), v};
  LirExpr *r = lw->out_def ? gen_def_body(lw, lw->out_def->body, p)
                           : apply_op(lw, lw->out_op, p[0], p[1]);
  LirStmt *st = r ? lir_store(a, lw_ref(lw, vals), out_at(lw), r) : NULL;
  if (!st) return NULL;
  st->u.store.atomic = true;
  st->u.store.old = old;
  lir_append(&s, st);
  return lir_block(a, s);
}

/* vals[idx] op= v for the output's update operator (lw->out_op), or
 * vals[idx] = v when the output is stored once (OP_NONE). idx is built
 * by out_at (twice for an operator without a loop-IR operation). */
static LirStmt *update_output(Lowerer *lw, LirVar *vals, LirExpr *(*out_at)(Lowerer *),
                              LirExpr *v) {
  Arena *a = A(lw);
  OpKind op = lw->out_op;
  int lop = op == OP_NONE ? LOP_NONE : lw_lir_op(lw, op);
  if (lw->atomic && lw->target == T_OUT && (lw->out_def || op == OP_NONE ||
                                            (lop != LOP_ADD && lop != LOP_MIN && lop != LOP_MAX)))
    return !lw->out_def && op == OP_NONE ? TJ_BUG(lw->d, "an atomic store of no update"), NULL
                         : atomic_fold(lw, vals, out_at, v);
  if (lw->out_def) { /* vals[idx] = def(vals[idx], v) */
    LirExpr *p[2] = {lir_load(a, lw_ref(lw, vals), out_at(lw)), v};
    LirExpr *r = gen_def_body(lw, lw->out_def->body, p);
    return r ? lir_store(a, lw_ref(lw, vals), out_at(lw), r) : NULL;
  }
  if (op == OP_NONE) return lir_store(a, lw_ref(lw, vals), out_at(lw), v);
  if (lw_lir_op(lw, op) != LOP_NONE) {
    LirStmt *s = lir_store_update(a, lw_ref(lw, vals), out_at(lw), (LirBinOp)lw_lir_op(lw, op), v);
    if (s && lw->target == T_OUT) s->u.store.atomic = lw->atomic;
    return s;
  }
  LirExpr *old = lir_load(a, lw_ref(lw, vals), out_at(lw));
  return lir_store(a, lw_ref(lw, vals), out_at(lw), apply_op(lw, op, old, v));
}

static LirExpr *gen_expr(Lowerer *lw, const Expr *e, AMask alive);
static bool is_bool_const(const LirExpr *e, int64_t v) {
  return e->kind == LE_CONST && e->u.c.i == v;
}

static LirExpr *both(Lowerer *lw, LirExpr *x, LirExpr *y) {
  if (is_bool_const(x, 0) || is_bool_const(y, 1)) return x;
  if (is_bool_const(y, 0) || is_bool_const(x, 1)) return y;
  return lir_bin(A(lw), LOP_AND, x, y);
}

static LirExpr *either(Lowerer *lw, LirExpr *x, LirExpr *y) {
  if (is_bool_const(x, 1) || is_bool_const(y, 0)) return x;
  if (is_bool_const(y, 1) || is_bool_const(x, 0)) return y;
  return lir_bin(A(lw), LOP_OR, x, y);
}


static LirExpr *mask_present(Lowerer *lw, const Expr *m, AMask alive);

/* Whether e exists at the current point, as a condition: false where the
 * lattice says it is absent, the hit flags of a merged loop above (live)
 * where they decide, true otherwise. */
static LirExpr *present(Lowerer *lw, const Expr *e, AMask alive) {
  Arena *a = A(lw);
  if (lw_expr_zero(lw, e, alive)) return lir_const_int(a, LT_BOOL, 0);
  switch (e->kind) {
  case EX_ACCESS: {
    LirVar *live = lw->live[lw_access_index(lw, e)];
    return live ? lw_ref(lw, live) : lir_const_int(a, LT_BOOL, 1);
  }
  case EX_LITERAL:
  case EX_SUM: return lir_const_int(a, LT_BOOL, 1);
  default: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  switch (nt_expr_algebra(e, lw->nest.semiring)) {
  case OA_LEFT: return present(lw, k[0], alive);
  case OA_RIGHT: return present(lw, k[1], alive);
  case OA_INTERSECT:
    return both(lw, nt_expr_op(e) == OP_MASK ? mask_present(lw, k[0], alive) : present(lw, k[0], alive),
                present(lw, k[1], alive));
  case OA_UNION:
    return n == 2 ? either(lw, present(lw, k[0], alive), present(lw, k[1], alive))
                  : present(lw, k[0], alive);
  case OA_NUMERATOR:
  case OA_KEEP: return present(lw, k[0], alive);
  case OA_DENSE: break;
  case OA_EXCEPT:
    return both(lw, present(lw, k[1], alive), lir_un(a, LUN_NOT, mask_present(lw, k[0], alive)));
  }
  return lir_const_int(a, LT_BOOL, 1);
}

/* Whether mask operand m exists here: present(), except that an
 * all-dense m (which stores every entry) is a valued mask: it exists where
 * its value is not the zero. */
static LirExpr *mask_present(Lowerer *lw, const Expr *m, AMask alive) {
  if (m->kind != EX_ACCESS || !lw->acc[lw_access_index(lw, m)].located || lw_expr_zero(lw, m, alive))
    return present(lw, m, alive);
  int x = lw_access_index(lw, m);
  return lir_bin(A(lw), LOP_NE, gen_expr(lw, m, alive),
                 lw_value(lw, lw_access_type(lw, x), lw_access_zero(lw, x)));
}

/* Whether op's value with an absent operand reading the zero z is what
 * the absence rule gives anyway (ir/ref_eval.c): a product whose
 * annihilator is z, a sum whose identity is z (exactly: not or's, which
 * is one only on truth values). pair, or, min.times' x * inf are not. */
static bool zero_safe(const Lowerer *lw, OpKind op) {
  const NtOp *o = nt_op(op);
  double z = lw_fill_value(lw);
  switch (nt_op_algebra(op, lw->nest.semiring)) {
  case OA_INTERSECT: return o->annihilator == z && !(o->laws & OL_PATTERN);
  case OA_UNION: return o->identity != z || !(o->laws & OL_BOOL);
  default: return true;
  }
}


/* A function of one operand through its loop-IR operation; a float-only
 * one of an integer value is computed in f64. */
static LirExpr *unary_op(Lowerer *lw, const NtOp *op, LirExpr *x) {
  Arena *a = A(lw);
  if (lir_type_is_float(lw->vtype) || !op->float_only) return lir_un(a, (LirUnOp)op->lir, x);
  return lir_cast(a, lw->vtype, lir_un(a, (LirUnOp)op->lir, lir_cast(a, LT_F64, x)));
}

static LirExpr *gen_def_body(Lowerer *lw, const Expr *e, LirExpr *const p[2]);

/* A definition's cases at a point: its body where both operands exist,
 * left where only x does, right where only y does, else the zero; a
 * select on the operands' presence where it is known only at run time. */
static LirExpr *gen_cases(Lowerer *lw, const Expr *e, Expr *const k[2], AMask alive) {
  Arena *a = A(lw);
  const NtDef *d = e->u.op.def;
  LirExpr *px = present(lw, k[0], alive), *py = present(lw, k[1], alive);
  LirExpr *zero = vconst(lw, lw_fill_value(lw));
  LirExpr *v[2] = {gen_expr(lw, k[0], alive), gen_expr(lw, k[1], alive)};
  bool no_x = is_bool_const(px, 0), no_y = is_bool_const(py, 0);
  LirExpr *b = no_x || no_y ? zero : gen_def_body(lw, d->body, v);
  LirExpr *l = d->left && !no_x ? gen_def_body(lw, d->left, v) : zero;
  LirExpr *r = d->right && !no_y ? gen_def_body(lw, d->right, v) : zero;
  if (!b || !l || !r) return NULL;
  LirExpr *only_y = is_bool_const(py, 1) ? r : lir_select(a, py, r, zero);
  LirExpr *x_on = is_bool_const(py, 1) ? b : is_bool_const(py, 0) ? l : lir_select(a, py, b, l);
  return is_bool_const(px, 1) ? x_on : is_bool_const(px, 0) ? only_y : lir_select(a, px, x_on, only_y);
}

/* An operator node through its loop-IR operation (ir/ops.def). A float-only
 * function of an integer value is computed in f64. Where an operand is
 * absent and the operator's identity is the zero (+ - with 0, min under
 * min.plus): x op 0 = x, 0 + y = y and 0 - y = -y; another absent operand
 * reads the zero. */
static LirExpr *gen_op(Lowerer *lw, const Expr *e, AMask alive) {
  Arena *a = A(lw);
  const NtOp *op = nt_op(nt_expr_op(e));
  Expr *k[2];
  nt_children(e, k);
  if (op->arity == 1) return unary_op(lw, op, gen_expr(lw, k[0], alive));
  OpKind kind = nt_expr_op(e);
  if (kind == OP_EXCEPT || kind == OP_MASK) {
    /* y where the mask is (mask) or is not (except): its entry, a merged
     * loop's hit, or for an all-dense mask its value */
    LirExpr *px = mask_present(lw, k[0], alive), *y = gen_expr(lw, k[1], alive);
    LirExpr *zero = vconst(lw, lw_fill_value(lw));
    if (kind == OP_EXCEPT) return is_bool_const(px, 0) ? y : lir_select(a, px, zero, y);
    LirExpr *c = both(lw, px, present(lw, k[1], alive));
    return is_bool_const(c, 1) ? y : lir_select(a, c, y, zero);
  }
  if (kind == OP_CASES) return gen_cases(lw, e, k, alive);
  if (!zero_safe(lw, kind)) { /* under a merged loop, the operands' hits decide */
    LirExpr *px = present(lw, k[0], alive), *py = present(lw, k[1], alive);
    if (!is_bool_const(px, 1) || !is_bool_const(py, 1)) {
      LirExpr *x = gen_expr(lw, k[0], alive), *y = gen_expr(lw, k[1], alive);
      LirExpr *xy = apply_op(lw, kind, gen_expr(lw, k[0], alive), gen_expr(lw, k[1], alive));
      LirExpr *one = nt_op_algebra(kind, lw->nest.semiring) == OA_UNION
                         ? lir_select(a, px, x, y) /* the present one, else the zero */
                         : vconst(lw, lw_fill_value(lw));
      return lir_select(a, both(lw, present(lw, k[0], alive), present(lw, k[1], alive)), xy, one);
    }
  }
  if (op->identity == lw_fill_value(lw)) {
    bool za = lw_expr_zero(lw, k[0], alive);
    if (lw_expr_zero(lw, k[1], alive)) return gen_expr(lw, k[0], alive);
    LirExpr *y = gen_expr(lw, k[1], alive);
    if (za && (op->laws & OL_COMM)) return y;
    if (za && kind == OP_SUB) return lir_un(a, LUN_NEG, y);
    return apply_op(lw, kind, gen_expr(lw, k[0], alive), y);
  }
  LirExpr *x = gen_expr(lw, k[0], alive);
  return apply_op(lw, kind, x, gen_expr(lw, k[1], alive));
}

static LirExpr *gen_expr(Lowerer *lw, const Expr *e, AMask alive) {
  if (lw_expr_excluded(lw, e, alive, INT32_MAX)) return vconst(lw, lw_fill_value(lw));
  switch (e->kind) {
  case EX_ACCESS: return lw_ref(lw, lw->val[lw_access_index(lw, e)]);
  case EX_LITERAL: return vconst(lw, e->u.lit.value);
  case EX_SUM: {
    LirVar *t = lw_sum_temp(lw, e);
    if (!t) return TJ_BUG(lw->d, "a sum is read outside its scope"), NULL;
    return lw_ref(lw, t);
  }
  default: return gen_op(lw, e, alive);
  }
}

/* Whether the compute phase drains the workspace along the assembled
 * coordinates (drain_assembled) instead of its list. */
bool lw_ws_drains_assembled(const Lowerer *lw) {
  if (lw->phase != PHASE_COMPUTE || !lw->plan->out_sparse) return false;
  for (int l = 0; l < lw->out_last; l++) /* the row's segment is pos[row] */
    if (!lv_at(lw->acc[0].f, l, LV_FULL)) return false;
  return true;
}

bool lw_ws_list_in_crd(const Lowerer *lw) {
  return lw->plan->out_sparse && lw->emit_index;
}

bool lw_ws_reads_marks(const Lowerer *lw) {
  return lw_ws_list_in_crd(lw) && lv_at(lw->acc[0].f, lw->out_last, LV_ORDERED);
}

bool lw_ws_in_place(const Lowerer *lw) {
  return lw_ws_list_in_crd(lw) && lw->emit_values && !lw->partials &&
         !lv_at(lw->acc[0].f, lw->out_last, LV_ORDERED);
}

/* Output position of a dense (located) output. */
static LirExpr *out_index(Lowerer *lw) {
  if (lw->plan->out_like) return lw_out_like_index(lw);
  return lw->plan->out_sparse ? lw->pos[0] : lw_out_linear(lw);
}

/* The workspace's position: the coordinate of its variable. */
static LirExpr *ws_index(Lowerer *lw) { return lw_ref(lw, lw->coord[lw->nest.ws_var->id]); }

/* The entry a product of a row accumulated in place adds to: vals[p + at - 1]. */
static LirExpr *in_place_index(Lowerer *lw) {
  Arena *a = A(lw);
  return lir_bin(a, LOP_ADD, lw_ref(lw, lw->out_p[lw->out_last]),
                 lir_bin(a, LOP_SUB, lw_ref(lw, lw->ws_at), lw_i64(lw, 1)));
}

/* The end of the row the workspace drains into: p + n (the output's
 * position past the row's n entries). */
static LirExpr *row_end(Lowerer *lw) {
  return lir_bin(A(lw), LOP_ADD, lw_ref(lw, lw->out_p[lw->out_last]), lw_ref(lw, lw->ws_n));
}

/* Whether a row accumulated in place may take the producer's copy without
 * the first-touch branch: the update is one loop-IR operation. */
bool lw_ws_in_place_selects(const Lowerer *lw) {
  return lw->out_op != OP_NONE && !lw->out_def &&
         lw_lir_op(lw, lw->out_op) != LOP_NONE;
}

/* A product into a nonordered row accumulated in place (lw_ws_in_place):
 * the mark of j is its entry's position in the row + 1, 0 while untouched;
 * the first touch appends j and the identity to the row, so no workspace
 * values, no value gather and no clears but the marks (drain_in_place):
 *   at = mark[j];
 *   if (at == 0) { crd[p + n] = j; vals[p + n] = init; n += 1; mark[j] = n; at = n; }
 *   vals[p + at - 1] (op)= v
 * or, in the copy without the branch (ws_select; vals[p + n] holds the
 * identity, so the first touch adds to it too; crd[p + n] is the spare
 * slot when j is not new; a select of the value instead became a branch
 * in x86 code, as floating-point selects do):
 *   at = mark[j]; slot = at == 0 ? n : at - 1; vals[p + slot] op= v;
 *   crd[p + n] = j; mark[j] = slot + 1; n += at == 0; vals[p + n] = init
 * Where rows choose (ws_prods), each product counts: prods += 1. */
static LirStmt *accumulate_in_place(Lowerer *lw, AMask alive) {
  Arena *a = A(lw);
  int l = lw->out_last;
  LirVar *p = lw->out_p[l], *at = lw_var(lw, "ws_at", LT_I64);
  LirStmt *s = lir_decl(a, at, lir_cast(a, LT_I64, lir_load(a, lw_ref(lw, lw->ws_mark), ws_index(lw))));
  if (lw->ws_prods) lir_append(&s, lir_update(a, lw->ws_prods, LOP_ADD, lw_i64(lw, 1)));
  if (lw->ws_select) { /* vals[p + n] holds the identity (scatter_in_place) */
    LirVar *slot = lw_var(lw, "ws_slot", LT_I64);
    LirExpr *is_new = lir_bin(a, LOP_EQ, lw_ref(lw, at), lw_i64(lw, 0));
    lir_append(&s, lir_decl(a, slot, lir_select(a, is_new, lw_ref(lw, lw->ws_n),
                                               lir_bin(a, LOP_SUB, lw_ref(lw, at), lw_i64(lw, 1)))));
    LirExpr *idx = lir_bin(a, LOP_ADD, lw_ref(lw, p), lw_ref(lw, slot));
    lir_append(&s, lir_store_update(a, lw_ref(lw, lw->vals_ptr[0]), idx,
                                    (LirBinOp)lw_lir_op(lw, lw->out_op), gen_expr(lw, lw->root, alive)));
    lir_append(&s, lw_store_index(lw, lw->crd_ptr[0][l], row_end(lw), ws_index(lw)));
    lir_append(&s, lw_store_index(lw, lw->ws_mark, ws_index(lw),
                                  lir_bin(a, LOP_ADD, lw_ref(lw, slot), lw_i64(lw, 1))));
    is_new = lir_bin(a, LOP_EQ, lw_ref(lw, at), lw_i64(lw, 0));
    lir_append(&s, lir_update(a, lw->ws_n, LOP_ADD, lir_cast(a, LT_I64, is_new)));
    lir_append(&s, lir_store(a, lw_ref(lw, lw->vals_ptr[0]), row_end(lw), vconst(lw, lw->out_init)));
    return s;
  }
  LirStmt *first = lw_store_index(lw, lw->crd_ptr[0][l], row_end(lw), ws_index(lw));
  lir_append(&first, lir_store(a, lw_ref(lw, lw->vals_ptr[0]), row_end(lw), vconst(lw, lw->out_init)));
  lir_append(&first, lir_update(a, lw->ws_n, LOP_ADD, lw_i64(lw, 1)));
  lir_append(&first, lw_store_index(lw, lw->ws_mark, ws_index(lw), lw_ref(lw, lw->ws_n)));
  lir_append(&first, lir_assign(a, at, lw_ref(lw, lw->ws_n)));
  lir_append(&s, lir_if(a, lir_bin(a, LOP_EQ, lw_ref(lw, at), lw_i64(lw, 0)), first, NULL));
  lw->ws_at = at;
  lir_append(&s, update_output(lw, lw->vals_ptr[0], in_place_index, gen_expr(lw, lw->root, alive)));
  lw->ws_at = NULL;
  return s;
}

/* The producer of a row accumulated in place, in two copies chosen per row
 * by the row before: with the first-touch branch where a row has many
 * products an entry (the branch is then predictable: bcsstk33 x bcsstk33,
 * 16.5) or few entries (luxembourg_osm, 3.4 a row), without it otherwise
 * (cage11 x cage11, 2.3 products an entry: the branch is a coin toss). A C
 * copy (medians, ms): branch / select / per row (the branch unless the row
 * before had more than 8 entries and under 5 products an entry): cage11
 * 21.2 / 17.8 / 18.2, bcsstk33 38.9 / 70.6 / 39.8, luxembourg_osm 2.12 /
 * 3.19 / 2.28 (under 3: 18.5, 39.1, 2.33; bench/README.md).
 *   prods = 0;
 *   if (branchless) { vals[p] = init; <producer, ws_select> } else <producer>
 *   branchless = n > 8 && prods < 4 * n   */
static LirStmt *scatter_in_place(Lowerer *lw, int depth, AMask alive) {
  Arena *a = A(lw);
  LirStmt *s = lir_assign(a, lw->ws_prods, lw_i64(lw, 0));
  lw->ws_select = true;
  LirStmt *sel = lir_store(a, lw_ref(lw, lw->vals_ptr[0]), lw_ref(lw, lw->out_p[lw->out_last]),
                           vconst(lw, lw->out_init));
  lir_append(&sel, lw_loops(lw, depth, alive, true));
  lw->ws_select = false;
  LirStmt *br = lw_loops(lw, depth, alive, true);
  lir_append(&s, lir_if(a, lw_ref(lw, lw->ws_branchless), sel, br));
  LirExpr *many = lir_bin(a, LOP_GT, lw_ref(lw, lw->ws_n), lw_i64(lw, 8));
  LirExpr *dense = lir_bin(a, LOP_LT, lw_ref(lw, lw->ws_prods),
                           lir_bin(a, LOP_MUL, lw_ref(lw, lw->ws_n), lw_i64(lw, 4)));
  lir_append(&s, lir_assign(a, lw->ws_branchless, lir_bin(a, LOP_AND, many, dense)));
  return s;
}

static LirStmt *innermost_unguarded(Lowerer *lw, AMask alive) {
  Arena *a = A(lw);
  if (lw->target == T_VWS || lw->target == T_VWS_RESET) { /* w[j] (+)= e, or w[j] = 0 */
    if (!lw->emit_values) return NULL;
    LirExpr *w = lw_ref(lw, lw->vals_ptr[lw->vws_t]);
    const Expr *wa = lw->nest.vws_access;
    LirExpr *j = lw->vws_slot ? lw_ref(lw, lw->vws_slot) : NULL;
    for (int m = 0; m < wa->u.access.n; m++)   /* w's modes are its levels */
      j = lw_locate(lw, lw->vws_x, m, j, lw_ref(lw, lw->coord[wa->u.access.idx[m]->id]));
    if (lw->target == T_VWS_RESET) return lir_store(a, w, j, vconst(lw, lw_fill_value(lw)));
    LirExpr *v = gen_expr(lw, lw->root, alive);
    return lw->nest.vws_sums ? lir_store_update(a, w, j, (LirBinOp)lw_lir_op(lw, OP_ADD), v)
                             : lir_store(a, w, j, v);
  }
  if (lw->target == T_WS) {
    if (lw_ws_in_place(lw)) return accumulate_in_place(lw, alive);
    LirExpr *j = lw_ref(lw, lw->coord[lw->nest.ws_var->id]);
    LirStmt *s = NULL;
    if (lw->emit_values) s = update_output(lw, lw->ws_vals, ws_index, gen_expr(lw, lw->root, alive));
    if (lw_ws_drains_assembled(lw)) return s; /* drained along the assembled crd */
    if (lw->ws_unlisted) { /* a long row: mark[j] = 1; mark[touched + j / 64] = 1 */
      LirExpr *word = lir_bin(a, LOP_ADD, lw_ref(lw, lw->ws_touched),
                              lir_bin(a, LOP_DIV, j, lw_i64(lw, 64)));
      lir_append(&s, lir_store(a, lw_ref(lw, lw->ws_mark), j, lir_const_int(a, LT_BOOL, 1)));
      lir_append(&s, lir_store(a, lw_ref(lw, lw->ws_mark), word, lir_const_int(a, LT_BOOL, 1)));
      return s;
    }
    /* Without a branch: whether j is new is a coin toss on SpGEMM's rows
     * (cage11 x cage11: ~200 products onto ~100 columns a row), so
     *   list[n] = j; n += !mark[j]; mark[j] = 1;
     * (list has one spare slot) beats if (!mark[j]) { ... }. */
    /* the list is the output's crd from the row's end on (room for the
     * extent and the spare slot made before the row) */
    LirExpr *unmarked = lir_un(a, LUN_NOT, lir_load(a, lw_ref(lw, lw->ws_mark), j));
    if (lw_ws_list_in_crd(lw)) {
      LirVar *p = lw->out_p[lw->out_last];
      LirExpr *at = lir_bin(a, LOP_ADD, lw_ref(lw, p), lw_ref(lw, lw->ws_n));
      lir_append(&s, lw_store_index(lw, lw->crd_ptr[0][lw->out_last], at, j));
    } else {
      lir_append(&s, lir_store(a, lw_ref(lw, lw->ws_list), lw_ref(lw, lw->ws_n), j));
    }
    lir_append(&s, lir_update(a, lw->ws_n, LOP_ADD, lir_cast(a, LT_I64, unmarked)));
    lir_append(&s, lir_store(a, lw_ref(lw, lw->ws_mark), j, lir_const_int(a, LT_BOOL, 1)));
    return s;
  }
  LirStmt *reached = NULL; /* the root's contribution marks its sparse entry */
  if (lw->out_hit && (lw->target == T_OUT || lw->temp == lw->root_temp))
    reached = lir_assign(a, lw->out_hit, lir_const_int(a, LT_BOOL, 1));
  if (!lw->emit_values) return reached;
  LirExpr *v = gen_expr(lw, lw->root, alive);
  if (lw->target == T_TEMP) {
    lir_append(&reached, update_var(lw, lw->temp, lw->temp_op, v));
    return reached;
  }
  LirVar *vals = lw->vals_ptr[0];
  if (lw_out_appended(lw) && !lw_out_dense_tail(lw->acc[0].f)) {
    lir_append(&reached, lir_store(a, lw_ref(lw, vals), out_index(lw), v));
    return reached;
  }
  lir_append(&reached, lw->partials ? update_output(lw, lw->part_vals, lw_partials_index, v)
                                     : update_output(lw, vals, out_index, v));
  return reached;
}

/* vals[out_at] op= v by the output's update (lowerer.h). */
LirStmt *lw_update_output(Lowerer *lw, LirVar *vals, LirExpr *(*out_at)(Lowerer *), LirExpr *v) {
  return update_output(lw, vals, out_at, v);
}

/* Whether an access of alive may have missed a merged loop above. */
static bool live_above(const Lowerer *lw, AMask alive) {
  for (int x = 1; x < lw->nacc; x++)
    if ((alive >> x & 1) && lw->live[x]) return true;
  return false;
}

/* The statement of the scope; where an all-dense mask decides at run time
 * whether the expression exists (valued masks), or, into a workspace or a
 * temp, an access may have missed a merged loop above (B(i,k) * C(k,j) +
 * ... + P(i,k) * F(k,j) at a k only B hit, j only F: P * F is absent),
 * guarded by that, so an entry it keeps out is neither computed nor
 * stored (nor touched). */
static LirStmt *innermost(Lowerer *lw, AMask alive) {
  LirStmt *s = innermost_unguarded(lw, alive);
  bool guard = lw->valued_masks ||
               ((lw->target == T_WS || lw->target == T_TEMP) && live_above(lw, alive));
  if (!guard || !s) return s;
  LirExpr *c = present(lw, lw->root, alive);
  return is_bool_const(c, 1) ? s : lir_if(A(lw), c, s, NULL);
}

static LirStmt *add_terms(Lowerer *lw, int depth, AMask alive);

/* Emits: t = identity; <loops from depth: t op= ...>; out[pos] (op)= t,
 * op the root operator (with split_sum, one nest of loops per term of the
 * union: t += B1 ...; t += Bk ...). */
static LirStmt *reduce_into_temp(Lowerer *lw, int depth, AMask alive) {
  if (!lw->emit_values && !lw->out_hit) return NULL;
  Arena *a = A(lw);
  OpKind op = lw->nest.op;
  LirVar *t = lw_var(lw, "t", lw->vtype);
  LirStmt *s = lw->emit_values ? lir_decl(a, t, vconst(lw, lower_nest_identity(&lw->nest))) : NULL;
  lw->root_temp = t;
  LirVar *saved = lw->temp;
  OpKind saved_op = lw->temp_op;
  const NtDef *saved_def = lw->temp_def;
  lw->target = T_TEMP;
  lw->temp = t;
  lw->temp_op = op;
  lw->temp_def = lw->nest.def;
  lir_append(&s, lw->plan->split_sum ? add_terms(lw, depth, alive)
                                     : lw_loops(lw, depth, alive, true));
  lw->target = T_OUT;
  lw->temp = saved;
  lw->temp_op = saved_op;
  lw->temp_def = saved_def;
  lw->root_temp = NULL;
  if (!lw->emit_values) return lir_block(a, s);
  if (lw_out_appended(lw) && !lw_out_dense_tail(lw->acc[0].f)) {
    LirStmt *st = lir_store(a, lw_ref(lw, lw->vals_ptr[0]), out_index(lw), lw_ref(lw, t));
    lir_append(&s, lw->out_hit ? lir_if(a, lw_ref(lw, lw->out_hit), st, NULL) : st);
  } else if (lw->partials) {
    lir_append(&s, update_output(lw, lw->part_vals, lw_partials_index, lw_ref(lw, t)));
  } else
    lir_append(&s, update_output(lw, lw->vals_ptr[0], out_index, lw_ref(lw, t)));
  return lir_block(a, s);
}

/* The compute phase's drain: the output's coordinates are assembled (and
 * in order), so under dense parent levels (the row's segment is found by
 * position) the row's values are gathered from the workspace along them,
 * without the list, the marks or a sort:
 *   for (q = pos[p]; q < pos[p + 1]; q++) { vals[q] = ws[crd[q]]; reset }  */
/* vals[at] = ws[j] (vals[at] += ws[j] when the dense output's += passes
 * at_again, a copy of at); ws[j] = init: a workspace entry moved to the
 * output. */
static LirStmt *move_ws_value(Lowerer *lw, LirVar *j, LirExpr *at, LirExpr *at_again) {
  Arena *a = A(lw);
  LirExpr *v = lir_load(a, lw_ref(lw, lw->ws_vals), lw_ref(lw, j));
  if (at_again) v = lir_bin(a, LOP_ADD, lir_load(a, lw_ref(lw, lw->vals_ptr[0]), at_again), v);
  LirStmt *s = lir_store(a, lw_ref(lw, lw->vals_ptr[0]), at, v);
  lir_append(&s, lir_store(a, lw_ref(lw, lw->ws_vals), lw_ref(lw, j), vconst(lw, lw->out_init)));
  return s;
}

/* The loop over the workspace's touched list, body (which reads j =
 * list[q] and moves its entry) then clearing j's mark:
 *   for (q < n) { <body>; mark[j] = 0; } n = 0 */
static LirStmt *over_touched(Lowerer *lw, LirVar *q, LirVar *j, LirStmt *body) {
  Arena *a = A(lw);
  lir_append(&body, lir_store(a, lw_ref(lw, lw->ws_mark), lw_ref(lw, j),
                              lir_const_int(a, LT_BOOL, 0)));
  LirStmt *s = lir_for(a, q, lw_i64(lw, 0), lw_ref(lw, lw->ws_n), body);
  lir_append(&s, lir_assign(a, lw->ws_n, lw_i64(lw, 0)));
  return s;
}

static LirStmt *drain_assembled(Lowerer *lw, int l) {
  Arena *a = A(lw);
  LirVar *q = lw_var(lw, "q", LT_I64), *j = lw_var(lw, lw->nest.ws_var->name, LT_I64);
  LirVar *hi = lw_var(lw, "q_end", LT_I64);
  LirExpr *parent = l == 0 ? lw_i64(lw, 0) : lw->pos[0];
  LirExpr *lo = lw_load_index(lw, lw->pos_ptr[0][l], parent);
  LirStmt *s = lir_decl(a, hi, lw_load_index(lw, lw->pos_ptr[0][l],
                                             lir_bin(a, LOP_ADD, parent, lw_i64(lw, 1))));
  LirStmt *body = lir_decl(a, j, lw_load_index(lw, lw->crd_ptr[0][l], lw_ref(lw, q)));
  lir_append(&body, move_ws_value(lw, j, lw_ref(lw, q), NULL));
  lir_append(&s, lir_for(a, q, lo, lw_ref(lw, hi), body));
  lir_append(&s, lir_assign(a, lw->out_p[l], lw_ref(lw, hi)));
  return s;
}

AMask lw_accesses_in(const Lowerer *lw, const Expr *e, AMask alive) {
  const Expr *acc[LW_MAX_ACCESS];
  int n = 0;
  lw_collect_accesses(e, acc, &n, LW_MAX_ACCESS);
  AMask m = 0;
  for (int i = 0; i < n && i < LW_MAX_ACCESS; i++) {
    int x = lw_access_index(lw, acc[i]);
    if (x > 0) m |= (AMask)1 << x;
  }
  return m & alive;
}

/* A union's terms (lower/union_terms.c), each walked by its own loops from
 * depth and added to the current target (what comment says), so a row
 * costs O(nnz) whatever the number of terms:
 *   <loops over B1's fibers: += B1>  ...  <loops over Bk's fibers: += Bk> */
static LirStmt *each_term(Lowerer *lw, int depth, AMask alive, const char *comment) {
  Expr *terms[LW_MAX_ACCESS];
  int n = lw_union_terms(lw, terms);
  const Expr *root = lw->root;
  OpKind op = lw->out_op;
  lw->out_op = lw_term_add(lw);
  LirStmt *s = NULL;
  for (int t = 0; t < n; t++) {
    lw->root = terms[t];
    lir_append(&s, lir_comment(A(lw), comment));
    lir_append(&s, lw_loops(lw, depth, lw_accesses_in(lw, terms[t], alive), true));
  }
  lw->root = root;
  lw->out_op = op;
  return s;
}

/* The producer of a union scattered into the workspace: ws[j] += each term. */
static LirStmt *scatter_terms(Lowerer *lw, int depth, AMask alive) {
  return each_term(lw, depth, alive, "scatter one term into the workspace");
}

/* A root sum over a union (split_sum): t += each term's sum. */
static LirStmt *add_terms(Lowerer *lw, int depth, AMask alive) {
  return each_term(lw, depth, alive, "sum one term into the temp");
}

/* A dense output's row from the workspace: its touched entries only (the
 * output was zeroed, or under += holds what it adds to), any order:
 *   for (q < n) { j = list[q]; vals[locate(row, j)] = ws[j]; ws[j] = init; mark[j] = 0 } n = 0 */
static LirStmt *drain_located(Lowerer *lw) {
  Arena *a = A(lw);
  LirVar *q = lw_var(lw, "q", LT_I64);
  LirVar *j = lw_var(lw, lw->nest.ws_var->name, LT_I64);
  LirStmt *body = lir_decl(a, j, lir_load(a, lw_ref(lw, lw->ws_list), lw_ref(lw, q)));
  if (lw->emit_values) {
    LirVar **coord = &lw->coord[lw->nest.ws_var->id], *saved = *coord;
    *coord = j;
    LirExpr *at = lw_out_linear(lw);   /* the entry at the row's other coordinates and j */
    LirExpr *again = lw->nest.keeps_old ? lw_out_linear(lw) : NULL;
    *coord = saved;
    lir_append(&body, move_ws_value(lw, j, at, again));
  }
  return over_touched(lw, q, j, body);
}

/* The touched coordinates ptr[at .. at + n) in ascending order (at NULL:
 * 0) for an ordered level (a nonordered one takes them as they come):
 * sorted, or, when they are at least 1/16 of the extent, rebuilt from the
 * marks in one pass (sorting a sparse vector output's 200 k touched
 * coordinates took 23-31 ms, the pass over its marks 0.14 ms):
 *   if (n * 16 >= extent) { n = 0; for (j < extent) { ptr[at + n] = j; n += mark[j]; } }
 *   else sort(ptr + at, n) */
static LirStmt *sort_touched(Lowerer *lw, LirVar *ptr, LirVar *at) {
  if (!lv_at(lw->acc[0].f, lw->out_last, LV_ORDERED)) return NULL;
  Arena *a = A(lw);
  LirStmt *sort = lir_call(a, LH_SORT_CRD);
  sort->u.call.ptr = ptr;
  sort->u.call.a = at ? lw_ref(lw, at) : lw_i64(lw, 0);
  sort->u.call.b = lir_bin(a, LOP_ADD, at ? lw_ref(lw, at) : lw_i64(lw, 0), lw_ref(lw, lw->ws_n));
  LirVar *j = lw_var(lw, "j_marked", LT_I64);
  LirExpr *slot = at ? lir_bin(a, LOP_ADD, lw_ref(lw, at), lw_ref(lw, lw->ws_n))
                     : lw_ref(lw, lw->ws_n);
  LirStmt *body = lw_store_index(lw, ptr, slot, lw_ref(lw, j));
  LirExpr *marked = lir_load(a, lw_ref(lw, lw->ws_mark), lw_ref(lw, j));
  lir_append(&body, lir_update(a, lw->ws_n, LOP_ADD, lir_cast(a, LT_I64, marked)));
  LirStmt *scan = lir_assign(a, lw->ws_n, lw_i64(lw, 0));
  lir_append(&scan, lir_for(a, j, lw_i64(lw, 0), lw_ws_extent(lw), body));
  LirExpr *dense = lir_bin(a, LOP_GE, lir_bin(a, LOP_MUL, lw_ref(lw, lw->ws_n), lw_i64(lw, 16)),
                           lw_ws_extent(lw));
  return lir_if(a, dense, scan, sort);
}

/* The drain where the touched list is the output's crd from p on: the row's
 * coordinates are put in place in order by `order` (the list sorted there,
 * or read back from the marks), so only the values move:
 *   <order>; for (q = p; q < p + n; q++) { j = crd[q]; vals[q] = ws[j];
 *   reset; mark[j] = 0 } p += n; n = 0  */
static LirStmt *drain_in_crd(Lowerer *lw, LirStmt *order) {
  Arena *a = A(lw);
  int l = lw->out_last;
  LirVar *p = lw->out_p[l], *crd = lw->crd_ptr[0][l];
  LirVar *q = lw_var(lw, "q", LT_I64);
  LirVar *j = lw_var(lw, lw->nest.ws_var->name, LT_I64);
  LirStmt *s = order;
  LirStmt *body = lir_decl(a, j, lw_load_index(lw, crd, lw_ref(lw, q)));
  if (lw->emit_values) lir_append(&body, move_ws_value(lw, j, lw_ref(lw, q), NULL));
  lir_append(&body, lir_store(a, lw_ref(lw, lw->ws_mark), lw_ref(lw, j),
                              lir_const_int(a, LT_BOOL, 0)));
  LirExpr *end = lir_bin(a, LOP_ADD, lw_ref(lw, p), lw_ref(lw, lw->ws_n));
  lir_append(&s, lir_for(a, q, lw_ref(lw, p), end, body));
  lir_append(&s, lir_update(a, p, LOP_ADD, lw_ref(lw, lw->ws_n)));
  lir_append(&s, lir_assign(a, lw->ws_n, lw_i64(lw, 0)));
  return s;
}

/* The drain of a row accumulated in place (accumulate_in_place): only its
 * marks are cleared, along the row's coordinates:
 *   for (q = p; q < p + n; q++) mark[crd[q]] = 0; p += n; n = 0  */
static LirStmt *drain_in_place(Lowerer *lw) {
  Arena *a = A(lw);
  int l = lw->out_last;
  LirVar *p = lw->out_p[l], *q = lw_var(lw, "q", LT_I64);
  LirExpr *j = lw_load_index(lw, lw->crd_ptr[0][l], lw_ref(lw, q));
  LirStmt *body = lw_store_index(lw, lw->ws_mark, j, lw_i64(lw, 0));
  LirStmt *s = lir_for(a, q, lw_ref(lw, p), row_end(lw), body);
  lir_append(&s, lir_update(a, p, LOP_ADD, lw_ref(lw, lw->ws_n)));
  lir_append(&s, lir_assign(a, lw->ws_n, lw_i64(lw, 0)));
  return s;
}

/* An upper bound of the trips of the loop at depth, its iterators' bounds
 * declared in *decls: the extent where a lattice point walks it densely,
 * else the segment lengths of its sparse iterators (the least of them when
 * they only intersect, their sum where they merge). NULL, with
 * lw->ws_unbounded set, for loops the plain lowering would not emit as one
 * loop per lattice point (merged wide loops, windows, fused loops). */
static LirExpr *trips_at(Lowerer *lw, int depth, AMask alive, LirStmt **decls) {
  Arena *a = A(lw);
  IndexVar *v = lw->nest.order[depth];
  LwWindow win;
  if (lw_wide_at(lw, alive, depth) || lw_index_window(lw, v, &win) ||
      lw->nest.form[depth]->fused) {
    lw->ws_unbounded = true;
    return NULL;
  }
  Lattice L;
  lw_lattice(lw, alive, depth, &L);
  if (L.overflow) return lw->ws_unbounded = true, NULL;
  AMask all = 0;
  bool dense = false;
  for (int q = 0; q < L.n; q++) {
    all |= L.p[q].sparse;
    dense |= L.p[q].full || L.p[q].sparse == 0;
  }
  if (dense) return lw_extent_of(lw, v);
  LirBinOp join = L.n == 1 ? LOP_MIN : LOP_ADD;
  LirExpr *trips = NULL;
  for (int x = 1; x < lw->nacc; x++) {
    if (!(all >> x & 1)) continue;
    Iter it;
    lir_append(decls, init_iter(lw, x, lw_level_at(lw, x, depth), &it));
    LirExpr *len = lir_bin(a, LOP_SUB, lw_ref(lw, it.end), lw_ref(lw, it.p));
    trips = trips ? lir_bin(a, join, trips, len) : len;
  }
  return trips;
}

/* Emits bound += the trip count of the workspace variable's loop at depth
 * (trips_at; nothing where that is not countable). */
static LirStmt *bound_trips(Lowerer *lw, int depth, AMask alive) {
  LirStmt *s = NULL;
  LirExpr *trips = trips_at(lw, depth, alive, &s);
  if (!trips) return NULL;
  lir_append(&s, lir_update(A(lw), lw->ws_bound, LOP_ADD, trips));
  return lir_block(A(lw), s);
}

/* Marks every loop in s scalar: a row's count is a short sum over B's row
 * whose vector form (gathers, a masked tail and an unrolled plain copy)
 * only cost compile time. */
static void keep_scalar(LirStmt *s) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_FOR:
      s->u.loop.at.scalar = true;
      keep_scalar(s->u.loop.body);
      break;
    case LS_WHILE: keep_scalar(s->u.whl.body); break;
    case LS_IF:
      keep_scalar(s->u.cond.then);
      keep_scalar(s->u.cond.els);
      break;
    case LS_BLOCK: keep_scalar(s->u.block); break;
    default: break;
    }
  }
}

/* The producer's loops from depth with target T_BOUND, counting the row's
 * products into ws_bound = 0 (NULL when not countable); rows whose loop at
 * depth runs at most ws_short_trips trips (lower.c, short_trips) have no
 * more than WS_LIST_PRODUCTS products and are not counted:
 *   bound = 0;
 *   if (pB_end - pB > ws_short_trips)
 *     for (pB < pB_end) { k = B_crd[pB]; bound += C_pos[k + 1] - C_pos[k]; } */
static LirStmt *count_products(Lowerer *lw, int depth, AMask alive) {
  Arena *a = A(lw);
  bool values = lw->emit_values;
  lw->ws_bound = lw_var(lw, "ws_bound", LT_I64);
  lw->ws_unbounded = false;
  lw->emit_values = false;
  lw->target = T_BOUND;
  LirStmt *s = lir_decl(a, lw->ws_bound, lw_i64(lw, 0));
  LirStmt *count = lw_loops(lw, depth, alive, true);
  keep_scalar(count);
  LirStmt *guard = NULL;
  bool unbounded = lw->ws_unbounded;   /* a loop at depth not bounded: count every row */
  LirExpr *trips = lw->ws_short_trips && depth == lw->nest.ws_depth
                       ? trips_at(lw, depth, alive, &guard) : NULL;
  lw->ws_unbounded = unbounded;
  if (trips) {
    lir_append(&guard, lir_if(a, lir_bin(a, LOP_GT, trips, lw_ref(lw, lw->ws_short_trips)),
                              count, NULL));
    count = lir_block(a, guard);
  }
  lir_append(&s, count);
  lw->target = T_WS;
  lw->emit_values = values;
  return lw->ws_unbounded ? NULL : s;
}

/* The producer twice, chosen per row by its product count (the list and
 * the sort pay on short rows, where reading the marks back costs more than
 * sorting a few coordinates; on long ones the list's append chains each
 * product behind the previous one's mark load):
 *   <bound = the row's products>
 *   if (bound <= 64) { <producer: list in crd[p + n]>; sort(crd + p, n); <values> }
 *   else { <producer: mark[j] = 1; mark[touched + j / 64] = 1>;
 *          n = tj_rt_marked_crd(crd + p, mark, words); <values> }
 * NULL (nothing emitted) where the products are not countable. */
static LirStmt *scatter_by_length(Lowerer *lw, int depth, AMask alive) {
  Arena *a = A(lw);
  int l = lw->out_last;
  LirVar *p = lw->out_p[l], *crd = lw->crd_ptr[0][l];
  LirStmt *s = count_products(lw, depth, alive);
  if (!s || !diag_ok(lw->d)) return lw->target = T_OUT, NULL;
  LirStmt *listed = lw_loops(lw, depth, alive, true);
  lir_append(&listed, drain_in_crd(lw, sort_touched(lw, crd, p)));
  lw->ws_unlisted = true;
  LirStmt *unlisted = lw_loops(lw, depth, alive, true);
  lw->ws_unlisted = false;
  lw->target = T_OUT;
  LirStmt *read = lir_call(a, LH_MARKED_CRD);
  read->u.call.ptr = crd;
  read->u.call.a = lw_ref(lw, p);
  read->u.call.b = lw_ref(lw, lw->ws_words);
  read->u.call.mark = lw->ws_mark;
  read->u.call.ret = lw->ws_n;
  lir_append(&unlisted, drain_in_crd(lw, read));
  LirExpr *is_short = lir_bin(a, LOP_LE, lw_ref(lw, lw->ws_bound), lw_i64(lw, WS_LIST_PRODUCTS));
  lir_append(&s, lir_if(a, is_short, listed, unlisted));
  return s;
}

/* Emits the producer into the workspace, then appends its coordinates in
 * order (the compute phase gathers along the assembled ones instead).
 * Where this phase writes the output's coordinates, the touched list is
 * the crd itself from the row's end p on, so nothing is copied and the
 * sort runs on the crd's width; the room for a whole row (the extent and
 * the spare slot of the branchless append) is made before the producer:
 *   <room for crd[p + extent]>
 *   <producer: ws[j] += ...; first touch records j in crd[p + n]>
 *   sort(crd + p, n); for (q = p; q < p + n; q++) { vals[q] = ws[crd[q]]; reset }
 * Otherwise (the compute phase of a level under sparse parents) the list
 * is a workspace array of its own:
 *   <producer>; sort(list, n); <room for n entries>
 *   for (q < n) { j = list[q]; append (j, ws[j]); reset }
 * Either way the loops have no call in them (a check per entry spilled j
 * around the reserve calls). */
static LirStmt *scatter_through_workspace(Lowerer *lw, int depth, AMask alive) {
  Arena *a = A(lw);
  int l = lw->out_last;
  LirVar *p = lw->out_p[l];
  LirStmt *s = NULL;
  if (lw_ws_list_in_crd(lw))
    s = lw_ensure_out_cap(lw, l, lir_bin(a, LOP_ADD, lw_ref(lw, p), lw_ws_extent(lw)));
  if (lw_ws_reads_marks(lw) && !lw_scatters_terms(lw, depth)) {
    LirStmt *split = scatter_by_length(lw, depth, alive);
    if (!diag_ok(lw->d)) return NULL;
    if (split) {
      lir_append(&s, split);
      return lir_block(a, s);
    }
  }
  lw->target = T_WS;
  if (lw->ws_branchless && !lw_scatters_terms(lw, depth))
    lir_append(&s, scatter_in_place(lw, depth, alive));
  else
    lir_append(&s, lw_scatters_terms(lw, depth) ? scatter_terms(lw, depth, alive)
                                                : lw_loops(lw, depth, alive, true));
  lw->target = T_OUT;
  if (!diag_ok(lw->d)) return NULL;
  if (!lw->plan->out_sparse) {
    lir_append(&s, drain_located(lw));
    return lir_block(a, s);
  }
  if (lw_ws_drains_assembled(lw)) {
    lir_append(&s, drain_assembled(lw, l));
    return lir_block(a, s);
  }
  if (lw_ws_in_place(lw)) {
    lir_append(&s, drain_in_place(lw));
    return lir_block(a, s);
  }
  if (lw_ws_list_in_crd(lw)) {
    lir_append(&s, drain_in_crd(lw, sort_touched(lw, lw->crd_ptr[0][l], p)));
    return lir_block(a, s);
  }
  lir_append(&s, sort_touched(lw, lw->ws_list, NULL));
  LirVar *q = lw_var(lw, "q", LT_I64);
  LirVar *j = lw_var(lw, lw->nest.ws_var->name, LT_I64);
  LirExpr *last = lir_bin(a, LOP_SUB, row_end(lw), lw_i64(lw, 1));
  lir_append(&s, lw_ensure_out_cap(lw, l, last));   /* n = 0: p - 1 < cap, no call */
  LirStmt *body = lir_decl(a, j, lir_load(a, lw_ref(lw, lw->ws_list), lw_ref(lw, q)));
  if (lw->emit_index)
    lir_append(&body, lw_store_index(lw, lw->crd_ptr[0][l], lw_ref(lw, p), lw_ref(lw, j)));
  if (lw->emit_values) lir_append(&body, move_ws_value(lw, j, lw_ref(lw, p), NULL));
  lir_append(&body, lir_update(a, p, LOP_ADD, lw_i64(lw, 1)));
  lir_append(&s, over_touched(lw, q, j, body));
  return lir_block(a, s);
}

/* The sum nodes of e that are not inside another sum of e, in preorder. */
static int child_sums(const Expr *e, const Expr **out, int n) {
  if (e->kind == EX_SUM) {
    if (n < NT_MAX_INDICES) out[n] = e;
    return n + 1;
  }
  Expr *k[2];
  int nk = nt_children(e, k);
  for (int i = 0; i < nk; i++) n = child_sums(k[i], out, n);
  return n;
}

LirVar *lw_sum_temp(const Lowerer *lw, const Expr *e) {
  for (int i = lw->nsum_temps - 1; i >= 0; i--)
    if (lw->sum_node[i] == e) return lw->sum_temp[i];
  return NULL;
}

/* Emits, where the loops of the current scope end, each reduction inside
 * it into a temp of its own, then the scope's statement reading the temps:
 *   t_j = identity; <loop over j: t_j op= body>;  ...;  out (op)= f(..., t_j, ...) */
static LirStmt *scope_body(Lowerer *lw, AMask alive) {
  const Expr *kids[NT_MAX_INDICES];
  int n = lw->emit_values ? child_sums(lw->root, kids, 0) : 0;
  if (n > NT_MAX_INDICES) return TJ_BUG(lw->d, "too many sums in one scope"), NULL;
  Arena *a = A(lw);
  LirStmt *s = NULL;
  int base = lw->nsum_temps;
  for (int c = 0; c < n; c++) {
    const Expr *sum = kids[c];
    const char *name = sum->u.sum.temp ? sum->u.sum.temp  /* precompute's workspace */
                                       : arena_printf(a, "t_%s", sum->u.sum.iv->name);
    LirVar *t = lw_var(lw, name, lw->vtype);
    lir_append(&s, lir_decl(a, t, vconst(lw, nt_sum_identity(sum))));
    const Expr *root = lw->root;
    int end = lw->scope_end, target = lw->target, nt = lw->nsum_temps;
    LirVar *temp = lw->temp;
    OpKind temp_op = lw->temp_op;
    const NtDef *temp_def = lw->temp_def;
    lw->temp_op = sum->u.sum.op;
    lw->temp_def = sum->u.sum.def;
    int depth = lw->depth_of[sum->u.sum.iv->id];
    lw->root = sum->u.sum.a;
    lw->scope_end = depth + 1;
    lw->target = T_TEMP;
    lw->temp = t;
    lir_append(&s, lw_loops(lw, depth, alive, true));
    lw->root = root;
    lw->scope_end = end;
    lw->target = target;
    lw->temp = temp;
    lw->temp_op = temp_op;
    lw->temp_def = temp_def;
    lw->nsum_temps = nt;
    if (base + c >= NT_MAX_INDICES) return TJ_BUG(lw->d, "too many sums"), NULL;
    lw->sum_node[base + c] = sum;
    lw->sum_temp[base + c] = t;
    lw->nsum_temps = base + c + 1;
  }
  lir_append(&s, innermost(lw, alive));
  lw->nsum_temps = base;
  return s;
}

/* ---- one case of a lattice point ---- */

typedef struct Saved {
  LirExpr *pos[LW_MAX_ACCESS];
  LirVar *seg[LW_MAX_ACCESS], *val[LW_MAX_ACCESS], *coord;
} Saved;

/* Emits the value of access x at its bound position:
 *   v = vals[p];   or, over a segment of duplicates,
 *   v = 0; for (q = p; q < seg; q++) v += vals[q];
 * and when x may have missed a merged loop above (lw->live[x]),
 *   v = zero; if (live) <either>   (never loading at a missed position;
 * zero is the semiring's, 0 by default) */
static LirVar *hoist_value(Lowerer *lw, int x, LirStmt **s) {
  Arena *a = A(lw);
  char base[64];
  snprintf(base, sizeof base, "%s_val", lw->acc[x].e->u.access.t->name);
  LirType vt = lw_access_type(lw, x);
  LirVar *v = lw_var(lw, base, vt);
  LirVar *vals = lw->vals_ptr[lw->acc[x].t];
  if (!lw->seg_end[x] && !lw->live[x]) {
    LirExpr *ld = lir_load(a, lw_ref(lw, vals), parent_pos(lw, x));
    lir_append(s, lir_decl(a, v, lir_cast(a, vt, ld)));
    return v;
  }
  /* a missed access reads the zero (the semiring's; a mask of its own dtype 0) */
  lir_append(s, lir_decl(a, v, lw_value(lw, vt, lw->live[x] ? lw_access_zero(lw, x) : 0)));
  LirStmt *load;
  if (lw->seg_end[x]) {
    lw_seg_end_read(lw, x);
    LirVar *q = lw_var(lw, "q", LT_I64);
    LirExpr *ld = lir_cast(a, vt, lir_load(a, lw_ref(lw, vals), lw_ref(lw, q)));
    load = lir_for(a, q, parent_pos(lw, x), lw_ref(lw, lw->seg_end[x]),
                   lir_update(a, v, vt == LT_I8 && lw_access_dtype(lw, x) == TJ_BOOL ? LOP_MAX
                                                                                 : LOP_ADD, ld));
    if (lw->live[x]) { /* present: the duplicates' sum from 0 */
      LirStmt *sum = lir_assign(a, v, lw_value(lw, vt, 0));
      lir_append(&sum, load);
      load = sum;
    }
  } else {
    LirExpr *ld = lir_load(a, lw_ref(lw, vals), parent_pos(lw, x));
    load = lir_assign(a, v, lir_cast(a, vt, ld));
  }
  lir_append(s, lw->live[x] ? lir_if(a, lw_ref(lw, lw->live[x]), load, NULL) : load);
  return v;
}

/* Emits the positions between the cut edge blocks of [p, end) (level l of
 * x, window edges e):
 *   mid = p; if (p < end && crd(p) == 0) mid = p + 1;
 *   mid_end = end; if (mid < end && crd(end - 1) == nb - 1) mid_end = end - 1; */
static LirStmt *edge_bounds(Lowerer *lw, int x, int l, const LwEdges *e, LirVar *p,
                            LirVar *end, LirVar **mid, LirVar **mid_end) {
  Arena *a = A(lw);
  *mid = lw_var(lw, arena_printf(a, "%s_mid", p->name), LT_I64);
  *mid_end = lw_var(lw, arena_printf(a, "%s_mid_end", p->name), LT_I64);
  LirStmt *s = lir_decl(a, *mid, lw_ref(lw, p));
  if (e->first) {
    LirExpr *c0 = lir_bin(a, LOP_EQ, lw_coord_at(lw, x, l, lw_ref(lw, p)), lw_i64(lw, 0));
    LirStmt *step = lir_if(a, c0, lir_assign(a, *mid, lir_bin(a, LOP_ADD, lw_ref(lw, p),
                                                              lw_i64(lw, 1))), NULL);
    lir_append(&s, lir_if(a, lir_bin(a, LOP_LT, lw_ref(lw, p), lw_ref(lw, end)), step, NULL));
  }
  lir_append(&s, lir_decl(a, *mid_end, lw_ref(lw, end)));
  if (e->last) {
    LirExpr *lastp = lir_bin(a, LOP_SUB, lw_ref(lw, end), lw_i64(lw, 1));
    LirExpr *cl = lir_bin(a, LOP_EQ, lw_coord_at(lw, x, l, lastp), lw_i64(lw, e->nb - 1));
    LirStmt *step = lir_if(a, cl, lir_assign(a, *mid_end, lastp), NULL);
    lir_append(&s, lir_if(a, lir_bin(a, LOP_LT, lw_ref(lw, *mid), lw_ref(lw, end)), step, NULL));
  }
  return s;
}

/* When level l + 1 of access x is a sliced ordered compressed level whose
 * loop runs below another (SpMM over a view of BSR: i_b, k, j_b), its
 * segment under the position just bound is narrowed here, once, into
 * lw->hoist[x] (init_iter takes it): the binary searches would otherwise
 * run at every iteration of the loop between and keep it from
 * vectorizing. Clears lw->hoist[x] otherwise. */
static LirStmt *hoist_narrowing(Lowerer *lw, LoopCtx *cx, int x, int l) {
  const Access *ac = &lw->acc[x];
  const tj_format *f = ac->f;
  lw->hoist[x].p = NULL;
  if (l + 1 >= f->order || lw->live[x] || !lv_at(f, l + 1, LV_ORDERED | LV_HAS_POS) ||
      lw_slice_filtered(lw, x, l + 1))
    return NULL;
  const IndexVar *v = ac->e->u.access.idx[f->mode_order[l + 1]];
  LwEdges e;
  bool edges = lw_window_edges(lw, v, &e) && (e.first || e.last);
  if ((!lw_slice(lw, x, l + 1) && !edges) || lw->depth_of[v->id] <= cx->depth + 1)
    return NULL;
  const char *tn = ac->e->u.access.t->name;
  LirVar *p = lw_var(lw, arena_printf(A(lw), "p%s%d_h", tn, l + 1), LT_I64);
  LirVar *end = lw_var(lw, arena_printf(A(lw), "p%s%d_h_end", tn, l + 1), LT_I64);
  LirExpr *lo, *hi;
  lw->slice_bounded = true;
  lw_pos_bounds(lw, x, l + 1, parent_pos(lw, x), &lo, &hi);
  lw->slice_bounded = false;
  LirStmt *s = lir_decl(A(lw), p, lo);
  lir_append(&s, lir_decl(A(lw), end, hi));
  lir_append(&s, lw_slice_bounds(lw, x, l + 1, p, end));
  lw->hoist[x] = (LwHoist){.level = l + 1, .p = p, .end = end, .parent = lw->pos[x]};
  if (edges)
    lir_append(&s, edge_bounds(lw, x, l + 1, &e, p, end, &lw->hoist[x].mid,
                               &lw->hoist[x].mid_end));
  return s;
}

/* Binds every access with a level at this loop (position, value). */
static LirStmt *bind_levels(Lowerer *lw, LoopCtx *cx, AMask keep, LirVar *cv) {
  Arena *a = A(lw);
  LirStmt *s = NULL;
  char base[64];
  for (int x = 1; x < lw->nacc; x++) {
    if (!(keep >> x & 1)) continue;
    const Access *ac = &lw->acc[x];
    int l = lw_level_at(lw, x, cx->depth);
    if (l >= 0 && lw_is_sparse_level(lw, x, l)) {
      lw->pos[x] = lw_ref(lw, cx->it[x].p);
      lw->seg_end[x] = cx->it[x].seg;
    } else if (l >= 0) {
      lw->seg_end[x] = NULL;
      snprintf(base, sizeof base, "p%s%d", ac->e->u.access.t->name, l);
      LirVar *p = lw_var(lw, base, LT_I64);
      lir_append(&s, lir_decl(a, p, lw_locate(lw, x, l, parent_pos(lw, x), lw_ref(lw, cv))));
      lw->pos[x] = lw_ref(lw, p);
    }
    if (l >= 0) lir_append(&s, hoist_narrowing(lw, cx, x, l));
    bool done = ac->located ? ac->last_depth == cx->depth : l == ac->f->order - 1;
    if (!done) continue;
    if (ac->located) {
      snprintf(base, sizeof base, "p%s", ac->e->u.access.t->name);
      LirVar *p = lw_var(lw, base, LT_I64);
      /* the workspace's row: this thread's, when it has one per thread */
      lw->pos[x] = x == lw->vws_x && lw->vws_slot ? lw_ref(lw, lw->vws_slot) : NULL;
      for (int k = 0; k < ac->f->order; k++) {
        const IndexVar *iv = ac->e->u.access.idx[ac->f->mode_order[k]];
        lw->pos[x] = lw_locate(lw, x, k, lw->pos[x], lw_ref(lw, lw->coord[iv->id]));
      }
      lir_append(&s, lir_decl(a, p, lw->pos[x]));
      lw->pos[x] = lw_ref(lw, p);
    }
    if (lw->emit_values || ac->valued_mask) lw->val[x] = hoist_value(lw, x, &s);
    if (lw->emit_values && x == lw->vws_x && lw->nest.vws_depth >= 0 && lw->vws_reset_on_read)
      lir_append(&s, lir_store(a, lw_ref(lw, lw->vals_ptr[ac->t]), lw->pos[x],
                               vconst(lw, lw_fill_value(lw))));
  }
  return s;
}

/* Whether the output's leaf entry at this loop exists only where the
 * reduction below has a contribution (or a valued mask holds): it is then
 * appended under a hit flag. A plain sum skips the test: it keeps an
 * explicit 0 there (as TACO does), which reads the same, and its assembly
 * needs no pass over the reduction. */
static bool leaf_needs_hit(const Lowerer *lw, const LoopCtx *cx) {
  bool by_reduction = lw->root_reduces &&
                      (cx->depth + 1 == lw->first_red || lw_out_dense_tail(lw->acc[0].f)) &&
                      (lower_nest_identity(&lw->nest) != 0 || lw->nest.semiring);
  bool by_mask = lw->valued_masks && !lw->root_reduces; /* decided at run time */
  return lw->nest.ws_depth < 0 && !cx->in_temp && (by_reduction || by_mask);
}

/* The positions of the dense levels l+1 .. m-1 below a compressed output
 * level l that the entry at out_p[l] would own: its block, of B of them
 * (the product of their extents). The compressed level m keeps one segment
 * per position, pos_m[first + 1 .. first + B] (first = out_p[l] * B). */
static LirExpr *dense_block(Lowerer *lw, int l, int m, LirExpr **first) {
  LirExpr *b = lw_i64(lw, 1);
  for (int k = l + 1; k < m; k++) b = lir_bin(A(lw), LOP_MUL, b, lw_level_size(lw, 0, k));
  *first = lir_bin(A(lw), LOP_MUL, lw_ref(lw, lw->out_p[l]), b);
  return b;
}

/* Before the loops below compressed output level l over dense levels down
 * to compressed level m: room for the block's segments, each empty at the
 * current end of m (the dense level writes the ends of those it reaches):
 *   reserve pos_m[first + B]; for (q = first + 1; q <= first + B; q++) pos_m[q] = start */
static LirStmt *open_dense_block(Lowerer *lw, int l, int m, LirVar *start) {
  Arena *a = A(lw);
  LirExpr *first, *b = dense_block(lw, l, m, &first);
  LirStmt *s = lw_ensure_pos_cap(lw, m, lir_bin(a, LOP_ADD, first, b));
  if (!lw->emit_index) return s;
  LirVar *q = lw_var(lw, "q", LT_I64);
  LirStmt *set = lw_store_index(lw, lw->pos_ptr[0][m], lw_ref(lw, q), lw_ref(lw, start));
  b = dense_block(lw, l, m, &first);
  LirExpr *lo = lir_bin(a, LOP_ADD, first, lw_i64(lw, 1));
  b = dense_block(lw, l, m, &first);
  LirExpr *hi = lir_bin(a, LOP_ADD, lir_bin(a, LOP_ADD, first, b), lw_i64(lw, 1));
  lir_append(&s, lir_for(a, q, lo, hi, set));
  return s;
}

/* When the entry of l is appended: segments of the block that the loops
 * skipped end where the one before them does (a running max):
 *   for (q = first; q < first + B; q++) if (pos_m[q + 1] < pos_m[q]) pos_m[q + 1] = pos_m[q] */
static LirStmt *close_dense_block(Lowerer *lw, int l, int m) {
  Arena *a = A(lw);
  LirExpr *first, *b = dense_block(lw, l, m, &first);
  LirExpr *end = lir_bin(a, LOP_ADD, first, b);
  dense_block(lw, l, m, &first);
  LirVar *q = lw_var(lw, "q", LT_I64);
  LirExpr *prev = lw_load_index(lw, lw->pos_ptr[0][m], lw_ref(lw, q));
  LirExpr *cur = lw_load_index(lw, lw->pos_ptr[0][m],
                               lir_bin(a, LOP_ADD, lw_ref(lw, q), lw_i64(lw, 1)));
  LirStmt *fix = lw_store_index(lw, lw->pos_ptr[0][m],
                                lir_bin(a, LOP_ADD, lw_ref(lw, q), lw_i64(lw, 1)),
                                lw_load_index(lw, lw->pos_ptr[0][m], lw_ref(lw, q)));
  /* a branch, not a max: the loop carries its dependence (never vectorized) */
  return lir_for(a, q, first, end, lir_if(a, lir_bin(a, LOP_LT, cur, prev), fix, NULL));
}

static LirStmt *case_body(Lowerer *lw, LoopCtx *cx, const LatPoint *q, LirVar *cv) {
  Arena *a = A(lw);
  AMask at = lw_sparse_at(lw, cx->alive, cx->depth);
  AMask keep = cx->alive & ~(at & ~q->sparse);
  if (lw_expr_excluded(lw, lw->root, keep, cx->depth)) return NULL;
  Saved sv;
  memcpy(sv.pos, lw->pos, sizeof sv.pos);
  memcpy(sv.seg, lw->seg_end, sizeof sv.seg);
  memcpy(sv.val, lw->val, sizeof sv.val);
  sv.coord = lw->coord[cx->v->id];
  LirExpr *out_saved = lw->pos[0];
  lw->coord[cx->v->id] = cv;
  LirStmt *s = bind_levels(lw, cx, keep, cv);

  const tj_format *of = lw->acc[0].f;
  int l = lw->target == T_OUT && lw_out_appended(lw) ? lw_level_at(lw, 0, cx->depth) : -1;
  /* An output level is located (dense), appended (compressed; the leaf,
   * also a run's last singleton), or the inner part of a run, whose
   * coordinates its leaf appends. */
  bool located = l >= 0 && lv_at(of, l, LV_FULL);
  bool run_inner = l >= 0 && l < lw->out_last && lw_out_in_run(of, l);
  bool leaf = l >= 0 && l == lw->out_last;
  bool compressed = l >= 0 && !located && !run_inner;
  bool at_base = compressed && leaf && lw->leaf_base;   /* dense_leaf_loop */
  LirVar *start = NULL;
  if (located) {
    LirVar *p = lw_var(lw, "pOut", LT_I64);
    LirExpr *c = lw_ref(lw, cv);
    bool chunk_row = lw->ranged && lw->plan->rangeable && l == 0 && lw->phase != PHASE_COMPUTE;
    if (chunk_row) c = lir_bin(a, LOP_SUB, c, lw_ref(lw, lw->range_lo));   /* chunk-local row */
    lir_append(&s, lir_decl(a, p, lw_locate(lw, 0, l, parent_pos(lw, 0), c)));
    lw->pos[0] = lw_ref(lw, p);
  } else if (at_base) {   /* room was made before the loop */
    LirVar *p = lw_var(lw, "pOut", LT_I64);
    LirExpr *i = lir_bin(a, LOP_SUB, lw_ref(lw, cv), lw->leaf_lo);
    lir_append(&s, lir_decl(a, p, lir_bin(a, LOP_ADD, lw_ref(lw, lw->leaf_base), i)));
    lw->pos[0] = lw_ref(lw, p);
    lir_append(&s, lw_out_block_init(lw, lw_ref(lw, p)));
    lw->leaf_base_used = true;
  } else if (compressed) {
    lw->pos[0] = lw_ref(lw, lw->out_p[l]);
    if (l == lw->out_last) {
      if (lw->leaf_room != cx->depth + 1)
        lir_append(&s, lw_ensure_out_cap(lw, l, lw_ref(lw, lw->out_p[l])));
      lir_append(&s, lw_out_block_init(lw, lw_ref(lw, lw->out_p[l])));
    }
  }
  /* the next level below l that appends (l + 1, or past dense levels) */
  int below = l >= 0 && !run_inner && l < lw->out_last ? lw_out_next_appended(of, l) : -1;
  bool next_compressed = below == l + 1;
  if (below >= 0) {
    start = lw_var(lw, "pOut_start", LT_I64);
    lir_append(&s, lir_decl(a, start, lw_ref(lw, lw->out_p[below])));
  }
  if (compressed && below > l + 1) lir_append(&s, open_dense_block(lw, l, below, start));
  LirVar *hit = NULL, *saved_hit = lw->out_hit;
  if (leaf && leaf_needs_hit(lw, cx)) {
    hit = lw_var(lw, "hit", LT_BOOL);
    lir_append(&s, lir_decl(a, hit, lir_const_int(a, LT_BOOL, 0)));
    lw->out_hit = hit;
  }
  lir_append(&s, lw_loops(lw, cx->depth + 1, keep, cx->in_temp));
  lw->out_hit = saved_hit;

  if (leaf) {
    LirStmt *app = NULL;
    for (int k = lw_out_run_start(of, l); k <= l && lw->emit_index; k++) {
      const IndexVar *v = lw->acc[0].e->u.access.idx[of->mode_order[k]];
      LirExpr *c = k == l ? lw_ref(lw, cv) : lw_ref(lw, lw->coord[v->id]);
      lir_append(&app, lw_store_index(lw, lw->crd_ptr[0][k], lw->pos[0], c));
    }
    if (!at_base) lir_append(&app, lir_update(a, lw->out_p[l], LOP_ADD, lw_i64(lw, 1)));
    lir_append(&s, hit ? lir_if(a, lw_ref(lw, hit), app, NULL) : app);
  } else if (compressed) {
    LirExpr *p = lw_ref(lw, lw->out_p[l]);
    LirExpr *next = lir_bin(a, LOP_ADD, p, lw_i64(lw, 1));
    LirStmt *app = lw_ensure_out_cap(lw, l, p);
    if (next_compressed)
      lir_append(&app, lw_ensure_pos_cap(lw, l + 1, lir_bin(a, LOP_ADD, p, lw_i64(lw, 2))));
    if (lw->emit_index) {
      lir_append(&app, lw_store_index(lw, lw->crd_ptr[0][l], p, lw_ref(lw, cv)));
      if (next_compressed)
        lir_append(&app, lw_store_index(lw, lw->pos_ptr[0][l + 1], next,
                                        lw_ref(lw, lw->out_p[l + 1])));
      else
        lir_append(&app, close_dense_block(lw, l, below));
    }
    lir_append(&app, lir_update(a, lw->out_p[l], LOP_ADD, lw_i64(lw, 1)));
    LirExpr *grew = lir_bin(a, LOP_GT, lw_ref(lw, lw->out_p[below]), lw_ref(lw, start));
    lir_append(&s, lir_if(a, grew, app, NULL));
  } else if (next_compressed && lw->emit_index) {
    LirExpr *next = lir_bin(a, LOP_ADD, lw->pos[0], lw_i64(lw, 1));
    lir_append(&s, lw_store_index(lw, lw->pos_ptr[0][l + 1], next,
                                  lw_ref(lw, lw->out_p[l + 1])));
  }
  memcpy(lw->pos, sv.pos, sizeof sv.pos);
  memcpy(lw->seg_end, sv.seg, sizeof sv.seg);
  memcpy(lw->val, sv.val, sizeof sv.val);
  lw->coord[cx->v->id] = sv.coord;
  lw->pos[0] = out_saved;
  return s;
}

/* Whether one of the dominated points of pi always holds in its loop: a
 * point of dense accesses alone, or (where the loop runs over sparse
 * iterators only, one of which is at the coordinate) every iterator's own
 * point. */
static bool cases_exhaustive(const LoopCtx *cx, int pi) {
  const LatPoint *P = &cx->L->p[pi];
  AMask single = 0;
  for (int q = pi; q < cx->L->n; q++) {
    const LatPoint *Q = &cx->L->p[q];
    if ((Q->sparse & ~P->sparse) || (Q->full && !P->full)) continue;
    if (Q->sparse == 0) return true;
    if (__builtin_popcountll(Q->sparse) == 1) single |= Q->sparse;
  }
  return !P->full && single == P->sparse;
}

/* The if / else-if chain over the points dominated by point pi, or the
 * same as selects (lw_cases_as_selects). */
static LirStmt *cases(Lowerer *lw, LoopCtx *cx, int pi, LirVar *cv) {
  Arena *a = A(lw);
  const LatPoint *P = &cx->L->p[pi];
  LirStmt *chain = NULL;
  LirExpr *conds[LAT_MAX_POINTS];
  LirStmt *bodies[LAT_MAX_POINTS];
  int n = 0; /* the chain's cases, last first (at most L->n <= LAT_MAX_POINTS) */
  for (int q = cx->L->n - 1; q >= pi; q--) {
    const LatPoint *Q = &cx->L->p[q];
    if ((Q->sparse & ~P->sparse) || (Q->full && !P->full)) continue;
    LirExpr *cond = NULL;
    bool trivially = (!P->full && Q->sparse == P->sparse &&
                      __builtin_popcountll(P->sparse) == 1) || Q->sparse == 0;
    for (int x = 1; x < lw->nacc && !trivially; x++) {
      if (!(Q->sparse >> x & 1)) continue;
      LirExpr *eq = lir_bin(a, LOP_EQ, lw_ref(lw, cx->it[x].c), lw_ref(lw, cv));
      cond = cond ? lir_bin(a, LOP_AND, cond, eq) : eq;
    }
    LirStmt *body = case_body(lw, cx, Q, cv);
    if (trivially) { /* the final else: the points after it never run */
      chain = body ? lir_block(a, body) : NULL;
      n = 0;
    } else if (body || chain) {
      chain = lir_if(a, cond, body ? body : lir_comment(a, "nothing to compute"), chain);
    }
    conds[n] = cond;
    bodies[n++] = body;
  }
  if (n < 2 || !chain || chain->kind != LS_IF) return chain;
  /* in chain order, first case first */
  LirExpr *c[LAT_MAX_POINTS];
  LirStmt *b[LAT_MAX_POINTS];
  for (int k = 0; k < n; k++) { c[k] = conds[n - 1 - k]; b[k] = bodies[n - 1 - k]; }
  LirStmt *sel = lw_cases_as_selects(lw, n, c, b, cases_exhaustive(cx, pi));
  return sel ? lir_block(a, sel) : chain;
}

/* Pos arrays that weigh the iterations of the depth-0 loop by the entries
 * below them: the child level of a level at depth 0 and, when that one's
 * child is compressed too (CSF), the level below it (MTTKRP's work is in
 * its leaves, not its fibers). */
static void balance_arrays(Lowerer *lw, LoopAttrs *at) {
  for (int x = 1; x < lw->nacc; x++) {
    const tj_format *f = lw->acc[x].f;
    if (lw_level_at(lw, x, 0) != 0 || f->order < 2 || !lv_at(f, 1, LV_HAS_POS | LV_COMPACT))
      continue;
    at->balance = lw_ref(lw, lw->pos_ptr[lw->acc[x].t][1]);
    if (f->order >= 3 && lv_at(f, 2, LV_HAS_POS | LV_COMPACT))
      at->leaves = lw_ref(lw, lw->pos_ptr[lw->acc[x].t][2]);
    return;
  }
}

_Static_assert((int)PAR_STATIC == (int)TJ_PAR_STATIC &&
                   (int)PAR_BALANCED == (int)TJ_PAR_BALANCED &&
                   (int)PAR_DYNAMIC == (int)TJ_PAR_DYNAMIC,
               "the notation's strategies are the runtime's");

/* The loop's attributes: unroll(i, n) from the notation, and parallel
 * when it is the outermost loop over rows of a dense output, its rows split
 * as parallelize(i, strategy) says: by nonzeros when a sparse level below
 * weighs them (the default, and `balanced`), in equal blocks (`static`),
 * or in small chunks handed out as threads free up (`dynamic`). */
static void loop_attrs(Lowerer *lw, LoopCtx *cx, LirStmt *loop, LirStmt *inner) {
  inner->u.loop.at.unroll = lw->nest.unroll[cx->depth];
  inner->u.loop.at.vectorize = lw->nest.vec[cx->depth];
  if (cx->depth != lw->par_depth || !lw->par_ok || lw->target != T_OUT) return;
  LoopAttrs *at = &loop->u.loop.at;
  at->parallel = true;
  at->schedule = lw->nest.par[cx->depth];
  if (cx->depth > 0 && at->schedule == PAR_BALANCED)
    diag_error(lw->d, TJ_ERR_UNSUPPORTED, "parallelize(%s, balanced): only the outermost loop's "
               "rows are weighed by nonzeros; use static or dynamic", cx->v->name);
  if (cx->depth > 0) return;
  if (loop != inner) { /* the blocks of a split: equal iterations, not rows */
    if (at->schedule == PAR_BALANCED)
      diag_error(lw->d, TJ_ERR_UNSUPPORTED, "parallelize(%s, balanced): the blocks of a split "
                 "hold equal numbers of iterations (of positions, after pos); use static or "
                 "dynamic", lw->nest.form[0]->outer);
    return;
  }
  if (at->schedule == PAR_STATIC || at->schedule == PAR_DYNAMIC) return;
  if (lw->nest.form[cx->depth]->fuse) return;   /* f is no row: nothing weighs it */
  balance_arrays(lw, at);
  if (at->schedule == PAR_BALANCED && !at->balance)
    diag_error(lw->d, TJ_ERR_UNSUPPORTED, "parallelize(%s, balanced): no sparse level below "
               "%s weighs its rows by nonzeros; use static or dynamic", cx->v->name, cx->v->name);
}

/* The output's values under one row: the sizes of its levels below 0. */
static LirExpr *row_size(Lowerer *lw) {
  LirExpr *n = lw_i64(lw, 1);
  for (int l = 1; l < lw->acc[0].f->order; l++) n = lir_bin(A(lw), LOP_MUL, n, lw_level_size(lw, 0, l));
  return n;
}

/* zero(out, from * row, to * row) */
static LirStmt *zero_rows(Lowerer *lw, LirExpr *from, LirExpr *to) {
  return lw_fill(lw, lw->vals_ptr[0], lir_bin(A(lw), LOP_MUL, from, row_size(lw)),
                 lir_bin(A(lw), LOP_MUL, to, row_size(lw)), lw->out_init);
}

/* Row zeroing in a sparse depth-0 loop over positions [start, end) with
 * coordinate c at position p: rows (crd[p-1], c] in the body, and after
 * the loop the rows past the last coordinate (all of them when it is
 * empty). Both zero the rows from just after crd[x - 1] (0 when x is
 * start) up to `to`. */
static LirStmt *zero_rows_after(Lowerer *lw, LirVar *crd, LirVar *x, LirVar *start, LirExpr *to) {
  Arena *a = A(lw);
  LirVar *from = lw_var(lw, "zrow", LT_I64);
  LirStmt *s = lir_decl(a, from, lw_i64(lw, 0));
  LirExpr *prev = lw_load_index(lw, crd, lir_bin(a, LOP_SUB, lw_ref(lw, x), lw_i64(lw, 1)));
  lir_append(&s, lir_if(a, lir_bin(a, LOP_GT, lw_ref(lw, x), lw_ref(lw, start)),
                        lir_assign(a, from, lir_bin(a, LOP_ADD, prev, lw_i64(lw, 1))), NULL));
  lir_append(&s, zero_rows(lw, lw_ref(lw, from), to));
  return s;
}

/* The rows of a fused position loop: access x's dense level l (n rows
 * from base) over its compressed level l + 1. */
typedef struct Rows {
  int x, l;
  LirExpr *base, *n;
  LirVar *row;
} Rows;

static LirExpr *pos_at(Lowerer *lw, int x, int l, LirExpr *idx) {
  LirExpr *lo, *hi;
  lw_pos_bounds(lw, x, l, idx, &lo, &hi);
  return lo;
}

/* row = the last r in [0, n) whose positions start at or before p:
 *   row = 0; hi = n;
 *   while (hi - row > 1) { mid = (row + hi) / 2; if (pos[base + mid] <= p) row = mid; else hi = mid; } */
static LirStmt *row_search(Lowerer *lw, LirVar *p, void *ctx) {
  Rows *r = ctx;
  Arena *a = A(lw);
  LirVar *hi = lw_var(lw, "row_hi", LT_I64), *mid = lw_var(lw, "row_mid", LT_I64);
  LirStmt *s = lir_decl(a, r->row, lw_i64(lw, 0));
  lir_append(&s, lir_decl(a, hi, r->n));
  LirExpr *sum = lir_bin(a, LOP_ADD, lw_ref(lw, r->row), lw_ref(lw, hi));
  LirStmt *body = lir_decl(a, mid, lir_bin(a, LOP_DIV, sum, lw_i64(lw, 2)));
  LirExpr *at = pos_at(lw, r->x, r->l + 1, lir_bin(a, LOP_ADD, r->base, lw_ref(lw, mid)));
  lir_append(&body, lir_if(a, lir_bin(a, LOP_LE, at, lw_ref(lw, p)),
                           lir_assign(a, r->row, lw_ref(lw, mid)), lir_assign(a, hi, lw_ref(lw, mid))));
  LirExpr *wide = lir_bin(a, LOP_GT, lir_bin(a, LOP_SUB, lw_ref(lw, hi), lw_ref(lw, r->row)),
                          lw_i64(lw, 1));
  lir_append(&s, lir_while(a, wide, body));
  return s;
}

/* The one `v += e` of a body that otherwise only declares (in nested
 * blocks), or NULL. */
static LirStmt *sole_sum(LirStmt *s, LirStmt *found) {
  for (; s; s = s->next) {
    if (s->kind == LS_COMMENT) continue;
    if (s->kind == LS_DECL) {   /* runs at off-stride positions too */
      if (s->u.decl.init && !lir_expr_speculable(s->u.decl.init)) return NULL;
      continue;
    }
    if (s->kind == LS_BLOCK) {
      LirStmt *in = sole_sum(s->u.block, found);
      if (!in || (found && in != found)) return NULL;
      found = in;
      continue;
    }
    if (s->kind != LS_ASSIGN || s->u.assign.op != LOP_ADD || s->u.assign.with || found ||
        !lir_expr_speculable(s->u.assign.e))
      return NULL;
    found = s;
  }
  return found;
}

/* `if (p is in the slice) body` for a filtered slice's for loop; where the
 * iterator stays inside the slice's range (an ordered compressed level
 * narrowed by lw_slice_bounds, so every position maps to a coordinate
 * 0..size-1 and the body's loads are in bounds) and the body only adds
 * into one value (SpMV's `t += A * x`) by expressions that cannot trap
 * (lir_expr_speculable), `t += valid ? e : 0` instead:
 * off-stride positions are about half of a row's and a branch on their
 * parity mispredicts about half the time. */
static LirStmt *guard_slice(Lowerer *lw, int x, int l, LirExpr *p, LirStmt *body) {
  LirExpr *valid = lw_slice_valid(lw, x, l, p);
  LirStmt *sum = lv_at(lw->acc[x].f, l, LV_ORDERED | LV_HAS_POS) ? sole_sum(body, NULL) : NULL;
  if (!sum || sum->u.assign.var->type != lw->vtype)
    return lir_if(lw->a, valid, body, NULL);
  sum->u.assign.e = lir_select(lw->a, valid, sum->u.assign.e, lw_value(lw, lw->vtype, 0));
  return body;
}

static LirStmt *fused_loop(Lowerer *lw, LoopCtx *cx, LirExpr *extent);

/* fuse(i, j, f) pos(f, fp, A(i,j)), at i's depth: the positions of A's
 * compressed level of j under every row of its level of i, one loop over
 * fp in [pos[base], pos[base + n]) (TACO's nonzero-balanced SpMV). The
 * row is found by a binary search at the start of each block of a split,
 * then advanced past the rows that end at or before fp; without a split,
 * by a search per position (each iteration stands alone, so the loop may
 * run in parallel). The level of i is dense (rows base = parent * n ..
 * + n, i the row) or compressed (DCSR, CSF: its positions [p, p_end) of
 * the parent, i = crd[base + row], the iterator it at that position); j is
 * then A's crd[fp] (single_loop). */
static LirStmt *fused_pos_loop(Lowerer *lw, LoopCtx *cx, Iter *it) {
  Arena *a = A(lw);
  const CinLoopForm *f = lw->nest.form[cx->depth];
  int jd = cx->depth + 1;
  Rows r = {.x = lw_access_index(lw, f->pos_access)};
  r.l = r.x >= 0 ? lw_level_at(lw, r.x, cx->depth) : -1;
  const tj_format *fm = r.x >= 0 ? lw->acc[r.x].f : NULL;
  bool rows_ok = r.l >= 0 && (it ? lw_is_sparse_level(lw, r.x, r.l) &&
                                       lv_at(fm, r.l, LV_HAS_POS | LV_UNIQUE) &&
                                       !lw_level_segmented(fm, r.l) && !lw->live[r.x]
                                 : lv_at(fm, r.l, LV_FULL));
  /* the positions of all rows one range: a compact pos (not loose's lo/hi pairs) */
  if (!rows_ok || lw_level_at(lw, r.x, jd) != r.l + 1 ||
      !lv_at(fm, r.l + 1, LV_HAS_POS | LV_COMPACT) ||
      lw_level_segmented(fm, r.l + 1) || !(cx->alive >> r.x & 1))
    return lw_form_check(lw, cx->depth, arena_printf(a, "and the loop of %s are not a dense "
                                                     "or compressed level of %s and the "
                                                     "compressed level right below it",
                                                     f->fuse_inner->name,
                                                     f->pos_access->u.access.t->name), -1),
           NULL;
  if (lv_format_sliced(fm)) {   /* rows and positions would be the base's */
    diag_error(lw->d, TJ_ERR_UNSUPPORTED, "%s is a view (a slice); a fused loop walks its "
               "base's positions, not the slice's: drop the fuse or convert the view",
               f->pos_access->u.access.t->name);
    return NULL;
  }
  LirVar *nv = lw_var(lw, arena_printf(a, "%s_rows", cx->v->name), LT_I64);
  LirVar *bv = lw_var(lw, arena_printf(a, "%s_base", cx->v->name), LT_I64);
  LirStmt *s;
  if (it) {   /* the parent's positions of the compressed level of i */
    s = lir_decl(a, nv, lir_bin(a, LOP_SUB, lw_ref(lw, it->end), lw_ref(lw, it->p)));
    lir_append(&s, lir_decl(a, bv, lw_ref(lw, it->p)));
  } else {
    s = lir_decl(a, nv, lw_level_size(lw, r.x, r.l));
    lir_append(&s, lir_decl(a, bv, lir_bin(a, LOP_MUL, parent_pos(lw, r.x), lw_ref(lw, nv))));
  }
  r.n = lw_ref(lw, nv);
  r.base = lw_ref(lw, bv);
  r.row = lw_var(lw, arena_printf(a, "%s_row", cx->v->name), LT_I64);
  LirVar *fp = lw_var(lw, f->pos, LT_I64), *iv = lw_var(lw, cx->v->name, LT_I64);
  bool split = f->split || f->divide || lw->block_b[cx->depth];
  LirStmt *body;
  if (split) { /* while (pos[base + row + 1] <= fp) row++; */
    LirExpr *next = lir_bin(a, LOP_ADD, r.base, lir_bin(a, LOP_ADD, lw_ref(lw, r.row),
                                                        lw_i64(lw, 1)));
    body = lir_while(a, lir_bin(a, LOP_LE, pos_at(lw, r.x, r.l + 1, next), lw_ref(lw, fp)),
                     lir_update(a, r.row, LOP_ADD, lw_i64(lw, 1)));
  } else {
    body = row_search(lw, fp, &r);
  }
  LirVar *start = it ? it->p : NULL;
  if (it) {   /* the compressed level's position and coordinate at the row */
    it->p = lw_var(lw, start->name, LT_I64);
    lir_append(&body, lir_decl(a, it->p, lir_bin(a, LOP_ADD, r.base, lw_ref(lw, r.row))));
    lir_append(&body, read_coord(lw, r.x, r.l, it));
    lir_append(&body, lir_decl(a, iv, lw_ref(lw, it->c)));
  } else {
    lir_append(&body, lir_decl(a, iv, lw_ref(lw, r.row)));
  }
  lw->fuse_f[jd] = fp;
  lw->fuse_n[jd] = NULL;
  lir_append(&body, cases(lw, cx, 0, iv));
  lw->fuse_f[jd] = NULL;
  if (it) it->p = start;
  LirExpr *lo = pos_at(lw, r.x, r.l + 1, r.base);
  LirExpr *hi = pos_at(lw, r.x, r.l + 1, lir_bin(a, LOP_ADD, r.base, r.n));
  LirStmt *outer, *inner;
  lir_append(&s, lw_strip_loop_pre(lw, cx->depth, fp, lo, hi, body, &outer, &inner,
                                   split ? row_search : NULL, &r));
  loop_attrs(lw, cx, outer, inner);
  return lir_block(a, s);
}

/* fuse(i, j, f) of two dense loops, at i's depth: one loop over f in
 * [0, I * J) with i = f / J; the loop of j (the next depth) is then
 * j = f % J (single_loop). */
static LirStmt *fused_loop(Lowerer *lw, LoopCtx *cx, LirExpr *extent) {
  Arena *a = A(lw);
  const CinLoopForm *f = lw->nest.form[cx->depth];
  int jd = cx->depth + 1;
  if (lw->ranged && cx->depth == 0)
    return lw_form_check(lw, cx->depth, "is the row loop of a kernel built in row chunks "
                         "(per-thread partials)", -1), NULL;
  if (jd >= lw->scope_end)   /* a sum's temp (a where()) between the two loops */
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): a sum's temp (a where()) "
                      "lies between the loop over %s and the loop over %s; fuse two loops of one "
                      "statement", cx->v->name, f->fuse_inner->name, f->fuse, cx->v->name,
                      f->fuse_inner->name), NULL;
  if (!lw->nest.form[jd]->fused)
    return TJ_BUG(lw->d, "a fused loop without its inner loop below it"), NULL;
  if (f->pos) return fused_pos_loop(lw, cx, NULL);
  LirVar *n = lw_var(lw, arena_printf(a, "%s_n", f->fuse_inner->name), LT_I64);
  LirVar *fv = lw_var(lw, f->fuse, LT_I64), *iv = lw_var(lw, cx->v->name, LT_I64);
  LirStmt *s = lir_decl(a, n, lw_extent_of(lw, f->fuse_inner));
  LirStmt *body = lir_decl(a, iv, lir_bin(a, LOP_DIV, lw_ref(lw, fv), lw_ref(lw, n)));
  lw->fuse_f[jd] = fv;
  lw->fuse_n[jd] = n;
  lir_append(&body, cases(lw, cx, 0, iv));
  lw->fuse_f[jd] = lw->fuse_n[jd] = NULL;
  LirStmt *outer, *inner;
  LirExpr *hi = lir_bin(a, LOP_MUL, extent, lw_ref(lw, n));
  lir_append(&s, lw_strip_loop(lw, cx->depth, fv, lw_i64(lw, 0), hi, body, &outer, &inner));
  loop_attrs(lw, cx, outer, inner);
  return lir_block(a, s);
}

/* The one-point loops: a for over the dense range, or a for over the
 * positions of a single sparse iterator (coordinate read in the body). */
/* Whether the dense loop of cx runs over the sparse output's leaf level
 * and appends one entry at every iteration (no hit flag, not a COO run):
 * its entries are then at consecutive positions from the loop's start. */
static bool appends_every_iteration(const Lowerer *lw, const LoopCtx *cx) {
  const tj_format *of = lw->acc[0].f;
  if (lw->target != T_OUT || cx->in_temp || !lw->plan->out_sparse) return false;
  int l = lw_level_at(lw, 0, cx->depth);
  return l >= 0 && l == lw->out_last && !lv_at(of, l, LV_FULL) && lw_out_run_start(of, l) == l &&
         !leaf_needs_hit(lw, cx);
}

/* A dense loop over the output's leaf that appends at every iteration
 * (appends_every_iteration) writes iteration iv at pOut_base + (iv - lo):
 * unit stride, so the vectorizer can take the loop as an outer vector loop
 * around a reduction (TTM's k around its fiber over l). Emits
 *   pOut_base = pOutL; <room for hi - lo entries>
 *   for (iv = lo; iv < hi; iv++) { pOut = pOut_base + (iv - lo); ... }
 *   pOutL = pOut_base + (hi - lo);
 * where the loop's own appends had checked the room and counted one by one. */
static LirStmt *dense_leaf_loop(Lowerer *lw, LoopCtx *cx, LirStmt *loop, LirExpr *lo,
                                LirExpr *hi) {
  Arena *a = A(lw);
  int l = lw_level_at(lw, 0, cx->depth);
  LirVar *base = lw->leaf_base;
  LirExpr *end = lir_bin(a, LOP_ADD, lw_ref(lw, base), lir_bin(a, LOP_SUB, hi, lo));
  LirStmt *s = lir_decl(a, base, lw_ref(lw, lw->out_p[l]));
  lir_append(&s, lw_ensure_out_cap(lw, l, lir_bin(a, LOP_SUB, end, lw_i64(lw, 1))));
  lir_append(&s, loop);
  lir_append(&s, lir_assign(a, lw->out_p[l], end));
  return s;
}

static LirStmt *window_body(Lowerer *lw, void *cx, LirVar *iv) { return cases(lw, cx, 0, iv); }

/* The dense loop over an index read through a block window (a cut view
 * of BSR): over the view's coordinates of the block only (lw_window_loop),
 * the body lowered once per loop form. */
static LirStmt *window_loop(Lowerer *lw, LoopCtx *cx, const LwWindow *win) {
  if (!win->block)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "the loop over %s runs outside the loop over "
                      "its blocks, which its block window needs", cx->v->name), NULL;
  LirStmt *full, *edge;
  LwWindow w = *win;
  w.edge = lw->win_edge[cx->v->id];   /* a peeled edge block: never whole */
  LirStmt *s = lw_window_loop(lw, &w, cx->v->name, window_body, cx, &full, &edge);
  loop_attrs(lw, cx, edge, edge);
  if (full) loop_attrs(lw, cx, full, full);
  return s;
}

/* The loop over positions [lo, hi) of access x's level at cx's depth, its
 * body lowered afresh. */
static LirStmt *position_loop(Lowerer *lw, LoopCtx *cx, int x, LirExpr *lo, LirExpr *hi) {
  Arena *a = A(lw);
  Iter *it = &cx->it[x];
  LirVar *start = it->p;
  it->p = lw_var(lw, start->name, LT_I64);
  int lx = lw_level_at(lw, x, cx->depth);
  LirStmt *body = read_coord(lw, x, lx, it), *outer, *inner;
  LirVar *cv = lw_var(lw, cx->v->name, LT_I64);
  lir_append(&body, lir_decl(a, cv, lw_ref(lw, it->c)));
  lir_append(&body, cases(lw, cx, 0, cv));
  if (lw_slice_filtered(lw, x, lx)) body = guard_slice(lw, x, lx, lw_ref(lw, it->p), body);
  LirStmt *loop = lw_strip_loop(lw, cx->depth, it->p, lo, hi, body, &outer, &inner);
  it->p = start;
  loop_attrs(lw, cx, outer, inner);
  return loop;
}

/* Whether cx's index is the block index of a stride-1 block window whose
 * first or last block is cut: its loop peels them (peeled_block_loop). */
static bool window_edges(const Lowerer *lw, const LoopCtx *cx) {
  LwEdges e;
  return lw_window_edges(lw, cx->v, &e) && (e.first || e.last);
}

/* Emits, for a loop over the stored blocks [p, end) of a dim whose block
 * window cuts its first (coordinate 0) or last (nb - 1) block:
 *   mid = p; if (p < end && crd(p) == 0) mid = p + 1;
 *   mid_end = end; if (mid < end && crd(end - 1) == nb - 1) mid_end = end - 1;
 *   for (q in p .. mid)        body, its in-block loop windowed (if the first is cut)
 *   for (q in mid .. mid_end)  body, its in-block loop over the whole block
 *   for (q in mid_end .. end)  body, windowed (if the last is cut)
 * so the blocks between keep constant loops (and their register blocking:
 * lower/promote.c). */
static LirStmt *peeled_block_loop(Lowerer *lw, LoopCtx *cx, int x) {
  Arena *a = A(lw);
  LwEdges e;
  lw_window_edges(lw, cx->v, &e);
  Iter *it = &cx->it[x];
  int lx = lw_level_at(lw, x, cx->depth);
  LirVar *mid, *mid_end;
  LirStmt *s = NULL;
  const LwHoist *h = &lw->hoist[x];
  if (h->p && h->level == lx && h->parent == lw->pos[x] && h->mid) {   /* made above */
    mid = h->mid, mid_end = h->mid_end;
  } else {
    s = edge_bounds(lw, x, lx, &e, it->p, it->end, &mid, &mid_end);
  }
  lw->win_edge[e.inner->id] = true;
  if (e.first) lir_append(&s, position_loop(lw, cx, x, lw_ref(lw, it->p), lw_ref(lw, mid)));
  if (e.last) lir_append(&s, position_loop(lw, cx, x, lw_ref(lw, mid_end), lw_ref(lw, it->end)));
  lw->win_edge[e.inner->id] = false;
  lw->win_whole[e.inner->id] = true;
  lir_append(&s, position_loop(lw, cx, x, lw_ref(lw, mid), lw_ref(lw, mid_end)));
  lw->win_whole[e.inner->id] = false;
  return lir_block(a, s);
}

/* The loop at cx walking level lx of access x, a sparse mod level with a
 * block window (a cut view of n_out_of_m), runs cases on the window's
 * coordinates only; others run cases on all. */
static LirStmt *walk_cases(Lowerer *lw, LoopCtx *cx, int x, int lx, LirVar *cv) {
  const tj_window *w = &lw->acc[x].f->win[lx];
  if (!w->block) return cases(lw, cx, 0, cv);
  LwWindow win;
  if (!lw_index_window(lw, cx->v, &win) || win.w != w || !win.block)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "the loop over %s runs outside the loop "
                      "over its blocks, which its block window needs", cx->v->name), NULL;
  LirStmt *s = NULL;
  LirExpr *in = lw_window_valid(lw, &win, cx->v->name, lw_ref(lw, cv), &s);
  LirStmt *body = cases(lw, cx, 0, cv);
  if (!body && !diag_ok(lw->d)) return NULL;
  lir_append(&s, lir_if(A(lw), in, body, NULL));
  return s;
}

static LirStmt *single_loop(Lowerer *lw, LoopCtx *cx, LirExpr *extent) {
  Arena *a = A(lw);
  const LatPoint *P = &cx->L->p[0];
  LirStmt *loop, *outer, *inner;
  bool zeroing = lw->zero_rows && cx->depth == 0 && lw->target == T_OUT && !cx->in_temp;
  if (!lw_form_check(lw, cx->depth, NULL, P->sparse ? __builtin_ctzll(P->sparse) : -1))
    return NULL;
  LwWindow win;
  if (P->sparse == 0 && !lw->win_whole[cx->v->id] && lw_index_window(lw, cx->v, &win)) {
    if ((lw->ranged && cx->depth == 0) || zeroing || lw->fuse_f[cx->depth] ||
        lw->nest.form[cx->depth]->fuse)
      return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "the loop over %s, read through a block "
                        "window, is a row range or fused; convert the view", cx->v->name), NULL;
    return window_loop(lw, cx, &win);
  }
  if (P->sparse == 0 && lw->fuse_f[cx->depth]) { /* the inner loop of a fuse: j = f % n */
    LirVar *iv = lw_var(lw, cx->v->name, LT_I64);
    LirStmt *s = lir_decl(a, iv, lir_bin(a, LOP_REM, lw_ref(lw, lw->fuse_f[cx->depth]),
                                         lw_ref(lw, lw->fuse_n[cx->depth])));
    lir_append(&s, cases(lw, cx, 0, iv));
    return lir_block(a, s);
  }
  if (P->sparse == 0 && lw->nest.form[cx->depth]->fuse) return fused_loop(lw, cx, extent);
  if (P->sparse == 0) {
    LirVar *iv = lw_var(lw, cx->v->name, LT_I64);
    bool rows = lw->ranged && cx->depth == 0;
    if (rows && lw->plan->pos_rows)
      return TJ_BUG(lw->d, "a dense outermost loop in a pos_rows kernel"), NULL;
    LirExpr *lo = rows ? lw_ref(lw, lw->range_lo) : lw_i64(lw, 0);
    LirExpr *hi = rows ? lw_ref(lw, lw->range_hi) : lw_form_extent(lw, cx->depth, extent);
    LirStmt *body = NULL;
    if (zeroing)
      body = zero_rows(lw, lw_ref(lw, iv), lir_bin(a, LOP_ADD, lw_ref(lw, iv), lw_i64(lw, 1)));
    LirVar *saved_base = lw->leaf_base;
    LirExpr *saved_lo = lw->leaf_lo;
    bool saved_used = lw->leaf_base_used;
    lw->leaf_base = appends_every_iteration(lw, cx) ? lw_var(lw, "pOut_base", LT_I64) : NULL;
    lw->leaf_lo = lo;
    lw->leaf_base_used = false;
    lir_append(&body, cases(lw, cx, 0, iv));
    loop = lw_strip_loop(lw, cx->depth, iv, lo, hi, body, &outer, &inner);
    if (lw->leaf_base && lw->leaf_base_used) loop = dense_leaf_loop(lw, cx, loop, lo, hi);
    lw->leaf_base = saved_base;
    lw->leaf_lo = saved_lo;
    lw->leaf_base_used = saved_used;
  } else if (lw->fuse_f[cx->depth]) { /* the inner loop of pos(f): at the fused position */
    int x = __builtin_ctzll(P->sparse);
    Iter *it = &cx->it[x];
    LirVar *start = it->p;
    it->p = lw->fuse_f[cx->depth];
    LirStmt *body = read_coord(lw, x, lw_level_at(lw, x, cx->depth), it);
    LirVar *cv = lw_var(lw, cx->v->name, LT_I64);
    lir_append(&body, lir_decl(a, cv, lw_ref(lw, it->c)));
    lir_append(&body, cases(lw, cx, 0, cv));
    it->p = start;
    return lir_block(a, body);
  } else if (lw->nest.form[cx->depth]->fuse) { /* fuse(i, j, f) pos(f, ...): compressed rows */
    return fused_pos_loop(lw, cx, &cx->it[__builtin_ctzll(P->sparse)]);
  } else if (!zeroing && !lw->ranged && window_edges(lw, cx) &&
             lv_at(lw->acc[__builtin_ctzll(P->sparse)].f,
                   lw_level_at(lw, __builtin_ctzll(P->sparse), cx->depth), LV_ORDERED)) {
    return peeled_block_loop(lw, cx, __builtin_ctzll(P->sparse));
  } else {
    int x = __builtin_ctzll(P->sparse);
    Iter *it = &cx->it[x];
    LirVar *start = it->p;
    it->p = lw_var(lw, start->name, LT_I64);
    int lx = lw_level_at(lw, x, cx->depth);
    if (zeroing && lw_access_sliced(lw, x))
      return TJ_BUG(lw->d, "rows zeroed by a sliced operand's coordinates"), NULL;
    LirStmt *body = read_coord(lw, x, lx, it);
    LirVar *cv = lw_var(lw, cx->v->name, LT_I64);
    lir_append(&body, lir_decl(a, cv, lw_ref(lw, it->c)));
    LirVar *crd = lw->crd_ptr[lw->acc[x].t][lx];
    if (zeroing)
      lir_append(&body, zero_rows_after(lw, crd, it->p, start,
                                        lir_bin(a, LOP_ADD, lw_ref(lw, cv), lw_i64(lw, 1))));
    LirStmt *walk = walk_cases(lw, cx, x, lx, cv);   /* outside a window: nothing */
    if (!walk && !diag_ok(lw->d)) return NULL;
    lir_append(&body, walk);
    if (lw_slice_filtered(lw, x, lx))   /* positions outside the slice do nothing */
      body = guard_slice(lw, x, lx, lw_ref(lw, it->p), body);
    /* a pos_rows compute chunk: the range's positions of the walked operand */
    bool pos = lw->ranged && cx->depth == 0 && lw->plan->pos_rows == lw->acc[x].t;
    lw->pos_walked |= pos;
    loop = lw_strip_loop(lw, cx->depth, it->p, lw_ref(lw, pos ? lw->range_lo : start),
                         lw_ref(lw, pos ? lw->range_hi : it->end), body, &outer, &inner);
    it->p = start;
    if (zeroing) {
      loop_attrs(lw, cx, outer, inner);
      lir_append(&loop, zero_rows_after(lw, crd, it->end, start, extent));
      return loop;
    }
  }
  loop_attrs(lw, cx, outer, inner);
  return loop;
}

/* Whether target is among s's statements, in blocks but not under an if
 * or a loop: it runs whenever s does. */
static bool runs_always(const LirStmt *s, const LirStmt *target) {
  for (; s; s = s->next)
    if (s == target || (s->kind == LS_BLOCK && runs_always(s->u.block, target))) return true;
  return false;
}

/* The loop of a lattice point that walks one segmented iterator x alone
 * (COO's rows), leaving the end of each run to the loop over x's
 * singleton child:
 *   while (p < p_end) { c = crd[p]; seg = p + 1; i = c;
 *                       <cases: the child's lazy_run_loop sets seg>; p = seg; }
 * instead of scanning crd for the run's end before walking it again.
 * NULL when the child's loop is not the one unconditional use of the run's
 * end; point_loop then scans (read_coord). */
static LirStmt *lazy_point_loop(Lowerer *lw, LoopCtx *cx, const LatPoint *P, LirVar *cv) {
  Arena *a = A(lw);
  if (P->full || __builtin_popcountll(P->sparse) != 1 || cx->L->n != 1) return NULL;
  int x = __builtin_ctzll(P->sparse), l = lw_level_at(lw, x, cx->depth);
  const tj_format *f = lw->acc[x].f;
  if (!level_segmented(lw, x, l) || l + 1 >= f->order || !lv_at(f, l + 1, LV_BRANCHLESS) ||
      lw_level_segmented(f, l + 1) || lw->live[x] || lw->lazy[x].seg)
    return NULL;
  Iter *it = &cx->it[x];
  char base[64];
  snprintf(base, sizeof base, "%s%d", lw->acc[x].e->u.access.t->name, l);
  it->c = lw_var(lw, base, LT_I64);
  snprintf(base, sizeof base, "%s_seg", it->p->name);
  it->seg = lw_var(lw, base, LT_I64);
  lw->lazy[x] = (LazyRun){.seg = it->seg, .c = it->c, .end = it->end, .level = l};
  LirStmt *top = lir_decl(a, it->c, lw_coord_at(lw, x, l, lw_ref(lw, it->p)));
  lir_append(&top, lir_decl(a, it->seg, lir_bin(a, LOP_ADD, lw_ref(lw, it->p), lw_i64(lw, 1))));
  lir_append(&top, lir_assign(a, cv, lw_ref(lw, it->c)));
  LirStmt *body = cases(lw, cx, 0, cv);
  LazyRun run = lw->lazy[x];
  lw->lazy[x] = (LazyRun){0};
  if (!body || run.spoiled || run.uses != 1 || !runs_always(body, run.loop)) return NULL;
  lir_append(&top, body);
  lir_append(&top, lir_assign(a, it->p, lw_ref(lw, it->seg)));
  return lir_while(a, lir_bin(a, LOP_LT, lw_ref(lw, it->p), lw_ref(lw, it->end)), top);
}

/* The loop over the singleton level below a lazily walked run of access
 * x (LazyRun): from the run's first position while the parent coordinate
 * stays the same, then the run's end:
 *   q = p; go = 1;
 *   while (go) { j = crd[q]; <body>; q += 1; go = q < end && crd_up[min(q, end - 1)] == c; }
 *   seg = q;
 * The clamped load keeps the test branch-free and inside the array. */
static LirStmt *lazy_run_loop(Lowerer *lw, LoopCtx *cx, int x) {
  Arena *a = A(lw);
  LazyRun *run = &lw->lazy[x];
  int l = run->level + 1;
  Iter *it = &cx->it[x];
  char base[64];
  snprintf(base, sizeof base, "p%s%d", lw->acc[x].e->u.access.t->name, l);
  it->p = lw_var(lw, base, LT_I64);
  it->end = run->end;
  LirStmt *s = lir_decl(a, it->p, parent_pos(lw, x));
  LirVar *go = lw_var(lw, "go", LT_BOOL);
  lir_append(&s, lir_decl(a, go, lir_const_int(a, LT_BOOL, 1)));
  LirStmt *body = read_coord(lw, x, l, it);
  LirVar *cv = lw_var(lw, cx->v->name, LT_I64);
  lir_append(&body, lir_decl(a, cv, lw_ref(lw, it->c)));
  lir_append(&body, cases(lw, cx, 0, cv));
  lir_append(&body, lir_update(a, it->p, LOP_ADD, lw_i64(lw, 1)));
  LirExpr *last = lir_bin(a, LOP_SUB, lw_ref(lw, run->end), lw_i64(lw, 1));
  LirExpr *at = lir_bin(a, LOP_MIN, lw_ref(lw, it->p), last);
  LirExpr *same = lir_bin(a, LOP_EQ, lw_coord_at(lw, x, run->level, at), lw_ref(lw, run->c));
  LirExpr *in = lir_bin(a, LOP_LT, lw_ref(lw, it->p), lw_ref(lw, run->end));
  lir_append(&body, lir_assign(a, go, lir_bin(a, LOP_AND, in, same)));
  LirStmt *loop = lir_while(a, lw_ref(lw, go), body);
  lir_append(&s, loop);
  lir_append(&s, lir_assign(a, run->seg, lw_ref(lw, it->p)));
  run->uses++;
  run->loop = loop;
  return s;
}

/* Whether the loop at cx walks the singleton child of a lazily walked run
 * alone, as a plain loop (no schedule rewrites it): its access, or -1. */
static int lazy_child(const Lowerer *lw, const LoopCtx *cx, const Lattice *L) {
  if (L->n != 1 || L->p[0].full || __builtin_popcountll(L->p[0].sparse) != 1) return -1;
  int x = __builtin_ctzll(L->p[0].sparse), d = cx->depth;
  if (!lw->lazy[x].seg || lw_level_at(lw, x, d) != lw->lazy[x].level + 1) return -1;
  if (lw_access_sliced(lw, x)) return -1;   /* a run's end found by a filtered child: no */
  if (lw_form_rewritten(lw, d) || lw->nest.unroll[d] || lw->nest.vec[d] || d == lw->par_depth ||
      lw->live[x])
    return -1;
  return x;
}

/* How much longer one fiber of a two-way intersection must be than the
 * other for the intersection to search the longer one (gallop). */
enum { GALLOP_RATIO = 32 };

/* A two-way intersection that walks fiber s and binary-searches fiber l
 * for each of s's coordinates, for s much shorter than l; hit is the
 * body, which steps both (p_s and p_l past the common coordinate):
 *   while (p_s < end_s && p_l < end_l) {
 *     c_s = crd_s[p_s]; lo = p_l; hi = end_l;
 *     while (lo < hi) { mid = lo + (hi - lo) / 2; below = crd_l[mid] < c_s;
 *                       lo = below ? mid + 1 : lo; hi = below ? hi : mid; }
 *     p_l = lo; c_l = lo < end_l ? crd_l[min(lo, end_l - 1)] : -1;
 *     if (c_l == c_s) { cv = c_s; <hit> } else p_s += 1;
 *   }
 * Power-law rows (triangle counting on R-MAT) meet hubs this way; the
 * merge would step through the hub's row one coordinate at a time. */
static LirStmt *gallop_loop(Lowerer *lw, LoopCtx *cx, int xs, int xl, LirVar *cv,
                            LirStmt *hit) {
  Arena *a = A(lw);
  Iter *s = &cx->it[xs], *l = &cx->it[xl];
  int ls = lw_level_at(lw, xs, cx->depth), ll = lw_level_at(lw, xl, cx->depth);
  LirExpr *cond = lir_bin(a, LOP_AND, lir_bin(a, LOP_LT, lw_ref(lw, s->p), lw_ref(lw, s->end)),
                          lir_bin(a, LOP_LT, lw_ref(lw, l->p), lw_ref(lw, l->end)));
  LirStmt *top = lir_decl(a, s->c, lw_coord_at(lw, xs, ls, lw_ref(lw, s->p)));
  LirVar *lo = lw_var(lw, "lo", LT_I64), *hi = lw_var(lw, "hi", LT_I64);
  LirVar *mid = lw_var(lw, "mid", LT_I64), *below = lw_var(lw, "below", LT_BOOL);
  lir_append(&top, lir_decl(a, lo, lw_ref(lw, l->p)));
  lir_append(&top, lir_decl(a, hi, lw_ref(lw, l->end)));
  LirExpr *half = lir_bin(a, LOP_DIV, lir_bin(a, LOP_SUB, lw_ref(lw, hi), lw_ref(lw, lo)), lw_i64(lw, 2));
  LirStmt *step = lir_decl(a, mid, lir_bin(a, LOP_ADD, lw_ref(lw, lo), half));
  lir_append(&step, lir_decl(a, below, lir_bin(a, LOP_LT, lw_coord_at(lw, xl, ll, lw_ref(lw, mid)),
                                               lw_ref(lw, s->c))));
  lir_append(&step, lir_assign(a, lo, lir_select(a, lw_ref(lw, below),
                                                 lir_bin(a, LOP_ADD, lw_ref(lw, mid), lw_i64(lw, 1)),
                                                 lw_ref(lw, lo))));
  lir_append(&step, lir_assign(a, hi, lir_select(a, lw_ref(lw, below), lw_ref(lw, hi), lw_ref(lw, mid))));
  lir_append(&top, lir_while(a, lir_bin(a, LOP_LT, lw_ref(lw, lo), lw_ref(lw, hi)), step));
  lir_append(&top, lir_assign(a, l->p, lw_ref(lw, lo)));
  LirExpr *last = lir_bin(a, LOP_SUB, lw_ref(lw, l->end), lw_i64(lw, 1));
  LirExpr *at = lir_bin(a, LOP_MIN, lw_ref(lw, lo), last);   /* in the array; -1 past it */
  lir_append(&top, lir_decl(a, l->c, lir_select(a, lir_bin(a, LOP_LT, lw_ref(lw, lo), lw_ref(lw, l->end)),
                                               lw_coord_at(lw, xl, ll, at), lw_i64(lw, -1))));
  LirStmt *found = lir_assign(a, cv, lw_ref(lw, s->c));
  lir_append(&found, hit);
  LirStmt *miss = lir_assign(a, s->p, lir_bin(a, LOP_ADD, lw_ref(lw, s->p), lw_i64(lw, 1)));
  lir_append(&top, lir_if(a, lir_bin(a, LOP_EQ, lw_ref(lw, l->c), lw_ref(lw, s->c)), found, miss));
  return lir_while(a, cond, top);
}

/* Whether statement list s holds a loop. */
static bool holds_loop(const LirStmt *s) {
  for (; s; s = s->next)
    switch (s->kind) {
    case LS_FOR: case LS_WHILE: return true;
    case LS_IF:
      if (holds_loop(s->u.cond.then) || holds_loop(s->u.cond.els)) return true;
      break;
    case LS_BLOCK:
      if (holds_loop(s->u.block)) return true;
      break;
    default: break;
    }
  return false;
}

/* The merge of a two-way innermost intersection, or a gallop where one
 * fiber is GALLOP_RATIO times longer than the other (both unsegmented):
 *   if (len_x * R < len_y) gallop(x in y) else if (len_y * R < len_x) gallop(y in x) else merge */
static LirStmt *intersect_loop(Lowerer *lw, LoopCtx *cx, const LatPoint *P, LirVar *cv,
                               LirStmt *hit, LirStmt *merge) {
  Arena *a = A(lw);
  int x = -1, y = -1;
  if (holds_loop(hit)) return merge; /* innermost only: each copy would copy the nest */
  for (int k = 1; k < lw->nacc; k++)
    if (P->sparse >> k & 1) {
      if (cx->it[k].seg || lw_slice_filtered(lw, k, lw_level_at(lw, k, cx->depth))) return merge;
      if (x < 0) x = k;
      else y = k;
    }
  LirExpr *len[2];
  int xs[2] = {x, y};
  for (int k = 0; k < 2; k++)
    len[k] = lir_bin(a, LOP_SUB, lw_ref(lw, cx->it[xs[k]].end), lw_ref(lw, cx->it[xs[k]].p));
  LirExpr *r = lw_i64(lw, GALLOP_RATIO);
  LirStmt *in_y = gallop_loop(lw, cx, x, y, cv, hit), *in_x = gallop_loop(lw, cx, y, x, cv, hit);
  LirStmt *inner = lir_if(a, lir_bin(a, LOP_LT, lir_bin(a, LOP_MUL, len[1], r), len[0]), in_x, merge);
  LirStmt *pick = lir_if(a, lir_bin(a, LOP_LT, lir_bin(a, LOP_MUL, len[0], r), len[1]), in_y, inner);
  /* short fibers (a road network's) take one branch to the merge */
  LirExpr *both = lir_bin(a, LOP_ADD, len[0], len[1]);
  return lir_if(a, lir_bin(a, LOP_GT, both, r), pick, lir_block(a, merge));
}

/* Loop for lattice point pi of a multi-point lattice (or one that merges
 * several iterators or a segmented one): a while over the point's
 * iterators, with the dense counter when the point is full. */
static LirStmt *point_loop(Lowerer *lw, LoopCtx *cx, int pi, LirVar *cv,
                           LirExpr *extent) {
  Arena *a = A(lw);
  const LatPoint *P = &cx->L->p[pi];
  LirStmt *lazy = lazy_point_loop(lw, cx, P, cv);
  if (lazy || !diag_ok(lw->d)) return lazy;
  int n = __builtin_popcountll(P->sparse);
  LirExpr *cond = P->full ? lir_bin(a, LOP_LT, lw_ref(lw, cv), extent) : NULL;
  LirStmt *top = NULL, *adv = NULL, *step_all = NULL;
  LirExpr *minc = NULL, *all_hit = NULL;
  for (int x = 1; x < lw->nacc; x++) {
    if (!(P->sparse >> x & 1)) continue;
    Iter *it = &cx->it[x];
    LirExpr *in = lir_bin(a, LOP_LT, lw_ref(lw, it->p), lw_ref(lw, it->end));
    cond = cond ? lir_bin(a, LOP_AND, cond, in) : in;
    lir_append(&top, read_coord(lw, x, lw_level_at(lw, x, cx->depth), it));
    minc = minc ? lir_bin(a, LOP_MIN, minc, lw_ref(lw, it->c)) : lw_ref(lw, it->c);
    LirExpr *hit = lir_bin(a, LOP_EQ, lw_ref(lw, it->c), lw_ref(lw, cv));
    LirExpr *next = it->seg ? lw_ref(lw, it->seg)
                            : lir_bin(a, LOP_ADD, lw_ref(lw, it->p), lw_i64(lw, 1));
    if (n == 1 && !P->full)
      lir_append(&adv, lir_assign(a, it->p, next));
    else
      lir_append(&adv, lir_assign(a, it->p, lir_select(a, hit, next, lw_ref(lw, it->p))));
    lir_append(&step_all, lir_assign(a, it->p, next));
    int lx = lw_level_at(lw, x, cx->depth);   /* a filtered slice: to its next valid position */
    lir_append(&adv, lw_slice_skip(lw, x, lx, it->p, it->end));
    lir_append(&step_all, lw_slice_skip(lw, x, lx, it->p, it->end));
    all_hit = all_hit ? lir_bin(a, LOP_AND, all_hit, hit) : hit;
  }
  if (!P->full) lir_append(&top, lir_assign(a, cv, minc));
  if (!P->full && n >= 2 && cx->L->n == 1) {
    /* An intersection alone: where every iterator hits, compute and step
     * them all; elsewhere step the ones at the minimum, branch-free.
     *   if (all hit) { <body>; p_x = next_x ...; } else { p_x = hit_x ? next_x : p_x ...; }
     * The branch on "all hit" predicts well when the patterns mostly agree
     * and when they mostly differ, and its taken path keeps the positions'
     * increments off the loaded coordinates (a compare-and-select chain
     * costs a load's latency per step: the inner product of a tensor with
     * its own pattern ran 1.5x slower that way). */
    LirStmt *body = case_body(lw, cx, P, cv);
    if (!diag_ok(lw->d)) return NULL;
    lir_append(&body, step_all);
    lir_append(&top, lir_if(a, all_hit, body, adv));
    LirStmt *merge = lir_while(a, cond, top);
    return n == 2 ? intersect_loop(lw, cx, P, cv, lir_block(a, body), merge) : merge;
  }
  lir_append(&top, cases(lw, cx, pi, cv));
  lir_append(&top, adv);
  if (P->full) lir_append(&top, lir_update(a, cv, LOP_ADD, lw_i64(lw, 1)));
  return lir_while(a, cond, top);
}

static bool is_single(const Lowerer *lw, const Lattice *L, int depth) {
  if (L->n != 1) return false;
  const LatPoint *P = &L->p[0];
  if (P->sparse == 0) return true;
  if (P->full || __builtin_popcountll(P->sparse) != 1) return false;
  int x = __builtin_ctzll(P->sparse);
  return !level_segmented(lw, x, lw_level_at(lw, x, depth));
}

/* Whether single point L walks, at depth, the sparse mod level a block
 * window is on (a cut view of n_out_of_m: single_loop filters it). */
static bool walks_window(const Lowerer *lw, const Lattice *L, int depth) {
  int x = __builtin_ctzll(L->p[0].sparse);
  return lw->acc[x].f->win[lw_level_at(lw, x, depth)].block != 0;
}

bool lw_single_loop_at(const Lowerer *lw, AMask alive, int depth) {
  if (lw_wide_at(lw, alive, depth)) return false;
  Lattice L;
  lw_lattice(lw, alive, depth, &L);
  return L.n == 1 && is_single(lw, &L, depth);
}

/* ---- the merged co-iteration of a wide lattice ---- */

/* Whether e may be nonzero, as a condition on the merged iterators: the
 * iterator x is present when hit[x] (hit NULL: while p_x < p_x_end), an
 * access that may have missed a merged loop above when it hit there
 * (lw->live; else B(i,k) * C(k,j) + E(i,k) * F(k,j) + ... would store
 * B's row's zeros times F's row). The lattice's algebra (lw_expr_zero)
 * with the iterators left open. */
static LirExpr *may_be_nonzero(Lowerer *lw, const LoopCtx *cx, const Expr *e,
                               LirVar *const *hit) {
  AMask at = lw_sparse_at(lw, cx->alive, cx->depth);
  switch (e->kind) {
  case EX_ACCESS: {
    int x = lw_access_index(lw, e);
    if (!(at >> x & 1) && (cx->alive >> x & 1) && lw->live[x])
      return lw_ref(lw, lw->live[x]);   /* whether it hit a merged loop above */
    if (!(at >> x & 1)) return lir_const_int(A(lw), LT_BOOL, cx->alive >> x & 1);
    if (hit) return lw_ref(lw, hit[x]);
    return lir_bin(A(lw), LOP_LT, lw_ref(lw, cx->it[x].p), lw_ref(lw, cx->it[x].end));
  }
  case EX_LITERAL: return lir_const_int(A(lw), LT_BOOL, e->u.lit.value != lw_fill_value(lw));
  case EX_SUM:
    if (!lw_reduces_to_zero(lw, e)) return lir_const_int(A(lw), LT_BOOL, 1);
    return may_be_nonzero(lw, cx, e->u.sum.a, hit);
  default: break;
  }
  Expr *k[2];
  nt_children(e, k);
  switch (nt_expr_algebra(e, lw->nest.semiring)) {
  case OA_LEFT: return may_be_nonzero(lw, cx, k[0], hit);
  case OA_RIGHT: return may_be_nonzero(lw, cx, k[1], hit);
  case OA_NUMERATOR:
  case OA_KEEP: return may_be_nonzero(lw, cx, k[0], hit);
  case OA_INTERSECT:
    return both(lw, may_be_nonzero(lw, cx, k[0], hit), may_be_nonzero(lw, cx, k[1], hit));
  case OA_UNION:
    return either(lw, may_be_nonzero(lw, cx, k[0], hit), may_be_nonzero(lw, cx, k[1], hit));
  case OA_DENSE: break;
  case OA_EXCEPT: { /* the mask's hit at its last level keeps the entry out */
    LirExpr *y = may_be_nonzero(lw, cx, k[1], hit);
    int x = lw_access_index(lw, k[0]);
    bool decides = hit && (lw_sparse_at(lw, cx->alive, cx->depth) >> x & 1) &&
                   lw->acc[x].last_depth == cx->depth;
    return decides ? both(lw, y, lir_un(A(lw), LUN_NOT, lw_ref(lw, hit[x]))) : y;
  }
  }
  return lir_const_int(A(lw), LT_BOOL, 1);
}

/* Reads iterator x's coordinate without loading past its end:
 *   c = INT64_MAX; next = p;
 *   if (p < p_end) { <read_coord>; c = crd[p]; next = seg or p + 1; }
 * and leaves it->c = c, it->seg = next when segmented; *next = next. */
static LirStmt *peek_coord(Lowerer *lw, LoopCtx *cx, int x, LirVar **next_out) {
  Arena *a = A(lw);
  Iter *it = &cx->it[x];
  int l = lw_level_at(lw, x, cx->depth);
  LirVar *c = lw_var(lw, arena_printf(a, "%s%d", lw->acc[x].e->u.access.t->name, l), LT_I64);
  LirVar *next = lw_var(lw, arena_printf(a, "%s_next", it->p->name), LT_I64);
  LirStmt *s = lir_decl(a, c, lw_i64(lw, INT64_MAX));
  lir_append(&s, lir_decl(a, next, lw_ref(lw, it->p)));
  LirStmt *in = read_coord(lw, x, l, it);
  lir_append(&in, lir_assign(a, c, lw_ref(lw, it->c)));
  LirExpr *after = it->seg ? lw_ref(lw, it->seg)
                           : lir_bin(a, LOP_ADD, lw_ref(lw, it->p), lw_i64(lw, 1));
  lir_append(&in, lir_assign(a, next, after));
  lir_append(&s, lir_if(a, lir_bin(a, LOP_LT, lw_ref(lw, it->p), lw_ref(lw, it->end)), in, NULL));
  it->c = c;
  it->seg = it->seg ? next : NULL;
  *next_out = next;
  return s;
}

/* One merged loop for a lattice too wide to enumerate (lw_wide_at), its
 * size linear in the iterators. Over sparse iterators only:
 *   while (<rhs may be nonzero, p_x < p_x_end per iterator x>) {
 *     <peek_coord per x>; i = min over x of c_x; hit_x = c_x == i;
 *     if (<rhs may be nonzero, hit_x per x>) <case: a missed x reads 0,
 *                                            its levels below are empty>
 *     p_x = hit_x ? next_x : p_x;
 *   }
 * When rhs may be nonzero with no iterator present (a dense operand, a
 * literal), the loop covers the dense range instead (dense exhausts last):
 *   for (i = 0; i < extent; i++) { <peek_coord>; hit_x = c_x == i; <case>; <advance> } */
static LirStmt *wide_loop(Lowerer *lw, LoopCtx *cx) {
  Arena *a = A(lw);
  AMask at = lw_sparse_at(lw, cx->alive, cx->depth);
  bool full = !lw_expr_zero(lw, lw->root, cx->alive & ~at);
  LirStmt *s = NULL, *body = NULL, *adv = NULL;
  for (int x = 1; x < lw->nacc; x++)
    if (at >> x & 1) lir_append(&s, init_iter(lw, x, lw_level_at(lw, x, cx->depth), &cx->it[x]));
  LirExpr *running = may_be_nonzero(lw, cx, lw->root, NULL);
  LirVar *cv = lw_var(lw, cx->v->name, LT_I64), *hit[LW_MAX_ACCESS] = {0};
  LirVar *next[LW_MAX_ACCESS];
  for (int x = 1; x < lw->nacc; x++)
    if (at >> x & 1) lir_append(&body, peek_coord(lw, cx, x, &next[x]));
  if (!full) lir_append(&body, lir_assign(a, cv, lw_i64(lw, INT64_MAX)));
  for (int x = 1; x < lw->nacc && !full; x++)  /* i = min(i, c_x): linear in C too */
    if (at >> x & 1)
      lir_append(&body, lir_assign(a, cv, lir_bin(a, LOP_MIN, lw_ref(lw, cv),
                                                  lw_ref(lw, cx->it[x].c))));
  LirVar *saved[LW_MAX_ACCESS];
  memcpy(saved, lw->live, sizeof saved);
  for (int x = 1; x < lw->nacc; x++) {
    if (!(at >> x & 1)) continue;
    Iter *it = &cx->it[x];
    hit[x] = lw_var(lw, arena_printf(a, "%s_hit", it->p->name), LT_BOOL);
    lir_append(&body, lir_decl(a, hit[x], lir_bin(a, LOP_EQ, lw_ref(lw, it->c), lw_ref(lw, cv))));
    lw->live[x] = hit[x];
    lir_append(&adv, lir_assign(a, it->p, lir_select(a, lw_ref(lw, hit[x]),
                                                    lw_ref(lw, next[x]), lw_ref(lw, it->p))));
    lir_append(&adv, lw_slice_skip(lw, x, lw_level_at(lw, x, cx->depth), it->p, it->end));
  }
  LatPoint every = {at, full};
  LirStmt *one = case_body(lw, cx, &every, cv);
  memcpy(lw->live, saved, sizeof saved);
  LirExpr *any = may_be_nonzero(lw, cx, lw->root, hit);
  if (one) lir_append(&body, is_bool_const(any, 1) ? lir_block(a, one) : lir_if(a, any, one, NULL));
  lir_append(&body, adv);
  if (full) {
    lir_append(&s, lir_for(a, cv, lw_i64(lw, 0), lw_extent_of(lw, cx->v), body));
  } else {
    lir_append(&s, lir_decl(a, cv, lw_i64(lw, 0)));
    lir_append(&s, lir_while(a, running, body));
  }
  return lir_block(a, s);
}

/* unroll(i, n) or vectorize(i, w) on a loop that is a while loop (how
 * says why): refused. */
static LirStmt *refuse_unroll(Lowerer *lw, const LoopCtx *cx, const char *how) {
  bool un = lw->nest.unroll[cx->depth];
  diag_error(lw->d, TJ_ERR_UNSUPPORTED, "%s(%s, %d): the loop over %s %s; only for loops "
             "(a dense range, or one sparse level) %s", un ? "unroll" : "vectorize",
             cx->v->name, un ? lw->nest.unroll[cx->depth] : lw->nest.vec[cx->depth],
             cx->v->name, how, un ? "unroll" : "vectorize");
  return NULL;
}

/* What the rest of a merge's levels can append, from this row on: pOut +
 * the sum over the merged accesses of their level's crd_len - position.
 * A capacity hint only (each row still checks its own room); NULL in a
 * row-range kernel (its rows end before the levels do) or where an access
 * is sliced (its crd_len is the base's). */
static LirExpr *merge_rest(Lowerer *lw, const LoopCtx *cx, AMask all) {
  Arena *a = A(lw);
  if (lw->ranged) return NULL;
  LirExpr *rest = lw_ref(lw, lw->out_p[lw->out_last]);
  for (int x = 1; x < lw->nacc; x++) {
    if (!(all >> x & 1)) continue;
    int l = lw_level_at(lw, x, cx->depth);
    if (l < 0 || lw_access_sliced(lw, x)) return NULL;
    LirExpr *len = lir_field(a, lw->k, lw->acc[x].t, LF_CRD_LEN, l);
    rest = lir_bin(a, LOP_ADD, rest, lir_bin(a, LOP_SUB, len, lw_ref(lw, cx->it[x].p)));
  }
  return rest;
}

/* Whether every entry the merge appends has its coordinate and (when
 * emitted) its value stored at the append, before anything reads it: the
 * merge is the innermost loop, nothing is reduced, and no mask, hit flag,
 * partial or workspace stands between a case and its store. */
static bool merge_writes_all(const Lowerer *lw, const LoopCtx *cx) {
  return cx->depth == lw->nest.nloops - 1 && lw->first_red >= lw->nest.nloops &&
         !lw->valued_masks && !lw->out_hit && !lw->partials && lw->nest.ws_depth < 0 &&
         lw->nest.vws_depth < 0;
}

/* Room, made once before the point loops of a merge over the sparse
 * output's leaf level, for every entry the merge can append: each trip of
 * a point loop without a dense counter steps at least one of the merged
 * iterators (all, initialized) past a position and appends at most one
 * entry, so pOut + the sum of their remaining lengths bounds the leaf's
 * end. The cases then append with no capacity check: a sparse add's merge
 * kept the check, its growth call and the pointer reloads out of a loop
 * whose registers they had spilled (cage11: 9.8 -> 8.1 ms, the hand
 * loop 8.5).
 * When it grows, it grows at once to what the rest of the merged levels
 * can append (pOut + the sum of crd_len - position: the whole output of a
 * CSR add, not a doubling chain of copies into fresh pages), and when the
 * merge is the innermost loop and stores each entry it appends
 * (merge_writes_all), the new space is not zeroed: a fresh output's
 * arrays are touched once, by the merge (u200k evaluate into a fresh
 * output: the doublings' copies and zeroing were two thirds of its time).
 * NULL where the bound does not hold or nothing is assembled. */
static LirStmt *merge_room(Lowerer *lw, const LoopCtx *cx, AMask all) {
  Arena *a = A(lw);
  const tj_format *of = lw->acc[0].f;
  if (lw->phase == PHASE_COMPUTE || lw->target != T_OUT || cx->in_temp ||
      !lw->plan->out_sparse || !lw_out_appended(lw) || lw->leaf_base)
    return NULL;
  int l = lw_level_at(lw, 0, cx->depth);
  if (l < 0 || l != lw->out_last || lv_at(of, l, LV_FULL) || lw_out_run_start(of, l) != l)
    return NULL;
  for (int q = 0; q < cx->L->n; q++)
    if (cx->L->p[q].full) return NULL;
  LirExpr *end = lw_ref(lw, lw->out_p[l]);
  for (int x = 1; x < lw->nacc; x++)
    if (all >> x & 1)
      end = lir_bin(a, LOP_ADD, end, lir_bin(a, LOP_SUB, lw_ref(lw, cx->it[x].end),
                                              lw_ref(lw, cx->it[x].p)));
  return lw_ensure_out_room(lw, l, lir_bin(a, LOP_SUB, end, lw_i64(lw, 1)),
                            merge_rest(lw, cx, all), merge_writes_all(lw, cx));
}

LirStmt *lw_loops(Lowerer *lw, int depth, AMask alive, bool in_temp) {
  if (lw_partials_here(lw, depth)) return lw_partials_slot(lw, depth, alive, in_temp);
  if (depth == lw->scope_end) return scope_body(lw, alive);
  if (lw->target == T_BOUND && lw->nest.order[depth] == lw->nest.ws_var)
    return bound_trips(lw, depth, alive);
  if (lw_subexpr_skips(lw, depth)) return lw_loops(lw, depth + 1, alive, in_temp);
  if (lw->target == T_OUT && !in_temp) {
    if (depth == lw->nest.ws_depth) return scatter_through_workspace(lw, depth, alive);
    if (depth == lw->first_red && lw->nest.ws_depth < 0)
      return reduce_into_temp(lw, depth, alive);
  }
  if (depth == lw->nest.vws_depth && !lw->vws_in)
    return lw_subexpr_where(lw, depth, alive, in_temp);
  int split_below = lw_outer_half_at(lw, depth);
  if (split_below >= 0) return lw_outer_half(lw, depth, split_below, alive, in_temp);
  LoopCtx cx = {.depth = depth, .alive = alive, .in_temp = in_temp,
                .v = lw->nest.order[depth]};
  bool wide = lw_wide_at(lw, alive, depth);
  if (wide && (lw->nest.unroll[depth] || lw->nest.vec[depth]))
    return refuse_unroll(lw, &cx, "merges sparse operands in a while loop");
  if (wide && !lw_form_check(lw, depth, "merges sparse operands in a while loop", -1))
    return NULL;
  LwWindow win0;
  if (wide && lw_index_window(lw, cx.v, &win0))
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "the loop over %s, read through a block "
                      "window, merges sparse operands; convert the view", cx.v->name), NULL;
  if (wide) return wide_loop(lw, &cx);
  Lattice L;
  lw_lattice(lw, alive, depth, &L);
  if (L.overflow) return TJ_BUG(lw->d, "merge lattice past LAT_MAX_POINTS"), NULL;
  if (L.n == 0) return NULL;
  cx.L = &L;
  Arena *a = A(lw);
  int lazy = lazy_child(lw, &cx, &L);
  LwWindow win;
  if (lw_index_window(lw, cx.v, &win) && (lazy >= 0 || !is_single(lw, &L, depth) ||
                                          (L.p[0].sparse != 0 && !walks_window(lw, &L, depth))))
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "the loop over %s, read through a block "
                      "window, co-iterates or walks a sparse level; convert the view",
                      cx.v->name), NULL;
  if (lazy >= 0) return lir_block(a, lazy_run_loop(lw, &cx, lazy));
  LirStmt *s = NULL;
  AMask all = 0;
  for (int q = 0; q < L.n; q++) all |= L.p[q].sparse;
  for (int x = 1; x < lw->nacc; x++)
    if (all >> x & 1) lir_append(&s, init_iter(lw, x, lw_level_at(lw, x, depth), &cx.it[x]));
  LirExpr *extent = lw_extent_of(lw, cx.v);
  bool pos_fused = lw->fuse_f[depth] && !lw->fuse_n[depth];
  if (lw->nest.form[depth]->fused &&
      !(is_single(lw, &L, depth) && (L.p[0].sparse == 0) == !pos_fused &&
        (!pos_fused || lw->acc[__builtin_ctzll(L.p[0].sparse)].e ==
                           lw->nest.form[depth - 1]->pos_access)))
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): the loop over %s %s",
                      lw->nest.order[depth - 1]->name, cx.v->name,
                      lw->nest.form[depth - 1]->fuse, cx.v->name,
                      pos_fused ? "co-iterates, or walks another access than pos names"
                                : "walks a sparse level or co-iterates; fuse dense loops, or "
                                  "a row loop and the compressed level below it by "
                                  "positions: pos(f, fp, A(i,j))"), NULL;
  if (is_single(lw, &L, depth)) {
    lir_append(&s, single_loop(lw, &cx, extent));
    return lir_block(a, s);
  }
  if (lw->nest.unroll[depth] || lw->nest.vec[depth])
    return refuse_unroll(lw, &cx, "co-iterates sparse operands (or walks duplicates) in "
                                  "while loops");
  if (!lw_form_check(lw, depth, "co-iterates sparse operands (or walks duplicates) in while "
                     "loops", -1))
    return NULL;
  LirVar *cv = lw_var(lw, cx.v->name, LT_I64);
  lir_append(&s, lir_decl(a, cv, lw_i64(lw, 0)));
  LirStmt *room = merge_room(lw, &cx, all);
  int saved_room = lw->leaf_room;
  if (room) lir_append(&s, room), lw->leaf_room = depth + 1;
  for (int q = 0; q < L.n; q++) lir_append(&s, point_loop(lw, &cx, q, cv, extent));
  lw->leaf_room = saved_room;
  return lir_block(a, s);
}
