/* method(sell) (issue 18): y(i) (+)= A(i,j) * x(j) over a SELL-8 copy of
 * a CSR matrix, kept on the tensor until it changes. Values are checked
 * against a plain dense loop over the matrix written out in the test, and
 * a few entries by hand; the copy's padding and row sorting through
 * rt_sell_stats. Cases: a slice padded around one long row, empty rows,
 * row counts not a multiple of 8, an infinite x entry only padding would
 * touch, +=, f32, 64-bit indices, 2 threads, the copy rebuilt after pack,
 * tj_tensor_arrays and tj_tensor_changed, the choice of the copy or the
 * CSR loops by mean row length (both branches, and its boundary; 128 on
 * the AVX2 loop, 32 on the others), 16-bit
 * column offsets where every slice's columns span less than 2^16 (and
 * 32-bit columns one past that), and
 * refusals with their messages; seeded matrices against a plain loop
 * over their entries; column panels where x passes 4 MB (and smaller
 * under TJ_SELL_PANEL_X). ctest runs it three times: the widest loop the CPU
 * has (AVX-512, AVX2 + FMA), AVX2 (TJ_SELL_AVX2=1) and the portable loop
 * (TJ_SELL_PORTABLE=1). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tensor.h"
#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

/* 19 x 12: rows 0-7 (slice 0) lengths 1,0,11,1,1,0,2,1 (row 2 holds
 * columns 1-11: the slice pads to 11); rows 8-15 lengths 3 each; rows
 * 16-18 (a short last slice) 0, 2, 1. Column 0 is empty everywhere. */
#define NR 19
#define NC 12
static double dense[NR][NC];

static void fill_dense(void) {
  memset(dense, 0, sizeof dense);
  dense[0][3] = 2;
  for (int j = 1; j < NC; j++) dense[2][j] = j;
  dense[3][11] = -1;
  dense[4][5] = 0.5;
  dense[6][1] = 3, dense[6][7] = 4;
  dense[7][2] = 1;
  for (int r = 8; r < 16; r++)
    for (int k = 0; k < 3; k++) dense[r][1 + (r + 4 * k) % 11] = r + k;
  dense[17][4] = 6, dense[17][9] = -2;
  dense[18][10] = 7;
}

static tj_tensor *csr(tj_dtype dt, const char *fmt) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  tj_tensor *a;
  OK(tj_tensor_new("A", dt, 2, (int64_t[]){NR, NC}, &f, &a));
  for (int i = 0; i < NR; i++)
    for (int j = 0; j < NC; j++)
      if (dense[i][j] != 0) OK(tj_tensor_insert(a, (int64_t[]){i, j}, dense[i][j]));
  OK(tj_tensor_pack(a));
  return a;
}

static tj_tensor *vec(const char *name, tj_dtype dt, int64_t n, double base) {
  tj_tensor *v;
  OK(tj_tensor_new(name, dt, 1, &n, NULL, &v));
  for (int64_t i = 0; i < n; i++) OK(tj_tensor_insert(v, &i, base + (double)i));
  OK(tj_tensor_pack(v));
  return v;
}

static tj_kernel *compile(tj_context *cx, const char *expr, tj_tensor *y, tj_tensor *a,
                          tj_tensor *x, int nthreads) {
  tj_options o = tj_options_default();
  o.nthreads = nthreads;
  tj_kernel *k;
  OK(tj_compile(cx, expr, (tj_tensor *[]){y, a, x}, 3, "method(sell)", &o, &k));
  return k;
}

/* y against the dense loop over dense[][] with x(j) = xbase + j (y0: y's
 * values before a +=, else NULL). */
