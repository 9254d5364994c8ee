/* The checker: binds an assignment's tensors to declarations and refuses
 * what cannot be computed, naming the culprit and column.
 *
 * Extents: given extents (-d=i:10) first, then every access in source order
 * (output first); a known dimension fixes its index's extent and any later
 * disagreement is an error naming both places. Unknown dims (-1), also of
 * the output, are filled from the extents. Dtypes: every operand must have
 * the same dtype (no promotion, not even f32 -> f64), except the mask m of
 * mask(m, e) / except(m, e), which has its own; integer literals fit
 * any dtype, float literals only float ones; sqrt/exp/log need floats.
 * Division by an operand with a sparse level is refused (x/0 where the
 * divisor has no entry). Diagonal accesses (B(i,i)) are refused.
 */
#include "level.h"
#include "notation.h"

#include <math.h>

#include <string.h>

typedef struct Checker {
  Assignment *as;
  const TensorDecl *decls;
  int ndecls;
  Diag *d;
  const char *src;
  const char *ext_from[NT_MAX_INDICES];  /* tensor name, or NULL: given */
  int ext_mode[NT_MAX_INDICES];
  int first_col[NT_MAX_INDICES];         /* 0: unused */
  bool used[NT_MAX_INDICES];
  bool bound[NT_MAX_TENSORS];
  bool has_dtype;                         /* an operand fixed dt */
  tj_dtype dt;
  const char *dt_from;
} Checker;

/* Records an error at col (or without a position for builder nodes). */
static bool fail(Checker *ck, tj_status st, int col, const char *msg) {
  if (col <= 0 || !ck->src) return diag_error(ck->d, st, "%s", msg);
  return diag_error_at(ck->d, st, ck->src, col, "%s", msg);
}

#define FAILF(ck, st, col, ...)                                   \
  do {                                                            \
    char msg_[512];                                               \
    snprintf(msg_, sizeof msg_, __VA_ARGS__);                     \
    return fail((ck), (st), (col), msg_);                         \
  } while (0)

static const TensorDecl *find_decl(const Checker *ck, const char *name) {
  for (int i = 0; i < ck->ndecls; i++)
    if (ck->decls[i].name && strcmp(ck->decls[i].name, name) == 0)
      return &ck->decls[i];
  return NULL;
}

/* Binds e's tensor to its declaration (once) and checks the arity. */
static bool bind(Checker *ck, const Expr *e) {
  TensorVar *t = e->u.access.t;
  if (t->id < 0 || t->id >= ck->as->ntensors || ck->as->tensors[t->id] != t)
    return TJ_BUG(ck->d, "tensor not interned in this assignment");
  if (!ck->bound[t->id]) {
    const TensorDecl *dc = find_decl(ck, t->name);
    if (!dc)
      FAILF(ck, TJ_ERR_INVALID, e->col, "unknown tensor '%s'", t->name);
    if (dc->order < 0 || dc->order > NT_MAX_ORDER)
      FAILF(ck, TJ_ERR_INVALID, e->col, "%s has invalid order %d", t->name,
            dc->order);
    t->decl = *dc;
    t->decl.name = t->name;
    ck->bound[t->id] = true;
  }
  if (t->decl.order != e->u.access.n)
    FAILF(ck, TJ_ERR_SHAPE, e->col, "%s has order %d but is accessed with %d "
          "ind%s", t->name, t->decl.order, e->u.access.n,
          e->u.access.n == 1 ? "ex" : "ices");
  return true;
}

/* Takes the extent of e's mode m from its declaration. */
static bool mode_extent(Checker *ck, const Expr *e, int m) {
  IndexVar *v = e->u.access.idx[m];
  const TensorVar *t = e->u.access.t;
  int64_t dim = t->decl.dims[m];
  for (int k = 0; k < m; k++)
    if (e->u.access.idx[k] == v)
      FAILF(ck, TJ_ERR_SHAPE, e->col, "index %s appears twice in %s; "
            "diagonal access is not supported", v->name, t->name);
  if (!ck->used[v->id]) ck->first_col[v->id] = e->col;
  ck->used[v->id] = true;
  if (dim < 0) return true;
  if (v->extent < 0) {
    v->extent = dim;
    ck->ext_from[v->id] = t->name;
    ck->ext_mode[v->id] = m;
    return true;
  }
  if (v->extent == dim) return true;
  if (!ck->ext_from[v->id])
    FAILF(ck, TJ_ERR_SHAPE, e->col, "index %s has extent %lld (given) but "
          "%lld in %s (mode %d)", v->name, (long long)v->extent,
          (long long)dim, t->name, m);
  FAILF(ck, TJ_ERR_SHAPE, e->col, "index %s has extent %lld in %s (mode %d) "
        "but %lld in %s (mode %d)", v->name, (long long)v->extent,
        ck->ext_from[v->id], ck->ext_mode[v->id], (long long)dim, t->name, m);
}

