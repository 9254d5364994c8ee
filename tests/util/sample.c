/* TJ_TEST_SAMPLE: a fixed subset of the large corpora (sample.h). */
#include "sample.h"

#include <stdio.h>
#include <stdlib.h>

int tu_sample(void) {
  static int n;   /* read once: the suites call this from one thread */
  if (!n) {
    const char *e = getenv("TJ_TEST_SAMPLE");
    long v = e ? strtol(e, NULL, 10) : 1;
    n = v > 1 && v < 1000000 ? (int)v : 1;
    if (n > 1) fprintf(stderr, "TJ_TEST_SAMPLE=%d: one case in %d of each table runs\n", n, n);
  }
  return n;
}

bool tu_sampled(long i) { return i % tu_sample() == 0; }
