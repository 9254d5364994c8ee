/* Semirings: an assignment's `+`, `*` and sums reinterpreted as a
 * semiring's add and mul (GraphBLAS names, ir/ops.c's table). Under
 * min.plus, y(i) = A(i,j) * x(j) is y(i) = reduce(min, j, A(i,j) + x(j)):
 * the shortest path through one more edge. Absent entries hold the
 * semiring's zero (the identity of add: +inf under min.plus), add unites
 * and mul intersects (nt_op_algebra), so the lattices follow the semiring.
 * `+=` updates the output with add. Subtraction, negation and division
 * have no meaning in a semiring and are refused.
 */
#include "notation.h"

static bool refuse(const Assignment *as, const Expr *e, const NtSemiring *sr, Diag *d) {
  const char *what = nt_expr_op(e) == OP_DIV ? "'/'" : "'-'";
  if (as->src && e->col > 0)
    return diag_error_at(d, TJ_ERR_UNSUPPORTED, as->src, e->col,
                         "%s has no meaning under the semiring %s (only its + and * do)",
                         what, sr->name);
  return diag_error(d, TJ_ERR_UNSUPPORTED, "%s has no meaning under the semiring %s "
                    "(only its + and * do)", what, sr->name);
}

/* e with + and * replaced by sr's operators (new nodes where the kind
 * changes), or NULL with d set. */
static Expr *rewrite(Arena *a, const Assignment *as, Expr *e, const NtSemiring *sr, Diag *d) {
  switch (e->kind) {
  case EX_ACCESS:
  case EX_LITERAL: return e;
  case EX_SUM:
    if (e->u.sum.op == OP_ADD) e->u.sum.op = sr->add;
    e->u.sum.a = rewrite(a, as, e->u.sum.a, sr, d);
    return e->u.sum.a ? e : NULL;
  case EX_OP: break;
  }
  OpKind op = nt_expr_op(e);
  if (op == OP_SUB || op == OP_NEG || op == OP_DIV) return refuse(as, e, sr, d), NULL;
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++)
    if (!(k[i] = rewrite(a, as, k[i], sr, d))) return NULL;
  OpKind to = op == OP_ADD ? sr->add : op == OP_MUL ? sr->mul : op;
  Expr *r = nt_op_node(a, to, k[0], n == 2 ? k[1] : NULL, e->col);
  if (!r) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  r->dtype = e->dtype;
  return r;
}

bool nt_apply_semiring(Arena *a, Assignment *as, const NtSemiring *sr, Diag *d) {
  if (!sr || sr == nt_semiring(NULL)) return true;
  Expr *rhs = rewrite(a, as, as->rhs, sr, d);
  if (!rhs) return false;
  as->rhs = rhs;
  if (as->root_op == OP_ADD) as->root_op = sr->add; /* and += means add= */
  as->semiring = sr;
  return true;
}
