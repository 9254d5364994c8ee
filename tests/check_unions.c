/* Wide unions and intersections: sums of k = 2..16 sparse operands (whose
 * merge lattice has 2^k - 1 points) are lowered as one merged loop above
 * the lattice threshold. Differential tests against the reference
 * interpreter for unions, intersections and mixes into dense and sparse
 * outputs; values computed by hand for k = 7; the lattice and merged paths
 * and the workspace scattered term by term (lower/union_terms.c) forced
 * on the same expressions (TJ_WIDE_UNION_THRESHOLD, TJ_SCATTER_UNION_MIN);
 * golden shapes of the merged and scattered loops; the limits on operands
 * and accesses.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/kernel_check.h"
#include "util/golden.h"

/* "<lhs> = T1<idx> <op> T2<idx> ... Tk<idx>" into buf. */
static void chain(char *buf, size_t n, const char *lhs, const char *t, int k,
                  const char *idx, const char *op) {
  int w = snprintf(buf, n, "%s =", lhs);
  for (int q = 1; q <= k; q++)
    w += snprintf(buf + w, n - (size_t)w, "%s %s%d%s", q > 1 ? op : "", t, q, idx);
}

/* "T1:fmt T2:fmt ... Tk:fmt <rest>", formats cycling through fmts. */
static void formats(char *buf, size_t n, const char *t, int k, const char *const *fmts,
                    const char *rest) {
  int w = 0, nf = 0;
  while (fmts[nf]) nf++;
  for (int q = 1; q <= k; q++)
    w += snprintf(buf + w, n - (size_t)w, "%s%d:%s ", t, q, fmts[(q - 1) % nf]);
  snprintf(buf + w, n - (size_t)w, "%s", rest);
}

static void run(tj_context *cx, const KcCase *c) {
  KcOutcome o;
  ck_assert_msg(kc_run(cx, c, &o) == KC_PASS, "%s", o.msg);
}

/* Three seeds per shape: random density, random per operand (0 and 1
 * included: empty and full operands), odd rows empty. */
static void run_seeds(const char *expr, const char *fmts, const char *extents,
                      uint64_t seed, unsigned flags) {
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  KcCase cases[] = {
    {.expr = expr, .formats = fmts, .extents = extents, .density = 0.2,
     .seed = seed, .flags = flags},
    {.expr = expr, .formats = fmts, .extents = extents, .density = -1,
     .seed = seed + 1, .flags = flags & ~(unsigned)KC_SPLIT},
    {.expr = expr, .formats = fmts, .extents = extents, .density = 0.3,
     .pattern = KC_EMPTY_ROWS, .seed = seed + 2, .flags = flags & ~(unsigned)KC_SPLIT},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) run(cx, &cases[q]);
  tj_context_free(cx);
}

#define KMIN 2
#define KMAX 16

static const char *const VEC_S[] = {"s", NULL};
static const char *const VEC_SU[] = {"s", "s", "d", "s", NULL};
static const char *const MAT_MIX[] = {"ds", "ss", "uq", NULL};

/* a(i) = b1(i) + ... + bk(i), sparse vectors into sparse and dense. */
START_TEST(vector_unions) {
  int k = _i;
  char e[512], f[512];
  chain(e, sizeof e, "a(i)", "b", k, "(i)", "+");
  formats(f, sizeof f, "b", k, VEC_S, "a:s");
  run_seeds(e, f, "i=40", 100u * (uint64_t)k, KC_SPLIT);
  formats(f, sizeof f, "b", k, VEC_S, "a:d");
  run_seeds(e, f, "i=40", 200u * (uint64_t)k, 0);
}
END_TEST

/* A(i,j) = B1 + ... + Bk over CSR, DCSR and COO into CSR, dense, DCSR. */
START_TEST(matrix_unions) {
  int k = _i;
  char e[512], f[512];
  chain(e, sizeof e, "A(i,j)", "B", k, "(i,j)", "+");
  const char *outs[] = {"A:ds", "A:dd", "A:ss"};
  for (int o = 0; o < 3; o++) {
    formats(f, sizeof f, "B", k, MAT_MIX, outs[o]);
    run_seeds(e, f, "i=12 j=15", 300u * (uint64_t)k + (uint64_t)o * 10, o != 1 ? KC_SPLIT : 0);
  }
}
END_TEST

