/* The reference interpreter: the oracle every kernel test compares with.
 *
 * It is deliberately naive: one odometer runs over every combination of
 * the extents of the output's indices and the root reductions (an
 * iteration, so any order 0..8 works without recursion), evaluates the
 * right-hand side at those coordinates on dense row-major arrays, and adds
 * it into a long double accumulator for the output coordinates (reducing
 * the root reductions with the root operator); a reduce(op, j, e) node
 * loops over j itself.
 *
 * Absence (GraphBLAS's rule, and what the lattices iterate): an entry a
 * sparse operand does not store is absent and reads as the semiring's
 * zero; each operator's algebra (nt_op_algebra) says where its result
 * exists (a product where both operands do, a sum where either does, an
 * absent operand of a sum being its identity), and a reduction combines
 * the points where its body exists, from its operator's identity. With +
 * and zeros this is plain arithmetic; for min, max and the semirings it is
 * what makes min over a sparse row the least stored value, not 0.
 *
 * `=` starts a reached output entry at the root operator's identity (a
 * plain assignment without root reductions stores the value itself) and
 * leaves an unreached one at that identity in a dense output, at the zero
 * in a sparse one (absent); `+=` starts at the output's values. Integer
 * expressions divide with truncation toward zero (as C does) and refuse
 * x/0; i32, i16 and i8 results wrap around after each operation (u64, u32,
 * u16 and u8 ones modulo 2^bits), bool ones
 * are 1 where nonzero (0/1 values, so + is or and * is and); results are
 * stored as doubles, which the caller converts to the output dtype.
 */
#include "notation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Eval {
  double *const *dense;
  const uint8_t *const *stored;    /* by TensorId; NULL: every entry */
  const NtSemiring *sr;
  long double zero;                /* the value of absent entries */
  int64_t coord[NT_MAX_INDICES];   /* by IndexId */
  bool is_int;
  int bits;                        /* i32/i16/i8, u64..u8: results wrap; 1: bool */
  bool is_unsigned;                /* modulo 2^bits (else two's complement) */
  long double param[2];            /* a definition's parameters, in its body */
  bool div_by_zero;
} Eval;

/* A value and whether it exists (absent values are ev->zero). */
typedef struct Val {
  long double v;
  bool present;
} Val;

/* Row-major offset of access e at the current coordinates. */
static int64_t offset(const Eval *ev, const Expr *e) {
  const TensorDecl *dc = &e->u.access.t->decl;
  int64_t off = 0;
  for (int m = 0; m < e->u.access.n; m++)
    off = off * dc->dims[m] + ev->coord[e->u.access.idx[m]->id];
  return off;
}

/* A finite result of a narrow integer or bool expression as the kernels
 * hold it: wrapped into ev->bits, as two's complement; bool: nonzero is 1.
 * Infinite identities (min over nothing) stay; they saturate when stored. */
static long double narrow(const Eval *ev, long double v) {
  if (!ev->bits || !isfinite(v)) return v;
  if (ev->bits == 1) return v != 0;
  if (ev->is_unsigned) { /* modulo 2^bits, exact below 2^64 (a 64-bit mantissa) */
    long double m = ldexpl(1, ev->bits), r = fmodl(v, m);
    return r < 0 ? r + m : r;
  }
  uint64_t m = ((uint64_t)1 << ev->bits) - 1, u = (uint64_t)(int64_t)v & m;
  return (long double)(int64_t)(u > m / 2 ? u - m - 1 : u);
}

static long double apply(Eval *ev, OpKind op, long double x, long double y) {
  if (op == OP_DIV && ev->is_int) {
    if (y == 0) {
      ev->div_by_zero = true;
      return 0;
    }
    return narrow(ev, truncl(x / y));
  }
  return ev->is_int ? narrow(ev, nt_op(op)->eval(x, y)) : nt_op(op)->eval(x, y);
}

static Val eval(Eval *ev, const Expr *e);

/* A definition's body (or case) with x and y as its parameters. */
static long double def_value(Eval *ev, const Expr *body, long double x, long double y) {
  long double saved[2] = {ev->param[0], ev->param[1]};
  ev->param[0] = x, ev->param[1] = y;
  long double r = eval(ev, body).v;
  ev->param[0] = saved[0], ev->param[1] = saved[1];
  return r;
}

long double nt_def_apply(const NtDef *def, long double x, long double y) {
  Eval ev = {0};
  return def_value(&ev, def->body, x, y);
}

bool nt_def_reorders(const NtDef *def) {
  return def && def->reduces && (def->laws & (OL_COMM | OL_ASSOC)) == (OL_COMM | OL_ASSOC);
}

/* x and y agree to a relative 1e-9 (both NaN: the same failure either way). */
static bool agree(long double x, long double y) {
  if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
  if (x == y) return true;
  return fabsl(x - y) <= 1e-9L * (fabsl(x) + fabsl(y));
}

