/* The loop list a schedule is applied to (ir/cin.c builds the foralls from
 * it), and the loop rewrites of ir/cin_loops.c: split, divide, pos and
 * bound, the names they give the halves of a loop, and reorder,
 * parallelize, vectorize and unroll through those names. Internal to ir/. */
#ifndef TJ_IR_CIN_LOOPS_H
#define TJ_IR_CIN_LOOPS_H

#include "notation.h"

typedef struct Loops {
  int n;
  IndexVar *iv[NT_MAX_INDICES];
  unsigned flags[NT_MAX_INDICES];
  int vec_width[NT_MAX_INDICES];
  int unroll[NT_MAX_INDICES];
  int par[NT_MAX_INDICES];
  CinLoopForm form[NT_MAX_INDICES];
} Loops;

/* Which loop a name of a schedule names: an index, its pos() or bound()
 * name (the whole loop), or one half of its split() or divide(). */
typedef enum { PART_WHOLE, PART_OUTER, PART_INNER } LoopPart;

/* The slot of the loop that name names (and which part of it), or -1. */
int loops_find(const Loops *l, const char *name, LoopPart *part);

/* Applies one split / divide / pos / bound directive to l; false with d
 * set when it is refused. */
bool loops_rewrite(Loops *l, const Assignment *as, const Schedule *s,
                   const SchedDirective *sd, Diag *d);

/* reorder(...) by any names: the halves of a split loop must be given
 * together, outer first (the loop is strip-mined in place). */
bool loops_reorder(Loops *l, const Schedule *s, const SchedDirective *sd, Diag *d);

/* parallelize / vectorize / unroll of a named loop; false with d set. */
bool loops_flag(Loops *l, const Schedule *s, const SchedDirective *sd, Diag *d);

/* "unknown index" at the directive's column. */
bool loops_unknown(const Loops *l, const Schedule *s, const SchedDirective *sd, Diag *d,
                   const char *what, const char *name);

#endif
