/* Counting allocation wrappers for --wrap (see failinj.h). */
#include <errno.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failinj.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
char *__real_strdup(const char *s);
FILE *__real_open_memstream(char **buf, size_t *len);

static atomic_bool armed, all_after;
static atomic_bool fired;
static atomic_int_fast64_t seen, fail_at;

void fi_arm(int64_t n) {
  atomic_store(&all_after, false);
  atomic_store(&seen, 0);
  atomic_store(&fail_at, n);
  atomic_store(&fired, false);
  atomic_store(&armed, true);
}

void fi_arm_all(int64_t n) {
  fi_arm(n);
  atomic_store(&all_after, true);
}

int64_t fi_disarm(void) {
  atomic_store(&armed, false);
  return atomic_load(&seen);
}

bool fi_fired(void) { return atomic_load(&fired); }

/* True when this allocation is the one to fail. */
static bool fail_now(void) {
  if (!atomic_load(&armed)) return false;
  int64_t k = atomic_fetch_add(&seen, 1) + 1;
  int64_t at = atomic_load(&fail_at);
  if (k != at && !(atomic_load(&all_after) && k > at)) return false;
  atomic_store(&fired, true);
  if (getenv("TJ_FAILINJ_TRACE")) {   /* where the failing allocation is */
    void *frames[16];
    fprintf(stderr, "failinj: allocation %lld fails here:\n", (long long)k);
    backtrace_symbols_fd(frames, backtrace(frames, 16), 2);
  }
  errno = ENOMEM;
  return true;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { return fail_now() ? NULL : __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n) {
  return fail_now() ? NULL : __real_aligned_alloc(align, n);
}
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
FILE *__wrap_open_memstream(char **buf, size_t *len) {
  return fail_now() ? NULL : __real_open_memstream(buf, len);
}

int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

bool fi_leaked(void) {
  return __lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check() != 0;
}