bool nt_def_check_laws(const NtDef *def, Diag *d) {
  static const long double v[] = {-2.5L, -1, 0, 0.5L, 3, 7.25L};
  enum { NV = sizeof v / sizeof v[0] };
  for (int i = 0; i < NV; i++)
    for (int j = 0; j < NV; j++) {
      long double xy = nt_def_apply(def, v[i], v[j]), yx = nt_def_apply(def, v[j], v[i]);
      if ((def->laws & OL_COMM) && !agree(xy, yx))
        return diag_error(d, TJ_ERR_INVALID, "%s is declared commutative, but %s(%g, %g) = "
                          "%Lg and %s(%g, %g) = %Lg", def->name, def->name, (double)v[i],
                          (double)v[j], xy, def->name, (double)v[j], (double)v[i], yx);
      for (int k = 0; k < NV && (def->laws & OL_ASSOC); k++) {
        long double l = nt_def_apply(def, xy, v[k]);
        long double r = nt_def_apply(def, v[i], nt_def_apply(def, v[j], v[k]));
        if (!agree(l, r))
          return diag_error(d, TJ_ERR_INVALID, "%s is declared associative, but %s(%s(%g, %g), "
                            "%g) = %Lg and %s(%g, %s(%g, %g)) = %Lg", def->name, def->name,
                            def->name, (double)v[i], (double)v[j], (double)v[k], l, def->name,
                            (double)v[i], def->name, (double)v[j], (double)v[k], r);
      }
    }
  for (int i = 0; i < NV; i++) {
    long double r = nt_def_apply(def, v[i], def->identity);
    if (!agree(r, v[i]))
      return diag_error(d, TJ_ERR_INVALID, "%s's identity is %g, but %s(%g, %g) = %Lg",
                        def->name, def->identity, def->name, (double)v[i], def->identity, r);
  }
  return true;
}

/* x op y for the operator of reduction node e, or its definition's body. */
static long double combine(Eval *ev, const Expr *e, long double x, long double y) {
  if (!e->u.sum.def) return apply(ev, e->u.sum.op, x, y);
  return def_value(ev, e->u.sum.def->body, x, y);
}

/* reduce(op, v, body): op over the points of v where body exists, from
 * op's identity; it exists where one point does, or where the identity is
 * not the zero (min over nothing is +inf). */
static Val reduce(Eval *ev, const Expr *e) {
  IndexVar *v = e->u.sum.iv;
  Val r = {nt_sum_identity(e), false};
  for (ev->coord[v->id] = 0; ev->coord[v->id] < v->extent; ev->coord[v->id]++) {
    Val b = eval(ev, e->u.sum.a);
    if (!b.present) continue;
    r.v = combine(ev, e, r.v, b.v);
    r.present = true;
  }
  ev->coord[v->id] = 0;
  r.present |= r.v != ev->zero;
  return r;
}

