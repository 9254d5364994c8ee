/* Level functions of the lowering: what the loops emit for a level, asked
 * of its type's properties (ir/level.h), never of its letter.
 *   position bounds of the segment under parent position p:
 *     compressed (LV_HAS_POS)           pos[p] .. pos[p+1]
 *     loose (LV_HAS_POS, not compact)    pos[2p] .. pos[2p+1]
 *     n_out_of_m (LV_FIXED_SEG)         p*n .. p*n+n (n a constant: the
 *                                       loop over a block's n entries has
 *                                       a constant trip count, no branch)
 *     singleton under a segmented level p .. seg_end (the parent's run)
 *     singleton                         p .. p+1
 *   locate (LV_LOCATE): position of coordinate c under parent position p
 *     is p * size + c (c itself at the top level);
 *   coordinate access (LV_HAS_CRD): crd[q] at position q;
 *   output runs: a nonunique compressed level and the singletons below it
 *     (COO's `uq`) are appended together at the run's last level, one
 *     position for all of them (the run's first level counts it);
 *   output leaf: the last level that is not full; the values of one leaf
 *     position are the block of the dense levels below it (1 when none),
 *     so vals holds (leaf positions) x block.
 * A new level type adds its row to ir/level.c and, if its positions are
 * found differently, a case here.
 *
 * Slices (a view's dimSlices: offset o, size n, stride s on the dim a level
 * stores) change three functions, as MLIR's sparse slice iteration does:
 *   locate     a dense level's position is parent * base_size + o + c * s
 *              (base_size: the stored level's size, levels[l].size);
 *   coordinate (crd[q] - o) / s;
 *   bounds     an ordered compressed level's segment is narrowed to the
 *              coordinates o .. o + (n-1)*s by two binary searches; when
 *              s > 1, or the level is a singleton or not ordered, the
 *              iterator is also filtered: positions whose coordinate is
 *              outside the slice or off its stride are skipped
 *              (lw_slice_skip in merges, lw_slice_valid around a for's body).
 *
 * Block windows (tj_window, a cut view of BSR read in place) change the
 * loop over the index a dense mod level stores: in block b of the frame
 * it runs over the view's coordinates of that block only, lo(b) .. hi(b)
 * by the stride, the full block except at the two edges of the block
 * range (lw_window_loop); nothing outside the view is read. Over a sparse
 * (n_out_of_m) mod level the loop walks the block's stored positions and
 * skips the coordinates outside the window (lw_window_valid): nothing
 * outside the view is read through them either.
 */
#include "lowerer.h"

bool lw_is_sparse_level(const Lowerer *lw, int x, int level) {
  return !lv_at(lw->acc[x].f, level, LV_FULL);
}

/* Whether no coordinate tuple is stored twice although a level is
 * nonunique: every level below the deepest nonunique one is a singleton
 * (pack sums duplicates of such formats, and wrap refuses them): COO's
 * `uq` and `uqq`, not `uc` or `us`. */
static bool tuples_unique(const tj_format *f) {
  int deepest = -1;
  for (int l = 0; l < f->order; l++)
    if (!lv_at(f, l, LV_UNIQUE)) deepest = l;
  if (deepest < 0 || deepest == f->order - 1) return deepest < 0;
  for (int l = deepest + 1; l < f->order; l++)
    if (!lv_at(f, l, LV_BRANCHLESS)) return false;
  return true;
}

/* A nonunique level is walked by runs of equal coordinates, and so is a
 * singleton under such a run (the runs of equal (i, j) of `uqq`), except
 * the last level of a format whose tuples are unique: its coordinates
 * differ within the run, and COO's `uq` walks its columns one position at
 * a time. */
bool lw_level_segmented(const tj_format *f, int l) {
  if (!lv_at(f, l, LV_UNIQUE)) return true;
  if (!lv_at(f, l, LV_BRANCHLESS) || l == 0 || !lw_level_segmented(f, l - 1)) return false;
  return !(l == f->order - 1 && tuples_unique(f));
}

