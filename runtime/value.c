/* Values in a tensor's dtype, exact: RtVal carries an integer or bool
 * value as an integer and an f64 or f32 value as a double, so an i64 above
 * 2^53 goes through insert, pack, convert and get unchanged. The
 * double-valued API (tj_tensor_insert / tj_tensor_get) converts at the
 * edge, rounding and saturating into integer dtypes; into bool, nonzero is
 * true, except -inf (the identity of max, i.e. of or, as +inf is min's).
 * The dtypes are one table.
 */
#include <math.h>
#include <string.h>

#include "tensor.h"

static const struct {
  const char *name;
  int size;
  bool is_int;       /* integer or bool: RtVal.i */
  int64_t min, max;  /* integers */
} dtypes[TJ_NDTYPES] = {
    [TJ_F64] = {"f64", 8, false, 0, 0},
    [TJ_F32] = {"f32", 4, false, 0, 0},
    [TJ_I64] = {"i64", 8, true, INT64_MIN, INT64_MAX},
    [TJ_I32] = {"i32", 4, true, INT32_MIN, INT32_MAX},
    [TJ_I16] = {"i16", 2, true, INT16_MIN, INT16_MAX},
    [TJ_I8] = {"i8", 1, true, INT8_MIN, INT8_MAX},
    [TJ_BOOL] = {"bool", 1, true, 0, 1},
};

bool rt_dtype_valid(int dt) { return dt >= 0 && dt < TJ_NDTYPES; }

const char *tj_dtype_name(tj_dtype t) { return rt_dtype_valid(t) ? dtypes[t].name : "?"; }

tj_status tj_dtype_parse(const char *name, tj_dtype *out) {
  if (!name || !out) return rt_set_error(TJ_ERR_INVALID, "tj_dtype_parse: NULL argument");
  for (int t = 0; t < TJ_NDTYPES; t++)
    if (strcmp(name, dtypes[t].name) == 0) {
      *out = (tj_dtype)t;
      return TJ_OK;
    }
  return rt_set_error(TJ_ERR_DTYPE, "unknown dtype '%s' (f64, f32, i64, i32, i16, i8, "
                      "bool)", name);
}

int rt_dtype_size(tj_dtype dt) { return rt_dtype_valid(dt) ? dtypes[dt].size : 8; }

bool rt_dtype_is_int(int dt) { return rt_dtype_valid(dt) && dtypes[dt].is_int; }

static bool is_int(int dt) { return rt_dtype_is_int(dt); }

/* v wrapped into dt's width, as two's complement; bool: nonzero is 1. */
static int64_t wrap(int dt, int64_t v) {
  switch (dt) {
  case TJ_I32: return (int32_t)(uint32_t)(uint64_t)v;
  case TJ_I16: return (int16_t)(uint16_t)(uint64_t)v;
  case TJ_I8: return (int8_t)(uint8_t)(uint64_t)v;
  case TJ_BOOL: return v != 0;
  default: return v;
  }
}

/* Rounds v to the nearest integer (halves away from zero), saturating at
 * [lo, hi] (a plain cast of an out-of-range double is undefined behaviour).
 * round() is exact; v + 0.5 is not at and above 2^52, where it rounded
 * 2^52 + 1 to 2^52 + 2. */
static int64_t to_int(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi; /* (double)INT64_MAX is 2^63: +inf, a min over
                                     nothing, is the type's max, as in the kernels */
  return (int64_t)round(v);
}

RtVal rt_val_from_double(int dt, double v) {
  RtVal r;
  if (dt == TJ_BOOL) r.i = v != 0 && v == v && v != -(double)INFINITY;
  else if (is_int(dt)) r.i = to_int(v, dtypes[dt].min, dtypes[dt].max);
  else r.f = v;
  return r;
}

RtVal rt_val_from_int(int dt, int64_t v) {
  RtVal r;
  if (dt == TJ_BOOL) r.i = v != 0;
  else if (is_int(dt)) r.i = v < dtypes[dt].min ? dtypes[dt].min : v > dtypes[dt].max ? dtypes[dt].max : v;
  else r.f = (double)v;
  return r;
}

RtVal rt_val_neg(int dt, RtVal v) {
  if (!is_int(dt)) return (RtVal){.f = -v.f};
  return rt_val_from_int(dt, v.i == INT64_MIN ? INT64_MAX : -v.i);
}

double rt_val_to_double(int dt, RtVal v) { return is_int(dt) ? (double)v.i : v.f; }

RtVal rt_val_add(int dt, RtVal a, RtVal b) {
  RtVal r;
  if (is_int(dt)) r.i = wrap(dt, (int64_t)((uint64_t)a.i + (uint64_t)b.i));
  else r.f = a.f + b.f;
  return r;
}

RtVal rt_val_cast(int from, int to, RtVal v) {
  if (is_int(from) && is_int(to)) return (RtVal){.i = wrap(to, v.i)};
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
  case TJ_I16: r.i = ((const int16_t *)s->vals)[i]; break;
  case TJ_I8: r.i = ((const int8_t *)s->vals)[i]; break;
  case TJ_BOOL: r.i = ((const uint8_t *)s->vals)[i] != 0; break;
  default: r.i = 0;
  }
  return r;
}

void rt_storage_put(tj_storage *s, int64_t i, RtVal v) {
  switch ((tj_dtype)s->dtype) {
  case TJ_F64: ((double *)s->vals)[i] = v.f; break;
  case TJ_F32: ((float *)s->vals)[i] = (float)v.f; break;
  case TJ_I64: ((int64_t *)s->vals)[i] = v.i; break;
  case TJ_I32: ((int32_t *)s->vals)[i] = (int32_t)wrap(TJ_I32, v.i); break;
  case TJ_I16: ((int16_t *)s->vals)[i] = (int16_t)wrap(TJ_I16, v.i); break;
  case TJ_I8: ((int8_t *)s->vals)[i] = (int8_t)wrap(TJ_I8, v.i); break;
  case TJ_BOOL: ((uint8_t *)s->vals)[i] = v.i != 0; break;
  }
}
