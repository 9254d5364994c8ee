/* Differential kernel checking (see kernel_check.h): JIT vs loop-IR
 * interpreter vs reference interpreter on seeded random operands.
 *
 * The expression text is scanned here (not by the library) for its tensor
 * accesses, so that the test builds operands of the right order and dims
 * without trusting the front end it is testing.
 */
#include "kernel_check.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/driver.h"

#define KC_MAX_IDX 16

typedef struct KcAccess {
  char name[32];
  int order;
  char idx[TJ_MAX_ORDER_PUBLIC][16];
} KcAccess;

typedef struct KcShape {
  int n;                       /* tensors; [0] is the output */
  KcAccess t[KC_MAX_TENSORS];
  bool accumulate;
} KcShape;

uint64_t kc_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double kc_uniform(uint64_t *s) { return (double)(kc_rand(s) >> 11) / 9007199254740992.0; }

static bool is_fn(const char *s, size_t n) {
  OpKind op = nt_op_lookup(s, (int)n, true);
  return op != OP_NONE;
}

static int find_tensor(const KcShape *sh, const char *name) {
  for (int k = 0; k < sh->n; k++)
    if (strcmp(sh->t[k].name, name) == 0) return k;
  return -1;
}

/* Scans expr for NAME or NAME(i,j,...) accesses; the first is the output. */
static bool scan_expr(const char *expr, KcShape *sh) {
  memset(sh, 0, sizeof *sh);
  sh->accumulate = strstr(expr, "+=") != NULL;
  const char *p = expr;
  while (*p) {
    if (!isalpha((unsigned char)*p) && *p != '_') {
      if (isdigit((unsigned char)*p) || *p == '.')
        while (isalnum((unsigned char)*p) || *p == '.') p++;
      else
        p++;
      continue;
    }
    const char *s = p;
    while (isalnum((unsigned char)*p) || *p == '_') p++;
    size_t n = (size_t)(p - s);
    const char *q = p;
    while (*q == ' ') q++;
    if (*q == '(' && is_fn(s, n)) continue;
    if (*q == '(' && n == strlen(NT_SUM_NAME) && strncmp(s, NT_SUM_NAME, n) == 0) {
      /* sum(j, k, e): skip the indices */
      p = q + 1;
      for (;;) {
        const char *b = p;
        while (*b == ' ') b++;
        const char *e = b;
        while (isalnum((unsigned char)*e) || *e == '_') e++;
        while (*e == ' ') e++;
        if (e == b || *e != ',') break;
        p = e + 1;
      }
      continue;
    }
    KcAccess a = {0};
    if (n >= sizeof a.name) return false;
    memcpy(a.name, s, n);
    if (*q == '(') {
      q++;
      while (*q && *q != ')') {
        while (*q == ' ' || *q == ',') q++;
        const char *b = q;
        while (isalnum((unsigned char)*q) || *q == '_') q++;
        if (q == b || a.order >= TJ_MAX_ORDER_PUBLIC || q - b >= 16) return false;
        memcpy(a.idx[a.order++], b, (size_t)(q - b));
        while (*q == ' ') q++;
      }
      if (*q != ')') return false;
      p = q + 1;
    }
    if (find_tensor(sh, a.name) >= 0) continue;
    if (sh->n >= KC_MAX_TENSORS) return false;
    sh->t[sh->n++] = a;
  }
  return sh->n > 0;
}

/* Value of `key=` in a space-separated list ("i=5 j=7"), or NULL. */
static const char *lookup(const char *list, const char *key, char sep) {
  if (!list) return NULL;
  size_t n = strlen(key);
  for (const char *p = list; *p;) {
    while (*p == ' ') p++;
    if (strncmp(p, key, n) == 0 && p[n] == sep) return p + n + 1;
    while (*p && *p != ' ') p++;
  }
  return NULL;
}

static int64_t extent_of(const KcCase *c, const char *idx) {
  const char *v = lookup(c->extents, idx, '=');
  return v ? strtoll(v, NULL, 10) : 5;
}

/* The format spec of tensor name in c->formats, copied into buf ("" dense). */
static void format_of(const KcCase *c, const char *name, char *buf, size_t n) {
  const char *v = lookup(c->formats, name, ':');
  size_t k = 0;
  if (v)
    while (v[k] && v[k] != ' ' && k + 1 < n) k++;
  if (v) memcpy(buf, v, k);
  buf[k] = 0;
}

