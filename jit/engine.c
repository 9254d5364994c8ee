/* ORC LLJIT wrapper: from a LirKernel to a callable function pointer.
 *
 * One compile is a straight line of stages, each timed:
 *   emit_kernel -> LLVMVerifyModule -> LLVMRunPasses(default<On>)
 *   -> [assembly text from a clone] -> object file (our target machine)
 *   -> LLVMOrcLLJITAddObjectFileWithRT -> lookup (JITLink links it)
 * Every compile owns its LLVMContext and, while it runs, a target machine
 * (kept by the engine for the next compile), so compiles run in parallel;
 * LLJIT's session is itself thread-safe, and is created on its own thread
 * while the engine's first kernel compiles. Runtime helpers are
 * absolute symbols in the main JITDylib, everything else (memset, libm)
 * comes from the process through a search generator.
 */
#include "engine.h"

#include <elf.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "emit_llvm.h"

/* Target machines not in use, kept process-wide for the next compile of
 * any engine with the same triple, cpu and features: creating one and its
 * subtarget (which parses the feature string) costs 0.6 ms, and the
 * subtarget the first compile on a machine builds for the kernel's
 * function attributes another 0.3-0.5 ms of thread CPU time (measured
 * with a fresh tj_context per compile, as tjlatency does). At most
 * SPARE_MAX are kept; they live until the process exits (reachable from
 * spare_list, so not a leak). */
typedef struct SpareTm {
  struct SpareTm *next;
  LLVMTargetMachineRef tm;
  char *key;                   /* triple|cpu|features of the engine that made it */
} SpareTm;

enum { SPARE_MAX = 8 };
static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static SpareTm *spare_list;
static int spare_count;

struct JitEngine {
  LLVMOrcLLJITRef jit;         /* read only after engine_ready */
  LLVMOrcJITDylibRef main;
  LLVMTargetRef target;
  char *triple, *cpu, *features, *layout;
  pthread_mutex_t mu;          /* guards starting */
  char *tm_key;                /* triple|cpu|features: which spare machines fit */
  pthread_t starter;           /* creates the LLJIT while the first kernel compiles */
  bool starting, start_ok;
  Diag start_diag;
};

/* One compile in flight. */
typedef struct Build {
  LLVMContextRef cx;
  LLVMModuleRef m;
  LLVMTargetMachineRef tm;
  char symbol[128];
} Build;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool init_ok;

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TJ_UNDER_TSAN 1
#endif
#endif

/* ThreadSanitizer only: LLVM creates its timer globals (a ManagedStatic
 * holding the lock each TimerGroup takes; every pass run builds two) on
 * first use and publishes them with atomics inside libLLVM, which TSan
 * does not see, so two threads' first compiles looked like a race on that
 * lock. Running an empty module through the verifier here, inside
 * pthread_once (which TSan does see), creates them before any compile. */
static void warm_llvm_globals(void) {
#ifdef TJ_UNDER_TSAN
  LLVMContextRef cx = LLVMContextCreate();
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("tj_warm", cx);
  LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
  LLVMErrorRef err = LLVMRunPasses(m, "verify", NULL, pbo);
  if (err) LLVMConsumeError(err);
  LLVMDisposePassBuilderOptions(pbo);
  LLVMDisposeModule(m);
  LLVMContextDispose(cx);
#endif
}

/* The host's cpu name and features, asked of LLVM once (host_value):
 * every engine (one per context) used to ask again, 0.1 ms of each
 * compile in a fresh context. */
static pthread_mutex_t host_mu = PTHREAD_MUTEX_INITIALIZER;
static char *host_cpu, *host_features;
static char *take_message(char *m);

/* Loop strength reduction is off in code generation (`-disable-lsr`, a
 * process-wide LLVM option: the C API has no per-target-machine switch).
 * The loop IR already indexes arrays by one induction variable, which x86
 * addressing modes take as they are; LSR (with its IVUsers and SCEV) cost
 * 0.6 ms of SpMV's 3.5 ms of code generation and 1 ms of MTTKRP's 7, and
 * without it SpMV CSR/CSC, SpMM, MTTKRP, TTM and the inner product compile
 * to the same machine code, the others to code that ran within noise
 * (bench/README.md, "Compile latency"). */
static void set_llvm_options(void) {
  const char *argv[] = {"tensorjit", "-disable-lsr"};
  LLVMParseCommandLineOptions(2, argv, NULL);
}

