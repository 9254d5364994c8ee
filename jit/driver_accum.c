/* `+=` into a sparse output from a sum below its indices (SpGEMM
 * A(i,j) += B(i,k) * C(k,j)) as two kernels.
 *
 * The union form `A = A_old + sum_k(...)` nests the sum inside the loop
 * over j (the sum is over a subexpression), so j runs over its whole
 * extent and every column of a row is stored. Here the sum is computed on
 * its own into a temporary T (the SpGEMM kernel: i, k, j through a
 * workspace, so T holds exactly the product's pattern), and the kernel
 * the caller gets is `A(i,j) += T(i,j)`, the union of A's pattern and T's
 * (drv_front_end's += rewrite). T's format is the first of a list (A's
 * own, then other level lists and mode orders: t_formats), each tried as
 * scheduled and, unscheduled, with its loops in its level order (the
 * operands converted to fit: level_reorder), for which both kernels pass
 * lower_plan_output_exact: CSR and CSC SpGEMM into a T of A's format,
 * a DCSR T for COO and dense-tail outputs (no workspace into their last
 * level). A run evaluates T (the compile's, its arrays kept from the last
 * run, unless a concurrent run holds it), then runs the union kernel in the
 * phase asked for: ASSEMBLE keeps A's values on the union, COMPUTE adds T's, as for
 * any += into a sparse output. Where no format passes, tj_compile keeps
 * the union form. A plain `=` whose own kernel would store coordinates
 * where the rhs is absent (SpGEMM into CSC, DCSC or COO over CSR
 * operands: the inner-product order its levels ask for visits every
 * (j, i)) is first compiled in the output's level order
 * (drv_accum_level_schedule: Gustavson's loops straight into A, the
 * operands converted to fit: CSC and DCSC over CSR), and takes the same
 * route with `A(i,j) = T(i,j)` only where that is not exact either (COO:
 * no workspace into its singleton level).
 *
 * The split reads the checked tree (drv_notation: the sums placed by
 * ir/sums.c, `+=` and the semiring's + and * as written): each reduction
 * node over the output's indices whose absence reaches the rhs's value
 * (through +, -, a factor, a unary minus, a numerator, max(x, 0): no
 * exp(), no denominator) becomes a temporary T<m> (an exact Gustavson
 * kernel), and the kernel the caller gets is the rhs over them:
 * `A(i,j) = 2 * (B(i,k) * C(k,j) + D(i,j))` is `A_sum(i,j) = sum(k,
 * B(i,k) * C(k,j))` then `A(i,j) = 2 * (A_sum(i,j) + D(i,j))`, the union
 * of the product's pattern and D's (in one kernel the sum sits inside the
 * loop over j, which then walks every column of a row). A sum over the
 * whole rhs (a root reduction; an index used in two terms is one sum over
 * both and the terms between, ir/sums.c) is one temporary of all of it.
 * Only reductions that reduce nothing to an absent entry split (a sum; not
 * max, whose -inf a sparse T would read as 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/level.h"
#include "driver.h"

#define ACC_NAME 64
#define ACC_MAX_TERMS 4   /* temporaries: additive terms of the rhs with a sum */

struct DrvAccum {
  int nsum;
  tj_kernel *sum[ACC_MAX_TERMS];   /* T<m> = term m, owned (not in the context's list) */
  tj_tensor *t[ACC_MAX_TERMS];     /* the compile's T<m>, owned: a run holding t_lock
                                      evaluates into them (their arrays kept between
                                      runs), any other run into its own */
  pthread_mutex_t t_lock;
  int norig;
  tj_tensor *orig[NT_MAX_TENSORS];   /* the compile's operands */
  char out[ACC_NAME];                /* the output's name: a run's T<m> take its dims */
};


/* ---- the split, on the checked tree (drv_notation: sums placed) ---- */