/* A(i,j) = B1 * ... * Bk: one lattice point, kept on the lattice path. */
START_TEST(matrix_intersections) {
  int k = _i;
  char e[512], f[512];
  chain(e, sizeof e, "A(i,j)", "B", k, "(i,j)", "*");
  formats(f, sizeof f, "B", k, MAT_MIX, "A:ds");
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  KcCase c = {.expr = e, .formats = f, .extents = "i=8 j=9", .density = 0.9,
              .seed = 500u + (uint64_t)k, .flags = KC_SPLIT};
  run(cx, &c);
  c.density = 0.5;
  c.pattern = KC_EMPTY_ROWS;
  c.seed++;
  c.flags = 0;
  run(cx, &c);
  tj_context_free(cx);
}
END_TEST

typedef struct Mix {
  const char *expr, *formats, *extents;
  unsigned flags;
} Mix;

static const Mix MIXES[] = {
  {"A(i,j) = (B1(i,j) + B2(i,j) + B3(i,j) + B4(i,j) + B5(i,j) + B6(i,j)) * C(i,j)",
   "B1:ds B2:ds B3:ss B4:ds B5:uq B6:ds C:ds A:ds", "i=10 j=12", KC_SPLIT},
  {"A(i,j) = (B1(i,j) + B2(i,j) + B3(i,j) + B4(i,j) + B5(i,j) + B6(i,j)) * C(i,j)",
   "B1:ds B2:ds B3:ss B4:ds B5:uq B6:ds C:dd A:dd", "i=10 j=12", 0},
  {"a(i) = (b1(i) + b2(i) + b3(i) + b4(i) + b5(i) + b6(i) + b7(i) + b8(i)) * c(i)",
   "b1:s b2:s b3:s b4:s b5:s b6:s b7:s b8:s c:s a:s", "i=50", KC_SPLIT},
  {"A(i,j) = B1(i,j) * B2(i,j) * B3(i,j)", "B1:ds B2:ss B3:ds A:ds", "i=9 j=9", KC_SPLIT},
  {"a(i) = b1(i) * b2(i) * b3(i)", "b1:s b2:s b3:s a:s", "i=30", 0},
  /* a formula with ANDs of ORs: (3 * 3 * 3 lattice points) */
  {"a(i) = (b1(i) + b2(i)) * (b3(i) + b4(i)) * (b5(i) - b6(i))",
   "b1:s b2:s b3:s b4:s b5:s b6:s a:s", "i=40", KC_SPLIT},
  {"A(i,j) = (B1(i,j) + B2(i,j)) * (B3(i,j) + B4(i,j)) * (B5(i,j) + B6(i,j))",
   "B1:ds B2:ss B3:ds B4:uq B5:ds B6:ds A:ss", "i=9 j=11", KC_SPLIT},
  /* a dense operand or a literal in the union: the merged loop covers the range */
  {"a(i) = b1(i) + b2(i) + b3(i) + b4(i) + b5(i) + b6(i) + b7(i) + d(i)",
   "b1:s b2:s b3:s b4:s b5:s b6:s b7:s a:s", "i=30", KC_SPLIT},
  {"A(i,j) = B1(i,j) + B2(i,j) + B3(i,j) + B4(i,j) + B5(i,j) + D(i,j)",
   "B1:ds B2:ss B3:ds B4:uq B5:ds A:ds", "i=8 j=9", KC_SPLIT},
  {"a(i) = b1(i) + b2(i) + b3(i) + b4(i) + b5(i) + b6(i) + 2", 
   "b1:s b2:s b3:s b4:s b5:s b6:s a:d", "i=30", 0},
  /* reductions below the merged loop: into a temp, and through a workspace */
  {"y(i) = (B1(i,j) + B2(i,j) + B3(i,j) + B4(i,j) + B5(i,j)) * x(j)",
   "B1:ds B2:ss B3:ds B4:uq B5:ds x:d y:d", "i=10 j=14", 0},
  {"y(i) = (B1(i,j) + B2(i,j) + B3(i,j) + B4(i,j) + B5(i,j)) * x(j)",
   "B1:ds B2:ds B3:ds B4:ds B5:ds x:s y:s", "i=10 j=14", 0},
  {"A(i,j) = (B1(i,k) + B2(i,k) + B3(i,k) + B4(i,k) + B5(i,k)) * C(k,j)",
   "B1:ds B2:ds B3:ss B4:ds B5:ds C:ds A:ds", "i=7 j=8 k=9", KC_SPLIT},
  /* a missed operand's dense child level: sd rows, guarded value loads */
  {"A(i,j) = B1(i,j) + B2(i,j) + B3(i,j) + B4(i,j) + B5(i,j)",
   "B1:sd B2:sd B3:ds B4:sd B5:ss A:ds", "i=12 j=7", KC_SPLIT},
  /* order 3, merged at two depths */
  {"A(i,j,k) = B1(i,j,k) + B2(i,j,k) + B3(i,j,k) + B4(i,j,k) + B5(i,j,k)",
   "B1:sss B2:sss B3:dss B4:sss B5:uqq A:sss", "i=5 j=6 k=7", KC_SPLIT},
};
#define NMIXES ((int)(sizeof MIXES / sizeof *MIXES))

