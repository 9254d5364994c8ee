/* Helpers that JIT-compiled kernels call (see abi.h).
 *
 * Output arrays grow by doubling through tj_rt_reserve; new space is
 * zeroed so a kernel may accumulate into it. Arrays are plain malloc/free
 * memory, the same the runtime uses, so a tensor owns what a kernel grew.
 * No helper aborts: failures come back as TJ_KERNEL_* codes.
 */
#include <stdlib.h>

#include "tensor.h"

static int elem_size(const tj_storage *s, int32_t arr) {
  if (arr == TJ_ARR_POS) return s->pos_width;
  if (arr == TJ_ARR_CRD) return s->crd_width;
  return rt_dtype_size((tj_dtype)s->dtype);
}

int32_t tj_rt_reserve(tj_storage *s, int32_t arr, int32_t level, int64_t need) {
  void **p;
  int64_t *cap;
  if (arr == TJ_ARR_VALS) {
    p = &s->vals, cap = &s->vals_cap;
  } else {
    if (level < 0 || level >= s->order) return TJ_KERNEL_SHAPE;
    tj_level_storage *lv = &s->levels[level];
    if (arr == TJ_ARR_POS) p = &lv->pos, cap = &lv->pos_cap;
    else p = &lv->crd, cap = &lv->crd_cap;
  }
  if (need <= *cap && *p) return TJ_KERNEL_OK;
  int64_t ncap = *cap < 16 ? 16 : *cap;
  while (ncap < need) {
    if (ncap > INT64_MAX / 2) return TJ_KERNEL_NOMEM;
    ncap *= 2;
  }
  int64_t w = elem_size(s, arr);
  if (ncap > INT64_MAX / w || (uint64_t)(ncap * w) > SIZE_MAX)
    return TJ_KERNEL_NOMEM;
  char *q = realloc(*p, (size_t)(ncap * w));
  if (!q) return TJ_KERNEL_NOMEM;
  int64_t old = *p ? *cap : 0;
  memset(q + old * w, 0, (size_t)((ncap - old) * w));
  *p = q;
  *cap = ncap;
  return TJ_KERNEL_OK;
}

int32_t tj_rt_alloc(int64_t n, void **out) {
  *out = NULL;
  if (n <= 0) return TJ_KERNEL_OK;
  if ((uint64_t)n > SIZE_MAX) return TJ_KERNEL_NOMEM;
  *out = calloc(1, (size_t)n);
  return *out ? TJ_KERNEL_OK : TJ_KERNEL_NOMEM;
}

void tj_rt_free(void *p) { free(p); }

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

void tj_rt_sort_crd(void *crd, int64_t n, int32_t w) {
  if (!crd || n < 2) return;
  qsort(crd, (size_t)n, (size_t)w, w == 4 ? cmp_i32 : cmp_i64);
}