/* One assignment read for the route: its tree as written (`+=` kept, the
 * semiring not applied), the output, and the nodes that become
 * temporaries, each an exact sum: a reduction node (EX_SUM) over the
 * output's indices reached from the root through operators that keep its
 * absence (a scalar factor, a unary minus, a sum, max(x, 0), ...). Or the
 * whole rhs, when a sum covers it (a root reduction: `B(i,k) * C(k,j)`,
 * or an index used in two terms, which ir/sums.c sums over both and what
 * lies between), or when no node qualifies. */
struct DrvSplit {
  Arena arena;
  bool nomem;                       /* reading it ran out of memory */
  Assignment *as;
  tj_tensor *out;
  bool whole;                       /* T = the whole rhs */
  int nsum;                         /* temporaries: 0 when the rhs has no sum */
  const Expr *term[ACC_MAX_TERMS];  /* !whole: T<m> = term[m] */
};

/* Whether a sum in operand c of e reaches e's value as it is, zero where
 * it is absent: e's algebra (under the semiring) keeps c's zeros, so a
 * temporary absent where the sum reduces nothing reads the same and the
 * lattice over it stays exact (not exp(), log(), a denominator). */
static bool keeps_absence(const Assignment *as, const Expr *e, const Expr *c) {
  switch (nt_expr_algebra(e, as->semiring)) {
  case OA_INTERSECT: case OA_UNION: case OA_KEEP: return true;
  case OA_NUMERATOR: case OA_LEFT: return c == e->u.op.a;
  case OA_RIGHT: case OA_EXCEPT: return c == e->u.op.b;
  case OA_DENSE: return false;
  }
  return false;
}

/* Whether e uses v outside every reduction over v. */
static bool free_in(const Expr *e, const IndexVar *v) {
  if (e->kind == EX_SUM && e->u.sum.iv == v) return false;
  if (e->kind == EX_ACCESS) return nt_uses_index(e, v);
  Expr *k[2];
  int n = nt_children(e, k);
  for (int c = 0; c < n; c++)
    if (free_in(k[c], v)) return true;
  return false;
}

/* Whether reduction node e can be a temporary: it is over exactly the
 * output's indices (T<m> has A's shape), and what it reduces nothing to
 * is absent (a sum, or under plus.times an identity of 0; max over
 * nothing is -inf, which a sparse T would read as 0). */
static bool exact_sum(const Assignment *as, const Expr *e) {
  if (!(e->u.sum.op == OP_ADD && !e->u.sum.def) &&
      (as->semiring || nt_sum_identity(e) != 0))
    return false;
  for (int v = 0; v < as->nindices; v++)
    if (!nt_uses_index(as->lhs, as->indices[v]) && free_in(e, as->indices[v])) return false;
  for (int m = 0; m < as->lhs->u.access.n; m++)
    if (!nt_uses_index(e, as->lhs->u.access.idx[m])) return false;
  return true;
}

/* Collects the exact sums of e (a node whose absence reaches the rhs's
 * value) into s; false past ACC_MAX_TERMS. */
static bool collect_sums(DrvSplit *s, const Expr *e) {
  if (e->kind == EX_SUM && exact_sum(s->as, e)) {
    if (s->nsum == ACC_MAX_TERMS) return false;
    s->term[s->nsum++] = e;
    return true;
  }
  if (e->kind != EX_OP) return true;
  Expr *k[2];
  int n = nt_children(e, k);
  for (int c = 0; c < n; c++)
    if (keeps_absence(s->as, e, k[c]) && !collect_sums(s, k[c])) return false;
  return true;
}

/* Whether the rhs has an index the output lacks. */
static bool has_sum(const Assignment *as) {
  for (int v = 0; v < as->nindices; v++)
    if (nt_is_reduction_var(as, as->indices[v])) return true;
  return false;
}

/* Reads expr into s (arena_free(&s->arena) releases it): false when it
 * does not check (the usual route then says why) or its output is no
 * operand. */
