/* Dense contractions through GETT, TTGT and LoG (lower/gett.c,
 * runtime/gett.c, jit/emit_gett.c), pinned by plain C loops over every
 * index combination and cross-checked with the reference interpreter.
 *
 * All 48 TCCG contractions (../shared/data/tccg) at small extents (3-17,
 * odd, primes among them), f64 and f32, = and +=, each method; the blocks
 * made tiny (TJ_GETT_BLOCK) so every loop of the macro-kernel has a
 * remainder; TTGT with a GEMM the caller registers; two threads; operands
 * stored column-major; the C backend (the runtime's portable
 * micro-kernel); what stays on the loop-IR path; method() errors.
 * TJ_TEST_SAMPLE=n (the ThreadSanitizer build) takes one contraction in n.
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/sample.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

/* One contraction: index letters of C, A, B and each letter's extent. */
typedef struct Con {
  char name[64], expr[128];
  char c[9], a[9], b[9];
  int64_t ext[26];
  const char *want;   /* in -print-gett, where a test asks */
} Con;

static int letters(const char *s, char *out) {
  int n = 0;
  for (const char *p = strchr(s, '(') + 1; *p && *p != ')'; p++)
    if (*p >= 'a' && *p <= 'z') out[n++] = *p;
  out[n] = 0;
  return n;
}

/* Extents 3..17 (odd; 3, 5, 7, 11, 13, 17 prime), shrunk until the whole
 * iteration space is small enough for the plain loops. */
static void small_extents(Con *k, int line) {
  static const int64_t pick[] = {17, 3, 5, 13, 7, 11, 9, 15, 3, 5};
  int n = 0;
  double prod = 1;
  for (int l = 0; l < 26; l++)
    if (k->ext[l]) k->ext[l] = pick[(l + line + n++) % 10], prod *= (double)k->ext[l];
  while (prod > 2e5) {
    int big = 0;
    for (int l = 0; l < 26; l++)
      if (k->ext[l] > k->ext[big]) big = l;
    prod = prod / (double)k->ext[big] * (double)(k->ext[big] - 2);
    k->ext[big] -= 2;
  }
}

/* The 48 contractions of the TCCG suite (their row-major expressions). */
static int load_tccg(Con *out, int max) {
  const char *dir = getenv("TJ_DATA_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tccg/contractions-f64.tsv", dir ? dir : "../shared/data");
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[512];
  int n = 0;
  while (n < max && fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char *fld[5], *save = NULL;
    int nf = 0;
    for (char *t = strtok_r(line, "\t\n", &save); t && nf < 5; t = strtok_r(NULL, "\t\n", &save))
      fld[nf++] = t;
    if (nf < 5) continue;
    Con *k = &out[n];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s %s", fld[0], fld[1]);
    snprintf(k->expr, sizeof k->expr, "%s", fld[4]);
    const char *rhs = strchr(k->expr, '=');
    letters(k->expr, k->c);
    letters(rhs, k->a);
    letters(strchr(rhs, '*'), k->b);
    for (const char *s = fld[2]; *s; s++)
      if (*s >= 'a' && *s <= 'z' && s[1] == ':') k->ext[*s - 'a'] = 1;
    small_extents(k, n);
    n++;
  }
  fclose(f);
  return n;
}

/* ---- tensors over caller arrays (row-major unless strides say else) ---- */

typedef struct Ten {
  tj_tensor *t;
  int order;
  int64_t dims[8], strides[8], n;
  double *d;     /* f64 values, or */
  float *f;      /* f32 values */
} Ten;

