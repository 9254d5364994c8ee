/* The JIT engine: one ORC LLJIT per JitEngine, a target machine chosen from
 * the host CPU (or a forced cpu/feature string), the runtime helpers bound as
 * absolute symbols, and libc/libm visible through a process search
 * generator. jit_compile takes a LirKernel through emit -> verify ->
 * LLVMRunPasses -> (optional IR / assembly text) -> LLJIT and hands back a
 * callable function whose code jit_kernel_release removes again.
 * Machine code is emitted by a target machine that one compile holds at a
 * time (taken from the engine's spares, or new) into an object file that
 * LLJIT's object layer links, so compiles on one engine run concurrently
 * from several threads (LLJIT's own IR compiler would share one
 * TargetMachine) and the same object bytes can feed a disk cache.
 */
#ifndef TJ_JIT_ENGINE_H
#define TJ_JIT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include "../ir/diag.h"
#include "../ir/loop_ir.h"
#include "../runtime/abi.h"

typedef struct JitEngine JitEngine;

typedef struct JitOptions {
  int opt_level;            /* 0..3: default<O{n}> */
  bool no_llvm_vectorize;   /* turn off LLVM's loop and SLP vectorizers */
  bool fp_contract;         /* let a*b+c become an FMA (see EmitTarget) */
  bool want_ir;             /* fill JitKernel.ir_before / ir_after */
  bool want_asm;            /* fill JitKernel.asm_text */
  const char *symbol;       /* object-code symbol; NULL = kernel name + counter */
} JitOptions;

typedef struct JitTimes {
  double ir_ms;        /* loop IR -> LLVM IR, plus verification */
  double opt_ms;       /* LLVMRunPasses */
  double asm_ms;       /* assembly text (only when want_asm) */
  double codegen_ms;   /* machine code: the object file */
  double link_ms;      /* add the object to LLJIT + lookup (JITLink) */
  double total_ms;
  /* thread CPU time of the compiling thread in the same stages */
  double ir_cpu_ms, opt_cpu_ms, codegen_cpu_ms, link_cpu_ms;
} JitTimes;

typedef struct JitKernel {
  tj_kernel_fn fn;     /* callable until jit_kernel_release */
  char symbol[128];    /* the JIT symbol name */
  char *ir_before;     /* malloc'd when want_ir, else NULL */
  char *ir_after;
  char *asm_text;      /* malloc'd when want_asm, else NULL */
  JitTimes times;
  void *tracker;       /* LLVMOrcResourceTrackerRef owning the code */
  size_t code_bytes;   /* memory its code and data take in the JIT: the
                          object's allocated sections, page-rounded by kind */
} JitKernel;

/* A monotonic clock in milliseconds (compile-time breakdowns). */
double jit_now_ms(void);
/* The calling thread's CPU time in milliseconds. */
double jit_cpu_ms(void);

/* Creates an engine for cpu/features (NULL = the host's); NULL with d set
 * on failure. The caller owns the engine (jit_engine_free). The LLJIT
 * itself is created on a thread started here and awaited by the first
 * link, so a failure to create it is reported by that compile. */
JitEngine *jit_engine_new(const char *cpu, const char *features, Diag *d);
/* Releases the engine and the code of every kernel still loaded in it;
 * their JitKernels must not run afterwards, and jit_kernel_release(NULL, k)
 * then frees only their text fields. */
void jit_engine_free(JitEngine *e);
/* The CPU name and feature string the engine generates code for. */
const char *jit_engine_cpu(const JitEngine *e);
const char *jit_engine_features(const JitEngine *e);

/* Compiles k; on success *out holds the callable (the engine owns its code,
 * the caller owns the text fields and must call jit_kernel_release); on
 * failure *out is zeroed and d says why. Thread-safe. */
bool jit_compile(JitEngine *e, const LirKernel *k, const JitOptions *o,
                 JitKernel *out, Diag *d);
/* Calls the kernel on operands and returns its TJ_KERNEL_* code (the same
 * as k->fn(operands); kernels carry 8 zero prefix bytes so even a direct
 * call from a -fsanitize=function build is safe). */
int32_t jit_kernel_run(const JitKernel *k, tj_storage **operands);
/* Removes the kernel's code from engine e (skipped when e is NULL) and frees
 * its text fields; k->fn must not be called afterwards. Safe on a zeroed
 * JitKernel and idempotent. */
void jit_kernel_release(JitEngine *e, JitKernel *k);

/* Compiles k to a relocatable object file for this engine's target (for a
 * disk cache): *bytes is malloc'd and owned by the caller; the kernel symbol
 * is o->symbol when given, else a unique name written to symbol[128]. */
bool jit_emit_object(JitEngine *e, const LirKernel *k, const JitOptions *o,
                     void **bytes, size_t *len, char symbol[128], Diag *d);
/* Loads object bytes from jit_emit_object and looks up symbol; the bytes
 * stay the caller's. On success *out is as after jit_compile. */
bool jit_add_object(JitEngine *e, const void *bytes, size_t len,
                    const char *symbol, JitKernel *out, Diag *d);

#endif
