/* Arms failure injection for a whole process (tensorjit_failinj, the CLI
 * linked with tests/failinj): TJ_FAILINJ_AT=n fails the n-th allocation
 * from startup, and at exit TJ_FAILINJ_REPORT names a file that gets
 * "fired seen" (1 or 0, and the allocations counted), so a script can
 * step n until a run completes (tests/failinj_cli.sh). */
#include <stdio.h>
#include <stdlib.h>

#include "failinj.h"

static void report(void) {
  const char *path = getenv("TJ_FAILINJ_REPORT");
  int fired = fi_fired();
  long long seen = (long long)fi_disarm();
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  fprintf(f, "%d %lld\n", fired, seen);
  fclose(f);
}

__attribute__((constructor)) static void arm_from_env(void) {
  const char *at = getenv("TJ_FAILINJ_AT");
  if (!at) return;
  atexit(report);
  fi_arm(atoll(at));
}
