/* Lowering: golden shapes of the generated loop IR (as C), merge lattices,
 * automatic operand conversion, workspaces, and refusals with messages.
 * Values are covered by check_kernels (JIT and interpreter vs reference). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/notation.h"
#include "lower/lower.h"
#include "lower/lowerer.h"
#include "util/decls.h"
#include "util/golden.h"

typedef struct Case {
  Arena a;
  Diag d;
  Assignment *as;
  LowerPlan plan;
  LowerOptions opt;
  Cin *cin;                  /* the notation rewritten to the plan */
} Case;

static bool plan(Case *c, const char *expr, const char *const *specs, int n,
                 bool want_ok) {
  arena_init(&c->a);
  diag_init(&c->d);
  memset(&c->opt, 0, sizeof c->opt);
  c->as = checked_assignment(&c->a, &c->d, expr, specs, n);
  Cin *cin = cin_from_assignment(&c->a, c->as, NULL, &c->d);
  ck_assert_ptr_nonnull(cin);
  IndexVar *want[NT_MAX_INDICES];
  int nw = cin_loop_order(cin, want, NT_MAX_INDICES);
  bool ok = lower_plan(c->as, want, nw, false, &c->plan, &c->d);
  if (ok) c->cin = lower_plan_notation(&c->a, &c->plan, cin, &c->d);
  if (want_ok) ck_assert_msg(ok && c->cin, "%s", c->d.msg);
  return ok;
}

/* The printed evaluate kernel (malloc'd). */
static char *lowered(Case *c, LowerPhase ph) {
  LowerInput in = {c->cin, lower_operands(c->as), &c->plan, &c->opt};
  LirKernel *k = lower_kernel(&c->a, &in, ph, "evaluate", &c->d);
  ck_assert_msg(k != NULL, "%s", c->d.msg);
  for (const LowerPass *p = LOWER_PASSES; p->name; p++) p->run(&c->a, k, &c->opt);
  ck_assert_msg(lir_verify(k, &c->d), "%s", c->d.msg);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  lir_print(f, k, 0);
  fclose(f);
  return buf;
}

START_TEST(spmv_csr_shape) {
  Case c;
  const char *s[] = {"y/d/5", "A/ds/5,6", "x/d/6"};
  plan(&c, "y(i) = A(i,j) * x(j)", s, 3, true);
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, "for (int64_t i = 0; i < y_dim0; i++)");
  HAS(t, "int64_t pA1 = (int64_t)A1_pos[pA0];");
  HAS(t, "for (int64_t pA1_1 = pA1; pA1_1 < pA1_end; pA1_1++)");
  HAS(t, "t += A_val * x_val;");
  HAS(t, "y_vals[i] += t;");
  ck_assert_int_eq(count(t, "while ("), 0);
  free(t);
  arena_free(&c.a);
}
END_TEST

