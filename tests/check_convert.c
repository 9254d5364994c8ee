/* Conversion between any two encodings (issue 15): every pair of the
 * supported matrix formats (dense, CSR, CSC, DCSR, DCSC, COO, nonunique
 * and nonordered compressed, loose_compressed, a dense level below a
 * compressed one, BSR 2x2 and 4x4 at sizes that are not multiples of the
 * block, 2:4 under dense and compressed rows, 8-, 16- and 64-bit
 * positions and coordinates, and views), and of the order-3 ones (CSF in
 * three mode orders, dense-rooted CSF, COO-3, dense, blocked), converts a
 * matrix and keeps every value, checked against the dense array it was
 * built from. A target that cannot hold the data (3 nonzeros in a 4-block
 * under 2:4, a coordinate past an 8-bit crdWidth) is refused with a
 * message naming it. Kernels writing blocked and 2:4 outputs agree with
 * conversion. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_format parse(const char *spec) {
  tj_format f;
  OK(tj_format_parse(spec, &f));
  return f;
}

/* Matrix formats; "view" rows are a view of a larger CSR matrix, "dview"
 * of a larger dense one (its values are the base's, strided: a dense to
 * dense conversion must not move them as a whole array). */
static const char *const mat[] = {
    "dd", "ds", "ds:1,0", "ss", "ss:1,0", "uq", "us", "do", "ls", "sd", "sl:1,0",
    "dsdd:0/2,1/2,0%2,1%2", "dsdd:0/4,1/4,0%4,1%4", "sssd:0/2,1/3,0%2,1%3",
    "ddn2:0,1/4,1%4", "dsn2:0,1/4,1%4",
    "(i, j) -> (i : dense, j : compressed), posWidth = 8, crdWidth = 8",
    "(i, j) -> (i : compressed(nonunique), j : singleton), posWidth = 16, crdWidth = 16",
    "(i, j) -> (j : compressed, i : compressed), posWidth = 64, crdWidth = 64",
    ("(i, j) -> (i floordiv 2 : dense, j floordiv 4 : compressed, i mod 2 : dense, "
     "j mod 4 : dense), crdWidth = 16"),
    "view", "dview"};
#define NMAT ((int)(sizeof mat / sizeof mat[0]))

enum { R = 9, C = 10 };

/* The 9 x 10 matrix: at most 2 nonzeros in every block of 4 along a row
 * (so 2:4 holds it), an empty row, an empty column, a full-ish last row. */
static void fill(double d[R][C]) {
  memset(d, 0, sizeof(double) * R * C);
  unsigned s = 12345;
  for (int i = 0; i < R; i++) {
    if (i == 4) continue;
    for (int b = 0; b * 4 < C; b++)
      for (int k = 0; k < 2; k++) {
        s = s * 1103515245u + 12345u;
        int j = b * 4 + (int)(s >> 16) % 4;
        if (j < C && j != 6 && (s >> 8) % 3) d[i][j] = 1 + (int)((s >> 20) % 9) * (i % 2 ? -1 : 1);
      }
  }
}

/* A tensor of format spec holding d; a "view" ("dview") row is the 9 x 10
 * window at (2, 1) of a 12 x 12 CSR (dense) matrix that holds d there (and
 * other entries around it); *base is then the matrix it views. */
static bool is_view(const char *spec) { return !strcmp(spec, "view") || !strcmp(spec, "dview"); }

static tj_tensor *make(const char *spec, double d[R][C], tj_tensor **base) {
  *base = NULL;
  if (is_view(spec)) {
    tj_format csr = parse(spec[0] == 'd' ? "dd" : "ds");
    OK(tj_tensor_new("B", TJ_F64, 2, (int64_t[]){12, 12}, &csr, base));
    for (int64_t i = 0; i < 12; i++)
      for (int64_t j = 0; j < 12; j++) {
        bool in = i >= 2 && i < 2 + R && j >= 1 && j < 1 + C;
        double v = in ? d[i - 2][j - 1] : (double)((i + j) % 5);
        if (v != 0) OK(tj_tensor_insert(*base, (int64_t[]){i, j}, v));
      }
    OK(tj_tensor_pack(*base));
    tj_tensor *v;
    OK(tj_tensor_slice(*base, "A", (int64_t[]){2, 1}, (int64_t[]){R, C}, NULL, &v));
    return v;
  }
  tj_format f = parse(spec);
  tj_tensor *t;
  OK(tj_tensor_new("A", TJ_F64, 2, (int64_t[]){R, C}, &f, &t));
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++)
      if (d[i][j] != 0) OK(tj_tensor_insert(t, (int64_t[]){i, j}, d[i][j]));
  OK(tj_tensor_pack(t));
  return t;
}