static bool make_format(const char *spec, int order, int width, tj_format *f) {
  if (!spec || !*spec) {
    *f = tj_format_dense(order);
  } else if (tj_format_parse(spec, f) != TJ_OK) {
    return false;
  }
  bool sparse = strpbrk(f->levels, "suqc") != NULL;
  if (width == 64 && sparse) f->pos_width = f->crd_width = 64;
  return true;
}

static int64_t volume(int order, const int64_t *dims) {
  int64_t v = 1;
  for (int m = 0; m < order; m++) v *= dims[m];
  return v;
}

static void unflatten(int64_t off, int order, const int64_t *dims, int64_t *coord) {
  for (int m = order - 1; m >= 0; m--) {
    coord[m] = dims[m] ? off % dims[m] : 0;
    off = dims[m] ? off / dims[m] : 0;
  }
}

static double random_value(uint64_t *vs, tj_dtype dt, unsigned flags) {
  double sign = (flags & KC_POSITIVE) || kc_rand(vs) & 1 ? 1.0 : -1.0;
  if (dt == TJ_I32 || dt == TJ_I64) return sign * (double)(1 + kc_rand(vs) % 4);
  return sign * (double)(1 + kc_rand(vs) % 16) / 8.0;
}

static bool keep_coord(KcPattern pat, int order, const int64_t *dims,
                       const int64_t *coord) {
  if (order < 2) return true;
  if (pat == KC_EMPTY_ROWS) return coord[0] % 2 == 0 && coord[0] != dims[0] - 1;
  if (pat == KC_ONE_ROW) return coord[0] == dims[0] / 2;
  return true;
}

tj_tensor *kc_tensor(const char *name, const char *fmt, int order,
                     const int64_t *dims, tj_dtype dt, int width,
                     double density, KcPattern pat, uint64_t pseed,
                     uint64_t vseed, unsigned flags) {
  tj_format f;
  tj_tensor *t = NULL;
  if (!make_format(fmt, order, width, &f) ||
      tj_tensor_new(name, dt, order, dims, &f, &t) != TJ_OK)
    return NULL;
  int64_t vol = volume(order, dims), coord[TJ_MAX_ORDER_PUBLIC];
  bool dup_ok = strchr(f.levels, 'u') != NULL || pat == KC_DUPLICATES;
  for (int64_t off = 0; off < vol; off++) {
    unflatten(off, order, dims, coord);
    double u = kc_uniform(&pseed);
    int dups = pat == KC_DUPLICATES && dup_ok && (kc_rand(&pseed) % 3 == 0) ? 2 : 1;
    if (u >= density || !keep_coord(pat, order, dims, coord)) continue;
    for (int k = 0; k < dups; k++)
      if (tj_tensor_insert(t, coord, random_value(&vseed, dt, flags)) != TJ_OK)
        goto fail;
  }
  if (tj_tensor_pack(t) == TJ_OK) return t;
fail:
  tj_tensor_free(t);
  return NULL;
}

/* ---- comparison ---- */

static double tolerance(tj_dtype dt) {
  return dt == TJ_F32 ? 1e-4 : dt == TJ_F64 ? 1e-9 : 0.0;
}

static bool close_enough(double got, double want, double tol) {
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * fmax(1.0, fmax(fabs(got), fabs(want)));
}

static void appendf(char *buf, size_t n, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, n - len, fmt, ap);
  va_end(ap);
}

static void coord_str(char *buf, size_t n, int order, const int64_t *c) {
  size_t k = 0;
  buf[0] = 0;
  k += (size_t)snprintf(buf + k, n - k, "(");
  for (int m = 0; m < order && k < n; m++)
    k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, m ? "," : "", c[m]);
  if (k < n) snprintf(buf + k, n - k, ")");
}