static void init_llvm(void) {
  init_ok = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter() &&
            !LLVMInitializeNativeAsmParser();
  warm_llvm_globals();
  set_llvm_options();
}

/* A copy (malloc'd, the caller's) of what ask returns for the host, asked
 * of LLVM once and kept in *kept; NULL when out of memory (a later call
 * asks again). */
static char *host_value(char **kept, char *(*ask)(void)) {
  pthread_mutex_lock(&host_mu);
  if (!*kept) *kept = take_message(ask());
  char *s = *kept ? strdup(*kept) : NULL;
  pthread_mutex_unlock(&host_mu);
  return s;
}

double jit_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double jit_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Turns an LLVMErrorRef into diagnostic text (and consumes it). */
static bool llvm_error(Diag *d, LLVMErrorRef err, const char *what) {
  char *msg = LLVMGetErrorMessage(err);
  diag_error(d, TJ_ERR_JIT, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return false;
}

/* Copies an LLVM-owned message into malloc'd memory and disposes it. */
static char *take_message(char *m) {
  char *s = m ? strdup(m) : NULL;
  LLVMDisposeMessage(m);
  return s;
}

static LLVMTargetMachineRef make_tm(const JitEngine *e) {
  return LLVMCreateTargetMachine(e->target, e->triple, e->cpu, e->features,
                                 LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                 LLVMCodeModelJITDefault);
}

/* A target machine for one compile: a spare one that fits e, else a new one. */
static LLVMTargetMachineRef take_tm(JitEngine *e) {
  SpareTm *s = NULL;
  pthread_mutex_lock(&spare_mu);
  for (SpareTm **p = &spare_list; *p; p = &(*p)->next)
    if (!strcmp((*p)->key, e->tm_key)) {
      s = *p;
      *p = s->next;
      spare_count--;
      break;
    }
  pthread_mutex_unlock(&spare_mu);
  if (!s) return make_tm(e);
  LLVMTargetMachineRef tm = s->tm;
  free(s->key);
  free(s);
  return tm;
}

/* Keeps tm (the pool owns it from now on) for a later compile, or
 * disposes of it when the pool is full. */
static void give_back_tm(JitEngine *e, LLVMTargetMachineRef tm) {
  SpareTm *s = malloc(sizeof *s);
  char *key = strdup(e->tm_key);
  pthread_mutex_lock(&spare_mu);
  bool keep = s && key && spare_count < SPARE_MAX;
  if (keep) {
    *s = (SpareTm){.next = spare_list, .tm = tm, .key = key};
    spare_list = s;
    spare_count++;
  }
  pthread_mutex_unlock(&spare_mu);
  if (keep) return;
  free(s);
  free(key);
  LLVMDisposeTargetMachine(tm);
}

/* ---- engine ---- */

static bool define_helpers(JitEngine *e, Diag *d) {
  static const struct { const char *name; void *addr; } helpers[] = {
      {"tj_rt_reserve", (void *)tj_rt_reserve},
      {"tj_rt_alloc", (void *)tj_rt_alloc},
      {"tj_rt_free", (void *)tj_rt_free},
      {"tj_rt_sort_crd", (void *)tj_rt_sort_crd},
      {"tj_rt_marked_crd", (void *)tj_rt_marked_crd},
      {"tj_rt_gett", (void *)tj_rt_gett},
      {"tj_rt_threads", (void *)tj_rt_threads},
      {"tj_rt_thread_slot", (void *)tj_rt_thread_slot},
      {"tj_rt_parallel_for", (void *)tj_rt_parallel_for},
      {"tj_rt_parallel_for_leaves", (void *)tj_rt_parallel_for_leaves},
      {"tj_rt_parallel_for_sched", (void *)tj_rt_parallel_for_sched}};
  enum { N = sizeof helpers / sizeof helpers[0] };
  LLVMOrcCSymbolMapPair syms[N];
  for (int i = 0; i < N; i++) {
    syms[i].Name = LLVMOrcLLJITMangleAndIntern(e->jit, helpers[i].name);
    syms[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)helpers[i].addr;
    syms[i].Sym.Flags.GenericFlags =
        LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
    syms[i].Sym.Flags.TargetFlags = 0;
  }
  LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(syms, N);
  LLVMErrorRef err = LLVMOrcJITDylibDefine(e->main, mu);
  if (err) {
    LLVMOrcDisposeMaterializationUnit(mu);
    return llvm_error(d, err, "defining runtime helper symbols");
  }
  LLVMOrcDefinitionGeneratorRef gen;
  err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(e->jit), NULL, NULL);
  if (err) return llvm_error(d, err, "creating the process symbol generator");
  LLVMOrcJITDylibAddGenerator(e->main, gen);
  return true;
}

