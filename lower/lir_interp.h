/* A reference interpreter for the loop IR: runs a LirKernel directly on the
 * kernel ABI's storage, with C's semantics per type (f32 rounds to float,
 * i32 and i64 wrap) and a bounds check on every load and store, so tests can
 * check lowering without the JIT and a lowering bug becomes a message
 * instead of a crash. Runtime helpers (reserve, alloc, ...) are the real
 * ones from runtime/, so results match compiled kernels exactly.
 */
#ifndef TJ_LOWER_LIR_INTERP_H
#define TJ_LOWER_LIR_INTERP_H

#include <stdint.h>

#include "../ir/loop_ir.h"
#include "../runtime/abi.h"

/* Returned (with d set) when the kernel does something C leaves undefined:
 * an out-of-bounds or stale-pointer access, division by zero, a leaked
 * workspace, operands that do not match the kernel, or IR that fails
 * lir_verify. */
#define LIR_INTERP_FAULT (-1)

/* Runs k on operands (k->noperands non-NULL storages, owned by the caller)
 * and returns what the compiled kernel would: 0 or a TJ_KERNEL_* code from a
 * failed helper; or LIR_INTERP_FAULT with d set. Workspaces are freed on
 * every exit; storage arrays grown by reserve belong to their storage. */
int32_t lir_interp(const LirKernel *k, tj_storage **operands, Diag *d);

#endif
