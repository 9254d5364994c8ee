/* sequence(S1, S2): a dense output's sum of terms with sums of their own
 * run as statements in turn in one kernel (ir/sequence.c,
 * jit/driver_sequence.c, lower_kernel_seq). Values by hand: GEMM plus a
 * matrix, the residual b - A x over a CSR A, a three-term sum with a
 * difference, i32 and `+=` outputs; under the default rule, forced with
 * loops (serial, parallel), denied, on both backends and the loop-IR
 * interpreter; loop rewrites and precompute given to the statements that
 * have their loops or subexpression. The notation -print-cin shows, and
 * each refusal's message. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/tensors.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

/* jit/driver.h: runs a kernel through the loop-IR interpreter */
tj_status drv_kernel_interpret(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                               int n);

/* B (2x3) * C (3x2) = [[4, 5], [10, 11]]; E (2x1) * F (1x2) = [[3, 4], [6, 8]] */
static const double Bv[] = {1, 2, 3, 4, 5, 6}, Cv[] = {1, 0, 0, 1, 1, 1};
static const double Dv[] = {10, 20, 30, 40}, Ev[] = {1, 2}, Fv[] = {3, 4};

static char *stage(const tj_kernel *k, tj_stage s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  OK(tj_kernel_print(k, s, f));
  fclose(f);
  return buf;
}

static void expect_values(const tj_tensor *t, const double *want, int n, const char *what) {
  for (int q = 0; q < n; q++) {
    int64_t c[2] = {q / 2, q % 2};
    double v;
    OK(tj_tensor_get(t, tj_tensor_order(t) == 1 ? (int64_t[]){q} : c, &v));
    ck_assert_msg(v == want[q], "%s: entry %d is %g, not %g", what, q, v, want[q]);
  }
}

typedef struct Way {
  const char *sched;
  int backend;
  bool interpret;
  const char *cin;   /* the start of -print-cin */
  const char *bfmt;  /* B's format: NULL dense */
} Way;

static const Way ways[] = {
    {"sequence()", TJ_BACKEND_LLVM, false, "sequence(forall(i, forall(j, A(i,j) = D(i,j))), ",
     NULL},
    {NULL, TJ_BACKEND_LLVM, false,   /* the default: too small for the sequence */
     "forall(i, forall(j, where(A(i,j) = t_k + D(i,j), ", NULL},
    {"sequence() method(loops)", TJ_BACKEND_LLVM, false, "sequence(", NULL},
    {"sequence() method(loops) parallelize(i)", TJ_BACKEND_LLVM, false,
     "sequence(forall(i:parallel, forall(j, A(i,j) = D(i,j))), forall(i:parallel, ", NULL},
    {"sequence() method(loops) reorder(i,k,j)", TJ_BACKEND_LLVM, false,
     "sequence(forall(i, forall(j, A(i,j) = D(i,j))), forall(i, forall(k, forall(j, "
     "A(i,j) += B(i,k) * C(k,j)))))", NULL},
    {"nosequence()", TJ_BACKEND_LLVM, false,
     "forall(i, forall(j, where(A(i,j) = t_k + D(i,j), ", NULL},
    {"sequence()", TJ_BACKEND_C, false, "sequence(", NULL},
    {"sequence() method(loops)", TJ_BACKEND_C, false, "sequence(", NULL},
    {"sequence() method(loops)", TJ_BACKEND_LLVM, true, "sequence(", NULL},
    /* loop rewrites go to the statements that have the loops they name */
    {"sequence() split(i,i0,i1,1) reorder(i0,k,i1,j)", TJ_BACKEND_LLVM, false,
     "suchthat(sequence(forall(i0, forall(i1, forall(j, A(i,j) = D(i,j)))), forall(i0, "
     "forall(k, forall(i1, forall(j, A(i,j) += B(i,k) * C(k,j)))))), split(i, i0, i1, 1))", NULL},
    {"sequence() split(i,i0,i1,1) reorder(i0,k,i1,j)", TJ_BACKEND_C, false, "suchthat(", NULL},
    {"sequence() split(i,i0,i1,1) reorder(i0,k,i1,j)", TJ_BACKEND_LLVM, true, "suchthat(", NULL},
    {"sequence() fuse(i,j,f) divide(f,f0,f1,3) parallelize(f0)", TJ_BACKEND_LLVM, false,
     "suchthat(sequence(forall(f0:parallel, forall(f1, A(i,j) = D(i,j))), forall(f0:parallel, "
     "forall(f1, forall(k, A(i,j) += B(i,k) * C(k,j))))), fuse(i, j, f), divide(f, f0, f1, 3))",
     NULL},
    {"sequence() bound(k,kb,3,max_exact)", TJ_BACKEND_LLVM, false,
     "suchthat(sequence(forall(i, forall(j, A(i,j) = D(i,j))), forall(i, forall(j, forall(kb, "
     "A(i,j) += B(i,k) * C(k,j))))), bound(k, kb, 3, max_exact))", NULL},
    {"sequence() pos(k,kp,B(i,k)) split(kp,k0,k1,2)", TJ_BACKEND_LLVM, false,
     "suchthat(sequence(forall(i, forall(j, A(i,j) = D(i,j))), forall(i, forall(j, forall(k0, "
     "forall(k1, A(i,j) += B(i,k) * C(k,j)))))), pos(k, kp, B(i,k)), split(kp, k0, k1, 2))",
     "ds"},
    /* precompute goes to the statement with its subexpression */
    {"sequence() precompute(B(i,k) * C(k,j), {j}, w)", TJ_BACKEND_LLVM, false,
     "sequence(forall(i, forall(j, A(i,j) = D(i,j))), forall(i, where(forall(j, A(i,j) += "
     "w(j)), forall(k, forall(j, w(j) += B(i,k) * C(k,j))))))", NULL},
    {"sequence() precompute(B(i,k) * C(k,j), {}, t)", TJ_BACKEND_LLVM, false,
     "sequence(forall(i, forall(j, A(i,j) = D(i,j))), forall(i, forall(j, where(A(i,j) += t, "
     "forall(k, t += B(i,k) * C(k,j))))))", NULL},
};

