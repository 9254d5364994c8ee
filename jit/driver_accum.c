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
 * A rhs of several additive terms takes one temporary per term with a sum
 * (T<m> = term m) and the kernel the caller gets is the rest over them:
 * `A(i,j) = B(i,k) * C(k,j) + D(i,j)` is `A_sum(i,j) = B(i,k) * C(k,j)`
 * then `A(i,j) = A_sum(i,j) + D(i,j)`, the union of the product's pattern
 * and D's (in one kernel the sum sits inside the loop over j, which then
 * walks every column of a row).
 */
#include <ctype.h>
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

static const char *ident(const char *p, char *buf) {
  size_t k = 0;
  while (isalnum((unsigned char)*p) || *p == '_') {
    if (k + 1 < ACC_NAME) buf[k++] = *p;
    p++;
  }
  buf[k] = 0;
  return p;
}

static const char *skip_ws(const char *p) {
  while (isspace((unsigned char)*p)) p++;
  return p;
}

static tj_tensor *operand_named(tj_tensor *const *ops, int n, const char *name) {
  for (int k = 0; k < n; k++)
    if (ops[k] && !strcmp(tj_tensor_name(ops[k]), name)) return ops[k];
  return NULL;
}

/* The `+=` assignment's parts: the output's name, its index list text
 * `(i,j)` (from its '(' to its ')'), and the rhs; false when expr is no
 * `name(idx) += rhs`. */
typedef struct AccParts {
  char out[ACC_NAME];
  bool accumulate;           /* `+=` (else `=`) */
  const char *idx, *idx_end, *rhs;
  char names[8][ACC_NAME];   /* the output's indices */
  int n;
} AccParts;

static bool parts(const char *expr, AccParts *p) {
  const char *q = skip_ws(expr);
  if (!(isalpha((unsigned char)*q) || *q == '_')) return false;
  q = skip_ws(ident(q, p->out));
  if (*q != '(') return false;
  p->idx = q;
  p->n = 0;
  q = skip_ws(q + 1);
  while (*q != ')') {
    if (p->n == 8 || !(isalpha((unsigned char)*q) || *q == '_')) return false;
    q = skip_ws(ident(q, p->names[p->n++]));
    if (*q == ',') q = skip_ws(q + 1);
    else if (*q != ')') return false;
  }
  p->idx_end = q + 1;
  q = skip_ws(q + 1);
  p->accumulate = q[0] == '+' && q[1] == '=';
  if (!p->accumulate && (q[0] != '=' || q[1] == '=')) return false;
  p->rhs = q + (p->accumulate ? 2 : 1);
  return true;
}

/* Skips the number at q (digits, '.', an exponent's sign). */
static const char *skip_number(const char *q) {
  const char *start = q;
  while (isalnum((unsigned char)*q) || *q == '.' ||
         ((*q == '+' || *q == '-') && q > start && (q[-1] == 'e' || q[-1] == 'E')))
    q++;
  return q;
}

static bool starts_number(const char *q) {
  return isdigit((unsigned char)*q) || (*q == '.' && isdigit((unsigned char)q[1]));
}

/* The names in [b, e) of indices the output lacks, distinct, in order of
 * appearance (at most 8): identifiers that are no operand, no function
 * (followed by '(') and no number. A false positive (a reduction's
 * operator name) only costs the temporary. Returns how many. */
static int sum_names_in(const AccParts *p, const char *b, const char *e, tj_tensor *const *ops,
                        int n, char names[8][ACC_NAME]) {
  int count = 0;
  for (const char *q = b; q < e && *q;) {
    if (starts_number(q)) {
      q = skip_number(q);
      continue;
    }
    if (!(isalpha((unsigned char)*q) || *q == '_')) {
      q++;
      continue;
    }
    char name[ACC_NAME];
    q = ident(q, name);
    if (*skip_ws(q) == '(' || operand_named(ops, n, name)) continue;
    bool seen = false;
    for (int k = 0; k < p->n && !seen; k++) seen = !strcmp(p->names[k], name);
    for (int k = 0; k < count && !seen; k++) seen = !strcmp(names[k], name);
    if (!seen && count < 8) strcpy(names[count++], name);
  }
  return count;
}

static int sum_names(const AccParts *p, tj_tensor *const *ops, int n, char names[8][ACC_NAME]) {
  return sum_names_in(p, p->rhs, p->rhs + strlen(p->rhs), ops, n, names);
}

/* One additive term of the rhs: its text [b, e) and the sign before it
 * ('+', '-', or 0 for the first). */
