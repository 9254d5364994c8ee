/* Long-running hosts: the in-memory kernel cache's limit. One context
 * compiles many distinct kernels (expressions x formats x schedules x
 * options x constants), frees each handle, and revisits earlier ones that
 * were evicted; every run is checked against plain C loops over dense
 * copies of the operands, and resident memory after warm-up must stay
 * within a stated growth. TJ_SOAK_KERNELS sets the count (CI: 400; the
 * nightly-style run: 10000, `TJ_SOAK_KERNELS=10000 ctest -R check_soak`). */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/numbered_kernels.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

enum { LIMIT = 48 };

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

typedef struct Fixture {
  NkInputs in;
  NkOutputs out;
} Fixture;

static void fixture_init(Fixture *fx) {
  nk_inputs_init(&fx->in, 12345);
  nk_outputs_init(&fx->out);
}

static void fixture_free(Fixture *fx) {
  nk_inputs_free(&fx->in);
  nk_outputs_free(&fx->out);
}

static void check_result(const Fixture *fx, long spec) {
  NkSpec s = nk_spec(spec);
  char why[256];
  ck_assert_msg(nk_check(&fx->in, &fx->out, &s, why, sizeof why), "%s", why);
}

/* Compiles kernel number spec, runs and checks it; returns the handle
 * (kept) or frees it and returns NULL; *hit is its cache_hit. */