START_TEST(sparse_add_three_whiles) {
  Case c;
  const char *s[] = {"A/ds/5,6", "B/ds/5,6", "C/ds/5,6"};
  plan(&c, "A(i,j) = B(i,j) + C(i,j)", s, 3, true);
  char *t = lowered(&c, PHASE_EVALUATE);
  ck_assert_int_eq(count(t, "while (p"), 3);
  HAS(t, "while (pB1 < pB1_end && pC1 < pC1_end)");
  HAS(t, "j = (B1 < C1 ? B1 : C1);");
  /* the cases differ only in the value stored: one store of an add of
   * selects, -0.0 (the add's exact identity) for an absent side */
  HAS(t, "A_vals[pOut1] = (B1 == j ? B_val_1 : -0.0) + (B1 == j ? (C1 == j ? C_val_1 : -0.0) : C_val_1);");
  ck_assert_ptr_null(strstr(t, "else if"));
  HAS(t, "A1_crd[pOut1] = (int32_t)j;");
  /* room for a row's entries (at most both fibers') is made once, before
   * the merge: the three loops append unchecked (merge_room) */
  HAS(t, "if (pOut1 + (pB1_end - pB1) + (pC1_end - pC1) - 1 >= out1_crd_cap)");
  ck_assert_int_eq(count(t, ">= out1_crd_cap)"), 1);
  ck_assert(strstr(t, ">= out1_crd_cap)") < strstr(t, "while (p"));
  /* it grows at once to what the rest of B and C can append, and leaves
   * the new space unzeroed (every appended entry is stored); the first
   * reservation and the positions' (zeroed by the kernel) stay as they were */
  HAS(t, "pOut1 + (B->levels[1].crd_len - pB1) + (C->levels[1].crd_len - pC1)");
  HAS(t, "tj_rt_reserve(A, TJ_ARR_CRD | TJ_ARR_NOZERO, 1, out1_crd_cap)");
  HAS(t, "tj_rt_reserve(A, TJ_ARR_VALS | TJ_ARR_NOZERO, 0, out1_crd_cap)");
  HAS(t, "tj_rt_reserve(A, TJ_ARR_CRD, 1, out1_crd_cap)");
  HAS(t, "tj_rt_reserve(A, TJ_ARR_POS | TJ_ARR_NOZERO, 1, 1 * A_dim0 + 1)");
  free(t);
  /* with a reduction below the merge a value is summed before its store:
   * the merge's growth keeps zeroing */
  Case r;
  const char *s3[] = {"A/ds/5,6", "B/sss/5,6,7", "C/sss/5,6,7"};
  plan(&r, "A(i,j) = B(i,j,k) + C(i,j,k)", s3, 3, true);
  t = lowered(&r, PHASE_EVALUATE);
  ck_assert_ptr_null(strstr(t, "TJ_ARR_VALS | TJ_ARR_NOZERO"));
  ck_assert_ptr_null(strstr(t, "TJ_ARR_CRD | TJ_ARR_NOZERO"));
  free(t);
  arena_free(&r.a);
  /* a lattice where some iterator's coordinate alone computes nothing
   * (B * C + D at B alone) keeps its chain */
  Case d;
  const char *s4[] = {"A/ds/5,6", "B/ds/5,6", "C/ds/5,6", "D/ds/5,6"};
  plan(&d, "A(i,j) = B(i,j) * C(i,j) + D(i,j)", s4, 4, true);
  t = lowered(&d, PHASE_COMPUTE);
  HAS(t, "if (B1 == j && C1 == j && D1 == j)");
  HAS(t, "} else if (D1 == j) {");
  free(t);
  arena_free(&d.a);
  FILE *f = tmpfile();
  LowerInput in = {c.cin, lower_operands(c.as), &c.plan, &c.opt};
  lower_print_lattices(f, &in);
  rewind(f);
  char line[256], all[1024] = "";
  while (fgets(line, sizeof line, f)) strcat(all, line);
  fclose(f);
  HAS(all, "i: [full]");
  HAS(all, "j: [B C] [B] [C]");
  arena_free(&c.a);
}
END_TEST

START_TEST(intersection_one_while) {
  Case c;
  const char *s[] = {"A/ds/5,6", "B/ds/5,6", "C/ds/5,6"};
  plan(&c, "A(i,j) = B(i,j) * C(i,j)", s, 3, true);
  char *t = lowered(&c, PHASE_EVALUATE);
  /* one lattice point: a merge without case chains, emitted for short
   * fibers and between two gallops (one fiber 32x the other) */
  ck_assert_int_eq(count(t, "while (p"), 4);
  ck_assert_int_eq(count(t, "while (lo"), 2);
  ck_assert_int_eq(count(t, "if (B1 == j && C1 == j)"), 2);
  ck_assert_ptr_null(strstr(t, "else if (B1 =="));
  ck_assert_ptr_null(strstr(t, "else if (C1 =="));
  free(t);
  arena_free(&c.a);
}
END_TEST

