/* The operator table: the rows of ir/ops.def as const NtOp structs, each
 * with its reference value (ev_NAME, in long double as the reference
 * interpreter computes), and lookups by spelling and by expression node.
 */
#include "notation.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static long double ev_NEG(long double x, long double y) { (void)y; return -x; }
static long double ev_ADD(long double x, long double y) { return x + y; }
static long double ev_SUB(long double x, long double y) { return x - y; }
static long double ev_MUL(long double x, long double y) { return x * y; }
static long double ev_DIV(long double x, long double y) { return x / y; }
static long double ev_SQRT(long double x, long double y) { (void)y; return sqrtl(x); }
static long double ev_ABS(long double x, long double y) { (void)y; return fabsl(x); }
static long double ev_EXP(long double x, long double y) { (void)y; return expl(x); }
static long double ev_LOG(long double x, long double y) { (void)y; return logl(x); }
static long double ev_MIN(long double x, long double y) { return x < y ? x : y; }
static long double ev_MAX(long double x, long double y) { return x > y ? x : y; }
static long double ev_POW(long double x, long double y) { return powl(x, y); }
static long double ev_OR(long double x, long double y) { return x != 0 || y != 0; }
static long double ev_AND(long double x, long double y) { return x != 0 && y != 0; }
static long double ev_PAIR(long double x, long double y) { (void)x, (void)y; return 1; }
static long double ev_MASK(long double x, long double y) { (void)x; return y; }
static long double ev_EXCEPT(long double x, long double y) { (void)x; return y; }
static long double ev_CASES(long double x, long double y) { (void)x, (void)y; return NAN; }