/* Row-major (or column-major when colmajor) strides of idx's dims. */
static void make_ten(Ten *x, const char *name, const char *idx, const int64_t *ext, tj_dtype dt,
                     bool colmajor, uint64_t seed) {
  memset(x, 0, sizeof *x);
  x->order = (int)strlen(idx);
  x->n = 1;
  for (int m = 0; m < x->order; m++) x->dims[m] = ext[idx[m] - 'a'];
  for (int q = 0; q < x->order; q++) {
    int m = colmajor ? q : x->order - 1 - q;
    x->strides[m] = x->n;
    x->n *= x->dims[m];
  }
  if (dt == TJ_F32) x->f = malloc(sizeof(float) * (size_t)x->n);
  else x->d = malloc(sizeof(double) * (size_t)x->n);
  for (int64_t i = 0; i < x->n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    double v = (double)(seed >> 40) / (double)(1ull << 24) - 0.5;
    if (x->f) x->f[i] = (float)v;
    else x->d[i] = v;
  }
  tj_arrays a = {.dtype = dt, .order = x->order, .dims = x->dims, .strides = x->strides,
                 .vals = x->f ? (void *)x->f : (void *)x->d, .vals_len = x->n};
  OK(tj_tensor_wrap(name, &a, TJ_WRAP_TRUSTED, &x->t));
}

static void free_ten(Ten *x) {
  tj_tensor_free(x->t);
  free(x->d);
  free(x->f);
}

static double at(const Ten *x, int64_t i) { return x->f ? (double)x->f[i] : x->d[i]; }

/* Offset in x of the current values of the letters (idx: x's letters). */
static int64_t offset(const Ten *x, const char *idx, const int64_t *v) {
  int64_t o = 0;
  for (int m = 0; idx[m]; m++) o += v[idx[m] - 'a'] * x->strides[m];
  return o;
}

/* want = C0 (when acc) + sum over the contracted letters of A * B, and the
 * sum of |A * B| as each entry's error scale, by an odometer over every
 * letter. */
static void plain_loops(const Con *k, const Ten *C, const Ten *A, const Ten *B, bool acc,
                        double *want, double *mag) {
  for (int64_t i = 0; i < C->n; i++) want[i] = acc ? at(C, i) : 0, mag[i] = fabs(want[i]);
  char all[27];
  int n = 0;
  for (int l = 0; l < 26; l++)
    if (k->ext[l]) all[n++] = (char)('a' + l);
  int64_t v[26] = {0};
  for (;;) {
    int64_t oc = offset(C, k->c, v);
    double p = at(A, offset(A, k->a, v)) * at(B, offset(B, k->b, v));
    want[oc] += p;
    mag[oc] += fabs(p);
    int q = n - 1;
    while (q >= 0 && ++v[all[q] - 'a'] == k->ext[all[q] - 'a']) v[all[q--] - 'a'] = 0;
    if (q < 0) break;
  }
}

/* got within tol of want, relative to each entry's magnitude. */
static void expect_close(const Ten *C, const double *want, const double *mag, double tol,
                         const char *what) {
  for (int64_t i = 0; i < C->n; i++) {
    double err = fabs(at(C, i) - want[i]);
    ck_assert_msg(err <= tol * (mag[i] + 1e-30) + 1e-300,
                  "%s: entry %lld is %.17g, plain loops say %.17g", what, (long long)i,
                  at(C, i), want[i]);
  }
}

/* Runs k by `method` (a schedule, NULL the model's choice) and checks it
 * against plain loops; with reference, also against tj_reference. */
