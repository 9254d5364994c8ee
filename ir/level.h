/* Level types: what each letter of tj_format.levels means, as one table.
 *
 * A level type is a name and one word of properties (TACO's mode-format
 * capabilities, MLIR's LevelType predicates). Every layer that needs to know
 * what a level can do (the checker, the lowering, the driver) asks these
 * questions, never the letter; only this table and the format parser
 * (runtime/format.c) know the letters. The level functions that emit loop IR
 * for a type live in lower/level.c.
 */
#ifndef TJ_IR_LEVEL_H
#define TJ_IR_LEVEL_H

#include <stdbool.h>

#include "../include/tensorjit.h"

enum {
  LV_FULL = 1u << 0,       /* every coordinate of the extent is stored */
  LV_ORDERED = 1u << 1,    /* coordinates ascend within a segment */
  LV_UNIQUE = 1u << 2,     /* no coordinate twice within a segment */
  LV_BRANCHLESS = 1u << 3, /* one child per parent position (singleton) */
  LV_COMPACT = 1u << 4,    /* positions are dense in 0..n */
  LV_LOCATE = 1u << 5,     /* position of a coordinate by arithmetic */
  LV_INSERT = 1u << 6,     /* written by locating (dense outputs) */
  LV_APPEND = 1u << 7,     /* written by appending coordinates (in order
                              where LV_ORDERED, else as they come) */
  LV_HAS_POS = 1u << 8,    /* a pos array: pos[p] .. pos[p+1] is segment p */
  LV_HAS_CRD = 1u << 9,    /* a crd array: crd[q] is the coordinate at q */
  LV_FIXED_SEG = 1u << 10  /* n positions per parent (n_out_of_m): segment p
                              is p*n .. p*n+n, n = tj_format.lvl_n */
};

typedef struct LevelType {
  char letter;       /* in tj_format.levels */
  const char *name;  /* "compressed", as the long format syntax spells it */
  unsigned props;    /* LV_* */
  char ordered;      /* the letter of the same level with LV_ORDERED: what an
                        operand stored without order is converted to */
  char written;      /* the letter a kernel writes for it in an output (itself,
                        or a stand-in converted into it after each run) */
  char unique;       /* the letter of the same level with LV_UNIQUE: what a
                        nonunique level over a level with fibers of its own
                        is read as (its runs' fibers merged, lv_make_runs_unique) */
} LevelType;

/* The type of level l of f (f->levels[l] must be a letter the format
 * parser accepts). The result is static. */
const LevelType *lv_of(const tj_format *f, int l);
/* The format a kernel writes for output format f into *out: each level's
 * `written` letter. Whether that differs from f (the output then runs on a
 * stand-in of format *out, converted into f after each run). */
bool lv_output_standin(const tj_format *f, tj_format *out);
/* Whether lt has every property in props. */
bool lv_has(const LevelType *lt, unsigned props);
/* Whether level l of f has every property in props. */
bool lv_at(const tj_format *f, int l, unsigned props);
/* f with every level that is not ordered replaced by its ordered
 * counterpart (LevelType.ordered); true if one was. */
bool lv_make_ordered(tj_format *f);
/* Whether level l of f is a compressed-nonunique level whose runs would
 * own several fibers each: a dense or compressed level is below it (`us`,
 * `ud`, `ws`), not a singleton (COO's `uq`) and not nothing (`du`). */
bool lv_runs_own_fibers(const tj_format *f, int l);
/* f with every level lv_runs_own_fibers names replaced by its unique
 * counterpart (LevelType.unique: `us` -> `ss`); the first such level, or -1
 * (f unchanged). */
int lv_make_runs_unique(tj_format *f);
/* Whether f has dimSlices or block windows (a view's format), and f
 * without them (the format of a converted copy). */
bool lv_format_sliced(const tj_format *f);
void lv_format_unslice(tj_format *f);
/* Whether some level of f is not full (a sparse tensor). */
bool lv_format_has_sparse(const tj_format *f);

#endif