/* A = B C + D = [[14, 25], [40, 51]], every way. */
START_TEST(test_gemm_plus_matrix) {
  const Way *w = &ways[_i];
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *B = tu_tensor("B", w->bfmt ? w->bfmt : "dd", 2, (int64_t[]){2, 3}, Bv);
  tj_tensor *C = tu_tensor("C", "dd", 2, (int64_t[]){3, 2}, Cv);
  tj_tensor *D = tu_tensor("D", "dd", 2, (int64_t[]){2, 2}, Dv);
  tj_tensor *A = tu_tensor("A", "dd", 2, (int64_t[]){2, 2}, NULL);
  tj_tensor *ops[] = {A, B, C, D};
  tj_options o = tj_options_default();
  o.backend = w->backend;
  tj_kernel *k;
  OK(tj_compile(cx, "A(i,j) = B(i,k) * C(k,j) + D(i,j)", ops, 4, w->sched, &o, &k));
  char *cin = stage(k, TJ_STAGE_CIN);
  ck_assert_msg(strncmp(cin, w->cin, strlen(w->cin)) == 0, "%s: %s", w->sched, cin);
  free(cin);
  for (int rep = 0; rep < 2; rep++) {   /* the first statement redefines A every run */
    if (w->interpret) OK(drv_kernel_interpret(k, TJ_EVALUATE, NULL, 0));
    else OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect_values(A, (const double[]){14, 25, 40, 51}, 4, w->sched ? w->sched : "default");
  }
  tj_tensor *ops2[] = {A, B, C, D};
  OK(tj_kernel_run(k, TJ_ASSEMBLE, ops2, 4));
  OK(tj_kernel_run(k, TJ_COMPUTE, ops2, 4));
  expect_values(A, (const double[]){14, 25, 40, 51}, 4, "assemble, compute");
  tj_tensor_free(A), tj_tensor_free(B), tj_tensor_free(C), tj_tensor_free(D);
  tj_context_free(cx);
}
END_TEST