START_TEST(spgemm_workspace) {
  Case c;
  const char *s[] = {"A/ds/5,6", "B/ds/5,4", "C/ds/4,6"};
  plan(&c, "A(i,j) = B(i,k) * C(k,j)", s, 3, true);
  ck_assert_int_eq(c.plan.ws_depth, 1);
  ck_assert_str_eq(c.plan.order[1]->name, "k");
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, "tj_rt_alloc(");
  HAS(t, "ws_vals[j] += ");
  /* the touched list is A's crd from the row's end on, room made first */
  HAS(t, "if (pOut1 + A_dim1 >= out1_crd_cap)");
  HAS(t, "A1_crd[pOut1 + ws_n] = (int32_t)j;");
  HAS(t, "ws_n += (int64_t)!ws_mark[j];");
  ck_assert_int_eq(count(t, "ws_list"), 0);
  HAS(t, "tj_rt_sort_crd(A1_crd + pOut1, pOut1 + ws_n - pOut1, sizeof *A1_crd)");
  HAS(t, "A_vals[q] = ws_vals[j_1];");
  HAS(t, "tj_rt_free(ws_vals)");
  free(t);
  arena_free(&c.a);
}
END_TEST

START_TEST(transposed_operand_converted) {
  Case c;
  const char *s[] = {"A/ds/5,5", "B/ds/5,5", "C/ds/5,5"};
  plan(&c, "A(i,j) = B(i,j) + C(j,i)", s, 3, true);
  ck_assert(c.plan.convert[2]);
  ck_assert_int_eq(c.plan.fmt[2].mode_order[0], 1);
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, "operand C is converted from ds to ds:1,0");
  free(t);
  arena_free(&c.a);
}
END_TEST

START_TEST(csc_spmv_reorders_not_converts) {
  Case c;
  const char *s[] = {"y/d/5", "A/ds:1,0/5,6", "x/d/6"};
  plan(&c, "y(i) = A(i,j) * x(j)", s, 3, true);
  ck_assert(!c.plan.convert[1]);
  ck_assert_str_eq(c.plan.order[0]->name, "j");
  arena_free(&c.a);
}
END_TEST

START_TEST(spmm_dense_inner_loop_vectorized) {
  Case c;
  const char *s[] = {"C/dd/5,64", "A/ds/5,4", "B/dd/4,64"};
  plan(&c, "C(i,j) = A(i,k) * B(k,j)", s, 3, true);
  ck_assert_str_eq(c.plan.order[1]->name, "k");  /* dense operands walked row-major */
  c.opt.vector_bits = 512;
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, "/* vector(8) */");
  HAS(t, "int64_t j_vend = 0 + (C_dim1 - 0) / 8 * 8;");
  HAS(t, "for (int64_t j = j_vend; j < C_dim1; j++)");
  free(t);
  arena_free(&c.a);
}
END_TEST

START_TEST(parallel_outer_loop_marked) {
  Case c;
  const char *s[] = {"y/d/5", "A/ds/5,6", "x/d/6"};
  plan(&c, "y(i) = A(i,j) * x(j)", s, 3, true);
  c.opt.parallel = true;
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, "/* parallel");
  free(t);
  arena_free(&c.a);
}
END_TEST

static IndexVar *index_of(const Assignment *as, const char *name) {
  for (int v = 0; v < as->nindices; v++)
    if (strcmp(as->indices[v]->name, name) == 0) return as->indices[v];
  ck_abort_msg("no index %s", name);
  return NULL;
}

/* Dense GEMM in the order i, j, k: j becomes an outer vector loop of 4
 * registers (then 1, then scalar) around the k loop, and the parallel i
 * loop runs 4 rows at a time with one C load shared by 4 accumulators. */
/* The lowering's loops come from the concrete notation: the outer foralls,
 * a where's producer loops (sums nested in their scope, a workspace's
 * depth and index), and a shape it cannot emit is refused. */
