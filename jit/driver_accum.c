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
 * level). A run evaluates T, then runs the union kernel in the phase asked
 * for: ASSEMBLE keeps A's values on the union, COMPUTE adds T's, as for
 * any += into a sparse output. Where no format passes, tj_compile keeps
 * the union form. A plain `=` whose own kernel would store coordinates
 * where the rhs is absent (SpGEMM into CSC, DCSC or COO over CSR
 * operands: the inner-product order its levels ask for visits every
 * (j, i)) is first compiled in the output's level order
 * (drv_accum_level_schedule: Gustavson's loops straight into A, the
 * operands converted to fit: CSC and DCSC over CSR), and takes the same
 * route with `A(i,j) = T(i,j)` only where that is not exact either (COO:
 * no workspace into its singleton level).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/level.h"
#include "driver.h"

#define ACC_NAME 64

struct DrvAccum {
  tj_kernel *sum;   /* T = rhs, owned (not in the context's list) */
  tj_tensor *t;     /* the compile's T, owned; each run makes its own, so
                       concurrent runs of the kernel share nothing */
  int norig;
  tj_tensor *orig[NT_MAX_TENSORS];   /* the compile's operands */
  char out[ACC_NAME];                /* the output's name: a run's T takes its dims */
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

/* The names of the rhs's indices the output lacks, distinct, in order of
 * appearance (at most 8): identifiers that are no operand, no function
 * (followed by '(') and no number. A false positive (a reduction's
 * operator name) only costs the temporary. Returns how many. */
static int sum_names(const AccParts *p, tj_tensor *const *ops, int n, char names[8][ACC_NAME]) {
  int count = 0;
  for (const char *q = p->rhs; *q;) {
    if (isdigit((unsigned char)*q) || (*q == '.' && isdigit((unsigned char)q[1]))) {
      while (isalnum((unsigned char)*q) || *q == '.' ||
             ((*q == '+' || *q == '-') && (q[-1] == 'e' || q[-1] == 'E')))
        q++;
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

bool drv_accum_wanted(const char *expr, tj_tensor *const *ops, int n, bool accumulate) {
  AccParts p;
  if (!parts(expr, &p) || p.accumulate != accumulate) return false;
  tj_tensor *out = operand_named(ops, n, p.out);
  if (!out || out->blocked || out->base || !lv_format_has_sparse(tj_tensor_format(out)))
    return false;
  /* `=`: only a matrix whose last level is sparse (SpGEMM into CSC, DCSC,
   * COO). Elsewhere the exactness check is stricter than the lattice's
   * pattern (a union's rows, a dense tail's whole rows, TTM's fibers are
   * the semantics' own), and the route would store less than it. */
  const tj_format *f = tj_tensor_format(out);
  if (!accumulate && (f->order != 2 || lv_at(f, 1, LV_FULL))) return false;
  return sum_names(&p, ops, n, (char[8][ACC_NAME]){{0}}) > 0;
}

tj_kernel *drv_accum_sum(const DrvAccum *a) { return a->sum; }

void drv_accum_free(DrvAccum *a) {
  if (!a) return;
  drv_kernel_drop(a->sum);
  tj_tensor_free(a->t);
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

/* The kernels through a T of format tf: T = rhs (sum_expr, the user's
 * schedule) and A += T (add_expr), each refused unless its output
 * pattern is exact (drv_compile's check). On success acc->t and acc->sum
 * are set and *out is the union's kernel; on failure acc is as it was. */
static tj_status compile_through(tj_context *cx, DrvAccum *acc, const tj_tensor *a,
                                 const char *tname, const tj_format *tf, tj_tensor **ops2,
                                 int n, const char *sum_expr, const char *add_expr,
                                 const char *schedule, const tj_options *opts, tj_kernel **out) {
  tj_status st = tj_tensor_new(tname, tj_tensor_dtype(a), tj_tensor_order(a), a->dims, tf,
                               &acc->t);
  if (st != TJ_OK) return st;
  ops2[n] = acc->t;
  st = drv_compile(cx, sum_expr, ops2, n + 1, schedule, opts, true, &acc->sum);
  if (st == TJ_OK) {
    drv_kernel_own(acc->sum);
    st = drv_compile(cx, add_expr, ops2, n + 1, NULL, opts, true, out);
  }
  if (st != TJ_OK) {
    drv_kernel_drop(acc->sum);
    tj_tensor_free(acc->t);
    acc->sum = NULL, acc->t = NULL;
  }
  return st;
}

tj_status drv_accum_compile(tj_context *cx, const char *expr, tj_tensor *const *ops, int n,
                            const char *schedule, const tj_options *opts, tj_kernel **out) {
  AccParts p;
  if (n >= NT_MAX_TENSORS || !parts(expr, &p))
    return rt_set_error(TJ_ERR_UNSUPPORTED, "not an assignment with a sum below the output");
  tj_tensor *a = operand_named(ops, n, p.out);
  char tname[ACC_NAME + 16];
  snprintf(tname, sizeof tname, "%s_sum", p.out);
  while (operand_named(ops, n, tname) && strlen(tname) + 1 < sizeof tname) strcat(tname, "_");
  DrvAccum *acc = calloc(1, sizeof *acc);
  tj_tensor **ops2 = calloc((size_t)n + 1, sizeof *ops2);
  size_t nidx = (size_t)(p.idx_end - p.idx);
  /* T(i,j) = rhs   and   A(i,j) += T(i,j)   (or A(i,j) = T(i,j)) */
  char *sum_expr = join(tname, strlen(tname), "", p.idx, nidx, "");
  char *sum_full = sum_expr ? join(sum_expr, strlen(sum_expr), " = ", p.rhs, strlen(p.rhs), "")
                            : NULL;
  char *add_expr = sum_expr ? join(expr, (size_t)(p.idx_end - expr),
                                   p.accumulate ? " += " : " = ", sum_expr,
                                   strlen(sum_expr), "") : NULL;
  tj_status st = acc && ops2 && sum_full && add_expr ? TJ_OK
                 : rt_set_error(TJ_ERR_NOMEM, "out of memory");
  if (st == TJ_OK) {
    memcpy(ops2, ops, (size_t)n * sizeof *ops2);
    tj_format tf[ACC_MAX_FORMATS];
    int nf = t_formats(tj_tensor_format(a), tf);
    char sums[8][ACC_NAME], reorder[16 * ACC_NAME];
    int nsum = sum_names(&p, ops, n, sums);
    bool scheduled = schedule && *schedule;
    /* each format as scheduled, then (unscheduled) in its level order */
    st = TJ_ERR_UNSUPPORTED;
    for (int c = 0; c < 2 * nf && st != TJ_OK && st != TJ_ERR_NOMEM; c++) {
      const tj_format *f = &tf[c / 2];
      if (c % 2 && (scheduled || !level_reorder(&p, f, sums, nsum, reorder, sizeof reorder)))
        continue;
      st = compile_through(cx, acc, a, tname, f, ops2, n, sum_full, add_expr,
                           c % 2 ? reorder : schedule, opts, out);
    }
  }
  free(sum_expr), free(sum_full), free(add_expr), free(ops2);
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
  if (n >= NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: more than %d operands",
                        NT_MAX_TENSORS - 1);
  const tj_tensor *t = acc->t, *a = operand_named(operands, n, acc->out);
  if (!a)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: no operand named %s (the output)",
                        acc->out);
  if (tj_tensor_order(a) != t->order)
    return rt_set_error(TJ_ERR_SHAPE, "tj_kernel_run: output %s has order %d, compiled for %d",
                        acc->out, tj_tensor_order(a), t->order);
  /* this run's T: the output's dims, which may differ from the compile's */
  tj_tensor *ops2[NT_MAX_TENSORS], *fresh;
  tj_status st = tj_tensor_new(t->name, (tj_dtype)t->st.dtype, t->order, a->dims, &t->ufmt,
                               &fresh);
  if (st != TJ_OK) return st;
  memcpy(ops2, operands, (size_t)n * sizeof *ops2);
  ops2[n] = fresh;
  st = drv_run_one(acc->sum, TJ_EVALUATE, ops2, n + 1, interpret);
  if (st == TJ_OK) st = drv_run_one(k, phase, ops2, n + 1, interpret);
  tj_tensor_free(fresh);
  return st;
}
