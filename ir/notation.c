/* Index notation nodes: constructors, interning, equality and the printer.
 *
 * Tensor and index variables are interned per assignment by name, so one
 * name is one object with a dense id. The printer uses minimal parentheses
 * that still re-parse to the same tree: operators are left-associative, so
 * a right operand of equal precedence is parenthesized (a - (b - c)); a
 * parsed "-2" is a negative literal, so negating a literal prints "-(2)".
 */
#include "notation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

Assignment *nt_assignment(Arena *a) {
  Assignment *as = arena_alloc(a, sizeof(Assignment));
  if (as) as->root_op = OP_ADD;
  return as;
}

/* The tensor named name in as, created with the next id if new; NULL when
 * the arena is out of memory or as already has NT_MAX_TENSORS tensors. */
TensorVar *nt_tensor(Arena *a, Assignment *as, const char *name) {
  for (int i = 0; i < as->ntensors; i++)
    if (strcmp(as->tensors[i]->name, name) == 0) return as->tensors[i];
  if (as->ntensors >= NT_MAX_TENSORS) return NULL;
  TensorVar *t = arena_alloc(a, sizeof *t);
  char *nm = arena_strdup(a, name);
  if (!t || !nm) return NULL;
  t->id = as->ntensors;
  t->name = nm;
  t->decl.order = -1;
  as->tensors[as->ntensors++] = t;
  return t;
}

bool nt_accumulate_as_union(Arena *a, Assignment *as, const char *name, Diag *d) {
  if (!as->accumulate || as->lhs->kind != EX_ACCESS)
    return TJ_BUG(d, "nt_accumulate_as_union: not an accumulation into an access");
  if (as->ntensors >= NT_MAX_TENSORS)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "'+=' into sparse output %s reads its old "
                      "contents as one more operand, but the expression already has %d "
                      "tensors (NT_MAX_TENSORS)", as->tensors[0]->name, NT_MAX_TENSORS);
  TensorVar *old = nt_tensor(a, as, name);
  const Expr *lhs = as->lhs;
  Expr *x = old ? nt_access(a, old, lhs->u.access.n, lhs->u.access.idx, 0) : NULL;
  Expr *sum = x ? nt_op_node(a, OP_ADD, x, as->rhs, 0) : NULL;
  if (!sum) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  as->rhs = sum;
  as->accumulate = false;
  as->old_output = old->id;
  return true;
}

/* The index named name in as, created if new (extent -1 until checked);
 * NULL when out of memory or as already has NT_MAX_INDICES indices. */
IndexVar *nt_index(Arena *a, Assignment *as, const char *name) {
  for (int i = 0; i < as->nindices; i++)
    if (strcmp(as->indices[i]->name, name) == 0) return as->indices[i];
  if (as->nindices >= NT_MAX_INDICES) return NULL;
  IndexVar *v = arena_alloc(a, sizeof *v);
  char *nm = arena_strdup(a, name);
  if (!v || !nm) return NULL;
  v->id = as->nindices;
  v->name = nm;
  v->extent = -1;
  as->indices[as->nindices++] = v;
  return v;
}

static Expr *new_expr(Arena *a, ExprKind k, int col) {
  Expr *e = arena_alloc(a, sizeof *e);
  if (!e) return NULL;
  e->kind = k;
  e->col = col;
  return e;
}

Expr *nt_access(Arena *a, TensorVar *t, int n, IndexVar *const *idx, int col) {
  if (n < 0 || n > NT_MAX_ORDER) return NULL;
  Expr *e = new_expr(a, EX_ACCESS, col);
  if (!e) return NULL;
  e->u.access.t = t;
  e->u.access.n = n;
  for (int i = 0; i < n; i++) e->u.access.idx[i] = idx[i];
  return e;
}

Expr *nt_literal(Arena *a, double v, bool is_int, int col) {
  Expr *e = new_expr(a, EX_LITERAL, col);
  if (!e) return NULL;
  e->u.lit.value = v;
  e->u.lit.is_int = is_int;
  return e;
}

Expr *nt_op_node(Arena *a, OpKind op, Expr *x, Expr *y, int col) {
  Expr *e = new_expr(a, EX_OP, col);
  if (!e) return NULL;
  e->u.op.id = op;
  e->u.op.a = x;
  e->u.op.b = nt_op(op)->arity == 2 ? y : NULL;
  return e;
}

