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
  if (f->fuse)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): the loop over %s %s", v,
                      f->fuse_inner->name, f->fuse, v, why);
  if (f->split || f->divide)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "%s(%s, %s, %s, %d): the loop over %s %s",
                      f->split ? "split" : "divide", f->pos ? f->pos : v, f->outer, f->inner,
                      f->split ? f->split : f->divide, v, why);
  if (f->pos)
    return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "pos(%s, %s, ...): the loop over %s %s", v,
                      f->pos, v, why);
  return diag_error(lw->d, TJ_ERR_UNSUPPORTED, "bound(%s, %s, %lld, %s): the loop over %s %s",
                    v, f->bound_name, (long long)f->bound, cin_bound_name(f->bound_kind), v,
                    why);
}

static bool rewritten(const CinLoopForm *f) {
  return f && (f->split || f->divide || f->pos || f->bound_kind || f->fuse);
}

bool lw_form_rewritten(const Lowerer *lw, int depth) { return rewritten(lw->nest.form[depth]); }

bool lw_form_check(Lowerer *lw, int depth, const char *how, int sparse_x) {
  const CinLoopForm *f = lw->nest.form[depth];
  if (!rewritten(f)) return true;
  if (f->fuse && how)
    return refuse(lw, depth, arena_printf(lw->a, "%s; fused loops are dense ranges (or the "
                                          "positions of a row loop's compressed level)", how));
  if (how)
    return refuse(lw, depth, arena_printf(lw->a, "%s; only a for loop (a dense range, or the "
                                          "positions of one sparse level) is rewritten", how));
  if (f->fuse && sparse_x >= 0 && (!f->pos || f->pos_access != lw->acc[sparse_x].e))
    return refuse(lw, depth, "walks a sparse level; fuse dense loops, or the row loop "
                  "and the compressed level below it by positions: pos(f, fp, A(i,j))");
  if (f->fuse && sparse_x >= 0) return true;   /* fused_pos_loop checks the levels */
  if (sparse_x < 0) {
    if (f->pos && !f->fuse)
      return refuse(lw, depth, "walks a dense range; pos walks the positions of a sparse level");
    const IndexVar *v = lw->nest.order[depth];
    bool exact = f->bound_kind == BOUND_MAX_EXACT;
    if (f->bound_kind && v->extent >= 0 && (exact ? v->extent != f->bound : v->extent > f->bound))
      return refuse(lw, depth, arena_printf(lw->a, "has extent %lld, %s %lld",
                                            (long long)v->extent, exact ? "not" : "more than",
                                            (long long)f->bound));
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
  return f && f->bound_kind == BOUND_MAX_EXACT ? lw_i64(lw, f->bound) : extent;
}

/* The loop over blocks of the split loop at depth over [lo, hi): pre
 * declares the range, the block size and count; head (the block loop's
 * body, to which the caller appends) declares the block [b, e). */
typedef struct Blocks {
  LirStmt *pre, *head;
  LirVar *o, *nb, *b, *e;
} Blocks;

static void blocks(Lowerer *lw, int depth, LirExpr *lo, LirExpr *hi, Blocks *bk) {
  const CinLoopForm *f = lw->nest.form[depth];
  Arena *a = lw->a;
  const char *v = lw->nest.order[depth]->name;
  LirVar *lo_v = lw_var(lw, arena_printf(a, "%s_lo", v), LT_I64);
  LirVar *hi_v = lw_var(lw, arena_printf(a, "%s_hi", v), LT_I64);
  LirVar *fv = lw_var(lw, arena_printf(a, "%s_f", v), LT_I64);
  bk->nb = lw_var(lw, arena_printf(a, "%s_nb", v), LT_I64);
  bk->pre = lir_decl(a, lo_v, lo);
  lir_append(&bk->pre, lir_decl(a, hi_v, hi));
  LirExpr *n = lir_bin(a, LOP_SUB, lw_ref(lw, hi_v), lw_ref(lw, lo_v));
  int parts = f->split ? f->split : f->divide;
  LirExpr *ceil_div = lir_bin(a, LOP_DIV, lir_bin(a, LOP_ADD, n, lw_i64(lw, parts - 1)),
                              lw_i64(lw, parts));
  if (f->split) {
    lir_append(&bk->pre, lir_decl(a, fv, lw_i64(lw, f->split)));
    lir_append(&bk->pre, lir_decl(a, bk->nb, ceil_div));
  } else {
    lir_append(&bk->pre, lir_decl(a, fv, lir_bin(a, LOP_MAX, ceil_div, lw_i64(lw, 1))));
    lir_append(&bk->pre, lir_decl(a, bk->nb, lw_i64(lw, f->divide)));
  }
  bk->o = lw_var(lw, f->outer, LT_I64);
  bk->b = lw_var(lw, arena_printf(a, "%s_b", v), LT_I64);
  bk->e = lw_var(lw, arena_printf(a, "%s_e", v), LT_I64);
  bk->head = lir_decl(a, bk->b, lir_bin(a, LOP_ADD, lw_ref(lw, lo_v),
                                        lir_bin(a, LOP_MUL, lw_ref(lw, bk->o), lw_ref(lw, fv))));
  LirExpr *end = lir_bin(a, LOP_MIN, lir_bin(a, LOP_ADD, lw_ref(lw, bk->b), lw_ref(lw, fv)),
                         lw_ref(lw, hi_v));
  lir_append(&bk->head, lir_decl(a, bk->e, end));
}

LirStmt *lw_strip_loop(Lowerer *lw, int depth, LirVar *iv, LirExpr *lo, LirExpr *hi,
                       LirStmt *body, LirStmt **outer, LirStmt **inner) {
  return lw_strip_loop_pre(lw, depth, iv, lo, hi, body, outer, inner, NULL, NULL);
}

LirStmt *lw_strip_loop_pre(Lowerer *lw, int depth, LirVar *iv, LirExpr *lo, LirExpr *hi,
                           LirStmt *body, LirStmt **outer, LirStmt **inner, LwBlockPre pre,
                           void *ctx) {
  const CinLoopForm *f = lw->nest.form[depth];
  Arena *a = lw->a;
  if (lw->block_b[depth]) { /* the loop over blocks is above: this block only */
    *outer = *inner = lir_for(a, iv, lw_ref(lw, lw->block_b[depth]),
                              lw_ref(lw, lw->block_e[depth]), body);
    if (!pre) return *outer;
    LirStmt *s = pre(lw, lw->block_b[depth], ctx);
    lir_append(&s, *outer);
    return lir_block(a, s);
  }
  if (!f || (!f->split && !f->divide)) {
    *outer = *inner = lir_for(a, iv, lo, hi, body);
    return *outer;
  }
  Blocks bk;
  blocks(lw, depth, lo, hi, &bk);
  *inner = lir_for(a, iv, lw_ref(lw, bk.b), lw_ref(lw, bk.e), body);
  if (pre) lir_append(&bk.head, pre(lw, bk.b, ctx));
  lir_append(&bk.head, *inner);
  *outer = lir_for(a, bk.o, lw_i64(lw, 0), lw_ref(lw, bk.nb), bk.head);
  lir_append(&bk.pre, *outer);
  return lir_block(a, bk.pre);
}

int lw_outer_half_at(const Lowerer *lw, int depth) {
  for (int k = depth + 1; k < lw->nest.nloops; k++)
    if (lw->nest.outer_at[k] == depth && !lw->block_b[k]) return k;
  return -1;
}

/* The range [lo, hi) the split loop at jd walks, computed above the loop
 * at depth: a dense range, or the positions of its pos access's level,
 * whose parent levels must be bound above depth. NULL lo with lw->d set
 * when it is not known there. */
static bool range_above(Lowerer *lw, int depth, int jd, AMask alive, LirExpr **lo,
                        LirExpr **hi) {
  const CinLoopForm *f = lw->nest.form[jd];
  if (!f->pos) {
    *lo = lw_i64(lw, 0);
    *hi = lw_form_extent(lw, jd, lw_extent_of(lw, lw->nest.order[jd]));
    return true;
  }
  int x = lw_access_index(lw, f->pos_access);
  int l = x >= 0 ? lw_level_at(lw, x, jd) : -1;
  bool bound = x >= 0 && l >= 0 && (alive >> x & 1);
  for (int m = 0; bound && m < l; m++) {
    const IndexVar *v = lw->acc[x].e->u.access.idx[lw->acc[x].f->mode_order[m]];
    bound = lw->depth_of[v->id] < depth;
  }
  if (!bound)
    return refuse(lw, jd, arena_printf(lw->a, "has its outer half above the loop of %s, where "
                                       "the positions it walks are not known yet (the levels "
                                       "above %s's in %s must be walked above %s)",
                                       lw->nest.order[depth]->name, lw->nest.order[jd]->name,
                                       f->pos_access->u.access.t->name,
                                       lw->nest.order[depth]->name));
  lw_pos_bounds(lw, x, l, lw->pos[x] ? lw->pos[x] : lw_i64(lw, 0), lo, hi);
  return true;
}

/* Running the loops from depth on once per block is the same as once: each
 * innermost iteration still runs once, and a dense output (or a root
 * reduction's temp, which is added into it) is updated, never stored, by
 * the loops that repeat. */
LirStmt *lw_outer_half(Lowerer *lw, int depth, int jd, AMask alive, bool in_temp) {
  const char *at = lw->nest.order[depth]->name;
  const char *why =
      lw_out_appended(lw) ? "writes a sparse output, which is appended in loop order (a "
                            "sparse output is updated in place only when its pattern is one "
                            "operand's: a product of it and dense factors, in its format, not a view)"
      : jd >= lw->scope_end ? "is a sum's loop, nested inside its scope"
      : lw->nest.ws_depth > depth && lw->nest.ws_depth <= jd ? "would repeat a workspace"
                                                             : NULL;
  if (why)
    return refuse(lw, jd, arena_printf(lw->a, "has loops between its halves (%s above %s) and "
                                       "%s; keep them together", lw->nest.form[jd]->outer, at,
                                       why)), NULL;
  LirExpr *lo, *hi;
  if (!range_above(lw, depth, jd, alive, &lo, &hi)) return NULL;
  Blocks bk;
  blocks(lw, jd, lo, hi, &bk);
  lw->block_b[jd] = bk.b;
  lw->block_e[jd] = bk.e;
  LirStmt *body = lw_loops(lw, depth, alive, in_temp);
  lw->block_b[jd] = lw->block_e[jd] = NULL;
  if (!body) return NULL;
  lir_append(&bk.head, body);
  lir_append(&bk.pre, lir_for(lw->a, bk.o, lw_i64(lw, 0), lw_ref(lw, bk.nb), bk.head));
  return lir_block(lw->a, bk.pre);
}
