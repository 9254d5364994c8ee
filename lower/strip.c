/* The loop rewrites of the concrete notation (CinLoopForm: split, divide,
 * pos, bound) carried out on the one `for` loop of an index: which loops
 * may take them, and the strip-mined loop itself. A split of a position
 * loop (after pos) splits the nonzeros of one sparse level into blocks of
 * equal size, whatever the rows they fall in:
 *
 *   split(i, i0, i1, f):
 *     i_lo = lo; i_n = hi - lo;
 *     for (i0 = 0; i0 < (i_n + f - 1) / f; i0++) {
 *       i_b = i_lo + i0 * f; i_e = min(i_b + f, hi);
 *       for (i = i_b; i < i_e; i++) body }
 *   divide(i, i0, i1, n): n blocks of f = max(1, ceil(i_n / n)) each.
 */
#include "lowerer.h"

/* The refusal of a rewrite the loop at depth cannot take (why says why). */
static bool refuse(Lowerer *lw, int depth, const char *why) {
  const CinLoopForm *f = lw->nest.form[depth];
  const char *v = lw->nest.order[depth]->name;
  if (f->split || f->divide)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "%s(%s, %s, %s, %d): the loop over %s %s",
                      f->split ? "split" : "divide", f->pos ? f->pos : v, f->outer, f->inner,
                      f->split ? f->split : f->divide, v, why);
  if (f->pos)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "pos(%s, %s, ...): the loop over %s %s", v,
                      f->pos, v, why);
  return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "bound(%s, %s, %lld, max_exact): the loop over "
                    "%s %s", v, f->bound_name, (long long)f->bound, v, why);
}

static bool rewritten(const CinLoopForm *f) {
  return f && (f->split || f->divide || f->pos || f->bound_kind);
}

bool lw_form_check(Lowerer *lw, int depth, const char *how, int sparse_x) {
  const CinLoopForm *f = lw->nest.form[depth];
  if (!rewritten(f)) return true;
  if (how)
    return refuse(lw, depth, arena_printf(lw->a, "%s; only a for loop (a dense range, or the "
                                          "positions of one sparse level) is rewritten", how));
  if (sparse_x < 0) {
    if (f->pos)
      return refuse(lw, depth, "walks a dense range; pos walks the positions of a sparse level");
    const IndexVar *v = lw->nest.order[depth];
    if (f->bound_kind && v->extent >= 0 && v->extent != f->bound)
      return refuse(lw, depth, arena_printf(lw->a, "has extent %lld, not %lld",
                                            (long long)v->extent, (long long)f->bound));
    return true;
  }
  const Expr *e = lw->acc[sparse_x].e;
  if (f->bound_kind) return refuse(lw, depth, "walks a sparse level; bound a dense loop");
  if (!f->pos)
    return refuse(lw, depth, arena_printf(lw->a, "walks %s's sparse level by coordinates; "
                                          "split its positions: pos(%s, %sp, ...) first",
                                          e->u.access.t->name, lw->nest.order[depth]->name,
                                          lw->nest.order[depth]->name));
  if (f->pos_access != e)
    return refuse(lw, depth, arena_printf(lw->a, "walks the level of another access (%s), "
                                          "not that of pos", e->u.access.t->name));
  return true;
}

LirExpr *lw_form_extent(Lowerer *lw, int depth, LirExpr *extent) {
  const CinLoopForm *f = lw->nest.form[depth];
  return f && f->bound_kind ? lw_i64(lw, f->bound) : extent;
}

LirStmt *lw_strip_loop(Lowerer *lw, int depth, LirVar *iv, LirExpr *lo, LirExpr *hi,
                       LirStmt *body, LirStmt **outer, LirStmt **inner) {
  const CinLoopForm *f = lw->nest.form[depth];
  Arena *a = lw->a;
  if (!f || (!f->split && !f->divide)) {
    *outer = *inner = lir_for(a, iv, lo, hi, body);
    return *outer;
  }
  const char *v = lw->nest.order[depth]->name;
  LirVar *lo_v = lw_var(lw, arena_printf(a, "%s_lo", v), LT_I64);
  LirVar *hi_v = lw_var(lw, arena_printf(a, "%s_hi", v), LT_I64);
  LirVar *fv = lw_var(lw, arena_printf(a, "%s_f", v), LT_I64);
  LirVar *nb = lw_var(lw, arena_printf(a, "%s_nb", v), LT_I64);
  LirStmt *s = lir_decl(a, lo_v, lo);
  lir_append(&s, lir_decl(a, hi_v, hi));
  LirExpr *n = lir_bin(a, LOP_SUB, lw_ref(lw, hi_v), lw_ref(lw, lo_v));
  int parts = f->split ? f->split : f->divide;
  LirExpr *ceil_div = lir_bin(a, LOP_DIV, lir_bin(a, LOP_ADD, n, lw_i64(lw, parts - 1)),
                              lw_i64(lw, parts));
  if (f->split) {
    lir_append(&s, lir_decl(a, fv, lw_i64(lw, f->split)));
    lir_append(&s, lir_decl(a, nb, ceil_div));
  } else {
    lir_append(&s, lir_decl(a, fv, lir_bin(a, LOP_MAX, ceil_div, lw_i64(lw, 1))));
    lir_append(&s, lir_decl(a, nb, lw_i64(lw, f->divide)));
  }
  LirVar *o = lw_var(lw, f->outer, LT_I64);
  LirVar *b = lw_var(lw, arena_printf(a, "%s_b", v), LT_I64);
  LirVar *e = lw_var(lw, arena_printf(a, "%s_e", v), LT_I64);
  LirStmt *ob = lir_decl(a, b, lir_bin(a, LOP_ADD, lw_ref(lw, lo_v),
                                       lir_bin(a, LOP_MUL, lw_ref(lw, o), lw_ref(lw, fv))));
  lir_append(&ob, lir_decl(a, e, lir_bin(a, LOP_MIN, lir_bin(a, LOP_ADD, lw_ref(lw, b),
                                                             lw_ref(lw, fv)),
                                         lw_ref(lw, hi_v))));
  *inner = lir_for(a, iv, lw_ref(lw, b), lw_ref(lw, e), body);
  lir_append(&ob, *inner);
  *outer = lir_for(a, o, lw_i64(lw, 0), lw_ref(lw, nb), ob);
  lir_append(&s, *outer);
  return lir_block(a, s);
}
