/* Long-running hosts: the in-memory kernel cache's limit. One context
 * compiles many distinct kernels (expressions x formats x schedules x
 * options x constants), frees each handle, and revisits earlier ones that
 * were evicted; every run is checked against plain C loops over dense
 * copies of the operands, and resident memory after warm-up must stay
 * within a stated growth. TJ_SOAK_KERNELS sets the count (CI: 400; the
 * nightly-style run: 10000, `TJ_SOAK_KERNELS=10000 ctest -R check_soak`). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

enum { NI = 12, NJ = 10, NFMT = 4, NTEMPL = 5, LIMIT = 48 };

/* Resident set size of this process in KiB (/proc/self/status). */
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib;
}

/* Operands in every format, and their dense copies for the oracle. */
typedef struct Fixture {
  double a[NI][NJ], b[NI][NJ], xi[NI], xj[NJ], z[NI];
  tj_tensor *A[NFMT], *B, *x_i, *x_j, *zt, *y, *yt, *C, *s;
} Fixture;

static const char *FORMATS[NFMT] = {"ds", "dd", "ss", "ds:1,0"};

static tj_tensor *tensor(const char *name, const char *fmt, int order, const int64_t *dims,
                         const double *vals) {
  tj_format f = tj_format_dense(order);
  if (fmt) OK(tj_format_parse(fmt, &f));
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, order, dims, &f, &t));
  int64_t n = 1;
  for (int m = 0; m < order; m++) n *= dims[m];
  for (int64_t p = 0; vals && p < n; p++) {
    int64_t c[2] = {order == 2 ? p / dims[1] : p, order == 2 ? p % dims[1] : 0};
    if (vals[p] != 0) OK(tj_tensor_insert(t, c, vals[p]));
  }
  OK(tj_tensor_pack(t));
  return t;
}

static void fixture_init(Fixture *fx) {
  unsigned seed = 12345;
  for (int i = 0; i < NI; i++)
    for (int j = 0; j < NJ; j++) {
      seed = seed * 1103515245u + 12345u;
      fx->a[i][j] = (seed >> 16) % 100 < 30 ? (double)((seed >> 8) % 9) - 4 : 0;
      seed = seed * 1103515245u + 12345u;
      fx->b[i][j] = (seed >> 16) % 100 < 40 ? (double)((seed >> 8) % 7) - 3 : 0;
    }
  for (int i = 0; i < NI; i++) fx->xi[i] = 0.5 * i - 2, fx->z[i] = 3 - i;
  for (int j = 0; j < NJ; j++) fx->xj[j] = 1 + j;
  int64_t d2[2] = {NI, NJ}, di = NI, dj = NJ;
  for (int f = 0; f < NFMT; f++) fx->A[f] = tensor("A", FORMATS[f], 2, d2, &fx->a[0][0]);
  fx->B = tensor("B", "ds", 2, d2, &fx->b[0][0]);
  fx->x_i = tensor("x", NULL, 1, &di, fx->xi);
  fx->x_j = tensor("x", NULL, 1, &dj, fx->xj);
  fx->zt = tensor("z", NULL, 1, &di, fx->z);
  fx->y = tensor("y", NULL, 1, &di, NULL);
  fx->yt = tensor("y", NULL, 1, &dj, NULL);
  fx->C = tensor("C", NULL, 2, d2, NULL);
  fx->s = tensor("a", NULL, 0, NULL, NULL);
}

static void fixture_free(Fixture *fx) {
  for (int f = 0; f < NFMT; f++) tj_tensor_free(fx->A[f]);
  tj_tensor *all[] = {fx->B, fx->x_i, fx->x_j, fx->zt, fx->y, fx->yt, fx->C, fx->s};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) tj_tensor_free(all[k]);
}

/* Kernel number `spec`: its template, A's format, schedule, options and
 * constant all follow from the number, so distinct numbers are distinct
 * cache keys (the constant alone differs every NTEMPL*NFMT*2*4*2 = 320). */
typedef struct Spec {
  int templ, fmt;
  const char *schedule;
  tj_options opts;
  double c;
  char expr[128];
} Spec;

static Spec spec_of(long spec) {
  Spec s = {.templ = (int)(spec % NTEMPL), .fmt = (int)(spec / NTEMPL % NFMT)};
  bool par = spec / (NTEMPL * NFMT) % 2;
  s.opts = tj_options_default();
  s.opts.opt_level = (int)(spec / (NTEMPL * NFMT * 2) % 4);
  s.opts.no_vectorize = (int)(spec / (NTEMPL * NFMT * 8) % 2);
  s.opts.nthreads = par ? 2 : 1;
  s.c = 1 + 0.125 * (double)(spec / (NTEMPL * NFMT * 16));
  static const char *exprs[NTEMPL] = {
      "y(i) = %.17g * A(i,j) * x(j)", "y(i) = A(i,j) * x(j) + %.17g * z(i)",
      "C(i,j) = A(i,j) + %.17g * B(i,j)", "a = %.17g * A(i,j) * B(i,j)",
      "y(j) = %.17g * A(i,j) * x(i)"};
  /* Row-parallel where the loop over i is outermost and the output's rows
   * are i; elsewhere LLVM's vectorizers off instead (also in the key). */
  bool rows = s.templ < 3 && s.fmt != 3;
  s.schedule = par && rows ? "parallelize(i)" : NULL;
  s.opts.no_llvm_vectorize = par && !rows;
  snprintf(s.expr, sizeof s.expr, exprs[s.templ], s.c);
  return s;
}