static void check_one(tj_context *cx, const Con *k, tj_dtype dt, bool acc, const char *sched,
                      const tj_options *opt, bool colmajor, bool reference) {
  Ten C, A, B;
  uint64_t s = (uint64_t)(k->ext[0] + 7 * k->ext[1]);
  make_ten(&C, "C", k->c, k->ext, dt, colmajor, s + 1);
  make_ten(&A, "A", k->a, k->ext, dt, colmajor, s + 2);
  make_ten(&B, "B", k->b, k->ext, dt, false, s + 3);
  char expr[160];
  snprintf(expr, sizeof expr, "%s", k->expr);
  if (acc) {
    char *eq = strchr(expr, '=');
    memmove(eq + 1, eq, strlen(eq) + 1);
    *eq = '+';
  }
  double *want = malloc(sizeof(double) * (size_t)C.n), *mag = malloc(sizeof(double) * (size_t)C.n);
  plain_loops(k, &C, &A, &B, acc, want, mag);
  tj_tensor *ops[3] = {C.t, A.t, B.t};
  tj_kernel *kern;
  tj_options o = opt ? *opt : tj_options_default();
  char what[320];
  snprintf(what, sizeof what, "%s %s %s %s%s", k->name, expr, dt == TJ_F32 ? "f32" : "f64",
           sched ? sched : "model", colmajor ? " column-major" : "");
  ck_assert_msg(tj_compile(cx, expr, ops, 3, sched, &o, &kern) == TJ_OK, "%s: %s", what,
                tj_last_error());
  ck_assert_msg(tj_kernel_run(kern, TJ_EVALUATE, NULL, 0) == TJ_OK, "%s: %s", what,
                tj_last_error());
  double tol = dt == TJ_F32 ? 1e-4 : 1e-12;
  expect_close(&C, want, mag, tol, what);
  if (reference) {
    /* the reference interpreter from the same C0 */
    Ten R;
    make_ten(&R, "C", k->c, k->ext, dt, colmajor, s + 1);
    tj_tensor *rops[3] = {R.t, A.t, B.t};
    OK(tj_reference(expr, rops, 3));
    for (int64_t i = 0; i < C.n; i++) {
      int64_t co[8];
      double r;
      for (int m = 0; m < C.order; m++) co[m] = i / C.strides[m] % C.dims[m];
      OK(tj_tensor_get(R.t, co, &r));
      ck_assert_msg(fabs(r - at(&C, i)) <= tol * (mag[i] + 1e-30) + 1e-300,
                    "%s: entry %lld is %.17g, the reference interpreter %.17g", what,
                    (long long)i, at(&C, i), r);
    }
    free_ten(&R);
  }
  free(want);
  free(mag);
  free_ten(&C);
  free_ten(&A);
  free_ten(&B);
}

static Con g_con[64];
static int g_ncon;

static void need_tccg(void) {
  if (!g_ncon) g_ncon = load_tccg(g_con, 64);
  ck_assert_msg(g_ncon == 48, "expected the 48 TCCG contractions under TJ_DATA_DIR, read %d",
                g_ncon);
}

static const char *const METHODS[] = {"method(gett)", "method(ttgt)", "method(log)", NULL};

/* Every contraction, dtype, = and +=, each method and the model's choice. */
START_TEST(test_tccg_all_methods) {
  need_tccg();
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = 1;
  for (int i = 0; i < g_ncon; i += tu_sample())
    for (int dt = 0; dt < 2; dt++)
      for (int acc = 0; acc < 2; acc++)
        for (int m = 0; m < 4; m++)
          check_one(cx, &g_con[i], dt ? TJ_F32 : TJ_F64, acc, METHODS[m], &o, false, m == 0);
  tj_context_free(cx);
}
END_TEST

/* The loop-IR path on the same contractions (method(loops)), f64. */
START_TEST(test_tccg_loops) {
  need_tccg();
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int i = 0; i < g_ncon; i += 3 * tu_sample())
    check_one(cx, &g_con[i], TJ_F64, i % 2, "method(loops)", NULL, false, false);
  tj_context_free(cx);
}
END_TEST

/* Blocks of mc=32, kc=7, nc=28: every loop of the macro-kernel ends in a
 * remainder (kc=7 divides few K), on one and two threads. */
START_TEST(test_tccg_block_remainders) {
  need_tccg();
  setenv("TJ_GETT_BLOCK", "32,7,28", 1);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  for (int th = 1; th <= 2; th++) {
    o.nthreads = th;
    for (int i = 0; i < g_ncon; i += tu_sample())
      for (int m = 0; m < 3; m++)
        check_one(cx, &g_con[i], i % 2 ? TJ_F32 : TJ_F64, (i + m) % 2, METHODS[m], &o, false,
                  false);
  }
  unsetenv("TJ_GETT_BLOCK");
  tj_context_free(cx);
}
END_TEST