static void expect(tj_tensor *y, tj_tensor *x, const double *y0, double tol) {
  for (int64_t i = 0; i < NR; i++) {
    double want = y0 ? y0[i] : 0, got, xj;
    for (int64_t j = 0; j < NC; j++) {
      OK(tj_tensor_get(x, &j, &xj));
      want += dense[i][j] * xj;
    }
    OK(tj_tensor_get(y, &i, &got));
    ck_assert_msg(fabs(got - want) <= tol * (1 + fabs(want)), "y(%lld) = %g, want %g",
                  (long long)i, got, want);
  }
}

START_TEST(values_by_hand_and_padding) {
  fill_dense();
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *a = csr(TJ_F64, "ds"), *x = vec("x", TJ_F64, NC, 1), *y = vec("y", TJ_F64, NR, 0);
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", y, a, x, 1);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double v;
  /* by hand: x(j) = 1 + j */
  OK(tj_tensor_get(y, (int64_t[]){0}, &v));
  ck_assert_double_eq(v, 2 * 4);                     /* A(0,3) x(3) */
  OK(tj_tensor_get(y, (int64_t[]){1}, &v));
  ck_assert_double_eq(v, 0);                         /* an empty row */
  OK(tj_tensor_get(y, (int64_t[]){2}, &v));
  ck_assert_double_eq(v, 11 * 12 * 23 / 6.0 + 66);   /* sum j (j + 1), j = 1..11 */
  OK(tj_tensor_get(y, (int64_t[]){17}, &v));
  ck_assert_double_eq(v, 6 * 5 - 2 * 10);
  OK(tj_tensor_get(y, (int64_t[]){18}, &v));
  ck_assert_double_eq(v, 7 * 11);
  expect(y, x, NULL, 0);
  /* the copy: in row order 3 slices of widths 11, 3 and 2 (128 padded
   * entries for 44 stored: more than 10% padding), so rows are sorted by
   * length: 11 and seven 3s, then 3, 2, 2 and five 1s, then three empty
   * rows: widths 11, 3, 0 */
  ck_assert_ptr_nonnull(a->sell);
  int64_t nnz, padded;
  bool sorted;
  rt_sell_stats(a->sell, &nnz, &padded, &sorted);
  ck_assert_int_eq(nnz, 44);
  ck_assert(sorted);
  ck_assert_int_eq(padded, (11 + 3) * 8);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* Column 0 is empty, so only padding lanes (column 0) could read x(0):
 * an infinite x(0) must leave y finite. */
START_TEST(padding_never_reads_x) {
  fill_dense();
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *a = csr(TJ_F64, "ds"), *x = vec("x", TJ_F64, NC, 1), *y = vec("y", TJ_F64, NR, 0);
  tj_arrays ar;
  OK(tj_tensor_arrays(x, &ar));
  ((double *)ar.vals)[0] = INFINITY;
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", y, a, x, 1);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < NR; i++) {
    double v;
    OK(tj_tensor_get(y, &i, &v));
    ck_assert_msg(isfinite(v), "y(%lld) = %g", (long long)i, v);
  }
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

START_TEST(accumulates_and_f32_and_wide_indices) {
  fill_dense();
  tj_context *cx;
  OK(tj_context_new(&cx));
  /* += keeps y's values */
  tj_tensor *a = csr(TJ_F64, "(i, j) -> (i : dense, j : compressed), posWidth = 64, crdWidth = 64");
  tj_tensor *x = vec("x", TJ_F64, NC, -3), *y = vec("y", TJ_F64, NR, 100);
  double y0[NR];
  for (int i = 0; i < NR; i++) y0[i] = 100 + i;
  tj_kernel *k = compile(cx, "y(i) += A(i,j) * x(j)", y, a, x, 1);
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  expect(y, x, y0, 0);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  /* f32 */
  a = csr(TJ_F32, "ds"), x = vec("x", TJ_F32, NC, 0.5), y = vec("y", TJ_F32, NR, 0);
  k = compile(cx, "y(i) = x(j) * A(i,j)", y, a, x, 1);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(y, x, NULL, 1e-6);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* The copy follows the tensor: values written after tj_tensor_arrays,
 * entries inserted and packed, values written through a kept pointer
 * and announced by tj_tensor_changed. */
START_TEST(copy_rebuilt_when_the_tensor_changes) {
  fill_dense();
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *a = csr(TJ_F64, "ds"), *x = vec("x", TJ_F64, NC, 1), *y = vec("y", TJ_F64, NR, 0);
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", y, a, x, 1);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(y, x, NULL, 0);
  const RtSell *first = a->sell;
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_ptr_eq(a->sell, first);   /* unchanged: kept */
  tj_arrays ar;
  OK(tj_tensor_arrays(a, &ar));
  ck_assert_ptr_null(a->sell);
  double *vals = ar.vals;
  vals[0] = 5;   /* A(0,3) */
  dense[0][3] = 5;
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(y, x, NULL, 0);
  vals[0] = 9;   /* through the kept pointer: announced */
  dense[0][3] = 9;
  OK(tj_tensor_changed(a));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(y, x, NULL, 0);
  OK(tj_tensor_insert(a, (int64_t[]){1, 6}, 10));   /* row 1 was empty */
  OK(tj_tensor_pack(a));
  dense[1][6] = 10;
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(y, x, NULL, 0);
  ck_assert_int_eq(tj_tensor_changed(NULL), TJ_ERR_INVALID);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* A larger matrix with power-law rows: sorted within windows (sigma),
 * and on 2 threads (ctest sets TJ_PAR_MIN_WORK=0), against the CSR loops
 * of the same expression without method(sell). */
START_TEST(skewed_rows_sorted_and_two_threads) {
  const int64_t n = 2003, m = 1500;
  tj_format f;
  OK(tj_format_parse("ds", &f));
  tj_tensor *a;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){n, m}, &f, &a));
  uint64_t s = 7;
  for (int64_t i = 0; i < n; i++) {
    int64_t len = i % 97 == 0 ? 400 : i % 5;   /* a long row now and then */
    for (int64_t k = 0; k < len; k++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      OK(tj_tensor_insert(a, (int64_t[]){i, (int64_t)(s >> 33) % m}, (double)(s >> 40 & 1023) / 64));
    }
  }
  OK(tj_tensor_pack(a));
  tj_tensor *x, *y, *ref;
  OK(tj_tensor_new("x", TJ_F64, 1, &m, NULL, &x));
  for (int64_t j = 0; j < m; j++) OK(tj_tensor_insert(x, &j, (double)(j % 17) - 8));
  OK(tj_tensor_pack(x));
  OK(tj_tensor_new("y", TJ_F64, 1, &n, NULL, &y));
  OK(tj_tensor_new("y", TJ_F64, 1, &n, NULL, &ref));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = 1;
  tj_kernel *plain;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){ref, a, x}, 3, NULL, &o, &plain));
  OK(tj_kernel_run(plain, TJ_EVALUATE, NULL, 0));
  for (int t = 1; t <= 2; t++) {
    tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", y, a, x, t);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < n; i++) {
      double got, want;
      OK(tj_tensor_get(y, &i, &got));
      OK(tj_tensor_get(ref, &i, &want));
      ck_assert_msg(fabs(got - want) <= 1e-9 * (1 + fabs(want)), "%d threads: y(%lld) = %g, want %g",
                    t, (long long)i, got, want);
    }
  }
  int64_t nnz, padded;
  bool sorted;
  rt_sell_stats(a->sell, &nnz, &padded, &sorted);
  ck_assert(sorted);
  /* unsorted, each of the 21 long rows pads a slice of its own to 8 x 400
   * (about 6 x nnz); sorted, each window's long rows share one slice */
  ck_assert_int_lt(padded, 3 * nnz);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y), tj_tensor_free(ref);
  tj_context_free(cx);
}
END_TEST