const int64_t *lw_slice(const Lowerer *lw, int x, int l) {
  const tj_format *f = lw->acc[x].f;
  if (l < 0 || l >= f->order || f->ndims) return NULL;
  const int64_t *sl = f->slice[f->mode_order[l]];
  return sl[2] ? sl : NULL;
}

LirExpr *lw_slice_value(Lowerer *lw, int x, int l, int c) {
  const tj_format *f = lw->acc[x].f;
  int d = f->mode_order[l];
  int64_t v = f->slice[d][c];
  return v == TJ_SLICE_DYNAMIC ? lw_ref(lw, lw->slice_val[lw->acc[x].t][d][c]) : lw_i64(lw, v);
}

bool lw_slice_filtered(const Lowerer *lw, int x, int l) {
  const tj_format *f = lw->acc[x].f;
  const int64_t *sl = lw_slice(lw, x, l);
  return sl && !lv_at(f, l, LV_FULL) &&   /* a dynamic stride may be > 1 */
         (sl[2] != 1 || !lv_at(f, l, LV_ORDERED) || !lv_at(f, l, LV_HAS_POS));
}

bool lw_access_sliced(const Lowerer *lw, int x) {
  for (int l = 0; l < lw->acc[x].f->order; l++)
    if (lw_slice(lw, x, l) && !lv_at(lw->acc[x].f, l, LV_FULL)) return true;
  return false;
}

LirExpr *lw_locate(Lowerer *lw, int x, int l, LirExpr *parent, LirExpr *c) {
  const int64_t *sl = lw_slice(lw, x, l);
  if (sl && sl[2] != 1) c = lir_bin(lw->a, LOP_MUL, c, lw_slice_value(lw, x, l, 2));
  if (sl && sl[0]) c = lir_bin(lw->a, LOP_ADD, c, lw_slice_value(lw, x, l, 0));
  if (!parent) return c;
  return lir_bin(lw->a, LOP_ADD, lir_bin(lw->a, LOP_MUL, parent, lw_level_size(lw, x, l)), c);
}

LirExpr *lw_coord_at(Lowerer *lw, int x, int l, LirExpr *p) {
  LirExpr *c = lw_load_index(lw, lw->crd_ptr[lw->acc[x].t][l], p);
  const int64_t *sl = lw_slice(lw, x, l);
  if (sl && sl[0]) c = lir_bin(lw->a, LOP_SUB, c, lw_slice_value(lw, x, l, 0));
  if (sl && sl[2] != 1) c = lir_bin(lw->a, LOP_DIV, c, lw_slice_value(lw, x, l, 2));
  return c;
}

LirExpr *lw_slice_valid(Lowerer *lw, int x, int l, LirExpr *p) {
  Arena *a = lw->a;
  const int64_t *sl = lw_slice(lw, x, l);
  LirExpr *raw = lw_load_index(lw, lw->crd_ptr[lw->acc[x].t][l], p);
  LirExpr *rel = lir_bin(a, LOP_SUB, raw, lw_slice_value(lw, x, l, 0));
  LirExpr *span = sl[1] != TJ_SLICE_DYNAMIC && sl[2] != TJ_SLICE_DYNAMIC
                      ? lw_i64(lw, sl[1] * sl[2])
                      : lir_bin(a, LOP_MUL, lw_slice_value(lw, x, l, 1), lw_slice_value(lw, x, l, 2));
  LirExpr *in = lir_bin(a, LOP_AND, lir_bin(a, LOP_GE, rel, lw_i64(lw, 0)),
                        lir_bin(a, LOP_LT, rel, span));
  if (sl[2] == 1) return in;
  LirExpr *on = lir_bin(a, LOP_EQ, lir_bin(a, LOP_REM, rel, lw_slice_value(lw, x, l, 2)),
                        lw_i64(lw, 0));
  /* an ordered compressed level's iterator starts and ends inside the
   * slice (lw_slice_bounds): only the stride is left to check */
  if (lv_at(lw->acc[x].f, l, LV_ORDERED | LV_HAS_POS)) return on;
  return lir_bin(a, LOP_AND, in, on);
}

/* Emits: more = p < end; while (more) { if (valid(p)) more = 0;
 *        else { p += 1; more = p < end; } } */