/* A GEMM registered for TTGT (plain loops here): column-major
 * C (m x n) = A (m x k) * B (n x k)^T. */
static int g_gemm_calls;
static void loops_gemm(int f32, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                       const void *b, int64_t ldb, void *c, int64_t ldc) {
  g_gemm_calls++;
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++)
        s += f32 ? (double)((const float *)a)[i + p * lda] * ((const float *)b)[j + p * ldb]
                 : ((const double *)a)[i + p * lda] * ((const double *)b)[j + p * ldb];
      if (f32) ((float *)c)[i + j * ldc] = (float)s;
      else ((double *)c)[i + j * ldc] = s;
    }
}

START_TEST(test_ttgt_registered_gemm) {
  need_tccg();
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_set_ttgt_gemm(loops_gemm);
  g_gemm_calls = 0;
  for (int i = 0; i < g_ncon; i += tu_sample())
    check_one(cx, &g_con[i], i % 2 ? TJ_F32 : TJ_F64, i % 3 == 0, "method(ttgt)", NULL, false,
              false);
  tj_set_ttgt_gemm(NULL);
  ck_assert_int_eq(g_gemm_calls, (g_ncon + tu_sample() - 1) / tu_sample());
  tj_context_free(cx);
}
END_TEST

/* Operands stored column-major (any mode order is read in place). */
START_TEST(test_column_major_operands) {
  need_tccg();
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int i = 0; i < g_ncon; i += 2 * tu_sample())
    for (int m = 0; m < 3; m++)
      check_one(cx, &g_con[i], TJ_F64, m == 1, METHODS[m], NULL, true, false);
  tj_context_free(cx);
}
END_TEST

/* The C backend: the same plan through the runtime's portable
 * micro-kernel (what the loop-IR interpreter runs too). */
START_TEST(test_c_backend) {
  need_tccg();
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.backend = TJ_BACKEND_C;
  for (int i = 0; i < g_ncon; i += 12 * tu_sample())
    check_one(cx, &g_con[i], TJ_F64, i % 2, NULL, &o, false, false);
  tj_context_free(cx);
}
END_TEST

/* GEMM by hand: 2x2 times 2x2, each method. */
START_TEST(test_gemm_by_hand) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int m = 0; m < 3; m++) {
    int64_t d[2] = {2, 2};
    double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {100, 100, 100, 100};
    tj_arrays x = {.dtype = TJ_F64, .order = 2, .dims = d, .vals = a, .vals_len = 4};
    tj_tensor *A, *B, *C;
    OK(tj_tensor_wrap("A", &x, 0, &A));
    x.vals = b;
    OK(tj_tensor_wrap("B", &x, 0, &B));
    x.vals = c;
    OK(tj_tensor_wrap("C", &x, 0, &C));
    tj_tensor *ops[3] = {C, A, B};
    tj_kernel *k;
    OK(tj_compile(cx, "C(i,j) += A(i,k) * B(k,j)", ops, 3, METHODS[m], NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    /* [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50], plus 100 */
    ck_assert(c[0] == 119 && c[1] == 122 && c[2] == 143 && c[3] == 150);
    tj_tensor_free(A);
    tj_tensor_free(B);
    tj_tensor_free(C);
  }
  tj_context_free(cx);
}
END_TEST

/* The plan's text (-print-gett) for expr over ops under sched. */
static char *gett_text(tj_context *cx, const char *expr, tj_tensor **ops, const char *sched) {
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, 3, sched, NULL, &k));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert(f != NULL);
  OK(tj_kernel_print(k, TJ_STAGE_GETT, f));
  fclose(f);
  return buf;
}