/* Narrow columns (16-bit offsets from each slice's least column) when
 * every slice's columns span at most 65535; else 32-bit. 24 x 200000, two
 * entries a row but row 3's one (one padding entry: rows stay in order):
 * slice 0 at columns 70000 + 10i (+5), slice 1 between 100000 and
 * 100000 + span (row 8), slice 2 at i, i + 1. x(70000) = inf, a column of
 * row 0 only: row 3's padding lane reads it (the slice's base) and must
 * leave y(3) finite. y against a plain loop over the same entries. */
static void narrow_case(int64_t span, bool narrow) {
  enum { N = 24 };
  const int64_t m = 200000;
  int64_t col[N][2];
  for (int64_t i = 0; i < N; i++) {
    int64_t c0 = i < 8 ? 70000 + 10 * i : i < 16 ? 100000 + i : i;
    int64_t c1 = i < 8 ? c0 + 5 : i == 8 ? 100000 + span : i < 16 ? 100000 + 1000 * i : i + 1;
    if (i == 8) c0 = 100000;
    col[i][0] = c0, col[i][1] = c1;
  }
  tj_format f;
  OK(tj_format_parse("ds", &f));
  tj_tensor *a, *x;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){N, m}, &f, &a));
  for (int64_t i = 0; i < N; i++)
    for (int e = 0; e < (i == 3 ? 1 : 2); e++)
      OK(tj_tensor_insert(a, (int64_t[]){i, col[i][e]}, (double)(i + 1) * (e ? -1 : 2)));
  OK(tj_tensor_pack(a));
  OK(tj_tensor_new("x", TJ_F64, 1, &m, NULL, &x));
  OK(tj_tensor_pack(x));
  tj_arrays ar;
  OK(tj_tensor_arrays(x, &ar));
  double *xv = ar.vals;
  for (int64_t j = 0; j < m; j++) xv[j] = 1 + j % 13;
  xv[70000] = INFINITY;
  tj_tensor *y = vec("y", TJ_F64, N, 0);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", y, a, x, 1);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_ptr_nonnull(a->sell);
  ck_assert_msg(rt_sell_narrow(a->sell) == narrow, "span %lld: narrow %d", (long long)span,
                rt_sell_narrow(a->sell));
  int64_t nnz, padded;
  bool sorted;
  rt_sell_stats(a->sell, &nnz, &padded, &sorted);
  ck_assert(!sorted);
  ck_assert_int_eq(padded, 2 * N);
  for (int64_t i = 0; i < N; i++) {
    double want = 0, got;
    for (int e = 0; e < (i == 3 ? 1 : 2); e++) want += (double)(i + 1) * (e ? -1 : 2) * xv[col[i][e]];
    OK(tj_tensor_get(y, &i, &got));
    if (i == 0) ck_assert_msg(isinf(got), "y(0) = %g, want inf", got);
    else ck_assert_msg(got == want, "span %lld: y(%lld) = %g, want %g", (long long)span,
                       (long long)i, got, want);
  }
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}

