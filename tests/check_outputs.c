/* Sparse outputs of more shapes (issue 15): `+=` into a sparse output (its
 * old pattern joined with the rhs's, old values added to), through every
 * phase, in COO, CSR, CSC, nonordered CSR, DCSR and CSF outputs, under a
 * semiring, from SpGEMM, on 1 and 2 threads and into wrapped arrays.
 * Expected values are worked out by hand or by plain loops over the
 * operands' dense values in this file, never by the reference alone. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/tensors.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_kernel *compile(tj_context *cx, const char *expr, tj_tensor **ops, int n,
                          const tj_options *o) {
  tj_kernel *k = NULL;
  OK(tj_compile(cx, expr, ops, n, NULL, o, &k));
  return k;
}

/* t's values (row-major, cells of them) and which cells it stores. */
static void dense_of(const tj_tensor *t, double *v, unsigned char *stored, int64_t cells) {
  memset(v, 0, (size_t)cells * sizeof *v);
  memset(stored, 0, (size_t)cells);
  int64_t *coords, nnz;
  double *vals;
  OK(tj_tensor_unpack(t, &coords, &vals, &nnz));
  int order = tj_tensor_order(t);
  for (int64_t e = 0; e < nnz; e++) {
    int64_t lin = 0;
    for (int m = 0; m < order; m++) lin = lin * tj_tensor_dim(t, m) + coords[e * order + m];
    ck_assert_msg(!stored[lin], "cell %lld stored twice", (long long)lin);
    v[lin] = vals[e];
    stored[lin] = 1;
  }
  free(coords);
  free(vals);
}

/* t stores exactly the cells where want_stored is 1, with values want. */
static void expect(const tj_tensor *t, const double *want, const unsigned char *want_stored,
                   int64_t cells, const char *what) {
  double *v = malloc((size_t)cells * sizeof *v);
  unsigned char *st = malloc((size_t)cells);
  dense_of(t, v, st, cells);
  for (int64_t c = 0; c < cells; c++) {
    ck_assert_msg(st[c] == want_stored[c], "%s: cell %lld stored %d, want %d", what,
                  (long long)c, st[c], want_stored[c]);
    ck_assert_msg(fabs(v[c] - want[c]) <= 1e-12 * (1 + fabs(want[c])),
                  "%s: cell %lld is %g, want %g", what, (long long)c, v[c], want[c]);
  }
  free(v);
  free(st);
}

/* A (3 x 4) += B .* c:
 *   A = [1 0 0 2]   B = [0 5 0 -.5]   c = [1 2 3 4]   B.*c = [0 10 0 -2]
 *       [0 0 0 0]       [4 0 0  0 ]                          [4  0 0  0]
 *       [0 3 0 0]       [0 0 0  0 ]                          [0  0 0  0]
 * The result stores the union (A(0,3) + -2 = 0 stays stored). */
static const double A34[12] = {1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0};
static const double B34[12] = {0, 5, 0, -.5, 4, 0, 0, 0, 0, 0, 0, 0};
static const double C4[4] = {1, 2, 3, 4};
static const unsigned char U34[12] = {1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0};
static const double ONCE[12] = {1, 10, 0, 0, 4, 0, 0, 0, 0, 3, 0, 0};
static const double TWICE[12] = {1, 20, 0, -2, 8, 0, 0, 0, 0, 3, 0, 0};
static const double KEPT[12] = {1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0};

static const char *out_formats[] = {"ds", "ss", "uq", "ds:1,0", "do", "ss:1,0"};
#define N_OUT_FORMATS (int)(sizeof out_formats / sizeof *out_formats)

static void matrix_case(const char *fmt, int threads, tj_phase first) {
  int64_t d2[2] = {3, 4}, d1[1] = {4};
  tj_tensor *ops[3] = {tu_tensor("A", fmt, 2, d2, A34), tu_tensor("B", "ds", 2, d2, B34),
                       tu_tensor("c", "d", 1, d1, C4)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, "A(i,j) += B(i,j) * c(j)", ops, 3, &o);
  char what[64];
  snprintf(what, sizeof what, "%s, %d threads", fmt, threads);
  if (first == TJ_EVALUATE) {
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect(ops[0], ONCE, U34, 12, what);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect(ops[0], TWICE, U34, 12, what);
  } else {
    OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));   /* the union, old values kept */
    expect(ops[0], KEPT, U34, 12, what);
    OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
    expect(ops[0], ONCE, U34, 12, what);
    OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));   /* adds again on the same pattern */
    expect(ops[0], TWICE, U34, 12, what);
  }
  ck_assert_int_eq(tj_tensor_nnz(ops[0]), 5);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}

START_TEST(matrix_by_hand_evaluate) {
  matrix_case(out_formats[_i % N_OUT_FORMATS], 1 + _i / N_OUT_FORMATS, TJ_EVALUATE);
}
END_TEST

START_TEST(matrix_by_hand_assemble_compute) {
  matrix_case(out_formats[_i % N_OUT_FORMATS], 1 + _i / N_OUT_FORMATS, TJ_ASSEMBLE);
}
END_TEST

/* CSR's arrays after one evaluate: the union's rows, in order. */
START_TEST(csr_arrays) {
  int64_t d2[2] = {3, 4}, d1[1] = {4};
  tj_tensor *ops[3] = {tu_tensor("A", "ds", 2, d2, A34), tu_tensor("B", "ds", 2, d2, B34),
                       tu_tensor("c", "d", 1, d1, C4)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) += B(i,j) * c(j)", ops, 3, NULL);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_arrays ar;
  OK(tj_tensor_arrays(ops[0], &ar));
  int32_t pos[4] = {0, 3, 4, 5}, crd[5] = {0, 1, 3, 0, 1};
  double vals[5] = {1, 10, 0, 4, 3};
  ck_assert_int_eq(ar.pos_len[1], 4);
  ck_assert_int_eq(ar.crd_len[1], 5);
  for (int q = 0; q < 4; q++) ck_assert_int_eq(((int32_t *)ar.pos[1])[q], pos[q]);
  for (int q = 0; q < 5; q++) ck_assert_int_eq(((int32_t *)ar.crd[1])[q], crd[q]);
  for (int q = 0; q < 5; q++) ck_assert_double_eq(((double *)ar.vals)[q], vals[q]);
  FILE *f = tmpfile();
  OK(tj_kernel_print(k, TJ_STAGE_NOTATION, f));
  rewind(f);
  char line[128] = {0};
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  ck_assert_str_eq(line, "A(i,j) = A_old(i,j) + B(i,j) * c(j)\n");
  fclose(f);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* Under min.plus, += is min= and * is +: A = min(A, B + c) on the union;
 * a new entry starts at min's identity (+inf), not 0, after ASSEMBLE.
 *   A(0,0) 1 alone: 1;  A(0,3) = min(2, -.5 + 4) = 2;  (0,1) 5 + 2 = 7;
 *   (1,0) 4 + 1 = 5;  A(2,1) 3 alone: 3. */
START_TEST(min_plus) {
  int64_t d2[2] = {3, 4}, d1[1] = {4};
  tj_tensor *ops[3] = {tu_tensor("A", "ds", 2, d2, A34), tu_tensor("B", "ds", 2, d2, B34),
                       tu_tensor("c", "d", 1, d1, C4)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.semiring = "min.plus";
  tj_kernel *k = compile(cx, "A(i,j) += B(i,j) * c(j)", ops, 3, &o);
  OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
  double kept[12] = {1, INFINITY, 0, 2, INFINITY, 0, 0, 0, 0, 3, 0, 0};
  double v[12];
  unsigned char st[12];
  dense_of(ops[0], v, st, 12);
  for (int c = 0; c < 12; c++) ck_assert_msg(v[c] == kept[c], "cell %d: %g", c, v[c]);
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  double want[12] = {1, 7, 0, 2, 5, 0, 0, 0, 0, 3, 0, 0};
  expect(ops[0], want, U34, 12, "min.plus");
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));   /* min again: unchanged */
  expect(ops[0], want, U34, 12, "min.plus twice");
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* SpGEMM into an output that holds entries, in every sparse format, over
 * CSR and over CSC operands: the sum runs on its own into a temporary, so
 * A keeps exactly the union of its pattern and the product's (not every
 * column of a row, nor every row of a column):
 *   A = [1 0 0]   B = [1 2 0]   C = [0 1 0]   B*C = [6 1 0]
 *       [0 0 5]       [0 0 0]       [3 0 0]         [0 0 0]
 *       [0 0 0]       [0 0 4]       [0 0 0]         [0 0 0]
 *   A + B*C = [7 1 0; 0 0 5; 0 0 0], stored (0,0), (0,1), (1,2): row 2
 * stores nothing though B(2,2) is stored (C's row 2 is empty). `sd`
 * stores whole rows: rows 0 and 1. ASSEMBLE then COMPUTE gives the same,
 * and COMPUTE again adds B*C once more: [13 2 0; 0 0 5; 0 0 0]. */
static const char *spgemm_formats[] = {"ds", "ss", "do", "ds:1,0", "uq", "ss:1,0", "uq:1,0",
                                       "sd"};
#define N_SPGEMM_FORMATS (int)(sizeof spgemm_formats / sizeof *spgemm_formats)

START_TEST(spgemm) {
  const char *fmt = spgemm_formats[_i / 2], *opf = _i % 2 ? "ds:1,0" : "ds";
  int64_t d3[2] = {3, 3};
  const double a[9] = {1, 0, 0, 0, 0, 5, 0, 0, 0}, b[9] = {1, 2, 0, 0, 0, 0, 0, 0, 4},
               c[9] = {0, 1, 0, 3, 0, 0, 0, 0, 0};
  const double want[9] = {7, 1, 0, 0, 0, 5, 0, 0, 0}, again[9] = {13, 2, 0, 0, 0, 5, 0, 0, 0};
  unsigned char stored[9] = {1, 1, 0, 0, 0, 1, 0, 0, 0};
  bool rows = !strcmp(fmt, "sd");
  if (rows) memset(stored, 1, 6);
  int nnz = rows ? 6 : 3;
  char what[64];
  snprintf(what, sizeof what, "A %s, B and C %s", fmt, opf);
  tj_tensor *ops[3] = {tu_tensor("A", fmt, 2, d3, a), tu_tensor("B", opf, 2, d3, b),
                       tu_tensor("C", opf, 2, d3, c)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) += B(i,k) * C(k,j)", ops, 3, NULL);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], want, stored, 9, what);
  ck_assert_int_eq(tj_tensor_nnz(ops[0]), nnz);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));   /* adds again */
  expect(ops[0], again, stored, 9, what);
  tj_tensor_free(ops[0]);
  ops[0] = tu_tensor("A", fmt, 2, d3, a);
  OK(tj_kernel_run(k, TJ_ASSEMBLE, ops, 3));
  expect(ops[0], a, stored, 9, what);   /* the union, A's values kept */
  OK(tj_kernel_run(k, TJ_COMPUTE, ops, 3));
  expect(ops[0], want, stored, 9, what);
  OK(tj_kernel_run(k, TJ_COMPUTE, ops, 3));
  expect(ops[0], again, stored, 9, what);
  ck_assert_int_eq(tj_tensor_nnz(ops[0]), nnz);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* SpGEMM `=` into every sparse matrix format with a sparse last level,
 * over CSR and CSC operands, stores exactly the product's pattern: with B
 * and C as above, B*C = [6 1 0; 0 0 0; 0 0 0], stored (0,0) and (0,1)
 * only (`sd` stores the rows its loops reach, as before: skipped). CSC, DCSC
 * and COO over CSR operands (and CSR-like ones over CSC) visited every
 * (j, i) in the inner-product order their levels ask for and stored all
 * 9 cells; they now go through an exact temporary. Twice, and ASSEMBLE
 * then COMPUTE, give the same. */