/* gett_text of contraction k over f64 tensors of its extents. */
static char *con_gett_text(tj_context *cx, const Con *k, const char *sched) {
  Ten C, A, B;
  make_ten(&C, "C", k->c, k->ext, TJ_F64, false, 1);
  make_ten(&A, "A", k->a, k->ext, TJ_F64, false, 2);
  make_ten(&B, "B", k->b, k->ext, TJ_F64, false, 3);
  tj_tensor *ops[3] = {C.t, A.t, B.t};
  char *txt = gett_text(cx, k->expr, ops, sched);
  free_ten(&C), free_ten(&A), free_ten(&B);
  return txt;
}

/* Contractions the model cannot rank by 2x: their candidates are timed at
 * the first run (into a copy of C, so += keeps C's values), the fastest is
 * remembered; every run, first or later, gives the plain loops' values.
 * method(model) and a forced method are never timed. */
START_TEST(test_timed_methods) {
  static const Con cons[] = {
      {"ab-ac-cb", "C(a,b) = A(a,c) * B(c,b)", "ab", "ac", "cb", {[0] = 400, [1] = 300, [2] = 150}, NULL},
      {"abc-adc-db", "C(a,b,c) = A(a,d,c) * B(d,b)", "abc", "adc", "db",
       {[0] = 40, [1] = 50, [2] = 30, [3] = 200}, NULL},
  };
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int i = 0; i < 2; i++) {
    const Con *k = &cons[i];
    char *model = con_gett_text(cx, k, NULL);
    ck_assert_msg(strstr(model, "timed at the first run"), "%s: %s", k->name, model);
    char *untimed = con_gett_text(cx, k, "method(model)");
    ck_assert_msg(!strstr(untimed, "timed"), "%s: %s", k->name, untimed);
    char *forced = con_gett_text(cx, k, "method(ttgt)");
    ck_assert_msg(!strstr(forced, "timed"), "%s: %s", k->name, forced);
    free(model), free(untimed), free(forced);
    for (int acc = 0; acc < 2; acc++)
      for (int rep = 0; rep < 2; rep++)   /* the second run takes the remembered method */
        check_one(cx, k, TJ_F64, acc, NULL, NULL, false, false);
  }
  tj_context_free(cx);
}
END_TEST

/* Where C's unit-stride index is far apart in A, the micro-kernel's lanes
 * run along A's unit-stride index instead (the model's choice), and C's
 * tiles go through the tile buffer: every method, both dtypes, = and +=,
 * 1 and 2 threads, sizes that are not multiples of the tile. */
START_TEST(test_lanes_along_a) {
  static const Con cons[] = {
      {"abc-bda-dc", "C(c,b,a) = A(a,d,b) * B(c,d)", "cba", "adb", "cd",
       {[0] = 37, [1] = 41, [2] = 5, [3] = 29}, "I_m = {b,a}"},
      {"abcd-dbea-ec", "C(d,c,b,a) = A(a,e,b,d) * B(c,e)", "dcba", "aebd", "ce",
       {[0] = 13, [1] = 11, [2] = 6, [3] = 19, [4] = 17}, "I_m = {d,a,b}"},
  };
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  for (int i = 0; i < 2; i++) {
    const Con *k = &cons[i];
    char *txt = con_gett_text(cx, k, NULL);
    ck_assert_msg(strstr(txt, k->want), "%s: %s", k->name, txt);
    free(txt);
    for (int th = 1; th <= 2; th++) {
      o.nthreads = th;
      for (int m = 0; m < 3; m++)
        for (int acc = 0; acc < 2; acc++) {
          check_one(cx, k, TJ_F64, acc, METHODS[m], &o, false, false);
          check_one(cx, k, TJ_F32, acc, METHODS[m], &o, false, false);
        }
    }
  }
  tj_context_free(cx);
}
END_TEST

/* AVX-512 has two micro-kernel shapes: 24x8 by default and 16x14 where
 * more of its tiles are whole runs of C's first I_m and I_n indices (a =
 * 16, c = 14 here; a = 24, c = 8 in the other); both give the plain loops'
 * values, with remainders in the other indices, 1 and 2 threads, = and +=.
 * Below AVX-512 (4 lanes) only the values are checked. */
