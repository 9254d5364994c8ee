/* Loop rewrites of the concrete notation: split, divide, pos and bound
 * give a forall a CinLoopForm (how its one index is walked) and names for
 * what they make; reorder, parallelize, vectorize and unroll then name the
 * loops by those names (TACO's schedule, with the derived variables kept
 * on the loop they came from):
 *
 *   split(i, i0, i1, 32) parallelize(i0)
 *     forall(i, ...) -> forall(i0:parallel, forall(i1, ...))  i = 32*i0 + i1
 *   pos(j, jp, A(i,j)) split(jp, j0, j1, 8)
 *     forall(j, ...) -> forall(j0, forall(j1, ...))  j = A's crd[8*j0 + j1 + ...]
 *
 * A reorder may put loops between the halves of one split (TACO's SpMM
 * order i0, i1, j0, k, j1): the loop keeps its place as the inner half
 * and its outer half sits right above the loop named after it
 * (CinLoopForm.outer_at), which the lowering wraps in the loop over
 * blocks. A second split of a loop, a pos after a split and a name that
 * is already taken are refused.
 */
#include <string.h>

#include "cin_loops.h"

bool loops_unknown(const Loops *l, const Schedule *s, const SchedDirective *sd, Diag *d,
                   const char *what, const char *name) {
  for (int i = 0; i < l->n; i++) {
    const CinLoopForm *f = &l->form[i];
    if (f->fuse && (strcmp(l->iv[i]->name, name) == 0 || strcmp(f->fuse_inner->name, name) == 0))
      return diag_error(d, TJ_ERR_INVALID, "%s(%s): the loops of %s and %s are one loop "
                        "since fuse(%s, %s, %s); name %s", what, name, l->iv[i]->name,
                        f->fuse_inner->name, l->iv[i]->name, f->fuse_inner->name, f->fuse,
                        f->fuse);
  }
  if (s->src && sd->col > 0)
    return diag_error_at(d, TJ_ERR_INVALID, s->src, sd->col, "%s: unknown index '%s'", what,
                         name);
  return diag_error(d, TJ_ERR_INVALID, "%s: unknown index '%s'", what, name);
}

