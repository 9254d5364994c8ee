/* Loop IR -> LLVM IR: one LirKernel becomes one LLVM module holding
 * `i32 @symbol(ptr %operands)` plus declarations of the runtime helpers it
 * calls. Variables become entry-block allocas (SROA/mem2reg promote them),
 * tensor fields are addressed by offsetof() on runtime/abi.h's structs, and
 * every failing helper call branches to one cleanup block that runs the
 * kernel's cleanup statements and returns the status code.
 */
#ifndef TJ_JIT_EMIT_LLVM_H
#define TJ_JIT_EMIT_LLVM_H

#include <llvm-c/Core.h>

#include "../ir/diag.h"
#include "../ir/loop_ir.h"

/* Where the module will run: names and strings are borrowed for the call. */
typedef struct EmitTarget {
  const char *symbol;       /* name of the kernel function in the module */
  const char *triple;       /* target triple, or NULL */
  const char *data_layout;  /* data layout string, or NULL */
  const char *cpu;          /* "target-cpu" function attribute, or NULL */
  const char *features;     /* "target-features" attribute, or NULL */
  bool fp_contract;         /* allow fusing a*b+c into FMA (like clang's
                               -ffp-contract=on); results may differ in the
                               last bit from unfused C */
  bool no_llvm_vectorize;   /* mark every scalar loop vectorize.enable=false */
} EmitTarget;

/* Builds kernel k into a new module in cx; on success *out is owned by the
 * caller (LLVMDisposeModule), on failure *out is NULL and d says why. */
bool emit_kernel(LLVMContextRef cx, const LirKernel *k, const EmitTarget *t,
                 LLVMModuleRef *out, Diag *d);

#endif
