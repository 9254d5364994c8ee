/* The operator table of index notation: one row per operator and function
 * (ir/ops.def), read by the parser, printer, checker, reference
 * interpreter, lattice builder, lowering and the builder API.
 */
#ifndef TJ_IR_OPS_H
#define TJ_IR_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "loop_ir.h"

/* The lir column of a row the lowering builds from other loop-IR
 * operations (or, and, pair). */
enum { LOP_NONE = -1 };

typedef enum {
#define OP(n, ...) OP_##n,
#define FN(n, ...) OP_##n,
#include "ops.def"
#undef OP
#undef FN
  OP_COUNT,
  OP_NONE = -1     /* not an operator node (access, literal, sum) */
} OpKind;

/* How an operator's result is zero, given its operands': the merge-lattice
 * rule. The one place that says which operators preserve zero. */
typedef enum {
  OA_INTERSECT,  /* zero where either operand is (x * y): conjunction */
  OA_UNION,      /* zero where both are (x + y, min, max): disjunction */
  OA_NUMERATOR,  /* zero where the left one is (x / y): conjunction, y's
                    empty lattice counting as full */
  OA_KEEP,       /* unary, zero where its operand is (-x, sqrt, abs) */
  OA_DENSE,      /* unary, nonzero at zero (exp, log): adds a full point */
  OA_EXCEPT,     /* zero where y is or x exists (except(m, e)): y's points,
                    each also co-iterated with x to exclude x's */
  OA_LEFT,       /* zero where x is (a definition's cases without `right`):
                    x's points, each also co-iterated with y */
  OA_RIGHT,      /* zero where y is (cases without `left`): y's points,
                    each also co-iterated with x */
} OpAlgebra;

enum {   /* laws */
  OL_COMM = 1, OL_ASSOC = 2,
  OL_LINEAR_X = 4,   /* f(a + b, y) = f(a, y) + f(b, y), f(c a, y) = c f(a, y) */
  OL_LINEAR_Y = 8,   /* the same in the second operand */
  OL_BOOL = 16,      /* identity and annihilator laws on truth values 0, 1 */
  OL_PATTERN = 32,   /* the value is a constant where the result exists */
  OL_STRUCT_X = 64,  /* only x's existence matters; the value is y's */
};

typedef struct NtOp {
  const char *name;       /* "ADD": the enum's suffix, for tests and dumps */
  const char *spelling;   /* "+", "sqrt" */
  int arity;              /* 1 or 2 */
  int prec;               /* infix/prefix binding, 0 for functions */
  bool is_call;           /* written spelling(x[, y]) */
  int lir;                /* LirUnOp (arity 1) or LirBinOp (arity 2) */
  bool float_only;
  OpAlgebra algebra;
  double identity, annihilator;   /* NAN: none */
  unsigned laws;          /* OL_COMM | OL_ASSOC | OL_LINEAR_X | OL_LINEAR_Y */
  long double (*eval)(long double x, long double y);  /* reference value (y
                             unused when unary); integer division is the
                             reference interpreter's own */
} NtOp;

/* The row of op; op must be in [0, OP_COUNT). */
const NtOp *nt_op(OpKind op);
/* The function (is_call) or the infix operator (!is_call, arity 2) spelled
 * s[0..len); OP_NONE if there is none. */
OpKind nt_op_lookup(const char *s, int len, bool is_call);
/* Whether op can reduce (reduce(op, j, e), a semiring's addition): binary,
 * commutative, associative, with an identity. */
bool nt_op_is_reduction(OpKind op);


/* A semiring (GraphBLAS names: "min.plus"): the operators that `+` (and
 * sums) and `*` mean under it; its zero, the identity of add, is the value
 * of absent entries. */
typedef struct NtSemiring {
  const char *name;
  OpKind add, mul;
  bool distributive;   /* mul distributes over add for all values (a + min(b, c) =
                          min(a + b, a + c)), so a sum over one factor of a
                          product may cover the whole product (ir/sums.c); not
                          min.times / max.times (negative factors), plus.min,
                          plus.pair */
} NtSemiring;
/* The semiring named s (NULL or "" is plus.times), or NULL if none is. */
const NtSemiring *nt_semiring(const char *s);
/* The names of every semiring, ", "-separated, into buf (for messages). */
void nt_semiring_names(char *buf, size_t size);
/* The value of absent entries under sr (NULL: plus.times, 0). */
double nt_semiring_zero(const NtSemiring *sr);
/* The merge-lattice rule of op under sr (NULL: plus.times, the table's
 * algebra). Under another semiring its add unites and its mul intersects
 * (as GraphBLAS: a product exists where both operands do); any other
 * operator follows from the values, absent entries holding the semiring's
 * zero z: an annihilator equal to z intersects, f(z, z) = z unites (an
 * absent operand reads z), anything else is OA_DENSE (binary rows too). */
OpAlgebra nt_op_algebra(OpKind op, const NtSemiring *sr);

#endif