typedef struct Term {
  const char *b, *e;
  char sign;
} Term;

#define ACC_MAX_SPLIT 16

/* The end of the parenthesized group opening at q (the ')' matching it),
 * NULL if unmatched. */
static const char *group_end(const char *q) {
  for (int depth = 0; *q; q++) {
    depth += *q == '(' ? 1 : *q == ')' ? -1 : 0;
    if (!depth) return q;
  }
  return NULL;
}

/* The rhs's additive terms, as the parser reads them (`expr := term (('+'
 * | '-') term)*`): split at each + or - outside parentheses that follows an
 * operand (a name, a number, a ')'), so a leading sign stays with its
 * term; a rhs wrapped in parentheses as a whole is split inside them.
 * Returns how many, 0 past ACC_MAX_SPLIT. */
static int split_terms(const char *rhs, Term out[ACC_MAX_SPLIT]) {
  const char *end = rhs + strlen(rhs), *b = skip_ws(rhs);
  while (*b == '(') {
    const char *close = group_end(b);
    if (!close || *skip_ws(close + 1)) break;
    end = close;
    b = skip_ws(b + 1);
  }
  int n = 0, depth = 0;
  bool operand = false;   /* the last token ends an operand */
  out[0] = (Term){b, NULL, 0};
  for (const char *q = b; q < end;) {
    if (starts_number(q) || isalpha((unsigned char)*q) || *q == '_') {
      char name[ACC_NAME];
      q = starts_number(q) ? skip_number(q) : ident(q, name);
      operand = true;
      continue;
    }
    if ((*q == '+' || *q == '-') && depth == 0 && operand) {
      if (n + 1 == ACC_MAX_SPLIT) return 0;
      out[n].e = q;
      out[++n] = (Term){q + 1, NULL, *q};
    }
    depth += *q == '(' ? 1 : *q == ')' ? -1 : 0;
    if (!isspace((unsigned char)*q)) operand = *q == ')';
    q++;
  }
  out[n].e = end;
  return n + 1;
}

/* Whether [b, e) holds a reduce(...): its identity (-inf for max) is no
 * absent entry's value, so a temporary that stores no entry where it
 * reduces nothing would read differently beside other terms. */
static bool has_reduce(const char *b, const char *e) {
  for (const char *q = b; q < e;) {
    if (!(isalpha((unsigned char)*q) || *q == '_')) {
      q = starts_number(q) ? skip_number(q) : q + 1;
      continue;
    }
    char name[ACC_NAME];
    q = ident(q, name);
    if (!strcmp(name, "reduce") && *skip_ws(q) == '(') return true;
  }
  return false;
}

/* The terms that go through temporaries: those with an index the output
 * lacks (each one's own sum, so its kernel can take Gustavson's loops and
 * store the term's pattern; the rest of the rhs reads the temporaries as
 * operands). The whole rhs is one term when it has more than
 * ACC_MAX_SPLIT, or more than ACC_MAX_TERMS with a sum, or a term with a
 * sum and a reduce(), or an index summed in two terms (one sum over
 * both, ir/sums.c), or, under a semiring, a difference (its terms add
 * through the semiring's add only).
 * Returns how many (0: no sum). */
static int summed_terms(const AccParts *p, tj_tensor *const *ops, int n,
                        const char *semiring, Term out[ACC_MAX_TERMS]) {
  Term t[ACC_MAX_SPLIT];
  int nt = split_terms(p->rhs, t), count = 0;
  bool whole = nt == 0;
  char seen[8][ACC_NAME];   /* the sum indices of the terms before */
  int nseen = 0;
  for (int k = 0; k < nt && !whole; k++) {
    whole = t[k].sign == '-' && semiring && strcmp(semiring, "plus.times") != 0;
    char names[8][ACC_NAME];
    int nn = sum_names_in(p, t[k].b, t[k].e, ops, n, names);
    if (nn == 0) continue;
    /* An index summed in two terms is one sum over the smallest
     * subexpression holding both (ir/sums.c), which holds every term
     * between them too (B*C + D + E*C adds D once per k): no split. */
    for (int a = 0; a < nn && !whole; a++)
      for (int b = 0; b < nseen && !whole; b++) whole = !strcmp(names[a], seen[b]);
    for (int a = 0; a < nn; a++)   /* past 8, unchecked: no split */
      if (nseen == 8) whole = true;
      else strcpy(seen[nseen++], names[a]);
    if (count == ACC_MAX_TERMS || (nt > 1 && has_reduce(t[k].b, t[k].e))) whole = true;
    else out[count++] = t[k];
  }
  if (!whole) return count;
  out[0] = (Term){p->rhs, p->rhs + strlen(p->rhs), 0};
  return sum_names(p, ops, n, (char[8][ACC_NAME]){{0}}) > 0;
}