static bool split_init(DrvSplit *s, const char *expr, tj_tensor *const *ops, int n,
                       const tj_options *o) {
  *s = (DrvSplit){0};
  arena_init(&s->arena);
  Diag d;
  diag_init(&d);
  s->as = drv_notation(&s->arena, expr, ops, n, o, &d);
  s->nomem = d.status == TJ_ERR_NOMEM || s->arena.failed;
  if (!s->as || s->nomem) return false;
  s->out = drv_operand_named(ops, n, s->as->tensors[0]->name);
  if (!s->out || !has_sum(s->as)) return s->out != NULL;
  for (int v = 0; v < s->as->nindices; v++)
    s->whole |= nt_is_root_reduction(s->as, s->as->indices[v]);
  if (!s->whole && (!collect_sums(s, s->as->rhs) || s->nsum == 0)) s->whole = true;
  if (s->whole) s->nsum = 1;
  return true;
}

tj_status drv_split_read(const char *expr, tj_tensor *const *ops, int n, const tj_options *o,
                         DrvSplit **out) {
  *out = NULL;
  bool sparse = false;   /* every route it serves has a sparse operand */
  for (int k = 0; k < n && !sparse; k++)
    sparse = ops[k] && lv_format_has_sparse(tj_tensor_format(ops[k]));
  if (!sparse) return TJ_OK;
  DrvSplit *s = malloc(sizeof *s);
  if (!s) return rt_set_error(TJ_ERR_NOMEM, "out of memory");
  if (split_init(s, expr, ops, n, o)) {
    *out = s;
    return TJ_OK;
  }
  bool nomem = s->nomem;
  drv_split_free(s);
  return nomem ? rt_set_error(TJ_ERR_NOMEM, "out of memory") : TJ_OK;
}

void drv_split_free(DrvSplit *s) {
  if (!s) return;
  arena_free(&s->arena);
  free(s);
}

const tj_tensor *drv_split_output(const DrvSplit *s) { return s ? s->out : NULL; }

bool drv_split_accumulates(const DrvSplit *s) { return s && s->as->accumulate; }

/* The indices term m reduces over (the rhs's when whole), in first-use
 * order; returns how many. */
static int term_sums(const DrvSplit *s, int m, const IndexVar **out) {
  int n = 0;
  for (int v = 0; v < s->as->nindices; v++) {
    const IndexVar *iv = s->as->indices[v];
    if (nt_is_reduction_var(s->as, iv) && (s->whole || nt_uses_index(s->term[m], iv)))
      out[n++] = iv;
  }
  return n;
}

/* Whether s's rhs is more than one temporary (a term without a sum
 * beside those with, a factor, a function). */
static bool sum_beside_term(const DrvSplit *s) {
  return !s->whole && !(s->nsum == 1 && s->term[0] == s->as->rhs);
}

bool drv_accum_wanted(const DrvSplit *s, bool accumulate) {
  if (!s || s->nsum == 0 || s->as->accumulate != accumulate) return false;
  const tj_tensor *out = s->out;
  if (out->blocked || out->base || !lv_format_has_sparse(tj_tensor_format(out))) return false;
  /* `=`: only an output whose last level is sparse, a matrix (SpGEMM into
   * CSC, DCSC, COO) or, beside a term without a sum, any order from 2 (a
   * contraction plus a tensor, whose own kernel walks the term's loops
   * over their whole extent). Elsewhere the exactness check is stricter
   * than the lattice's pattern (a dense tail's whole rows, TTM's fibers
   * are the semantics' own), and the route would store less than it. */
  const tj_format *f = tj_tensor_format(out);
  return accumulate || (f->order >= 2 && !lv_at(f, f->order - 1, LV_FULL) &&
                        (f->order == 2 || sum_beside_term(s)));
}

tj_kernel *drv_accum_sum(const DrvAccum *a, int m) {
  return m >= 0 && m < a->nsum ? a->sum[m] : NULL;
}