OpKind nt_expr_op(const Expr *e) { return e->kind == EX_OP ? e->u.op.id : OP_NONE; }

Expr *nt_map_expr(Arena *a, const Expr *e, NtReplace replace, const void *ctx) {
  Expr *c = replace ? replace(a, e, ctx) : NULL;
  if (c) return c;
  if (!(c = arena_alloc(a, sizeof *c))) return NULL;
  *c = *e;
  Expr *k[2];
  int n = nt_children(e, k);
  Expr *r[2] = {NULL, NULL};
  for (int i = 0; i < n; i++)
    if (!(r[i] = nt_map_expr(a, k[i], replace, ctx))) return NULL;
  if (c->kind == EX_OP) c->u.op.a = r[0], c->u.op.b = r[1];
  else if (c->kind == EX_SUM) c->u.sum.a = r[0];
  return c;
}

Expr *nt_copy_expr(Arena *a, const Expr *e) { return nt_map_expr(a, e, NULL, NULL); }

Expr *nt_sum(Arena *a, IndexVar *iv, Expr *x, bool implicit, int col) {
  return nt_reduce(a, OP_ADD, iv, x, implicit, col);
}

Expr *nt_reduce(Arena *a, OpKind op, IndexVar *iv, Expr *x, bool implicit, int col) {
  Expr *e = new_expr(a, EX_SUM, col);
  if (!e) return NULL;
  e->u.sum.iv = iv;
  e->u.sum.a = x;
  e->u.sum.implicit = implicit;
  e->u.sum.op = op;
  return e;
}

bool nt_uses_param(const Expr *e, int k) {
  if (e->kind == EX_ACCESS) return e->u.access.t->id == -1 - k;
  Expr *c[2];
  int n = nt_children(e, c);
  for (int i = 0; i < n; i++)
    if (nt_uses_param(c[i], k)) return true;
  return false;
}

int nt_children(const Expr *e, Expr *kids[2]) {
  switch (e->kind) {
  case EX_ACCESS:
  case EX_LITERAL: return 0;
  case EX_SUM: kids[0] = e->u.sum.a; return 1;
  case EX_OP:
    kids[0] = e->u.op.a;
    kids[1] = e->u.op.b;
    return nt_op(e->u.op.id)->arity;
  }
  return 0;
}

bool nt_reads_tensor(const Expr *e, int id) {
  if (e->kind == EX_ACCESS) return e->u.access.t->id == id;
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++)
    if (nt_reads_tensor(k[i], id)) return true;
  return false;
}

bool nt_uses_index(const Expr *e, const IndexVar *v) {
  if (e->kind == EX_ACCESS) {
    for (int i = 0; i < e->u.access.n; i++)
      if (e->u.access.idx[i] == v) return true;
    return false;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++)
    if (nt_uses_index(k[i], v)) return true;
  return false;
}

bool nt_reduces(const Expr *lhs, const Expr *rhs, const IndexVar *v) {
  return !nt_uses_index(lhs, v) && nt_uses_index(rhs, v);
}

bool nt_is_reduction_var(const Assignment *as, const IndexVar *v) {
  return nt_reduces(as->lhs, as->rhs, v);
}

int nt_sums(const Expr *e, const Expr **out, int max) {
  int n = 0;
  if (e->kind == EX_SUM) {
    if (max > 0) out[0] = e;
    n = 1;
  }
  Expr *k[2];
  int nk = nt_children(e, k);
  for (int i = 0; i < nk; i++)
    n += nt_sums(k[i], out + (n < max ? n : max), max > n ? max - n : 0);
  return n;
}

bool nt_root_reduces(const Expr *lhs, const Expr *rhs, const IndexVar *v) {
  if (!nt_reduces(lhs, rhs, v)) return false;
  const Expr *sums[NT_MAX_INDICES];
  int n = nt_sums(rhs, sums, NT_MAX_INDICES);
  for (int i = 0; i < n && i < NT_MAX_INDICES; i++)
    if (sums[i]->u.sum.iv == v) return false;
  return true;
}

bool nt_is_root_reduction(const Assignment *as, const IndexVar *v) {
  return nt_root_reduces(as->lhs, as->rhs, v);
}

/* The dtypes as the notation sees them: name, integer width (0: a
 * floating dtype; 1: bool, 0/1 values) and whether unsigned. */