static const NtOp ops[OP_COUNT] = {
#define ROW(n, sp, ar, pr, call, lir, fo, alg, id, an, laws) \
  [OP_##n] = {#n, sp, ar, pr, call, lir, fo, alg, id, an, laws, ev_##n},
#define OP(n, sp, ar, pr, lir, fo, alg, id, an, laws) ROW(n, sp, ar, pr, false, lir, fo, alg, id, an, laws)
#define FN(n, sp, ar, pr, lir, fo, alg, id, an, laws) ROW(n, sp, ar, pr, true, lir, fo, alg, id, an, laws)
#include "ops.def"
#undef OP
#undef FN
#undef ROW
};

const NtOp *nt_op(OpKind op) { return &ops[op]; }

OpKind nt_op_lookup(const char *s, int len, bool is_call) {
  for (int k = 0; k < OP_COUNT; k++)
    if (ops[k].is_call == is_call && (is_call || ops[k].arity == 2) &&
        (int)strlen(ops[k].spelling) == len && strncmp(ops[k].spelling, s, (size_t)len) == 0)
      return (OpKind)k;
  return OP_NONE;
}

bool nt_op_is_reduction(OpKind op) {
  const NtOp *o = &ops[op];
  return o->arity == 2 && (o->laws & (OL_COMM | OL_ASSOC)) == (OL_COMM | OL_ASSOC) &&
         !isnan(o->identity);
}

static const NtSemiring semirings[] = {
  {"plus.times", OP_ADD, OP_MUL, true}, {"min.plus", OP_MIN, OP_ADD, true},
  {"max.plus", OP_MAX, OP_ADD, true},   {"min.times", OP_MIN, OP_MUL, false},
  {"max.times", OP_MAX, OP_MUL, false}, {"min.max", OP_MIN, OP_MAX, true},
  {"max.min", OP_MAX, OP_MIN, true},    {"plus.pair", OP_ADD, OP_PAIR, false},
  {"plus.min", OP_ADD, OP_MIN, false},  {"or.and", OP_OR, OP_AND, true},
};
enum { NSEMIRINGS = sizeof semirings / sizeof semirings[0] };

const NtSemiring *nt_semiring(const char *s) {
  if (!s || !*s) return &semirings[0];
  for (int k = 0; k < NSEMIRINGS; k++)
    if (strcmp(s, semirings[k].name) == 0) return &semirings[k];
  return NULL;
}

void nt_semiring_names(char *buf, size_t size) {
  size_t n = 0;
  buf[0] = 0;
  for (int k = 0; k < NSEMIRINGS && n < size; k++)
    n += (size_t)snprintf(buf + n, size - n, "%s%s", k ? ", " : "", semirings[k].name);
}

double nt_semiring_zero(const NtSemiring *sr) { return sr ? ops[sr->add].identity : 0; }

OpAlgebra nt_op_algebra(OpKind op, const NtSemiring *sr) {
  const NtOp *o = &ops[op];
  if (!sr || sr == &semirings[0] || (o->laws & OL_STRUCT_X)) return o->algebra;
  if (op == sr->add) return OA_UNION;
  if (op == sr->mul) return OA_INTERSECT;
  long double z = nt_semiring_zero(sr);
  if (o->arity == 1) return o->eval(z, 0) == z ? OA_KEEP : OA_DENSE;
  if (o->annihilator == z) return OA_INTERSECT;
  return o->eval(z, z) == z ? OA_UNION : OA_DENSE;
}

/* A binary row that is dense by itself (pow: pow(0, 0) = 1) may keep the
 * zeros of its other operand at a literal one c, by its values:
 * f(z, c) = z (pow(x, 2) is zero where x is) or f(c, z) = z. */
static OpAlgebra at_literal(const Expr *e, OpAlgebra alg, const NtSemiring *sr) {
  const Expr *x = e->u.op.a, *y = e->u.op.b;
  if (alg != OA_DENSE || !y || (x->kind == EX_LITERAL) == (y->kind == EX_LITERAL)) return alg;
  long double z = nt_semiring_zero(sr), (*f)(long double, long double) = ops[e->u.op.id].eval;
  if (y->kind == EX_LITERAL) return f(z, y->u.lit.value) == z ? OA_KEEP : alg;
  return f(x->u.lit.value, z) == z ? OA_RIGHT : alg;
}

OpAlgebra nt_expr_algebra(const Expr *e, const NtSemiring *sr) {
  OpKind op = nt_expr_op(e);
  if (op != OP_CASES) return at_literal(e, nt_op_algebra(op, sr), sr);
  const NtDef *d = e->u.op.def;
  return d->left && d->right ? OA_UNION : d->left ? OA_LEFT : d->right ? OA_RIGHT
                                                                      : OA_INTERSECT;
}

bool nt_expr_zero(const Expr *e, const NtSemiring *sr, const NtPresence *p, const void *ctx) {
  switch (e->kind) {
  case EX_ACCESS: return p->absent(e, ctx);
  case EX_LITERAL: return e->u.lit.value == nt_semiring_zero(sr);
  case EX_SUM: /* a reduction over nothing is its identity */
    return nt_sum_identity(e) == nt_semiring_zero(sr) &&
           nt_expr_zero(e->u.sum.a, sr, p, ctx);
  default: break;
  }
  Expr *k[2];
  nt_children(e, k);
  switch (nt_expr_algebra(e, sr)) {
  case OA_LEFT: return nt_expr_zero(k[0], sr, p, ctx);
  case OA_RIGHT: return nt_expr_zero(k[1], sr, p, ctx);
  case OA_INTERSECT: return nt_expr_zero(k[0], sr, p, ctx) || nt_expr_zero(k[1], sr, p, ctx);
  case OA_UNION: return nt_expr_zero(k[0], sr, p, ctx) && nt_expr_zero(k[1], sr, p, ctx);
  case OA_NUMERATOR:
  case OA_KEEP: return nt_expr_zero(k[0], sr, p, ctx);
  case OA_DENSE: return false;
  case OA_EXCEPT: /* x is an access (the checker's rule) */
    return nt_expr_zero(k[1], sr, p, ctx) || (p->present && p->present(k[0], ctx));
  }
  return false;
}
