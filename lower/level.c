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

LirExpr *lw_locate(Lowerer *lw, int x, int l, LirExpr *parent, LirExpr *c) {
  if (!parent) return c;
  return lir_bin(lw->a, LOP_ADD, lir_bin(lw->a, LOP_MUL, parent, lw_level_size(lw, x, l)), c);
}

LirExpr *lw_coord_at(Lowerer *lw, int x, int l, LirExpr *p) {
  return lw_load_index(lw, lw->crd_ptr[lw->acc[x].t][l], p);
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