/* By default from 1e8 flops: A = B C + D with B, C all ones (K = 400) and
 * D(i,j) = i is A(i,j) = 400 + i, its second statement by GETT. */
START_TEST(test_default_large) {
  enum { N = 400 };
  double *ones = malloc(sizeof(double) * N * N), *rows = malloc(sizeof(double) * N * N);
  for (int q = 0; q < N * N; q++) ones[q] = 1, rows[q] = q / N;
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *B = tu_tensor("B", "dd", 2, (int64_t[]){N, N}, ones);
  tj_tensor *C = tu_tensor("C", "dd", 2, (int64_t[]){N, N}, ones);
  tj_tensor *D = tu_tensor("D", "dd", 2, (int64_t[]){N, N}, rows);
  tj_tensor *A = tu_tensor("A", "dd", 2, (int64_t[]){N, N}, NULL);
  tj_tensor *ops[] = {A, B, C, D};
  tj_kernel *k;
  OK(tj_compile(cx, "A(i,j) = B(i,k) * C(k,j) + D(i,j)", ops, 4, "parallelize(i)", NULL, &k));
  char *g = stage(k, TJ_STAGE_GETT);
  ck_assert_msg(strstr(g, "sequence: statement 2: A(i,j) += B(i,k) * C(k,j)\n"
                          "dense contraction A(I_m, I_n) += "), "%s", g);
  free(g);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < N; i += 7)
    for (int64_t j = 0; j < N; j += 11) {
      double v;
      OK(tj_tensor_get(A, (int64_t[]){i, j}, &v));
      ck_assert_msg(v == N + i, "A(%lld,%lld) = %g", (long long)i, (long long)j, v);
    }
  tj_tensor_free(A), tj_tensor_free(B), tj_tensor_free(C), tj_tensor_free(D);
  tj_context_free(cx);
  free(ones), free(rows);
}
END_TEST

/* sequence() runs GETT for the second statement: -print-gett says so. */
START_TEST(test_gett_statement) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *B = tu_tensor("B", "dd", 2, (int64_t[]){2, 3}, Bv);
  tj_tensor *C = tu_tensor("C", "dd", 2, (int64_t[]){3, 2}, Cv);
  tj_tensor *D = tu_tensor("D", "dd", 2, (int64_t[]){2, 2}, Dv);
  tj_tensor *A = tu_tensor("A", "dd", 2, (int64_t[]){2, 2}, NULL);
  tj_tensor *ops[] = {A, B, C, D};
  tj_kernel *k;
  OK(tj_compile(cx, "A(i,j) = B(i,k) * C(k,j) + D(i,j)", ops, 4, "sequence()", NULL, &k));
  char *g = stage(k, TJ_STAGE_GETT);
  ck_assert_msg(strstr(g, "sequence: statement 1: A(i,j) = D(i,j)\nnot a pure dense"), "%s", g);
  ck_assert_msg(strstr(g, "sequence: statement 2: A(i,j) += B(i,k) * C(k,j)\n"
                          "dense contraction A(I_m, I_n) += "), "%s", g);
  ck_assert_msg(strstr(g, "beta=1"), "%s", g);
  free(g);
  char *c = stage(k, TJ_STAGE_COMPUTE);
  ck_assert_msg(strstr(c, "/* sequence: statement 2 */") && strstr(c, "tj_rt_gett("), "%s", c);
  free(c);
  tj_tensor_free(A), tj_tensor_free(B), tj_tensor_free(C), tj_tensor_free(D);
  tj_context_free(cx);
}
END_TEST

/* y = b - A x with A the 2x2 identity in CSR, x = (1, 2), b = (10, 20):
 * y = (9, 18), by sequence() (the difference a negated update) and without. */