START_TEST(narrow_columns_where_slices_span_less_than_2_16) {
  narrow_case(65535, true);
  narrow_case(65536, false);
}
END_TEST

/* Rows of A: row i holds columns 0 .. len(i)-1, each of value i + 1, so
 * with x(j) = 1 + j, y(i) = (i + 1) len (len + 1) / 2 by hand. The copy
 * pays when the rows average fewer than B entries (rt_sell_max_mean: 128
 * where the AVX2 loop runs, else 32), else the CSR loops run and A keeps
 * no copy. */
static const struct {
  int rows, over, step;   /* len(i) = B + over + i % step, and row 7 one less when step is 0 */
  int raise;              /* TJ_SELL_MAX_MEAN = raise x B, or 0: unset */
  bool sell;
} choices[] = {
    {9, 0, 3, 0, false},    /* B, B + 1, B + 2, ...: mean B + 1 */
    {9, -2, 3, 0, true},    /* mean B - 1 */
    {8, 0, 1, 0, false},    /* all B: mean exactly B */
    {8, 0, 0, 0, true},     /* row 7 holds B - 1: mean B - 1/8 */
    {9, 0, 3, 2, true},     /* mean B + 1 under a bound of 2B */
};

static int64_t choice_len(int c, int64_t bound, int64_t i) {
  if (choices[c].step == 0) return bound + choices[c].over - (i == 7);
  return bound + choices[c].over + i % choices[c].step;
}

