/* Intel MKL loaded at run time for the benchmark programs (mkl_rt.h). */
#include "mkl_rt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* 1 loaded, -1 not loadable (g_status says why), 0 not tried. */
static int g_loaded;
static char g_status[320];

#ifdef TJ_HAVE_MKL
MklRt mkl;

int mkl_serv_intel_cpu_true(void);
int mkl_serv_intel_cpu_true(void) { return 1; }

/* MKL's threading layer must run on the OpenMP runtime that answers the
 * process's omp_* calls: its Intel layer loads libiomp5 (Debian: LLVM's
 * libomp) but calls omp_get_thread_num through the global scope, so in a
 * process where libgomp answers (the gcc build) every MKL thread would be
 * thread 0 and the 2-thread results wrong. */
static int threading_layer(const char **name) {
  Dl_info info;
  void *f = dlsym(RTLD_DEFAULT, "omp_get_thread_num");
  if (f && dladdr(f, &info) && info.dli_fname && strstr(info.dli_fname, "libgomp")) {
    *name = "GNU OpenMP layer (libgomp)";
    return MKL_THREADING_GNU;
  }
  *name = "Intel OpenMP layer (LLVM libomp)";
  return MKL_THREADING_INTEL;
}

int mkl_rt_load(void) {
  if (g_loaded) return g_loaded > 0;
  g_loaded = -1;
  void *h = dlopen(TJ_MKL_RT, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_status, sizeof g_status, "MKL: cannot load %s (%s); its rows are omitted",
             TJ_MKL_RT, dlerror());
    return 0;
  }
#define X(f)                                                                               \
  if (!(*(void **)&mkl.f = dlsym(h, #f))) {                                                \
    snprintf(g_status, sizeof g_status, "MKL: %s has no %s; its rows are omitted", TJ_MKL_RT, \
             #f);                                                                          \
    return 0;                                                                              \
  }
  X(cblas_dgemm) X(cblas_sgemm) MKL_RT_FUNCS(X)
#undef X
  const char *layer;
  mkl.MKL_Set_Threading_Layer(threading_layer(&layer));   /* before any other MKL call */
  char ver[200];
  mkl.MKL_Get_Version_String(ver, (int)sizeof ver);
  snprintf(g_status, sizeof g_status,
           "%.120s; %s; mkl_serv_intel_cpu_true() overridden to 1 (Intel code paths on any x86)",
           ver, layer);
  g_loaded = 1;
  return 1;
}
#else
int mkl_rt_load(void) {
  snprintf(g_status, sizeof g_status,
           "MKL: not configured (libmkl_rt not found, or -DTJ_BENCH_MKL=OFF; bash "
           "scripts/deps.sh --with-mkl installs it); its rows are omitted");
  g_loaded = -1;
  return 0;
}
#endif

const char *mkl_rt_status(void) {
  if (!g_loaded) mkl_rt_load();
  return g_status;
}