/* The operands of s's template, output first. */
static int operands(const Fixture *fx, const Spec *s, tj_tensor **ops) {
  tj_tensor *A = fx->A[s->fmt];
  switch (s->templ) {
  case 0: ops[0] = fx->y, ops[1] = A, ops[2] = fx->x_j; return 3;
  case 1: ops[0] = fx->y, ops[1] = A, ops[2] = fx->x_j, ops[3] = fx->zt; return 4;
  case 2: ops[0] = fx->C, ops[1] = A, ops[2] = fx->B; return 3;
  case 3: ops[0] = fx->s, ops[1] = A, ops[2] = fx->B; return 3;
  default: ops[0] = fx->yt, ops[1] = A, ops[2] = fx->x_i; return 3;
  }
}

/* Checks the output of s's kernel against plain loops over the dense copies. */
static void check_result(const Fixture *fx, const Spec *s, long spec) {
  double c = s->c, got;
  if (s->templ == 3) {
    double want = 0;
    for (int i = 0; i < NI; i++)
      for (int j = 0; j < NJ; j++) want += c * fx->a[i][j] * fx->b[i][j];
    OK(tj_tensor_get(fx->s, NULL, &got));
    ck_assert_msg(fabs(got - want) <= 1e-9 * (1 + fabs(want)), "kernel %ld (%s): %g, want %g",
                  spec, s->expr, got, want);
    return;
  }
  if (s->templ == 2) {
    for (int64_t i = 0; i < NI; i++)
      for (int64_t j = 0; j < NJ; j++) {
        int64_t co[2] = {i, j};
        double want = fx->a[i][j] + c * fx->b[i][j];
        OK(tj_tensor_get(fx->C, co, &got));
        ck_assert_msg(fabs(got - want) <= 1e-12 * (1 + fabs(want)),
                      "kernel %ld (%s) C(%ld,%ld): %g, want %g", spec, s->expr, (long)i,
                      (long)j, got, want);
      }
    return;
  }
  int64_t n = s->templ == 4 ? NJ : NI;
  for (int64_t r = 0; r < n; r++) {
    double want = 0;
    if (s->templ == 4) {
      for (int i = 0; i < NI; i++) want += c * fx->a[i][r] * fx->xi[i];
    } else {
      for (int j = 0; j < NJ; j++) want += (s->templ == 0 ? c : 1) * fx->a[r][j] * fx->xj[j];
      if (s->templ == 1) want += c * fx->z[r];
    }
    OK(tj_tensor_get(s->templ == 4 ? fx->yt : fx->y, &r, &got));
    ck_assert_msg(fabs(got - want) <= 1e-9 * (1 + fabs(want)), "kernel %ld (%s) y(%ld): %g, want %g",
                  spec, s->expr, (long)r, got, want);
  }
}

/* Compiles kernel number spec, runs and checks it; returns the handle
 * (kept) or frees it and returns NULL; *hit is its cache_hit. */
static tj_kernel *compile_check(tj_context *cx, Fixture *fx, long spec, bool keep, int *hit) {
  Spec s = spec_of(spec);
  tj_tensor *ops[4];
  int n = operands(fx, &s, ops);
  tj_kernel *k;
  ck_assert_msg(tj_compile(cx, s.expr, ops, n, s.schedule, &s.opts, &k) == TJ_OK,
                "kernel %ld (%s, A %s, schedule %s): %s", spec, s.expr, FORMATS[s.fmt],
                s.schedule ? s.schedule : "-", tj_last_error());
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_result(fx, &s, spec);
  if (hit) *hit = tj_kernel_times(k).cache_hit;
  if (keep) return k;
  tj_kernel_free(k);
  return NULL;
}

static long soak_count(void) {
  const char *e = getenv("TJ_SOAK_KERNELS");
  long n = e ? strtol(e, NULL, 10) : 0;
  return n > 0 ? n : 400;
}

