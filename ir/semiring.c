/* Semirings: an assignment's `+`, `*` and sums reinterpreted as a
 * semiring's add and mul (GraphBLAS names, ir/ops.c's table). Under
 * min.plus, y(i) = A(i,j) * x(j) is y(i) = reduce(min, j, A(i,j) + x(j)):
 * the shortest path through one more edge. Absent entries hold the
 * semiring's zero (the identity of add: +inf under min.plus), add unites
 * and mul intersects (nt_op_algebra), so the lattices follow the semiring.
 * `+=` updates the output with add. Subtraction, negation and division
 * have no meaning in a semiring and are refused.
 */
#include "level.h"
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

/* Whether e may have no entry at a point (a sparse operand, a mask;
 * sr's add unites and mul intersects): a sum over a body that always
 * exists has a term wherever its extent is not empty. */
static bool may_be_absent(const Expr *e, const NtSemiring *sr) {
  switch (e->kind) {
  case EX_LITERAL: return false;
  case EX_ACCESS: return lv_format_has_sparse(&e->u.access.t->decl.format);
  case EX_SUM: return may_be_absent(e->u.sum.a, sr);
  case EX_OP: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  bool x = may_be_absent(k[0], sr), y = n == 2 && may_be_absent(k[1], sr);
  switch (nt_expr_algebra(e, sr)) {
  case OA_UNION: return n == 2 ? x && y : x;
  case OA_INTERSECT: return x || y;
  case OA_NUMERATOR: case OA_KEEP: case OA_LEFT: return x;
  case OA_RIGHT: return y;
  case OA_DENSE: return false;
  case OA_EXCEPT: return true;
  }
  return true;
}

/* The first sum below a mul of sr in e (under: e is below one) whose body
 * may be absent, else NULL. A sum's result is a temporary that exists even where no term
 * does (it holds add's identity), so a product over it intersects with
 * an entry that is absent: under a semiring whose zero does not
 * annihilate its mul (plus.min: min(0, -3) is -3; max.times: -inf times a
 * negative is +inf; plus.pair: pair(0, x) is 1) that is a wrong value.
 * Distributive semirings never leave a sum below a product (ir/sums.c
 * widens it to the product). */
static const Expr *sum_below_mul(const Expr *e, const NtSemiring *sr, bool under) {
  if (e->kind == EX_SUM)
    return under && may_be_absent(e->u.sum.a, sr) ? e : sum_below_mul(e->u.sum.a, sr, false);
  if (e->kind != EX_OP) return NULL;
  Expr *k[2];
  int n = nt_children(e, k);
  bool below = under || nt_expr_op(e) == sr->mul;
  for (int i = 0; i < n; i++) {
    const Expr *s = sum_below_mul(k[i], sr, below);
    if (s) return s;
  }
  return NULL;
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

bool nt_semiring_kernel_exact(const Assignment *as, Diag *d) {
  const NtSemiring *sr = as->semiring;
  const Expr *s = sr && !sr->distributive ? sum_below_mul(as->rhs, sr, false) : NULL;
  if (!s) return true;
  const char *why = "a product over a sum (over %s) is not supported under the semiring %s: "
                    "where the sum has no term its result would count as present (%s's "
                    "zero does not annihilate its mul); compute the sum into a tensor of "
                    "its own first";
  if (as->src && s->col > 0)
    return diag_error_at(d, TJ_ERR_UNSUPPORTED, as->src, s->col, why, s->u.sum.iv->name,
                         sr->name, sr->name);
  return diag_error(d, TJ_ERR_UNSUPPORTED, why, s->u.sum.iv->name, sr->name, sr->name);
}