/* Drops the temporaries' kernels and tensors. */
static void drop_sums(DrvAccum *a) {
  for (int m = 0; m < ACC_MAX_TERMS; m++) {
    drv_kernel_drop(a->sum[m]);
    tj_tensor_free(a->t[m]);
    a->sum[m] = NULL, a->t[m] = NULL;
  }
}

void drv_accum_free(DrvAccum *a) {
  if (!a) return;
  drop_sums(a);
  pthread_mutex_destroy(&a->t_lock);
  free(a);
}

/* "<prefix><name><middle><idx><suffix>" (malloc'd). */
#define ACC_MAX_FORMATS (1 + 3 * 7)   /* A's own; 3 level lists x (A's order, 6 others) */

/* Steps m (n modes) to the next permutation in lexicographic order; false
 * after the last. */
static bool next_order(int32_t *m, int n) {
  int i = n - 2;
  while (i >= 0 && m[i] >= m[i + 1]) i--;
  if (i < 0) return false;
  int j = n - 1;
  while (m[j] <= m[i]) j--;
  int32_t t = m[i];
  m[i] = m[j], m[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) t = m[a], m[a] = m[b], m[b] = t;
  return true;
}

/* Adds f to out unless it is there or all dense (no pattern to keep). */
/* T takes the default widths, not A's: a count past A's narrow posWidth is
 * then refused where A is written, naming A (it named the temporary). */
static void add_format(tj_format *out, int *n, const tj_format *f) {
  if (!lv_format_has_sparse(f)) return;
  for (int k = 0; k < *n; k++)
    if (!strcmp(out[k].levels, f->levels) &&
        !memcmp(out[k].mode_order, f->mode_order, (size_t)f->order * sizeof *f->mode_order))
      return;
  out[*n] = *f;
  out[*n].pos_width = out[*n].crd_width = 0;
  ++*n;
}

/* The formats T is tried in, best first, without repeats: A's own (the
 * union then reads T as stored); then, in A's mode order, in dim order
 * and (up to 3 modes) in every other, three level lists: A's; compressed
 * below A's first level (CSR or `dss` under a dense one, else DCSR or
 * CSF, so that the union of a COO or dense-tail A walks no dense loop
 * A's first level would store); all compressed. Returns how many. */
static int t_formats(const tj_format *a, tj_format out[ACC_MAX_FORMATS]) {
  int n = 0, order = a->order;
  char lv[3][TJ_MAX_ORDER_PUBLIC + 1] = {{0}};
  memcpy(lv[0], a->levels, (size_t)order);
  for (int l = 0; l < order; l++)
    lv[1][l] = l || !lv_at(a, 0, LV_FULL) ? 's' : 'd', lv[2][l] = 's';
  add_format(out, &n, a);
  tj_format f = tj_format_dense(order);
  memcpy(f.mode_order, a->mode_order, sizeof f.mode_order);
  for (int m = -1; m < 6; m++) {   /* -1: A's mode order; then each in turn */
    if (m == 0) for (int l = 0; l < order; l++) f.mode_order[l] = l;
    else if (m > 0 && (order > 3 || !next_order(f.mode_order, order))) break;
    for (int c = 0; c < 3; c++) {
      memcpy(f.levels, lv[c], (size_t)order + 1);
      add_format(out, &n, &f);
    }
  }
  return n;
}


/* "reorder(<A's indices by level but the last>, <sums>, <the last>)" into
 * buf: Gustavson's loops in A's level order, the operands converted to
 * fit (CSC SpGEMM over CSR operands converts B and C, not the larger T).
 * False when A's last level is full (a dense tail: no workspace). */
