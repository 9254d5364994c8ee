/* ThreadSanitizer still sees races in our code run by libomp's threads,
 * under the suppressions of tests/tsan.supp (scripts/tsan.sh): each mode
 * races on purpose inside tj_rt_parallel_for, and CTest passes only when
 * TSan reports that race (a TJ_TSAN build only).
 *   tsan_canary write    two threads add to one plain variable
 *   tsan_canary memset   two threads memset one buffer (an interceptor
 *                        called from our code inside a parallel region) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/abi.h"


volatile long canary_sum;
char canary_buf[4096];   /* not static: the memsets must stay */

static void canary_add(void *ctx, int64_t lo, int64_t hi) {
  (void)ctx;
  for (int64_t i = lo; i < hi; i++) canary_sum = canary_sum + i;   /* the race */
}

static void canary_memset(void *ctx, int64_t lo, int64_t hi) {
  (void)ctx;
  for (int64_t i = lo; i < hi; i++) memset(canary_buf, (int)i, sizeof canary_buf);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "write";
  tj_rt_set_threads(2);
  /* Static: one block of rows per thread, so both threads run the body. */
  tj_rt_parallel_for_sched(0, 2000, NULL, 0, NULL, 0, TJ_PAR_STATIC,
                           strcmp(mode, "memset") == 0 ? canary_memset : canary_add, NULL);
  printf("tsan_canary %s: done (sum %ld, byte %d)\n", mode, canary_sum, canary_buf[0]);
  return 0;
}
