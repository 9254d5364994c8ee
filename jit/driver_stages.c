/* Printing each stage of a kernel's compilation: index notation, concrete
 * index notation, merge lattices, the loop IR of each phase (as C), and the
 * backend's stages: the whole C file, LLVM IR before and after optimization,
 * machine assembly (Backend.print; the LLVM backend recompiles to keep
 * them, so the fast path never pays for them). */
#include <stdio.h>
#include <stdlib.h>

#include <llvm-c/Core.h>

#include "driver.h"

/* A backend stage of the evaluate kernel. */
static tj_status print_backend(const tj_kernel *k, BackendStage st, FILE *f) {
  CacheEntry *e = k->entry;
  Diag d;
  diag_init(&d);
  if (!drv_ensure_lowered(e, PHASE_EVALUATE, &d) ||
      !e->be->print(e->bstate, e->lir[PHASE_EVALUATE], &e->bopt, st, f, &d))
    return drv_fail(&d);
  return TJ_OK;
}

static tj_status print_lir(const tj_kernel *k, LowerPhase ph, FILE *f) {
  CacheEntry *e = k->entry;
  Diag d;
  diag_init(&d);
  if (!drv_ensure_lowered(e, ph, &d)) return drv_fail(&d);
  lir_print(f, e->lir[ph], 0);
  return TJ_OK;
}

static tj_status print_one(const tj_kernel *k, tj_stage stage, FILE *f);
static tj_status print_after_one(const tj_kernel *k, const char *pass, void *file);

/* A kernel run through temporaries (driver_accum.c) prints the
 * temporaries' kernels first, then its own. */
tj_status tj_kernel_print(const tj_kernel *k, tj_stage stage, void *file) {
  if (!k || !file) return rt_set_error(TJ_ERR_INVALID, "tj_kernel_print: NULL argument");
  tj_status st = TJ_OK;
  for (int m = 0; k->acc && drv_accum_sum(k->acc, m) && st == TJ_OK; m++)
    st = print_one(drv_accum_sum(k->acc, m), stage, file);
  return st == TJ_OK ? print_one(k, stage, file) : st;
}

/* The names of e's tensors and indices set to k's (the same by id, the
 * cache key being the renamed expression), the old ones kept in saved; a
 * cache entry shared by two kernels of one structure (two temporaries'
 * T = B*C and T1 = E*F) then prints each kernel's own names. k's own
 * tree is never written: a run binds its operands by k->as's names while
 * another thread prints (a swap of both trees failed those runs). With
 * from NULL, restores saved. */
typedef struct SavedNames {
  int nt, nv;
  const char *t[NT_MAX_TENSORS], *v[NT_MAX_INDICES];
} SavedNames;

static void set_names(CacheEntry *e, const Assignment *from, SavedNames *saved) {
  Assignment *x = e->as;
  if (from) {
    saved->nt = x->ntensors < from->ntensors ? x->ntensors : from->ntensors;
    saved->nv = x->nindices < from->nindices ? x->nindices : from->nindices;
  }
  for (int t = 0; t < saved->nt; t++) {
    if (from) saved->t[t] = x->tensors[t]->name;
    x->tensors[t]->name = from ? from->tensors[t]->name : saved->t[t];
  }
  for (int v = 0; v < saved->nv; v++) {
    if (from) saved->v[v] = x->indices[v]->name;
    x->indices[v]->name = from ? from->indices[v]->name : saved->v[v];
  }
}

static tj_status print_named(const tj_kernel *k, tj_stage stage, FILE *f);

/* print_named under k's names (the context's lock keeps another
 * kernel's print of the same entry from seeing them half set). */
static tj_status print_one(const tj_kernel *k, tj_stage stage, FILE *f) {
  CacheEntry *e = k->entry;
  bool rename = (stage == TJ_STAGE_CIN || stage == TJ_STAGE_LATTICE) && e->as && k->as &&
              e->as != k->as;
  if (!rename) return print_named(k, stage, f);
  pthread_mutex_lock(&k->cx->lock);
  SavedNames saved = {0};
  set_names(e, k->as, &saved);
  tj_status st = print_named(k, stage, f);
  set_names(e, NULL, &saved);
  pthread_mutex_unlock(&k->cx->lock);
  return st;
}