static bool check_access(Checker *ck, const Expr *e, bool is_lhs) {
  if (!bind(ck, e)) return false;
  if (!is_lhs && e->u.access.t->id == 0)
    FAILF(ck, TJ_ERR_INVALID, e->col, "%s is both output and operand",
          e->u.access.t->name);
  for (int m = 0; m < e->u.access.n; m++) {
    IndexVar *v = e->u.access.idx[m];
    if (!v || v->id < 0 || v->id >= ck->as->nindices ||
        ck->as->indices[v->id] != v)
      return TJ_BUG(ck->d, "index not interned in this assignment");
    if (!mode_extent(ck, e, m)) return false;
  }
  return true;
}

/* Visits the accesses of e in source order. */
static bool walk_accesses(Checker *ck, const Expr *e) {
  if (e->kind == EX_ACCESS) return check_access(ck, e, false);
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++)
    if (!walk_accesses(ck, k[i])) return false;
  return true;
}

/* The mode of the output that v indexes, or -1. */
static int lhs_mode(const Assignment *as, const IndexVar *v) {
  for (int m = 0; m < as->lhs->u.access.n; m++)
    if (as->lhs->u.access.idx[m] == v) return m;
  return -1;
}

/* Every used index must have an extent by now. */
static bool settle_extents(Checker *ck) {
  Assignment *as = ck->as;
  for (int i = 0; i < as->nindices; i++) {
    IndexVar *v = as->indices[i];
    if (!ck->used[i] || v->extent >= 0) continue;
    int m = lhs_mode(as, v);
    if (m >= 0 && !nt_uses_index(as->rhs, v))
      FAILF(ck, TJ_ERR_SHAPE, ck->first_col[i], "index %s is unbound: it "
            "appears only on the left and %s's mode %d has no known "
            "dimension", v->name, as->tensors[0]->name, m);
    FAILF(ck, TJ_ERR_SHAPE, ck->first_col[i], "index %s has no extent: no "
          "operand with a known dimension uses it and none was given",
          v->name);
  }
  return true;
}

/* Fills -1 dims of every bound tensor from the accesses' extents. */
static void fill_dims(const Expr *e) {
  if (e->kind == EX_ACCESS) {
    for (int m = 0; m < e->u.access.n; m++)
      if (e->u.access.t->decl.dims[m] < 0)
        e->u.access.t->decl.dims[m] = e->u.access.idx[m]->extent;
    return;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++) fill_dims(k[i]);
}

/* Whether child c of e is a mask: the access m of mask(m, e) or
 * except(m, e), which only says where e is kept, so it may have any dtype
 * (nonzero values keep, as GraphBLAS casts a mask to bool). */
static bool is_mask_child(const Expr *e, int c) {
  OpKind op = nt_expr_op(e);
  return c == 0 && (op == OP_MASK || op == OP_EXCEPT) && e->u.op.a->kind == EX_ACCESS;
}

/* Finds the operands' common dtype: the first operand fixes it (masks
 * have their own). */
static bool operand_dtype(Checker *ck, const Expr *e) {
  switch (e->kind) {
  case EX_ACCESS: {
    const TensorVar *t = e->u.access.t;
    if (!ck->has_dtype) {
      ck->has_dtype = true;
      ck->dt = t->decl.dtype;
      ck->dt_from = t->name;
    } else if (t->decl.dtype != ck->dt) {
      FAILF(ck, TJ_ERR_DTYPE, e->col, "dtype mix %s (%s) and %s (%s) has no "
            "defined promotion", nt_dtype_name(ck->dt), ck->dt_from,
            nt_dtype_name(t->decl.dtype), t->name);
    }
    return true;
  }
  default: {
    Expr *k[2];
    int n = nt_children(e, k);
    for (int i = 0; i < n; i++)
      if (!is_mask_child(e, i) && !operand_dtype(ck, k[i])) return false;
    return true;
  }
  }
}

/* Sets every node's dtype to ck->dt, refusing float-only pieces in an
 * integer expression, and in a bool one (0/1 values: + is or, * is and)
 * subtraction, negation, division and literals other than 0 and 1. */