START_TEST(nest_from_notation) {
  Case c;
  const char *s[] = {"A/ds/5,6", "B/ds/5,4", "C/ds/4,6"};
  plan(&c, "A(i,j) = B(i,k) * C(k,j)", s, 3, true);
  LoopNest n;
  ck_assert_msg(lower_nest(&c.a, c.cin, &n, &c.d), "%s", c.d.msg);
  ck_assert_int_eq(n.nloops, 3);
  ck_assert_int_eq(n.ws_depth, 1);
  ck_assert_str_eq(n.ws_var->name, "j");
  ck_assert_str_eq(n.order[1]->name, "k");
  arena_free(&c.a);
  const char *r[] = {"y/-/5", "b/-/5", "A/ds/5,6", "x/-/6"};
  plan(&c, "y(i) = b(i) - A(i,j) * x(j)", r, 4, true);
  ck_assert(lower_nest(&c.a, c.cin, &n, &c.d));
  ck_assert_int_eq(n.nloops, 2);
  ck_assert_int_eq(n.ws_depth, -1);
  ck_assert_str_eq(n.order[1]->name, "j");
  arena_free(&c.a);
}
END_TEST

START_TEST(dense_gemm_register_blocked) {
  Case c;
  const char *s[] = {"A/dd/64,64", "B/dd/64,64", "C/dd/64,64"};
  plan(&c, "A(i,j) = B(i,k) * C(k,j)", s, 3, true);
  IndexVar *want[] = {index_of(c.as, "i"), index_of(c.as, "j"), index_of(c.as, "k")};
  ck_assert(lower_plan(c.as, want, 3, true, &c.plan, &c.d));
  c.cin = lower_plan_notation(&c.a, &c.plan, c.cin, &c.d); /* the order is a rewrite */
  ck_assert_ptr_nonnull(c.cin);
  c.opt.vector_bits = 512;
  c.opt.parallel = true;
  c.opt.unroll_jam = 4;
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, "for (int64_t i_blk = 0; i_blk < (A_dim0 - 0 + 3) / 4; i_blk++)");
  HAS(t, "if (i_0 + 4 <= A_dim0)");
  HAS(t, "/* vector(32) */");
  HAS(t, "/* vector(8) */");
  HAS(t, "j_blk");  /* cache blocks of 256 columns and 256 of k around the rows */
  HAS(t, " += 256)");
  HAS(t, "for (int64_t k = k_blk");
  HAS(t, "A_vals[(i_0 + 3) * A_dim1 + j] += ");
  ck_assert_int_eq(count(t, "C_vals["), 6);  /* 3 loops (32, 8 lanes, scalar), jammed and not */
  ck_assert_int_eq(count(t, "B_vals["), 15); /* 4 rows per jammed loop, 1 in the last rows */
  free(t);
  arena_free(&c.a);
}
END_TEST

/* TTV's loop over a fiber B(i,j,:) of up to three entries (the default
 * width; four when asked) computes them at clamped positions,
 * branch-free, and loops over longer ones; TTM walks the same fiber once
 * per k (a learnt trip count), and SpMV's rows are a matrix's: both are
 * left alone. */
