/* Tensors built from row-major values (tensors.h). */
#include "tensors.h"

#include <check.h>

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

tj_tensor *tu_tensor(const char *name, const char *fmt, int order, const int64_t *dims,
                     const double *vals) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, order, dims, &f, &t));
  int64_t n = 1;
  for (int m = 0; m < order; m++) n *= dims[m];
  for (int64_t k = 0; k < n && vals; k++) {
    if (vals[k] == 0) continue;
    int64_t c[TJ_MAX_ORDER_PUBLIC], r = k;
    for (int m = order - 1; m >= 0; m--) {
      c[m] = r % dims[m];
      r /= dims[m];
    }
    OK(tj_tensor_insert(t, c, vals[k]));
  }
  OK(tj_tensor_pack(t));
  return t;
}

void tu_run(tj_kernel *k, bool split) {
  if (split) {
    OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
    OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  } else {
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  }
}
