/* The LLVM ORC backend: the Backend interface over jit/engine.c. The state
 * is one JitEngine (an LLJIT for one cpu/features) plus the target string
 * that keys disk-cache objects; a BackendKernel's handle is a malloc'd
 * JitKernel. The LLVM and assembly stages come from a recompilation that
 * keeps their text, so the fast path never pays for them.
 */
#include <llvm-c/Core.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "engine.h"

typedef struct LlvmState {
  JitEngine *jit;
  char target[512];    /* llvm=<version>|cpu=<cpu>|features=<features> */
} LlvmState;

static void *llvm_open(const char *cpu, const char *features, Diag *d) {
  LlvmState *s = calloc(1, sizeof *s);
  if (!s) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  s->jit = jit_engine_new(cpu, features, d);
  if (!s->jit) {
    free(s);
    return NULL;
  }
  unsigned maj, min, patch;
  LLVMGetVersion(&maj, &min, &patch);
  snprintf(s->target, sizeof s->target, "llvm=%u.%u.%u|cpu=%s|features=%s", maj, min, patch,
           jit_engine_cpu(s->jit), jit_engine_features(s->jit));
  return s;
}

static void llvm_close(void *state) {
  LlvmState *s = state;
  if (!s) return;
  jit_engine_free(s->jit);
  free(s);
}

static JitOptions jit_options(const BackendOptions *o) {
  return (JitOptions){.opt_level = o->opt_level,
                      .no_llvm_vectorize = o->no_llvm_vectorize,
                      .fp_contract = o->fp_contract};
}

/* Moves a compiled JitKernel into *out (its handle takes ownership). */
static bool wrap(const JitKernel *jk, BackendKernel *out, Diag *d) {
  JitKernel *h = malloc(sizeof *h);
  if (!h) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  *h = *jk;
  *out = (BackendKernel){.fn = jk->fn, .handle = h,
                         .times = {.ir_ms = jk->times.ir_ms, .opt_ms = jk->times.opt_ms,
                                   .codegen_ms = jk->times.codegen_ms + jk->times.link_ms,
                                   .ir_cpu_ms = jk->times.ir_cpu_ms,
                                   .opt_cpu_ms = jk->times.opt_cpu_ms,
                                   .codegen_cpu_ms = jk->times.codegen_cpu_ms +
                                                     jk->times.link_cpu_ms},
                         .code_bytes = jk->code_bytes};
  return true;
}

static bool llvm_compile(void *state, const LirKernel *k, const BackendOptions *o,
                         BackendKernel *out, Diag *d) {
  LlvmState *s = state;
  JitOptions jo = jit_options(o);
  JitKernel jk;
  memset(out, 0, sizeof *out);
  if (!jit_compile(s->jit, k, &jo, &jk, d)) return false;
  if (wrap(&jk, out, d)) return true;
  jit_kernel_release(s->jit, &jk);
  return false;
}

static void llvm_release(void *state, BackendKernel *bk) {
  LlvmState *s = state;
  if (!bk->handle) return;
  jit_kernel_release(s ? s->jit : NULL, bk->handle);
  free(bk->handle);
  memset(bk, 0, sizeof *bk);
}

static bool llvm_print(void *state, const LirKernel *k, const BackendOptions *o,
                       BackendStage st, FILE *f, Diag *d) {
  LlvmState *s = state;
  if (st == BE_STAGE_SOURCE) {
    lir_print(f, k, LIR_PRINT_HEADER | LIR_PRINT_PARALLEL);
    return true;
  }
  JitOptions jo = jit_options(o);
  jo.want_ir = st != BE_STAGE_ASM;
  jo.want_asm = st == BE_STAGE_ASM;
  JitKernel jk;
  if (!jit_compile(s->jit, k, &jo, &jk, d)) return false;
  const char *text = st == BE_STAGE_LLVM ? jk.ir_before
                     : st == BE_STAGE_LLVM_OPT ? jk.ir_after : jk.asm_text;
  fputs(text ? text : "", f);
  jit_kernel_release(s->jit, &jk);
  return true;
}

static int llvm_vector_bits(void *state) {
  return be_vector_bits_of(jit_engine_features(((LlvmState *)state)->jit));
}

static const char *llvm_target(void *state) { return ((LlvmState *)state)->target; }

static bool llvm_emit_object(void *state, const LirKernel *k, const BackendOptions *o,
                             void **bytes, size_t *len, char symbol[128], Diag *d) {
  JitOptions jo = jit_options(o);
  return jit_emit_object(((LlvmState *)state)->jit, k, &jo, bytes, len, symbol, d);
}

static bool llvm_add_object(void *state, const void *bytes, size_t len, const char *symbol,
                            BackendKernel *out, Diag *d) {
  LlvmState *s = state;
  JitKernel jk;
  memset(out, 0, sizeof *out);
  if (!jit_add_object(s->jit, bytes, len, symbol, &jk, d)) return false;
  if (wrap(&jk, out, d)) return true;
  jit_kernel_release(s->jit, &jk);
  return false;
}

const Backend backend_llvm = {
    .name = "llvm",
    .open = llvm_open,
    .close = llvm_close,
    .compile = llvm_compile,
    .release = llvm_release,
    .print = llvm_print,
    .vector_bits = llvm_vector_bits,
    .target = llvm_target,
    .emit_object = llvm_emit_object,
    .add_object = llvm_add_object,
};