static const struct {
  const char *name;
  int bits;
  bool is_unsigned;
} dtypes[TJ_NDTYPES] = {
    [TJ_F64] = {"f64", 0, false}, [TJ_F32] = {"f32", 0, false}, [TJ_I64] = {"i64", 64, false},
    [TJ_I32] = {"i32", 32, false}, [TJ_I16] = {"i16", 16, false}, [TJ_I8] = {"i8", 8, false},
    [TJ_BOOL] = {"bool", 1, false}, [TJ_U64] = {"u64", 64, true}, [TJ_U32] = {"u32", 32, true},
    [TJ_U16] = {"u16", 16, true}, [TJ_U8] = {"u8", 8, true},
};

const char *nt_dtype_name(tj_dtype t) { return (unsigned)t < TJ_NDTYPES ? dtypes[t].name : "?"; }
bool nt_dtype_is_int(tj_dtype t) { return (unsigned)t < TJ_NDTYPES && dtypes[t].bits > 0; }
bool nt_dtype_is_unsigned(tj_dtype t) { return (unsigned)t < TJ_NDTYPES && dtypes[t].is_unsigned; }
int nt_dtype_bits(tj_dtype t) {
  int b = (unsigned)t < TJ_NDTYPES ? dtypes[t].bits : 0;
  return b == 64 && !dtypes[t].is_unsigned ? 0 : b;   /* i64 results are not narrowed */
}

/* ---- equality ---- */

bool nt_expr_equal(const Expr *x, const Expr *y) {
  if (!x || !y) return x == y;
  if (x->kind != y->kind) return false;
  switch (x->kind) {
  case EX_ACCESS:
    if (strcmp(x->u.access.t->name, y->u.access.t->name) != 0 ||
        x->u.access.n != y->u.access.n)
      return false;
    for (int i = 0; i < x->u.access.n; i++)
      if (strcmp(x->u.access.idx[i]->name, y->u.access.idx[i]->name) != 0)
        return false;
    return true;
  case EX_LITERAL:
    return x->u.lit.is_int == y->u.lit.is_int &&
           memcmp(&x->u.lit.value, &y->u.lit.value, sizeof(double)) == 0;
  case EX_OP:
    return x->u.op.id == y->u.op.id && x->u.op.def == y->u.op.def &&
           nt_expr_equal(x->u.op.a, y->u.op.a) && nt_expr_equal(x->u.op.b, y->u.op.b);
  case EX_SUM:
    return x->u.sum.op == y->u.sum.op && x->u.sum.def == y->u.sum.def && strcmp(x->u.sum.iv->name, y->u.sum.iv->name) == 0 &&
           nt_expr_equal(x->u.sum.a, y->u.sum.a);
  }
  return false;
}

bool nt_equal(const Assignment *x, const Assignment *y) {
  return x->accumulate == y->accumulate && nt_expr_equal(x->lhs, y->lhs) &&
         nt_expr_equal(x->rhs, y->rhs);
}

/* ---- printer ---- */

enum { PREC_ATOM = 4 };   /* above every operator's prec (ir/ops.def) */

static int prec_of(const Expr *e) {
  OpKind op = nt_expr_op(e);
  return op == OP_NONE || nt_op(op)->is_call ? PREC_ATOM : nt_op(op)->prec;
}

/* Shortest %g spelling that reads back as v, with a '.' or 'e' so it
 * re-parses as a non-integer literal. */
static void print_double(FILE *out, double v) {
  char buf[64];
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (isfinite(v) && !strpbrk(buf, ".e")) strcat(buf, ".0");
  fputs(buf, out);
}

static void print_literal(FILE *out, const Expr *e) {
  double v = e->u.lit.value;
  if (e->u.lit.is_int && isfinite(v) && v == nearbyint(v))
    fprintf(out, "%.0f", v);
  else
    print_double(out, v);
}

static void print_access(FILE *out, const Expr *e) {
  fputs(e->u.access.t->name, out);
  if (e->u.access.n == 0) return;
  fputc('(', out);
  for (int i = 0; i < e->u.access.n; i++)
    fprintf(out, "%s%s", i ? "," : "", e->u.access.idx[i]->name);
  fputc(')', out);
}

/* "sum(j, " or "reduce(min, j, ". */
static void print_reduce(FILE *out, OpKind op, const NtDef *def, const IndexVar *iv) {
  if (def) fprintf(out, NT_REDUCE_NAME "(%s, %s, ", def->name, iv->name);
  else if (op == OP_ADD) fprintf(out, NT_SUM_NAME "(%s, ", iv->name);
  else fprintf(out, NT_REDUCE_NAME "(%s, %s, ", nt_op(op)->spelling, iv->name);
}