static tj_status print_named(const tj_kernel *k, tj_stage stage, FILE *f) {
  CacheEntry *e = k->entry;
  switch (stage) {
  case TJ_STAGE_NOTATION:
    if (e->defs) { /* the definitions as parsed, then the expression */
      Arena a;
      arena_init(&a);
      NtDefs *defs = arena_alloc(&a, sizeof *defs);
      Diag d;
      diag_init(&d);
      if (defs && nt_parse_defs(&a, e->defs, defs, &d)) nt_print_defs(f, defs);
      arena_free(&a);
    }
    nt_print(f, k->as);
    if (k->as->semiring)
      fprintf(f, "    (semiring %s: absent entries are %g)", k->as->semiring->name,
              nt_semiring_zero(k->as->semiring));
    fputc('\n', f);
    return TJ_OK;
  case TJ_STAGE_CIN:
    cin_print(f, e->cin);
    fputc('\n', f);
    lower_plan_print_conversions(f, k->as, &e->plan);
    return TJ_OK;
  case TJ_STAGE_LATTICE:
    for (int q = 0; q < e->nseq; q++) {   /* a sequence: each statement's */
      SeqStmt *st = &e->seq[q];
      LowerInput in = {st->cin, lower_operands(st->as), &st->plan, &st->opt};
      fprintf(f, "sequence: statement %d: ", q + 1);
      nt_print(f, st->as);
      fputc('\n', f);
      lower_print_lattices(f, &in);
    }
    if (!e->nseq) {
      LowerInput in = {e->cin, lower_operands(e->as), &e->plan, &e->opt};
      lower_print_lattices(f, &in);
    }
    return TJ_OK;
  case TJ_STAGE_ASSEMBLY: return print_lir(k, PHASE_ASSEMBLE, f);
  case TJ_STAGE_COMPUTE:
    if (e->sell_a)
      fprintf(f, "// method(sell): compute and evaluate run rt_sell_spmv over a SELL-%d copy of %s\n"
              "// (runtime/sell.c), made at the first run and kept until %s changes; these\n"
              "// loops run where the copy does not pay (rows of %d entries or more on\n"
              "// average) or cannot be made (%s never packed, 2^31 rows or more)\n",
              RT_SELL_C, e->as->tensors[e->sell_a]->name, e->as->tensors[e->sell_a]->name,
              (int)rt_sell_max_mean(e->as->tensors[e->sell_a]->decl.dtype),
              e->as->tensors[e->sell_a]->name);
    return print_lir(k, PHASE_COMPUTE, f);
  case TJ_STAGE_C: return print_backend(k, BE_STAGE_SOURCE, f);
  case TJ_STAGE_LLVM: return print_backend(k, BE_STAGE_LLVM, f);
  case TJ_STAGE_LLVM_OPT: return print_backend(k, BE_STAGE_LLVM_OPT, f);
  case TJ_STAGE_ASM: return print_backend(k, BE_STAGE_ASM, f);
  case TJ_STAGE_GETT:
    for (int q = 0; q < e->nseq; q++) {
      fprintf(f, "sequence: statement %d: ", q + 1);
      nt_print(f, e->seq[q].as);
      fputc('\n', f);
      lower_gett_print(f, e->seq[q].as, &e->seq[q].gett);
    }
    if (!e->nseq) lower_gett_print(f, e->as, &e->gett);
    return TJ_OK;
  }
  return rt_set_error(TJ_ERR_INVALID, "unknown stage %d", (int)stage);
}

tj_status tj_kernel_print_after(const tj_kernel *k, const char *pass, void *file) {
  if (!k || !pass || !file) return rt_set_error(TJ_ERR_INVALID, "tj_kernel_print_after: NULL argument");
  tj_status st = TJ_OK;
  for (int m = 0; k->acc && drv_accum_sum(k->acc, m) && st == TJ_OK; m++)
    st = print_after_one(drv_accum_sum(k->acc, m), pass, file);
  return st == TJ_OK ? print_after_one(k, pass, file) : st;
}

static tj_status print_after_one(const tj_kernel *k, const char *pass, void *file) {
  int n = drv_pass_count(pass);
  if (n < 0)
    return rt_set_error(TJ_ERR_INVALID, "no pass '%s' (lower, tile, promote, vectorize, unroll-jam, peel, prefetch)", pass);
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  pthread_mutex_lock(&k->entry->lock);
  LirKernel *lk = drv_lower_variant(k->entry, &a, PHASE_EVALUATE, n, &d);
  pthread_mutex_unlock(&k->entry->lock);
  if (lk) lir_print(file, lk, 0);
  arena_free(&a);
  return lk ? TJ_OK : drv_fail(&d);
}

void tj_shutdown(void) { LLVMShutdown(); }
