/* The reference interpreter: the oracle every kernel test compares with.
 *
 * It is deliberately naive: one odometer runs over every combination of
 * the extents of the output's indices and the root reductions (an
 * iteration, so any order 0..8 works without recursion), evaluates the
 * right-hand side at those coordinates on dense row-major arrays, and adds
 * it into a long double accumulator for the output coordinates (summing
 * the root reductions); a sum(j, e) node loops over j itself. `=` starts the
 * accumulator at zero, `+=` at the output's values. Integer expressions
 * divide with truncation toward zero (as C does) and refuse x/0; results
 * are stored as doubles, which the caller converts to the output dtype.
 */
#include "notation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Eval {
  double *const *dense;
  int64_t coord[NT_MAX_INDICES];   /* by IndexId */
  bool is_int;
  bool div_by_zero;
} Eval;

/* Row-major offset of access e at the current coordinates. */
static int64_t offset(const Eval *ev, const Expr *e) {
  const TensorDecl *dc = &e->u.access.t->decl;
  int64_t off = 0;
  for (int m = 0; m < e->u.access.n; m++)
    off = off * dc->dims[m] + ev->coord[e->u.access.idx[m]->id];
  return off;
}

static long double eval(Eval *ev, const Expr *e) {
  switch (e->kind) {
  case EX_ACCESS: return ev->dense[e->u.access.t->id][offset(ev, e)];
  case EX_LITERAL: return e->u.lit.value;
  case EX_SUM: {
    IndexVar *v = e->u.sum.iv;
    long double s = 0;
    for (ev->coord[v->id] = 0; ev->coord[v->id] < v->extent; ev->coord[v->id]++)
      s += eval(ev, e->u.sum.a);
    ev->coord[v->id] = 0;
    return s;
  }
  default: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  long double x = eval(ev, k[0]), y = n == 2 ? eval(ev, k[1]) : 0;
  OpKind op = nt_expr_op(e);
  if (op == OP_DIV && ev->is_int) {
    if (y == 0) {
      ev->div_by_zero = true;
      return 0;
    }
    return truncl(x / y);
  }
  return nt_op(op)->eval(x, y);
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

bool nt_ref_eval(const Assignment *as, double *const *dense, Diag *d) {
  IndexVar *v[NT_MAX_INDICES];
  int nv = 0;
  used_vars(as->lhs, v, &nv);
  used_vars(as->rhs, v, &nv);
  if (!validate(as, dense, v, nv, d)) return false;
  int nodo = 0; /* the odometer's variables: all but the sum-bound ones */
  for (int k = 0; k < nv; k++)
    if (!nt_is_reduction_var(as, v[k]) || nt_is_root_reduction(as, v[k])) v[nodo++] = v[k];
  nv = nodo;
  bool empty = false;
  for (int k = 0; k < nv; k++) empty |= v[k]->extent == 0;
  int64_t size = out_size(&as->tensors[0]->decl);
  if (size < 0)
    return diag_error(d, TJ_ERR_NOMEM, "nt_ref_eval: output %s is too large",
                      as->tensors[0]->name);
  long double *acc = calloc((size_t)(size ? size : 1), sizeof *acc);
  if (!acc) return diag_error(d, TJ_ERR_NOMEM, "nt_ref_eval: out of memory");
  for (int64_t i = 0; as->accumulate && i < size; i++) acc[i] = dense[0][i];
  Eval ev = {.dense = dense, .is_int = as->rhs->dtype == TJ_I64 ||
                                       as->rhs->dtype == TJ_I32};
  if (!empty) do {
      acc[offset(&ev, as->lhs)] += eval(&ev, as->rhs);
    } while (advance(&ev, v, nv));
  if (!ev.div_by_zero)
    for (int64_t i = 0; i < size; i++) dense[0][i] = (double)acc[i];
  free(acc);
  if (ev.div_by_zero)
    return diag_error(d, TJ_ERR_INVALID, "nt_ref_eval: integer division by "
                      "zero");
  return true;
}
