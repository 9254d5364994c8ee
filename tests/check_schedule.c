/* Schedules through the public API: precompute (a workspace, shown as
 * where() in the concrete notation), vectorize with a width, parallelize,
 * reorder — each result checked against the reference interpreter — and
 * refusals with messages. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_tensor *random_matrix(const char *name, const char *fmt, int64_t n, int64_t m,
                                unsigned seed) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  int64_t dims[2] = {n, m};
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, dims, &f, &t));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      seed = seed * 1664525u + 1013904223u;
      if ((seed >> 24) % 4 == 0) {
        int64_t c[2] = {i, j};
        OK(tj_tensor_insert(t, c, (double)((seed >> 8) % 13) - 6));
      }
    }
  OK(tj_tensor_pack(t));
  return t;
}

static char *stage(tj_kernel *k, tj_stage s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  OK(tj_kernel_print(k, s, f));
  fclose(f);
  return buf;
}

/* Compiles expr with schedule and options o (NULL: defaults) over A
 * (output, format fa), B (fb) and C (fc); checks values against the
 * reference; returns the kernel's CIN text. */
static char *run_with(const char *expr, const char *schedule, const tj_options *o,
                      const char *fa, const char *fb, const char *fc, int64_t n, int64_t m) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = random_matrix("A", fa, n, m, 0), *Ar = random_matrix("A", "dd", n, m, 0);
  tj_tensor *B = random_matrix("B", fb, n, m, 1), *C = random_matrix("C", fc, n, m, 2);
  tj_tensor *ops[] = {A, B, C}, *rops[] = {Ar, B, C};
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, 3, schedule, o, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_reference(expr, rops, 3));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      int64_t c[2] = {i, j};
      double u, v;
      OK(tj_tensor_get(A, c, &u));
      OK(tj_tensor_get(Ar, c, &v));
      ck_assert_msg(fabs(u - v) <= 1e-9 * (1 + fabs(v)), "%s [%s] at (%lld,%lld): %g vs %g",
                    expr, schedule, (long long)i, (long long)j, u, v);
    }
  char *cin = stage(k, TJ_STAGE_CIN);
  tj_tensor_free(A);
  tj_tensor_free(Ar);
  tj_tensor_free(B);
  tj_tensor_free(C);
  tj_context_free(cx);
  return cin;
}

static char *run(const char *expr, const char *schedule, const char *fa, const char *fb,
                 int64_t n, int64_t m) {
  return run_with(expr, schedule, NULL, fa, fb, fb, n, m);
}

START_TEST(precompute_builds_a_workspace) {
  char *cin = run("A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j) + C(i,j), j, w)", "ds", "ds",
                  40, 33);
  ck_assert_str_eq(cin, "forall(i, where(forall(j, A(i,j) = w(j)), "
                        "forall(j, w(j) += B(i,j) + C(i,j))))\n");
  free(cin);
}
END_TEST

/* Dense copies of an n x m tensor's values (row-major), read entry by
 * entry through the API. */
static double *values(tj_tensor *t, int64_t n, int64_t m) {
  double *v = calloc((size_t)(n * m), sizeof *v);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      int64_t c[2] = {i, j};
      OK(tj_tensor_get(t, c, &v[i * m + j]));
    }
  return v;
}

/* precompute of a subexpression into a scalar workspace (a where() in the
 * notation): the residual y = b - A x, SpMV plus a vector, a sum moved in
 * through a product, and the workspace named by the user; values against
 * plain loops over the operands' dense copies, not the reference. */