START_TEST(test_two_shapes) {
  static const Con cons[] = {
      {"abcd-aebf-dfce", "C(d,c,b,a) = A(f,b,e,a) * B(e,c,f,d)", "dcba", "fbea", "ecfd",
       {[0] = 16, [1] = 3, [2] = 14, [3] = 5, [4] = 3, [5] = 7}, "micro-kernel 16x14 (8 lanes)"},
      {"abcd-aebf-dfce", "C(d,c,b,a) = A(f,b,e,a) * B(e,c,f,d)", "dcba", "fbea", "ecfd",
       {[0] = 24, [1] = 2, [2] = 8, [3] = 3, [4] = 5, [5] = 3}, "micro-kernel 24x8 (8 lanes)"},
  };
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  for (int i = 0; i < 2; i++) {
    const Con *k = &cons[i];
    char *txt = con_gett_text(cx, k, "method(gett)");
    if (strstr(txt, "(8 lanes)")) ck_assert_msg(strstr(txt, k->want), "%s: %s", k->name, txt);
    free(txt);
    for (int th = 1; th <= 2; th++) {
      o.nthreads = th;
      for (int acc = 0; acc < 2; acc++) check_one(cx, k, TJ_F64, acc, "method(gett)", &o, false, false);
    }
  }
  tj_context_free(cx);
}
END_TEST

/* Fewer A blocks than threads (M = 30 under mc = 240): the two threads
 * split N instead (runtime/gett.c, gett_core_n), here in two column
 * blocks, one of them short, and two kc steps of K (the second adds to
 * the first's C); checked against plain loops, f64 and f32, = and +=. */
START_TEST(test_few_rows_split_columns) {
  static const Con k = {"abcd-ea-ebcd", "C(d,c,b,a) = A(a,e) * B(d,c,b,e)", "dcba", "ae", "dcbe",
                        {[0] = 30, [1] = 9, [2] = 9, [3] = 9, [4] = 300}, NULL};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = 2;
  for (int acc = 0; acc < 2; acc++) {
    check_one(cx, &k, TJ_F64, acc, "method(gett)", &o, false, false);
    check_one(cx, &k, TJ_F32, acc, "method(gett)", &o, false, false);
  }
  tj_context_free(cx);
}
END_TEST