START_TEST(test_residual_csr) {
  static const char *const scheds[] = {"sequence()", "sequence() parallelize(i)", NULL};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = tu_tensor("A", "ds", 2, (int64_t[]){2, 2}, (const double[]){1, 0, 0, 1});
  tj_tensor *x = tu_tensor("x", "d", 1, (int64_t[]){2}, (const double[]){1, 2});
  tj_tensor *b = tu_tensor("b", "d", 1, (int64_t[]){2}, (const double[]){10, 20});
  tj_tensor *y = tu_tensor("y", "d", 1, (int64_t[]){2}, NULL);
  tj_tensor *ops[] = {y, b, A, x};
  for (int s = 0; s < 3; s++) {
    tj_kernel *k;
    OK(tj_compile(cx, "y(i) = b(i) - A(i,j) * x(j)", ops, 4, scheds[s], NULL, &k));
    char *cin = stage(k, TJ_STAGE_CIN);
    const char *want = s < 2 ? "forall(j, y(i) += -(A(i,j) * x(j)))))"
                             : "forall(i, where(y(i) = b(i) - t_j, ";
    ck_assert_msg(strstr(cin, want), "%s: %s", scheds[s], cin);
    if (s == 0)   /* (the default, s == 2, keeps one nest: no dense contraction) */
      ck_assert_str_eq(cin, "sequence(forall(i, y(i) = b(i)), forall(i, forall(j, "
                            "y(i) += -(A(i,j) * x(j)))))\n");
    free(cin);
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    expect_values(y, (const double[]){9, 18}, 2, scheds[s] ? scheds[s] : "default");
    OK(drv_kernel_interpret(k, TJ_EVALUATE, NULL, 0));
    expect_values(y, (const double[]){9, 18}, 2, "interpreter");
    tj_kernel_free(k);
  }
  tj_tensor_free(A), tj_tensor_free(x), tj_tensor_free(b), tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* The loop-IR statements of a sequence run their row loops on the threads
 * (each outermost i loop parallel, tj_rt_parallel_for, as one nest's):
 * A = B C + D with B CSR (loops, not GETT) and with dense B under
 * method(loops), at 1 and 2 threads, against plain loops; integer values,
 * so every order of summing is exact. */
START_TEST(test_two_threads_by_hand) {
  enum { M = 97, K = 40, N = 23 };
  static const char *const bfmt[] = {"ds", "dd"};
  static const char *const sched[] = {"sequence()", "sequence() method(loops)"};
  double *b = calloc(M * K, sizeof *b), *c = malloc(K * N * sizeof *c);
  double *d = malloc(M * N * sizeof *d), *want = malloc(M * N * sizeof *want);
  for (int i = 0; i < M; i++)
    for (int k = 0; k < K; k++) b[i * K + k] = (i * 7 + k * 3) % 5 == 0 ? (i + k) % 9 + 1 : 0;
  for (int q = 0; q < K * N; q++) c[q] = q % 11 - 5;
  for (int q = 0; q < M * N; q++) d[q] = q % 13;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      want[i * N + j] = d[i * N + j];
      for (int k = 0; k < K; k++) want[i * N + j] += b[i * K + k] * c[k * N + j];
    }
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int w = 0; w < 2; w++)
    for (int threads = 1; threads <= 2; threads++) {
      tj_tensor *B = tu_tensor("B", bfmt[w], 2, (int64_t[]){M, K}, b);
      tj_tensor *C = tu_tensor("C", "dd", 2, (int64_t[]){K, N}, c);
      tj_tensor *D = tu_tensor("D", "dd", 2, (int64_t[]){M, N}, d);
      tj_tensor *A = tu_tensor("A", "dd", 2, (int64_t[]){M, N}, NULL);
      tj_options o = tj_options_default();
      o.nthreads = threads;
      tj_kernel *k;
      OK(tj_compile(cx, "A(i,j) = B(i,k) * C(k,j) + D(i,j)", (tj_tensor *[]){A, B, C, D}, 4,
                    sched[w], &o, &k));
      char *lir = stage(k, TJ_STAGE_COMPUTE), *at = lir;
      int loops = 0;
      while ((at = strstr(at, "parallel (#pragma omp parallel for)"))) loops++, at++;
      ck_assert_msg(loops == 2, "%s: %d parallel loops:\n%s", sched[w], loops, lir);
      free(lir);
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      for (int q = 0; q < M * N; q++) {
        double v;
        OK(tj_tensor_get(A, (int64_t[]){q / N, q % N}, &v));
        ck_assert_msg(v == want[q], "%s, %d threads: A(%d,%d) = %g, want %g", sched[w],
                      threads, q / N, q % N, v, want[q]);
      }
      tj_kernel_free(k);
      tj_tensor_free(A), tj_tensor_free(B), tj_tensor_free(C), tj_tensor_free(D);
    }
  tj_context_free(cx);
  free(b), free(c), free(d), free(want);
}
END_TEST