static bool named(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

int loops_find(const Loops *l, const char *name, LoopPart *part) {
  for (int i = 0; i < l->n; i++) {
    const CinLoopForm *f = &l->form[i];
    *part = PART_WHOLE;
    if ((!f->fuse && named(l->iv[i]->name, name)) || named(f->pos, name) ||
        named(f->bound_name, name) || named(f->fuse, name))
      return i;
    *part = PART_OUTER;
    if (named(f->outer, name)) return i;
    *part = PART_INNER;
    if (named(f->inner, name)) return i;
  }
  return -1;
}

/* Whether name is free for a new variable: no index of the assignment and
 * no loop's derived name. */
static bool fresh(const Loops *l, const Assignment *as, const char *name) {
  LoopPart part;
  if (loops_find(l, name, &part) >= 0) return false;
  for (int v = 0; v < as->nindices; v++)
    if (named(as->indices[v]->name, name)) return false;
  return true;
}

/* The access T(i1, ..., in) of e whose tensor and index names are vars[0..n). */
static const Expr *find_access(const Expr *e, const char *const *vars, int n) {
  if (e->kind == EX_ACCESS) {
    if (!named(e->u.access.t->name, vars[0]) || e->u.access.n != n - 1) return NULL;
    for (int m = 0; m < e->u.access.n; m++)
      if (!named(e->u.access.idx[m]->name, vars[m + 1])) return NULL;
    return e;
  }
  Expr *k[2];
  int nk = nt_children(e, k);
  for (int i = 0; i < nk; i++) {
    const Expr *x = find_access(k[i], vars, n);
    if (x) return x;
  }
  return NULL;
}

static const char *const REWRITE_NAMES[] = {
    [SCHED_SPLIT] = "split", [SCHED_DIVIDE] = "divide", [SCHED_POS] = "pos",
    [SCHED_BOUND] = "bound", [SCHED_FUSE] = "fuse"};

/* fuse(i, j, f): i's loop (unrewritten) with j's directly inside it
 * becomes one slot walking f; j's slot goes (unfuse in ir/cin.c puts it
 * back, marked fused, when the foralls are built). */
static bool fuse(Loops *l, const Assignment *as, const Schedule *s, const SchedDirective *sd,
                 Diag *d) {
  LoopPart part;
  int p = loops_find(l, sd->vars[0], &part), q = loops_find(l, sd->vars[1], &part);
  if (p < 0) return loops_unknown(l, s, sd, d, "fuse", sd->vars[0]);
  if (q < 0) return loops_unknown(l, s, sd, d, "fuse", sd->vars[1]);
  const CinLoopForm *fp = &l->form[p], *fq = &l->form[q];
  bool plain_p = !fp->split && !fp->divide && !fp->pos && !fp->bound_kind && !fp->fuse;
  bool plain_q = !fq->split && !fq->divide && !fq->pos && !fq->bound_kind && !fq->fuse;
  if (!plain_p || !plain_q || !named(l->iv[p]->name, sd->vars[0]) ||
      !named(l->iv[q]->name, sd->vars[1]))
    return diag_error(d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): only loops of indices that "
                      "no split, divide, pos, bound or fuse has rewritten are fused; fuse "
                      "first", sd->vars[0], sd->vars[1], sd->vars[2]);
  if (q != p + 1)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): the loop of %s must be "
                      "directly inside the loop of %s (reorder first)", sd->vars[0],
                      sd->vars[1], sd->vars[2], sd->vars[1], sd->vars[0]);
  if (!fresh(l, as, sd->vars[2]))
    return diag_error(d, TJ_ERR_INVALID, "fuse(%s, ...): the name %s is already taken",
                      sd->vars[0], sd->vars[2]);
  if (l->flags[q] || l->vec_width[q] || l->unroll[q] || l->par[q])
    return diag_error(d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): %s has a parallelize, "
                      "vectorize or unroll of its own; give it to %s after fusing",
                      sd->vars[0], sd->vars[1], sd->vars[2], sd->vars[1], sd->vars[2]);
  l->form[p].fuse = sd->vars[2];
  l->form[p].fuse_inner = l->iv[q];
  for (int k = q; k + 1 < l->n; k++) {
    l->iv[k] = l->iv[k + 1], l->flags[k] = l->flags[k + 1];
    l->vec_width[k] = l->vec_width[k + 1], l->unroll[k] = l->unroll[k + 1];
    l->par[k] = l->par[k + 1], l->form[k] = l->form[k + 1];
  }
  l->n--;
  return true;
}

