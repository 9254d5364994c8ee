/* sequence(S1, S2): a dense output defined by S1, then updated by S2.
 *
 * A right-hand side that is a sum of terms with different iteration spaces,
 *   A(i,j) = B(i,k) * C(k,j) + D(i,j)     (k summed inside the first term)
 * is one where() per sum in the default notation: the output's loops
 * around a scalar temp per sum. nt_sequence_split cuts it at its top-level
 * `+` and `-` into statements run in turn into the same output:
 *   sequence(A(i,j) = D(i,j), A(i,j) += B(i,k) * C(k,j))
 * the first statement the terms without a sum of their own (or the first
 * sum when every term is one), each further one a summed term as the root
 * reduction of its own statement (`y(i) += -(A(i,j) * x(j))` for a
 * subtracted one), so each gets its own loop order, and a dense
 * contraction its GETT path. Exact for + over integers; over floats the
 * sum associates differently (D + (t1 + t2) becomes (D + t1) + t2). Each
 * statement is an Assignment of its own over the same tensors (same
 * TensorIds, so one kernel's operands serve all) and its own indices.
 */
#include <string.h>

#include "level.h"
#include "notation.h"

typedef struct Term {
  const Expr *e;
  bool neg;
} Term;

/* The terms of e under top-level + and - (and negations), in order;
 * false past max. */
static bool collect_terms(const Expr *e, bool neg, Term *t, int *n, int max) {
  OpKind op = nt_expr_op(e);
  if (op == OP_ADD || op == OP_SUB)
    return collect_terms(e->u.op.a, neg, t, n, max) &&
           collect_terms(e->u.op.b, op == OP_SUB ? !neg : neg, t, n, max);
  if (op == OP_NEG) return collect_terms(e->u.op.a, !neg, t, n, max);
  if (*n == max) return false;
  t[(*n)++] = (Term){e, neg};
  return true;
}


/* Index renaming into one statement: the original IndexVar -> the
 * statement's (interned by name in first-use order). */
typedef struct Renamer {
  Assignment *part;
  bool failed;
} Renamer;

static IndexVar *rename_index(Arena *a, Renamer *r, const IndexVar *v) {
  IndexVar *n = nt_index(a, r->part, v->name);
  if (!n) r->failed = true;
  else n->extent = v->extent;
  return n;
}

static Expr *rename_node(Arena *a, const Expr *e, const void *ctx) {
  Renamer *r = (Renamer *)ctx;
  if (e->kind == EX_ACCESS) {
    Expr *c = arena_alloc(a, sizeof *c);
    if (!c) return r->failed = true, NULL;
    *c = *e;
    for (int m = 0; m < e->u.access.n; m++)
      if (!(c->u.access.idx[m] = rename_index(a, r, e->u.access.idx[m]))) return NULL;
    return c;
  }
  if (e->kind == EX_SUM) {
    Expr *c = arena_alloc(a, sizeof *c);
    if (!c) return r->failed = true, NULL;
    *c = *e;
    if (!(c->u.sum.iv = rename_index(a, r, e->u.sum.iv))) return NULL;
    if (!(c->u.sum.a = nt_map_expr(a, e->u.sum.a, rename_node, r))) return r->failed = true, NULL;
    return c;
  }
  return NULL;
}

/* The statement lhs (+)= rhs over as's tensors; rhs's outermost plain sums
 * become its root reduction. */
static Assignment *statement(Arena *a, const Assignment *as, const Expr *rhs, bool acc) {
  Assignment *p = nt_assignment(a);
  if (!p) return NULL;
  p->accumulate = acc;
  p->src = as->src;
  p->ntensors = as->ntensors;
  memcpy(p->tensors, as->tensors, sizeof p->tensors);
  Renamer r = {.part = p};
  p->lhs = nt_map_expr(a, as->lhs, rename_node, &r);
  while (rhs->kind == EX_SUM && rhs->u.sum.op == OP_ADD && !rhs->u.sum.def) rhs = rhs->u.sum.a;
  p->rhs = p->lhs ? nt_map_expr(a, rhs, rename_node, &r) : NULL;
  return p->rhs && !r.failed ? p : NULL;
}