static bool compare_values(const tj_tensor *got, const tj_tensor *want,
                           char *why, size_t n) {
  int order = tj_tensor_order(want);
  int64_t dims[TJ_MAX_ORDER_PUBLIC], coord[TJ_MAX_ORDER_PUBLIC];
  for (int m = 0; m < order; m++) dims[m] = tj_tensor_dim(want, m);
  double tol = tolerance(tj_tensor_dtype(want));
  int bad = 0;
  int64_t vol = volume(order, dims);
  for (int64_t off = 0; off < vol; off++) {
    unflatten(off, order, dims, coord);
    double g = 0, w = 0;
    if (tj_tensor_get(got, coord, &g) != TJ_OK) {
      appendf(why, n, "tj_tensor_get failed: %s; ", tj_last_error());
      return false;
    }
    tj_tensor_get(want, coord, &w);
    if (close_enough(g, w, tol)) continue;
    if (bad++ < 4) {
      char cs[96];
      coord_str(cs, sizeof cs, order, coord);
      appendf(why, n, "at %s got %.17g want %.17g; ", cs, g, w);
    }
  }
  if (bad > 4) appendf(why, n, "... %d of %" PRId64 " values differ; ", bad, vol);
  return bad == 0;
}

static bool compare_structure(const tj_tensor *got, const tj_tensor *want,
                              char *why, size_t n) {
  const tj_format *f = tj_tensor_format(got);
  if (!strpbrk(f->levels, "suoqcwz")) return true;
  bool ordered = !strpbrk(f->levels, "owz"); /* a nonordered level: any order */
  int order = tj_tensor_order(got);
  int64_t dims[TJ_MAX_ORDER_PUBLIC];
  for (int m = 0; m < order; m++) dims[m] = tj_tensor_dim(got, m);
  int64_t *crd = NULL, nnz = 0;
  double *vals = NULL;
  if (tj_tensor_unpack(got, &crd, &vals, &nnz) != TJ_OK) {
    appendf(why, n, "tj_tensor_unpack failed: %s; ", tj_last_error());
    return false;
  }
  int64_t vol = volume(order, dims);
  bool *stored = calloc((size_t)(vol ? vol : 1), 1);
  bool ok = stored != NULL;
  char cs[96];
  for (int64_t e = 0; ok && e < nnz; e++) {
    const int64_t *c = crd + e * order;
    int64_t off = 0;
    for (int m = 0; m < order; m++) {
      if (c[m] < 0 || c[m] >= dims[m]) {
        coord_str(cs, sizeof cs, order, c);
        appendf(why, n, "stored coordinate %s out of range; ", cs);
        ok = false;
      }
      off = off * (dims[m] ? dims[m] : 1) + c[m];
    }
    if (!ok) break;
    if (stored[off]) {
      coord_str(cs, sizeof cs, order, c);
      appendf(why, n, "stored coordinate %s (entry %" PRId64 ") is stored twice; ", cs, e);
      ok = false;
    }
    if (e > 0 && ordered) {
      const int64_t *p = c - order;
      int cmp = 0;
      for (int l = 0; l < order && !cmp; l++) {
        int m = f->mode_order[l];
        cmp = (c[m] > p[m]) - (c[m] < p[m]);
      }
      if (cmp <= 0) {
        coord_str(cs, sizeof cs, order, c);
        appendf(why, n, "stored coordinate %s (entry %" PRId64 ") %s its "
                "predecessor in level order; ", cs, e,
                cmp ? "precedes" : "duplicates");
        ok = false;
      }
    }
    if (ok) stored[off] = true;
  }
  int64_t coord[TJ_MAX_ORDER_PUBLIC];
  for (int64_t off = 0; ok && off < vol; off++) {
    double w = 0;
    unflatten(off, order, dims, coord);
    tj_tensor_get(want, coord, &w);
    if (w != 0 && !stored[off]) {
      coord_str(cs, sizeof cs, order, coord);
      appendf(why, n, "reference nonzero %.17g at %s is not stored; ", w, cs);
      ok = false;
    }
  }
  if (ok && nnz > vol) {
    appendf(why, n, "nnz %" PRId64 " exceeds the volume %" PRId64 "; ", nnz, vol);
    ok = false;
  }
  free(stored);
  free(crd);
  free(vals);
  return ok;
}

bool kc_compare(const tj_tensor *got, const tj_tensor *want, char *why,
                size_t n) {
  bool v = compare_values(got, want, why, n);
  return compare_structure(got, want, why, n) && v;
}

/* ---- one case ---- */

