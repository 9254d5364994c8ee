/* Typed insert/get (tj_tensor_insert_<dtype>, tj_tensor_get_<dtype>):
 * values stay exact in their dtype through insert, duplicate sums, pack,
 * format conversion and casts between integer dtypes; a suffix that does
 * not match the tensor's dtype is an error. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static const int64_t big = (INT64_C(1) << 53) + 1;   /* not a double */

static tj_tensor *matrix(const char *fmt, tj_dtype dt) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  int64_t dims[2] = {3, 4};
  tj_tensor *t;
  OK(tj_tensor_new("A", dt, 2, dims, &f, &t));
  return t;
}

/* (0,1) = 2^53 + 1, then + 1 as a duplicate: 2^53 + 2; (2,3) = -2^62 - 3;
 * (1,0) = INT64_MAX. Exact after pack, after conversion to CSC and to
 * all-dense, and after a cast to i64 (a copy). */
static const char *const i64_formats[] = {"ds", "ss", "uq", "dd", "ds:1,0"};

START_TEST(i64_values_are_exact) {
  tj_tensor *t = matrix(i64_formats[_i], TJ_I64);
  int64_t a[2] = {0, 1}, b[2] = {2, 3}, c[2] = {1, 0}, v;
  OK(tj_tensor_insert_i64(t, a, big));
  OK(tj_tensor_insert_i64(t, b, -(INT64_C(1) << 62) - 3));
  OK(tj_tensor_insert_i64(t, c, INT64_MAX));
  OK(tj_tensor_insert_i64(t, a, 1));
  OK(tj_tensor_pack(t));
  tj_format csc, dense = tj_format_dense(2);
  OK(tj_format_parse("ds:1,0", &csc));
  tj_tensor *u, *d, *k;
  OK(tj_tensor_convert(t, &csc, &u));
  OK(tj_tensor_convert(t, &dense, &d));
  OK(tj_tensor_cast(t, TJ_I64, &k));
  tj_tensor *all[] = {t, u, d, k};
  for (int i = 0; i < 4; i++) {
    OK(tj_tensor_get_i64(all[i], a, &v));
    ck_assert_msg(v == big + 1, "tensor %d: %lld", i, (long long)v);
    OK(tj_tensor_get_i64(all[i], b, &v));
    ck_assert(v == -(INT64_C(1) << 62) - 3);
    OK(tj_tensor_get_i64(all[i], c, &v));
    ck_assert(v == INT64_MAX);
    OK(tj_tensor_get_i64(all[i], (int64_t[]){2, 2}, &v));
    ck_assert(v == 0);
  }
  /* a second pack merges new inserts with the packed entries, exactly */
  OK(tj_tensor_insert_i64(t, b, 1));
  OK(tj_tensor_pack(t));
  OK(tj_tensor_get_i64(t, b, &v));
  ck_assert(v == -(INT64_C(1) << 62) - 2);
  OK(tj_tensor_get_i64(t, a, &v));
  ck_assert(v == big + 1);
  for (int i = 0; i < 4; i++) tj_tensor_free(all[i]);
}
END_TEST

/* i32 sums wrap around; f32 keeps its float; f64 typed = untyped. */
START_TEST(other_dtypes_round_trip) {
  int64_t a[2] = {2, 1};
  tj_tensor *t = matrix("ds", TJ_I32);
  int32_t iv;
  OK(tj_tensor_insert_i32(t, a, INT32_MAX));
  OK(tj_tensor_insert_i32(t, a, 2));
  OK(tj_tensor_pack(t));
  OK(tj_tensor_get_i32(t, a, &iv));
  ck_assert_int_eq(iv, INT32_MIN + 1);
  tj_tensor_free(t);
  t = matrix("sd", TJ_F32);
  float fv;
  OK(tj_tensor_insert_f32(t, a, 0.1f));
  OK(tj_tensor_pack(t));
  OK(tj_tensor_get_f32(t, a, &fv));
  ck_assert(fv == 0.1f);
  tj_tensor_free(t);
  t = matrix("ds", TJ_F64);
  double dv, uv;
  OK(tj_tensor_insert_f64(t, a, 0.1));
  OK(tj_tensor_insert(t, a, 0.2));
  OK(tj_tensor_pack(t));
  OK(tj_tensor_get_f64(t, a, &dv));
  OK(tj_tensor_get(t, a, &uv));
  ck_assert(dv == 0.1 + 0.2 && uv == dv);
  tj_tensor_free(t);
}
END_TEST

