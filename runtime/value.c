/* Values in a tensor's dtype, exact: RtVal carries an i64 or i32 value as
 * an integer and an f64 or f32 value as a double, so an i64 above 2^53
 * goes through insert, pack, convert and get unchanged. The double-valued
 * API (tj_tensor_insert / tj_tensor_get) converts at the edge, rounding
 * and saturating into integer dtypes.
 */
#include "tensor.h"

static bool is_int(int dt) { return dt == TJ_I64 || dt == TJ_I32; }

/* Rounds v to the nearest integer, saturating at [lo, hi] (a plain cast of
 * an out-of-range double is undefined behaviour). */
static int64_t to_int(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi; /* (double)INT64_MAX is 2^63: +inf, a min over
                                     nothing, is the type's max, as in the kernels */
  return (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
}

RtVal rt_val_from_double(int dt, double v) {
  RtVal r;
  if (dt == TJ_I64) r.i = to_int(v, INT64_MIN, INT64_MAX);
  else if (dt == TJ_I32) r.i = to_int(v, INT32_MIN, INT32_MAX);
  else r.f = v;
  return r;
}

double rt_val_to_double(int dt, RtVal v) { return is_int(dt) ? (double)v.i : v.f; }

RtVal rt_val_add(int dt, RtVal a, RtVal b) {
  RtVal r;
  if (is_int(dt)) r.i = (int64_t)((uint64_t)a.i + (uint64_t)b.i);
  else r.f = a.f + b.f;
  return r;
}

RtVal rt_val_cast(int from, int to, RtVal v) {
  return is_int(from) == is_int(to) ? v : rt_val_from_double(to, rt_val_to_double(from, v));
}

bool rt_val_is_zero(int dt, RtVal v) { return is_int(dt) ? v.i == 0 : v.f == 0; }

RtVal rt_storage_get(const tj_storage *s, int64_t i) {
  RtVal r;
  switch ((tj_dtype)s->dtype) {
  case TJ_F64: r.f = ((const double *)s->vals)[i]; break;
  case TJ_F32: r.f = ((const float *)s->vals)[i]; break;
  case TJ_I64: r.i = ((const int64_t *)s->vals)[i]; break;
  case TJ_I32: r.i = ((const int32_t *)s->vals)[i]; break;
  default: r.i = 0;
  }
  return r;
}

void rt_storage_put(tj_storage *s, int64_t i, RtVal v) {
  switch ((tj_dtype)s->dtype) {
  case TJ_F64: ((double *)s->vals)[i] = v.f; break;
  case TJ_F32: ((float *)s->vals)[i] = (float)v.f; break;
  case TJ_I64: ((int64_t *)s->vals)[i] = v.i; break;
  case TJ_I32: ((int32_t *)s->vals)[i] = (int32_t)(uint32_t)(uint64_t)v.i; break;
  }
}