typedef struct Run {
  const KcCase *c;
  KcShape sh;
  int64_t dims[KC_MAX_TENSORS][TJ_MAX_ORDER_PUBLIC];
  char fmt[KC_MAX_TENSORS][64];
  tj_tensor *in[KC_MAX_TENSORS];    /* [0] unused */
  KcOutcome *o;
} Run;

static KcResult fail(Run *r, KcResult res, tj_status st, const char *fmt, ...) {
  KcOutcome *o = r->o;
  const KcCase *c = r->c;
  o->result = res;
  o->status = st;
  snprintf(o->msg, sizeof o->msg,
           "seed=%" PRIu64 " expr=\"%s\" formats=\"%s\" extents=\"%s\" "
           "dtype=%s width=%d density=%g pattern=%d: ",
           c->seed, c->expr, c->formats ? c->formats : "",
           c->extents ? c->extents : "", tj_dtype_name(c->dtype), c->width,
           c->density, (int)c->pattern);
  va_list ap;
  va_start(ap, fmt);
  size_t len = strlen(o->msg);
  vsnprintf(o->msg + len, sizeof o->msg - len, fmt, ap);
  va_end(ap);
  if (!(c->flags & KC_QUIET)) fprintf(stderr, "kernel_check FAIL: %s\n", o->msg);
  return res;
}

/* Output tensor number `copy` (0 JIT, 1 interpreter, 2 reference: dense). */
static tj_tensor *make_output(Run *r, const char *fmt) {
  const KcAccess *a = &r->sh.t[0];
  uint64_t s = r->c->seed ^ 0x5151;
  /* A "+=" output starts from the same random values in every copy. */
  return kc_tensor(a->name, fmt, a->order, r->dims[0], r->c->dtype,
                   r->c->width, r->sh.accumulate ? 1.0 : 0.0, KC_RANDOM, s,
                   s + 1, 0);
}

static bool listed(const char *list, const char *name) {
  if (!list) return false;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    while (*p == ' ') p++;
    if (strncmp(p, name, n) == 0 && (p[n] == ' ' || !p[n])) return true;
    while (*p && *p != ' ') p++;
  }
  return false;
}

static double input_density(Run *r, int k) {
  if (listed(r->c->full, r->sh.t[k].name)) return 1.0;
  if (r->c->density >= 0) return r->c->density;
  uint64_t s = r->c->seed * 31 + (uint64_t)k;
  static const double ds[] = {0.0, 0.2, 0.5, 1.0, 0.35};
  return ds[kc_rand(&s) % 5];
}

static bool make_inputs(Run *r, uint64_t vgen, tj_tensor **ops) {
  for (int k = 1; k < r->sh.n; k++) {
    const KcAccess *a = &r->sh.t[k];
    bool full = listed(r->c->full, a->name);
    ops[k] = kc_tensor(a->name, r->fmt[k], a->order, r->dims[k], r->c->dtype,
                       r->c->width, input_density(r, k),
                       full ? KC_RANDOM : r->c->pattern,
                       r->c->seed * 1000003u + (uint64_t)k,
                       r->c->seed * 7919u + (uint64_t)k * 131u + vgen * 977u,
                       r->c->flags);
    if (!ops[k]) return false;
  }
  return true;
}

static void free_ops(tj_tensor **ops, int n) {
  for (int k = 0; k < n; k++) {
    tj_tensor_free(ops[k]);
    ops[k] = NULL;
  }
}

/* Reference result for inputs ops[1..] into a new dense output. */
static tj_tensor *reference(Run *r, tj_tensor **ops, tj_status *st) {
  tj_tensor *ref[KC_MAX_TENSORS];
  memcpy(ref, ops, sizeof ref);
  ref[0] = make_output(r, "");
  if (!ref[0]) {
    *st = TJ_ERR_NOMEM;
    return NULL;
  }
  *st = tj_reference(r->c->expr, ref, r->sh.n);
  if (*st != TJ_OK) {
    tj_tensor_free(ref[0]);
    return NULL;
  }
  return ref[0];
}

typedef tj_status (*RunFn)(tj_kernel *, tj_phase, tj_tensor *const *, int);

/* Runs `phases` (EVALUATE, or ASSEMBLE then COMPUTE) of k via fn into a
 * fresh output and compares with want. */