START_TEST(mixes) {
  const Mix *m = &MIXES[_i];
  run_seeds(m->expr, m->formats, m->extents, 700u + 10u * (uint64_t)_i, m->flags);
}
END_TEST

/* The three lowerings of a union, each forced: the merge lattice, the
 * merged co-iteration, and the workspace scattered term by term. */
static void force_path(int path) {
  setenv("TJ_WIDE_UNION_THRESHOLD", path == 1 ? "64" : "1", 1);
  setenv("TJ_SCATTER_UNION_MIN", path == 2 ? "2" : "1000", 1);
}

static void default_paths(void) {
  unsetenv("TJ_WIDE_UNION_THRESHOLD");
  unsetenv("TJ_SCATTER_UNION_MIN");
}

/* The same small unions (k = 2..4, and 8 and 16 but on the lattice), a
 * difference, products of sums and a three-way intersection under each
 * path. */
START_TEST(paths_agree) {
  force_path(_i);
  char e[512], f[512];
  for (int k = 2; k <= 16; k += k < 4 ? 1 : 4) {
    if (k > 4 && _i == 1) break;
    chain(e, sizeof e, "A(i,j)", "B", k, "(i,j)", "+");
    formats(f, sizeof f, "B", k, MAT_MIX, "A:ds");
    run_seeds(e, f, "i=10 j=13", 900u + (uint64_t)k, KC_SPLIT);
    chain(e, sizeof e, "a(i)", "b", k, "(i)", "+");
    formats(f, sizeof f, "b", k, VEC_SU, "a:s");
    run_seeds(e, f, "i=30", 950u + (uint64_t)k, KC_SPLIT);
    chain(e, sizeof e, "A(i,j)", "B", k, "(i,j)", "-");
    formats(f, sizeof f, "B", k, MAT_MIX, "A:ss");
    run_seeds(e, f, "i=10 j=13", 970u + (uint64_t)k, KC_SPLIT);
  }
  run_seeds("a(i) = (b1(i) + b2(i)) * b3(i)", "b1:s b2:s b3:s a:s", "i=30", 990, KC_SPLIT);
  run_seeds("A(i,j) = B1(i,j) * (B2(i,j) - B3(i,j) + 2 * B4(i,j)) + -B5(i,j)",
            "B1:ds B2:ss B3:ds B4:uq B5:ds A:ds", "i=11 j=9", 991, KC_SPLIT);
  run_seeds("A(i,j) = (B1(i,j) + B2(i,j)) * (B3(i,j) + B4(i,j)) * (B5(i,j) + B6(i,j))",
            "B1:ds B2:ss B3:ds B4:uq B5:ds B6:ds A:ds", "i=9 j=11", 992, KC_SPLIT);
  run_seeds("A(i,j) = B1(i,j) * B2(i,j) * B3(i,j)", "B1:ds B2:ss B3:ds A:ds", "i=9 j=9", 993,
            KC_SPLIT);
  for (int m = 0; m < NMIXES && _i == 0; m++) { /* mixes: the default (scattered) there */
    const Mix *x = &MIXES[m];
    run_seeds(x->expr, x->formats, x->extents, 1700u + 10u * (uint64_t)m, x->flags);
  }
  default_paths();
}
END_TEST

/* ---- hand-computed values ---- */