static bool set_dtype(Checker *ck, Expr *e) {
  e->dtype = ck->dt;
  bool is_int = nt_dtype_is_int(ck->dt), is_bool = ck->dt == TJ_BOOL;
  switch (e->kind) {
  case EX_ACCESS: return true;
  case EX_LITERAL:
    if (is_int && !e->u.lit.is_int)
      FAILF(ck, TJ_ERR_DTYPE, e->col, "dtype mix %s (%s) and f64 (literal "
            "%g) has no defined promotion", nt_dtype_name(ck->dt),
            ck->dt_from, e->u.lit.value);
    if (nt_dtype_is_unsigned(ck->dt) &&
        (e->u.lit.value < 0 || e->u.lit.value >= ldexp(1, nt_dtype_bits(ck->dt))))
      FAILF(ck, TJ_ERR_DTYPE, e->col, "literal %.17g is out of range for %s (0 .. 2^%d - 1)",
            e->u.lit.value, nt_dtype_name(ck->dt), nt_dtype_bits(ck->dt));
    if (is_bool && e->u.lit.value != 0 && e->u.lit.value != 1)
      FAILF(ck, TJ_ERR_DTYPE, e->col, "literal %g in a bool expression (bool literals "
            "are 0 and 1)", e->u.lit.value);
    return true;
  case EX_SUM: return set_dtype(ck, e->u.sum.a);
  default: {
    OpKind op = nt_expr_op(e);
    if (op == OP_EXCEPT && e->u.op.a->kind != EX_ACCESS)
      FAILF(ck, TJ_ERR_INVALID, e->col, "except(m, e): m must be a tensor access (the "
            "pattern e is kept off)");
    if (is_int && nt_op(op)->float_only)
      FAILF(ck, TJ_ERR_DTYPE, e->col, "%s of %s %s expression is undefined "
            "(integers are not promoted to floats)", nt_op(op)->spelling,
            is_bool ? "a" : "an", nt_dtype_name(ck->dt));
    if (is_bool && (op == OP_SUB || op == OP_NEG || op == OP_DIV))
      FAILF(ck, TJ_ERR_DTYPE, e->col, "%s of a bool expression is undefined (bool + is "
            "or, * is and)", op == OP_NEG ? "negation" : nt_op(op)->spelling);
    Expr *k[2];
    int n = nt_children(e, k);
    for (int i = 0; i < n; i++) {
      if (is_mask_child(e, i)) k[i]->dtype = k[i]->u.access.t->decl.dtype;
      else if (!set_dtype(ck, k[i])) return false;
    }
    return true;
  }
  }
}

static bool check_dtypes(Checker *ck) {
  Assignment *as = ck->as;
  const TensorVar *out = as->lhs->u.access.t;
  if (!operand_dtype(ck, as->rhs)) return false;
  if (!ck->has_dtype) {
    ck->dt = out->decl.dtype;
    ck->dt_from = out->name;
  }
  if (!set_dtype(ck, as->rhs)) return false;
  as->lhs->dtype = out->decl.dtype;
  if (out->decl.dtype != ck->dt)
    FAILF(ck, TJ_ERR_DTYPE, as->lhs->col, "output %s is %s but the expression "
          "is %s", out->name, nt_dtype_name(out->decl.dtype),
          nt_dtype_name(ck->dt));
  return true;
}

/* The first access in e to a tensor with a sparse level, or NULL. */
static const Expr *sparse_access(const Expr *e) {
  const Expr *s = NULL;
  switch (e->kind) {
  case EX_ACCESS: return lv_format_has_sparse(&e->u.access.t->decl.format) ? e : NULL;
  default: {
    Expr *k[2];
    int n = nt_children(e, k);
    for (int i = 0; i < n && !s; i++) s = sparse_access(k[i]);
    return s;
  }
  }
}

/* An access to a tensor with a sparse level: absent off its entries (a
 * dense operand counts as nonzero). */
static bool sparse_operand(const Expr *access, const void *ctx) {
  (void)ctx;
  return lv_format_has_sparse(&access->u.access.t->decl.format);
}

/* Refuses x / y where y is zero wherever its sparse operands have no
 * entry (y = S(i,j), or S(i,j) * c): x / 0 there. A divisor like
 * A(i,j) * x(j) + 2 is fine. */
static bool check_division(Checker *ck, const Expr *e) {
  switch (nt_expr_op(e)) {
  case OP_DIV: {
    const Expr *s = nt_expr_zero(e->u.op.b, NULL, &(NtPresence){sparse_operand, NULL}, NULL) ? sparse_access(e->u.op.b)
                                                                   : NULL;
    if (s)
      FAILF(ck, TJ_ERR_UNSUPPORTED, s->col, "division by sparse operand %s "
            "is undefined where %s has no entry", s->u.access.t->name,
            s->u.access.t->name);
  } /* fall through */
  default: {
    Expr *k[2];
    int n = nt_children(e, k);
    for (int i = 0; i < n; i++)
      if (!check_division(ck, k[i])) return false;
    return true;
  }
  }
}

bool nt_check(Arena *a, Assignment *as, const TensorDecl *decls, int ndecls,
              const VarExtent *ext, int next, Diag *d) {
  Checker ck = {.as = as, .decls = decls, .ndecls = ndecls, .d = d,
                .src = as->src};
  if (!as->lhs || !as->rhs || as->lhs->kind != EX_ACCESS ||
      as->lhs->u.access.t->id != 0)
    return TJ_BUG(d, "assignment lhs must be an access to tensor id 0");
  for (int i = 0; i < as->nindices; i++) {
    as->indices[i]->extent = -1;
    for (int k = 0; k < next; k++)
      if (ext[k].name && ext[k].extent >= 0 &&
          strcmp(ext[k].name, as->indices[i]->name) == 0)
        as->indices[i]->extent = ext[k].extent;
  }
  if (!check_access(&ck, as->lhs, true) || !walk_accesses(&ck, as->rhs) ||
      !settle_extents(&ck))
    return false;
  fill_dims(as->lhs);
  fill_dims(as->rhs);
  return check_dtypes(&ck) && check_division(&ck, as->rhs) && nt_place_sums(a, as, d);
}
