/* Loop IR shorthands shared by the check_jit* suites: the arena A that a
 * test's kernels live in (set up and freed by the checked fixture), short
 * expression constructors over it, a JIT engine that fails the test when it
 * cannot be made, and the suites' runner. Header-only, all static: tj_testutil is linked below
 * the ir/ and jit/ libraries these call, so they cannot live in a util .c.
 */
#ifndef TJ_TESTS_LIR_BUILD_H
#define TJ_TESTS_LIR_BUILD_H

#include <check.h>
#include <stddef.h>
#include <stdlib.h>

#include "ir/loop_ir.h"
#include "jit/engine.h"

static Arena arena;
static Arena *A = &arena;

/* The checked fixture: a fresh arena per test. */
static inline void setup(void) { arena_init(A); }
static inline void teardown(void) { arena_free(A); }

static inline LirExpr *I64(int64_t v) { return lir_const_int(A, LT_I64, v); }
static inline LirExpr *R(LirVar *v) { return lir_ref(A, v); }
static inline LirExpr *BIN(LirBinOp op, LirExpr *a, LirExpr *b) {
  return lir_bin(A, op, a, b);
}
static inline LirExpr *LD(LirVar *p, LirExpr *i) { return lir_load(A, R(p), i); }

/* An engine for the host CPU; owned by the caller (jit_engine_free). */
static inline JitEngine *engine(void) {
  Diag d;
  diag_init(&d);
  JitEngine *e = jit_engine_new(NULL, NULL, &d);
  ck_assert_msg(e, "engine: %s", d.msg);
  return e;
}

/* One test case of a suite: its name, its loop test and how many _i it runs. */
typedef struct LbCase {
  const char *name;
  const TTest *t;
  int n;
} LbCase;

/* Runs cases[0..n) as the suite `name`, each with the arena fixture and a
 * 120 s timeout; returns the process exit status. */
static inline int lb_run_suite(const char *name, const LbCase *cases, size_t n) {
  Suite *s = suite_create(name);
  for (size_t i = 0; i < n; i++) {
    TCase *tc = tcase_create(cases[i].name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, cases[i].t, 0, cases[i].n);
    suite_add_tcase(s, tc);
  }
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