START_TEST(precompute_subexpression_scalar) {
  static const struct { const char *expr, *sched, *cin; int kind; } cs[] = {
      {"y(i) = b(i) - A(i,j) * x(j)", "precompute(A(i,j) * x(j), {}, t)",
       "forall(i, where(y(i) = b(i) - t, forall(j, t += A(i,j) * x(j))))\n", 0},
      {"y(i) = A(i,j) * x(j) + b(i)", "precompute(A(i,j)*x(j), {}, acc)",
       "forall(i, where(y(i) = acc + b(i), forall(j, acc += A(i,j) * x(j))))\n", 1},
      {"y(i) = A(i,j) * x(j) * b(i)", "precompute(A(i,j) * x(j), {}, t)",
       "forall(i, where(y(i) = t * b(i), forall(j, t += A(i,j) * x(j))))\n", 2},
      {"y(i) = A(i,j) * x(j)", "precompute(A(i,j) * x(j), {}, t)",
       "forall(i, where(y(i) = t, forall(j, t += A(i,j) * x(j))))\n", 3},
      {"y(i) = sum(j, A(i,j) * x(j))", "precompute(sum(j, A(i,j) * x(j)), {}, t)",
       "forall(i, where(y(i) = t, forall(j, t += A(i,j) * x(j))))\n", 3},
  };
  const int64_t n = 23, m = 17;
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_tensor *A = random_matrix("A", "ds", n, m, 3), *x = random_matrix("x", "dd", m, 1, 4);
    tj_tensor *b = random_matrix("b", "dd", n, 1, 5), *y = random_matrix("y", "dd", n, 1, 6);
    /* vectors as n x 1 matrices would not match y(i): build order-1 ones */
    tj_format dense;
    OK(tj_format_parse("d", &dense));
    tj_tensor *xv, *bv, *yv;
    OK(tj_tensor_new("x", TJ_F64, 1, &m, &dense, &xv));
    OK(tj_tensor_new("b", TJ_F64, 1, &n, &dense, &bv));
    OK(tj_tensor_new("y", TJ_F64, 1, &n, &dense, &yv));
    double *Ad = values(A, n, m), *xd = values(x, m, 1), *bd = values(b, n, 1);
    for (int64_t j = 0; j < m; j++) OK(tj_tensor_insert(xv, &j, xd[j] + 0.5));
    for (int64_t i = 0; i < n; i++) OK(tj_tensor_insert(bv, &i, bd[i] - 0.25));
    OK(tj_tensor_pack(xv));
    OK(tj_tensor_pack(bv));
    tj_tensor *ops[] = {yv, A, xv, bv};
    tj_kernel *k;
    OK(tj_compile(cx, cs[c].expr, ops, 4, cs[c].sched, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < n; i++) {
      double ax = 0, got;
      for (int64_t j = 0; j < m; j++) ax += Ad[i * m + j] * (xd[j] + 0.5);
      double bi = bd[i] - 0.25;
      double want = cs[c].kind == 0 ? bi - ax : cs[c].kind == 1 ? ax + bi
                    : cs[c].kind == 2 ? ax * bi : ax;
      OK(tj_tensor_get(yv, &i, &got));
      ck_assert_msg(fabs(got - want) <= 1e-12 * (1 + fabs(want)), "%s [%s] y(%lld) = %g, want %g",
                    cs[c].expr, cs[c].sched, (long long)i, got, want);
    }
    char *cin = stage(k, TJ_STAGE_CIN);
    ck_assert_msg(strcmp(cin, cs[c].cin) == 0, "%s: %s", cs[c].sched, cin);
    free(cin);
    free(Ad), free(xd), free(bd);
    tj_tensor_free(A), tj_tensor_free(x), tj_tensor_free(b), tj_tensor_free(y);
    tj_tensor_free(xv), tj_tensor_free(bv), tj_tensor_free(yv);
    tj_context_free(cx);
  }
}
END_TEST

/* GEMM plus a matrix with the contraction in a scalar workspace, and
 * SpGEMM's row workspace named by precompute over {j}: values against a
 * plain triple loop. */