LirStmt *lw_slice_skip(Lowerer *lw, int x, int l, LirVar *p, LirVar *end) {
  if (!lw_slice_filtered(lw, x, l)) return NULL;
  Arena *a = lw->a;
  LirVar *more = lw_var(lw, "more", LT_BOOL);
  LirExpr *in = lir_bin(a, LOP_LT, lw_ref(lw, p), lw_ref(lw, end));
  LirStmt *s = lir_decl(a, more, in);
  LirStmt *step = lir_update(a, p, LOP_ADD, lw_i64(lw, 1));
  lir_append(&step, lir_assign(a, more, lir_bin(a, LOP_LT, lw_ref(lw, p), lw_ref(lw, end))));
  LirStmt *stop = lir_assign(a, more, lir_const_int(a, LT_BOOL, 0));
  lir_append(&s, lir_while(a, lw_ref(lw, more),
                           lir_if(a, lw_slice_valid(lw, x, l, lw_ref(lw, p)), stop, step)));
  return s;
}

/* Emits lo = the first position in [lo, hi) whose raw coordinate is >= c:
 *   b = hi; while (lo < b) { m = (lo + b) / 2; lt = crd[m] < c;
 *                            lo = lt ? m + 1 : lo; b = lt ? b : m; } */
static LirStmt *lower_bound(Lowerer *lw, int x, int l, LirVar *lo, LirExpr *hi, LirExpr *c) {
  Arena *a = lw->a;
  LirVar *b = lw_var(lw, "sl_hi", LT_I64), *m = lw_var(lw, "sl_mid", LT_I64);
  LirVar *lt = lw_var(lw, "sl_lt", LT_BOOL);
  LirStmt *s = lir_decl(a, b, hi);
  LirStmt *body = lir_decl(a, m, lir_bin(a, LOP_DIV, lir_bin(a, LOP_ADD, lw_ref(lw, lo),
                                                          lw_ref(lw, b)), lw_i64(lw, 2)));
  LirExpr *raw = lw_load_index(lw, lw->crd_ptr[lw->acc[x].t][l], lw_ref(lw, m));
  lir_append(&body, lir_decl(a, lt, lir_bin(a, LOP_LT, raw, c)));
  lir_append(&body, lir_assign(a, lo, lir_select(a, lw_ref(lw, lt),
                                                 lir_bin(a, LOP_ADD, lw_ref(lw, m), lw_i64(lw, 1)),
                                                 lw_ref(lw, lo))));
  lir_append(&body, lir_assign(a, b, lir_select(a, lw_ref(lw, lt), lw_ref(lw, b), lw_ref(lw, m))));
  lir_append(&s, lir_while(a, lir_bin(a, LOP_LT, lw_ref(lw, lo), lw_ref(lw, b)), body));
  return s;
}

LirStmt *lw_slice_bounds(Lowerer *lw, int x, int l, LirVar *p, LirVar *end) {
  const tj_format *f = lw->acc[x].f;
  const int64_t *sl = lw_slice(lw, x, l);
  if (!sl || lv_at(f, l, LV_FULL)) return NULL;
  LirStmt *s = NULL;
  if (lv_at(f, l, LV_ORDERED | LV_HAS_POS)) {
    /* p = first coordinate >= o; end = first >= o + (n-1)*s + 1 (from p) */
    LirVar *e = lw_var(lw, "sl_end", LT_I64);
    if (sl[0])   /* all are >= 0 */
      s = lower_bound(lw, x, l, p, lw_ref(lw, end), lw_slice_value(lw, x, l, 0));
    lir_append(&s, lir_decl(lw->a, e, lw_ref(lw, p)));
    bool dyn = sl[0] == TJ_SLICE_DYNAMIC || sl[1] == TJ_SLICE_DYNAMIC || sl[2] == TJ_SLICE_DYNAMIC;
    LirExpr *last;
    if (!dyn) {
      last = lw_i64(lw, sl[1] ? sl[0] + (sl[1] - 1) * sl[2] + 1 : sl[0]);
    } else {   /* o + (n-1)*s + 1, which is <= o (an empty range) when n = 0 */
      Arena *a = lw->a;
      LirExpr *n1 = lir_bin(a, LOP_SUB, lw_slice_value(lw, x, l, 1), lw_i64(lw, 1));
      last = lir_bin(a, LOP_ADD, lir_bin(a, LOP_ADD, lw_slice_value(lw, x, l, 0),
                                         lir_bin(a, LOP_MUL, n1, lw_slice_value(lw, x, l, 2))),
                     lw_i64(lw, 1));
    }
    lir_append(&s, lower_bound(lw, x, l, e, lw_ref(lw, end), last));
    lir_append(&s, lir_assign(lw->a, end, lw_ref(lw, e)));
  }
  lir_append(&s, lw_slice_skip(lw, x, l, p, end));
  return s;
}