static void same_values(const tj_tensor *t, double d[R][C], const char *what) {
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) {
      double v;
      OK(tj_tensor_get(t, (int64_t[]){i, j}, &v));
      ck_assert_msg(v == d[i][j], "%s: (%lld,%lld) = %g, want %g", what, (long long)i,
                    (long long)j, v, d[i][j]);
    }
  /* unpack agrees with get: no entry outside the matrix, none twice */
  int64_t *coords, n;
  double *vals;
  OK(tj_tensor_unpack(t, &coords, &vals, &n));
  double sum[R][C] = {{0}};
  for (int64_t e = 0; e < n; e++) {
    ck_assert_msg(coords[2 * e] >= 0 && coords[2 * e] < R && coords[2 * e + 1] >= 0 &&
                      coords[2 * e + 1] < C, "%s: entry %lld outside", what, (long long)e);
    sum[coords[2 * e]][coords[2 * e + 1]] += vals[e];
  }
  free(coords), free(vals);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++)
      ck_assert_msg(sum[i][j] == d[i][j], "%s: unpacked (%d,%d) sums to %g, want %g", what, i,
                    j, sum[i][j], d[i][j]);
}

/* _i = from * NMAT + to */
START_TEST(matrix_pairs) {
  const char *from = mat[_i / NMAT], *to = mat[_i % NMAT];
  if (is_view(to)) return;   /* a view is made, not converted to */
  double d[R][C];
  fill(d);
  tj_tensor *base, *a = make(from, d, &base), *b, *back;
  char what[512];
  snprintf(what, sizeof what, "%s -> %s", from, to);
  same_values(a, d, from);
  tj_format f = parse(to);
  OK(tj_tensor_convert(a, &f, &b));
  same_values(b, d, what);
  /* and back to the source's format (a view: to CSR) */
  tj_format g = parse(!is_view(from) ? from : from[0] == 'd' ? "dd" : "ds");
  OK(tj_tensor_convert(b, &g, &back));
  snprintf(what, sizeof what, "%s -> %s -> back", from, to);
  same_values(back, d, what);
  tj_tensor_free(back), tj_tensor_free(b), tj_tensor_free(a), tj_tensor_free(base);
}
END_TEST

/* Blocked and n_out_of_m formats as kernel outputs: O(i,j) = A(i,j) from
 * a dense A and from A in O's own format (an index has one block size per
 * kernel) gives what tj_tensor_convert gives: every value of the matrix,
 * and for BSR the same stored blocks (the arrays compared one by one). */
static const char *const blocked_out[] = {
    "dsdd:0/2,1/2,0%2,1%2", "dsdd:0/4,1/4,0%4,1%4", "sssd:0/2,1/3,0%2,1%3",
    "ddn2:0,1/4,1%4", "dsn2:0,1/4,1%4",
    ("(i, j) -> (i floordiv 2 : dense, j floordiv 4 : compressed, i mod 2 : dense, "
     "j mod 4 : dense), crdWidth = 16")};
#define NBOUT ((int)(sizeof blocked_out / sizeof blocked_out[0]))

