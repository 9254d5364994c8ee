/* The code-generation backends behind jit/backend.h: every kernel of a
 * representative set runs through the C backend (the loop IR's C compiled
 * by cc) and the LLVM backend on the same inputs, and both must agree with
 * each other and with tj_reference (within the dtype's tolerance: LLVM may
 * fuse a*b+c and reorder vector reductions). Also: the C backend's stages,
 * its error messages (no compiler, a failing compile), and that the kernel
 * cache keys on the backend while the disk cache holds only LLVM objects.
 * Without any C compiler the tests that need one print SKIP.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/kernel_check.h"

static bool have_cc(void) {
  if (system("${CC:-cc} --version >/dev/null 2>&1") == 0) return true;
  const char *cc = getenv("CC");
  fprintf(stderr, "check_backend: SKIP: no C compiler ('%s') found\n", cc && *cc ? cc : "cc");
  return false;
}

static tj_options with_backend(int backend) {
  tj_options o = tj_options_default();
  o.backend = backend;
  return o;
}

/* ---- both backends on the same kernels ---- */

typedef struct Cross {
  const char *expr, *formats, *extents;
} Cross;

static const Cross crosses[] = {
  {"y(i) = A(i,j) * x(j)", "A:ds", "i=23 j=17"},                       /* SpMV CSR */
  {"y(i) = A(i,j) * x(j)", "A:ds:1,0", "i=23 j=17"},                   /* SpMV CSC */
  {"y(i) = A(i,j) * x(j)", "A:uq", "i=23 j=17"},                       /* SpMV COO */
  {"C(i,j) = A(i,k) * B(k,j)", "A:ds", "i=19 j=21 k=13"},              /* SpMM */
  {"A(i,j) = B(i,j) * C(i,k) * D(k,j)", "A:ds B:ds", "i=15 j=18 k=9"}, /* SDDMM */
  {"A(i,j) = B(i,j) + C(i,j)", "A:ds B:ds C:ds", "i=17 j=14"},         /* sparse add */
  {"A(i,j) = B(i,k) * C(k,j)", "A:ds B:ds C:ds", "i=16 j=15 k=14"},    /* SpGEMM */
  {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "B:sss", "i=9 j=11 k=8 l=7"},/* MTTKRP */
  {"C(i,j) = A(i,k) * B(k,j)", "", "i=37 j=41 k=19"},                  /* dense GEMM */
  {"y(i) = b(i) - A(i,j) * x(j)", "A:ds", "i=21 j=16"},                /* nested sum */
  {"y(i) = s1(i) + s2(i) + s3(i) + s4(i) + s5(i) + s6(i) + s7(i) + s8(i)",
   "s1:s s2:s s3:s s4:s s5:s s6:s s7:s s8:s", "i=60"},                 /* 8-way union */
  {"y(i) = s1(i) + s2(i) + s3(i) + s4(i) + s5(i) + s6(i) + s7(i) + s8(i)",
   "y:s s1:s s2:s s3:s s4:s s5:s s6:s s7:s s8:s", "i=60"},             /* into sparse */
};

/* C backend first (with the assemble/compute split and the interpreter),
 * then LLVM on the same inputs; two seeds, one with empty rows. */
START_TEST(test_cross) {
  if (!have_cc()) return;
  const Cross *x = &crosses[_i];
  tj_options c = with_backend(TJ_BACKEND_C), llvm = with_backend(TJ_BACKEND_LLVM);
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  KcCase cases[] = {
    {.expr = x->expr, .formats = x->formats, .extents = x->extents, .density = 0.3,
     .seed = 11 + (uint64_t)_i, .flags = KC_SPLIT, .opts = &c, .cross = &llvm},
    {.expr = x->expr, .formats = x->formats, .extents = x->extents, .density = 0.25,
     .pattern = KC_EMPTY_ROWS, .seed = 97 + (uint64_t)_i, .opts = &c, .cross = &llvm},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    KcOutcome o;
    ck_assert_msg(kc_run(cx, &cases[q], &o) == KC_PASS, "%s", o.msg);
  }
  tj_context_free(cx);
}
END_TEST

/* ---- one SpMV compiled by hand ---- */

typedef struct Spmv {
  tj_context *cx;
  tj_tensor *ops[3];
} Spmv;

static void spmv_new(Spmv *s) {
  int64_t dy[] = {6}, da[] = {6, 5}, dx[] = {5};
  ck_assert_int_eq(tj_context_new(&s->cx), TJ_OK);
  s->ops[0] = kc_tensor("y", "", 1, dy, TJ_F64, 0, 0.0, KC_RANDOM, 1, 2, 0);
  s->ops[1] = kc_tensor("A", "ds", 2, da, TJ_F64, 0, 0.5, KC_RANDOM, 3, 4, 0);
  s->ops[2] = kc_tensor("x", "", 1, dx, TJ_F64, 0, 1.0, KC_RANDOM, 5, 6, 0);
  for (int k = 0; k < 3; k++) ck_assert_ptr_nonnull(s->ops[k]);
}

