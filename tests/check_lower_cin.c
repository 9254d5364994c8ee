/* Lowering reads its statement from the concrete index notation alone
 * (issue 14): kernels lowered after the Assignment's statement fields are
 * poisoned (lhs, rhs NULL; +=, the root operator, the semiring changed;
 * only the operand table kept) compute the right values, run by the
 * loop-IR interpreter; the statement lower_nest folds from the notation is
 * the checked rhs; and a notation edited by hand lowers as edited. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/notation.h"
#include "lower/lir_interp.h"
#include "lower/lower.h"
#include "util/decls.h"

typedef struct Case {
  Arena a;
  Diag d;
  Assignment *as;
  LowerPlan plan;
  LowerOptions opt;
  Cin *cin;   /* what is lowered */
} Case;

/* as planned under the schedule text sched (may be NULL) as the driver
 * does: the notation, the plan and options, and the notation rewritten to
 * the plan (returned: what is lowered). */
static Cin *plan_stmt(Case *c, Assignment *as, const char *sched, LowerPlan *p, LowerOptions *o) {
  Schedule s = {0};
  if (sched) ck_assert_msg(nt_schedule_parse(sched, &s, &c->a, &c->d), "%s", c->d.msg);
  ScheduleSwitches sw = {0};
  memset(o, 0, sizeof *o);
  Cin *cin = lower_plan_schedule(&c->a, as, &s, &sw, p, o, &c->d);
  ck_assert_msg(cin != NULL, "%s", c->d.msg);
  cin = lower_plan_notation(&c->a, p, cin, &c->d);
  ck_assert_msg(cin != NULL, "%s", c->d.msg);
  return cin;
}

static void plan_case(Case *c, const char *expr, const char *const *specs, int n,
                      const char *sched) {
  arena_init(&c->a);
  diag_init(&c->d);
  c->as = checked_assignment(&c->a, &c->d, expr, specs, n);
  c->cin = plan_stmt(c, c->as, sched, &c->plan, &c->opt);
}

/* The statement fields of as overwritten once its notation is made: a
 * lowering that read them would crash or compute something else. */
static void poison(Assignment *as) {
  as->lhs = as->rhs = NULL;
  as->accumulate = !as->accumulate;
  as->root_op = OP_MUL;
  as->root_def = NULL;
  as->semiring = nt_semiring("min.plus");
  as->nroot_sums = 0;
}

static LirKernel *lowered(Case *c) {
  LowerInput in = {c->cin, lower_operands(c->as), &c->plan, &c->opt};
  LirKernel *k = lower_kernel(&c->a, &in, PHASE_EVALUATE, "evaluate", &c->d);
  ck_assert_msg(k != NULL, "%s", c->d.msg);
  ck_assert_msg(lir_verify(k, &c->d), "%s", c->d.msg);
  return k;
}

/* ---- storage: a 3x3 CSR matrix, dense vectors and matrices ---- */

/* A = [1 0 2; 0 3 0; 4 0 5] */
static int32_t a_pos[] = {0, 2, 3, 5}, a_crd[] = {0, 2, 1, 0, 2};
static double a_vals[] = {1, 2, 3, 4, 5};
static double x_vals[] = {1, 2, 3}, b_vals[] = {10, 20, 30};

static tj_storage csr3(void) {
  tj_storage s = {.order = 2, .dtype = TJ_F64, .pos_width = 4, .crd_width = 4};
  s.dims[0] = s.dims[1] = 3;
  s.map[0].dim = 0, s.map[1].dim = 1;
  s.levels[0] = (tj_level_storage){.kind = TJ_LVL_DENSE, .size = 3};
  s.levels[1] = (tj_level_storage){.kind = TJ_LVL_COMPRESSED, .size = 3, .pos = a_pos,
                                   .crd = a_crd, .pos_len = 4, .crd_len = 5};
  s.vals = a_vals, s.vals_len = s.vals_cap = 5;
  s.foreign = TJ_FOREIGN_POS(1) | TJ_FOREIGN_CRD(1) | TJ_FOREIGN_VALS;
  return s;
}

/* A dense row-major tensor of order 1 or 2 over vals (NULL: an output the
 * kernel allocates). */
static tj_storage dense(int order, int64_t n0, int64_t n1, double *vals) {
  tj_storage s = {.order = order, .dtype = TJ_F64, .pos_width = 4, .crd_width = 4};
  s.dims[0] = n0, s.dims[1] = n1;
  for (int l = 0; l < order; l++) {
    s.map[l].dim = l;
    s.levels[l] = (tj_level_storage){.kind = TJ_LVL_DENSE, .size = s.dims[l]};
  }
  if (vals) {
    s.vals = vals, s.vals_len = s.vals_cap = order == 1 ? n0 : n0 * n1;
    s.foreign = TJ_FOREIGN_VALS;
  }
  return s;
}

