/* Hand-filled tj_storage for the suites that run kernels on the ABI
 * directly (check_jit*): constructors for dense and CSR storage, typed
 * access to index and value arrays, and the seeded generator their data uses.
 */
#ifndef TJ_TESTS_STORAGE_FIXTURE_H
#define TJ_TESTS_STORAGE_FIXTURE_H

#include <stdint.h>

#include "runtime/abi.h"
#include "tensorjit.h"

/* Bytes per value of dtype. */
int fx_dsize(int dtype);

/* A storage of the given order, dtype and index widths with identity mode
 * order and no arrays; free with fx_st_free. */
tj_storage *fx_st_new(int order, int dtype, int pw, int cw);

/* Frees s with every pos, crd and vals array it owns. */
void fx_st_free(tj_storage *s);

/* A zeroed dense vector of n entries (vals exactly n long). */
tj_storage *fx_st_vec(int dtype, int64_t n);

/* A random m x n CSR matrix (dense, compressed): each entry stored with
 * probability dens, values in [-1, 1), rows with i % 7 == 3 empty. */
tj_storage *fx_st_csr(int dtype, int w, int64_t m, int64_t n, double dens);

/* As fx_st_csr with f64 values, but row 0 fully stored (skewed rows). */
tj_storage *fx_st_csr_skewed(int w, int64_t m, int64_t n, double dens);

/* An f64 sparse vector (one compressed level) holding v[q] at crd[q]. */
tj_storage *fx_st_spvec(int64_t n, const int64_t *crd, const double *v,
                        int64_t nz, int w);

/* Entry i of an index array of w-byte (4 or 8) integers. */
int64_t fx_idx_get(const void *a, int w, int64_t i);
void fx_idx_set(void *a, int w, int64_t i, int64_t v);

/* Value i of s, converted from or to its dtype. */
double fx_val_get(const tj_storage *s, int64_t i);
void fx_val_set(tj_storage *s, int64_t i, double v);

/* The next number in [0, 1) of one xorshift sequence per process, always
 * started from the same seed (not thread-safe). */
double fx_rnd(void);

#endif