START_TEST(precompute_gemm_plus_matrix_and_spgemm_row) {
  const int64_t n = 19;
  static const struct { const char *expr, *sched, *fa, *cin; bool plus; } cs[] = {
      {"A(i,j) = B(i,k) * C(k,j) + A0(i,j)", "precompute(B(i,k) * C(k,j), {}, t)", "dd",
       "forall(i, forall(j, where(A(i,j) = t + A0(i,j), forall(k, t += B(i,k) * C(k,j)))))\n",
       true},
      {"A(i,j) = B(i,k) * C(k,j)", "precompute(B(i,k) * C(k,j), {j}, row)", "ds",
       "forall(i, where(forall(j, A(i,j) = row(j)), forall(k, forall(j, row(j) += "
       "B(i,k) * C(k,j)))))\n", false},
  };
  for (size_t c = 0; c < 2; c++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_tensor *A = random_matrix("A", cs[c].fa, n, n, 0), *B = random_matrix("B", "ds", n, n, 1);
    tj_tensor *C = random_matrix("C", "ds", n, n, 2), *D = random_matrix("A0", "dd", n, n, 7);
    tj_tensor *ops[] = {A, B, C, D};
    tj_kernel *k;
    OK(tj_compile(cx, cs[c].expr, ops, cs[c].plus ? 4 : 3, cs[c].sched, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    double *Bd = values(B, n, n), *Cd = values(C, n, n), *Dd = values(D, n, n);
    double *Ad = values(A, n, n);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double want = cs[c].plus ? Dd[i * n + j] : 0;
        for (int64_t q = 0; q < n; q++) want += Bd[i * n + q] * Cd[q * n + j];
        ck_assert_msg(fabs(Ad[i * n + j] - want) <= 1e-12 * (1 + fabs(want)),
                      "%s: A(%lld,%lld) = %g, want %g", cs[c].expr, (long long)i, (long long)j,
                      Ad[i * n + j], want);
      }
    char *cin = stage(k, TJ_STAGE_CIN);
    ck_assert_msg(strcmp(cin, cs[c].cin) == 0, "%s: %s", cs[c].sched, cin);
    free(cin);
    free(Ad), free(Bd), free(Cd), free(Dd);
    tj_tensor_free(A), tj_tensor_free(B), tj_tensor_free(C), tj_tensor_free(D);
    tj_context_free(cx);
  }
}
END_TEST

START_TEST(automatic_workspace_shows_where) {
  char *cin = run("A(i,j) = B(i,k) * C(k,j)", NULL, "ds", "ds", 30, 30);
  ck_assert_ptr_nonnull(strstr(cin, "where(forall(j, A(i,j) = w(j)), forall(k, forall(j, w(j) +="));
  free(cin);
}
END_TEST

START_TEST(vectorize_parallelize_reorder) {
  free(run("A(i,j) = B(i,j) * C(i,j) + B(i,j)", "vectorize(j,4) parallelize(i)", "dd", "dd", 37,
           29));
  free(run("A(i,j) = B(i,j) + C(i,j)", "parallelize(i)", "ds", "ds", 37, 29));
  char *cin = run("A(i,j) = B(i,j) + C(i,j)", "reorder(j,i)", "dd", "dd", 17, 19);
  ck_assert_str_eq(cin, "forall(j, forall(i, A(i,j) = B(i,j) + C(i,j)))\n");
  free(cin);
}
END_TEST

/* unroll(i, n): the loop carries the count into LLVM's unroller, on dense
 * loops and on loops over one sparse level, vectorized or not; values
 * against the reference. */
START_TEST(unroll_dense_and_sparse_loops) {
  char *cin = run("A(i,j) = B(i,j) * C(i,j) + B(i,j)", "unroll(j,4)", "dd", "dd", 37, 29);
  ck_assert_str_eq(cin, "forall(i, forall(j:unroll(4), A(i,j) = B(i,j) * C(i,j) + B(i,j)))\n");
  free(cin);
  tj_options scalar = tj_options_default();
  scalar.no_vectorize = 1;
  free(run_with("A(i,j) = B(i,j) * 3", "unroll(j,3) unroll(i,2)", &scalar, "dd", "ds", "ds", 23, 17));
  free(run("A(i,j) = B(i,j) * 3", "unroll(j,5)", "ds", "ds", 23, 17));
  free(run("A(i,j) = B(i,k) * C(k,j)", "unroll(k,2)", "dd", "dd", 19, 19));
}
END_TEST

/* parallelize(i, strategy): rows split in equal blocks, small dynamic
 * chunks, or by nonzeros; on 2 threads, values against the reference. */
START_TEST(parallel_strategies) {
  tj_options two = tj_options_default();
  two.nthreads = 2;
  static const struct { const char *sched, *shown; } st[] = {
      {"parallelize(i, static)", "forall(i:parallel(static), "},
      {"parallelize(i, dynamic)", "forall(i:parallel(dynamic), "},
      {"parallelize(i, balanced)", "forall(i:parallel(balanced), "},
      {"parallelize(i)", "forall(i:parallel, "}};
  for (int k = 0; k < 4; k++) {
    char *cin = run_with("A(i,j) = B(i,k) * C(k,j)", st[k].sched, &two, "dd", "ds", "dd", 61, 61);
    ck_assert_msg(strncmp(cin, st[k].shown, strlen(st[k].shown)) == 0, "%s: %s", st[k].sched, cin);
    free(cin);
  }
  free(run_with("A(i,j) = B(i,j) * C(i,j)", "parallelize(i, static)", &two, "dd", "dd", "dd", 3, 9));
  free(run_with("A(i,j) = B(i,j) * C(i,j)", "parallelize(i, dynamic)", &two, "dd", "dd", "dd", 97, 5));
}
END_TEST

/* The default order of a contraction that will be vectorized: output
 * indices first, reductions inside — for all-dense operands, and for one
 * sparse operand times dense ones when the sparse operand can be walked in
 * that order as stored and the innermost output index is contiguous. The
 * notation shown is the order that runs. */
typedef struct OrderCase {
  const char *fa, *fb, *fc, *schedule;
  bool no_vectorize;
  const char *cin;
} OrderCase;

#define IJK "forall(i, forall(j, forall(k, A(i,j) += B(i,k) * C(k,j))))\n"
#define IKJ "forall(i, forall(k, forall(j, A(i,j) += B(i,k) * C(k,j))))\n"
static const OrderCase orders[] = {
    {"dd", "ds", "dd", NULL, false, IJK},            /* SpMM: rows of C in registers */
    {"dd", "dd", "dd", NULL, false, IJK},            /* GEMM */
    {"dd", "ds", "dd", NULL, true, IKJ},             /* scalar: the planner's order */
    {"dd", "ds", "dd", "reorder(i,k,j)", false, IKJ}, /* the user's order wins */
    {"dd", "ds:1,0", "dd", NULL, false,              /* CSC: walked as stored */
     "forall(k, forall(i, forall(j, A(i,j) += B(i,k) * C(k,j))))\n"},
    {"dd", "ds", "dd:1,0", NULL, false, IJK},        /* column-major C: the planner's */
    {"dd", "ds", "ds", NULL, false, IKJ},            /* two sparse operands */
    {"dd:1,0", "ds", "dd", NULL, false,              /* column-major A: the planner's */
     "forall(j, forall(i, forall(k, A(i,j) += B(i,k) * C(k,j))))\n"},
};

START_TEST(default_order_output_first) {
  const OrderCase *c = &orders[_i];
  tj_options o = tj_options_default();
  o.no_vectorize = c->no_vectorize;
  char *cin = run_with("A(i,j) = B(i,k) * C(k,j)", c->schedule, &o, c->fa, c->fb, c->fc, 45, 45);
  ck_assert_msg(strcmp(cin, c->cin) == 0, "A:%s B:%s C:%s: got %s", c->fa, c->fb, c->fc, cin);
  free(cin);
}
END_TEST

typedef struct Refusal {
  const char *expr, *schedule, *fa, *msg;
} Refusal;

static const Refusal refusals[] = {
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j), j, w)", "ds",
     "so it would store every entry of a sparse output's row"},
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j), {}, w)", "ds",
     "no index is summed inside this subexpression"},
    {"A(i,j) = B(i,k) * C(k,j)", "precompute(C(k,j) * B(i,k), {}, w)", "dd",
     "C(k,j) * B(i,k) is not a subexpression of the right-hand side"},
    {"A(i,j) = B(i,k) * C(k,j) + B(i,k) * C(k,j)", "precompute(B(i,k) * C(k,j), {}, w)", "dd",
     "occurs more than once"},
    {"A(i,j) = B(i,k) * C(k,j)", "precompute(B(i,k) * C(k,j), {q}, w)", "dd",
     "unknown index q in the index set"},
    {"A(i,j) = B(i,k) * C(k,j)", "precompute(B(i,k) * C(k,j), {}, C)", "dd",
     "the workspace's name C is a tensor of the expression"},
    {"A(i,j) = B(i,k) * C(k,j)", "precompute(B(i,k) * , {}, w)", "dd",
     "expected an expression, found end of input at column 9 of 'B(i,k) *'"},
    {"A(i,j) = B(i,k) * C(k,j)", "precompute(B(i,k), {j}, w)", "ds",
     "the index set names j, which the subexpression does not use"},
    {"A(i,j) = sum(k, exp(B(i,k) * C(k,j)) + 1)", "precompute(B(i,k) * C(k,j), {}, w)", "dd",
     "index k is summed over a larger subexpression, and the operator between it and this "
     "one does not distribute over the sum"},
    {"A(i,j) = reduce(max, k, B(i,k) * C(k,j) * 2)", "precompute(B(i,k) * C(k,j), {}, w)", "dd",
     "index k is reduced over the whole right-hand side by an operator other than +"},
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j) + C(i,j), i, w)", "ds", "last index of a sparse output"},
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j) + C(i,j), {i, j}, w)", "ds",
     "a workspace over more indices is lowered for a subexpression or a dense output"},
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j) + C(i,j))", "ds", "expected precompute("},
    {"A(i,j) = B(i,k) * C(k,j)", "reorder(i,k,j) parallelize(k, partials)", "ds",
     "parallelize(k, partials): per-thread partial outputs of an inner loop are dense copies "
     "of the output, which is sparse here"},
    {"A(i,j) = B(i,k) * C(k,j)", "reorder(i,k,j) parallelize(k)", "dd",
     "an inner loop runs in parallel only over an index of a dense output"},
    {"A(i,j) = B(i,j) + C(i,j)", "vectorize(q,4)", "dd", "unknown index 'q'"},
    {"A(i,j) = B(i,j) + C(i,j)", "split(j, j0, j1, 2) reorder(j0, i, j1)", "ds",
     "(j0 above i) and writes a sparse output, which is appended in loop order"},
    /* B .* C of two sparse operands: the pattern is neither's, so the output
       is appended, and fused loops are refused (so are repeated ones: B + C
       above) */
    {"A(i,j) = B(i,j) * C(i,j)", "reorder(i, j) fuse(i, j, f) pos(f, fp, B(i,j))", "ds",
     "fused loops write a dense output, or a sparse one whose pattern is one operand's"},
    {"A(i,j) = B(i,j) + C(i,j)", "unroll(j,4)", "ds", "only for loops (a dense range, or one "
     "sparse level) unroll"},
    {"A(i,j) = B(i,j) + C(i,j)", "unroll(j,65)", "dd", "unroll factor 65 is not between 2 and 64"},
    {"A(i,j) = B(i,j) + C(i,j)", "unroll(q,2)", "dd", "unroll: unknown index 'q'"},
    {"A(i,j) = B(i,j) + C(i,j)", "parallelize(i, greedy)", "dd", "unknown strategy 'greedy'"},
};