START_TEST(copy_only_where_rows_are_short) {
  const int64_t bound = (int64_t)rt_sell_max_mean(TJ_F64);
  ck_assert_int_eq(bound, strcmp(rt_sell_isa(), "avx2") ? 32 : 128);
  ck_assert_int_eq((int64_t)rt_sell_max_mean(TJ_F32), 32);   /* f32: the portable loop */
  char raised[32];
  snprintf(raised, sizeof raised, "%lld", (long long)(choices[_i].raise * bound));
  if (choices[_i].raise) setenv("TJ_SELL_MAX_MEAN", raised, 1);
  const int64_t n = choices[_i].rows, m = bound + 8;
  tj_format f;
  OK(tj_format_parse("ds", &f));
  tj_tensor *a;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){n, m}, &f, &a));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < choice_len(_i, bound, i); j++)
      OK(tj_tensor_insert(a, (int64_t[]){i, j}, (double)(i + 1)));
  OK(tj_tensor_pack(a));
  tj_tensor *x = vec("x", TJ_F64, m, 1), *y = vec("y", TJ_F64, n, -1);
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int t = 1; t <= 2; t++) {
    tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", y, a, x, t);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    ck_assert_msg((a->sell != NULL) == choices[_i].sell, "case %d, %d threads: copy %s", _i, t,
                  a->sell ? "made" : "not made");
    for (int64_t i = 0; i < n; i++) {
      double got, len = (double)choice_len(_i, bound, i);
      OK(tj_tensor_get(y, &i, &got));
      ck_assert_msg(got == (double)(i + 1) * len * (len + 1) / 2, "case %d: y(%lld) = %g", _i,
                    (long long)i, got);
    }
  }
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
  unsetenv("TJ_SELL_MAX_MEAN");   /* CK_FORK=no runs the next test here */
}
END_TEST

/* Seeded matrices against a plain loop over their entries, run by the f64
 * loop this CPU picks (ctest runs the suite as picked, with TJ_SELL_AVX2=1
 * and with TJ_SELL_PORTABLE=1). Integer values, so every order of the
 * sums gives the same doubles and y is compared exactly. Column 0 holds
 * no entry and x(0) = inf: only padding (wide columns: column 0) could
 * read it, and y must stay finite. Rows of length 0, a last slice short
 * of 8 rows, narrow and wide columns, rows kept in order or sorted; y =
 * and y +=, on 1 and 2 threads. */
/* Runs y = A x and y += A x on 1 and 2 threads over CSR A (the copy made
 * by method(sell); `panels` of them unless negative) and compares every
 * y(i) exactly with a plain loop over pos/crd/val; x(j) = j % 11 - 5 with
 * x(0) = inf, which only padding lanes may read. `what` and `run` name
 * the case in messages. */