bool loops_rewrite(Loops *l, const Assignment *as, const Schedule *s,
                   const SchedDirective *sd, Diag *d) {
  if (sd->kind == SCHED_FUSE) return fuse(l, as, s, sd, d);
  const char *what = REWRITE_NAMES[sd->kind];
  LoopPart part;
  int p = loops_find(l, sd->vars[0], &part);
  if (p < 0) return loops_unknown(l, s, sd, d, what, sd->vars[0]);
  CinLoopForm *f = &l->form[p];
  if (part != PART_WHOLE || f->split || f->divide)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "%s(%s, ...): the loop of %s is already split "
                      "(into %s and %s); one split or divide per loop", what, sd->vars[0],
                      l->iv[p]->name, f->outer, f->inner);
  int nnew = sd->kind == SCHED_SPLIT || sd->kind == SCHED_DIVIDE ? 2 : 1;
  for (int k = 1; k <= nnew; k++) {
    if (!fresh(l, as, sd->vars[k]))
      return diag_error(d, TJ_ERR_INVALID, "%s(%s, ...): the name %s is already taken", what,
                        sd->vars[0], sd->vars[k]);
    if (k == 2 && named(sd->vars[1], sd->vars[2]))
      return diag_error(d, TJ_ERR_INVALID, "%s(%s, ...): the two halves need two names", what,
                        sd->vars[0]);
  }
  switch (sd->kind) {
  case SCHED_SPLIT:
  case SCHED_DIVIDE:
    if (sd->kind == SCHED_SPLIT) f->split = sd->width;
    else f->divide = sd->width;
    f->outer = sd->vars[1];
    f->inner = sd->vars[2];
    return true;
  case SCHED_POS: {
    if (f->bound_kind)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "pos(%s, ...): the loop of %s is bounded; a "
                        "position loop has no fixed bound", sd->vars[0], l->iv[p]->name);
    const Expr *x = find_access(as->rhs, sd->vars + 2, sd->nvars - 2);
    bool uses = false, uses_inner = !f->fuse;
    for (int m = 0; x && m < x->u.access.n; m++) uses |= x->u.access.idx[m] == l->iv[p];
    for (int m = 0; x && f->fuse && m < x->u.access.n; m++)
      uses_inner |= x->u.access.idx[m] == f->fuse_inner;
    uses &= uses_inner;
    if (!x || !uses)
      return diag_error(d, TJ_ERR_INVALID, "pos(%s, %s, %s(...)): the right-hand side has no "
                        "access of %s that uses %s, written as given", sd->vars[0],
                        sd->vars[1], sd->vars[2], sd->vars[2], l->iv[p]->name);
    f->pos = sd->vars[1];
    f->pos_access = x;
    return true;
  }
  case SCHED_BOUND:
    if (f->fuse)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "bound(%s, ...): %s is a fused loop (over the "
                        "product of two extents); bound the loops before fusing them",
                        sd->vars[0], sd->vars[0]);
    if (f->pos)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "bound(%s, ...): %s walks positions (pos); "
                        "only a coordinate loop is bounded", sd->vars[0], sd->vars[0]);
    if (named(sd->arg, "min_exact") || named(sd->arg, "min_constraint"))
      return diag_error(d, TJ_ERR_UNSUPPORTED, "bound(%s, %s, %d, %s): a loop starts at 0, so "
                        "a lower bound of %d would leave out its first iterations; bounds are "
                        "max_exact (the extent is %d) or max_constraint (at most %d)",
                        sd->vars[0], sd->vars[1], sd->width, sd->arg, sd->width, sd->width,
                        sd->width);
    if (!named(sd->arg, "max_exact") && !named(sd->arg, "max_constraint"))
      return diag_error(d, TJ_ERR_PARSE, "bound(%s, %s, %d, %s): unknown bound kind (max_exact, "
                        "max_constraint, min_exact or min_constraint)", sd->vars[0],
                        sd->vars[1], sd->width, sd->arg);
    f->bound_name = sd->vars[1];
    f->bound = sd->width;
    f->bound_kind = named(sd->arg, "max_exact") ? BOUND_MAX_EXACT : BOUND_MAX_CONSTRAINT;
    return true;
  default: return TJ_BUG(d, "not a loop rewrite");
  }
}

/* The outer half of split loop p named at position k of the reorder, with
 * other loops before its inner half: it will sit right above the loop
 * named next (form->outer_at); false with d set when that is not a loop. */
static bool hoist_outer(Loops *l, const Schedule *s, const SchedDirective *sd, int k, int p,
                        Diag *d) {
  CinLoopForm *f = &l->form[p];
  LoopPart part;
  int q = k + 1 < sd->nvars ? loops_find(l, sd->vars[k + 1], &part) : -1;
  if (k + 1 >= sd->nvars)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: %s, the outer half of the split of %s, "
                      "must come before its inner half %s", f->outer, l->iv[p]->name, f->inner);
  if (q < 0) return loops_unknown(l, s, sd, d, "reorder", sd->vars[k + 1]);
  if (q == p || part == PART_INNER)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: the loop after %s must be a loop of its "
                      "own, not the inner half of another split", f->outer);
  for (int i = 0; i < l->n; i++)
    if (i != p && l->form[i].outer_at == l->iv[q])
      return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: two outer halves (%s and %s) above "
                        "the loop of %s; one is lowered", l->form[i].outer, f->outer,
                        l->iv[q]->name);
  if (f->fuse)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: %s splits the fused loop %s; its "
                      "halves stay together", f->outer, f->fuse);
  if (l->flags[p] & CIN_PARALLEL && f->par_outer)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: %s runs in parallel and cannot move "
                      "away from its inner half %s", f->outer, f->inner);
  f->outer_at = l->iv[q];
  return true;
}

