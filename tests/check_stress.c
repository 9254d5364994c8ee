/* Many threads on one context: 8 threads (on however many cores) compile,
 * run and free numbered kernels (tests/util/numbered_kernels.h) on shared
 * input tensors and on private ones, under a small cache limit so that
 * compiles, hits and evictions interleave, and run kernel handles compiled
 * by the main thread on their own operands. Every result is checked
 * against plain C loops. TJ_STRESS_SECONDS sets the duration (CI: 6; the
 * nightly-style run: 600). Built with -DTJ_TSAN=ON this is the
 * ThreadSanitizer's main workload (scripts/tsan.sh). */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorjit.h"
#include "util/numbered_kernels.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

enum { THREADS = 8, SPECS = 160, COMMON = 10, LIMIT = 24 };

typedef struct Shared {
  tj_context *cx;
  NkInputs in;                  /* read by every thread */
  tj_kernel *common[COMMON];    /* compiled by main on kernels 0..COMMON-1 */
  double deadline;
  atomic_long runs, failures;
  pthread_mutex_t msg_lock;
  char first[512];              /* the first failure's message */
} Shared;

typedef struct Worker {
  Shared *sh;
  int id;
  NkInputs own;
  NkOutputs out;
} Worker;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void record_failure(Shared *sh, const char *msg) {
  if (atomic_fetch_add(&sh->failures, 1) == 0) {
    pthread_mutex_lock(&sh->msg_lock);
    snprintf(sh->first, sizeof sh->first, "%s", msg);
    pthread_mutex_unlock(&sh->msg_lock);
  }
}

/* Runs k (or compiles kernel n when k is NULL) on in and w's outputs and
 * checks the result. */
static void run_one(Worker *w, const NkInputs *in, long n, tj_kernel *k) {
  Shared *sh = w->sh;
  NkSpec s = nk_spec(n);
  tj_tensor *ops[NK_MAX_OPS];
  int m = nk_operands(in, &w->out, &s, ops);
  char why[600];
  tj_kernel *own = NULL;
  if (!k && tj_compile(sh->cx, s.expr, ops, m, s.schedule, &s.opts, &own) != TJ_OK) {
    snprintf(why, sizeof why, "thread %d: compile of kernel %ld: %s", w->id, n, tj_last_error());
    record_failure(sh, why);
    return;
  }
  if (tj_kernel_run(k ? k : own, TJ_EVALUATE, ops, m) != TJ_OK) {
    snprintf(why, sizeof why, "thread %d: run of kernel %ld: %s", w->id, n, tj_last_error());
    record_failure(sh, why);
  } else if (!nk_check(in, &w->out, &s, why, sizeof why)) {
    char msg[700];
    snprintf(msg, sizeof msg, "thread %d (%s inputs): %s", w->id, in == &sh->in ? "shared" : "own",
             why);
    record_failure(sh, msg);
  }
  tj_kernel_free(own);
  atomic_fetch_add(&sh->runs, 1);
}

static void *work(void *arg) {
  Worker *w = arg;
  unsigned seed = 977u * (unsigned)(w->id + 1);
  for (long r = 0; now_s() < w->sh->deadline; r++) {
    seed = seed * 1103515245u + 12345u;
    long n = (long)(seed >> 8) % SPECS;
    const NkInputs *in = r % 2 ? &w->own : &w->sh->in;
    if (r % 3 == 2) run_one(w, in, n % COMMON, w->sh->common[n % COMMON]);
    else run_one(w, in, n, NULL);
  }
  return NULL;
}

static double stress_seconds(void) {
  const char *e = getenv("TJ_STRESS_SECONDS");
  double s = e ? strtod(e, NULL) : 0;
  return s > 0 ? s : 6;
}

START_TEST(threads_share_a_context) {
  static Shared sh;
  memset(&sh, 0, sizeof sh);
  pthread_mutex_init(&sh.msg_lock, NULL);
  OK(tj_context_new(&sh.cx));
  OK(tj_context_set_cache_limit(sh.cx, LIMIT));
  nk_inputs_init(&sh.in, 1);
  NkOutputs main_out;
  nk_outputs_init(&main_out);
  for (long n = 0; n < COMMON; n++) {
    NkSpec s = nk_spec(n);
    tj_tensor *ops[NK_MAX_OPS];
    int m = nk_operands(&sh.in, &main_out, &s, ops);
    OK(tj_compile(sh.cx, s.expr, ops, m, s.schedule, &s.opts, &sh.common[n]));
  }
  static Worker w[THREADS];
  for (int t = 0; t < THREADS; t++) {
    w[t] = (Worker){.sh = &sh, .id = t};
    nk_inputs_init(&w[t].own, 100u + (unsigned)t);
    nk_outputs_init(&w[t].out);
  }
  double secs = stress_seconds();
  sh.deadline = now_s() + secs;
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) ck_assert_int_eq(pthread_create(&th[t], NULL, work, &w[t]), 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  tj_cache_stats st;
  OK(tj_context_cache_stats(sh.cx, &st));
  printf("check_stress: %d threads for %.0f s: %ld runs checked, %ld failures; cache: %zu "
         "entries (limit %d), %llu hits, %llu misses, %llu evictions\n",
         THREADS, secs, atomic_load(&sh.runs), atomic_load(&sh.failures), st.entries, LIMIT,
         (unsigned long long)st.hits, (unsigned long long)st.misses,
         (unsigned long long)st.evictions);
  ck_assert_msg(atomic_load(&sh.failures) == 0, "%ld failures; the first: %s",
                atomic_load(&sh.failures), sh.first);
  ck_assert_int_ge(atomic_load(&sh.runs), THREADS);
  ck_assert_uint_ge(st.in_use, COMMON);
  for (int t = 0; t < THREADS; t++) {
    nk_inputs_free(&w[t].own);
    nk_outputs_free(&w[t].out);
  }
  tj_context_free(sh.cx);   /* frees the common handles */
  nk_inputs_free(&sh.in);
  nk_outputs_free(&main_out);
  pthread_mutex_destroy(&sh.msg_lock);
}
END_TEST

static Suite *stress_suite(void) {
  Suite *s = suite_create("stress");
  TCase *c = tcase_create("threads");
  tcase_add_test(c, threads_share_a_context);
  tcase_set_timeout(c, 0);   /* bounded by TJ_STRESS_SECONDS */
  suite_add_tcase(s, c);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(stress_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