static void runs_match_plain_loop(tj_context *cx, tj_tensor *a, tj_tensor *x, tj_tensor *y,
                                  const int64_t *pos, const int64_t *crd, const double *val,
                                  const char *what, int run, int64_t panels) {
  int64_t n = y->dims[0], m = x->dims[0];
  tj_arrays ar;
  OK(tj_tensor_arrays(x, &ar));
  double *xv = ar.vals;
  for (int64_t j = 0; j < m; j++) xv[j] = (double)(j % 11) - 5;
  xv[0] = INFINITY;
  for (int acc = 0; acc <= 1; acc++)
    for (int t = 1; t <= 2; t++) {
      OK(tj_tensor_arrays(y, &ar));
      double *yv = ar.vals;
      for (int64_t i = 0; i < n; i++) yv[i] = acc ? (double)(i % 13) : -7;
      tj_kernel *k = compile(cx, acc ? "y(i) += A(i,j) * x(j)" : "y(i) = A(i,j) * x(j)", y, a, x, t);
      OK(tj_kernel_run(k, acc ? TJ_COMPUTE : TJ_EVALUATE, NULL, 0));
      ck_assert_ptr_nonnull(a->sell);
      if (panels >= 0) ck_assert_int_eq(rt_sell_panels(a->sell), panels);
      for (int64_t i = 0; i < n; i++) {
        double want = acc ? (double)(i % 13) : 0, got;
        for (int64_t p = pos[i]; p < pos[i + 1]; p++) want += val[p] * xv[crd[p]];
        OK(tj_tensor_get(y, &i, &got));
        ck_assert_msg(got == want, "%s, %s %d, %d threads, %s: y(%lld) = %g, want %g",
                      rt_sell_isa(), what, run, t, acc ? "+=" : "=", (long long)i, got, want);
      }
    }
}

static const struct {
  int64_t rows, cols;
  int most;          /* row lengths 1..most, or exactly most when uniform */
  int empty_every;   /* every such row is empty (0: none) */
  bool uniform, narrow, sorted;
} shapes[] = {
    {203, 3000, 20, 5, false, true, true},        /* narrow, short last slice, empty rows */
    {203, 300000, 20, 5, false, false, true},     /* wide */
    {200, 300000, 9, 0, true, false, false},      /* wide, full slices in row order */
    {203, 3000, 9, 0, true, true, false},         /* narrow, in row order, short last slice */
    {5, 100000, 7, 2, false, false, false},       /* one slice of 5 rows: no order pads less */
};

static uint64_t next_rand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

static int64_t shape_len(int c, int64_t i, uint64_t *rnd) {
  if (shapes[c].empty_every && i % shapes[c].empty_every == 0) return 0;
  return shapes[c].uniform ? shapes[c].most : 1 + (int64_t)(next_rand(rnd) % (uint64_t)shapes[c].most);
}

START_TEST(fast_loop_against_a_plain_loop) {
  const int64_t n = shapes[_i].rows, m = shapes[_i].cols;
  uint64_t rnd = 11 + (uint64_t)_i;
  int64_t *pos = calloc((size_t)n + 1, sizeof *pos);
  int64_t *crd = malloc((size_t)(n * shapes[_i].most) * sizeof *crd);
  double *val = malloc((size_t)(n * shapes[_i].most) * sizeof *val);
  tj_format f;
  OK(tj_format_parse("ds", &f));
  tj_tensor *a;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){n, m}, &f, &a));
  for (int64_t i = 0; i < n; i++) {   /* distinct columns 1.. of row i, ascending */
    int64_t len = shape_len(_i, i, &rnd), c = 0;
    pos[i + 1] = pos[i] + len;
    for (int64_t e = 0; e < len; e++) {
      c += 1 + (int64_t)(next_rand(&rnd) % (uint64_t)((m - 1 - c) / (len - e)));
      crd[pos[i] + e] = c;
      val[pos[i] + e] = (double)(int64_t)(next_rand(&rnd) % 7) - 3;   /* -3..3, 0 as 4 */
      if (val[pos[i] + e] == 0) val[pos[i] + e] = 4;
      OK(tj_tensor_insert(a, (int64_t[]){i, c}, val[pos[i] + e]));
    }
  }
  OK(tj_tensor_pack(a));
  tj_tensor *x = vec("x", TJ_F64, m, 0), *y = vec("y", TJ_F64, n, 0);
  tj_context *cx;
  OK(tj_context_new(&cx));
  runs_match_plain_loop(cx, a, x, y, pos, crd, val, "shape", _i, -1);
  int64_t nnz, padded;
  bool sorted;
  rt_sell_stats(a->sell, &nnz, &padded, &sorted);
  ck_assert_int_eq(nnz, pos[n]);
  ck_assert_msg(rt_sell_narrow(a->sell) == shapes[_i].narrow, "shape %d: narrow", _i);
  ck_assert_msg(sorted == shapes[_i].sorted, "shape %d: sorted", _i);
  free(pos), free(crd), free(val);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* Column panels: where x passes 4 MB (600000 f64 columns) the copy is
 * 3 panels of 2 MB of x (262144 columns), read one after another with y
 * added to after the first; TJ_SELL_PANEL_X=80000 cuts the same matrix
 * into 60 panels of 10000 columns, where most rows have no entry. y = and
 * y += on 1 and 2 threads against a plain loop over the entries; x(0) is
 * inf and no row stores column 0, which padding lanes read. */