static KcResult run_backend(Run *r, tj_kernel *k, RunFn fn, const char *who,
                            bool split, tj_tensor **ops, const tj_tensor *want) {
  ops[0] = make_output(r, r->fmt[0]);
  if (!ops[0]) return fail(r, KC_SETUP_ERROR, TJ_ERR_NOMEM, "output: %s", tj_last_error());
  tj_status st = split ? fn(k, TJ_ASSEMBLE, ops, r->sh.n) : fn(k, TJ_EVALUATE, ops, r->sh.n);
  if (st == TJ_OK && split) st = fn(k, TJ_COMPUTE, ops, r->sh.n);
  if (st != TJ_OK)
    return fail(r, KC_RUN_ERROR, st, "%s %s failed (status %d): %s", who,
                split ? "assemble+compute" : "evaluate", st, tj_last_error());
  char why[1200] = "";
  if (!kc_compare(ops[0], want, why, sizeof why))
    return fail(r, KC_MISMATCH, TJ_OK, "%s%s differs from reference: %s", who,
                split ? " (assemble+compute)" : "", why);
  return KC_PASS;
}

/* Poisons every stored value of t: COMPUTE (of an assignment, not +=) must
 * write each one, whatever the output held before, and zero what it does
 * not reach. */
static void poison_values(tj_tensor *t) {
  tj_storage *s = &t->st;
  for (int64_t i = 0; i < s->vals_len; i++) rt_storage_set_val(s, i, 12345.0);
}

/* With ops[0] assembled: new values of the same pattern, COMPUTE again
 * over a poisoned output. */
static KcResult recompute(Run *r, tj_kernel *k, RunFn fn, const char *who,
                          tj_tensor **ops) {
  tj_tensor *fresh[KC_MAX_TENSORS] = {0};
  if (!make_inputs(r, 1, fresh)) {
    free_ops(fresh + 1, r->sh.n - 1);
    return fail(r, KC_SETUP_ERROR, TJ_ERR_NOMEM, "inputs: %s", tj_last_error());
  }
  tj_status st;
  tj_tensor *want = reference(r, fresh, &st);
  KcResult res = KC_PASS;
  fresh[0] = ops[0];
  if (!want) {
    res = fail(r, KC_RUN_ERROR, st, "reference failed: %s", tj_last_error());
  } else if (poison_values(ops[0]), (st = fn(k, TJ_COMPUTE, fresh, r->sh.n)) != TJ_OK) {
    res = fail(r, KC_RUN_ERROR, st, "%s recompute with new values failed: %s",
               who, tj_last_error());
  } else {
    char why[1200] = "";
    if (!kc_compare(ops[0], want, why, sizeof why))
      res = fail(r, KC_MISMATCH, TJ_OK, "%s recompute with new values "
                 "(same pattern) differs: %s", who, why);
  }
  tj_tensor_free(want);
  free_ops(fresh + 1, r->sh.n - 1);
  return res;
}

static KcResult check_backend(Run *r, tj_kernel *k, RunFn fn, const char *who,
                              const tj_tensor *want) {
  tj_tensor *ops[KC_MAX_TENSORS] = {0};
  memcpy(ops + 1, r->in + 1, sizeof(tj_tensor *) * (size_t)(r->sh.n - 1));
  KcResult res = run_backend(r, k, fn, who, false, ops, want);
  tj_tensor_free(ops[0]);
  if (res != KC_PASS || !(r->c->flags & KC_SPLIT) || r->sh.accumulate) return res;
  res = run_backend(r, k, fn, who, true, ops, want);
  if (res == KC_PASS) res = recompute(r, k, fn, who, ops);
  tj_tensor_free(ops[0]);
  return res;
}

/* Compiles the expression again with c->cross and runs both kernels'
 * EVALUATE on the same inputs: the second result must match the first and
 * the reference. */
