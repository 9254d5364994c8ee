/* The C expression builder: the AST it makes prints as the same index
 * notation, compiles to the same kernel (a cache hit after the string
 * form), computes the same values, and reports misuse with messages. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_expr *acc(tj_builder *b, const char *t, const char *i, const char *j) {
  const char *idx[2] = {i, j};
  return tj_build_access(b, t, j ? 2 : i ? 1 : 0, idx);
}

START_TEST(builds_what_the_parser_parses) {
  tj_builder *b;
  OK(tj_builder_new(&b));
  tj_expr *rhs = tj_build_binary(b, '*', acc(b, "A", "i", "j"), acc(b, "x", "j", NULL));
  rhs = tj_build_binary(b, '+', rhs, tj_build_call(b, "sqrt", acc(b, "z", "i", NULL), NULL));
  rhs = tj_build_binary(b, '-', rhs, tj_build_neg(b, tj_build_literal(b, 2)));
  OK(tj_builder_assign(b, acc(b, "y", "i", NULL), rhs, 0));
  char text[256];
  OK(tj_builder_print(b, text, sizeof text));
  ck_assert_str_eq(text, "y(i) = A(i,j) * x(j) + sqrt(z(i)) - -(2)");
  tj_builder_free(b);
}
END_TEST

START_TEST(same_kernel_and_values_as_the_string) {
  int64_t dims[2] = {30, 20};
  tj_format csr, vec = tj_format_dense(1);
  OK(tj_format_parse("ds", &csr));
  tj_tensor *A, *x, *y, *y2;
  OK(tj_tensor_new("A", TJ_F64, 2, dims, &csr, &A));
  OK(tj_tensor_new("x", TJ_F64, 1, &dims[1], &vec, &x));
  OK(tj_tensor_new("y", TJ_F64, 1, &dims[0], &vec, &y));
  OK(tj_tensor_new("y", TJ_F64, 1, &dims[0], &vec, &y2));
  for (int64_t i = 0; i < 30; i++)
    for (int64_t j = (i * 7) % 5; j < 20; j += 3) {
      int64_t c[2] = {i, j};
      OK(tj_tensor_insert(A, c, (double)(i - j)));
    }
  for (int64_t j = 0; j < 20; j++) OK(tj_tensor_insert(x, &j, 0.5 * (double)j));
  OK(tj_tensor_pack(A));
  OK(tj_tensor_pack(x));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *ops[] = {y, A, x}, *ops2[] = {y2, A, x};
  tj_kernel *k1, *k2;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, NULL, &k1));
  OK(tj_kernel_run(k1, TJ_EVALUATE, NULL, 0));
  tj_builder *b;
  OK(tj_builder_new(&b));
  OK(tj_builder_assign(b, acc(b, "y", "i", NULL),
                       tj_build_binary(b, '*', acc(b, "A", "i", "j"), acc(b, "x", "j", NULL)), 0));
  OK(tj_compile_built(cx, b, ops2, 3, NULL, NULL, &k2));
  ck_assert_int_eq(tj_kernel_times(k2).cache_hit, 1);
  OK(tj_kernel_run(k2, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < 30; i++) {
    double u, v;
    OK(tj_tensor_get(y, &i, &u));
    OK(tj_tensor_get(y2, &i, &v));
    ck_assert_double_eq(u, v);
  }
  tj_builder_free(b);
  tj_context_free(cx);
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_tensor_free(y2);
}
END_TEST

START_TEST(misuse_is_reported) {
  tj_builder *b;
  OK(tj_builder_new(&b));
  ck_assert_ptr_null(tj_build_call(b, "tan", acc(b, "x", "i", NULL), NULL));
  ck_assert_int_eq(tj_builder_assign(b, acc(b, "y", "i", NULL), acc(b, "x", "i", NULL), 0),
                   TJ_ERR_INVALID);
  ck_assert_ptr_nonnull(strstr(tj_last_error(), "unknown function 'tan'"));
  tj_builder_free(b);
  OK(tj_builder_new(&b));
  ck_assert_ptr_null(tj_build_access(b, "2x", 0, NULL));
  tj_builder_free(b);
  OK(tj_builder_new(&b));
  ck_assert_int_eq(tj_builder_assign(b, tj_build_literal(b, 1), acc(b, "x", "i", NULL), 0),
                   TJ_ERR_INVALID);
  ck_assert_ptr_nonnull(strstr(tj_last_error(), "must be an access"));
  ck_assert_ptr_null(tj_build_call(b, "min", acc(b, "x", "i", NULL), NULL));
  char buf[16];
  ck_assert_int_eq(tj_builder_print(b, buf, sizeof buf), TJ_ERR_INVALID);
  tj_builder_free(b);
}
END_TEST

/* tj_function_name lists the functions tj_build_call knows (the table in
 * ir/ops.def), each with its arity; tools/expr_scan.c relies on it. */
START_TEST(function_names_are_the_callable_ones) {
  const char *want[] = {"sqrt", "abs", "exp", "log", "min", "max", "pow", "or", "and",
                        "pair", "mask", "except"};
  int n = 0;
  for (const char *f; (f = tj_function_name(n)); n++) {
    ck_assert_int_lt(n, 12);
    ck_assert_str_eq(f, want[n]);
    tj_builder *b;
    OK(tj_builder_new(&b));
    int binary = n >= 4;
    ck_assert_ptr_nonnull(tj_build_call(b, f, acc(b, "x", "i", NULL),
                                        binary ? acc(b, "z", "i", NULL) : NULL));
    tj_builder_free(b);
  }
  ck_assert_int_eq(n, 12);
  ck_assert_ptr_null(tj_function_name(-1));
}
END_TEST

int main(void) {
  Suite *s = suite_create("builder");
  TCase *t = tcase_create("builder");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, builds_what_the_parser_parses);
  tcase_add_test(t, same_kernel_and_values_as_the_string);
  tcase_add_test(t, misuse_is_reported);
  tcase_add_test(t, function_names_are_the_callable_ones);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