static tj_status spmv_compile(Spmv *s, int backend, tj_kernel **k) {
  tj_options o = with_backend(backend);
  return tj_compile(s->cx, "y(i) = A(i,j) * x(j)", s->ops, 3, NULL, &o, k);
}

static void spmv_free(Spmv *s) {
  for (int k = 0; k < 3; k++) tj_tensor_free(s->ops[k]);
  tj_context_free(s->cx);
}

/* The stage printed into a string (malloc'd), and its status. */
static char *stage_text(tj_kernel *k, tj_stage st, tj_status *status) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(f);
  *status = tj_kernel_print(k, st, f);
  fclose(f);
  return buf;
}

START_TEST(test_stages) {
  if (!have_cc()) return;
  Spmv s;
  spmv_new(&s);
  tj_kernel *kc = NULL, *kl = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &kc), TJ_OK);
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_LLVM, &kl), TJ_OK);
  tj_status st;
  char *t = stage_text(kc, TJ_STAGE_C, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_ptr_nonnull(strstr(t, "#include \"runtime/abi.h\""));
  ck_assert_ptr_nonnull(strstr(t, "int32_t evaluate(tj_storage **operands) {"));
  ck_assert_ptr_nonnull(strstr(t, "void tj_c_bind_helpers("));
  free(t);
  t = stage_text(kc, TJ_STAGE_ASM, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_msg(strstr(t, "evaluate:") != NULL, "no evaluate label in:\n%s", t);
  free(t);
  for (tj_stage ll = TJ_STAGE_LLVM; ll <= TJ_STAGE_LLVM_OPT; ll++) {
    t = stage_text(kc, ll, &st);
    ck_assert_int_eq(st, TJ_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tj_last_error(), "the C backend has no LLVM IR stage"));
    ck_assert_ptr_nonnull(strstr(tj_last_error(), "(-print-c)"));
    free(t);
  }
  /* The LLVM backend's C is the loop IR's rendering, without the helpers. */
  t = stage_text(kl, TJ_STAGE_C, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_ptr_nonnull(strstr(t, "int32_t evaluate(tj_storage **operands) {"));
  ck_assert_ptr_null(strstr(t, "tj_c_bind_helpers"));
  free(t);
  t = stage_text(kl, TJ_STAGE_LLVM, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_ptr_nonnull(strstr(t, "define"));
  free(t);
  spmv_free(&s);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_no_compiler) {
  setenv("CC", "/nonexistent/cc", 1);   /* Check forks: the parent keeps its CC */
  Spmv s;
  spmv_new(&s);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_ERR_JIT);
  ck_assert_msg(strstr(tj_last_error(), "C backend: the C compiler '/nonexistent/cc' was not "
                                        "found (set CC to a C compiler)") != NULL,
                "%s", tj_last_error());
  /* The LLVM backend never needs one. */
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_LLVM, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
  spmv_free(&s);
}
END_TEST

START_TEST(test_compile_error) {
  if (!have_cc()) return;
  const char *cc = getenv("CC");
  char bad[256];
  snprintf(bad, sizeof bad, "%s -Dtj_storage=struct", cc && *cc ? cc : "cc");
  setenv("CC", bad, 1);
  Spmv s;
  spmv_new(&s);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_ERR_JIT);
  const char *msg = tj_last_error();
  ck_assert_msg(strstr(msg, "failed on the kernel's C:\n") && strstr(msg, "error"), "%s", msg);
  spmv_free(&s);
}
END_TEST

START_TEST(test_unknown_backend) {
  Spmv s;
  spmv_new(&s);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, 7, &k), TJ_ERR_INVALID);
  ck_assert_ptr_nonnull(strstr(tj_last_error(), "unknown backend 7"));
  spmv_free(&s);
}
END_TEST

/* ---- caches ---- */

static int files_in(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

START_TEST(test_cache_keys_backend) {
  if (!have_cc()) return;
  char dir[] = "/tmp/tj_backend_cache_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  Spmv s;
  spmv_new(&s);
  ck_assert_int_eq(tj_context_set_cache_dir(s.cx, dir), TJ_OK);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);
  ck_assert_int_eq(files_in(dir), 0);   /* no disk cache for the C backend */
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_LLVM, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);   /* another key */
  ck_assert_int_eq(files_in(dir), 1);
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 1);
  spmv_free(&s);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("backend");
  TCase *tc = tcase_create("cross");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_cross, 0, (int)(sizeof crosses / sizeof *crosses));
  suite_add_tcase(s, tc);
  tc = tcase_create("stages");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_stages);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_no_compiler);
  tcase_add_test(tc, test_compile_error);
  tcase_add_test(tc, test_unknown_backend);
  suite_add_tcase(s, tc);
  tc = tcase_create("cache");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_cache_keys_backend);
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
