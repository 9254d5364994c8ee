/* Helpers of golden printer tests: count a needle in printed IR, and assert
 * that it is there (printing the whole text on a miss). */
#ifndef TJ_TESTS_GOLDEN_H
#define TJ_TESTS_GOLDEN_H

#include <stdio.h>
#include <string.h>

static inline int count(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

#define HAS(text, needle)                                           \
  do {                                                              \
    if (!strstr(text, needle)) fprintf(stderr, "%s\n", text);       \
    ck_assert_msg(strstr(text, needle), "missing '%s'", needle);    \
  } while (0)

#endif