double nt_reduction_identity(OpKind op, const NtDef *def) {
  return def ? def->identity : nt_op(op)->identity;
}

double nt_root_identity(const Assignment *as) {
  return nt_reduction_identity(as->root_op, as->root_def);
}

double nt_sum_identity(const Expr *e) {
  return nt_reduction_identity(e->u.sum.op, e->u.sum.def);
}

const char *nt_sum_name(const Expr *e) {
  return e->u.sum.def ? e->u.sum.def->name : nt_op(e->u.sum.op)->spelling;
}

static void print_prec(FILE *out, const Expr *e, int ctx);

/* An operator node as its row says: name(x[, y]) for a function (a
 * definition's call by the definition's name), x op y infix, op x prefix
 * ("-2" would read as a literal: a literal operand is parenthesized). */
static void print_op(FILE *out, const Expr *e) {
  const NtOp *o = nt_op(e->u.op.id);
  const Expr *x = e->u.op.a, *y = e->u.op.b;
  if (o->is_call) {
    fprintf(out, "%s(", e->u.op.def ? e->u.op.def->name : o->spelling);
    print_prec(out, x, 0);
    if (y) fputs(", ", out), print_prec(out, y, 0);
    fputc(')', out);
  } else if (o->arity == 1) {
    fputs(o->spelling, out);
    print_prec(out, x, x->kind == EX_LITERAL ? PREC_ATOM + 1 : o->prec);
  } else {
    print_prec(out, x, o->prec);
    fprintf(out, " %s ", o->spelling);
    print_prec(out, y, o->prec + 1);
  }
}

/* Prints e, parenthesized when its precedence is below ctx. */
static void print_prec(FILE *out, const Expr *e, int ctx) {
  bool paren = prec_of(e) < ctx;
  if (paren) fputc('(', out);
  switch (e->kind) {
  case EX_ACCESS: print_access(out, e); break;
  case EX_LITERAL: print_literal(out, e); break;
  case EX_OP: print_op(out, e); break;
  case EX_SUM:
    print_reduce(out, e->u.sum.op, e->u.sum.def, e->u.sum.iv);
    print_prec(out, e->u.sum.a, 0);
    fputc(')', out);
    break;
  }
  if (paren) fputc(')', out);
}

void nt_print_expr(FILE *out, const Expr *e) { print_prec(out, e, 0); }

char *nt_expr_text(const Expr *e) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  nt_print_expr(f, e);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

void nt_print_defs(FILE *out, const NtDefs *defs) {
  for (int k = 0; defs && k < defs->n; k++) {
    const NtDef *d = &defs->d[k];
    fprintf(out, "def %s(%s%s%s) = ", d->name, d->param[0], d->arity == 2 ? ", " : "",
            d->arity == 2 ? d->param[1] : "");
    nt_print_expr(out, d->body);
    if (d->left) fputs(" left ", out), nt_print_expr(out, d->left);
    if (d->right) fputs(" right ", out), nt_print_expr(out, d->right);
    if (d->reduces) fprintf(out, " identity %g", d->identity);
    if (d->laws & OL_COMM) fputs(" commutative", out);
    if (d->laws & OL_ASSOC) fputs(" associative", out);
    fputc('\n', out);
  }
}

void nt_print(FILE *out, const Assignment *as) {
  nt_print_expr(out, as->lhs);
  fputs(as->accumulate ? " += " : " = ", out);
  /* Root reductions other than a sum are written out, implicit ones too:
   * y(i) = A(i,j) + x(j) would read as a sum over j. */
  IndexVar *roots[NT_MAX_INDICES];
  int n = 0;
  for (int k = 0; k < as->nroot_sums; k++) roots[n++] = as->root_sums[k];
  for (int v = 0; v < as->nindices && (as->root_op != OP_ADD || as->root_def); v++) {
    bool listed = false;
    for (int k = 0; k < as->nroot_sums; k++) listed |= as->root_sums[k] == as->indices[v];
    if (!listed && nt_is_root_reduction(as, as->indices[v])) roots[n++] = as->indices[v];
  }
  for (int k = 0; k < n; k++) print_reduce(out, as->root_op, as->root_def, roots[k]);
  nt_print_expr(out, as->rhs);
  for (int k = 0; k < n; k++) fputc(')', out);
}