/* _i = target * 2 + (source is the target's format) */
START_TEST(kernel_outputs) {
  const char *to = blocked_out[_i / 2], *from = _i % 2 ? to : "dd";
  double d[R][C];
  fill(d);
  tj_tensor *base, *a = make(from, d, &base), *o, *conv;
  tj_format f = parse(to);
  OK(tj_tensor_new("O", TJ_F64, 2, (int64_t[]){R, C}, &f, &o));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, "O(i,j) = A(i,j)", (tj_tensor *[]){o, a}, 2, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  char what[512];
  snprintf(what, sizeof what, "O(i,j) = A(i,j), %s -> %s", from, to);
  same_values(o, d, what);
  OK(tj_tensor_convert(a, &f, &conv));
  if (_i % 2) {   /* from the same format: the very arrays convert builds */
    tj_arrays x, y;
    OK(tj_tensor_arrays(o, &x));
    OK(tj_tensor_arrays(conv, &y));
    ck_assert_int_eq(x.vals_len, y.vals_len);
    ck_assert(!memcmp(x.vals, y.vals, sizeof(double) * (size_t)x.vals_len));
    for (int l = 0; l < f.order; l++) {
      ck_assert_int_eq(x.pos_len[l], y.pos_len[l]);
      ck_assert_int_eq(x.crd_len[l], y.crd_len[l]);
    }
  }
  tj_context_free(cx);
  tj_tensor_free(conv), tj_tensor_free(o), tj_tensor_free(a), tj_tensor_free(base);
}
END_TEST

/* Order 3: every pair of CSF variants, COO-3, dense and blocked. */
static const char *const ord3[] = {"sss", "dss", "sss:2,0,1", "sds", "ssd:1,0,2", "uqq",
                                   "ddd", "dsd", "ddsd:0,1,2/2,2%2", "dsss:0,1/2,2,1%2"};
#define NORD3 ((int)(sizeof ord3 / sizeof ord3[0]))

START_TEST(order3_pairs) {
  const char *from = ord3[_i / NORD3], *to = ord3[_i % NORD3];
  enum { I = 4, J = 5, K = 3 };
  double d[I][J][K] = {{{0}}};
  unsigned s = 777;
  for (int e = 0; e < 25; e++) {
    s = s * 1103515245u + 12345u;
    d[(s >> 16) % I][(s >> 8) % J][(s >> 4) % K] = 1 + (int)((s >> 20) % 7);
  }
  tj_format ff = parse(from), ft = parse(to);
  tj_tensor *a, *b;
  OK(tj_tensor_new("A", TJ_F64, 3, (int64_t[]){I, J, K}, &ff, &a));
  for (int64_t i = 0; i < I; i++)
    for (int64_t j = 0; j < J; j++)
      for (int64_t k = 0; k < K; k++)
        if (d[i][j][k] != 0) OK(tj_tensor_insert(a, (int64_t[]){i, j, k}, d[i][j][k]));
  OK(tj_tensor_pack(a));
  OK(tj_tensor_convert(a, &ft, &b));
  for (int64_t i = 0; i < I; i++)
    for (int64_t j = 0; j < J; j++)
      for (int64_t k = 0; k < K; k++) {
        double v;
        OK(tj_tensor_get(b, (int64_t[]){i, j, k}, &v));
        ck_assert_msg(v == d[i][j][k], "%s -> %s: (%lld,%lld,%lld) = %g, want %g", from, to,
                      (long long)i, (long long)j, (long long)k, v, d[i][j][k]);
      }
  tj_tensor_free(a), tj_tensor_free(b);
}
END_TEST