int lw_out_run_start(const tj_format *f, int l) {
  int k = l;
  while (k > 0 && lv_at(f, k, LV_BRANCHLESS)) k--;
  bool in_run = k < l || (l + 1 < f->order && lv_at(f, l + 1, LV_BRANCHLESS));
  return in_run && lv_at(f, k, LV_HAS_POS) && !lv_at(f, k, LV_UNIQUE) ? k : l;
}

bool lw_out_in_run(const tj_format *f, int l) {
  if (lw_out_run_start(f, l) < l) return true;
  return lv_at(f, l, LV_HAS_POS) && !lv_at(f, l, LV_UNIQUE) && l + 1 < f->order &&
         lv_at(f, l + 1, LV_BRANCHLESS);
}

bool lw_output_level_ok(const tj_format *f, int l) {
  if (lv_at(f, l, LV_INSERT) || lv_at(f, l, LV_APPEND | LV_UNIQUE | LV_HAS_POS)) return true;
  if (lv_at(f, l, LV_APPEND | LV_HAS_POS) && !lw_out_in_run(f, l))
    return true; /* a nonunique level outside a COO run (`du`, `us`, `ud`): written
                    with unique coordinates, valid storage of it */
  if (!lv_at(f, l, LV_APPEND) || !lw_out_in_run(f, l)) return false;
  for (int k = l + 1; k < f->order; k++) /* the run reaches the last level */
    if (!lv_at(f, k, LV_BRANCHLESS)) return false;
  return true;
}

bool lw_out_concat_ok(const tj_format *f) {
  for (int l = 1; l < f->order; l++)
    if (!lv_at(f, l, LV_HAS_POS | LV_UNIQUE)) return false;
  return f->order > 0 && lv_at(f, 0, LV_FULL);
}

int lw_out_leaf(const tj_format *f) {
  int leaf = -1;
  for (int l = 0; l < f->order; l++)
    if (!lv_at(f, l, LV_FULL)) leaf = l;
  return leaf;
}

int lw_out_next_appended(const tj_format *f, int l) {
  for (int k = l + 1; k < f->order; k++)
    if (lv_at(f, k, LV_HAS_POS)) return k;
    else if (!lv_at(f, k, LV_FULL)) return -1;
  return -1;
}

bool lw_out_dense_tail(const tj_format *f) {
  int leaf = lw_out_leaf(f);
  return leaf >= 0 && leaf < f->order - 1;
}

LirExpr *lw_out_block(Lowerer *lw) {
  LirExpr *n = NULL;
  for (int l = lw->out_last + 1; l < lw->acc[0].f->order; l++) {
    LirExpr *size = lw_level_size(lw, 0, l);
    n = n ? lir_bin(lw->a, LOP_MUL, n, size) : size;
  }
  return n;
}

LirExpr *lw_out_vals(Lowerer *lw, LirExpr *n) {
  LirExpr *block = lw_out_block(lw);
  return block ? lir_bin(lw->a, LOP_MUL, n, block) : n;
}

LirStmt *lw_out_block_init(Lowerer *lw, LirExpr *p) {
  LirExpr *block = lw_out_block(lw);
  if (!block || !lw->emit_values) return NULL;
  LirExpr *lo = lir_bin(lw->a, LOP_MUL, p, block);
  LirExpr *hi = lir_bin(lw->a, LOP_ADD, lw_out_vals(lw, p), lw_out_block(lw));
  return lw_fill(lw, lw->vals_ptr[0], lo, hi, lw->out_init);
}

