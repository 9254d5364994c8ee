/* Printing each stage of a kernel's compilation: index notation, concrete
 * index notation, merge lattices, the loop IR of each phase (as C), LLVM IR
 * before and after optimization, and machine assembly. The LLVM and
 * assembly texts come from a recompilation that keeps them, so the fast
 * path never pays for them. */
#include <stdio.h>
#include <stdlib.h>

#include <llvm-c/Core.h>

#include "driver.h"

static tj_status print_llvm(const tj_kernel *k, tj_stage stage, FILE *f) {
  CacheEntry *e = k->entry;
  Diag d;
  diag_init(&d);
  if (!drv_ensure_compiled(e, PHASE_EVALUATE, &d)) return drv_fail(&d);
  JitOptions o = e->jopt;
  o.want_ir = stage != TJ_STAGE_ASM;
  o.want_asm = stage == TJ_STAGE_ASM;
  JitKernel jk;
  if (!jit_compile(e->engine, e->lir[PHASE_EVALUATE], &o, &jk, &d)) return drv_fail(&d);
  const char *text = stage == TJ_STAGE_LLVM ? jk.ir_before
                     : stage == TJ_STAGE_LLVM_OPT ? jk.ir_after : jk.asm_text;
  fputs(text ? text : "", f);
  jit_kernel_release(e->engine, &jk);
  return TJ_OK;
}

static tj_status print_lir(const tj_kernel *k, LowerPhase ph, bool header, FILE *f) {
  CacheEntry *e = k->entry;
  Diag d;
  diag_init(&d);
  if (!drv_ensure_lowered(e, ph, &d)) return drv_fail(&d);
  lir_print(f, e->lir[ph], header);
  return TJ_OK;
}

tj_status tj_kernel_print(const tj_kernel *k, tj_stage stage, void *file) {
  if (!k || !file) return rt_set_error(TJ_ERR_INVALID, "tj_kernel_print: NULL argument");
  FILE *f = file;
  CacheEntry *e = k->entry;
  switch (stage) {
  case TJ_STAGE_NOTATION:
    nt_print(f, k->as);
    fputc('\n', f);
    return TJ_OK;
  case TJ_STAGE_CIN:
    cin_print(f, e->cin);
    fputc('\n', f);
    return TJ_OK;
  case TJ_STAGE_LATTICE:
    {
    LowerInput in = {e->as, e->cin, &e->plan, &e->opt};
    lower_print_lattices(f, &in);
  }
    return TJ_OK;
  case TJ_STAGE_ASSEMBLY: return print_lir(k, PHASE_ASSEMBLE, false, f);
  case TJ_STAGE_COMPUTE: return print_lir(k, PHASE_COMPUTE, false, f);
  case TJ_STAGE_C: return print_lir(k, PHASE_EVALUATE, true, f);
  case TJ_STAGE_LLVM:
  case TJ_STAGE_LLVM_OPT:
  case TJ_STAGE_ASM: return print_llvm(k, stage, f);
  }
  return rt_set_error(TJ_ERR_INVALID, "unknown stage %d", (int)stage);
}

tj_status tj_kernel_print_after(const tj_kernel *k, const char *pass, void *file) {
  if (!k || !pass || !file) return rt_set_error(TJ_ERR_INVALID, "tj_kernel_print_after: NULL argument");
  int n = drv_pass_count(pass);
  if (n < 0)
    return rt_set_error(TJ_ERR_INVALID, "no pass '%s' (lower, tile, vectorize, unroll-jam)", pass);
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  pthread_mutex_lock(&k->entry->lock);
  LirKernel *lk = drv_lower_variant(k->entry, &a, PHASE_EVALUATE, n, &d);
  pthread_mutex_unlock(&k->entry->lock);
  if (lk) lir_print(file, lk, false);
  arena_free(&a);
  return lk ? TJ_OK : drv_fail(&d);
}

void tj_shutdown(void) { LLVMShutdown(); }