/* Targets that cannot hold the data refuse it, naming what does not fit. */
START_TEST(refusals) {
  double d[R][C];
  fill(d);
  d[3][4] = d[3][5] = d[3][7] = 2;   /* 3 nonzeros in the block (3, 4..7) */
  tj_tensor *base, *a = make("ds", d, &base), *b;
  tj_format nm = parse("ddn2:0,1/4,1%4");
  ck_assert_int_eq(tj_tensor_convert(a, &nm, &b), TJ_ERR_FORMAT);
  ck_assert_msg(strstr(tj_last_error(), "the block at (3, 4..7) holds 3 nonzeros"), "%s",
                tj_last_error());
  tj_tensor_free(a);
  /* a 300-column matrix into 8-bit coordinates */
  tj_format csr = parse("ds"), narrow = parse("(i, j) -> (i : dense, j : compressed), crdWidth = 8");
  OK(tj_tensor_new("W", TJ_F64, 2, (int64_t[]){2, 300}, &csr, &a));
  OK(tj_tensor_insert(a, (int64_t[]){1, 299}, 1));
  OK(tj_tensor_pack(a));
  ck_assert_int_ne(tj_tensor_convert(a, &narrow, &b), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "crdWidth 8"), "%s", tj_last_error());
  /* 300 entries into 8-bit positions */
  tj_format pos8 = parse("(i, j) -> (i : dense, j : compressed), posWidth = 8");
  for (int64_t j = 0; j < 300; j++) OK(tj_tensor_insert(a, (int64_t[]){0, j}, 1));
  OK(tj_tensor_pack(a));
  ck_assert_int_ne(tj_tensor_convert(a, &pos8, &b), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "posWidth 8"), "%s", tj_last_error());
  /* a format with slices is a view, not a conversion target */
  tj_format sl = parse("ds[0:1:1,:]");
  ck_assert_int_ne(tj_tensor_convert(a, &sl, &b), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), "describe a view"), "%s", tj_last_error());
  tj_tensor_free(a);
}
END_TEST

/* An explicit zero under a sparse last level is an entry (min, max and
 * semirings tell it from an absent one): every conversion into a sparse
 * format keeps it. A zero under a dense last level is fill: a conversion
 * from dense rows drops it. A is the 2 x 3 CSR [0* . 5; . 7 .], 0* stored. */
START_TEST(explicit_zeros) {
  tj_format csr = parse("ds");
  tj_arrays arr = {.dtype = TJ_F64, .order = 2, .dims = (int64_t[]){2, 3}, .fmt = &csr};
  arr.pos[1] = (int32_t[]){0, 2, 3}, arr.pos_len[1] = 3;
  arr.crd[1] = (int32_t[]){0, 2, 1}, arr.crd_len[1] = 3;
  arr.vals = (double[]){0, 5, 7}, arr.vals_len = 3;
  tj_tensor *a;
  OK(tj_tensor_wrap("A", &arr, 0, &a));
  const char *sparse[] = {"ds", "ds:1,0", "ss", "uq", "du", "ls", "do"};
  for (size_t k = 0; k < sizeof sparse / sizeof *sparse; k++) {
    tj_format f = parse(sparse[k]);
    tj_tensor *b;
    OK(tj_tensor_convert(a, &f, &b));
    int64_t *co, n;
    double *v;
    OK(tj_tensor_unpack(b, &co, &v, &n));
    ck_assert_msg(n == 3, "%s: %lld entries, want 3 (the explicit zero kept)", sparse[k],
                  (long long)n);
    bool zero_at_00 = false;
    for (int64_t e = 0; e < n; e++) zero_at_00 |= co[2 * e] == 0 && co[2 * e + 1] == 0 && v[e] == 0;
    ck_assert_msg(zero_at_00, "%s: no stored 0 at (0,0)", sparse[k]);
    free(co), free(v);
    tj_tensor_free(b);
  }
  const char *dense_rows[] = {"dd", "sd"};  /* zeros under a dense last level are fill */
  for (int k = 0; k < 2; k++) {
    tj_format f = parse(dense_rows[k]), back = parse("ds");
    tj_tensor *b, *c;
    OK(tj_tensor_convert(a, &f, &b));
    OK(tj_tensor_convert(b, &back, &c));
    ck_assert_msg(tj_tensor_nnz(c) == 2, "%s -> ds: %lld entries, want 2", dense_rows[k],
                  (long long)tj_tensor_nnz(c));
    tj_tensor_free(b), tj_tensor_free(c);
  }
  tj_tensor_free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("convert");
  TCase *tc = tcase_create("convert");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, matrix_pairs, 0, NMAT * NMAT);
  tcase_add_loop_test(tc, order3_pairs, 0, NORD3 * NORD3);
  tcase_add_loop_test(tc, kernel_outputs, 0, NBOUT * 2);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, explicit_zeros);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