static bool create_lljit(JitEngine *e, Diag *d) {
  LLVMTargetMachineRef tm = make_tm(e);
  if (!tm)
    return diag_error(d, TJ_ERR_JIT, "no target machine for %s cpu=%s",
                      e->triple, e->cpu);
  LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
      b, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
  LLVMErrorRef err = LLVMOrcCreateLLJIT(&e->jit, b);
  if (err) {
    e->jit = NULL;
    return llvm_error(d, err, "creating LLJIT");
  }
  e->main = LLVMOrcLLJITGetMainJITDylib(e->jit);
  return define_helpers(e, d);
}

/* The starter thread; what it writes is read after pthread_join. */
static void *start_lljit(void *arg) {
  JitEngine *e = arg;
  e->start_ok = create_lljit(e, &e->start_diag);
  return NULL;
}

/* Waits for the LLJIT (started by jit_engine_new); false with its error. */
static bool engine_ready(JitEngine *e, Diag *d) {
  pthread_mutex_lock(&e->mu);
  if (e->starting) {
    pthread_join(e->starter, NULL);
    e->starting = false;
  }
  bool ok = e->start_ok;
  pthread_mutex_unlock(&e->mu);
  return ok || diag_error(d, e->start_diag.status, "%s", e->start_diag.msg);
}

/* The data layout of the target machine, which LLJIT also adopts. */
static bool pick_layout(JitEngine *e, Diag *d) {
  LLVMTargetMachineRef tm = take_tm(e);
  if (!tm)
    return diag_error(d, TJ_ERR_JIT, "no target machine for %s cpu=%s", e->triple, e->cpu);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  e->layout = take_message(LLVMCopyStringRepOfTargetData(td));
  LLVMDisposeTargetData(td);
  give_back_tm(e, tm);
  return e->layout || diag_error(d, TJ_ERR_NOMEM, "out of memory creating JIT");
}

/* Starts creating the LLJIT on its own thread (LLJIT's session, its
 * symbol tables and the helper definitions take 1-1.5 ms, overlapped with
 * the first kernel's lowering and code generation), or here when no
 * thread can be started. */
static bool start_engine(JitEngine *e, Diag *d) {
  diag_init(&e->start_diag);
  e->starting = pthread_create(&e->starter, NULL, start_lljit, e) == 0;
  if (!e->starting) e->start_ok = create_lljit(e, &e->start_diag);
  return e->starting || engine_ready(e, d);
}

static bool pick_target(JitEngine *e, const char *cpu, const char *features,
                        Diag *d) {
  e->triple = take_message(LLVMGetDefaultTargetTriple());
  e->cpu = cpu ? strdup(cpu) : host_value(&host_cpu, LLVMGetHostCPUName);
  e->features = features ? strdup(features) : host_value(&host_features, LLVMGetHostCPUFeatures);
  if (!e->triple || !e->cpu || !e->features)
    return diag_error(d, TJ_ERR_NOMEM, "out of memory creating JIT");
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(e->triple, &e->target, &msg)) {
    diag_error(d, TJ_ERR_JIT, "no LLVM target for %s: %s", e->triple,
               msg ? msg : "");
    LLVMDisposeMessage(msg);
    return false;
  }
  size_t n = strlen(e->triple) + strlen(e->cpu) + strlen(e->features) + 3;
  e->tm_key = malloc(n);
  if (!e->tm_key) return diag_error(d, TJ_ERR_NOMEM, "out of memory creating JIT");
  snprintf(e->tm_key, n, "%s|%s|%s", e->triple, e->cpu, e->features);
  return true;
}

JitEngine *jit_engine_new(const char *cpu, const char *features, Diag *d) {
  pthread_once(&init_once, init_llvm);
  if (!init_ok) {
    diag_error(d, TJ_ERR_JIT, "LLVM has no native target");
    return NULL;
  }
  JitEngine *e = calloc(1, sizeof *e);
  if (!e) {
    diag_error(d, TJ_ERR_NOMEM, "out of memory creating JIT");
    return NULL;
  }
  pthread_mutex_init(&e->mu, NULL);
  if (!pick_target(e, cpu, features, d) || !pick_layout(e, d) || !start_engine(e, d)) {
    jit_engine_free(e);
    return NULL;
  }
  return e;
}