START_TEST(spgemm_assign_exact) {
  const char *fmt = spgemm_formats[_i / 2], *opf = _i % 2 ? "ds:1,0" : "ds";
  int64_t d3[2] = {3, 3};
  const double b[9] = {1, 2, 0, 0, 0, 0, 0, 0, 4}, c[9] = {0, 1, 0, 3, 0, 0, 0, 0, 0};
  const double want[9] = {6, 1, 0, 0, 0, 0, 0, 0, 0};
  unsigned char stored[9] = {1, 1, 0, 0, 0, 0, 0, 0, 0};
  if (!strcmp(fmt, "sd")) return;   /* a dense tail's rows are the loops' (not routed) */
  char what[64];
  snprintf(what, sizeof what, "A = B*C: A %s, B and C %s", fmt, opf);
  tj_tensor *ops[3] = {tu_tensor("A", fmt, 2, d3, NULL), tu_tensor("B", opf, 2, d3, b),
                       tu_tensor("C", opf, 2, d3, c)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) = B(i,k) * C(k,j)", ops, 3, NULL);
  for (int rep = 0; rep < 2; rep++) {
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect(ops[0], want, stored, 9, what);
    ck_assert_int_eq(tj_tensor_nnz(ops[0]), 2);
  }
  OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  expect(ops[0], want, stored, 9, what);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* The temporary's format: A's own where its kernel is exact (CSR, CSC
 * over CSC operands, and over operands converted to A's level order: CSC
 * over CSR, CSR over CSC), else a DCSR one (COO, `sd`: no workspace into
 * their last level) that the union reads as stored. */
START_TEST(spgemm_temporary_format) {
  static const struct { const char *a, *ops, *t; int converted; } cases[] = {
      {"ds", "ds", "ds", 0},         {"ds:1,0", "ds:1,0", "ds:1,0", 0},
      {"ds:1,0", "ds", "ds:1,0", 0}, {"ds", "ds:1,0", "ds", 0},
      {"uq", "ds", "ss", 0},         {"sd", "ds", "ss", 0},
      {"uq:1,0", "ds", "ss:1,0", 0}, {"uq", "ds:1,0", "ss", 0},
  };
  int64_t d3[2] = {3, 3};
  const double z[9] = {0};
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    tj_tensor *ops[3] = {tu_tensor("A", cases[q].a, 2, d3, z),
                         tu_tensor("B", cases[q].ops, 2, d3, z),
                         tu_tensor("C", cases[q].ops, 2, d3, z)};
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = compile(cx, "A(i,j) += B(i,k) * C(k,j)", ops, 3, NULL);
    tj_format f;
    int converted;
    OK(tj_kernel_operand_format(k, "A_sum", &f, &converted));
    char got[64];
    tj_format_print(&f, got, sizeof got);
    ck_assert_msg(!strcmp(got, cases[q].t) && converted == cases[q].converted,
                  "A %s over %s: A_sum read as %s (converted %d), want %s (%d)", cases[q].a,
                  cases[q].ops, got, converted, cases[q].t, cases[q].converted);
    tj_context_free(cx);
    for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
  }
}
END_TEST

/* SpGEMM `=` whose planner's order is not exact (CSC and DCSC over CSR
 * operands, CSR and DCSR over CSC ones) compiles one direct kernel in the
 * output's level order, Gustavson's through a workspace with the operands
 * converted to fit, not a temporary and a copy; COO, whose singleton
 * level takes no workspace, still goes through one. 40 x 30 times 30 x 35
 * against plain loops, storing exactly the product's pattern. */
START_TEST(spgemm_assign_direct_level_order) {
  static const struct { const char *a, *ops; bool direct; } cases[] = {
      {"ds:1,0", "ds", true}, {"ss:1,0", "ds", true}, {"ds", "ds:1,0", true},
      {"ss", "ds:1,0", true}, {"uq", "ds", false},    {"uq:1,0", "ds:1,0", false},
  };
  const int64_t I = 40, K = 30, J = 35;
  double *b = calloc((size_t)(I * K), sizeof *b), *c = calloc((size_t)(K * J), sizeof *c);
  srand(17);
  for (int64_t e = 0; e < I * K; e++) b[e] = rand() % 10 == 0 ? 1 + rand() % 5 : 0;
  for (int64_t e = 0; e < K * J; e++) c[e] = rand() % 10 == 0 ? 1 + rand() % 5 : 0;
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    tj_tensor *ops[3] = {tu_tensor("A", cases[q].a, 2, (int64_t[]){I, J}, NULL),
                         tu_tensor("B", cases[q].ops, 2, (int64_t[]){I, K}, b),
                         tu_tensor("C", cases[q].ops, 2, (int64_t[]){K, J}, c)};
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = compile(cx, "A(i,j) = B(i,k) * C(k,j)", ops, 3, NULL);
    tj_format f;
    int converted;
    bool temp = tj_kernel_operand_format(k, "A_sum", &f, &converted) == TJ_OK;
    ck_assert_msg(temp != cases[q].direct, "A %s over %s: %s", cases[q].a, cases[q].ops,
                  temp ? "through a temporary" : "direct");
    if (cases[q].direct) {   /* B read in A's level order: converted */
      OK(tj_kernel_operand_format(k, "B", &f, &converted));
      ck_assert_int_eq(converted, 1);
    }
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    int64_t stored = 0;
    for (int64_t i = 0; i < I; i++)
      for (int64_t j = 0; j < J; j++) {
        double want = 0, got;
        bool any = false;
        for (int64_t kk = 0; kk < K; kk++) {
          want += b[i * K + kk] * c[kk * J + j];
          any |= b[i * K + kk] != 0 && c[kk * J + j] != 0;
        }
        stored += any;
        OK(tj_tensor_get(ops[0], (int64_t[]){i, j}, &got));
        ck_assert_msg(got == want, "A %s over %s: A(%lld,%lld) = %g, want %g", cases[q].a,
                      cases[q].ops, (long long)i, (long long)j, got, want);
      }
    ck_assert_int_eq(tj_tensor_nnz(ops[0]), stored);
    tj_context_free(cx);
    for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
  }
  free(b), free(c);
}
END_TEST

/* A contraction into 3-D outputs, A(i,j,k) += B(i,j,l) * C(l,k):
 *   A(0,0,0) = 1, A(1,1,2) = 4
 *   B(0,1,0) = 2, B(1,0,1) = 3, B(1,1,2) = 5;  C(0,1) = 1, C(2,2) = 2 (row 1 empty)
 *   B*C: (0,1,1) = 2*1 = 2, (1,1,2) = 5*2 = 10; the fiber (1,0) is empty (B(1,0,1)
 *   meets C's empty row 1).
 *   A + B*C: (0,0,0) 1, (0,1,1) 2, (1,1,2) 14, nothing else stored; `ssd`
 * stores the fibers (0,0), (0,1) and (1,1) whole, not (1,0). Again: (0,1,1)
 * 4, (1,1,2) 24. */