START_TEST(short_fibers_peeled) {
  Case c;
  const char *v[] = {"A/ss/4,5", "B/sss/4,5,6", "c/d/6"};
  plan(&c, "A(i,j) = B(i,j,k) * c(k)", v, 3, true);
  c.opt.peel = LOWER_PEEL_WIDTH;
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, " > 0 && peel_n_");
  HAS(t, " <= 3) {");
  HAS(t, " + 2 < peel_last_");
  HAS(t, " > 2 ? peel_");
  ck_assert_ptr_null(strstr(t, " + 3 < peel_last_"));
  HAS(t, "} else {");
  HAS(t, "for (int64_t pB2_1 = pB2; pB2_1 < pB2_end; pB2_1++)");
  ck_assert_int_eq(count(t, "c_vals["), 4);   /* three peeled terms and the loop's */
  free(t);
  arena_free(&c.a);
  plan(&c, "A(i,j) = B(i,j,k) * c(k)", v, 3, true);
  c.opt.peel = 4;
  t = lowered(&c, PHASE_EVALUATE);
  HAS(t, " <= 4) {");
  HAS(t, " > 3 ? peel_");
  ck_assert_int_eq(count(t, "c_vals["), 5);   /* four peeled terms and the loop's */
  free(t);
  arena_free(&c.a);
  const char *m[] = {"A/sss/4,5,3", "B/sss/4,5,6", "C/dd/3,6"};
  plan(&c, "A(i,j,k) = B(i,j,l) * C(k,l)", m, 3, true);
  c.opt.peel = LOWER_PEEL_WIDTH;
  t = lowered(&c, PHASE_EVALUATE);
  ck_assert_int_eq(count(t, "peel"), 0);
  free(t);
  arena_free(&c.a);
  const char *r[] = {"y/d/5", "A/ds/5,6", "x/d/6"};
  plan(&c, "y(i) = A(i,j) * x(j)", r, 3, true);
  c.opt.peel = LOWER_PEEL_WIDTH;
  t = lowered(&c, PHASE_EVALUATE);
  ck_assert_int_eq(count(t, "peel"), 0);
  free(t);
  arena_free(&c.a);
}
END_TEST

/* A loop whose inner bounds depend on its iv (CSR rows) is not jammed. */
START_TEST(sparse_rows_not_jammed) {
  Case c;
  const char *s[] = {"y/d/5", "A/ds/5,6", "x/d/6"};
  plan(&c, "y(i) = A(i,j) * x(j)", s, 3, true);
  c.opt.parallel = true;
  c.opt.unroll_jam = 4;
  char *t = lowered(&c, PHASE_EVALUATE);
  HAS(t, "/* parallel");
  ck_assert_ptr_null(strstr(t, "i_blk"));
  free(t);
  arena_free(&c.a);
}
END_TEST

START_TEST(assemble_and_compute_split) {
  Case c;
  const char *s[] = {"A/ds/5,6", "B/ds/5,6", "C/ds/5,6"};
  plan(&c, "A(i,j) = B(i,j) + C(i,j)", s, 3, true);
  char *asm_ = lowered(&c, PHASE_ASSEMBLE);
  char *cmp = lowered(&c, PHASE_COMPUTE);
  HAS(asm_, "A1_crd[pOut1] = (int32_t)j;");
  ck_assert_ptr_null(strstr(asm_, "A_vals[pOut1] ="));
  HAS(cmp, "A_vals[pOut1] =");
  ck_assert_ptr_null(strstr(cmp, "A1_crd[pOut1] = (int32_t)j;"));
  free(asm_);
  free(cmp);
  arena_free(&c.a);
}
END_TEST

typedef struct Refusal {
  const char *expr;
  const char *specs[3];
  const char *msg;
} Refusal;

static const Refusal refusals[] = {
    {"A(i,j,k) = B(i,j,k) * c(k)", {"A/uqd/3,4,5", "B/sss/3,4,5", "c/d/5"},
     "output A: level 0 is 'u'"},
    {"A(i,j) += B(i,j) * C(i,j)", {"A/ds/5,6", "B/ds/5,6", "C/ds/5,6"},
     "'+=' into sparse output A is not supported"},
    {"y(i) = A(i,j) * x(j)", {"y/d/5", "A/u/5,6", "x/d/6"}, ""},
};

START_TEST(refused_with_message) {
  const Refusal *r = &refusals[_i];
  if (!r->msg[0]) return; /* format rejected earlier, by tj_format_parse */
  Case c;
  ck_assert(!plan(&c, r->expr, r->specs, 3, false));
  ck_assert_msg(strstr(c.d.msg, r->msg), "got: %s", c.d.msg);
  arena_free(&c.a);
}
END_TEST