/* Runs k on ops and checks the output's n values against want. */
static void expect(const LirKernel *k, tj_storage **ops, const double *want, int n) {
  Diag d;
  diag_init(&d);
  ck_assert_msg(lir_interp(k, ops, &d) == 0, "%s", d.msg);
  const double *got = ops[0]->vals;
  for (int q = 0; q < n; q++)
    ck_assert_msg(got[q] == want[q], "entry %d: %g, want %g", q, got[q], want[q]);
  if (!(ops[0]->foreign & TJ_FOREIGN_VALS)) free(ops[0]->vals);
}

static const char *spmv_specs[] = {"y/-/3", "A/ds/3,3", "x/-/3"};
static const char *residual_specs[] = {"y/-/3", "b/-/3", "A/ds/3,3", "x/-/3"};

/* y = A x into y = 0 (the statement's `=` zeroes y, its `+=` would not:
 * poison() flips it). */
START_TEST(spmv_poisoned) {
  Case c;
  plan_case(&c, "y(i) = A(i,j) * x(j)", spmv_specs, 3, NULL);
  poison(c.as);
  LirKernel *k = lowered(&c);
  double yv[3] = {-7, -7, -7};
  tj_storage y = dense(1, 3, 0, yv), a = csr3(), x = dense(1, 3, 0, x_vals);
  tj_storage *ops[] = {&y, &a, &x};
  expect(k, ops, (const double[]){7, 6, 19}, 3);
  arena_free(&c.a);
}
END_TEST

/* y(i) += A(i,j) * x(j) keeps y's contents: the notation says so. */
START_TEST(spmv_accumulate_poisoned) {
  Case c;
  plan_case(&c, "y(i) += A(i,j) * x(j)", spmv_specs, 3, NULL);
  poison(c.as);
  LirKernel *k = lowered(&c);
  double yv[3] = {100, 200, 300};
  tj_storage y = dense(1, 3, 0, yv), a = csr3(), x = dense(1, 3, 0, x_vals);
  tj_storage *ops[] = {&y, &a, &x};
  expect(k, ops, (const double[]){107, 206, 319}, 3);
  arena_free(&c.a);
}
END_TEST

/* The residual's sum is a where() of a temp in the notation; with
 * precompute(A(i,j) * x(j), j, w) a workspace's where inside it. */
static const char *const residual_scheds[] = {NULL, "precompute(A(i,j) * x(j), j, w)"};

START_TEST(residual_poisoned) {
  Case c;
  plan_case(&c, "y(i) = b(i) - A(i,j) * x(j)", residual_specs, 4, residual_scheds[_i]);
  poison(c.as);
  LirKernel *k = lowered(&c);
  tj_storage y = dense(1, 3, 0, NULL), b = dense(1, 3, 0, b_vals), a = csr3(),
             x = dense(1, 3, 0, x_vals);
  tj_storage *ops[] = {&y, &b, &a, &x};
  expect(k, ops, (const double[]){3, 14, 11}, 3);
  arena_free(&c.a);
}
END_TEST

/* A subexpression's workspace over {i, j} that takes the sum over k:
 * where(forall(i, forall(j, A(i,j) = w(i,j) + D(i,j))), forall(i, forall(j,
 * forall(k, w(i,j) += B(i,k) * C(k,j))))). */
static double bm[] = {1, 2, 3, 4}, cm[] = {5, 6, 7, 8}, dm[] = {1, 1, 1, 1};
static const double gemm_plus_d[] = {20, 23, 44, 51};
static const char *gemm_specs[] = {"A/-/2,2", "B/-/2,2", "C/-/2,2", "D/-/2,2"};

START_TEST(precompute_sum_poisoned) {
  Case c;
  plan_case(&c, "A(i,j) = B(i,k) * C(k,j) + D(i,j)", gemm_specs, 4,
            "precompute(B(i,k) * C(k,j), {i,j}, w)");
  poison(c.as);
  LirKernel *k = lowered(&c);
  tj_storage o = dense(2, 2, 2, NULL), b = dense(2, 2, 2, bm), cc = dense(2, 2, 2, cm),
             dd = dense(2, 2, 2, dm);
  tj_storage *ops[] = {&o, &b, &cc, &dd};
  expect(k, ops, gemm_plus_d, 4);
  arena_free(&c.a);
}
END_TEST

/* sequence(A = D, A += B C): each statement's notation, its Assignment
 * poisoned, lowered into one kernel. */