static bool level_reorder(const DrvSplit *s, const tj_format *f, const IndexVar *const *sums,
                          int nsum, char *buf, size_t len) {
  const Expr *lhs = s->as->lhs;
  if (f->order != lhs->u.access.n || lv_at(f, f->order - 1, LV_FULL)) return false;
  size_t at = (size_t)snprintf(buf, len, "reorder(");
  for (int l = 0; l + 1 < f->order && at < len; l++)
    at += (size_t)snprintf(buf + at, len - at, "%s, ", lhs->u.access.idx[f->mode_order[l]]->name);
  for (int k = 0; k < nsum && at < len; k++)
    at += (size_t)snprintf(buf + at, len - at, "%s, ", sums[k]->name);
  if (at < len)
    at += (size_t)snprintf(buf + at, len - at, "%s)",
                           lhs->u.access.idx[f->mode_order[f->order - 1]]->name);
  return at < len;
}

bool drv_accum_level_schedule(const DrvSplit *s, char *buf, size_t len) {
  if (!s || s->nsum == 0) return false;
  const IndexVar *sums[NT_MAX_INDICES];
  int nsum = 0;
  for (int v = 0; v < s->as->nindices; v++)
    if (nt_is_reduction_var(s->as, s->as->indices[v])) sums[nsum++] = s->as->indices[v];
  return level_reorder(s, tj_tensor_format(s->out), sums, nsum, buf, len);
}

/* One compile of the route: the temporaries' names, their kernels' text
 * and sums, and the rest of the rhs over them. */
typedef struct Route {
  tj_context *cx;
  const tj_options *opts;
  const char *schedule;        /* the user's, for the temporaries' kernels */
  DrvSplit *s;
  const tj_tensor *a;          /* the output */
  tj_tensor **ops2;            /* the operands, then the temporaries */
  int n, nsum;
  TensorVar *t[ACC_MAX_TERMS];             /* T<m>, named */
  char *sum_expr[ACC_MAX_TERMS];           /* "T<m>(i,j) = <term m>" */
  const IndexVar *sums[ACC_MAX_TERMS][NT_MAX_INDICES];   /* term m's sum indices */
  int nsums[ACC_MAX_TERMS];
  char *add_expr;              /* "A(i,j) = <rhs, term m as T<m>(i,j)>" (or +=) */
} Route;

/* T<m>'s kernel in format tf (T<m> already among r->ops2): as scheduled
 * and, unscheduled, with its loops in its level order, the first whose
 * output pattern is exact (drv_compile's check). */
static tj_status compile_sum(Route *r, DrvAccum *acc, int m, const tj_format *tf) {
  char reorder[16 * ACC_NAME];
  tj_status st = TJ_ERR_UNSUPPORTED;
  bool scheduled = r->schedule && *r->schedule;
  for (int c = 0; c < 2 && st != TJ_OK && st != TJ_ERR_NOMEM; c++) {
    if (c && (scheduled || !level_reorder(r->s, tf, r->sums[m], r->nsums[m], reorder,
                                          sizeof reorder)))
      continue;
    st = drv_compile(r->cx, r->sum_expr[m], r->ops2, r->n + r->nsum, c ? reorder : r->schedule,
                     r->opts, true, &acc->sum[m]);
  }
  if (st == TJ_OK) drv_kernel_own(acc->sum[m]);
  return st;
}

/* The kernels through temporaries of format tf: T<m> = term m and A = the
 * rhs over them (or +=), each refused unless its output pattern is exact.
 * On success acc->t and acc->sum are set and *out is the last kernel; on
 * failure acc holds none. */
static tj_status compile_through(Route *r, DrvAccum *acc, const tj_format *tf,
                                 tj_kernel **out) {
  const tj_tensor *a = r->a;
  tj_status st = TJ_OK;
  for (int m = 0; m < r->nsum && st == TJ_OK; m++) {
    st = tj_tensor_new(r->t[m]->name, tj_tensor_dtype(a), tj_tensor_order(a), a->dims, tf,
                       &acc->t[m]);
    r->ops2[r->n + m] = acc->t[m];
  }
  for (int m = 0; m < r->nsum && st == TJ_OK; m++) st = compile_sum(r, acc, m, tf);
  if (st == TJ_OK)
    st = drv_compile(r->cx, r->add_expr, r->ops2, r->n + r->nsum, NULL, r->opts, true, out);
  if (st != TJ_OK) drop_sums(acc);
  return st;
}