/* A = B C - E F + D = [[11, 21], [34, 43]]: three statements (D, then two
 * updates, the second negated); and A += ... onto A = ones: [[12, 22], [35, 44]]. */
START_TEST(test_three_terms) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *B = tu_tensor("B", "dd", 2, (int64_t[]){2, 3}, Bv);
  tj_tensor *C = tu_tensor("C", "dd", 2, (int64_t[]){3, 2}, Cv);
  tj_tensor *D = tu_tensor("D", "dd", 2, (int64_t[]){2, 2}, Dv);
  tj_tensor *E = tu_tensor("E", "ds", 2, (int64_t[]){2, 1}, Ev);
  tj_tensor *F = tu_tensor("F", "dd", 2, (int64_t[]){1, 2}, Fv);
  tj_tensor *A = tu_tensor("A", "dd", 2, (int64_t[]){2, 2}, (const double[]){1, 1, 1, 1});
  tj_tensor *ops[] = {A, B, C, D, E, F};
  tj_kernel *k;
  OK(tj_compile(cx, "A(i,j) += B(i,k) * C(k,j) - E(i,l) * F(l,j) + D(i,j)", ops, 6,
                "sequence()", NULL, &k));
  char *cin = stage(k, TJ_STAGE_CIN);
  ck_assert_msg(strstr(cin, "sequence(forall(i, forall(j, A(i,j) += D(i,j))), sequence(") &&
                strstr(cin, "A(i,j) += -(E(i,l) * F(l,j))"), "%s", cin);
  free(cin);
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect_values(A, (const double[]){12, 22, 35, 44}, 4, "+=");
  tj_kernel_free(k);
  OK(tj_compile(cx, "A(i,j) = B(i,k) * C(k,j) - E(i,l) * F(l,j) + D(i,j)", ops, 6,
                "sequence() method(loops) parallelize(i)", NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  expect_values(A, (const double[]){11, 21, 34, 43}, 4, "=");
  tj_tensor *F2 = tu_tensor("F", "dd", 2, (int64_t[]){1, 2}, (const double[]){0, 1});
  tj_tensor *ops2[] = {A, B, C, D, E, F2};   /* E F = [[0, 1], [0, 2]] */
  OK(tj_kernel_run(k, TJ_EVALUATE, ops2, 6));
  expect_values(A, (const double[]){14, 24, 40, 49}, 4, "other F");
  tj_tensor_free(F2);
  tj_tensor_free(A), tj_tensor_free(B), tj_tensor_free(C), tj_tensor_free(D);
  tj_tensor_free(E), tj_tensor_free(F);
  tj_context_free(cx);
}
END_TEST

/* i32: exact, by the loops (GETT takes floats only). */
START_TEST(test_int32) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  const char *names[] = {"A", "B", "C", "D"};
  const int64_t dims[][2] = {{2, 2}, {2, 3}, {3, 2}, {2, 2}};
  const double *vals[] = {NULL, Bv, Cv, Dv};
  tj_tensor *t[4];
  for (int q = 0; q < 4; q++) {
    OK(tj_tensor_new(names[q], TJ_I32, 2, dims[q], NULL, &t[q]));
    for (int e = 0; vals[q] && e < dims[q][0] * dims[q][1]; e++)
      OK(tj_tensor_insert(t[q], (int64_t[]){e / dims[q][1], e % dims[q][1]}, vals[q][e]));
    OK(tj_tensor_pack(t[q]));
  }
  tj_kernel *k;
  OK(tj_compile(cx, "A(i,j) = D(i,j) - B(i,k) * C(k,j)", t, 4, "sequence()", NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  const int32_t want[] = {6, 15, 20, 29};
  for (int q = 0; q < 4; q++) {
    int32_t v;
    OK(tj_tensor_get_i32(t[0], (int64_t[]){q / 2, q % 2}, &v));
    ck_assert_int_eq(v, want[q]);
  }
  for (int q = 0; q < 4; q++) tj_tensor_free(t[q]);
  tj_context_free(cx);
}
END_TEST

typedef struct Refusal {
  const char *expr, *sched, *semiring, *afmt, *msg;
  tj_status st;
} Refusal;

static const Refusal refusals[] = {
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "sequence()", "min.plus", "dd",
     "sequence(): under a semiring the output's update is its add, not +", TJ_ERR_UNSUPPORTED},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "sequence()", NULL, "ds",
     "sequence(): the output is sparse (its pattern would be assembled twice)",
     TJ_ERR_UNSUPPORTED},
    {"A(i,j) = reduce(min, k, B(i,k) * C(k,j)) + D(i,j)", "sequence()", NULL, "dd",
     "sequence(): the term reducing over k reduces by min, but the statements after the "
     "first update the output by +", TJ_ERR_UNSUPPORTED},
    {"A(i,j) = B(i,k) * C(k,j)", "sequence()", NULL, "dd",
     "sequence(): the right-hand side is not a sum or difference of terms", TJ_ERR_UNSUPPORTED},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,k) * C(k,j)", "sequence()", NULL, "dd",
     "sequence(): an index is summed over the whole right-hand side", TJ_ERR_UNSUPPORTED},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "sequence() split(x, x0, x1, 2)", NULL, "dd",
     "sequence(): no statement of the sequence has the loops of split(x,x0,x1,2)",
     TJ_ERR_INVALID},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "sequence() precompute(B(i,k) * D(k,j), {j}, w)",
     NULL, "dd", "sequence(): no statement of the sequence has the subexpression of "
     "precompute(B(i,k) * D(k,j), {j}, w)", TJ_ERR_INVALID},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "sequence() nosequence()", NULL, "dd",
     "sequence() and nosequence() in one schedule", TJ_ERR_INVALID},
};