START_TEST(spgemm_order3) {
  static const char *fmts[] = {"sss", "sds", "dss", "uqq", "ssd", "sss:2,0,1"};
  const char *fmt = fmts[_i];
  int64_t da[3] = {2, 2, 3}, db[3] = {2, 2, 3}, dc[2] = {3, 3};
  double a[12] = {0}, b[12] = {0}, c[9] = {0}, want[12] = {0}, again[12] = {0};
  unsigned char stored[12] = {0};
  a[0] = 1, a[11] = 4;
  b[1 * 3 + 0] = 2, b[2 * 3 + 1] = 3, b[3 * 3 + 2] = 5;
  c[0 * 3 + 1] = 1, c[2 * 3 + 2] = 2;
  want[0] = 1, want[4] = 2, want[11] = 14;
  again[0] = 1, again[4] = 4, again[11] = 24;
  bool fibers = !strcmp(fmt, "ssd");
  for (int x = 0; x < 12; x++) stored[x] = fibers ? x / 3 != 2 : x == 0 || x == 4 || x == 11;
  tj_tensor *ops[3] = {tu_tensor("A", fmt, 3, da, a), tu_tensor("B", "sss", 3, db, b),
                       tu_tensor("C", "ds", 2, dc, c)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j,k) += B(i,j,l) * C(l,k)", ops, 3, NULL);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], want, stored, 12, fmt);
  ck_assert_int_eq(tj_tensor_nnz(ops[0]), fibers ? 9 : 3);
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  expect(ops[0], again, stored, 12, fmt);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* The same at 40 x 30 (k 25) against plain loops: A stores its old cells
 * and those (i,j) with B(i,k) and C(k,j) both stored for some k (a
 * cancelling sum stays stored), and nothing else. */
START_TEST(spgemm_pattern_exact) {
  enum { M = 40, N = 30, K = 25 };
  static double a[M * N], b[M * K], c[K * N], want[M * N];
  static unsigned char stored[M * N];
  unsigned s = 99;
  for (int e = 0; e < M * N; e++) a[e] = (s = s * 1103515245u + 12345u) % 23 == 0 ? 1 + e % 5 : 0;
  for (int e = 0; e < M * K; e++) b[e] = (s = s * 1103515245u + 12345u) % 17 == 0 ? 1 + e % 3 : 0;
  for (int e = 0; e < K * N; e++) c[e] = (s = s * 1103515245u + 12345u) % 13 == 0 ? (e % 2 ? 2 : -2) : 0;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double v = a[i * N + j];
      bool st = v != 0;
      for (int k = 0; k < K; k++)
        if (b[i * K + k] != 0 && c[k * N + j] != 0) v += b[i * K + k] * c[k * N + j], st = true;
      want[i * N + j] = v, stored[i * N + j] = st;
    }
  int64_t da[2] = {M, N}, db[2] = {M, K}, dc[2] = {K, N};
  tj_tensor *ops[3] = {tu_tensor("A", "ds", 2, da, a), tu_tensor("B", "ds", 2, db, b),
                       tu_tensor("C", "ds", 2, dc, c)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) += B(i,k) * C(k,j)", ops, 3, NULL);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], want, stored, M * N, "A += B*C");
  /* Both kernels print, the temporary's first; B's format is reported. */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  OK(tj_kernel_print(k, TJ_STAGE_NOTATION, f));
  fclose(f);
  ck_assert_str_eq(text, "A_sum(i,j) = B(i,k) * C(k,j)\nA(i,j) = A_old(i,j) + A_sum(i,j)\n");
  free(text);
  tj_format fb;
  int converted;
  OK(tj_kernel_operand_format(k, "B", &fb, &converted));
  ck_assert_str_eq(fb.levels, "ds");
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* CSF and COO-3 outputs: A (2 x 2 x 3) += 2 * B.
 *   A(0,0,0) = 1, A(1,1,2) = 4;  B(0,0,0) = 1, B(0,1,1) = 3, B(1,1,2) = -2
 *   A + 2B: (0,0,0) 3, (0,1,1) 6, (1,1,2) 0 (stored). */
START_TEST(order3) {
  int64_t d3[3] = {2, 2, 3};
  double a[12] = {0}, b[12] = {0};
  a[0] = 1, a[11] = 4;
  b[0] = 1, b[4] = 3, b[11] = -2;
  const char *fmts[] = {"sss", "uqq", "dss", "ssd"};
  for (int f = 0; f < 4; f++) {
    tj_tensor *ops[2] = {tu_tensor("A", fmts[f], 3, d3, a), tu_tensor("B", "sss", 3, d3, b)};
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = compile(cx, "A(i,j,k) += 2 * B(i,j,k)", ops, 2, NULL);
    double want[12] = {0}, kept[12] = {0};
    unsigned char stored[12] = {0};
    want[0] = 3, want[4] = 6, want[11] = 0;
    kept[0] = 1, kept[11] = 4;
    stored[0] = stored[4] = stored[11] = 1;
    if (fmts[f][2] == 'd')   /* a dense last level stores whole fibers */
      for (int c = 0; c < 12; c++) stored[c] = c < 3 || (c >= 3 && c < 6) || c >= 9;
    OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
    expect(ops[0], kept, stored, 12, fmts[f]);
    OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
    expect(ops[0], want, stored, 12, fmts[f]);
    tj_context_free(cx);
    for (int t = 0; t < 2; t++) tj_tensor_free(ops[t]);
  }
}
END_TEST

/* Pseudo-random values in [-1, 1), a fraction density of them nonzero. */
static void fill_random(double *v, int64_t n, double density, unsigned *seed) {
  for (int64_t k = 0; k < n; k++) {
    *seed = *seed * 1103515245u + 12345u;
    double u = (double)(*seed >> 8) / (double)(1u << 24);
    *seed = *seed * 1103515245u + 12345u;
    double w = (double)(*seed >> 8) / (double)(1u << 24) * 2 - 1;
    v[k] = u < density ? w : 0;
  }
}

/* A (60 x 70, CSR/DCSR/COO/CSC) += B .* c + D (B CSR, D DCSR), checked by
 * plain loops over the operands' dense values, then by the reference. */
START_TEST(random_against_loops) {
  enum { R = 60, C = 70 };
  const char *fmt = out_formats[_i % N_OUT_FORMATS];
  int threads = 1 + _i / N_OUT_FORMATS;
  unsigned seed = 7u + (unsigned)_i;
  static double a[R * C], b[R * C], dd[R * C], c[C];
  fill_random(a, R * C, 0.1, &seed);
  fill_random(b, R * C, 0.1, &seed);
  fill_random(dd, R * C, 0.05, &seed);
  fill_random(c, C, 1, &seed);
  int64_t d2[2] = {R, C}, d1[1] = {C};
  tj_tensor *ops[4] = {tu_tensor("A", fmt, 2, d2, a), tu_tensor("B", "ds", 2, d2, b),
                       tu_tensor("c", "d", 1, d1, c), tu_tensor("D", "ss", 2, d2, dd)};
  tj_tensor *ref;
  tj_format rf;
  OK(tj_format_parse(fmt, &rf));
  OK(tj_tensor_convert(ops[0], &rf, &ref));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  const char *expr = "A(i,j) += B(i,j) * c(j) + D(i,j)";
  tj_kernel *k = compile(cx, expr, ops, 4, &o);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  static double want[R * C];
  static unsigned char stored[R * C];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      int x = i * C + j;
      stored[x] = a[x] != 0 || b[x] != 0 || dd[x] != 0;
      want[x] = a[x] + b[x] * c[j] + dd[x];
    }
  char what[64];
  snprintf(what, sizeof what, "%s, %d threads", fmt, threads);
  expect(ops[0], want, stored, R * C, what);
  tj_tensor *rops[4] = {ref, ops[1], ops[2], ops[3]};
  OK(tj_reference(expr, rops, 4));
  expect(ref, want, stored, R * C, "reference");
  tj_tensor_free(ref);
  tj_context_free(cx);
  for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A wrapped CSR output: the union outgrows its crd and vals, which move
 * into arrays the tensor owns; the caller's old values are read first. */
START_TEST(wrapped_output) {
  int32_t pos[4] = {0, 2, 2, 3}, crd[3] = {0, 3, 1};
  double vals[3] = {1, 2, 3};
  int64_t dims[2] = {3, 4}, d1[1] = {4};
  tj_format f;
  OK(tj_format_parse("ds", &f));
  tj_arrays ar = {0};
  ar.order = 2;
  ar.dims = dims;
  ar.fmt = &f;
  ar.pos[1] = pos;
  ar.pos_len[1] = 4;
  ar.crd[1] = crd;
  ar.crd_len[1] = 3;
  ar.vals = vals;
  ar.vals_len = 3;
  ar.dtype = TJ_F64;
  tj_tensor *ops[3] = {NULL, tu_tensor("B", "ds", 2, dims, B34), tu_tensor("c", "d", 1, d1, C4)};
  OK(tj_tensor_wrap("A", &ar, 0, &ops[0]));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) += B(i,j) * c(j)", ops, 3, NULL);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], ONCE, U34, 12, "wrapped");
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* An operand already named A_old: the old contents take A_old_. */
START_TEST(old_name_taken) {
  int64_t d2[2] = {3, 4};
  tj_tensor *ops[2] = {tu_tensor("A", "ds", 2, d2, A34), tu_tensor("A_old", "ds", 2, d2, B34)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) += A_old(i,j)", ops, 2, NULL);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  double want[12];
  unsigned char stored[12];
  for (int c = 0; c < 12; c++) want[c] = A34[c] + B34[c], stored[c] = A34[c] || B34[c];
  expect(ops[0], want, stored, 12, "A_old taken");
  FILE *f = tmpfile();
  OK(tj_kernel_print(k, TJ_STAGE_NOTATION, f));
  rewind(f);
  char line[128] = {0};
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  ck_assert_str_eq(line, "A(i,j) = A_old_(i,j) + A_old(i,j)\n");
  fclose(f);
  tj_context_free(cx);
  for (int t = 0; t < 2; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* Runs on other tensors of the same names: the old contents are those of
 * the output given to the run. */
START_TEST(other_operands) {
  int64_t d2[2] = {3, 4}, d1[1] = {4};
  tj_tensor *ops[3] = {tu_tensor("A", "ds", 2, d2, NULL), tu_tensor("B", "ds", 2, d2, B34),
                       tu_tensor("c", "d", 1, d1, C4)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) += B(i,j) * c(j)", ops, 3, NULL);
  tj_tensor *other[3] = {tu_tensor("A", "ds", 2, d2, A34), ops[1], ops[2]};
  OK(tj_kernel_run(k, TJ_EVALUATE, other, 3));
  expect(other[0], ONCE, U34, 12, "other A");
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));   /* the bound, empty A: B .* c */
  double bc[12];
  unsigned char st[12];
  for (int c = 0; c < 12; c++) bc[c] = B34[c] * C4[c % 4], st[c] = B34[c] != 0;
  expect(ops[0], bc, st, 12, "empty A");
  tj_tensor_free(other[0]);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A CSR add A = B + C whose output grows past its first 1024 entries: the
 * merge then grows it at once to what the rest of B and C can append and
 * leaves the new space unzeroed (merge_room), so every entry must come
 * from the merge's own stores. Pattern p of a 300 x 200 operand stores
 * (i, j) where (i + 2 j) % p == 0, with the value i + j / 256 (B) or
 * 1000 - j (C); by hand A stores the union with the sum of the stored sides.
 * The same output is handed back for three runs, its pattern growing,
 * then shrinking (stale entries past its new end must not show), and a
 * fresh output is assembled (values all 0) then computed. */
enum { ADD_R = 300, ADD_C = 200, ADD_CELLS = ADD_R * ADD_C };
static double add_side(int i, int j, int p, bool b) {
  if ((i + 2 * j) % p) return 0;
  return b ? i + j / 256.0 : 1000.0 - j;
}
static tj_tensor *add_operand(const char *name, int p, bool b) {
  int64_t dims[2] = {ADD_R, ADD_C};
  double *v = malloc(ADD_CELLS * sizeof *v);
  for (int c = 0; c < ADD_CELLS; c++) v[c] = add_side(c / ADD_C, c % ADD_C, p, b);
  tj_tensor *t = tu_tensor(name, "ds", 2, dims, v);
  free(v);
  return t;
}
static void add_expect(const tj_tensor *A, int pb, int pc, bool zero, const char *what) {
  double *want = malloc(ADD_CELLS * sizeof *want);
  unsigned char *st = malloc(ADD_CELLS);
  for (int c = 0; c < ADD_CELLS; c++) {
    int i = c / ADD_C, j = c % ADD_C;
    st[c] = (i + 2 * j) % pb == 0 || (i + 2 * j) % pc == 0;
    want[c] = zero ? 0 : add_side(i, j, pb, true) + add_side(i, j, pc, false);
  }
  expect(A, want, st, ADD_CELLS, what);
  free(want);
  free(st);
}

START_TEST(add_output_grows_and_is_handed_back) {
  int64_t dims[2] = {ADD_R, ADD_C};
  tj_tensor *ops[3] = {tu_tensor("A", "ds", 2, dims, NULL), add_operand("B", 3, true),
                       add_operand("C", 5, false)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = 1;
  tj_kernel *k = compile(cx, "A(i,j) = B(i,j) + C(i,j)", ops, 3, &o);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  add_expect(ops[0], 3, 5, false, "fresh A, B % 3, C % 5");   /* 28,000 entries */
  tj_tensor *wide[3] = {ops[0], add_operand("B", 2, true), add_operand("C", 3, false)};
  OK(tj_kernel_run(k, TJ_EVALUATE, wide, 3));
  add_expect(ops[0], 2, 3, false, "A handed back, B % 2, C % 3");   /* 40,000 */
  tj_tensor *narrow[3] = {ops[0], add_operand("B", 7, true), add_operand("C", 11, false)};
  OK(tj_kernel_run(k, TJ_EVALUATE, narrow, 3));
  add_expect(ops[0], 7, 11, false, "A handed back again, B % 7, C % 11");
  tj_tensor *fresh[3] = {tu_tensor("A", "ds", 2, dims, NULL), ops[1], ops[2]};
  OK(tj_kernel_run(k, TJ_ASSEMBLE, fresh, 3));
  add_expect(fresh[0], 3, 5, true, "fresh A assembled");
  OK(tj_kernel_run(k, TJ_COMPUTE, fresh, 3));
  add_expect(fresh[0], 3, 5, false, "fresh A computed");
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
  for (int t = 1; t < 3; t++) tj_tensor_free(wide[t]), tj_tensor_free(narrow[t]);
  tj_tensor_free(fresh[0]);
}
END_TEST

/* SpGEMM += compiled at 6 x 7 runs on operands of other sizes (each run's
 * temporary takes the run's output dims): A 9 x 11 holding A(0,10) = 5,
 * B 9 x 8 with B(i, i % 8) = 1, C 8 x 11 with C(k, k) = 2, so by hand A
 * becomes A(i, i % 8) = 2 for every i, and A(0,10) = 5 kept (10 cells). */
START_TEST(spgemm_other_sizes) {
  for (int f = 0; f < 3; f++) {
    const char *fmt = (const char *[]){"ds", "ds:1,0", "uq"}[f];
    int64_t a0[2] = {6, 7}, b0[2] = {6, 5}, c0[2] = {5, 7};
    tj_tensor *ops[3] = {tu_tensor("A", fmt, 2, a0, NULL), tu_tensor("B", "ds", 2, b0, NULL),
                         tu_tensor("C", "ds", 2, c0, NULL)};
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = compile(cx, "A(i,j) += B(i,k) * C(k,j)", ops, 3, NULL);
    double av[99] = {[10] = 5}, bv[72] = {0}, cv[88] = {0}, want[99] = {[10] = 5};
    unsigned char st[99] = {[10] = 1};
    for (int i = 0; i < 9; i++) bv[i * 8 + i % 8] = 1, want[i * 11 + i % 8] = 2, st[i * 11 + i % 8] = 1;
    for (int kk = 0; kk < 8; kk++) cv[kk * 11 + kk] = 2;
    int64_t a1[2] = {9, 11}, b1[2] = {9, 8}, c1[2] = {8, 11};
    tj_tensor *other[3] = {tu_tensor("A", fmt, 2, a1, av), tu_tensor("B", "ds", 2, b1, bv),
                           tu_tensor("C", "ds", 2, c1, cv)};
    OK(tj_kernel_run(k, TJ_EVALUATE, other, 3));
    expect(other[0], want, st, 99, fmt);
    for (int t = 0; t < 3; t++) tj_tensor_free(other[t]), tj_tensor_free(ops[t]);
    tj_context_free(cx);
  }
}
END_TEST

/* SpGEMM A = B * C on `threads` threads: B (dims[0] x dims[1]) and C
 * (dims[1] x dims[2]) CSR from the row-major values b and c, A empty in
 * format fmt; ops and *cx (a new context, the caller's) as compiled. */
static tj_kernel *spgemm_kernel(tj_context **cx, tj_tensor *ops[3], const char *fmt,
                                const int64_t dims[3], const double *b, const double *c,
                                int threads) {
  int64_t da[2] = {dims[0], dims[2]}, db[2] = {dims[0], dims[1]}, dc[2] = {dims[1], dims[2]};
  ops[0] = tu_tensor("A", fmt, 2, da, NULL);
  ops[1] = tu_tensor("B", "ds", 2, db, b);
  ops[2] = tu_tensor("C", "ds", 2, dc, c);
  OK(tj_context_new(cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  return compile(*cx, "A(i,j) = B(i,k) * C(k,j)", ops, 3, &o);
}

/* A = B * C into CSR and nonordered CSR with rows of ~2,000 entries, past
 * the output's first capacity (1024) inside the first row: the room for a
 * row's entries is made once before they are appended. Checked by a
 * dense triple loop (values and the structural pattern), each stored row
 * ascending in CSR; on 1 and 2 threads, evaluate and assemble + compute. */
START_TEST(spgemm_long_rows) {
  enum { R = 5, K = 40, N = 3000 };
  const char *fmt = _i % 2 ? "do" : "ds";
  int threads = 1 + _i / 2 % 2;
  bool split = _i / 4;
  unsigned seed = 11u + (unsigned)_i;
  static double b[R * K], c[K * N], want[R * N];
  static unsigned char stored[R * N];
  fill_random(b, R * K, 0.3, &seed);
  fill_random(c, K * N, 0.1, &seed);
  memset(want, 0, sizeof want);
  memset(stored, 0, sizeof stored);
  for (int i = 0; i < R; i++)
    for (int k = 0; k < K; k++)
      for (int j = 0; j < N; j++)
        if (b[i * K + k] != 0 && c[k * N + j] != 0) {
          want[i * N + j] += b[i * K + k] * c[k * N + j];
          stored[i * N + j] = 1;
        }
  tj_tensor *ops[3];
  tj_context *cx;
  tj_kernel *k = spgemm_kernel(&cx, ops, fmt, (int64_t[3]){R, K, N}, b, c, threads);
  for (int rep = 0; rep < 2; rep++) {   /* the second run reuses the grown arrays */
    tu_run(k, split);
    char what[64];
    snprintf(what, sizeof what, "%s, %d threads, %s", fmt, threads, split ? "split" : "evaluate");
    expect(ops[0], want, stored, R * N, what);
    tj_arrays ar;
    OK(tj_tensor_arrays(ops[0], &ar));
    const int32_t *pos = ar.pos[1], *crd = ar.crd[1];
    ck_assert_int_gt(pos[1], 1024);
    for (int i = 0; !strcmp(fmt, "ds") && i < R; i++)
      for (int32_t q = pos[i] + 1; q < pos[i + 1]; q++)
        ck_assert_msg(crd[q - 1] < crd[q], "%s: row %d not ascending at %d", what, i, q);
  }
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* Runs SpGEMM kernel k twice (evaluate, or assemble + compute when split)
 * and checks its output A's n values and pattern against want and stored,
 * its entry count, and that every segment's coordinates ascend. */
static void spgemm_check_runs(tj_kernel *k, tj_tensor *A, const double *want,
                              const unsigned char *stored, int64_t n, int64_t nnz, bool split,
                              const char *what) {
  for (int rep = 0; rep < 2; rep++) {
    tu_run(k, split);
    expect(A, want, stored, n, what);
    ck_assert_int_eq(tj_tensor_nnz(A), nnz);
    tj_arrays ar;
    OK(tj_tensor_arrays(A, &ar));
    const int32_t *pos = ar.pos[1], *crd = ar.crd[1];
    for (int64_t seg = 0; seg + 1 < ar.pos_len[1]; seg++)
      for (int32_t q = pos[seg] + 1; q < pos[seg + 1]; q++)
        ck_assert_msg(crd[q - 1] < crd[q], "%s: segment %lld not ascending at %d", what,
                      (long long)seg, q);
  }
}

/* A = B * C with rows on both sides of the per-row choice (<= 64 products:
 * the list and the sort; more: the marks read back in order), B 4 x 3, C 3
 * x 200 (4 words of 64 marks, the last one partial):
 *   C row 0: 1 at j = 0..99; row 1: 2 at j = 50..149; row 2: 7 at 5, 9 at 199
 *   B row 0 = [1 1 0]: 200 products, A row 0 = 1 at 0..49, 3 at 50..99, 2 at 100..149
 *   B row 1 = [0 0 2]: 2 products,   A row 1 = 14 at 5, 18 at 199
 *   B row 2 = [0 1 1]: 102 products, A row 2 = 7 at 5, 2 at 50..149, 9 at 199
 *   B row 3 empty
 * (a long row after a short one and after a long one: the marks and touched
 * bytes are clear again). Values and pattern by hand; the last level's
 * segments ascending. CSR, DCSR and CSC, 1 and 2 threads, evaluate and
 * assemble + compute, twice. */
START_TEST(spgemm_short_and_long_rows) {
  enum { R = 4, K = 3, N = 200 };
  static const char *fmts[] = {"ds", "ss", "ds:1,0"};
  const char *fmt = fmts[_i % 3];
  int threads = 1 + _i / 3 % 2;
  bool split = _i / 6;
  static double b[R * K], c[K * N], want[R * N];
  static unsigned char stored[R * N];
  memset(b, 0, sizeof b), memset(c, 0, sizeof c), memset(want, 0, sizeof want);
  memset(stored, 0, sizeof stored);
  b[0] = b[1] = 1, b[K + 2] = 2, b[2 * K + 1] = b[2 * K + 2] = 1;
  for (int j = 0; j < 100; j++) c[j] = 1, c[N + 50 + j] = 2;
  c[2 * N + 5] = 7, c[2 * N + 199] = 9;
  for (int j = 0; j < 150; j++) want[j] = j < 50 ? 1 : j < 100 ? 3 : 2, stored[j] = 1;
  want[N + 5] = 14, want[N + 199] = 18, stored[N + 5] = stored[N + 199] = 1;
  for (int j = 50; j < 150; j++) want[2 * N + j] = 2, stored[2 * N + j] = 1;
  want[2 * N + 5] = 7, want[2 * N + 199] = 9, stored[2 * N + 5] = stored[2 * N + 199] = 1;
  tj_tensor *ops[3];
  tj_context *cx;
  tj_kernel *k = spgemm_kernel(&cx, ops, fmt, (int64_t[3]){R, K, N}, b, c, threads);
  char what[64];
  snprintf(what, sizeof what, "%s, %d threads, %s", fmt, threads, split ? "split" : "evaluate");
  spgemm_check_runs(k, ops[0], want, stored, R * N, 150 + 2 + 102, split, what);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A = B * C where some rows are not counted: C's longest row has 20
 * entries, so a row of B with at most 64 / 20 = 3 entries has at most 60
 * products and takes the list without counting (lower.c, short_trips);
 * longer rows are counted and go either way. B 4 x 8, C 8 x 100:
 *   C rows 0..3: 1 at j = 0..19, 2 at 10..29, 3 at 40..59, 4 at 60..79;
 *   rows 4..7: 5 at 99, 6 at 3, 7 at 50, 8 at 98
 *   B row 0 = [1 1 1 0 0 0 0 0]: 3 trips, not counted (60 products):
 *     A row 0 = 1 at 0..9, 3 at 10..19, 2 at 20..29, 3 at 40..59
 *   B row 1 = [2 1 1 1 0 0 0 0]: counted, 80 products (the marks):
 *     A row 1 = 2 at 0..9, 4 at 10..19, 2 at 20..29, 3 at 40..59, 4 at 60..79
 *   B row 2 = [0 0 0 1 1 1 2 1]: counted, 24 products (the list):
 *     A row 2 = 6 at 3, 14 at 50, 4 at 60..79, 8 at 98, 5 at 99
 *   B row 3 empty
 * Values and pattern by hand, segments ascending; CSR, DCSR and CSC, 1 and
 * 2 threads, evaluate and assemble + compute, twice. */
START_TEST(spgemm_uncounted_rows) {
  enum { R = 4, K = 8, N = 100 };
  static const char *fmts[] = {"ds", "ss", "ds:1,0"};
  const char *fmt = fmts[_i % 3];
  int threads = 1 + _i / 3 % 2;
  bool split = _i / 6;
  static double b[R * K], c[K * N], want[R * N];
  static unsigned char stored[R * N];
  memset(c, 0, sizeof c), memset(want, 0, sizeof want), memset(stored, 0, sizeof stored);
  static const double brows[R * K] = {1, 1, 1, 0, 0, 0, 0, 0, 2, 1, 1, 1, 0, 0, 0, 0,
                                      0, 0, 0, 1, 1, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  memcpy(b, brows, sizeof b);
  for (int j = 0; j < 20; j++)
    c[j] = 1, c[N + 10 + j] = 2, c[2 * N + 40 + j] = 3, c[3 * N + 60 + j] = 4;
  c[4 * N + 99] = 5, c[5 * N + 3] = 6, c[6 * N + 50] = 7, c[7 * N + 98] = 8;
  static const struct { int row, lo, hi; double v; } runs[] = {
      {0, 0, 10, 1}, {0, 10, 20, 3}, {0, 20, 30, 2}, {0, 40, 60, 3},
      {1, 0, 10, 2}, {1, 10, 20, 4}, {1, 20, 30, 2}, {1, 40, 60, 3}, {1, 60, 80, 4},
      {2, 3, 4, 6}, {2, 50, 51, 14}, {2, 60, 80, 4}, {2, 98, 99, 8}, {2, 99, 100, 5}};
  for (size_t r = 0; r < sizeof runs / sizeof *runs; r++)
    for (int j = runs[r].lo; j < runs[r].hi; j++)
      want[runs[r].row * N + j] = runs[r].v, stored[runs[r].row * N + j] = 1;
  tj_tensor *ops[3];
  tj_context *cx;
  tj_kernel *k = spgemm_kernel(&cx, ops, fmt, (int64_t[3]){R, K, N}, b, c, threads);
  char what[64];
  snprintf(what, sizeof what, "%s, %d threads, %s", fmt, threads, split ? "split" : "evaluate");
  spgemm_check_runs(k, ops[0], want, stored, R * N, 50 + 70 + 24, split, what);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A = B * C into a nonordered CSR output, accumulated in place (the mark of
 * a column holds its entry's position in the row + 1; the first product
 * appends the entry, later ones add to it; a row after one of more than 8
 * entries and under 4 products an entry takes the copy without the
 * first-touch branch), B 5 x 4, C 4 x 12:
 *   C row 0: 1 at j = 0, 2 at 2, 3 at 5;  row 1: 4 at 2, 5 at 3;
 *   row 2: 6 at 0, 8 at 1, 7 at 5;  row 3: 1 at 2..11
 *   B row 0 = [0 0 0 2]: A row 0 = 2 at 2..11 (10 entries, 10 products)
 *   B row 1 = [1 2 0 1] (branch-free): A row 1 = 1 at 0, 2 + 8 + 1 = 11 at 2,
 *     10 + 1 = 11 at 3, 1 at 4, 3 + 1 = 4 at 5, 1 at 6..11 (11 entries)
 *   B row 2 = [0 1 3 0] (branch-free): A row 2 = 18 at 0, 24 at 1, 4 at 2,
 *     5 at 3, 21 at 5
 *   B row 3 empty
 *   B row 4 = [2 0 1 0] (the branch): A row 4 = 2 + 6 = 8 at 0, 8 at 1,
 *     4 at 2, 6 + 7 = 13 at 5
 * Under min.plus (b + c, the least): row 0 = 3 at 2..11; row 1 = 2 at 0
 * and 2..11 (min(3, 6, 2) at 2, ...); row 2 = 9 at 0, 11 at 1, 5 at 2, 6
 * at 3, 10 at 5; row 4 = min(3, 7) = 3 at 0, 9 at 1, 4 at 2, min(5, 8) = 5
 * at 5. Every row reuses columns of the row before (its marks must be
 * clear again). Each row's coordinate set and values by hand, in any
 * order; crd widths 32 (marks u32), 16 and 64 (marks i64); 1 and 2
 * threads; evaluate and assemble + compute, twice. */
START_TEST(spgemm_nonordered_in_place) {
  enum { R = 5, K = 4, N = 12 };
  static const char *fmts[] = {
      "do", "(i, j) -> (i : dense, j : compressed(nonordered)), crdWidth = 16",
      "(i, j) -> (i : dense, j : compressed(nonordered)), posWidth = 64, crdWidth = 64"};
  const char *fmt = fmts[_i % 3];
  int threads = 1 + _i / 3 % 2;
  bool split = _i / 6 % 2, min_plus = _i / 12;
  static const double b[R * K] = {0, 0, 0, 2, 1, 2, 0, 1, 0, 1, 3, 0, 0, 0, 0, 0, 2, 0, 1, 0};
  double c[K * N] = {0}, times[R * N] = {0}, plus[R * N] = {0};
  c[0] = 1, c[2] = 2, c[5] = 3, c[N + 2] = 4, c[N + 3] = 5;
  c[2 * N] = 6, c[2 * N + 1] = 8, c[2 * N + 5] = 7;
  for (int j = 2; j < N; j++) c[3 * N + j] = 1;
  for (int j = 2; j < N; j++) times[j] = 2, plus[j] = 3;                /* row 0 */
  for (int j = 0; j < N; j++) times[N + j] = j == 1 ? 0 : 1;            /* row 1 */
  times[N + 2] = 11, times[N + 3] = 11, times[N + 5] = 4;
  for (int j = 0; j < N; j++) plus[N + j] = j == 1 ? 0 : 2;
  static const double row2[6] = {18, 24, 4, 5, 0, 21}, row2p[6] = {9, 11, 5, 6, 0, 10};
  static const double row4[6] = {8, 8, 4, 0, 0, 13}, row4p[6] = {3, 9, 4, 0, 0, 5};
  for (int j = 0; j < 6; j++) {
    times[2 * N + j] = row2[j], plus[2 * N + j] = row2p[j];
    times[4 * N + j] = row4[j], plus[4 * N + j] = row4p[j];
  }
  unsigned char stored[R * N];
  for (int q = 0; q < R * N; q++) stored[q] = times[q] != 0;
  int64_t da[2] = {R, N}, db[2] = {R, K}, dc[2] = {K, N};
  tj_tensor *ops[3] = {tu_tensor("A", fmt, 2, da, NULL), tu_tensor("B", "ds", 2, db, b),
                       tu_tensor("C", "ds", 2, dc, c)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  if (min_plus) o.semiring = "min.plus";
  tj_kernel *k = compile(cx, "A(i,j) = B(i,k) * C(k,j)", ops, 3, &o);
  char what[160];
  snprintf(what, sizeof what, "%s, %s, %d threads, %s", fmt, min_plus ? "min.plus" : "plus.times",
           threads, split ? "split" : "evaluate");
  for (int rep = 0; rep < 2; rep++) {
    tu_run(k, split);
    expect(ops[0], min_plus ? plus : times, stored, R * N, what);
    ck_assert_int_eq(tj_tensor_nnz(ops[0]), 10 + 11 + 5 + 4);
  }
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A = B * C where the touched list of a row is the output's crd from the
 * row's end on (room for the extent made before each row, sorted in place
 * on the crd's width): rows of 0 entries (B's row empty, or only through
 * an empty row of C), of 1, of a few, and full rows (all N columns: the
 * branchless append's spare slot lands at p + N); the output's arrays grow
 * at rows in the middle of the matrix (N of 2,000 or 250 columns past the
 * first capacity of 1024). CSR, nonordered CSR, DCSR, CSR with crdWidth 16
 * and 8; 1 and 2 threads; evaluate and assemble + compute, twice each.
 * Checked by a dense triple loop (values and pattern), CSR rows ascending. */
START_TEST(spgemm_row_shapes) {
  enum { R = 24, K = 30 };
  static const char *fmts[] = {
      "ds", "do", "ss", "(i, j) -> (i : dense, j : compressed), crdWidth = 16",
      "(i, j) -> (i : dense, j : compressed), crdWidth = 8"};
  int f = _i / 4, threads = 1 + _i % 2;
  bool split = _i / 2 % 2, ordered = f != 1;
  const int N = f == 4 ? 250 : 2000;
  static double b[R * K], c[K * 2000], want[R * 2000];
  static unsigned char stored[R * 2000];
  unsigned seed = 5u + (unsigned)_i;
  memset(b, 0, sizeof b);
  memset(c, 0, sizeof c);
  for (int k = 0; k < 5; k++) c[k * N + (7 * k + 3) % N] = 1 + k;   /* one entry a row */
  fill_random(c + 6 * N, (int64_t)(K - 7) * N, 0.3, &seed);         /* row 5 empty */
  for (int j = 0; j < N; j++) c[(K - 1) * N + j] = 0.5 + j % 3;      /* a full row */
  for (int i = 0; i < R; i++) {
    if (i % 4 == 0 && i > 0) b[i * K + 5] = 2;                      /* only C's empty row */
    if (i % 4 == 1) b[i * K + i % 5] = 1.5;                        /* one entry */
    if (i % 4 == 2) fill_random(b + i * K + 6, K - 7, 0.9, &seed); /* full: */
    if (i % 4 == 2) b[i * K + K - 1] = 1;                          /* C's full row */
    if (i % 4 == 3) fill_random(b + i * K + 6, K - 6, 0.05, &seed);
  }
  b[3 * K + 6] = 1;   /* row 3 reaches at least a row of C: a few entries */
  memset(want, 0, sizeof want);
  memset(stored, 0, sizeof stored);
  for (int i = 0; i < R; i++)
    for (int k = 0; k < K; k++)
      for (int j = 0; j < N; j++)
        if (b[i * K + k] != 0 && c[k * N + j] != 0) {
          want[i * N + j] += b[i * K + k] * c[k * N + j];
          stored[i * N + j] = 1;
        }
  int full = 0;
  for (int i = 0; i < R; i++) {
    int n = 0;
    for (int j = 0; j < N; j++) n += stored[i * N + j];
    full += n == N;
  }
  ck_assert_int_gt(full, 0);   /* the spare slot is exercised */
  int64_t da[2] = {R, N}, db[2] = {R, K}, dc[2] = {K, N};
  tj_tensor *ops[3] = {tu_tensor("A", fmts[f], 2, da, NULL), tu_tensor("B", "ds", 2, db, b),
                       tu_tensor("C", "ds", 2, dc, c)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, "A(i,j) = B(i,k) * C(k,j)", ops, 3, &o);
  for (int rep = 0; rep < 2; rep++) {
    tu_run(k, split);
    char what[128];
    snprintf(what, sizeof what, "%s, %d threads, %s", fmts[f], threads, split ? "split" : "evaluate");
    expect(ops[0], want, stored, (int64_t)R * N, what);
    if (!ordered) continue;
    int64_t *coords, nnz;
    double *vals;
    OK(tj_tensor_unpack(ops[0], &coords, &vals, &nnz));
    for (int64_t q = 1; q < nnz; q++)   /* unpack walks the levels in storage order */
      ck_assert_msg(coords[2 * (q - 1)] < coords[2 * q] ||
                        (coords[2 * (q - 1)] == coords[2 * q] &&
                         coords[2 * (q - 1) + 1] < coords[2 * q + 1]),
                    "%s: entry %lld out of order", what, (long long)q);
    free(coords);
    free(vals);
  }
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* sds: a dense level between two compressed ones. A = 2 * B, B (3 x 3 x 4)
 * holding B(0,1,2) = 1, B(0,1,3) = 2, B(2,0,0) = 3, B(2,2,3) = 4 (row 1
 * empty): level 0 stores rows {0, 2}; level 1 is a block of 3 positions
 * per stored row; level 2 one segment per position:
 *   crd0 {0, 2}   pos2 {0, 0,2,2, 3,3,4}   crd2 {2, 3, 0, 3}   vals {2, 4, 6, 8} */
static const double B334[36] = {[6] = 1, [7] = 2, [24] = 3, [35] = 4};

static void sds_case(int threads, tj_phase first) {
  int64_t d3[3] = {3, 3, 4};
  tj_tensor *ops[2] = {tu_tensor("A", "sds", 3, d3, NULL), tu_tensor("B", "sss", 3, d3, B334)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, "A(i,j,k) = 2 * B(i,j,k)", ops, 2, &o);
  if (first == TJ_EVALUATE) {
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  } else {
    OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
    OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  }
  tj_arrays ar;
  OK(tj_tensor_arrays(ops[0], &ar));
  int32_t pos0[2] = {0, 2}, crd0[2] = {0, 2}, pos2[7] = {0, 0, 2, 2, 3, 3, 4}, crd2[4] = {2, 3, 0, 3};
  double vals[4] = {2, 4, 6, 8};
  ck_assert_int_eq(ar.pos_len[0], 2);
  ck_assert_int_eq(ar.crd_len[0], 2);
  ck_assert_int_eq(ar.pos_len[2], 7);
  ck_assert_int_eq(ar.crd_len[2], 4);
  ck_assert_int_eq(ar.vals_len, 4);
  for (int q = 0; q < 2; q++) ck_assert_int_eq(((int32_t *)ar.pos[0])[q], pos0[q]);
  for (int q = 0; q < 2; q++) ck_assert_int_eq(((int32_t *)ar.crd[0])[q], crd0[q]);
  for (int q = 0; q < 7; q++) ck_assert_int_eq(((int32_t *)ar.pos[2])[q], pos2[q]);
  for (int q = 0; q < 4; q++) ck_assert_int_eq(((int32_t *)ar.crd[2])[q], crd2[q]);
  for (int q = 0; q < 4; q++) ck_assert_double_eq(((double *)ar.vals)[q], vals[q]);
  tj_context_free(cx);
  for (int t = 0; t < 2; t++) tj_tensor_free(ops[t]);
}

START_TEST(sds_arrays_evaluate) { sds_case(1 + _i, TJ_EVALUATE); }
END_TEST

START_TEST(sds_arrays_assemble_compute) { sds_case(1 + _i, TJ_ASSEMBLE); }
END_TEST

/* Kernels into sds outputs (one in mode order j, i, k) against plain loops over dense
 * values: TTM (C dense, and C sparse: a workspace over k), a sparse add,
 * B(i,k) * C(j,k) (j a dense loop), += into sds. Every nonzero of the
 * result is stored, and nothing is stored where no operand reaches. */
typedef struct SdsKernel {
  const char *expr, *fa, *fb, *fc;   /* fc NULL: no C */
  int kind;                          /* 0 ttm, 1 add, 2 outer, 3 += */
} SdsKernel;
static const SdsKernel sds_kernels[] = {
    {"A(i,j,k) = B(i,j,l) * C(k,l)", "sds", "sss", "dd", 0},
    {"A(i,j,k) = B(i,j,l) * C(l,k)", "sds", "sss", "ds", 4},
    {"A(i,j,k) = B(i,j,k) + C(i,j,k)", "sds", "sss", "sds", 1},
    {"A(i,j,k) = B(i,k) * C(j,k)", "sds", "ds", "dd", 2},
    {"A(i,j,k) += B(i,j,k) + C(i,j,k)", "sds", "sss", "sss", 3},
    {"A(i,j,k) = B(i,j,k) + C(i,j,k)", "sds:1,0,2", "sss", "sss", 1},
};

START_TEST(sds_against_loops) {
  enum { I = 9, J = 5, K = 7, L = 6 };
  const SdsKernel *sk = &sds_kernels[_i % 6];
  int threads = 1 + _i / 6;
  unsigned seed = 11u + (unsigned)_i;
  static double a[I * J * K], b3[I * J * (K > L ? K : L)], b2[I * K], cc[I * J * K],
      want[I * J * K];   /* b3: B of the TTMs (I x J x L) or of the unions (I x J x K) */
  static unsigned char reach[I * J * K];
  int64_t da[3] = {I, J, K};
  fill_random(a, I * J * K, 0.1, &seed);
  tj_tensor *ops[3] = {tu_tensor("A", sk->fa, 3, da, sk->kind == 3 ? a : NULL), NULL, NULL};
  if (sk->kind == 0 || sk->kind == 4) {
    int64_t db[3] = {I, J, L}, dc[2] = {sk->kind == 0 ? K : L, sk->kind == 0 ? L : K};
    fill_random(b3, I * J * L, 0.15, &seed);
    fill_random(cc, K * L, sk->kind == 0 ? 1 : 0.3, &seed);
    ops[1] = tu_tensor("B", sk->fb, 3, db, b3);
    ops[2] = tu_tensor("C", sk->fc, 2, dc, cc);
    for (int i = 0; i < I; i++)
      for (int j = 0; j < J; j++)
        for (int k = 0; k < K; k++) {
          double v = 0;
          bool r = false;
          for (int l = 0; l < L; l++) {
            double c = sk->kind == 0 ? cc[k * L + l] : cc[l * K + k];
            v += b3[(i * J + j) * L + l] * c;
            r |= b3[(i * J + j) * L + l] != 0 && (sk->kind == 0 || c != 0);
          }
          want[(i * J + j) * K + k] = v, reach[(i * J + j) * K + k] = r;
        }
  } else if (sk->kind == 2) {
    int64_t db[2] = {I, K}, dc[2] = {J, K};
    fill_random(b2, I * K, 0.2, &seed);
    fill_random(cc, J * K, 1, &seed);
    ops[1] = tu_tensor("B", sk->fb, 2, db, b2);
    ops[2] = tu_tensor("C", sk->fc, 2, dc, cc);
    for (int i = 0; i < I; i++)
      for (int j = 0; j < J; j++)
        for (int k = 0; k < K; k++) {
          int x = (i * J + j) * K + k;
          want[x] = b2[i * K + k] * cc[j * K + k], reach[x] = b2[i * K + k] != 0;
        }
  } else {
    fill_random(b3, I * J * K, 0.1, &seed);
    fill_random(cc, I * J * K, 0.1, &seed);
    ops[1] = tu_tensor("B", sk->fb, 3, da, b3);
    ops[2] = tu_tensor("C", sk->fc, 3, da, cc);
    for (int x = 0; x < I * J * K; x++) {
      bool old = sk->kind == 3;
      want[x] = (old ? a[x] : 0) + b3[x] + cc[x];
      reach[x] = (old && a[x] != 0) || b3[x] != 0 || cc[x] != 0;
    }
  }
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, sk->expr, ops, 3, &o);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  static double v[I * J * K];
  static unsigned char st[I * J * K];
  dense_of(ops[0], v, st, I * J * K);
  for (int x = 0; x < I * J * K; x++) {
    ck_assert_msg(fabs(v[x] - want[x]) <= 1e-12 * (1 + fabs(want[x])),
                  "%s on %d threads: cell %d is %g, want %g", sk->expr, threads, x, v[x], want[x]);
    ck_assert_msg(st[x] || want[x] == 0, "%s: nonzero cell %d not stored", sk->expr, x);
    ck_assert_msg(!st[x] || reach[x], "%s: cell %d stored, no operand reaches it", sk->expr, x);
  }
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A contraction beside other terms (issue 15): A(i,j) = B(i,k) * C(k,j)
 * + D(i,j) and its shapes. The kernel's own loops ran j over its whole
 * extent under the sum and stored every (i,j), in every format (CSR too:
 * .mtx output hid it by dropping zeros); each term with a sum now goes
 * through its own temporary. A cell is stored where some k has B(i,k) and
 * C(k,j) both stored (a product that cancels to 0 stays stored, as for
 * SpGEMM alone) or where D (or E*F, or A's old pattern under +=) stores
 * one, and nowhere else: checked cell by cell against plain loops. */
enum { PT_I = 30, PT_K = 20, PT_J = 25 };
static double pt_a[PT_I * PT_J], pt_b[PT_I * PT_K], pt_c[PT_K * PT_J], pt_d[PT_I * PT_J],
    pt_e[PT_I * PT_K];

/* Integer values, so sums are exact: C's +-2 make some products cancel,
 * and a few D entries are set to cancel B*C (stored, 0). */
static void plus_term_operands(void) {
  unsigned s = 5;
  for (int e = 0; e < PT_I * PT_K; e++)
    pt_b[e] = (s = s * 1103515245u + 12345u) >> 8 & 7 ? 0 : 1 + (s >> 16) % 3;
  for (int e = 0; e < PT_I * PT_K; e++)
    pt_e[e] = (s = s * 1103515245u + 12345u) >> 8 & 7 ? 0 : 1 + (s >> 16) % 2;
  for (int e = 0; e < PT_K * PT_J; e++)
    pt_c[e] = (s = s * 1103515245u + 12345u) >> 8 & 7 ? 0 : (s >> 16) & 1 ? 2 : -2;
  for (int e = 0; e < PT_I * PT_J; e++)
    pt_d[e] = ((s = s * 1103515245u + 12345u) >> 8) % 11 ? 0 : 1 + (s >> 16) % 4;
  for (int e = 0; e < PT_I * PT_J; e++)
    pt_a[e] = ((s = s * 1103515245u + 12345u) >> 8) % 13 ? 0 : 1 + (s >> 16) % 5;
  for (int i = 0; i < PT_I; i += 3)   /* D(i, j) = -(B*C)(i, j) at a stored product */
    for (int j = 0; j < PT_J; j++) {
      double v = 0;
      bool any = false;
      for (int k = 0; k < PT_K; k++)
        if (pt_b[i * PT_K + k] != 0 && pt_c[k * PT_J + j] != 0)
          v += pt_b[i * PT_K + k] * pt_c[k * PT_J + j], any = true;
      if (any && v != 0) {
        pt_d[i * PT_J + j] = -v;
        break;
      }
    }
}

/* One expression: want = old * A + bc * B*C + d * D + ef * E*C. */
typedef struct PlusTerm {
  const char *expr;
  int old, bc, d, ef;
} PlusTerm;

static const PlusTerm plus_terms[] = {
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", 0, 1, 1, 0},
    {"A(i,j) = B(i,k) * C(k,j) - D(i,j)", 0, 1, -1, 0},
    {"A(i,j) = D(i,j) + B(i,k) * C(k,j)", 0, 1, 1, 0},
    {"A(i,j) = D(i,j) - B(i,k) * C(k,j)", 0, -1, 1, 0},
    {"A(i,j) = -B(i,k) * C(k,j) + D(i,j)", 0, -1, 1, 0},
    {"A(i,j) = B(i,k) * C(k,j)", 0, 1, 0, 0},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j) + E(i,l) * C(l,j)", 0, 1, 1, 1},
    {"A(i,j) = 2 * (B(i,k) * C(k,j)) - E(i,l) * C(l,j) + D(i,j)", 0, 2, 1, -1},
    {"A(i,j) = (B(i,k) * C(k,j) - (D(i,j)))", 0, 1, -1, 0},
    {"A(i,j) += B(i,k) * C(k,j)", 1, 1, 0, 0},
    {"A(i,j) += B(i,k) * C(k,j) + D(i,j)", 1, 1, 1, 0},
    {"A(i,j)+=D(i,j)-E(i,l)*C(l,j)", 1, 0, 1, -1},
};
#define N_PLUS_TERMS (int)(sizeof plus_terms / sizeof *plus_terms)

static const char *plus_term_formats[] = {"ds", "ss", "ss:1,0", "ds:1,0", "uq", "do"};
#define N_PLUS_TERM_FORMATS (int)(sizeof plus_term_formats / sizeof *plus_term_formats)

/* want and stored for pt (the old A's values included under +=). */
static void plus_term_expected(const PlusTerm *pt, double *want, unsigned char *stored) {
  for (int i = 0; i < PT_I; i++)
    for (int j = 0; j < PT_J; j++) {
      int x = i * PT_J + j;
      double v = pt->old * pt_a[x] + pt->d * pt_d[x];
      bool st = (pt->old && pt_a[x] != 0) || (pt->d && pt_d[x] != 0);
      for (int k = 0; k < PT_K; k++) {
        double c = pt_c[k * PT_J + j];
        if (pt->bc && pt_b[i * PT_K + k] != 0 && c != 0)
          v += pt->bc * pt_b[i * PT_K + k] * c, st = true;
        if (pt->ef && pt_e[i * PT_K + k] != 0 && c != 0)
          v += pt->ef * pt_e[i * PT_K + k] * c, st = true;
      }
      want[x] = v, stored[x] = st;
    }
}

/* The five operands of the plus_terms: A of format afmt (holding pt_a
 * when old), B, C, D, E in format opf, from plus_term_operands. */
static void plus_term_tensors(tj_tensor *ops[5], const char *afmt, const char *opf, bool old) {
  int64_t dij[2] = {PT_I, PT_J}, dik[2] = {PT_I, PT_K}, dkj[2] = {PT_K, PT_J};
  ops[0] = tu_tensor("A", afmt, 2, dij, old ? pt_a : NULL);
  ops[1] = tu_tensor("B", opf, 2, dik, pt_b);
  ops[2] = tu_tensor("C", opf, 2, dkj, pt_c);
  ops[3] = tu_tensor("D", opf, 2, dij, pt_d);
  ops[4] = tu_tensor("E", opf, 2, dik, pt_e);
}

/* expr compiled over ops[0..n) in a fresh context and run: evaluate (with
 * again, when twice, a second evaluate), then assemble + compute; after
 * each, every cell of A = ops[0] against want/stored and A's nnz. */
static void run_plus_term(const char *expr, tj_tensor *const *ops, int n, const tj_options *o,
                          const double *want, const unsigned char *stored, bool phases,
                          const char *what) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = NULL;
  ck_assert_msg(tj_compile(cx, expr, (tj_tensor **)ops, n, NULL, o, &k) == TJ_OK, "%s: %s",
                what, tj_last_error());
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], want, stored, PT_I * PT_J, what);
  if (phases) {   /* again, and by phases: the same */
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect(ops[0], want, stored, PT_I * PT_J, what);
    OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
    OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
    expect(ops[0], want, stored, PT_I * PT_J, what);
  }
  int64_t nnz = 0;
  for (int x = 0; x < PT_I * PT_J; x++) nnz += stored[x];
  ck_assert_msg(tj_tensor_nnz(ops[0]) == nnz, "%s: %lld stored, want %lld", what,
                (long long)tj_tensor_nnz(ops[0]), (long long)nnz);
  tj_context_free(cx);
}

START_TEST(contraction_plus_term) {
  const char *fmt = plus_term_formats[_i % N_PLUS_TERM_FORMATS];
  const char *opf = _i / N_PLUS_TERM_FORMATS / 2 ? "ds:1,0" : "ds";
  int threads = 1 + _i / N_PLUS_TERM_FORMATS % 2;
  plus_term_operands();
  static double want[PT_I * PT_J];
  static unsigned char stored[PT_I * PT_J];
  tj_options o = tj_options_default();
  o.nthreads = threads;
  for (int e = 0; e < N_PLUS_TERMS; e++) {
    const PlusTerm *pt = &plus_terms[e];
    tj_tensor *ops[5];
    plus_term_tensors(ops, fmt, opf, pt->old);
    char what[160];
    snprintf(what, sizeof what, "%s: A %s over %s, %d threads", pt->expr, fmt, opf, threads);
    plus_term_expected(pt, want, stored);
    run_plus_term(pt->expr, ops, 5, &o, want, stored, !pt->old, what);
    for (int t = 0; t < 5; t++) tj_tensor_free(ops[t]);
  }
}
END_TEST

/* An index summed in two terms is one sum over the smallest subexpression
 * holding both uses (the einsum rule, ir/sums.c): in B(i,k) * C(k,j) +
 * D(i,j) + E(i,k) * C(k,j) that is the whole rhs, so D is added once per
 * k: A = B*C + K * D + E*C. The term split must not give each term its
 * own sum (it gave B*C + D + E*C); values against plain loops. */
START_TEST(shared_sum_index_spans_terms) {
  plus_term_operands();
  static const char *fmts[] = {"ss", "ds", "uq"};
  for (int f = 0; f < 3; f++) {
    tj_tensor *ops[5];
    plus_term_tensors(ops, fmts[f], "ds", false);
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = compile(cx, "A(i,j) = B(i,k) * C(k,j) + D(i,j) + E(i,k) * C(k,j)", ops, 5,
                           NULL);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int i = 0; i < PT_I; i++)
      for (int j = 0; j < PT_J; j++) {
        double want = PT_K * pt_d[i * PT_J + j], got;
        for (int kk = 0; kk < PT_K; kk++)
          want += (pt_b[i * PT_K + kk] + pt_e[i * PT_K + kk]) * pt_c[kk * PT_J + j];
        OK(tj_tensor_get(ops[0], (int64_t[]){i, j}, &got));
        ck_assert_msg(got == want, "A %s (%d,%d) = %g, want %g", fmts[f], i, j, got, want);
      }
    tj_context_free(cx);
    for (int t = 0; t < 5; t++) tj_tensor_free(ops[t]);
  }
}
END_TEST

/* The shapes the split reaches through the tree (ir/sums.c's placed sums
 * under a factor, a minus, a function that keeps 0, an intersection) and
 * the sum over two terms, each cell's value and stored flag from plain
 * loops: K(i,j) holds pt_a. */
typedef enum { SH_SCALED, SH_NEG, SH_SCALED_RIGHT, SH_MAX, SH_EXPLICIT, SH_TIMES_K,
               SH_SHARED, SH_EXPLICIT_ABS, N_SHAPES } Shape;
static const char *shape_exprs[N_SHAPES] = {
    "A(i,j) = 2 * (B(i,k) * C(k,j) + D(i,j))",
    "A(i,j) = -(B(i,k) * C(k,j) + D(i,j))",
    "A(i,j) = (B(i,k) * C(k,j) + D(i,j)) * 2",
    "A(i,j) = max(B(i,k) * C(k,j), 0) + D(i,j)",
    "A(i,j) = sum(k, B(i,k) * C(k,j)) + D(i,j)",
    "A(i,j) = (B(i,k) * C(k,j) + D(i,j)) * K(i,j)",
    "A(i,j) = B(i,k) * C(k,j) + K(i,j) * D(i,j) + E(i,k) * C(k,j)",
    /* the explicit sum wider than the smallest scope of k: the temporary
     * keeps it (stripped, k moved inside abs(): review finding) */
    "A(i,j) = sum(k, abs(B(i,k) * C(k,j)) * K(i,j)) + D(i,j)",
};

static void shape_expected(Shape sh, double *want, unsigned char *stored) {
  for (int i = 0; i < PT_I; i++)
    for (int j = 0; j < PT_J; j++) {
      int x = i * PT_J + j;
      double bc = 0, ec = 0, abc = 0, d = pt_d[x], kk = pt_a[x];
      bool has_bc = false, has_ec = false;
      for (int k = 0; k < PT_K; k++) {
        double b = pt_b[i * PT_K + k], e = pt_e[i * PT_K + k], c = pt_c[k * PT_J + j];
        if (b != 0 && c != 0) bc += b * c, abc += fabs(b * c), has_bc = true;
        if (e != 0 && c != 0) ec += e * c, has_ec = true;
      }
      bool u = has_bc || d != 0;   /* B*C's pattern and D's */
      switch (sh) {
      case SH_SCALED: case SH_SCALED_RIGHT: want[x] = 2 * (bc + d), stored[x] = u; break;
      case SH_NEG: want[x] = -(bc + d), stored[x] = u; break;
      case SH_MAX: want[x] = (has_bc ? fmax(bc, 0) : 0) + d, stored[x] = u; break;
      case SH_EXPLICIT: want[x] = bc + d, stored[x] = u; break;
      case SH_TIMES_K: want[x] = (bc + d) * kk, stored[x] = u && kk != 0; break;
      case SH_SHARED:   /* one sum over k of all three: K*D added PT_K times */
        want[x] = bc + PT_K * kk * d + ec, stored[x] = has_bc || has_ec || (kk != 0 && d != 0);
        break;
      case SH_EXPLICIT_ABS: want[x] = abc * kk + d, stored[x] = (has_bc && kk != 0) || d != 0; break;
      default: break;
      }
    }
}

/* Each shape into each sparse output format at 1 and 2 threads: values
 * and the exact pattern (these stored every cell of a row into DCSR,
 * DCSC and COO before the split read the tree). */
START_TEST(split_shapes_exact) {
  const char *fmt = plus_term_formats[_i % N_PLUS_TERM_FORMATS];
  int threads = 1 + _i / N_PLUS_TERM_FORMATS;
  plus_term_operands();
  static double want[PT_I * PT_J];
  static unsigned char stored[PT_I * PT_J];
  tj_options o = tj_options_default();
  o.nthreads = threads;
  for (int sh = 0; sh < N_SHAPES; sh++) {
    tj_tensor *ops[6];
    plus_term_tensors(ops, fmt, "ds", false);
    ops[5] = tu_tensor("K", "ds", 2, (int64_t[]){PT_I, PT_J}, pt_a);
    char what[160];
    snprintf(what, sizeof what, "%s: A %s, %d threads", shape_exprs[sh], fmt, threads);
    shape_expected((Shape)sh, want, stored);
    run_plus_term(shape_exprs[sh], ops, 6, &o, want, stored, true, what);
    for (int t = 0; t < 6; t++) tj_tensor_free(ops[t]);
  }
}
END_TEST

/* The kernels the route compiles: one temporary per term with a sum, the
 * rest of the rhs over them (the notation prints them in turn). */
START_TEST(contraction_plus_term_kernels) {
  plus_term_operands();
  tj_tensor *ops[5];
  plus_term_tensors(ops, "ss", "ds", false);
  static const char *cases[][2] = {
      {"A(i,j) = D(i,j) - B(i,k) * C(k,j)",
       "A_sum(i,j) = B(i,k) * C(k,j)\nA(i,j) = D(i,j) - A_sum(i,j)\n"},
      {"A(i,j) = B(i,k) * C(k,j) + D(i,j) + E(i,l) * C(l,j)",
       "A_sum(i,j) = B(i,k) * C(k,j)\nA_sum1(i,j) = E(i,l) * C(l,j)\n"
       "A(i,j) = A_sum(i,j) + D(i,j) + A_sum1(i,j)\n"},
      {"A(i,j) = 2 * (B(i,k) * C(k,j) + D(i,j))",
       "A_sum(i,j) = B(i,k) * C(k,j)\nA(i,j) = 2 * (A_sum(i,j) + D(i,j))\n"},
      {"A(i,j) = max(B(i,k) * C(k,j), 0) + D(i,j)",
       "A_sum(i,j) = B(i,k) * C(k,j)\nA(i,j) = max(A_sum(i,j), 0) + D(i,j)\n"},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = compile(cx, cases[q][0], ops, 5, NULL);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    OK(tj_kernel_print(k, TJ_STAGE_NOTATION, f));
    fclose(f);
    ck_assert_str_eq(text, cases[q][1]);
    free(text);
    tj_context_free(cx);
  }
  /* two temporaries of one structure share a cache entry; each prints
   * its own loops (the first's names were printed for both) */
  tj_context *pc;
  OK(tj_context_new(&pc));
  tj_kernel *two = compile(pc, "A(i,j) = B(i,k) * C(k,j) + E(i,l) * C(l,j)", ops, 5, NULL);
  char *text = NULL;
  size_t len = 0;
  FILE *pf = open_memstream(&text, &len);
  OK(tj_kernel_print(two, TJ_STAGE_CIN, pf));
  fclose(pf);
  ck_assert_msg(strstr(text, "A_sum1(i,j) = w(j)") && strstr(text, "E(i,l) * C(l,j)") &&
                strstr(text, "B(i,k) * C(k,j)"), "%s", text);
  free(text);
  tj_context_free(pc);
  /* a reduce() beside a term keeps the rhs whole: where it reduces
   * nothing it is its identity (-inf), which an absent temporary is not */
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = compile(cx, "A(i,j) = reduce(max, k, B(i,k) * C(k,j)) - D(i,j)", ops, 5, NULL);
  tj_format f;
  int converted;
  ck_assert_int_ne(tj_kernel_operand_format(k, "A_sum", &f, &converted), TJ_OK);
  tj_context_free(cx);
  for (int t = 0; t < 5; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* Order 3: A(i,j,l) = B(i,j,k) * C(k,l) + D(i,j,l) into CSF, `dss` and COO-3,
 * C sparse (the product's pattern) or dense (every l of a fiber of B that
 * stores something: a dense C is stored everywhere), on 1 and 2 threads. */
START_TEST(contraction_plus_term_order3) {
  static const char *fmts[] = {"sss", "dss", "uqq", "sss:2,0,1"};
  const char *fmt = fmts[_i % 4], *cf = _i / 4 % 2 ? "dd" : "ds";
  int threads = 1 + _i / 8;
  enum { I = 6, J = 7, K = 5, L = 8 };
  static double b[I * J * K], c[K * L], d[I * J * L], want[I * J * L];
  static unsigned char stored[I * J * L];
  unsigned s = 11;
  for (int e = 0; e < I * J * K; e++) b[e] = (s = s * 1103515245u + 12345u) >> 8 & 7 ? 0 : 1 + e % 3;
  for (int e = 0; e < K * L; e++) c[e] = (s = s * 1103515245u + 12345u) >> 8 & 3 ? 0 : (e & 1 ? 2 : -2);
  for (int e = 0; e < I * J * L; e++) d[e] = (s = s * 1103515245u + 12345u) >> 8 & 15 ? 0 : 1 + e % 4;
  bool dense_c = cf[1] == 'd';
  for (int x = 0; x < I * J * L; x++) {
    int i = x / (J * L), j = x / L % J, l = x % L;
    double v = d[x];
    bool st = d[x] != 0;
    for (int k = 0; k < K; k++)
      if (b[(i * J + j) * K + k] != 0 && (dense_c || c[k * L + l] != 0))
        v += b[(i * J + j) * K + k] * c[k * L + l], st = true;
    want[x] = v, stored[x] = st;
  }
  tj_tensor *ops[4] = {tu_tensor("A", fmt, 3, (int64_t[]){I, J, L}, NULL),
                       tu_tensor("B", "sss", 3, (int64_t[]){I, J, K}, b),
                       tu_tensor("C", cf, 2, (int64_t[]){K, L}, c),
                       tu_tensor("D", "sss", 3, (int64_t[]){I, J, L}, d)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, "A(i,j,l) = B(i,j,k) * C(k,l) + D(i,j,l)", ops, 4, &o);
  char what[64];
  snprintf(what, sizeof what, "A %s, C %s, %d threads", fmt, cf, threads);
  for (int rep = 0; rep < 2; rep++) {
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect(ops[0], want, stored, I * J * L, what);
  }
  int64_t nnz = 0;
  for (int x = 0; x < I * J * L; x++) nnz += stored[x];
  ck_assert_int_eq(tj_tensor_nnz(ops[0]), nnz);
  tj_context_free(cx);
  for (int t = 0; t < 4; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* Wide unions of products sharing the summed k (issue 15): four
 * products, each of its own pair, and three over one C beside a fourth.
 * The k loop merges B, E, G, P (15 lattice points, past
 * TJ_WIDE_UNION_THRESHOLD's 8) and j its own operands, into the row
 * workspace; where only B hit at k and only F at j, the sum read E as 0
 * and stored B * 0 + E * F = 0 (fails on main). A cell
 * is stored where some term has both its factors stored, with the terms'
 * sum (small integers, cancelling ones stay stored); plain loops. */
enum { WU_I = 18, WU_K = 16, WU_J = 20, WU_TERMS = 4 };
static const char *wide_exprs[] = {
    "A(i,j) = B(i,k) * C(k,j) + E(i,k) * F(k,j) + G(i,k) * H(k,j) + P(i,k) * Q(k,j)",
    "A(i,j) = (B(i,k) + E(i,k) + G(i,k)) * C(k,j) + P(i,k) * F(k,j)",
};
static const char *wide_formats[] = {"ds", "ss", "ds:1,0", "ss:1,0"};

static void int_sparse(double *v, int n, unsigned *s, int sparsity) {
  for (int e = 0; e < n; e++) {
    *s = *s * 1103515245u + 12345u;
    v[e] = (*s >> 8) % (unsigned)sparsity ? 0 : (*s >> 20) % 2 ? 1 + (*s >> 22) % 3 : -1.0;
  }
}

START_TEST(wide_union_products_exact) {
  const char *expr = wide_exprs[_i % 2], *fmt = wide_formats[_i / 2 % 4];
  int threads = 1 + _i / 8;
  static double l[WU_TERMS][WU_I * WU_K], r[WU_TERMS][WU_K * WU_J], want[WU_I * WU_J];
  static unsigned char stored[WU_I * WU_J];
  unsigned s = 31;
  for (int t = 0; t < WU_TERMS; t++) int_sparse(l[t], WU_I * WU_K, &s, 6);
  for (int t = 0; t < WU_TERMS; t++) int_sparse(r[t], WU_K * WU_J, &s, 5);
  bool one_c = _i % 2;   /* the second form: terms 0..2 over r[0], term 3 over r[1] */
  for (int i = 0; i < WU_I; i++)
    for (int j = 0; j < WU_J; j++) {
      double v = 0;
      bool st = false;
      for (int t = 0; t < WU_TERMS; t++) {
        const double *rt = one_c ? r[t < 3 ? 0 : 1] : r[t];
        for (int k = 0; k < WU_K; k++)
          if (l[t][i * WU_K + k] != 0 && rt[k * WU_J + j] != 0)
            v += l[t][i * WU_K + k] * rt[k * WU_J + j], st = true;
      }
      want[i * WU_J + j] = v, stored[i * WU_J + j] = st;
    }
  int64_t dij[2] = {WU_I, WU_J}, dik[2] = {WU_I, WU_K}, dkj[2] = {WU_K, WU_J};
  tj_tensor *ops[9] = {tu_tensor("A", fmt, 2, dij, NULL)};
  static const char *ln = "BEGP", *rn = "CFHQ";
  int n = 1;
  for (int t = 0; t < WU_TERMS; t++) ops[n++] = tu_tensor((char[2]){ln[t], 0}, "ds", 2, dik, l[t]);
  for (int t = 0; t < (one_c ? 2 : WU_TERMS); t++)
    ops[n++] = tu_tensor((char[2]){one_c ? "CF"[t] : rn[t], 0}, "ds", 2, dkj, r[t]);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, expr, ops, n, &o);
  char what[160];
  snprintf(what, sizeof what, "%s into %s, %d threads", expr, fmt, threads);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], want, stored, WU_I * WU_J, what);
  OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  expect(ops[0], want, stored, WU_I * WU_J, what);
  tj_context_free(cx);
  for (int t = 0; t < n; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* Seven sparse operands summed into CSR, DCSR, CSC and DCSC, through the
 * workspace (the default from 4 terms), the lattice's merged loop
 * (TJ_SCATTER_UNION_MIN past 7) and a small lattice threshold: exactly
 * the union, a cancelling sum stays stored; plain loops. */
START_TEST(seven_sparse_summed_exact) {
  enum { R = 25, C = 30, N = 7 };
  const char *fmt = wide_formats[_i % 4];
  int threads = 1 + _i / 4 % 2, route = _i / 8;
  static double v[N][R * C], want[R * C];
  static unsigned char stored[R * C];
  unsigned s = 77;
  for (int t = 0; t < N; t++) int_sparse(v[t], R * C, &s, 9);
  for (int x = 0; x < R * C; x++) {
    want[x] = 0, stored[x] = 0;
    for (int t = 0; t < N; t++) want[x] += v[t][x], stored[x] |= v[t][x] != 0;
  }
  int64_t d2[2] = {R, C};
  tj_tensor *ops[N + 1] = {tu_tensor("A", fmt, 2, d2, NULL)};
  for (int t = 0; t < N; t++)
    ops[t + 1] = tu_tensor((char[2]){"BCDEFGH"[t], 0}, t % 2 ? "ss" : "ds", 2, d2, v[t]);
  if (route == 1) setenv("TJ_SCATTER_UNION_MIN", "100", 1);
  if (route == 2) setenv("TJ_SCATTER_UNION_MIN", "100", 1), setenv("TJ_WIDE_UNION_THRESHOLD", "2", 1);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, "A(i,j) = B(i,j) + C(i,j) + D(i,j) + E(i,j) + F(i,j) + G(i,j) + H(i,j)",
                         ops, N + 1, &o);
  unsetenv("TJ_SCATTER_UNION_MIN"), unsetenv("TJ_WIDE_UNION_THRESHOLD");
  char what[64];
  snprintf(what, sizeof what, "7 summed into %s, %d threads, route %d", fmt, threads, route);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], want, stored, R * C, what);
  tj_context_free(cx);
  for (int t = 0; t <= N; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A(i,j,l) = B(i,j,k) * C(k,l) into outputs of every level order (and
 * COO-3): the planner's own order for sss:2,0,1 is l, i, j, k, which
 * stored every (l, i, j) one of B's fibers reaches (zeros where C has no
 * (k, l)); now Gustavson's loops in the output's level order (COO: a
 * temporary). Exactly the structural product, on 1 and 2 threads, both
 * phases; plain loops. */
static const char *order3_formats[] = {"sss", "dss", "sss:1,0,2", "sss:2,0,1", "sss:2,1,0",
                                       "dss:2,0,1", "sds:2,0,1", "uqq:2,0,1"};
#define N_ORDER3_FORMATS (int)(sizeof order3_formats / sizeof *order3_formats)

START_TEST(contraction_order3_exact) {
  enum { I = 6, J = 7, K = 5, L = 8 };
  const char *fmt = order3_formats[_i % N_ORDER3_FORMATS];
  int threads = 1 + _i / N_ORDER3_FORMATS;
  static double b[I * J * K], c[K * L], want[I * J * L];
  static unsigned char stored[I * J * L];
  unsigned s = 13;
  int_sparse(b, I * J * K, &s, 5);
  int_sparse(c, K * L, &s, 4);
  for (int x = 0; x < I * J * L; x++) {
    int i = x / (J * L), j = x / L % J, l = x % L;
    double v = 0;
    bool st = false;
    for (int k = 0; k < K; k++)
      if (b[(i * J + j) * K + k] != 0 && c[k * L + l] != 0)
        v += b[(i * J + j) * K + k] * c[k * L + l], st = true;
    want[x] = v, stored[x] = st;
  }
  tj_tensor *ops[3] = {tu_tensor("A", fmt, 3, (int64_t[]){I, J, L}, NULL),
                       tu_tensor("B", "sss", 3, (int64_t[]){I, J, K}, b),
                       tu_tensor("C", "ds", 2, (int64_t[]){K, L}, c)};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = threads;
  tj_kernel *k = compile(cx, "A(i,j,l) = B(i,j,k) * C(k,l)", ops, 3, &o);
  char what[64];
  snprintf(what, sizeof what, "A %s, %d threads", fmt, threads);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect(ops[0], want, stored, I * J * L, what);
  OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  expect(ops[0], want, stored, I * J * L, what);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A += B * C through its temporary T, which a run keeps (its arrays) for
 * the next (issue 15): runs over other operands of the same dims, with a
 * product of another pattern (smaller, then larger), store exactly A's old
 * pattern joined with that product's, nothing of the last run's T; twice
 * in a row, by phases, on 1 and 2 threads, CSR and DCSR; plain loops. */
enum { KT_M = 24, KT_K = 18, KT_N = 21 };

/* want = a + times * b c, stored where a or some b(i,k) c(k,j) pair is. */
static void spgemm_expected(const double *a, const double *b, const double *c, int times,
                            double *want, unsigned char *stored) {
  for (int i = 0; i < KT_M; i++)
    for (int j = 0; j < KT_N; j++) {
      double v = a[i * KT_N + j];
      bool st = v != 0;
      for (int k = 0; k < KT_K; k++)
        if (b[i * KT_K + k] != 0 && c[k * KT_N + j] != 0)
          v += times * b[i * KT_K + k] * c[k * KT_N + j], st = true;
      want[i * KT_N + j] = v, stored[i * KT_N + j] = st;
    }
}

START_TEST(spgemm_kept_temporary) {
  const char *fmt = _i % 2 ? "ss" : "ds";
  tj_options o = tj_options_default();
  o.nthreads = 1 + _i / 2;
  static double a[KT_M * KT_N], b[3][KT_M * KT_K], c[3][KT_K * KT_N], want[KT_M * KT_N];
  static unsigned char stored[KT_M * KT_N];
  unsigned s = 41;
  int_sparse(a, KT_M * KT_N, &s, 9);
  static const int sparsity[3] = {4, 12, 3};   /* products of differing patterns */
  for (int r = 0; r < 3; r++) {
    int_sparse(b[r], KT_M * KT_K, &s, sparsity[r]);
    int_sparse(c[r], KT_K * KT_N, &s, sparsity[r]);
  }
  int64_t da[2] = {KT_M, KT_N}, db[2] = {KT_M, KT_K}, dc[2] = {KT_K, KT_N};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k = NULL;
  for (int r = 0; r < 3; r++) {
    tj_tensor *ops[3] = {tu_tensor("A", fmt, 2, da, a), tu_tensor("B", "ds", 2, db, b[r]),
                         tu_tensor("C", "ds", 2, dc, c[r])};
    if (!k) k = compile(cx, "A(i,j) += B(i,k) * C(k,j)", ops, 3, &o);
    char what[64];
    snprintf(what, sizeof what, "A %s, operands %d, %d threads", fmt, r, o.nthreads);
    OK(tj_kernel_run(k, TJ_EVALUATE, ops, 3));
    spgemm_expected(a, b[r], c[r], 1, want, stored);
    expect(ops[0], want, stored, KT_M * KT_N, what);
    OK(tj_kernel_run(k, TJ_EVALUATE, ops, 3));
    spgemm_expected(a, b[r], c[r], 2, want, stored);
    expect(ops[0], want, stored, KT_M * KT_N, what);
    OK(tj_kernel_run(k, TJ_ASSEMBLE, ops, 3));   /* the union, values kept */
    expect(ops[0], want, stored, KT_M * KT_N, what);
    OK(tj_kernel_run(k, TJ_COMPUTE, ops, 3));
    spgemm_expected(a, b[r], c[r], 3, want, stored);
    expect(ops[0], want, stored, KT_M * KT_N, what);
    for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
  }
  tj_context_free(cx);
}
END_TEST

/* Two threads running the kernel at once, each on its own operands: one
 * takes the kept T, the other makes its own; neither sees the other's. */
typedef struct KtRun {
  tj_kernel *k;
  tj_tensor *ops[3];
  int failures;
} KtRun;

static void *kt_thread(void *p) {
  KtRun *r = p;
  for (int q = 0; q < 20; q++) r->failures += tj_kernel_run(r->k, TJ_EVALUATE, r->ops, 3) != TJ_OK;
  return NULL;
}

START_TEST(spgemm_kept_temporary_concurrent) {
  static double a[KT_M * KT_N] = {0}, b[2][KT_M * KT_K], c[2][KT_K * KT_N], want[KT_M * KT_N];
  static unsigned char stored[KT_M * KT_N];
  unsigned s = 43;
  for (int r = 0; r < 2; r++) {
    int_sparse(b[r], KT_M * KT_K, &s, 3 + 6 * r);
    int_sparse(c[r], KT_K * KT_N, &s, 3 + 6 * r);
  }
  int64_t da[2] = {KT_M, KT_N}, db[2] = {KT_M, KT_K}, dc[2] = {KT_K, KT_N};
  KtRun run[2];
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int r = 0; r < 2; r++) {
    run[r] = (KtRun){.ops = {tu_tensor("A", "ds", 2, da, NULL), tu_tensor("B", "ds", 2, db, b[r]),
                             tu_tensor("C", "ds", 2, dc, c[r])}};
    run[r].k = r ? run[0].k : compile(cx, "A(i,j) += B(i,k) * C(k,j)", run[r].ops, 3, NULL);
  }
  pthread_t th[2];
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, kt_thread, &run[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    ck_assert_int_eq(run[r].failures, 0);
    spgemm_expected(a, b[r], c[r], 20, want, stored);
    expect(run[r].ops[0], want, stored, KT_M * KT_N, r ? "second thread" : "first thread");
    for (int t = 0; t < 3; t++) tj_tensor_free(run[r].ops[t]);
  }
  tj_context_free(cx);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("outputs");
  TCase *tc = tcase_create("accumulate");
  tcase_set_timeout(tc, 600);
  tcase_add_loop_test(tc, matrix_by_hand_evaluate, 0, 2 * N_OUT_FORMATS);
  tcase_add_loop_test(tc, matrix_by_hand_assemble_compute, 0, 2 * N_OUT_FORMATS);
  tcase_add_test(tc, csr_arrays);
  tcase_add_test(tc, min_plus);
  tcase_add_loop_test(tc, spgemm, 0, 2 * N_SPGEMM_FORMATS);
  tcase_add_loop_test(tc, spgemm_assign_exact, 0, 2 * N_SPGEMM_FORMATS);
  tcase_add_test(tc, spgemm_temporary_format);
  tcase_add_test(tc, spgemm_assign_direct_level_order);
  tcase_add_test(tc, spgemm_other_sizes);
  tcase_add_loop_test(tc, spgemm_long_rows, 0, 8);
  tcase_add_loop_test(tc, spgemm_short_and_long_rows, 0, 12);
  tcase_add_loop_test(tc, spgemm_uncounted_rows, 0, 12);
  tcase_add_loop_test(tc, spgemm_nonordered_in_place, 0, 24);
  tcase_add_loop_test(tc, spgemm_row_shapes, 0, 20);
  tcase_add_loop_test(tc, spgemm_order3, 0, 6);
  tcase_add_test(tc, spgemm_pattern_exact);
  tcase_add_test(tc, order3);
  tcase_add_loop_test(tc, random_against_loops, 0, 2 * N_OUT_FORMATS);
  tcase_add_test(tc, wrapped_output);
  tcase_add_test(tc, old_name_taken);
  tcase_add_test(tc, other_operands);
  tcase_add_test(tc, add_output_grows_and_is_handed_back);
  suite_add_tcase(s, tc);
  TCase *plus = tcase_create("contraction_plus_term");
  tcase_set_timeout(plus, 600);
  tcase_add_loop_test(plus, contraction_plus_term, 0, 4 * N_PLUS_TERM_FORMATS);
  tcase_add_test(plus, contraction_plus_term_kernels);
  tcase_add_test(plus, shared_sum_index_spans_terms);
  tcase_add_loop_test(plus, split_shapes_exact, 0, 2 * N_PLUS_TERM_FORMATS);
  tcase_add_loop_test(plus, contraction_plus_term_order3, 0, 16);
  suite_add_tcase(s, plus);
  TCase *dense = tcase_create("dense_between");
  tcase_set_timeout(dense, 600);
  tcase_add_loop_test(dense, sds_arrays_evaluate, 0, 2);
  tcase_add_loop_test(dense, sds_arrays_assemble_compute, 0, 2);
  tcase_add_loop_test(dense, sds_against_loops, 0, 12);
  suite_add_tcase(s, dense);
  TCase *exact = tcase_create("exact_patterns");
  tcase_set_timeout(exact, 600);
  tcase_add_loop_test(exact, wide_union_products_exact, 0, 16);
  tcase_add_loop_test(exact, seven_sparse_summed_exact, 0, 24);
  tcase_add_loop_test(exact, contraction_order3_exact, 0, 2 * N_ORDER3_FORMATS);
  tcase_add_loop_test(exact, spgemm_kept_temporary, 0, 4);
  tcase_add_test(exact, spgemm_kept_temporary_concurrent);
  suite_add_tcase(s, exact);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