static Val eval(Eval *ev, const Expr *e) {
  switch (e->kind) {
  case EX_ACCESS: {
    if (e->u.access.t->id < 0) return (Val){ev->param[-1 - e->u.access.t->id], true};
    int64_t off = offset(ev, e);
    const uint8_t *st = ev->stored ? ev->stored[e->u.access.t->id] : NULL;
    if (st && !st[off]) return (Val){ev->zero, false};
    return (Val){ev->dense[e->u.access.t->id][off], true};
  }
  case EX_LITERAL: return (Val){e->u.lit.value, e->u.lit.value != ev->zero};
  case EX_SUM: return reduce(ev, e);
  default: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  Val x = eval(ev, k[0]), y = n == 2 ? eval(ev, k[1]) : (Val){0, true};
  OpKind op = nt_expr_op(e);
  if ((op == OP_MASK || op == OP_EXCEPT) && k[0]->kind == EX_ACCESS &&
      !(ev->stored && ev->stored[k[0]->u.access.t->id]))
    x.present = x.v != ev->zero; /* an all-dense mask is valued */
  const NtOp *o = nt_op(op);
  Val absent = {ev->zero, false};
  switch (nt_expr_algebra(e, ev->sr)) {
  case OA_INTERSECT:
    if (!x.present || !y.present) return absent;
    break;
  case OA_LEFT:
    if (!x.present) return absent;
    break;
  case OA_RIGHT:
    if (!y.present) return absent;
    break;
  case OA_UNION:
    if (!x.present && !y.present) return absent;
    /* an absent operand is the identity: the other one stays as it is */
    if (!y.present && o->identity == ev->zero) return x;
    if (!x.present && o->identity == ev->zero && (o->laws & OL_COMM)) return y;
    break;
  case OA_NUMERATOR:
  case OA_KEEP:
    if (!x.present) return absent;
    break;
  case OA_DENSE: break;
  case OA_EXCEPT:
    if (x.present || !y.present) return absent;
    break;
  }
  if (op == OP_CASES) { /* the definition's case for which operands exist */
    const NtDef *d = e->u.op.def;
    const Expr *body = x.present && y.present ? d->body : x.present ? d->left : d->right;
    return (Val){def_value(ev, body, x.v, y.v), true};
  }
  return (Val){apply(ev, op, x.v, y.v), true};
}

/* Index variables used by the assignment, output's first (those a sum
 * node binds too: the odometer skips them). */
static void used_vars(const Expr *e, IndexVar **v, int *n) {
  if (e->kind == EX_ACCESS) {
    for (int m = 0; m < e->u.access.n; m++) {
      int k = 0;
      while (k < *n && v[k] != e->u.access.idx[m]) k++;
      if (k == *n) v[(*n)++] = e->u.access.idx[m];
    }
    return;
  }
  Expr *k[2];
  int nk = nt_children(e, k);
  for (int i = 0; i < nk; i++) used_vars(k[i], v, n);
}

/* The number of elements of the output, or -1 when it cannot be held. */
static int64_t out_size(const TensorDecl *dc) {
  int64_t n = 1;
  for (int m = 0; m < dc->order; m++)
    if (dc->dims[m] < 0 || __builtin_mul_overflow(n, dc->dims[m], &n) ||
        n > ((int64_t)1 << 40))
      return -1;
  return n;
}

/* Steps the odometer; false after the last combination. */
static bool advance(Eval *ev, IndexVar *const *v, int n) {
  for (int k = n - 1; k >= 0; k--) {
    if (++ev->coord[v[k]->id] < v[k]->extent) return true;
    ev->coord[v[k]->id] = 0;
  }
  return false;
}

static bool validate(const Assignment *as, double *const *dense,
                     IndexVar *const *v, int nv, Diag *d) {
  for (int k = 0; k < nv; k++)
    if (v[k]->extent < 0)
      return diag_error(d, TJ_ERR_INVALID, "nt_ref_eval needs a checked "
                        "assignment: index %s has no extent", v[k]->name);
  for (int t = 0; t < as->ntensors; t++)
    if (!dense[t])
      return diag_error(d, TJ_ERR_INVALID, "nt_ref_eval: no array for %s",
                        as->tensors[t]->name);
  return true;
}

bool nt_ref_eval(const Assignment *as, double *const *dense, const RefEvalIn *in, Diag *d) {
  IndexVar *v[NT_MAX_INDICES];
  int nv = 0;
  used_vars(as->lhs, v, &nv);
  used_vars(as->rhs, v, &nv);
  if (!validate(as, dense, v, nv, d)) return false;
  int nodo = 0; /* the odometer's variables: all but the sum-bound ones */
  bool reduces = false;
  for (int k = 0; k < nv; k++) {
    if (nt_is_reduction_var(as, v[k]) && !nt_is_root_reduction(as, v[k])) continue;
    reduces |= nt_is_reduction_var(as, v[k]);
    v[nodo++] = v[k];
  }
  nv = nodo;
  bool empty = false;
  for (int k = 0; k < nv; k++) empty |= v[k]->extent == 0;
  int64_t size = out_size(&as->tensors[0]->decl);
  if (size < 0)
    return diag_error(d, TJ_ERR_NOMEM, "nt_ref_eval: output %s is too large",
                      as->tensors[0]->name);
  size_t n = (size_t)(size ? size : 1);
  long double *acc = malloc(n * sizeof *acc);
  uint8_t *reached = calloc(n, 1);
  if (!acc || !reached) {
    free(acc);
    free(reached);
    return diag_error(d, TJ_ERR_NOMEM, "nt_ref_eval: out of memory");
  }
  Eval ev = {.dense = dense, .stored = in ? in->stored : NULL, .sr = as->semiring,
             .zero = nt_semiring_zero(as->semiring),
             .is_int = nt_dtype_is_int(as->rhs->dtype), .bits = nt_dtype_bits(as->rhs->dtype),
             .is_unsigned = nt_dtype_is_unsigned(as->rhs->dtype)};
  bool update = reduces || as->accumulate; /* else each entry is set once */
  long double start = reduces ? nt_root_identity(as) : ev.zero;
  for (int64_t i = 0; i < size; i++) acc[i] = as->accumulate ? dense[0][i] : start;
  if (!empty) do {
      Val x = eval(&ev, as->rhs);
      if (!x.present) continue;
      int64_t o = offset(&ev, as->lhs);
      acc[o] = !update ? x.v
               : as->root_def ? def_value(&ev, as->root_def->body, acc[o], x.v)
                              : apply(&ev, as->root_op, acc[o], x.v);
      reached[o] = 1;
    } while (advance(&ev, v, nv));
  bool sparse = in && in->out_sparse && !as->accumulate;
  for (int64_t i = 0; !ev.div_by_zero && i < size; i++) {
    if (sparse && !reached[i]) acc[i] = ev.zero;
    dense[0][i] = (double)acc[i];
    if (in && in->out_stored) in->out_stored[i] = reached[i] || as->accumulate;
  }
  free(acc);
  free(reached);
  if (ev.div_by_zero)
    return diag_error(d, TJ_ERR_INVALID, "nt_ref_eval: integer division by "
                      "zero");
  return true;
}
