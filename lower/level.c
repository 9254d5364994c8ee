/* Level functions of the lowering: what the loops emit for a level, asked
 * of its type's properties (ir/level.h), never of its letter.
 *   position bounds of the segment under parent position p:
 *     compressed (LV_HAS_POS)           pos[p] .. pos[p+1]
 *     singleton under a segmented level p .. seg_end (the parent's run)
 *     singleton                         p .. p+1
 * A new level type adds its row to ir/level.c and, if its positions are
 * found differently, a case here.
 */
#include "lowerer.h"

bool lw_is_sparse_level(const Lowerer *lw, int x, int level) {
  return !lv_at(lw->acc[x].f, level, LV_FULL);
}

bool lw_level_segmented(const tj_format *f, int l) {
  if (!lv_at(f, l, LV_UNIQUE)) return true;
  return lv_at(f, l, LV_BRANCHLESS) && l > 0 && lw_level_segmented(f, l - 1);
}

bool lw_output_level_ok(const LevelType *lt) {
  return lv_has(lt, LV_INSERT) || lv_has(lt, LV_APPEND | LV_UNIQUE | LV_HAS_POS);
}

void lw_pos_bounds(Lowerer *lw, int x, int l, LirExpr *pp, LirExpr **lo, LirExpr **hi) {
  const tj_format *f = lw->acc[x].f;
  if (lv_at(f, l, LV_HAS_POS)) {
    LirVar *pos = lw->pos_ptr[lw->acc[x].t][l];
    *lo = lw_load_index(lw, pos, pp);
    *hi = lw_load_index(lw, pos, lir_bin(lw->a, LOP_ADD, pp, lw_i64(lw, 1)));
  } else if (l > 0 && lw_level_segmented(f, l - 1)) {
    *lo = pp;
    *hi = lw_ref(lw, lw->seg_end[x]);
  } else {
    *lo = pp;
    *hi = lir_bin(lw->a, LOP_ADD, pp, lw_i64(lw, 1));
  }
}