void jit_engine_free(JitEngine *e) {
  if (!e) return;
  Diag ignored;
  diag_init(&ignored);
  engine_ready(e, &ignored);
  if (e->jit) {
    LLVMErrorRef err = LLVMOrcDisposeLLJIT(e->jit);
    if (err) LLVMConsumeError(err);
  }
  pthread_mutex_destroy(&e->mu);
  free(e->triple);
  free(e->cpu);
  free(e->features);
  free(e->layout);
  free(e->tm_key);
  free(e);
}

const char *jit_engine_cpu(const JitEngine *e) { return e->cpu; }
const char *jit_engine_features(const JitEngine *e) { return e->features; }

/* ---- one compile ---- */

static void build_dispose(JitEngine *e, Build *b) {
  if (b->m) LLVMDisposeModule(b->m);
  if (b->cx) LLVMContextDispose(b->cx);
  if (b->tm) give_back_tm(e, b->tm);
  memset(b, 0, sizeof *b);
}

/* Symbol numbers unique in the process and, with high probability, among
 * processes: objects from the disk cache keep the name their process gave
 * them and share a JIT dylib with this process's kernels, so numbers that
 * restart at 0 per engine collided ("Duplicate definition of symbol
 * 'evaluate_tj0'" after one kernel came from disk). The base mixes the
 * process id and the clock. */
static pthread_mutex_t symbol_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t symbol_next;

static uint64_t next_symbol_number(void) {
  pthread_mutex_lock(&symbol_mu);
  if (!symbol_next) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t h = ((uint64_t)getpid() << 40) ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)ts.tv_nsec;
    symbol_next = (h * 0x9E3779B97F4A7C15ull) | 1;
  }
  uint64_t n = symbol_next++;
  pthread_mutex_unlock(&symbol_mu);
  return n;
}

static bool pick_symbol(const LirKernel *k, const JitOptions *o, char sym[128], Diag *d) {
  uint64_t n = next_symbol_number();
  int len = o->symbol ? snprintf(sym, 128, "%s", o->symbol)
                      : snprintf(sym, 128, "%s_tj%016" PRIx64, k->name ? k->name : "kernel", n);
  if (len <= 0 || len >= 128)
    return diag_error(d, TJ_ERR_INVALID, "kernel symbol name too long or empty");
  return true;
}

static bool verify(Build *b, Diag *d) {
  char *msg = NULL;
  bool bad = LLVMVerifyModule(b->m, LLVMReturnStatusAction, &msg);
  if (bad)
    diag_error(d, TJ_ERR_INTERNAL, "LLVM verifier rejected %s: %s", b->symbol,
               msg ? msg : "");
  LLVMDisposeMessage(msg);
  return !bad;
}

/* The middle end at -O3: the loop IR arrives vectorized, blocked and
 * simplified by tensorjit's own passes, so LLVM's default<O3> (inlining,
 * unswitching, its vectorizers, unrolling) mostly burns time. What the
 * emitted IR needs: allocas to registers, redundant loads and address
 * arithmetic folded, loop-invariant pointer and bound loads hoisted,
 * loops rotated for the backend's strength reduction. Measured here (one
 * process, distinct kernels, medians of 21): SpMV compiles in 6.5-7.3 ms
 * instead of 9.9 (optimize 4.5 -> 1.9 ms), MTTKRP in 24-25 instead of
 * 34-36 ms; SpMV, SpMM, MTTKRP, TTV and dgemm kernels ran within
 * run-to-run noise (+-5%) of the default<O3> code. TJ_LLVM_PIPELINE
 * replaces it with any new-PM pipeline text (e.g. "default<O3>") for
 * comparison; -O0..-O2 run default<On>.
 * instcombine runs without its fixpoint check (on by default in LLVM 19's
 * textual pipelines, where it aborts the process on a union kernel).
 * indvars is left out: it was a quarter of the pass time on MTTKRP, and
 * without it SpMV, SpMM, SDDMM, TTV and MTTKRP compile to the same machine
 * code up to exit branches (jl/jge for jne/je); dgemm's differs and ran
 * within noise (A/B 1.076 and 0.943 with the order swapped).
 * sccp and adce after gvn are left out too: without them 18 kernels (SpMV
 * CSR/CSC/COO and min.plus, SpMM, SDDMM, MTTKRP, TTV, TTM, inner product,
 * sparse add, SpGEMM, dgemm loops, 3- and 9-way unions, a masked SpGEMM)
 * compiled to the same machine code, and the optimize stage took 0.07-0.1
 * ms (SpMV) and 0.2 ms (MTTKRP) less thread CPU time. */