static tj_tensor *vec(const char *name, const char *fmt, int64_t n, const int64_t *at,
                      const double *v, int nnz) {
  tj_format f;
  ck_assert_int_eq(tj_format_parse(fmt, &f), TJ_OK);
  tj_tensor *t = NULL;
  ck_assert_int_eq(tj_tensor_new(name, TJ_F64, 1, &n, &f, &t), TJ_OK);
  for (int q = 0; q < nnz; q++) ck_assert_int_eq(tj_tensor_insert(t, &at[q], v[q]), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  return t;
}

/* a(i) = b1(i) + ... + b7(i) over 10 coordinates: b_q stores q at q - 1
 * and 10 * q at 9 (b7 nothing else), b1 also 0.5 at 4; coordinates 7 and
 * 8 are stored by none, so the sparse output holds 0..6 and 9 only. */
START_TEST(seven_by_hand) {
  const char *out_fmt = _i % 2 ? "d" : "s";
  force_path(_i / 2 ? 2 : 0);   /* 0, 1: merged; 2, 3: scattered */
  tj_tensor *ops[8];
  char name[8];
  for (int q = 1; q <= 7; q++) {
    int64_t at[3] = {q - 1, 9, 4};
    double v[3] = {q, 10.0 * q, 0.5};
    snprintf(name, sizeof name, "b%d", q);
    ops[q] = vec(name, "s", 10, at, v, q == 1 ? 3 : 2);
  }
  ops[0] = vec("a", out_fmt, 10, NULL, NULL, 0);
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_kernel *k = NULL;
  const char *expr = "a(i) = b1(i) + b2(i) + b3(i) + b4(i) + b5(i) + b6(i) + b7(i)";
  ck_assert_msg(tj_compile(cx, expr, ops, 8, NULL, NULL, &k) == TJ_OK, "%s", tj_last_error());
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
  const double want[10] = {1, 2, 3, 4, 5.5, 6, 7, 0, 0, 280};
  for (int64_t i = 0; i < 10; i++) {
    double got = -1;
    ck_assert_int_eq(tj_tensor_get(ops[0], &i, &got), TJ_OK);
    ck_assert_msg(got == want[i], "a(%lld) = %g, want %g", (long long)i, got, want[i]);
  }
  if (_i % 2 == 0) ck_assert_int_eq(tj_tensor_nnz(ops[0]), 8);
  default_paths();
  tj_context_free(cx);
  for (int q = 0; q <= 7; q++) tj_tensor_free(ops[q]);
}
END_TEST

/* ---- golden shape ---- */

/* The printed compute stage of a(i) = b1(i) + ... + bk(i) (malloc'd). */
static char *printed(int k, tj_stage stage) {
  tj_tensor *ops[KMAX + 1];
  char name[8], e[512];
  for (int q = 0; q <= k; q++) {
    snprintf(name, sizeof name, q ? "b%d" : "a", q);
    ops[q] = vec(name, "s", 10, NULL, NULL, 0);
  }
  chain(e, sizeof e, "a(i)", "b", k, "(i)", "+");
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_kernel *kn = NULL;
  ck_assert_msg(tj_compile(cx, e, ops, k + 1, NULL, NULL, &kn) == TJ_OK, "%s", tj_last_error());
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_int_eq(tj_kernel_print(kn, stage, f), TJ_OK);
  fclose(f);
  tj_context_free(cx);
  for (int q = 0; q <= k; q++) tj_tensor_free(ops[q]);
  return buf;
}

START_TEST(merged_shape) {
  setenv("TJ_SCATTER_UNION_MIN", "1000", 1);
  char *t = printed(3, TJ_STAGE_COMPUTE);   /* 7 points: the lattice */
  ck_assert_int_eq(count(t, "while (p"), 7);
  free(t);
  t = printed(8, TJ_STAGE_COMPUTE);         /* 255 points: one merged loop */
  ck_assert_int_eq(count(t, "while ("), 1);
  HAS(t, "while (((((((pb10 < pb10_end || pb20 < pb20_end) ||");
  HAS(t, "bool pb80_hit = b80 == i;");
  HAS(t, "pb80 = pb80_hit ? pb80_next : pb80;");
  ck_assert_int_eq(count(t, "else if"), 0);
  free(t);
  t = printed(16, TJ_STAGE_LATTICE);
  HAS(t, "i: merged over [b1 b2 b3 b4 b5 b6 b7 b8 b9 b10 b11 b12 b13 b14 b15 b16] "
         "(up to 65535 lattice points)");
  free(t);
  default_paths();
}
END_TEST

/* By default (LOWER_SCATTER_MIN_SPARSE_SUM) a sparse output of a wide union is
 * scattered term by term: one plain loop per operand, no while loop; the
 * compute phase gathers the row along the assembled coordinates. */
START_TEST(scattered_shape) {
  default_paths();
  char *t = printed(8, TJ_STAGE_COMPUTE);
  ck_assert_int_eq(count(t, "while ("), 0);
  ck_assert_int_eq(count(t, "/* scatter one term into the workspace */"), 8);
  ck_assert_int_eq(count(t, "] += b"), 8);
  HAS(t, "] += b8_val;");
  HAS(t, "a_vals[q] = ws_vals[i_");
  free(t);
  t = printed(2, TJ_STAGE_LATTICE);         /* below the threshold: the lattice */
  HAS(t, "i: [b1 b2] [b1] [b2]");
  free(t);
  t = printed(3, TJ_STAGE_LATTICE);         /* a plain sum into a sparse output: still */
  HAS(t, "i: [b1 b2 b3] [b1 b3] [b2 b3] [b1 b2] [b1] [b2] [b3]");
  free(t);
  t = printed(4, TJ_STAGE_LATTICE);         /* LOWER_SCATTER_MIN_SPARSE_SUM */
  HAS(t, "i: scattered into a workspace, 4 terms: {[b1]} {[b2]} {[b3]} {[b4]}");
  free(t);
}
END_TEST

/* ---- limits ---- */

START_TEST(too_many_accesses) {
  char e[2048];
  int w = snprintf(e, sizeof e, "a(i) =");
  for (int q = 0; q < 64; q++) w += snprintf(e + w, sizeof e - (size_t)w, "%s b(i)", q ? " +" : "");
  tj_tensor *ops[2] = {vec("a", "s", 5, NULL, NULL, 0), vec("b", "s", 5, NULL, NULL, 0)};
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_compile(cx, e, ops, 2, NULL, NULL, &k), TJ_ERR_UNSUPPORTED);
  ck_assert_msg(strstr(tj_last_error(), "more than 63 tensor accesses (LW_MAX_ACCESS)"), "%s",
                tj_last_error());
  e[strlen(e) - strlen(" + b(i)")] = 0;   /* 63 accesses: fine */
  ck_assert_msg(tj_compile(cx, e, ops, 2, NULL, NULL, &k) == TJ_OK, "%s", tj_last_error());
  tj_context_free(cx);
  tj_tensor_free(ops[0]);
  tj_tensor_free(ops[1]);
}
END_TEST