void lw_pos_bounds(Lowerer *lw, int x, int l, LirExpr *pp, LirExpr **lo, LirExpr **hi) {
  const tj_format *f = lw->acc[x].f;
  if (lw_slice(lw, x, l) && !lv_at(f, l, LV_FULL) && !lw->slice_bounded)
    diag_error(lw->d, TJ_ERR_UNSUPPORTED, "%s's sliced level %d is walked by a loop form "
               "(a position split, fuse or parallel chunk by positions) that does not "
               "narrow its segments to the slice; drop that schedule or convert the view",
               lw->acc[x].e->u.access.t->name, l);
  if (lv_at(f, l, LV_HAS_POS)) {
    LirVar *pos = lw->pos_ptr[lw->acc[x].t][l];
    if (!lv_at(f, l, LV_COMPACT)) pp = lir_bin(lw->a, LOP_MUL, pp, lw_i64(lw, 2));
    *lo = lw_load_index(lw, pos, pp);
    *hi = lw_load_index(lw, pos, lir_bin(lw->a, LOP_ADD, pp, lw_i64(lw, 1)));
  } else if (lv_at(f, l, LV_FIXED_SEG)) {
    *lo = lir_bin(lw->a, LOP_MUL, pp, lw_i64(lw, f->lvl_n[l]));
    *hi = lir_bin(lw->a, LOP_ADD, lir_bin(lw->a, LOP_MUL, pp, lw_i64(lw, f->lvl_n[l])),
                  lw_i64(lw, f->lvl_n[l]));
  } else if (l > 0 && lw_level_segmented(f, l - 1)) {
    *lo = pp;
    *hi = lw_ref(lw, lw->seg_end[x]);
    lw_seg_end_read(lw, x);
  } else {
    *lo = pp;
    *hi = lir_bin(lw->a, LOP_ADD, pp, lw_i64(lw, 1));
  }
}

bool lw_index_window(const Lowerer *lw, const IndexVar *v, LwWindow *out) {
  for (int x = 0; x < lw->nacc; x++) {
    const tj_format *f = lw->acc[x].f;
    if (!lw->acc[x].e || lw->acc[x].e->kind != EX_ACCESS) continue;
    for (int l = 0; l < f->order; l++) {
      const tj_window *w = &f->win[l];
      if (!w->block || lw->acc[x].e->u.access.idx[f->mode_order[l]] != v) continue;
      const IndexVar *b = lw->acc[x].e->u.access.idx[f->mode_order[w->block - 1]];
      bool above = lw->depth_of[b->id] < lw->depth_of[v->id];
      *out = (LwWindow){.w = w, .block = above ? lw->coord[b->id] : NULL};
      return true;
    }
  }
  return false;
}

/* Emits, for block coordinate b, stride s and t = lead - b * k:
 *   lo = s == 1 ? max(t, 0) : t >= 0 ? t : (t % s ? t % s + s : 0);
 *   hi = min(k, t + (size - 1) * s + 1);
 * the first coordinate of the block on the view's stride, and the end. */
static LirStmt *window_bounds(Lowerer *lw, const LwWindow *win, LirVar *lo, LirVar *hi) {
  Arena *a = lw->a;
  const tj_window *w = win->w;
  LirVar *t = lw_var(lw, arena_printf(a, "%s_t", lo->name), LT_I64);
  LirExpr *bk = lir_bin(a, LOP_MUL, lw_ref(lw, win->block), lw_i64(lw, w->k));
  LirStmt *s = lir_decl(a, t, lir_bin(a, LOP_SUB, lw_i64(lw, w->lead), bk));
  LirExpr *first;
  if (w->stride == 1) {
    first = lir_bin(a, LOP_MAX, lw_ref(lw, t), lw_i64(lw, 0));
  } else {
    LirExpr *r = lir_bin(a, LOP_REM, lw_ref(lw, t), lw_i64(lw, w->stride));
    LirExpr *up = lir_select(a, lir_bin(a, LOP_NE, r, lw_i64(lw, 0)),
                             lir_bin(a, LOP_ADD, r, lw_i64(lw, w->stride)), lw_i64(lw, 0));
    first = lir_select(a, lir_bin(a, LOP_GE, lw_ref(lw, t), lw_i64(lw, 0)), lw_ref(lw, t), up);
  }
  lir_append(&s, lir_decl(a, lo, first));
  LirExpr *end = lir_bin(a, LOP_ADD, lw_ref(lw, t),
                         lw_i64(lw, (w->size - 1) * w->stride + 1));
  lir_append(&s, lir_decl(a, hi, lir_bin(a, LOP_MIN, lw_i64(lw, w->k), end)));
  return s;
}