START_TEST(sequence_poisoned) {
  Case c;
  arena_init(&c.a);
  diag_init(&c.d);
  Assignment *as =
      checked_assignment(&c.a, &c.d, "A(i,j) = B(i,k) * C(k,j) + D(i,j)", gemm_specs, 4);
  Assignment *parts[NT_SEQ_MAX];
  int n = nt_sequence_split(&c.a, as, parts, &c.d);
  ck_assert_msg(n == 2, "%s", c.d.msg);
  LowerPlan plans[2];
  LowerOptions opts[2];
  LowerInput in[2];
  const GettPlan *g[2] = {NULL, NULL};
  for (int q = 0; q < n; q++) {
    Cin *cin = plan_stmt(&c, parts[q], NULL, &plans[q], &opts[q]);
    in[q] = (LowerInput){cin, lower_operands(parts[q]), &plans[q], &opts[q]};
    poison(parts[q]);
  }
  poison(as);
  LirKernel *k = lower_kernel_seq(&c.a, in, g, n, PHASE_EVALUATE, "evaluate", &c.d);
  ck_assert_msg(k != NULL, "%s", c.d.msg);
  tj_storage o = dense(2, 2, 2, NULL), b = dense(2, 2, 2, bm), cc = dense(2, 2, 2, cm),
             dd = dense(2, 2, 2, dm);
  tj_storage *ops[] = {&o, &b, &cc, &dd};
  expect(k, ops, gemm_plus_d, 4);
  arena_free(&c.a);
}
END_TEST

/* SpGEMM A = B C (CSR) run by the loop-IR interpreter on one row of 80
 * products (past the 64 of the list and the sort): its coordinates are
 * read back from the marks (tj_rt_marked_crd), bounds-checked there.
 * B = [1 2]; C row 0: 1 at j = 0..39, row 1: 1 at j = 30..69, so A's row
 * is 1 at 0..29, 3 at 30..39, 2 at 40..69, ascending. */
START_TEST(spgemm_long_row_interpreted) {
  enum { N = 70 };
  static const char *specs[] = {"A/ds/1,70", "B/ds/1,2", "C/ds/2,70"};
  Case c;
  plan_case(&c, "A(i,j) = B(i,k) * C(k,j)", specs, 3, NULL);
  LirKernel *k = lowered(&c);
  static int32_t b_pos[] = {0, 2}, b_crd[] = {0, 1}, c_pos[] = {0, 40, 80}, c_crd[80];
  static double b_v[] = {1, 2}, c_v[80];
  for (int q = 0; q < 80; q++) c_crd[q] = q < 40 ? q : q - 10, c_v[q] = 1;
  tj_storage b = csr3(), cm = csr3(), a = csr3();
  b.dims[0] = 1, b.dims[1] = 2, b.levels[0].size = 1, b.levels[1].size = 2;
  b.levels[1].pos = b_pos, b.levels[1].crd = b_crd, b.levels[1].pos_len = 2;
  b.levels[1].crd_len = 2, b.vals = b_v, b.vals_len = b.vals_cap = 2;
  cm.dims[0] = 2, cm.dims[1] = N, cm.levels[0].size = 2, cm.levels[1].size = N;
  cm.levels[1].pos = c_pos, cm.levels[1].crd = c_crd, cm.levels[1].pos_len = 3;
  cm.levels[1].crd_len = 80, cm.vals = c_v, cm.vals_len = cm.vals_cap = 80;
  a.dims[0] = 1, a.dims[1] = N, a.levels[0].size = 1, a.levels[1].size = N;
  a.levels[1].pos = a.levels[1].crd = NULL, a.levels[1].pos_len = a.levels[1].crd_len = 0;
  a.vals = NULL, a.vals_len = a.vals_cap = 0, a.foreign = 0;
  tj_storage *ops[] = {&a, &b, &cm};
  Diag d;
  diag_init(&d);
  ck_assert_msg(lir_interp(k, ops, &d) == 0, "%s", d.msg);
  ck_assert_int_eq(a.levels[1].crd_len, N);
  const int32_t *crd = a.levels[1].crd;
  const double *v = a.vals;
  for (int j = 0; j < N; j++) {
    ck_assert_int_eq(crd[j], j);
    ck_assert(v[j] == (j < 30 ? 1 : j < 40 ? 3 : 2));
  }
  free(a.levels[1].pos), free(a.levels[1].crd), free(a.vals);
  arena_free(&c.a);
}
END_TEST

/* The statement lower_nest folds from the notation's assignments (sums
 * back from their temps' where()s, workspaces from their producers) is
 * the checked rhs, under each schedule that makes a where(). */