#define LOOP_IR_PASSES                                                                  \
  "sroa,early-cse<memssa>,simplifycfg,instcombine<no-verify-fixpoint>,loop(loop-rotate),"  \
  "loop-mssa(licm),gvn,instcombine<no-verify-fixpoint>,simplifycfg"
static const char LOOP_IR_PIPELINE[] = "function(" LOOP_IR_PASSES ")";

/* With an unroll(i, n) directive somewhere: LLVM's unroller then runs, for
 * the loops that carry a count only (its heuristics are off). Measured: it
 * costs 0.3 ms of SpMV's and 0.6 ms of MTTKRP's optimize stage, so only
 * kernels that ask for it pay. */
static const char LOOP_IR_PIPELINE_UNROLL[] =
    "function(" LOOP_IR_PASSES ",loop-unroll<O3;no-partial;no-runtime;no-upperbound;"
    "no-profile-peeling>)";

/* Whether a loop of s carries an unroll count. */
static bool wants_unroll(const LirStmt *s) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_FOR:
      if (s->u.loop.at.unroll > 0 || wants_unroll(s->u.loop.body)) return true;
      break;
    case LS_WHILE:
      if (wants_unroll(s->u.whl.body)) return true;
      break;
    case LS_IF:
      if (wants_unroll(s->u.cond.then) || wants_unroll(s->u.cond.els)) return true;
      break;
    case LS_BLOCK:
      if (wants_unroll(s->u.block)) return true;
      break;
    default: break;
    }
  }
  return false;
}

static bool optimize(Build *b, const LirKernel *k, const JitOptions *o, Diag *d) {
  char pipeline[32];
  int lvl = o->opt_level < 0 ? 0 : o->opt_level > 3 ? 3 : o->opt_level;
  snprintf(pipeline, sizeof pipeline, "default<O%d>", lvl);
  const char *env = getenv("TJ_LLVM_PIPELINE");
  const char *lean = wants_unroll(k->body) ? LOOP_IR_PIPELINE_UNROLL : LOOP_IR_PIPELINE;
  const char *passes = env && *env ? env : lvl == 3 ? lean : pipeline;
  LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
  /* LLVM's heuristic loop unrolling is off (for default<On>): SpMV, SpMM,
   * MTTKRP and SDDMM kernels ran within noise of the unrolled code, and
   * SpMV / MTTKRP compiled in 11 / 22 ms instead of 22 / 45 ms. */
  LLVMPassBuilderOptionsSetLoopUnrolling(pbo, 0);
  /* LLVM 19 still vectorized plain loops with only these tuning flags
   * off (seen on SpMM's inner loop), so the emitter also marks every
   * scalar loop vectorize.enable=false when they are asked off. */
  if (o->no_llvm_vectorize) {
    LLVMPassBuilderOptionsSetLoopVectorization(pbo, 0);
    LLVMPassBuilderOptionsSetSLPVectorization(pbo, 0);
  }
  LLVMErrorRef err = LLVMRunPasses(b->m, passes, b->tm, pbo);
  LLVMDisposePassBuilderOptions(pbo);
  return err ? llvm_error(d, err, "optimizing") : true;
}

/* loop IR -> verified, optimized module in b (IR text into out if asked). */
static bool build_module(JitEngine *e, const LirKernel *k, const JitOptions *o,
                         Build *b, JitKernel *out, Diag *d) {
  double t0 = jit_now_ms(), c0 = jit_cpu_ms();
  b->cx = LLVMContextCreate();
  b->tm = take_tm(e);
  if (!b->tm) return diag_error(d, TJ_ERR_JIT, "no target machine for cpu %s", e->cpu);
  EmitTarget t = {b->symbol, e->triple, e->layout, e->cpu, e->features,
                  o->fp_contract, o->no_llvm_vectorize};
  if (!emit_kernel(b->cx, k, &t, &b->m, d) || !verify(b, d)) return false;
  if (o->want_ir) out->ir_before = take_message(LLVMPrintModuleToString(b->m));
  double t1 = jit_now_ms(), c1 = jit_cpu_ms();
  out->times.ir_ms = t1 - t0;
  out->times.ir_cpu_ms = c1 - c0;
  if (!optimize(b, k, o, d)) return false;
  if (o->want_ir) out->ir_after = take_message(LLVMPrintModuleToString(b->m));
  out->times.opt_ms = jit_now_ms() - t1;
  out->times.opt_cpu_ms = jit_cpu_ms() - c1;
  return true;
}