START_TEST(test_refusals) {
  const Refusal *r = &refusals[_i];
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *B = tu_tensor("B", "dd", 2, (int64_t[]){2, 2}, Dv);
  tj_tensor *C = tu_tensor("C", "dd", 2, (int64_t[]){2, 2}, Dv);
  tj_tensor *D = tu_tensor("D", "dd", 2, (int64_t[]){2, 2}, Dv);
  tj_tensor *A = tu_tensor("A", r->afmt, 2, (int64_t[]){2, 2}, NULL);
  tj_tensor *ops[] = {A, B, C, D};
  tj_options o = tj_options_default();
  o.semiring = r->semiring;
  tj_kernel *k;
  ck_assert_int_eq(tj_compile(cx, r->expr, ops, 4, r->sched, &o, &k), r->st);
  ck_assert_msg(strstr(tj_last_error(), r->msg), "%s: %s", r->expr, tj_last_error());
  /* denied, each compiles as one statement */
  OK(tj_compile(cx, r->expr, ops, 4,
                strstr(r->sched, "split") ? "nosequence() split(i, i0, i1, 2)" : "nosequence()",
                &o, &k));
  char *cin = stage(k, TJ_STAGE_CIN);
  ck_assert_msg(!strstr(cin, "sequence("), "%s", cin);
  free(cin);
  tj_tensor_free(A), tj_tensor_free(B), tj_tensor_free(C), tj_tensor_free(D);
  tj_context_free(cx);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("sequence");
  TCase *tc = tcase_create("sequence");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_gemm_plus_matrix, 0, (int)(sizeof ways / sizeof *ways));
  tcase_add_test(tc, test_default_large);
  tcase_add_test(tc, test_gett_statement);
  tcase_add_test(tc, test_residual_csr);
  tcase_add_test(tc, test_two_threads_by_hand);
  tcase_add_test(tc, test_three_terms);
  tcase_add_test(tc, test_int32);
  tcase_add_loop_test(tc, test_refusals, 0, (int)(sizeof refusals / sizeof *refusals));
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