static const struct { const char *panel_x; int64_t panels; } panel_runs[] = {
    {NULL, 3}, {"80000", 60}};

START_TEST(column_panels_where_x_passes_4_mb) {
  const int64_t n = 203, m = 600000;
  if (panel_runs[_i].panel_x) setenv("TJ_SELL_PANEL_X", panel_runs[_i].panel_x, 1);
  uint64_t rnd = 5;
  int64_t *pos = calloc((size_t)n + 1, sizeof *pos), *crd = malloc((size_t)n * 20 * sizeof *crd);
  double *val = malloc((size_t)n * 20 * sizeof *val);
  tj_format f;
  OK(tj_format_parse("ds", &f));
  tj_tensor *a;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){n, m}, &f, &a));
  for (int64_t i = 0; i < n; i++) {   /* 0..20 distinct columns 1.. of row i, ascending */
    int64_t len = i % 7 == 0 ? 0 : 1 + (int64_t)(next_rand(&rnd) % 20), c = 0;
    pos[i + 1] = pos[i] + len;
    for (int64_t e = 0; e < len; e++) {
      c += 1 + (int64_t)(next_rand(&rnd) % (uint64_t)((m - 1 - c) / (len - e)));
      crd[pos[i] + e] = c;
      val[pos[i] + e] = (double)(int64_t)(next_rand(&rnd) % 5) + 1;
      OK(tj_tensor_insert(a, (int64_t[]){i, c}, val[pos[i] + e]));
    }
  }
  OK(tj_tensor_pack(a));
  tj_tensor *x = vec("x", TJ_F64, m, 0), *y = vec("y", TJ_F64, n, 0);
  tj_context *cx;
  OK(tj_context_new(&cx));
  runs_match_plain_loop(cx, a, x, y, pos, crd, val, "run", _i, panel_runs[_i].panels);
  int64_t nnz, padded;
  bool sorted;
  rt_sell_stats(a->sell, &nnz, &padded, &sorted);
  ck_assert_int_eq(nnz, pos[n]);
  unsetenv("TJ_SELL_PANEL_X");   /* CK_FORK=no runs the next test here */
  free(pos), free(crd), free(val);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* The loop each environment asks for, on a CPU with AVX2 and FMA: the
 * widest it has, AVX2 under TJ_SELL_AVX2=1, the portable one under
 * TJ_SELL_PORTABLE=1. */
START_TEST(loop_picked_by_cpu_and_environment) {
  const char *portable = getenv("TJ_SELL_PORTABLE"), *avx2 = getenv("TJ_SELL_AVX2");
  const char *isa = rt_sell_isa();
  if (portable && !strcmp(portable, "1")) ck_assert_str_eq(isa, "portable");
  else if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) ck_assert_str_eq(isa, "portable");
  else if ((avx2 && !strcmp(avx2, "1")) || !__builtin_cpu_supports("avx512f") ||
           !__builtin_cpu_supports("avx512vl"))
    ck_assert_str_eq(isa, "avx2");
  else ck_assert_str_eq(isa, "avx512");
}
END_TEST