/* Whether the rhs has a term without a sum beside one with (B(i,k) *
 * C(k,j) + D(i,j)). */
static bool sum_beside_term(const AccParts *p, tj_tensor *const *ops, int n) {
  Term t[ACC_MAX_SPLIT], s[ACC_MAX_TERMS];
  int nt = split_terms(p->rhs, t), ns = summed_terms(p, ops, n, NULL, s);
  return ns > 0 && ns < nt;
}

bool drv_accum_wanted(const char *expr, tj_tensor *const *ops, int n, bool accumulate) {
  AccParts p;
  if (!parts(expr, &p) || p.accumulate != accumulate) return false;
  tj_tensor *out = operand_named(ops, n, p.out);
  if (!out || out->blocked || out->base || !lv_format_has_sparse(tj_tensor_format(out)))
    return false;
  /* `=`: only an output whose last level is sparse, a matrix (SpGEMM into
   * CSC, DCSC, COO) or, beside a term without a sum, any order from 2 (a
   * contraction plus a tensor, whose own kernel walks the term's loops
   * over their whole extent). Elsewhere the exactness check is stricter
   * than the lattice's pattern (a dense tail's whole rows, TTM's fibers
   * are the semantics' own), and the route would store less than it. */
  const tj_format *f = tj_tensor_format(out);
  if (!accumulate && (f->order < 2 || lv_at(f, f->order - 1, LV_FULL) ||
                      (f->order != 2 && !sum_beside_term(&p, ops, n))))
    return false;
  return sum_names(&p, ops, n, (char[8][ACC_NAME]){{0}}) > 0;
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
static char *join(const char *a, size_t na, const char *b, const char *c, size_t nc,
                  const char *d) {
  size_t len = na + strlen(b) + nc + strlen(d) + 1;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%.*s%s%.*s%s", (int)na, a, b, (int)nc, c, d);
  return s;
}

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
static void add_format(tj_format *out, int *n, const tj_format *f) {
  if (!lv_format_has_sparse(f)) return;
  for (int k = 0; k < *n; k++)
    if (!strcmp(out[k].levels, f->levels) &&
        !memcmp(out[k].mode_order, f->mode_order, (size_t)f->order * sizeof *f->mode_order))
      return;
  out[(*n)++] = *f;
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
  f.pos_width = a->pos_width, f.crd_width = a->crd_width;
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
static bool level_reorder(const AccParts *p, const tj_format *f, char sums[8][ACC_NAME],
                          int nsum, char *buf, size_t len) {
  if (f->order != p->n || lv_at(f, f->order - 1, LV_FULL)) return false;
  size_t at = (size_t)snprintf(buf, len, "reorder(");
  for (int l = 0; l + 1 < f->order && at < len; l++)
    at += (size_t)snprintf(buf + at, len - at, "%s, ", p->names[f->mode_order[l]]);
  for (int k = 0; k < nsum && at < len; k++)
    at += (size_t)snprintf(buf + at, len - at, "%s, ", sums[k]);
  if (at < len)
    at += (size_t)snprintf(buf + at, len - at, "%s)", p->names[f->mode_order[f->order - 1]]);
  return at < len;
}

bool drv_accum_level_schedule(const char *expr, tj_tensor *const *ops, int n, char *buf,
                              size_t len) {
  AccParts p;
  if (!parts(expr, &p)) return false;
  tj_tensor *a = operand_named(ops, n, p.out);
  char sums[8][ACC_NAME];
  int nsum = a ? sum_names(&p, ops, n, sums) : 0;
  return nsum > 0 && level_reorder(&p, tj_tensor_format(a), sums, nsum, buf, len);
}

/* One compile of the route: the temporaries' names, their kernels' text
 * and sums, and the rest of the rhs over them. */
typedef struct Route {
  tj_context *cx;
  const tj_options *opts;
  const char *schedule;        /* the user's, for the temporaries' kernels */
  const AccParts *p;
  const tj_tensor *a;          /* the output */
  tj_tensor **ops2;            /* the operands, then the temporaries */
  int n, nsum;
  char tname[ACC_MAX_TERMS][ACC_NAME + 16];
  char *sum_expr[ACC_MAX_TERMS];           /* "T<m>(i,j) = <term m>" */
  char sums[ACC_MAX_TERMS][8][ACC_NAME];   /* term m's sum indices */
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
    if (c && (scheduled || !level_reorder(r->p, tf, r->sums[m], r->nsums[m], reorder,
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
    st = tj_tensor_new(r->tname[m], tj_tensor_dtype(a), tj_tensor_order(a), a->dims, tf,
                       &acc->t[m]);
    r->ops2[r->n + m] = acc->t[m];
  }
  for (int m = 0; m < r->nsum && st == TJ_OK; m++) st = compile_sum(r, acc, m, tf);
  if (st == TJ_OK)
    st = drv_compile(r->cx, r->add_expr, r->ops2, r->n + r->nsum, NULL, r->opts, true, out);
  if (st != TJ_OK) drop_sums(acc);
  return st;
}

/* Fills r's names and texts for the terms ts (nsum of them); false when
 * out of memory. */
static bool route_texts(Route *r, tj_tensor *const *ops, const char *expr, const Term *ts) {
  const AccParts *p = r->p;
  /* the rest is at most expr, 2 spaces around its operator and each
   * temporary's access in a term's place */
  size_t nidx = (size_t)(p->idx_end - p->idx), len = strlen(expr) + 3;
  for (int m = 0; m < r->nsum; m++) {
    snprintf(r->tname[m], sizeof r->tname[m], m ? "%s_sum%d" : "%s_sum", p->out, m);
    while (operand_named(ops, r->n, r->tname[m]) && strlen(r->tname[m]) + 1 < sizeof r->tname[m])
      strcat(r->tname[m], "_");
    r->sum_expr[m] = join(r->tname[m], strlen(r->tname[m]), "", p->idx, nidx, " = ");
    char *full = r->sum_expr[m] ? join(r->sum_expr[m], strlen(r->sum_expr[m]), "", ts[m].b,
                                       (size_t)(ts[m].e - ts[m].b), "")
                                : NULL;
    free(r->sum_expr[m]);
    r->sum_expr[m] = full;
    if (!full) return false;
    r->nsums[m] = sum_names_in(p, ts[m].b, ts[m].e, ops, r->n, r->sums[m]);
    len += strlen(r->tname[m]) + nidx + 2;
  }
  /* the lhs and its operator, then the rhs with each term's text replaced */
  char *s = r->add_expr = malloc(len);
  if (!s) return false;
  size_t at = (size_t)snprintf(s, len, "%.*s %s ", (int)(p->idx_end - expr), expr,
                               p->accumulate ? "+=" : "=");
  const char *q = p->rhs;
  for (int m = 0; m < r->nsum; m++) {
    at += (size_t)snprintf(s + at, len - at, "%.*s %s%.*s ", (int)(ts[m].b - q), q,
                           r->tname[m], (int)nidx, p->idx);
    q = ts[m].e;
  }
  snprintf(s + at, len - at, "%s", q);
  return true;
}

tj_status drv_accum_compile(tj_context *cx, const char *expr, tj_tensor *const *ops, int n,
                            const char *schedule, const tj_options *opts, tj_kernel **out) {
  AccParts p;
  Term ts[ACC_MAX_TERMS];
  Route r = {.cx = cx, .opts = opts, .schedule = schedule, .p = &p, .n = n};
  if (parts(expr, &p))
    r.nsum = summed_terms(&p, ops, n, opts ? opts->semiring : NULL, ts);
  if (r.nsum == 0 || n + r.nsum > NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_UNSUPPORTED, "not an assignment with a sum below the output");
  r.a = operand_named(ops, n, p.out);
  DrvAccum *acc = calloc(1, sizeof *acc);
  if (acc) pthread_mutex_init(&acc->t_lock, NULL);
  r.ops2 = calloc((size_t)(n + r.nsum), sizeof *r.ops2);
  tj_status st = acc && r.ops2 && route_texts(&r, ops, expr, ts)
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
  if (st != TJ_OK) {
    drv_accum_free(acc);
    return st;
  }
  acc->norig = n;
  memcpy(acc->orig, ops, (size_t)n * sizeof *ops);
  snprintf(acc->out, sizeof acc->out, "%s", p.out);
  (*out)->acc = acc;
  return TJ_OK;
}

tj_status drv_accum_run(tj_kernel *k, tj_phase phase, tj_tensor *const *operands, int n,
                        bool interpret) {
  DrvAccum *acc = k->acc;
  if (!operands) operands = acc->orig, n = acc->norig;
  if (n + acc->nsum > NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: more than %d operands",
                        NT_MAX_TENSORS - acc->nsum);
  const tj_tensor *a = operand_named(operands, n, acc->out);
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
