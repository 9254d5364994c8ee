/* Tensors of the public API built from row-major values, for the suites
 * that pin kernels by hand. */
#ifndef TJ_TESTS_TENSORS_H
#define TJ_TESTS_TENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "tensorjit.h"

/* A f64 tensor named name of format spec fmt and the given dims holding the
 * nonzeros of vals (row-major; NULL: empty), packed. Owned by the caller;
 * a failing call fails the running Check test with tensorjit's message. */
tj_tensor *tu_tensor(const char *name, const char *fmt, int order, const int64_t *dims,
                     const double *vals);

/* Runs k on its bound operands: ASSEMBLE then COMPUTE when split, else
 * EVALUATE; a failing phase fails the running Check test. */
void tu_run(tj_kernel *k, bool split);

#endif