/* Machine code for b->m; asm is emitted from a clone because codegen
 * rewrites the module it runs on. */
static bool emit_buffer(Build *b, LLVMCodeGenFileType ft,
                        LLVMMemoryBufferRef *buf, Diag *d) {
  LLVMModuleRef m = ft == LLVMAssemblyFile ? LLVMCloneModule(b->m) : b->m;
  char *msg = NULL;
  bool bad = LLVMTargetMachineEmitToMemoryBuffer(b->tm, m, ft, &msg, buf);
  if (bad) diag_error(d, TJ_ERR_JIT, "code generation for %s failed: %s",
                      b->symbol, msg ? msg : "");
  LLVMDisposeMessage(msg);
  if (m != b->m) LLVMDisposeModule(m);
  return !bad;
}

static bool emit_asm_text(Build *b, JitKernel *out, Diag *d) {
  double t0 = jit_now_ms();
  LLVMMemoryBufferRef buf;
  if (!emit_buffer(b, LLVMAssemblyFile, &buf, d)) return false;
  size_t n = LLVMGetBufferSize(buf);
  out->asm_text = malloc(n + 1);
  if (out->asm_text) {
    memcpy(out->asm_text, LLVMGetBufferStart(buf), n);
    out->asm_text[n] = 0;
  }
  LLVMDisposeMemoryBuffer(buf);
  out->times.asm_ms = jit_now_ms() - t0;
  return out->asm_text ? true : diag_error(d, TJ_ERR_NOMEM, "out of memory");
}

/* Reads the ELF64 header of bytes[0 .. len) into *eh: false if the object
 * is not ELF64 or its section table does not lie inside it. */
static bool elf64_header(const unsigned char *p, size_t len, Elf64_Ehdr *eh) {
  if (len < sizeof *eh || memcmp(p, ELFMAG, SELFMAG) != 0 || p[EI_CLASS] != ELFCLASS64)
    return false;
  memcpy(eh, p, sizeof *eh);
  return eh->e_shentsize == sizeof(Elf64_Shdr) && eh->e_shoff <= len &&
         (len - eh->e_shoff) / sizeof(Elf64_Shdr) >= eh->e_shnum;
}

/* The memory JITLink takes for an object's contents: its allocated
 * (SHF_ALLOC) ELF sections grouped as its in-process memory manager groups
 * them (code, read-only data, writable data), each group rounded up to
 * whole pages. Not counted: the GOT entries and stubs JITLink adds (8-16
 * bytes per external symbol, inside those pages unless one overflows) and
 * ORC's own bookkeeping. An object that is not ELF64 counts its size. */
static size_t object_alloc_bytes(const void *bytes, size_t len) {
  const unsigned char *p = bytes;
  Elf64_Ehdr eh;
  if (!elf64_header(p, len, &eh)) return len;
  size_t group[3] = {0};   /* code, read-only, writable */
  for (size_t i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh;
    memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (!(sh.sh_flags & SHF_ALLOC) || sh.sh_size == 0) continue;
    int g = sh.sh_flags & SHF_EXECINSTR ? 0 : sh.sh_flags & SHF_WRITE ? 2 : 1;
    size_t align = sh.sh_addralign > 1 && sh.sh_addralign < 4096 ? sh.sh_addralign : 1;
    group[g] = (group[g] + align - 1) / align * align + sh.sh_size;
  }
  long pg = sysconf(_SC_PAGESIZE);
  size_t page = pg > 0 ? (size_t)pg : 4096, total = 0;
  for (int g = 0; g < 3; g++) total += (group[g] + page - 1) / page * page;
  return total;
}

/* The functions of an ELF64 object's code section that holds `symbol`
 * (offsets and sizes in it), for the perf map: filled by perf_funcs_read
 * before the JIT takes the object, written by perf_map_write after. */
typedef struct PerfFuncs {
  int n;
  int64_t base;                 /* the offset of `symbol` in its section, -1 if absent */
  struct { char name[128]; uint64_t off, size; } f[16];
} PerfFuncs;

static pthread_once_t perf_map_once = PTHREAD_ONCE_INIT;
static bool perf_map_on;

static void perf_map_read_env(void) {
  const char *s = getenv("TJ_PERF_MAP");
  perf_map_on = s && *s && strcmp(s, "0") != 0;
}

/* Whether TJ_PERF_MAP asks for /tmp/perf-<pid>.map lines (perf report
 * then names the JIT's kernels; read once per process, under
 * pthread_once: kernels compile on several threads at once). */