/* x op y (op + or -; y NULL: x, negated when op is -), typed as `like`. */
static Expr *combine(Arena *a, OpKind op, Expr *x, Expr *y, const Expr *like) {
  Expr *e = y ? nt_op_node(a, op, x, y, like->col)
              : op == OP_SUB ? nt_op_node(a, OP_NEG, x, NULL, like->col) : x;
  if (e) e->dtype = like->dtype;
  return e;
}

bool nt_sequence_why_not(const Assignment *as, char *why, size_t len) {
  Term t[NT_SEQ_MAX];
  int n = 0;
  const TensorDecl *out = &as->tensors[0]->decl;
  const char *no = NULL;
  if (as->semiring) no = "under a semiring the output's update is its add, not +";
  else if (lv_format_has_sparse(&out->format) || as->old_output)
    no = "the output is sparse (its pattern would be assembled twice)";
  else if (nt_reads_tensor(as->rhs, 0)) no = "the right-hand side reads the output";
  else if (!collect_terms(as->rhs, false, t, &n, NT_SEQ_MAX) || n < 2)
    no = n < 2 ? "the right-hand side is not a sum or difference of terms"
               : "the right-hand side has more terms than a sequence takes (16)";
  for (int v = 0; !no && v < as->nindices; v++)
    if (nt_is_root_reduction(as, as->indices[v]))
      no = "an index is summed over the whole right-hand side (one loop nest already)";
  int sums = 0;
  for (int k = 0; !no && k < n; k++) {
    const Expr *e = t[k].e;
    if (e->kind != EX_SUM) continue;
    if (e->u.sum.op != OP_ADD || e->u.sum.def) {
      snprintf(why, len, "the term reducing over %s reduces by %s, but the statements after "
               "the first update the output by +", e->u.sum.iv->name, nt_sum_name(e));
      return false;
    }
    sums++;
  }
  if (!no && sums == 0) no = "no term sums over an index of its own";
  if (no) snprintf(why, len, "%s", no);
  return no == NULL;
}

int nt_sequence_split(Arena *a, const Assignment *as, Assignment **parts, Diag *d) {
  char why[160];
  if (!nt_sequence_why_not(as, why, sizeof why))
    return diag_error(d, TJ_ERR_UNSUPPORTED, "sequence(): %s", why), 0;
  Term t[NT_SEQ_MAX];
  int n = 0, np = 0;
  collect_terms(as->rhs, false, t, &n, NT_SEQ_MAX);
  Expr *rest = NULL;   /* the terms without a sum of their own, in order */
  for (int k = 0; k < n; k++)
    if (t[k].e->kind != EX_SUM) {
      Expr *c = nt_copy_expr(a, t[k].e);
      if (!c) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), 0;
      rest = !rest ? combine(a, t[k].neg ? OP_SUB : OP_ADD, c, NULL, as->rhs)
                   : combine(a, t[k].neg ? OP_SUB : OP_ADD, rest, c, as->rhs);
      if (!rest) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), 0;
    }
  if (rest && !(parts[np++] = statement(a, as, rest, as->accumulate)))
    return diag_error(d, TJ_ERR_NOMEM, "out of memory"), 0;
  for (int k = 0; k < n; k++) {
    if (t[k].e->kind != EX_SUM) continue;
    Expr *top = (Expr *)t[k].e;   /* its outermost sums become the root */
    if (t[k].neg) {                  /* -(sum(k, e)) is the root sum of -e */
      while (top->kind == EX_SUM && top->u.sum.op == OP_ADD) top = top->u.sum.a;
      top = combine(a, OP_SUB, top, NULL, top);
    }
    if (!top || !(parts[np] = statement(a, as, top, np > 0 || as->accumulate)))
      return diag_error(d, TJ_ERR_NOMEM, "out of memory"), 0;
    np++;
  }
  return np;
}

Cin *cin_sequence(Arena *a, Cin *first, Cin *second) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_SEQUENCE;
  c->u.seq.first = first;
  c->u.seq.second = second;
  return c;
}