START_TEST(too_many_operands) {
  tj_tensor *ops[34];
  char name[8];
  for (int q = 0; q < 34; q++) {
    snprintf(name, sizeof name, q ? "b%d" : "a", q);
    ops[q] = vec(name, "s", 5, NULL, NULL, 0);
  }
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_kernel *k = NULL;
  ck_assert_int_eq(tj_compile(cx, "a(i) = b1(i)", ops, 34, NULL, NULL, &k), TJ_ERR_INVALID);
  ck_assert_msg(strstr(tj_last_error(), "more than 32 operands given (NT_MAX_TENSORS)"), "%s",
                tj_last_error());
  tj_context_free(cx);
  for (int q = 0; q < 34; q++) tj_tensor_free(ops[q]);
}
END_TEST

static Suite *unions_suite(void) {
  Suite *s = suite_create("unions");
  TCase *tc = tcase_create("unions");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, vector_unions, KMIN, KMAX + 1);
  tcase_add_loop_test(tc, matrix_unions, KMIN, KMAX + 1);
  tcase_add_loop_test(tc, matrix_intersections, KMIN, KMAX + 1);
  tcase_add_loop_test(tc, mixes, 0, NMIXES);
  tcase_add_loop_test(tc, paths_agree, 0, 3);
  suite_add_tcase(s, tc);
  tc = tcase_create("by_hand");
  tcase_add_loop_test(tc, seven_by_hand, 0, 4);
  tcase_add_test(tc, merged_shape);
  tcase_add_test(tc, scattered_shape);
  suite_add_tcase(s, tc);
  tc = tcase_create("limits");
  tcase_add_test(tc, too_many_accesses);
  tcase_add_test(tc, too_many_operands);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(unions_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
