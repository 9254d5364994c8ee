/* Tensor declarations and checked assignments from short specs, for the
 * suites that drive the planner and lowering without the driver
 * (check_lower, check_lower_cin). Header-only, all static: tj_testutil is
 * linked below the ir/ and lower/ libraries these call. */
#ifndef TJ_TESTS_DECLS_H
#define TJ_TESTS_DECLS_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/notation.h"

/* An f64 declaration from "name/levels/d1,d2" (levels "-": dense);
 * dc->name is malloc'd (decls_free). */
static void decl(TensorDecl *dc, const char *spec) {
  char name[16], fmt[32], dims[64];
  ck_assert_int_eq(sscanf(spec, "%15[^/]/%31[^/]/%63s", name, fmt, dims), 3);
  memset(dc, 0, sizeof *dc);
  dc->name = strdup(name);
  char *save = NULL;
  for (char *p = strtok_r(dims, ",", &save); p; p = strtok_r(NULL, ",", &save))
    dc->dims[dc->order++] = atoll(p);
  if (strcmp(fmt, "-") == 0) dc->format = tj_format_dense(dc->order);
  else ck_assert_msg(tj_format_parse(fmt, &dc->format) == TJ_OK, "%s", tj_last_error());
  dc->dtype = TJ_F64;
}

/* expr parsed and checked against the n (<= 8) declarations specs; fails
 * the test on an error. */
static Assignment *checked_assignment(Arena *a, Diag *d, const char *expr,
                                      const char *const *specs, int n) {
  TensorDecl decls[8];
  ck_assert_int_le(n, 8);
  for (int k = 0; k < n; k++) decl(&decls[k], specs[k]);
  Assignment *as = nt_parse(a, expr, d);
  ck_assert_msg(as != NULL, "%s", d->msg);
  ck_assert_msg(nt_check(a, as, decls, n, NULL, 0, d), "%s", d->msg);
  for (int k = 0; k < n; k++) free((char *)decls[k].name);
  return as;
}

#endif
