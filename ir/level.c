/* The table of level types (ir/level.h). Adding a level type adds a row
 * here, its storage in runtime/ and its letter in runtime/format.c's
 * parser; the lowering asks its properties and lower/level.c emits its
 * level functions. */
#include <string.h>

#include "level.h"

static const LevelType level_types[] = {
  {'d', "dense",
    LV_FULL | LV_ORDERED | LV_UNIQUE | LV_COMPACT | LV_LOCATE | LV_INSERT, 'd', 'd', 'd'},
  {'s', "compressed",
    LV_ORDERED | LV_UNIQUE | LV_COMPACT | LV_APPEND | LV_HAS_POS | LV_HAS_CRD, 's', 's', 's'},
  {'u', "compressed(nonunique)",
    LV_ORDERED | LV_COMPACT | LV_APPEND | LV_HAS_POS | LV_HAS_CRD, 'u', 'u', 's'},
  {'o', "compressed(nonordered)",
    LV_UNIQUE | LV_COMPACT | LV_APPEND | LV_HAS_POS | LV_HAS_CRD, 's', 'o', 'o'},
  /* unsorted COO's row level: runs of equal coordinates need order, so an
   * operand with it is always converted (to 'u'; to 's' where its runs own
   * fibers: `ws`) */
  {'w', "compressed(nonunique, nonordered)",
    LV_COMPACT | LV_APPEND | LV_HAS_POS | LV_HAS_CRD, 'u', 'w', 'o'},
  {'q', "singleton",
    LV_ORDERED | LV_UNIQUE | LV_BRANCHLESS | LV_COMPACT | LV_APPEND | LV_HAS_CRD, 'q', 'q', 'q'},
  {'c', "singleton(nonunique)",
    LV_ORDERED | LV_BRANCHLESS | LV_COMPACT | LV_APPEND | LV_HAS_CRD, 'c', 'c', 'c'},
  /* coordinates in any order under a run of equal parents (unsorted COO) */
  {'z', "singleton(nonordered)",
    LV_UNIQUE | LV_BRANCHLESS | LV_COMPACT | LV_APPEND | LV_HAS_CRD, 'q', 'z', 'z'},
  /* lo and hi per segment (pos[2p], pos[2p+1]): not compact, not appended */
  {'l', "loose_compressed", LV_ORDERED | LV_UNIQUE | LV_HAS_POS | LV_HAS_CRD, 'l', 's', 'l'},
  /* n of every block of m (2:4): n coordinates per parent, no pos array */
  {'n', "n_out_of_m",
    LV_ORDERED | LV_UNIQUE | LV_COMPACT | LV_FIXED_SEG | LV_HAS_CRD, 'n', 'n', 'n'},
};

const LevelType *lv_of(const tj_format *f, int l) {
  int n = (int)(sizeof level_types / sizeof level_types[0]);
  for (int i = 0; i < n; i++)
    if (level_types[i].letter == f->levels[l]) return &level_types[i];
  return &level_types[0]; /* unreachable for a format the parser accepted */
}

bool lv_output_standin(const tj_format *f, tj_format *out) {
  *out = *f;
  bool changed = false;
  for (int l = 0; l < f->order; l++) {
    out->levels[l] = lv_of(f, l)->written;
    changed |= out->levels[l] != f->levels[l];
  }
  return changed;
}

bool lv_has(const LevelType *lt, unsigned props) { return (lt->props & props) == props; }

bool lv_at(const tj_format *f, int l, unsigned props) { return lv_has(lv_of(f, l), props); }

bool lv_format_sliced(const tj_format *f) {
  for (int d = 0; d < TJ_MAX_ORDER_PUBLIC; d++)
    if (f->slice[d][2] || f->win[d].block) return true;
  return false;
}

void lv_format_unslice(tj_format *f) {
  memset(f->slice, 0, sizeof f->slice);
  memset(f->win, 0, sizeof f->win);
}

bool lv_make_ordered(tj_format *f) {
  bool changed = false;
  for (int l = 0; l < f->order; l++) {
    char c = lv_of(f, l)->ordered;
    changed |= c != f->levels[l];
    f->levels[l] = c;
  }
  return changed;
}

bool lv_runs_own_fibers(const tj_format *f, int l) {
  return lv_at(f, l, LV_HAS_POS) && !lv_at(f, l, LV_UNIQUE) && l + 1 < f->order &&
         !lv_at(f, l + 1, LV_BRANCHLESS);
}

int lv_make_runs_unique(tj_format *f) {
  int first = -1;
  for (int l = 0; l < f->order; l++) {
    if (!lv_runs_own_fibers(f, l)) continue;
    f->levels[l] = lv_of(f, l)->unique;   /* u -> s, w -> o: no singleton, so level l - 1
                                            keeps its answer */
    if (first < 0) first = l;
  }
  return first;
}

bool lv_format_has_sparse(const tj_format *f) {
  for (int l = 0; l < f->order; l++)
    if (!lv_at(f, l, LV_FULL)) return true;
  return false;
}