LirStmt *lw_window_loop(Lowerer *lw, const LwWindow *win, const char *name, LwLoopBody body,
                        void *ctx, LirStmt **full, LirStmt **edge) {
  Arena *a = lw->a;
  const tj_window *w = win->w;
  LirVar *lo = lw_var(lw, arena_printf(a, "%s_lo", name), LT_I64);
  LirVar *hi = lw_var(lw, arena_printf(a, "%s_hi", name), LT_I64);
  LirStmt *s = window_bounds(lw, win, lo, hi);
  LirVar *iv = lw_var(lw, name, LT_I64);
  *edge = lir_for(a, iv, lw_ref(lw, lo), lw_ref(lw, hi), body(lw, ctx, iv));
  if (w->stride != 1) (*edge)->u.loop.step = lw_i64(lw, w->stride);
  *full = NULL;
  if (w->stride != 1 || w->size < w->k || win->edge) {   /* no block is whole */
    lir_append(&s, *edge);
    return lir_block(a, s);
  }
  LirVar *fv = lw_var(lw, name, LT_I64);
  *full = lir_for(a, fv, lw_i64(lw, 0), lw_i64(lw, w->k), body(lw, ctx, fv));
  LirExpr *whole = lir_bin(a, LOP_AND, lir_bin(a, LOP_EQ, lw_ref(lw, lo), lw_i64(lw, 0)),
                           lir_bin(a, LOP_EQ, lw_ref(lw, hi), lw_i64(lw, w->k)));
  lir_append(&s, lir_if(a, whole, *full, *edge));
  return lir_block(a, s);
}

LirExpr *lw_window_valid(Lowerer *lw, const LwWindow *win, const char *name, LirExpr *c,
                         LirStmt **s) {
  Arena *a = lw->a;
  LirVar *lo = lw_var(lw, arena_printf(a, "%s_lo", name), LT_I64);
  LirVar *hi = lw_var(lw, arena_printf(a, "%s_hi", name), LT_I64);
  lir_append(s, window_bounds(lw, win, lo, hi));
  LirExpr *in = lir_bin(a, LOP_AND, lir_bin(a, LOP_GE, c, lw_ref(lw, lo)),
                        lir_bin(a, LOP_LT, c, lw_ref(lw, hi)));
  if (win->w->stride == 1) return in;
  LirExpr *off = lir_bin(a, LOP_REM, lir_bin(a, LOP_SUB, c, lw_ref(lw, lo)),
                         lw_i64(lw, win->w->stride));
  return lir_bin(a, LOP_AND, in, lir_bin(a, LOP_EQ, off, lw_i64(lw, 0)));
}

bool lw_window_edges(const Lowerer *lw, const IndexVar *b, LwEdges *out) {
  for (int x = 0; x < lw->nacc; x++) {
    const tj_format *f = lw->acc[x].f;
    if (!lw->acc[x].e || lw->acc[x].e->kind != EX_ACCESS) continue;
    for (int l = 0; l < f->order; l++) {
      const tj_window *w = &f->win[l];
      IndexVar *const *idx = lw->acc[x].e->u.access.idx;
      if (!w->block || w->stride != 1 || idx[f->mode_order[w->block - 1]] != b) continue;
      int64_t end = w->lead + w->size, nb = (end - 1) / w->k + 1;   /* size > 0: cut */
      *out = (LwEdges){.inner = idx[f->mode_order[l]], .nb = nb,
                       .first = w->lead > 0 || (nb == 1 && end < w->k),
                       .last = nb > 1 && end % w->k != 0};
      return true;
    }
  }
  return false;
}