bool loops_reorder(Loops *l, const Schedule *s, const SchedDirective *sd, Diag *d) {
  int slot[NT_MAX_INDICES], n = 0;
  int open = -1;   /* a split loop whose outer half was named, not yet its inner */
  for (int k = 0; k < sd->nvars; k++) {
    LoopPart part;
    int p = loops_find(l, sd->vars[k], &part);
    if (p < 0) return loops_unknown(l, s, sd, d, "reorder", sd->vars[k]);
    CinLoopForm *f = &l->form[p];
    if (part == PART_INNER && open != p)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: %s is the inner half of the split "
                        "of %s; it must come after %s", sd->vars[k], l->iv[p]->name,
                        f->outer);
    if (part == PART_INNER) open = -1;
    if (part == PART_OUTER) {
      if (open >= 0)
        return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: %s comes before the inner half of "
                          "%s (%s); one split's halves may have loops between them at a time",
                          f->outer, l->form[open].outer, l->form[open].inner);
      if (k + 1 < sd->nvars && named(sd->vars[k + 1], f->inner)) {
        f->outer_at = NULL;
        k++;
      } else {
        if (!hoist_outer(l, s, sd, k, p, d)) return false;
        open = p;
        continue;   /* its slot is taken where the inner half is named */
      }
    }
    for (int j = 0; j < n; j++)
      if (slot[j] == p)
        return diag_error(d, TJ_ERR_INVALID, "reorder: index '%s' appears twice",
                          sd->vars[k]);
    slot[n++] = p;
  }
  if (open >= 0)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "reorder: %s names the outer half of the split "
                      "of %s but not its inner half %s", l->form[open].outer, l->iv[open]->name,
                      l->form[open].inner);
  /* The named loops take the slots they occupy, in the order given. */
  Loops old = *l;
  int sorted[NT_MAX_INDICES];
  memcpy(sorted, slot, sizeof(int) * (size_t)n);
  for (int i = 1; i < n; i++) /* insertion sort of the slots */
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
      int t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  for (int k = 0; k < n; k++) {
    int to = sorted[k], from = slot[k];
    l->iv[to] = old.iv[from];
    l->flags[to] = old.flags[from];
    l->vec_width[to] = old.vec_width[from];
    l->unroll[to] = old.unroll[from];
    l->par[to] = old.par[from];
    l->form[to] = old.form[from];
  }
  return true;
}

bool loops_flag(Loops *l, const Schedule *s, const SchedDirective *sd, Diag *d) {
  static const char *const names[] = {[SCHED_PARALLELIZE] = "parallelize",
                                      [SCHED_VECTORIZE] = "vectorize", [SCHED_UNROLL] = "unroll"};
  const char *what = names[sd->kind];
  LoopPart part;
  int p = loops_find(l, sd->vars[0], &part);
  if (p < 0) return loops_unknown(l, s, sd, d, what, sd->vars[0]);
  CinLoopForm *f = &l->form[p];
  bool split = f->split || f->divide;
  if (split && part == PART_WHOLE)
    return diag_error(d, TJ_ERR_INVALID, "%s(%s): the loop of %s is split into %s and %s; "
                      "name one of them", what, sd->vars[0], l->iv[p]->name, f->outer, f->inner);
  if (sd->kind == SCHED_PARALLELIZE) {
    if (part == PART_OUTER && f->outer_at)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s): %s sits above %s, away from "
                        "its inner half %s; parallelize a loop above it", sd->vars[0],
                        sd->vars[0], f->outer_at->name, f->inner);
    if (part == PART_INNER)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s): %s is the inner half of the "
                        "split of %s and runs inside one thread's block; parallelize %s",
                        sd->vars[0], sd->vars[0], l->iv[p]->name, f->outer);
    l->flags[p] |= CIN_PARALLEL;
    l->par[p] = sd->width;
    f->race = sd->arg;
    f->par_outer = part == PART_OUTER;
    return true;
  }
  if (part == PART_OUTER)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "%s(%s): %s is the outer half of the split of "
                      "%s, a loop over blocks; %s its inner half %s", what, sd->vars[0],
                      sd->vars[0], l->iv[p]->name, what, f->inner);
  if (sd->kind == SCHED_VECTORIZE) l->vec_width[p] = sd->width;
  else l->unroll[p] = sd->width;
  return true;
}