/* The level questions of ir/level.h and lower/level.c, per level of a format. */
static const struct {
  const char *levels;
  int l;
  unsigned has, lacks;
  bool segmented, output_ok;
} level_cases[] = {
  {"ds", 0, LV_FULL | LV_LOCATE | LV_UNIQUE, LV_HAS_POS | LV_HAS_CRD, false, true},
  {"ds", 1, LV_HAS_POS | LV_HAS_CRD | LV_UNIQUE | LV_APPEND, LV_FULL | LV_BRANCHLESS, false, true},
  {"uq", 0, LV_HAS_POS | LV_HAS_CRD, LV_UNIQUE | LV_FULL, true, true},
  {"uq", 1, LV_HAS_CRD | LV_BRANCHLESS | LV_UNIQUE, LV_HAS_POS, false, true},
  {"uqq", 1, LV_HAS_CRD | LV_BRANCHLESS | LV_UNIQUE, LV_HAS_POS, true, true},
  {"uqq", 2, LV_HAS_CRD | LV_BRANCHLESS | LV_UNIQUE, LV_HAS_POS, false, true},
  {"uc", 1, LV_HAS_CRD | LV_BRANCHLESS, LV_UNIQUE | LV_HAS_POS, true, true},
  {"sq", 1, LV_HAS_CRD | LV_BRANCHLESS, LV_HAS_POS, false, false},
  {"ucq", 1, LV_HAS_CRD | LV_BRANCHLESS, LV_UNIQUE | LV_HAS_POS, true, true},
  {"ucq", 2, LV_BRANCHLESS | LV_UNIQUE, LV_HAS_POS, false, true},
};

START_TEST(level_questions) {
  tj_format f = {0};
  strcpy(f.levels, level_cases[_i].levels);
  f.order = (int)strlen(f.levels);
  const LevelType *lt = lv_of(&f, level_cases[_i].l);
  ck_assert_int_eq(lt->letter, f.levels[level_cases[_i].l]);
  ck_assert(lv_has(lt, level_cases[_i].has));
  ck_assert_int_eq(lt->props & level_cases[_i].lacks, 0);
  ck_assert_int_eq(lw_level_segmented(&f, level_cases[_i].l), level_cases[_i].segmented);
  ck_assert_int_eq(lw_output_level_ok(&f, level_cases[_i].l), level_cases[_i].output_ok);
  ck_assert(lv_format_has_sparse(&f));
  ck_assert(!lv_format_has_sparse(&(tj_format){.order = 2, .levels = "dd"}));
}
END_TEST

Suite *lower_suite(void) {
  Suite *s = suite_create("lower");
  TCase *t = tcase_create("golden");
  tcase_add_test(t, spmv_csr_shape);
  tcase_add_test(t, short_fibers_peeled);
  tcase_add_test(t, sparse_add_three_whiles);
  tcase_add_test(t, intersection_one_while);
  tcase_add_test(t, spgemm_workspace);
  tcase_add_test(t, transposed_operand_converted);
  tcase_add_test(t, csc_spmv_reorders_not_converts);
  tcase_add_test(t, spmm_dense_inner_loop_vectorized);
  tcase_add_test(t, parallel_outer_loop_marked);
  tcase_add_test(t, assemble_and_compute_split);
  tcase_add_test(t, nest_from_notation);
  tcase_add_test(t, dense_gemm_register_blocked);
  tcase_add_test(t, sparse_rows_not_jammed);
  suite_add_tcase(s, t);
  TCase *e = tcase_create("refusals");
  tcase_add_loop_test(e, refused_with_message, 0, sizeof refusals / sizeof refusals[0]);
  suite_add_tcase(s, e);
  TCase *lv = tcase_create("levels");
  tcase_add_loop_test(lv, level_questions, 0, sizeof level_cases / sizeof level_cases[0]);
  suite_add_tcase(s, lv);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(lower_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
