/* A code-generation backend: what the driver needs from whatever turns a
 * LirKernel into a callable kernel (QBE's Target). It is a struct of
 * function pointers over an opaque state the driver opens once per target
 * and context:
 *   open -> compile* / release* / print* / vector_bits -> close
 * Two implement it: LLVM ORC (backend_llvm.c, over jit/engine.c), the
 * default, and the loop IR's C rendering compiled by the system C compiler
 * (backend_c.c), for cross-checking the LLVM emitters.
 */
#ifndef TJ_JIT_BACKEND_H
#define TJ_JIT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../ir/diag.h"
#include "../ir/loop_ir.h"
#include "../runtime/abi.h"

typedef struct BackendOptions {
  int opt_level;            /* 0..3 */
  bool no_llvm_vectorize;   /* LLVM only: loop and SLP vectorizers off */
  bool fp_contract;         /* let a*b+c become an FMA */
} BackendOptions;

typedef struct BackendTimes {
  double ir_ms;        /* loop IR -> the backend's input (LLVM IR, C text) */
  double opt_ms;       /* the backend's optimizer, when timed apart */
  double codegen_ms;   /* machine code, linking / loading and lookup */
  double ir_cpu_ms, opt_cpu_ms, codegen_cpu_ms;  /* the same in thread CPU time */
} BackendTimes;

/* A compiled kernel: callable until the backend's release. */
typedef struct BackendKernel {
  tj_kernel_fn fn;
  void *handle;        /* the backend's own (a JitKernel, a dlopen handle) */
  BackendTimes times;
  size_t code_bytes;   /* memory its code and data take while loaded (LLVM:
                          JitKernel.code_bytes; C: the shared object's size) */
} BackendKernel;

/* Stages a backend may print. */
typedef enum {
  BE_STAGE_SOURCE,     /* the C the backend compiles (LLVM: the loop IR as C) */
  BE_STAGE_LLVM,       /* LLVM IR before the passes */
  BE_STAGE_LLVM_OPT,   /* LLVM IR after the passes */
  BE_STAGE_ASM         /* machine assembly */
} BackendStage;

typedef struct Backend {
  const char *name;    /* "llvm", "c" */
  /* Opens the state for a target (cpu/features NULL = the host's; a
   * backend that cannot target another CPU ignores them); NULL with d set
   * on failure. close releases it and every kernel still loaded. */
  void *(*open)(const char *cpu, const char *features, Diag *d);
  void (*close)(void *state);
  /* Compiles k; on success *out is callable until release; on failure *out
   * is zeroed and d says why. Thread-safe for one state. */
  bool (*compile)(void *state, const LirKernel *k, const BackendOptions *o,
                  BackendKernel *out, Diag *d);
  /* Unloads the kernel; safe on a zeroed BackendKernel and idempotent. */
  void (*release)(void *state, BackendKernel *bk);
  /* Writes stage st of k to f (compiling it again when needed); false with
   * d naming the stages it has when it has no such stage. */
  bool (*print)(void *state, const LirKernel *k, const BackendOptions *o, BackendStage st,
                FILE *f, Diag *d);
  /* The vector width in bits the lowering should target (128, 256, 512). */
  int (*vector_bits)(void *state);

  /* Relocatable objects for the disk cache; NULL when the backend has none
   * (then the disk cache does not apply). target names what an object was
   * built for (it goes into the disk key); emit_object's *bytes is malloc'd
   * and the caller's; add_object loads bytes (still the caller's) as
   * compile would. */
  const char *(*target)(void *state);
  bool (*emit_object)(void *state, const LirKernel *k, const BackendOptions *o, void **bytes,
                      size_t *len, char symbol[128], Diag *d);
  bool (*add_object)(void *state, const void *bytes, size_t len, const char *symbol,
                     BackendKernel *out, Diag *d);
} Backend;

/* The vector width for an LLVM-style feature string ("+avx2,+fma,..."):
 * AVX-512 512 bits, AVX/AVX2 256, else (and for NULL) 128. */
static inline int be_vector_bits_of(const char *features) {
  if (!features) return 128;
  return strstr(features, "+avx512f") ? 512
         : strstr(features, "+avx2") || strstr(features, "+avx,") ? 256 : 128;
}

extern const Backend backend_llvm;
extern const Backend backend_c;

#endif
