/* Intel MKL for the benchmark programs (tjbench, tjgett, tjblocked), loaded
 * at run time: the libmkl_rt CMake found (scripts/deps.sh --with-mkl) is
 * dlopen'ed RTLD_LOCAL, not linked, because mkl_rt and OpenBLAS both define
 * cblas_dgemm and a link would hand both peers whichever the loader met
 * first; dlsym on MKL's handle finds MKL's own. MKL 2020 runs slow code
 * paths on CPUs that are not Intel's unless the program defines
 * mkl_serv_intel_cpu_true() (mkl_rt.c does; the programs link with
 * -rdynamic so the definition interposes on MKL's), as an informed user on
 * AMD does. Built without MKL's headers (TJ_HAVE_MKL unset), mkl_rt_load
 * fails with a note. */
#ifndef TJ_BENCH_MKL_RT_H
#define TJ_BENCH_MKL_RT_H

#ifdef TJ_HAVE_MKL
#include <mkl_service.h>
#include <mkl_spblas.h>

/* MKL's CBLAS GEMMs, declared here rather than by mkl_cblas.h, whose enums
 * clash with OpenBLAS's cblas.h in a program that compares the two; the
 * layout and transpose arguments are CBLAS's numbers. */
enum { TJ_CBLAS_ROW_MAJOR = 101, TJ_CBLAS_COL_MAJOR = 102, TJ_CBLAS_NO_TRANS = 111, TJ_CBLAS_TRANS = 112 };
typedef void MklDgemm(int layout, int ta, int tb, MKL_INT m, MKL_INT n, MKL_INT k, double alpha,
                      const double *a, MKL_INT lda, const double *b, MKL_INT ldb, double beta,
                      double *c, MKL_INT ldc);
typedef void MklSgemm(int layout, int ta, int tb, MKL_INT m, MKL_INT n, MKL_INT k, float alpha,
                      const float *a, MKL_INT lda, const float *b, MKL_INT ldb, float beta,
                      float *c, MKL_INT ldc);

/* The MKL entry points the programs call, besides the GEMMs. */
#define MKL_RT_FUNCS(X)                                                                \
  X(MKL_Set_Num_Threads) X(MKL_Get_Version_String) X(MKL_Set_Threading_Layer)        \
  X(mkl_sparse_d_create_csr) X(mkl_sparse_d_create_csc) X(mkl_sparse_d_create_coo)   \
  X(mkl_sparse_d_create_bsr) X(mkl_sparse_destroy) X(mkl_sparse_set_mv_hint)         \
  X(mkl_sparse_set_mm_hint) X(mkl_sparse_optimize) X(mkl_sparse_d_mv)                \
  X(mkl_sparse_d_mm) X(mkl_sparse_d_add) X(mkl_sparse_sp2m) X(mkl_sparse_order)      \
  X(mkl_sparse_d_export_csr)

typedef struct MklRt {
  MklDgemm *cblas_dgemm;
  MklSgemm *cblas_sgemm;
#define X(f) __typeof__(f) *f;
  MKL_RT_FUNCS(X)
#undef X
} MklRt;

/* Filled by a successful mkl_rt_load. */
extern MklRt mkl;
#endif

/* Loads MKL once (its threading layer set to the process's OpenMP runtime
 * first): 1 when loaded, 0 when not (mkl_rt_status says why). */
int mkl_rt_load(void);
/* MKL's version and how it runs, or why it is absent (one line). */
const char *mkl_rt_status(void);

#endif
