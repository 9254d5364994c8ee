/* How much memory this process may use, and refusals of sizes that cannot
 * fit in it, made before anything is allocated or read: a tensor whose
 * dense levels alone exceed memory, a file whose header declares more
 * entries than memory holds. Without them such an input fails late (after
 * reading gigabytes) or, under overcommit, is killed by the kernel. */
#include <stdio.h>
#include <unistd.h>

#include "tensor.h"

/* A cgroup's limit in bytes from file, or 0 (none, "max", unreadable). */
static double cgroup_limit(const char *file) {
  FILE *f = fopen(file, "r");
  unsigned long long v = 0;
  if (f) {
    if (fscanf(f, "%llu", &v) != 1) v = 0;
    fclose(f);
  }
  return (double)v;
}

double rt_memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  double mem = pages > 0 && size > 0 ? (double)pages * (double)size : 0;
  static const char *limits[] = {"/sys/fs/cgroup/memory.max",
                                 "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  for (int k = 0; k < 2; k++) {
    double lim = cgroup_limit(limits[k]);
    if (lim > 0 && (mem == 0 || lim < mem)) mem = lim;
  }
  return mem;
}

tj_status rt_check_fits(const char *what, double bytes) {
  if (bytes < (double)(1u << 30)) return TJ_OK;   /* no machine we run on has less */
  double mem = rt_memory_bytes();
  if (mem == 0 || bytes <= mem) return TJ_OK;
  return rt_set_error(TJ_ERR_NOMEM, "%s would need %.3g GB, more than this machine's memory "
                      "(%.3g GB)", what, bytes / 1e9, mem / 1e9);
}