/* What stays on the loop-IR path, and method() errors. */
START_TEST(test_not_contractions) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  int64_t d[2] = {3, 3};
  tj_tensor *A, *B, *C, *D;
  OK(tj_tensor_new("A", TJ_F64, 2, d, NULL, &A));
  OK(tj_tensor_new("B", TJ_F64, 2, d, NULL, &B));
  OK(tj_tensor_new("C", TJ_F64, 2, d, NULL, &C));
  OK(tj_tensor_new("D", TJ_F64, 2, d, NULL, &D));
  tj_tensor *ops[4] = {C, A, B, D};
  static const char *const not_pure[] = {
      "C(i,j) = A(i,k) * B(k,j) * D(i,j)", "C(i,j) = 2 * A(i,k) * B(k,j)",
      "C(i,j) = A(i,j) * B(i,j)", "C(i,j) = exp(A(i,k)) * B(k,j)"};
  for (int e = 0; e < 4; e++) {
    tj_kernel *k;
    OK(tj_compile(cx, not_pure[e], ops, 4, NULL, NULL, &k));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    OK(tj_kernel_print(k, TJ_STAGE_GETT, f));
    fclose(f);
    ck_assert_msg(strstr(buf, "loop-IR kernel"), "%s: %s", not_pure[e], buf);
    free(buf);
    ck_assert(tj_compile(cx, not_pure[e], ops, 4, "method(gett)", NULL, &k) ==
              TJ_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(tj_last_error(), "method(gett) needs a pure dense contraction"), "%s",
                  tj_last_error());
  }
  tj_kernel *k;
  /* loop directives ask for the loop nest; a forced method refuses them */
  ck_assert(tj_compile(cx, "C(i,j) = A(i,k) * B(k,j)", ops, 3, "method(gett) unroll(k,4)",
                       NULL, &k) == TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "method(gett) replaces the loop nest and cannot be "
                                        "combined with unroll(k"),
                "%s", tj_last_error());
  /* the directive quoted whole, however long (a fixed buffer cut it at 63) */
  ck_assert(tj_compile(cx, "C(i,j) = A(i,k) * B(k,j)", ops, 3,
                       "method(gett) split(k, k_outer_blocks_of_the_whole_contraction, "
                       "k_inner_lanes_of_the_whole_contraction, 8)",
                       NULL, &k) == TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "combined with split(k,k_outer_blocks_of_the_whole_"
                                        "contraction,k_inner_lanes_of_the_whole_contraction,8)"),
                "%s", tj_last_error());
  /* a plain parallelize of an output index asks for threads, which GETT
   * has (alone, with a forced method, with the model); a strategy asks
   * for the loop nest */
  const char *par[3] = {"parallelize(i)", "method(gett) parallelize(j)", "parallelize(i) method(model)"};
  for (int t = 0; t < 3; t++) {
    char *txt = gett_text(cx, "C(i,j) = A(i,k) * B(k,j)", ops, par[t]);
    ck_assert_msg(strstr(txt, "method: gett") || strstr(txt, "method: log") ||
                  strstr(txt, "method: ttgt"), "%s: %s", par[t], txt);
    free(txt);
  }
  char *strat = gett_text(cx, "C(i,j) = A(i,k) * B(k,j)", ops, "parallelize(i, static)");
  ck_assert_msg(strstr(strat, "loop-IR kernel"), "%s", strat);
  free(strat);
  strat = gett_text(cx, "C(i,j) = A(i,k) * B(k,j)", ops, "parallelize(i, dynamic)");
  ck_assert_msg(strstr(strat, "loop-IR kernel"), "%s", strat);
  free(strat);
  char *txt = gett_text(cx, "C(i,j) = A(i,k) * B(k,j)", ops, "unroll(k,4)");
  ck_assert_msg(strstr(txt, "loop-IR kernel"), "%s", txt);
  free(txt);
  ck_assert(tj_compile(cx, "C(i,j) = A(i,k) * B(k,j)", ops, 3, "method(blas)", NULL, &k) !=
            TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "method(blas): unknown method"), "%s", tj_last_error());
  /* the stage names the sets and the method */
  char *buf = gett_text(cx, "C(i,j) = A(i,k) * B(k,j)", ops, "method(log)");
  ck_assert_msg(strstr(buf, "I_m = {j}") && strstr(buf, "I_n = {i}") && strstr(buf, "I_k = {k}") &&
                    strstr(buf, "method: log (forced by method())"),
                "%s", buf);
  free(buf);
  tj_tensor_free(A);
  tj_tensor_free(B);
  tj_tensor_free(C);
  tj_tensor_free(D);
  tj_context_free(cx);
}
END_TEST

static Suite *gett_suite(void) {
  Suite *s = suite_create("gett");
  TCase *tc = tcase_create("contractions");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, test_gemm_by_hand);
  tcase_add_test(tc, test_timed_methods);
  tcase_add_test(tc, test_lanes_along_a);
  tcase_add_test(tc, test_two_shapes);
  tcase_add_test(tc, test_few_rows_split_columns);
  tcase_add_test(tc, test_not_contractions);
  tcase_add_test(tc, test_tccg_all_methods);
  tcase_add_test(tc, test_tccg_loops);
  tcase_add_test(tc, test_tccg_block_remainders);
  tcase_add_test(tc, test_ttgt_registered_gemm);
  tcase_add_test(tc, test_column_major_operands);
  tcase_add_test(tc, test_c_backend);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(gett_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  tj_shutdown();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