/* Casting between integer dtypes keeps i64 exact; i64 -> i32 keeps the
 * low 32 bits (2^32 + 5 -> 5). */
START_TEST(integer_casts_are_exact) {
  tj_tensor *t = matrix("ds", TJ_I64), *u, *w;
  int64_t a[2] = {1, 3}, b[2] = {0, 0}, v;
  int32_t v32;
  OK(tj_tensor_insert_i64(t, a, big));
  OK(tj_tensor_insert_i64(t, b, (INT64_C(1) << 32) + 5));
  OK(tj_tensor_pack(t));
  OK(tj_tensor_cast(t, TJ_I32, &u));
  OK(tj_tensor_cast(u, TJ_I64, &w));
  OK(tj_tensor_get_i32(u, b, &v32));
  ck_assert_int_eq(v32, 5);
  OK(tj_tensor_get_i64(w, b, &v));
  ck_assert(v == 5);
  tj_tensor_free(u);
  tj_tensor_free(w);
  OK(tj_tensor_cast(t, TJ_I64, &u));
  OK(tj_tensor_get_i64(u, a, &v));
  ck_assert(v == big);
  tj_tensor_free(u);
  tj_tensor_free(t);
}
END_TEST

/* i16 and i8 duplicates sum with wrap-around (100 + 100 is -56 in i8);
 * bool duplicates are or'ed; the double API saturates i8 (300 -> 127) and
 * makes any nonzero but -inf true; casts between them keep the low bits. */
START_TEST(narrow_dtypes) {
  tj_tensor *a8 = matrix("ds", TJ_I8), *a16 = matrix("ss", TJ_I16), *b = matrix("ds:1,0", TJ_BOOL), *u;
  int64_t c[2] = {1, 2}, d[2] = {2, 0}, e[2] = {0, 3};
  int8_t v8;
  int16_t v16;
  bool vb;
  double dv;
  OK(tj_tensor_insert_i8(a8, c, 100));
  OK(tj_tensor_insert_i8(a8, c, 100));
  OK(tj_tensor_insert(a8, d, 300));
  OK(tj_tensor_insert_i16(a16, c, 30000));
  OK(tj_tensor_insert_i16(a16, c, 30000));
  OK(tj_tensor_insert_bool(b, c, true));
  OK(tj_tensor_insert_bool(b, c, true));
  OK(tj_tensor_insert(b, d, -0.5));
  OK(tj_tensor_insert(b, e, -(double)INFINITY));
  OK(tj_tensor_pack(a8));
  OK(tj_tensor_pack(a16));
  OK(tj_tensor_pack(b));
  OK(tj_tensor_get_i8(a8, c, &v8));
  ck_assert_int_eq(v8, -56);
  OK(tj_tensor_get_i8(a8, d, &v8));
  ck_assert_int_eq(v8, 127);
  OK(tj_tensor_get_i16(a16, c, &v16));
  ck_assert_int_eq(v16, 60000 - 65536);
  OK(tj_tensor_get_bool(b, c, &vb));
  ck_assert(vb);
  OK(tj_tensor_get(b, c, &dv));
  ck_assert(dv == 1);
  OK(tj_tensor_get_bool(b, d, &vb));
  ck_assert(vb);
  OK(tj_tensor_get_bool(b, e, &vb));
  ck_assert(!vb);
  ck_assert_int_eq(tj_tensor_get_bool(a8, c, &vb), TJ_ERR_DTYPE);
  OK(tj_tensor_cast(a16, TJ_I8, &u));   /* -5536 = 0xea60: low byte 0x60 */
  OK(tj_tensor_get_i8(u, c, &v8));
  ck_assert_int_eq(v8, 0x60);
  tj_tensor_free(u);
  OK(tj_tensor_cast(a8, TJ_BOOL, &u));
  OK(tj_tensor_get_bool(u, c, &vb));
  ck_assert(vb);
  tj_tensor_free(u);
  tj_dtype t;
  OK(tj_dtype_parse("bool", &t));
  ck_assert_int_eq(t, TJ_BOOL);
  ck_assert_str_eq(tj_dtype_name(TJ_I16), "i16");
  ck_assert_int_eq(tj_dtype_parse("u8", &t), TJ_ERR_DTYPE);
  tj_tensor_free(a8);
  tj_tensor_free(a16);
  tj_tensor_free(b);
}
END_TEST

