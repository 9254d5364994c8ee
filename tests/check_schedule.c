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
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j), j, w)", "ds", "only the whole right-hand side"},
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j) + C(i,j), i, w)", "ds", "last index of a sparse output"},
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j) + C(i,j), j, w)", "dd", "the output is dense"},
    {"A(i,j) = B(i,j) + C(i,j)", "precompute(B(i,j) + C(i,j))", "ds", "expected precompute("},
    {"A(i,j) = B(i,k) * C(k,j)", "reorder(i,k,j) parallelize(k)", "dd",
     "an inner loop runs in parallel only over an index of a dense output"},
    {"A(i,j) = B(i,j) + C(i,j)", "vectorize(q,4)", "dd", "unknown index 'q'"},
    {"A(i,j) = B(i,j) + C(i,j)", "unroll(j,4)", "ds", "only for loops (a dense range, or one "
     "sparse level) unroll"},
    {"A(i,j) = B(i,j) + C(i,j)", "unroll(j,65)", "dd", "unroll factor 65 is not between 2 and 64"},
    {"A(i,j) = B(i,j) + C(i,j)", "unroll(q,2)", "dd", "unroll: unknown index 'q'"},
    {"A(i,j) = B(i,j) + C(i,j)", "parallelize(i, static)", "ds",
     "strategies choose how a dense output's rows split"},
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
