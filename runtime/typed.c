/* tj_tensor_insert_<dtype> / tj_tensor_get_<dtype>: values in the
 * tensor's own dtype, exact (value.c). The suffix must name the tensor's
 * dtype: a mismatch is an error, never a silent conversion.
 */
#include "tensor.h"

/* TJ_OK when t is non-NULL, has dtype dt and coord (may be NULL for
 * order 0) lies inside its dims. */
static tj_status check(const tj_tensor *t, const int64_t *coord, tj_dtype dt,
                       const char *fn) {
  if (!t || (!coord && t->order > 0))
    return rt_set_error(TJ_ERR_INVALID, "%s: NULL argument", fn);
  if (t->st.dtype != (int32_t)dt)
    return rt_set_error(TJ_ERR_DTYPE, "%s: tensor %s holds %s values, not %s", fn,
                        t->name, tj_dtype_name((tj_dtype)t->st.dtype), tj_dtype_name(dt));
  return rt_check_coord(t, coord);
}

static tj_status insert(tj_tensor *t, const int64_t *coord, tj_dtype dt, RtVal v,
                        const char *fn) {
  tj_status st = check(t, coord, dt, fn);
  return st == TJ_OK ? rt_coo_push_val(t, coord, v) : st;
}

static tj_status get(const tj_tensor *t, const int64_t *coord, tj_dtype dt, RtVal *v,
                     const char *fn) {
  tj_status st = check(t, coord, dt, fn);
  if (st == TJ_OK) *v = rt_tensor_lookup(t, coord);
  return st;
}

tj_status tj_tensor_insert_f64(tj_tensor *t, const int64_t *coord, double value) {
  return insert(t, coord, TJ_F64, (RtVal){.f = value}, "tj_tensor_insert_f64");
}

tj_status tj_tensor_insert_f32(tj_tensor *t, const int64_t *coord, float value) {
  return insert(t, coord, TJ_F32, (RtVal){.f = value}, "tj_tensor_insert_f32");
}

tj_status tj_tensor_insert_i64(tj_tensor *t, const int64_t *coord, int64_t value) {
  return insert(t, coord, TJ_I64, (RtVal){.i = value}, "tj_tensor_insert_i64");
}

tj_status tj_tensor_insert_i32(tj_tensor *t, const int64_t *coord, int32_t value) {
  return insert(t, coord, TJ_I32, (RtVal){.i = value}, "tj_tensor_insert_i32");
}

tj_status tj_tensor_insert_i16(tj_tensor *t, const int64_t *coord, int16_t value) {
  return insert(t, coord, TJ_I16, (RtVal){.i = value}, "tj_tensor_insert_i16");
}

tj_status tj_tensor_insert_i8(tj_tensor *t, const int64_t *coord, int8_t value) {
  return insert(t, coord, TJ_I8, (RtVal){.i = value}, "tj_tensor_insert_i8");
}

tj_status tj_tensor_insert_bool(tj_tensor *t, const int64_t *coord, bool value) {
  return insert(t, coord, TJ_BOOL, (RtVal){.i = value}, "tj_tensor_insert_bool");
}

tj_status tj_tensor_get_f64(const tj_tensor *t, const int64_t *coord, double *out) {
  RtVal v;
  tj_status st = out ? get(t, coord, TJ_F64, &v, "tj_tensor_get_f64")
                     : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_f64: NULL argument");
  if (st == TJ_OK) *out = v.f;
  return st;
}

tj_status tj_tensor_get_f32(const tj_tensor *t, const int64_t *coord, float *out) {
  RtVal v;
  tj_status st = out ? get(t, coord, TJ_F32, &v, "tj_tensor_get_f32")
                     : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_f32: NULL argument");
  if (st == TJ_OK) *out = (float)v.f;
  return st;
}

tj_status tj_tensor_get_i64(const tj_tensor *t, const int64_t *coord, int64_t *out) {
  RtVal v;
  tj_status st = out ? get(t, coord, TJ_I64, &v, "tj_tensor_get_i64")
                     : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_i64: NULL argument");
  if (st == TJ_OK) *out = v.i;
  return st;
}

tj_status tj_tensor_get_i32(const tj_tensor *t, const int64_t *coord, int32_t *out) {
  RtVal v;
  tj_status st = out ? get(t, coord, TJ_I32, &v, "tj_tensor_get_i32")
                     : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_i32: NULL argument");
  if (st == TJ_OK) *out = (int32_t)(uint32_t)(uint64_t)v.i;
  return st;
}

tj_status tj_tensor_get_i16(const tj_tensor *t, const int64_t *coord, int16_t *out) {
  RtVal v;
  tj_status st = out ? get(t, coord, TJ_I16, &v, "tj_tensor_get_i16")
                     : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_i16: NULL argument");
  if (st == TJ_OK) *out = (int16_t)v.i;
  return st;
}

tj_status tj_tensor_get_i8(const tj_tensor *t, const int64_t *coord, int8_t *out) {
  RtVal v;
  tj_status st = out ? get(t, coord, TJ_I8, &v, "tj_tensor_get_i8")
                     : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_i8: NULL argument");
  if (st == TJ_OK) *out = (int8_t)v.i;
  return st;
}

tj_status tj_tensor_get_bool(const tj_tensor *t, const int64_t *coord, bool *out) {
  RtVal v;
  tj_status st = out ? get(t, coord, TJ_BOOL, &v, "tj_tensor_get_bool")
                     : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_bool: NULL argument");
  if (st == TJ_OK) *out = v.i != 0;
  return st;
}

/* The unsigned dtypes: RtVal.i holds the value's bits (u64 above 2^63 as
 * a negative int64), zero-extended from narrower widths. */
#define UNSIGNED_TYPED(suffix, DT, ctype)                                                \
  tj_status tj_tensor_insert_##suffix(tj_tensor *t, const int64_t *coord, ctype value) { \
    return insert(t, coord, DT, (RtVal){.i = (int64_t)(uint64_t)value},                 \
                  "tj_tensor_insert_" #suffix);                                          \
  }                                                                                      \
  tj_status tj_tensor_get_##suffix(const tj_tensor *t, const int64_t *coord, ctype *out) { \
    RtVal v;                                                                             \
    tj_status st = out ? get(t, coord, DT, &v, "tj_tensor_get_" #suffix)                 \
                       : rt_set_error(TJ_ERR_INVALID, "tj_tensor_get_" #suffix           \
                                      ": NULL argument");                                \
    if (st == TJ_OK) *out = (ctype)(uint64_t)v.i;                                        \
    return st;                                                                           \
  }
UNSIGNED_TYPED(u64, TJ_U64, uint64_t)
UNSIGNED_TYPED(u32, TJ_U32, uint32_t)
UNSIGNED_TYPED(u16, TJ_U16, uint16_t)
UNSIGNED_TYPED(u8, TJ_U8, uint8_t)