static bool perf_map_wanted(void) {
  pthread_once(&perf_map_once, perf_map_read_env);
  return perf_map_on;
}

/* Reads the sized STT_FUNC symbols of the section defining symbol from
 * the ELF64 object bytes[0 .. len) into *pf (at most 16; none if the
 * object is not ELF64 or lacks symbol). */
static void perf_funcs_read(const unsigned char *p, size_t len, const char *symbol, PerfFuncs *pf) {
  pf->n = 0;
  pf->base = -1;
  Elf64_Ehdr eh;
  if (!elf64_header(p, len, &eh)) return;
  for (size_t i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh, strh;
    memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB || sh.sh_link >= eh.e_shnum) continue;
    memcpy(&strh, p + eh.e_shoff + sh.sh_link * sizeof strh, sizeof strh);
    if (sh.sh_offset > len || sh.sh_size > len - sh.sh_offset || strh.sh_offset > len ||
        strh.sh_size > len - strh.sh_offset)
      return;
    size_t nsym = sh.sh_size / sizeof(Elf64_Sym);
    int sect = -1;
    for (int pass = 0; pass < 2; pass++)   /* 0: find symbol's section, 1: its functions */
      for (size_t k = 0; k < nsym; k++) {
        Elf64_Sym sy;
        memcpy(&sy, p + sh.sh_offset + k * sizeof sy, sizeof sy);
        if (ELF64_ST_TYPE(sy.st_info) != STT_FUNC || sy.st_name >= strh.sh_size) continue;
        const char *name = (const char *)p + strh.sh_offset + sy.st_name;
        size_t room = strh.sh_size - sy.st_name;
        if (strnlen(name, room) == room) continue;
        if (pass == 0 && strcmp(name, symbol) == 0) sect = sy.st_shndx, pf->base = (int64_t)sy.st_value;
        if (pass == 1 && sy.st_shndx == sect && sy.st_size && pf->n < 16) {
          snprintf(pf->f[pf->n].name, sizeof pf->f[pf->n].name, "%s", name);
          pf->f[pf->n].off = sy.st_value;
          pf->f[pf->n++].size = sy.st_size;
        }
      }
    return;
  }
}

/* Appends "start size name" lines for pf's functions, the section placed
 * so that its symbol is at addr, to /tmp/perf-<pid>.map. */
static void perf_map_write(const PerfFuncs *pf, uint64_t addr) {
  if (pf->base < 0 || !pf->n) return;
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  pthread_mutex_lock(&mu);
  FILE *f = fopen(path, "a");
  if (f) {
    uint64_t sect = addr - (uint64_t)pf->base;
    for (int i = 0; i < pf->n; i++)
      fprintf(f, "%" PRIx64 " %" PRIx64 " %s\n", sect + pf->f[i].off, pf->f[i].size, pf->f[i].name);
    fclose(f);
  }
  pthread_mutex_unlock(&mu);
}

/* Hands obj (ownership passes) to LLJIT under a fresh tracker and looks up
 * symbol; fills out->fn, out->tracker and out->code_bytes. */
static bool link_object(JitEngine *e, LLVMMemoryBufferRef obj,
                        const char *symbol, JitKernel *out, Diag *d) {
  double t0 = jit_now_ms(), c0 = jit_cpu_ms();
  if (!engine_ready(e, d)) {
    LLVMDisposeMemoryBuffer(obj);
    return false;
  }
  size_t code_bytes = object_alloc_bytes(LLVMGetBufferStart(obj), LLVMGetBufferSize(obj));
  PerfFuncs pf = {0};
  bool perf = perf_map_wanted();
  if (perf)
    perf_funcs_read((const unsigned char *)LLVMGetBufferStart(obj), LLVMGetBufferSize(obj), symbol, &pf);
  LLVMOrcResourceTrackerRef rt = LLVMOrcJITDylibCreateResourceTracker(e->main);
  LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(e->jit, rt, obj);
  LLVMOrcExecutorAddress addr = 0;
  if (!err) err = LLVMOrcLLJITLookup(e->jit, &addr, symbol);
  if (err) {
    llvm_error(d, err, "linking the kernel");
    LLVMErrorRef rm = LLVMOrcResourceTrackerRemove(rt);
    if (rm) LLVMConsumeError(rm);
    LLVMOrcReleaseResourceTracker(rt);
    return false;
  }
  if (perf) perf_map_write(&pf, (uint64_t)addr);
  out->fn = (tj_kernel_fn)(uintptr_t)addr;
  out->tracker = rt;
  out->code_bytes = code_bytes;
  snprintf(out->symbol, sizeof out->symbol, "%s", symbol);
  out->times.link_ms = jit_now_ms() - t0;
  out->times.link_cpu_ms = jit_cpu_ms() - c0;
  return true;
}