START_TEST(bounded_cache) {
  long n = soak_count();
  Fixture fx;
  fixture_init(&fx);
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_limit(cx, LIMIT));
  /* Held for the whole run: its entry must never be evicted. */
  tj_kernel *pinned = compile_check(cx, &fx, 0, true, NULL);
  long rss_warm = -1, revisits = 0, recompiled = 0;
  for (long spec = 1; spec < n; spec++) {
    compile_check(cx, &fx, spec, false, NULL);
    if (spec % 5 == 4) {   /* an older kernel again: evicted unless recent */
      int hit;
      compile_check(cx, &fx, spec / 3, false, &hit);
      revisits++;
      recompiled += hit == 0;
    }
    if (spec == n / 5) rss_warm = rss_kib();
    tj_cache_stats st;
    OK(tj_context_cache_stats(cx, &st));
    ck_assert_msg(st.entries <= LIMIT, "%zu entries over the limit %d", st.entries, LIMIT);
  }
  long rss_end = rss_kib();
  OK(tj_kernel_run(pinned, TJ_EVALUATE, NULL, 0));
  Spec s0 = spec_of(0);
  check_result(&fx, &s0, 0);
  tj_cache_stats st;
  OK(tj_context_cache_stats(cx, &st));
  printf("check_soak: %ld kernels + %ld revisits (%ld recompiled after eviction), limit %d: "
         "%zu entries, %llu evictions, %llu hits; RSS %ld KiB after warm-up, %ld KiB at the "
         "end (+%ld KiB)\n",
         n, revisits, recompiled, LIMIT, st.entries, (unsigned long long)st.evictions,
         (unsigned long long)st.hits, rss_warm, rss_end, rss_end - rss_warm);
  ck_assert_uint_ge(st.evictions, (uint64_t)(n - LIMIT));
  ck_assert_uint_eq(st.in_use, 1);
  ck_assert_int_gt(recompiled, 0);
  /* The ceiling: 48 MiB of growth after warm-up, whatever the count (an
   * unbounded cache grows by about 40 KB a kernel: 400 MB for 10,000). */
  ck_assert_msg(rss_end - rss_warm < 48 * 1024, "RSS grew by %ld KiB after warm-up",
                rss_end - rss_warm);
  tj_kernel_free(pinned);
  tj_context_free(cx);
  fixture_free(&fx);
}
END_TEST

START_TEST(limit_and_handles) {
  Fixture fx;
  fixture_init(&fx);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_cache_stats st;
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.limit, 1024);
  OK(tj_context_set_cache_limit(cx, 2));
  /* Handles held beyond the limit keep their kernels: nothing is evicted. */
  tj_kernel *k[4];
  for (int s = 0; s < 4; s++) k[s] = compile_check(cx, &fx, s, true, NULL);
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 4);
  ck_assert_uint_eq(st.in_use, 4);
  ck_assert_uint_eq(st.evictions, 0);
  /* A second handle on kernel 1 is a hit and shares its entry. */
  int hit;
  tj_kernel *again = compile_check(cx, &fx, 1, true, &hit);
  ck_assert_int_eq(hit, 1);
  /* Freeing handles lets the least recently used kernels go, not ones in use. */
  tj_kernel_free(k[0]);
  tj_kernel_free(k[1]);
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 3);   /* kernel 0 evicted; 1 still held by `again` */
  ck_assert_uint_eq(st.evictions, 1);
  OK(tj_kernel_run(again, TJ_EVALUATE, NULL, 0));
  Spec s1 = spec_of(1);
  check_result(&fx, &s1, 1);
  /* Kernel 0 compiles again from scratch and still gives the answer. */
  tj_kernel_free(compile_check(cx, &fx, 0, true, &hit));
  ck_assert_int_eq(hit, 0);
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 3);   /* 0 went again when its handle did */
  tj_kernel_free(again);
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 2);   /* 2 and 3, held */
  /* No limit keeps what is let go; lowering the limit evicts at once. */
  OK(tj_context_set_cache_limit(cx, 0));
  tj_kernel_free(k[2]);
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 2);
  OK(tj_context_set_cache_limit(cx, 1));
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 1);   /* only kernel 3, still held */
  ck_assert_uint_eq(st.in_use, 1);
  OK(tj_kernel_run(k[3], TJ_EVALUATE, NULL, 0));
  Spec s3 = spec_of(3);
  check_result(&fx, &s3, 3);
  tj_kernel_free(NULL);
  tj_context_free(cx);   /* frees k[3] */
  fixture_free(&fx);
}
END_TEST

START_TEST(limit_from_environment) {
  setenv("TJ_KERNEL_CACHE_MAX", "7", 1);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_cache_stats st;
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.limit, 7);
  tj_context_free(cx);
  const char *bad[] = {"", "lots", "-1", "12k", "99999999999999999999999"};
  for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
    setenv("TJ_KERNEL_CACHE_MAX", bad[b], 1);
    cx = NULL;
    ck_assert_int_eq(tj_context_new(&cx), TJ_ERR_INVALID);
    ck_assert_ptr_null(cx);
    ck_assert_msg(strstr(tj_last_error(), "TJ_KERNEL_CACHE_MAX") != NULL, "%s", tj_last_error());
  }
  unsetenv("TJ_KERNEL_CACHE_MAX");
}
END_TEST

static Suite *soak_suite(void) {
  Suite *s = suite_create("soak");
  TCase *c = tcase_create("cache");
  tcase_add_test(c, limit_and_handles);
  tcase_add_test(c, limit_from_environment);
  tcase_add_test(c, bounded_cache);
  tcase_set_timeout(c, 0);   /* the nightly count runs for minutes */
  suite_add_tcase(s, c);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(soak_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