static KcResult cross_check(Run *r, tj_context *cx, tj_kernel *k, const tj_tensor *want) {
  tj_tensor *a[KC_MAX_TENSORS] = {0}, *b[KC_MAX_TENSORS] = {0};
  size_t nin = sizeof(tj_tensor *) * (size_t)(r->sh.n - 1);
  memcpy(a + 1, r->in + 1, nin);
  memcpy(b + 1, r->in + 1, nin);
  a[0] = make_output(r, r->fmt[0]);
  b[0] = make_output(r, r->fmt[0]);
  tj_kernel *k2 = NULL;
  tj_status st;
  char why[1200] = "";
  KcResult res = KC_PASS;
  if (!a[0] || !b[0])
    res = fail(r, KC_SETUP_ERROR, TJ_ERR_NOMEM, "output: %s", tj_last_error());
  else if ((st = tj_compile(cx, r->c->expr, b, r->sh.n, r->c->schedule, r->c->cross, &k2)) != TJ_OK)
    res = fail(r, KC_COMPILE_ERROR, st, "tj_compile with the cross options failed: %s",
               tj_last_error());
  else if ((st = tj_kernel_run(k, TJ_EVALUATE, a, r->sh.n)) != TJ_OK ||
           (st = tj_kernel_run(k2, TJ_EVALUATE, b, r->sh.n)) != TJ_OK)
    res = fail(r, KC_RUN_ERROR, st, "evaluate for the cross check failed: %s",
               tj_last_error());
  else if (!kc_compare(b[0], a[0], why, sizeof why))
    res = fail(r, KC_MISMATCH, TJ_OK, "the cross-check kernel differs from the first: %s", why);
  else if (!kc_compare(b[0], want, why, sizeof why))
    res = fail(r, KC_MISMATCH, TJ_OK, "the cross-check kernel differs from reference: %s", why);
  tj_tensor_free(a[0]);
  tj_tensor_free(b[0]);
  return res;
}

static KcResult setup(Run *r) {
  const KcCase *c = r->c;
  if (!scan_expr(c->expr, &r->sh))
    return fail(r, KC_SETUP_ERROR, TJ_ERR_PARSE, "test could not scan the expression");
  for (int k = 0; k < r->sh.n; k++) {
    for (int m = 0; m < r->sh.t[k].order; m++)
      r->dims[k][m] = extent_of(c, r->sh.t[k].idx[m]);
    format_of(c, r->sh.t[k].name, r->fmt[k], sizeof r->fmt[k]);
    tj_format f;
    if (!make_format(r->fmt[k], r->sh.t[k].order, c->width, &f))
      return fail(r, KC_SETUP_ERROR, TJ_ERR_FORMAT, "format %s of %s: %s",
                  r->fmt[k], r->sh.t[k].name, tj_last_error());
  }
  if (!make_inputs(r, 0, r->in))
    return fail(r, KC_SETUP_ERROR, TJ_ERR_NOMEM, "inputs: %s", tj_last_error());
  return KC_PASS;
}

KcResult kc_run(tj_context *cx, const KcCase *c, KcOutcome *o) {
  memset(o, 0, sizeof *o);
  Run r = {.c = c, .o = o};
  tj_tensor *want = NULL, *ops[KC_MAX_TENSORS] = {0};
  KcResult res = setup(&r);
  if (res != KC_PASS) goto done;
  tj_status st;
  if (!(want = reference(&r, r.in, &st))) {
    res = fail(&r, KC_RUN_ERROR, st, "reference failed: %s", tj_last_error());
    goto done;
  }
  memcpy(ops, r.in, sizeof ops);
  if (!(ops[0] = make_output(&r, r.fmt[0]))) {
    res = fail(&r, KC_SETUP_ERROR, TJ_ERR_NOMEM, "output: %s", tj_last_error());
    goto done;
  }
  tj_kernel *k = NULL;
  st = tj_compile(cx, c->expr, ops, r.sh.n, c->schedule, c->opts, &k);
  if (st != TJ_OK) {
    res = fail(&r, KC_COMPILE_ERROR, st, "tj_compile failed (status %d): %s",
               st, tj_last_error());
    goto done;
  }
  o->cache_hit = tj_kernel_times(k).cache_hit;
  res = check_backend(&r, k, tj_kernel_run, "JIT", want);
  if (res == KC_PASS && c->cross) res = cross_check(&r, cx, k, want);
  if (res == KC_PASS && !(c->flags & KC_NO_INTERP))
    res = check_backend(&r, k, drv_kernel_interpret, "interpreter", want);
done:
  tj_tensor_free(ops[0]);
  tj_tensor_free(want);
  free_ops(r.in + 1, KC_MAX_TENSORS - 1);
  return res;
}