START_TEST(refusals_with_messages) {
  const Refusal *r = &refusals[_i];
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = random_matrix("A", r->fa, 8, 8, 0), *B = random_matrix("B", "ds", 8, 8, 1);
  tj_tensor *C = random_matrix("C", "ds", 8, 8, 2);
  tj_tensor *ops[] = {A, B, C};
  tj_kernel *k = NULL;
  ck_assert_int_ne(tj_compile(cx, r->expr, ops, 3, r->schedule, NULL, &k), TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), r->msg), "got: %s", tj_last_error());
  tj_tensor_free(A);
  tj_tensor_free(B);
  tj_tensor_free(C);
  tj_context_free(cx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("schedule");
  TCase *t = tcase_create("schedule");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, precompute_builds_a_workspace);
  tcase_add_test(t, automatic_workspace_shows_where);
  tcase_add_test(t, precompute_subexpression_scalar);
  tcase_add_test(t, precompute_gemm_plus_matrix_and_spgemm_row);
  tcase_add_test(t, vectorize_parallelize_reorder);
  tcase_add_test(t, unroll_dense_and_sparse_loops);
  tcase_add_test(t, parallel_strategies);
  tcase_add_loop_test(t, default_order_output_first, 0, sizeof orders / sizeof orders[0]);
  tcase_add_loop_test(t, refusals_with_messages, 0, sizeof refusals / sizeof refusals[0]);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
