/* Where each summation happens (TACO's einsum rule): an index that appears
 * only on the right-hand side is summed over the smallest subexpression that
 * contains every use of it, so
 *   y(i) = b(i) - A(i,j) * x(j)    is    y(i) = b(i) - sum(j, A(i,j) * x(j))
 * and not sum_j (b(i) - A(i,j) * x(j)). A product distributes over a sum
 * (sum_k(B*C) * D = sum_k(B*C*D) when D does not use k), so a scope that is
 * a factor of a product, a negation or a numerator widens to the whole
 * product: same values, and a product's loops stay one nest (MTTKRP's
 * B(i,k,l) * C(k,j) * D(l,j) sums k and l over the whole product, walking
 * B as stored, instead of nesting k's loop inside l's). Explicit sum(j, e)
 * nodes from the parser are checked and kept where written; implicit ones
 * are inserted as EX_SUM nodes. A scope that is the whole right-hand side
 * needs no node: sums wrapping the root are removed, and what is left is
 * the normal form of notation.h.
 */
#include "notation.h"

#include <stdio.h>

/* Slot k of e's children (the places nt_children reads). */
static Expr **child_slot(Expr *e, int k) {
  switch (e->kind) {
  case EX_SUM: return &e->u.sum.a;
  default: return k == 0 ? &e->u.op.a : &e->u.op.b;
  }
}

/* Whether a sum over the child in `slot` of e may cover all of e instead:
 * e's operator is linear in that operand (multiplies it by a factor,
 * negates it or divides it; ir/ops.def), and under a semiring (whose mul
 * `*` becomes) its mul distributes over its add: under plus.min,
 * y(i) = A(i,j) * x(k) is min(sum_j A(i,j), sum_k x(k)), not
 * sum_j,k min(A(i,j), x(k)). */
static bool distributes(const Assignment *as, Expr *e, Expr *const *slot) {
  OpKind op = nt_expr_op(e);
  if (op == OP_NONE) return false;
  if (op == OP_MUL && as->semiring && !as->semiring->distributive) return false;
  return nt_op(op)->laws & (slot == child_slot(e, 0) ? OL_LINEAR_X : OL_LINEAR_Y);
}

/* Uses of v in e, not counting those under a sum over v. */
static int count_uses(const Expr *e, const IndexVar *v) {
  if (e->kind == EX_ACCESS) {
    for (int m = 0; m < e->u.access.n; m++)
      if (e->u.access.idx[m] == v) return 1;
    return 0;
  }
  if (e->kind == EX_SUM && e->u.sum.iv == v) return 0;
  Expr *k[2];
  int n = nt_children(e, k), c = 0;
  for (int i = 0; i < n; i++) c += count_uses(k[i], v);
  return c;
}

/* Refuses sum s with msg, whose %s is the sum's spelling ("sum(j, ...)",
 * "reduce(min, j, ...)") and whose %2$s... are the index's name. */
static bool fail_at(const Assignment *as, const Expr *s, Diag *d, const char *msg) {
  const char *v = s->u.sum.iv->name;
  char head[96];
  if (s->u.sum.op == OP_ADD) snprintf(head, sizeof head, NT_SUM_NAME "(%s, ...)", v);
  else snprintf(head, sizeof head, NT_REDUCE_NAME "(%s, %s, ...)", nt_sum_name(s), v);
  if (as->src && s->col > 0)
    return diag_error_at(d, TJ_ERR_INVALID, as->src, s->col, msg, head, v, v);
  return diag_error(d, TJ_ERR_INVALID, msg, head, v, v);
}

/* Refuses explicit sums the rule cannot give a meaning to. */
static bool check_explicit(const Assignment *as, Diag *d) {
  const Expr *s[NT_MAX_INDICES * 4];
  int n = nt_sums(as->rhs, s, NT_MAX_INDICES * 4);
  if (n > NT_MAX_INDICES * 4)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "more than %d sums in one expression",
                      NT_MAX_INDICES * 4);
  for (int k = 0; k < n; k++) {
    const IndexVar *v = s[k]->u.sum.iv;
    if (nt_uses_index(as->lhs, v))
      return fail_at(as, s[k], d, "%s: %s indexes the output; only an index absent "
                     "from the left-hand side can be reduced over");
    if (!nt_uses_index(s[k]->u.sum.a, v))
      return fail_at(as, s[k], d, "%s: %s does not occur in the expression it reduces");
    int twice = 0;
    for (int m = 0; m < n; m++) twice += s[m]->u.sum.iv == v;
    if (count_uses(as->rhs, v) > 0 || twice > 1)
      return fail_at(as, s[k], d, "%s: index %s is also used outside this reduction (or "
                     "reduced twice); give the other use another name");
  }
  return true;
}

/* Whether the explicit reduction at the top of the rhs can be the root
 * reduction, whose operator is the one the output is updated with: all
 * root reductions share one operator, and += adds. */
static bool hoistable(const Assignment *as, const Expr *s) {
  /* a definition's reduction keeps its scope (a fold in loop order)
   * unless it declares that it may be reordered */
  if (s->u.sum.def && !nt_def_reorders(s->u.sum.def)) return false;
  if (as->nroot_sums > 0 && (s->u.sum.op != as->root_op || s->u.sum.def != as->root_def))
    return false;
  return !as->accumulate || (s->u.sum.op == OP_ADD && !s->u.sum.def);
}

bool nt_place_sums(Arena *a, Assignment *as, Diag *d) {
  if (!check_explicit(as, d)) return false;
  bool explicit_root[NT_MAX_INDICES] = {0};
  for (; as->rhs->kind == EX_SUM && hoistable(as, as->rhs); as->rhs = as->rhs->u.sum.a) {
    as->root_op = as->rhs->u.sum.op;
    as->root_def = as->rhs->u.sum.def;
    explicit_root[as->rhs->u.sum.iv->id] = true;
    as->root_sums[as->nroot_sums++] = as->rhs->u.sum.iv;
  }
  for (int i = 0; i < as->nindices; i++) {
    IndexVar *v = as->indices[i];
    if (explicit_root[i] || !nt_is_root_reduction(as, v)) continue;
    /* Descend while one child holds every use of v... */
    enum { MAX_PATH = NT_MAX_HEIGHT + NT_MAX_NESTING + 2 * NT_MAX_INDICES };
    Expr **path[MAX_PATH];
    int depth = 0;
    path[0] = &as->rhs;
    for (;; depth++) {
      if (depth + 1 == MAX_PATH)
        return diag_error(d, TJ_ERR_UNSUPPORTED, "expression too deep to place the sum over %s",
                          v->name);
      Expr *k[2];
      int n = nt_children(*path[depth], k), holder = -1, with = 0;
      for (int c = 0; c < n; c++)
        if (nt_uses_index(k[c], v)) {
          holder = c;
          with++;
        }
      if (with != 1) break;
      path[depth + 1] = child_slot(*path[depth], holder);
    }
    /* ... then back up through the products it is a factor of. */
    while (depth > 0 && distributes(as, *path[depth - 1], path[depth])) depth--;
    Expr **slot = path[depth];
    if (slot == &as->rhs && as->root_op == OP_ADD && !as->root_def) continue; /* a root sum */
    Expr *s = nt_sum(a, v, *slot, true, (*slot)->col);
    if (!s) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
    s->dtype = (*slot)->dtype;
    *slot = s;
  }
  return true;
}