/* The text of `lhs op rhs` (malloc'd; NULL when out of memory). */
static char *statement_text(const Expr *lhs, const char *op, const Expr *rhs) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  nt_print_expr(f, lhs);
  fprintf(f, " %s ", op);
  nt_print_expr(f, rhs);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* nt_map_expr's replacement: T<m>(A's indices) for term m. */
static Expr *as_temporary(Arena *a, const Expr *e, const void *ctx) {
  const Route *r = ctx;
  const Expr *lhs = r->s->as->lhs;
  for (int m = 0; m < r->nsum; m++)
    if (e == r->s->term[m])
      return nt_access(a, r->t[m], lhs->u.access.n, lhs->u.access.idx, 0);
  return NULL;
}

/* Fills r's names and texts: T<m> = term m (the whole rhs, its root
 * reductions written out, when s is whole) and A = the rhs over the
 * T<m> (or +=); false when out of memory. */
static bool route_texts(Route *r, tj_tensor *const *ops) {
  DrvSplit *s = r->s;
  Assignment *as = s->as;
  const Expr *lhs = as->lhs;
  Expr *tacc[ACC_MAX_TERMS];
  for (int m = 0; m < r->nsum; m++) {
    char name[ACC_NAME + 16];
    snprintf(name, sizeof name, m ? "%s_sum%d" : "%s_sum", as->tensors[0]->name, m);
    while (drv_operand_named(ops, r->n, name) && strlen(name) + 1 < sizeof name) strcat(name, "_");
    TensorVar *t = r->t[m] = arena_alloc(&s->arena, sizeof *t);
    char *copy = arena_alloc(&s->arena, strlen(name) + 1);
    tacc[m] = t && copy ? nt_access(&s->arena, t, lhs->u.access.n, lhs->u.access.idx, 0) : NULL;
    if (!tacc[m]) return false;
    *t = (TensorVar){.id = -1, .name = strcpy(copy, name)};
    r->nsums[m] = term_sums(s, m, r->sums[m]);
  }
  if (s->whole) {   /* nt_print writes the root reductions out */
    const char *aname = as->tensors[0]->name;
    bool acc = as->accumulate;
    as->tensors[0]->name = r->t[0]->name, as->accumulate = false;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f) nt_print(f, as);
    if (f && fclose(f) != 0) free(buf), buf = NULL;
    as->tensors[0]->name = aname, as->accumulate = acc;
    r->sum_expr[0] = buf;
    r->add_expr = statement_text(lhs, acc ? "+=" : "=", tacc[0]);
    return r->sum_expr[0] && r->add_expr;
  }
  for (int m = 0; m < r->nsum; m++) {
    const Expr *body = s->term[m];   /* the sums around it are T<m>'s root reductions */
    while (body->kind == EX_SUM && body->u.sum.implicit && body->u.sum.op == OP_ADD &&
           !body->u.sum.def)
      body = body->u.sum.a;
    if (!(r->sum_expr[m] = statement_text(tacc[m], "=", body))) return false;
  }
  Expr *rest = nt_map_expr(&s->arena, as->rhs, as_temporary, r);
  return rest && (r->add_expr = statement_text(lhs, as->accumulate ? "+=" : "=", rest));
}