static void kernel_texts_free(JitKernel *k) {
  free(k->ir_before);
  free(k->ir_after);
  free(k->asm_text);
  k->ir_before = k->ir_after = k->asm_text = NULL;
}

bool jit_compile(JitEngine *e, const LirKernel *k, const JitOptions *o,
                 JitKernel *out, Diag *d) {
  memset(out, 0, sizeof *out);
  if (!e || !k || !o) return TJ_BUG(d, "jit_compile without engine, kernel or options");
  double t0 = jit_now_ms();
  Build b = {0};
  LLVMMemoryBufferRef obj = NULL;
  bool ok = pick_symbol(k, o, b.symbol, d) && build_module(e, k, o, &b, out, d) &&
            (!o->want_asm || emit_asm_text(&b, out, d));
  if (ok) {
    double t1 = jit_now_ms(), c1 = jit_cpu_ms();
    ok = emit_buffer(&b, LLVMObjectFile, &obj, d);
    out->times.codegen_ms = jit_now_ms() - t1;
    out->times.codegen_cpu_ms = jit_cpu_ms() - c1;
  }
  char symbol[128];
  memcpy(symbol, b.symbol, sizeof symbol);
  build_dispose(e, &b);
  if (ok) ok = link_object(e, obj, symbol, out, d);
  if (!ok) {
    kernel_texts_free(out);
    memset(out, 0, sizeof *out);
    return false;
  }
  out->times.total_ms = jit_now_ms() - t0;
  return true;
}

#if defined(__clang__)
__attribute__((no_sanitize("function")))
#endif
int32_t jit_kernel_run(const JitKernel *k, tj_storage **operands) {
  return k->fn(operands);
}

void jit_kernel_release(JitEngine *e, JitKernel *k) {
  if (!k) return;
  if (e && k->tracker) {
    LLVMOrcResourceTrackerRef rt = k->tracker;
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(rt);
    if (err) LLVMConsumeError(err);
    LLVMOrcReleaseResourceTracker(rt);
  }
  kernel_texts_free(k);
  memset(k, 0, sizeof *k);
}

/* ---- object code (for a disk cache) ---- */

bool jit_emit_object(JitEngine *e, const LirKernel *k, const JitOptions *o,
                     void **bytes, size_t *len, char symbol[128], Diag *d) {
  *bytes = NULL;
  *len = 0;
  if (!e || !k || !o) return TJ_BUG(d, "jit_emit_object without engine, kernel or options");
  JitKernel scratch = {0};
  JitOptions plain = *o;
  plain.want_ir = plain.want_asm = false;
  Build b = {0};
  LLVMMemoryBufferRef obj = NULL;
  bool ok = pick_symbol(k, &plain, b.symbol, d) &&
            build_module(e, k, &plain, &b, &scratch, d) &&
            emit_buffer(&b, LLVMObjectFile, &obj, d);
  if (ok) {
    *len = LLVMGetBufferSize(obj);
    *bytes = malloc(*len ? *len : 1);
    if (*bytes) memcpy(*bytes, LLVMGetBufferStart(obj), *len);
    else ok = diag_error(d, TJ_ERR_NOMEM, "out of memory copying object code");
    memcpy(symbol, b.symbol, 128);
  }
  if (obj) LLVMDisposeMemoryBuffer(obj);
  build_dispose(e, &b);
  if (!ok) *len = 0;
  return ok;
}

bool jit_add_object(JitEngine *e, const void *bytes, size_t len,
                    const char *symbol, JitKernel *out, Diag *d) {
  memset(out, 0, sizeof *out);
  if (!e || !bytes || !symbol) return TJ_BUG(d, "jit_add_object without engine, bytes or symbol");
  if (strlen(symbol) >= sizeof out->symbol)
    return diag_error(d, TJ_ERR_INVALID, "kernel symbol name too long");
  double t0 = jit_now_ms();
  LLVMMemoryBufferRef obj =
      LLVMCreateMemoryBufferWithMemoryRangeCopy(bytes, len, symbol);
  if (!link_object(e, obj, symbol, out, d)) return false;
  out->times.total_ms = jit_now_ms() - t0;
  return true;
}