static tj_kernel *compile_check(tj_context *cx, Fixture *fx, long spec, bool keep, int *hit) {
  NkSpec s = nk_spec(spec);
  tj_tensor *ops[NK_MAX_OPS];
  int n = nk_operands(&fx->in, &fx->out, &s, ops);
  tj_kernel *k;
  ck_assert_msg(tj_compile(cx, s.expr, ops, n, s.schedule, &s.opts, &k) == TJ_OK,
                "kernel %ld (%s, A %s, schedule %s): %s", spec, s.expr, nk_format(&s),
                s.schedule ? s.schedule : "-", tj_last_error());
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  check_result(fx, spec);
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
  check_result(&fx, 0);
  tj_cache_stats st;
  OK(tj_context_cache_stats(cx, &st));
  printf("check_soak: %ld kernels + %ld revisits (%ld recompiled after eviction), limit %d: "
         "%zu entries (%zu KiB by tj_cache_stats.bytes), %llu evictions, %llu hits; RSS %ld "
         "KiB after warm-up, %ld KiB at the end (+%ld KiB)\n",
         n, revisits, recompiled, LIMIT, st.entries, st.bytes / 1024,
         (unsigned long long)st.evictions,
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
  check_result(&fx, 1);
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
  check_result(&fx, 3);
  tj_kernel_free(NULL);
  tj_context_free(cx);   /* frees k[3] */
  fixture_free(&fx);
}
END_TEST

/* The byte limit: measured sizes, eviction to stay under it, pinned
 * kernels kept, evicted ones recompiled and checked by plain loops. */
START_TEST(byte_limit) {
  Fixture fx;
  fixture_init(&fx);
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_limit(cx, 0));   /* only the byte limit evicts here */
  tj_cache_stats st;
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.byte_limit, 0);
  ck_assert_uint_eq(st.bytes, 0);
  /* Unlimited: eight kernels, each at least a page of machine code. */
  enum { FIRST = 8, MANY = 120 };
  size_t before = 0, biggest = 0, smallest = SIZE_MAX;
  for (long s = 0; s < FIRST; s++) {
    compile_check(cx, &fx, s, false, NULL);
    OK(tj_context_cache_stats(cx, &st));
    ck_assert_uint_eq(st.entries, (size_t)s + 1);
    size_t one = st.bytes - before;
    ck_assert_msg(one >= 4096 && one < ((size_t)4 << 20), "kernel %ld: %zu bytes", s, one);
    if (one > biggest) biggest = one;
    if (one < smallest) smallest = one;
    before = st.bytes;
  }
  /* A limit of three of the largest: at least three kernels fit, far from all. */
  size_t limit = 3 * biggest;
  OK(tj_context_set_cache_bytes(cx, limit));
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.byte_limit, limit);
  ck_assert_uint_le(st.bytes, limit);
  ck_assert_uint_ge(st.entries, 3);
  ck_assert_uint_lt(st.entries, FIRST);
  tj_kernel *pinned = compile_check(cx, &fx, 0, true, NULL);
  long recompiled = 0;
  for (long s = FIRST; s < MANY; s++) {
    compile_check(cx, &fx, s, false, NULL);
    if (s % 4 == 0) {   /* an early kernel again: long evicted, so compiled anew */
      int hit;
      compile_check(cx, &fx, s / 8, false, &hit);
      recompiled += hit == 0;
    }
    OK(tj_context_cache_stats(cx, &st));
    ck_assert_msg(st.bytes <= limit, "%zu bytes over the limit %zu", st.bytes, limit);
    ck_assert_uint_ge(st.entries, 1);   /* the pinned kernel, whatever its size */
    ck_assert_uint_eq(st.in_use, 1);
    ck_assert_uint_le(st.entries, 3 * biggest / 4096);
  }
  ck_assert_uint_ge(st.evictions, MANY - 3 * biggest / 4096);
  ck_assert_int_ge(recompiled, 20);
  OK(tj_kernel_run(pinned, TJ_EVALUATE, NULL, 0));
  check_result(&fx, 0);
  /* A limit below one kernel keeps only what is held; none held: nothing. */
  OK(tj_context_set_cache_bytes(cx, 1));
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 1);
  ck_assert_uint_eq(st.in_use, 1);
  ck_assert_uint_gt(st.bytes, 1);
  OK(tj_kernel_run(pinned, TJ_EVALUATE, NULL, 0));
  check_result(&fx, 0);
  tj_kernel_free(pinned);
  OK(tj_context_cache_stats(cx, &st));
  ck_assert_uint_eq(st.entries, 0);
  ck_assert_uint_eq(st.bytes, 0);   /* every entry's bytes were taken back */
  printf("check_soak: kernels of %zu..%zu bytes; byte limit %zu (3 x the largest of %d): "
         "%llu evictions, %ld kernels recompiled after eviction\n", smallest, biggest, limit,
         FIRST, (unsigned long long)st.evictions, recompiled);
  tj_context_free(cx);
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
  const char *good[][2] = {{"0", "0"}, {"100000", "100000"}, {"64K", "65536"},
                           {"3m", "3145728"}, {"2G", "2147483648"}};
  for (size_t g = 0; g < sizeof good / sizeof *good; g++) {
    setenv("TJ_KERNEL_CACHE_BYTES", good[g][0], 1);
    OK(tj_context_new(&cx));
    OK(tj_context_cache_stats(cx, &st));
    ck_assert_uint_eq(st.byte_limit, strtoull(good[g][1], NULL, 10));
    ck_assert_uint_eq(st.limit, 1024);
    tj_context_free(cx);
  }
  const char *bad_bytes[] = {"", "K", "-5", "12x", "4KB", "9999999999999999999G"};
  for (size_t b = 0; b < sizeof bad_bytes / sizeof *bad_bytes; b++) {
    setenv("TJ_KERNEL_CACHE_BYTES", bad_bytes[b], 1);
    cx = NULL;
    ck_assert_int_eq(tj_context_new(&cx), TJ_ERR_INVALID);
    ck_assert_ptr_null(cx);
    ck_assert_msg(strstr(tj_last_error(), "TJ_KERNEL_CACHE_BYTES") != NULL, "%s",
                  tj_last_error());
  }
  unsetenv("TJ_KERNEL_CACHE_BYTES");
}
END_TEST

static Suite *soak_suite(void) {
  Suite *s = suite_create("soak");
  TCase *c = tcase_create("cache");
  tcase_add_test(c, limit_and_handles);
  tcase_add_test(c, byte_limit);
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