tj_status drv_accum_compile(tj_context *cx, DrvSplit *s, tj_tensor *const *ops, int n,
                            const char *schedule, const tj_options *opts, tj_kernel **out) {
  Route r = {.cx = cx, .opts = opts, .schedule = schedule, .s = s, .n = n,
             .nsum = s ? s->nsum : 0};
  if (r.nsum == 0 || n + r.nsum > NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_UNSUPPORTED, "not an assignment with a sum below the output");
  r.a = s->out;
  DrvAccum *acc = calloc(1, sizeof *acc);
  if (acc) pthread_mutex_init(&acc->t_lock, NULL);
  r.ops2 = calloc((size_t)(n + r.nsum), sizeof *r.ops2);
  tj_status st = acc && r.ops2 && route_texts(&r, ops)
                     ? TJ_ERR_UNSUPPORTED : rt_set_error(TJ_ERR_NOMEM, "out of memory");
  if (st == TJ_ERR_UNSUPPORTED) {
    memcpy(r.ops2, ops, (size_t)n * sizeof *r.ops2);
    tj_format tf[ACC_MAX_FORMATS];
    int nf = t_formats(tj_tensor_format(r.a), tf);
    acc->nsum = r.nsum;
    for (int c = 0; c < nf && st != TJ_OK && st != TJ_ERR_NOMEM; c++)
      st = compile_through(&r, acc, &tf[c], out);
  }
  for (int m = 0; m < r.nsum; m++) free(r.sum_expr[m]);
  free(r.add_expr), free(r.ops2);
  if (st == TJ_OK) {
    acc->norig = n;
    memcpy(acc->orig, ops, (size_t)n * sizeof *ops);
    snprintf(acc->out, sizeof acc->out, "%s", s->as->tensors[0]->name);
    (*out)->acc = acc;
  } else {
    drv_accum_free(acc);
  }
  return st;
}

tj_status drv_accum_run(tj_kernel *k, tj_phase phase, tj_tensor *const *operands, int n,
                        bool interpret) {
  DrvAccum *acc = k->acc;
  if (!operands) operands = acc->orig, n = acc->norig;
  if (n + acc->nsum > NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: more than %d operands",
                        NT_MAX_TENSORS - acc->nsum);
  const tj_tensor *a = drv_operand_named(operands, n, acc->out);
  if (!a)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: no operand named %s (the output)",
                        acc->out);
  if (tj_tensor_order(a) != acc->t[0]->order)
    return rt_set_error(TJ_ERR_SHAPE, "tj_kernel_run: output %s has order %d, compiled for %d",
                        acc->out, tj_tensor_order(a), acc->t[0]->order);
  /* this run's temporaries: the compile's, whose arrays the last run grew
   * (a fresh T grows by doubling, each step copied and its pages zeroed:
   * half the run of cage11 += cage11 * cage11), unless another run holds
   * them or the output's dims differ from the compile's; else new ones */
  tj_tensor *ops2[NT_MAX_TENSORS];
  memcpy(ops2, operands, (size_t)n * sizeof *ops2);
  bool own = !memcmp(a->dims, acc->t[0]->dims, (size_t)a->order * sizeof *a->dims) &&
             pthread_mutex_trylock(&acc->t_lock) == 0;
  int made = 0;
  tj_status st = TJ_OK;
  while (made < acc->nsum && st == TJ_OK) {
    const tj_tensor *t = acc->t[made];
    if (own) ops2[n + made] = acc->t[made];
    else st = tj_tensor_new(t->name, (tj_dtype)t->st.dtype, t->order, a->dims, &t->ufmt,
                            &ops2[n + made]);
    made += st == TJ_OK;
  }
  for (int m = 0; m < acc->nsum && st == TJ_OK; m++)
    st = drv_run_one(acc->sum[m], TJ_EVALUATE, ops2, n + acc->nsum, interpret);
  if (st == TJ_OK) st = drv_run_one(k, phase, ops2, n + acc->nsum, interpret);
  if (own) pthread_mutex_unlock(&acc->t_lock);
  else for (int m = 0; m < made; m++) tj_tensor_free(ops2[n + m]);
  return st;
}
