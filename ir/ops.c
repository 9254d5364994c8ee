/* The operator table: the rows of ir/ops.def as const NtOp structs, each
 * with its reference value (ev_NAME, in long double as the reference
 * interpreter computes), and lookups by spelling and by expression node.
 */
#include "notation.h"

#include <math.h>
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

OpKind nt_expr_op(const Expr *e) {
  switch (e->kind) {
#define OP(n, ...) case EX_##n: return OP_##n;
#define FN(n, ...)
#include "ops.def"
#undef OP
#undef FN
  case EX_CALL: return e->u.call.fn;
  default: return OP_NONE;
  }
}

Expr *nt_op_node(Arena *a, OpKind op, Expr *x, Expr *y, int col) {
  static const ExprKind kind[OP_COUNT] = {
#define OP(n, ...) [OP_##n] = EX_##n,
#define FN(n, ...) [OP_##n] = EX_CALL,
#include "ops.def"
#undef OP
#undef FN
  };
  if (ops[op].is_call) return nt_call(a, op, x, y, col);
  return ops[op].arity == 1 ? nt_unary(a, kind[op], x, col) : nt_binary(a, kind[op], x, y, col);
}

bool nt_expr_zero(const Expr *e, bool (*absent)(const Expr *access, const void *ctx),
                  const void *ctx) {
  switch (e->kind) {
  case EX_ACCESS: return absent(e, ctx);
  case EX_LITERAL: return e->u.lit.value == 0;
  case EX_SUM: return nt_expr_zero(e->u.sum.a, absent, ctx);
  default: break;
  }
  Expr *k[2];
  nt_children(e, k);
  switch (nt_op(nt_expr_op(e))->algebra) {
  case OA_INTERSECT: return nt_expr_zero(k[0], absent, ctx) || nt_expr_zero(k[1], absent, ctx);
  case OA_UNION: return nt_expr_zero(k[0], absent, ctx) && nt_expr_zero(k[1], absent, ctx);
  case OA_NUMERATOR:
  case OA_KEEP: return nt_expr_zero(k[0], absent, ctx);
  case OA_DENSE: return false;
  }
  return false;
}