static void refused(tj_context *cx, const char *expr, tj_tensor *const *ops, const char *sched,
                    tj_status want, const char *msg) {
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_compile(cx, expr, ops, 3, sched, NULL, &k), want);
  ck_assert_msg(strstr(tj_last_error(), msg), "message: %s", tj_last_error());
}

/* Another thread asking for A's arrays (tj_tensor_arrays drops the copy,
 * as the caller may write through them) while kernels over A run: a run
 * keeps the copy it reads until it is done (freed under the kernel before:
 * a use after free ASan reports), and every run's y is right. */
typedef struct Toucher {
  tj_tensor *a;
  atomic_int stop;
  int calls;   /* read after the join */
} Toucher;

static void *touch_loop(void *p) {
  Toucher *t = p;
  tj_arrays arr;
  while (!atomic_load(&t->stop)) {
    if (tj_tensor_arrays(t->a, &arr) != TJ_OK) break;
    t->calls++;
  }
  return NULL;
}

START_TEST(copy_outlives_a_concurrent_change) {
  fill_dense();
  tj_tensor *a = csr(TJ_F64, "ds"), *x = vec("x", TJ_F64, NC, 1), *y = vec("y", TJ_F64, NR, 0);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "y(i) = A(i,j) * x(j)", y, a, x, 1);
  Toucher t = {.a = a};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, touch_loop, &t), 0);
  for (int r = 0; r < 2000; r++) {
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect(y, x, NULL, 1e-12);
  }
  atomic_store(&t.stop, 1);
  pthread_join(th, NULL);
  ck_assert_int_gt(t.calls, 0);
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
}
END_TEST

START_TEST(refusals_say_why) {
  fill_dense();
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *a = csr(TJ_F64, "ds:1,0"), *x = vec("x", TJ_F64, NC, 1), *y = vec("y", TJ_F64, NR, 0);
  const char *need = "method(sell) needs y(i) = A(i,j) * x(j) (or +=) with A CSR";
  refused(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, "method(sell)",
          TJ_ERR_UNSUPPORTED, need);   /* CSC */
  tj_tensor_free(a);
  a = csr(TJ_F64, "ds");
  refused(cx, "y(i) = A(i,j) * x(j) * 2", (tj_tensor *[]){y, a, x}, "method(sell)",
          TJ_ERR_UNSUPPORTED, need);
  refused(cx, "y(i) = A(i,j) * x(j)", (tj_tensor *[]){y, a, x}, "method(sel)", TJ_ERR_INVALID,
          "method(sel): unknown method (gett, ttgt, log, model, loops or sell)");
  tj_tensor_free(a), tj_tensor_free(x), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sell");
  TCase *tc = tcase_create("sell");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, values_by_hand_and_padding);
  tcase_add_test(tc, padding_never_reads_x);
  tcase_add_test(tc, accumulates_and_f32_and_wide_indices);
  tcase_add_test(tc, copy_rebuilt_when_the_tensor_changes);
  tcase_add_test(tc, skewed_rows_sorted_and_two_threads);
  tcase_add_test(tc, narrow_columns_where_slices_span_less_than_2_16);
  tcase_add_loop_test(tc, copy_only_where_rows_are_short, 0,
                      (int)(sizeof choices / sizeof choices[0]));
  tcase_add_loop_test(tc, fast_loop_against_a_plain_loop, 0, (int)(sizeof shapes / sizeof shapes[0]));
  tcase_add_loop_test(tc, column_panels_where_x_passes_4_mb, 0,
                      (int)(sizeof panel_runs / sizeof panel_runs[0]));
  tcase_add_test(tc, loop_picked_by_cpu_and_environment);
  tcase_add_test(tc, refusals_say_why);
  tcase_add_test(tc, copy_outlives_a_concurrent_change);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