START_TEST(mismatched_dtypes_are_refused) {
  tj_tensor *t = matrix("ds", TJ_I64);
  int64_t a[2] = {0, 0}, out[2] = {3, 0};
  double d;
  ck_assert_int_eq(tj_tensor_insert_f64(t, a, 1.5), TJ_ERR_DTYPE);
  ck_assert_str_eq(tj_last_error(), "tj_tensor_insert_f64: tensor A holds i64 values, not f64");
  ck_assert_int_eq(tj_tensor_get_f64(t, a, &d), TJ_ERR_DTYPE);
  ck_assert_str_eq(tj_last_error(), "tj_tensor_get_f64: tensor A holds i64 values, not f64");
  ck_assert_int_eq(tj_tensor_insert_i64(t, out, 1), TJ_ERR_SHAPE);
  ck_assert_str_eq(tj_last_error(), "tensor A: coordinate 3 in mode 0 is out of range 0..2");
  ck_assert_int_eq(tj_tensor_get_i64(t, a, NULL), TJ_ERR_INVALID);
  OK(tj_tensor_pack(t));
  ck_assert_int_eq(tj_tensor_nnz(t), 0);
  tj_tensor_free(t);
}
END_TEST

/* A double into an integer tensor (tj_tensor_insert, a file's values, a
 * cast) rounds to nearest, halves away from zero, exactly for every
 * integral double: 2^52 + 1 stays (v + 0.5 rounded it to 2^52 + 2). */
START_TEST(doubles_round_exactly_into_integers) {
  tj_tensor *t = matrix("ds", TJ_I64);
  const double in[4] = {4503599627370497.0, -4503599627370497.0, 2.5, -2.5};
  const int64_t want[4] = {(INT64_C(1) << 52) + 1, -(INT64_C(1) << 52) - 1, 3, -3};
  for (int64_t k = 0; k < 4; k++) OK(tj_tensor_insert(t, (int64_t[]){0, k}, in[k]));
  OK(tj_tensor_pack(t));
  for (int64_t k = 0; k < 4; k++) {
    int64_t v;
    OK(tj_tensor_get_i64(t, (int64_t[]){0, k}, &v));
    ck_assert_msg(v == want[k], "entry %lld: %lld", (long long)k, (long long)v);
  }
  tj_tensor_free(t);
}
END_TEST

static Suite *typed_suite(void) {
  Suite *s = suite_create("typed");
  TCase *c = tcase_create("values");
  tcase_add_loop_test(c, i64_values_are_exact, 0, sizeof i64_formats / sizeof i64_formats[0]);
  tcase_add_test(c, other_dtypes_round_trip);
  tcase_add_test(c, integer_casts_are_exact);
  tcase_add_test(c, mismatched_dtypes_are_refused);
  tcase_add_test(c, narrow_dtypes);
  tcase_add_test(c, doubles_round_exactly_into_integers);
  suite_add_tcase(s, c);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(typed_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
