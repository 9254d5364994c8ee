/* A fixed subset of a large test corpus, for slow builds: with
 * TJ_TEST_SAMPLE=n (scripts/tsan.sh sets it) a table's case i runs when
 * i % n == 0, so the first case of every table always runs and about one
 * in n of the rest; unset, empty or 1: every case.
 *
 *   START_TEST(test_family) { if (!tu_sampled(_i - first)) return; ... }
 */
#ifndef TJ_TESTS_SAMPLE_H
#define TJ_TESTS_SAMPLE_H

#include <stdbool.h>

/* n from TJ_TEST_SAMPLE (1 when unset or not a positive count); says so
 * on stderr once when n > 1. */
int tu_sample(void);
/* Whether case i (counted from 0 within its table) runs. */
bool tu_sampled(long i);

#endif