static const struct {
  const char *expr, *sched;
  const char *specs[4];
  int n;
} folds[] = {
    {"y(i) = b(i) - A(i,j) * x(j)", NULL, {"y/-/3", "b/-/3", "A/ds/3,3", "x/-/3"}, 4},
    {"y(i) = b(i) - A(i,j) * x(j)", "precompute(A(i,j) * x(j), j, w)",
     {"y/-/3", "b/-/3", "A/ds/3,3", "x/-/3"}, 4},
    {"A(i,j) = B(i,k) * C(k,j)", NULL, {"A/ds/3,3", "B/ds/3,3", "C/ds/3,3"}, 3},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "precompute(B(i,k) * C(k,j), {i,j}, w)",
     {"A/-/2,2", "B/-/2,2", "C/-/2,2", "D/-/2,2"}, 4},
    {"y(i) = (B(i,j) + C(i,j)) * x(j)", "precompute(B(i,j) + C(i,j), j, w)",
     {"y/-/3", "B/ds/3,3", "C/ds/3,3", "x/-/3"}, 4},
    {"y(i) = sum(j, A(i,j) * x(j)) + b(i) * reduce(max, k, A(i,k))", NULL,
     {"y/-/3", "A/ds/3,3", "x/-/3", "b/-/3"}, 4},
};

START_TEST(fold_is_the_statement) {
  Case c;
  plan_case(&c, folds[_i].expr, folds[_i].specs, folds[_i].n, folds[_i].sched);
  LoopNest n;
  ck_assert_msg(lower_nest(&c.a, c.cin, &n, &c.d), "%s", c.d.msg);
  char *got = NULL, *want = NULL;
  size_t len;
  FILE *f = open_memstream(&got, &len);
  nt_print_expr(f, n.rhs);
  fclose(f);
  f = open_memstream(&want, &len);
  nt_print_expr(f, c.as->rhs);
  fclose(f);
  ck_assert_msg(nt_expr_equal(n.rhs, c.as->rhs), "folded %s, checked %s", got, want);
  ck_assert(n.lhs == c.as->lhs && n.op == c.as->root_op && n.keeps_old == c.as->accumulate);
  free(got);
  free(want);
  arena_free(&c.a);
}
END_TEST

/* The assignment of SpMV's notation, found under its foralls. */
static Cin *assign_of(Cin *c) {
  while (c->kind == CIN_FORALL) c = c->u.forall.body;
  ck_assert_int_eq(c->kind, CIN_ASSIGN);
  return c;
}

static char *printed(const Cin *c) {
  char *buf = NULL;
  size_t len;
  FILE *f = open_memstream(&buf, &len);
  cin_print(f, c);
  fclose(f);
  return buf;
}

/* A notation edited by hand lowers to the edit: forall(i, forall(j,
 * y(i) += A(i,j) - x(j))) sums A's rows minus x's sum (x dense: every j),
 * and y(i) max= A(i,j) * x(j) takes the largest product of each row. */
START_TEST(edited_notation_lowers_as_edited) {
  Case c;
  plan_case(&c, "y(i) = A(i,j) * x(j)", spmv_specs, 3, NULL);
  Cin *st = assign_of(c.cin);
  Expr *prod = st->u.assign.rhs;
  st->u.assign.rhs = nt_op_node(&c.a, OP_SUB, prod->u.op.a, prod->u.op.b, 0);
  st->u.assign.rhs->dtype = TJ_F64;
  char *t = printed(c.cin);
  ck_assert_str_eq(t, "forall(i, forall(j, y(i) += A(i,j) - x(j)))");
  free(t);
  poison(c.as);
  LirKernel *k = lowered(&c);
  tj_storage y = dense(1, 3, 0, NULL), a = csr3(), x = dense(1, 3, 0, x_vals);
  tj_storage *ops[] = {&y, &a, &x};
  expect(k, ops, (const double[]){3 - 6, 3 - 6, 9 - 6}, 3);

  st->u.assign.rhs = prod;
  st->u.assign.op = OP_MAX;
  t = printed(c.cin);
  ck_assert_str_eq(t, "forall(i, forall(j, y(i) max= A(i,j) * x(j)))");
  free(t);
  k = lowered(&c);
  y = dense(1, 3, 0, NULL);
  expect(k, ops, (const double[]){6, 6, 15}, 3);
  arena_free(&c.a);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("lower_cin");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, spmv_poisoned);
  tcase_add_test(tc, spmv_accumulate_poisoned);
  tcase_add_loop_test(tc, residual_poisoned, 0, 2);
  tcase_add_test(tc, precompute_sum_poisoned);
  tcase_add_test(tc, sequence_poisoned);
  tcase_add_loop_test(tc, fold_is_the_statement, 0, sizeof folds / sizeof *folds);
  tcase_add_test(tc, edited_notation_lowers_as_edited);
  tcase_add_test(tc, spgemm_long_row_interpreted);
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
