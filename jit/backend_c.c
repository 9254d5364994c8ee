/* The C backend: the loop IR's C rendering (lir_print) compiled by the
 * system C compiler, for cross-checking the LLVM emitters. One compile is
 *   render C -> private temporary folder (mkdtemp, 0700) holding k.c and
 *   runtime/abi.h -> `$CC -O2 -shared -fPIC` -> dlopen -> bind helpers ->
 *   look up the kernel -> remove the files
 * $CC defaults to `cc`. The kernel reaches the runtime helpers
 * (tj_rt_reserve, ...) through pointers the backend fills in after
 * dlopen, because the process need not export its symbols (no -rdynamic).
 * The rendering is lir_print's LIR_PRINT_PARALLEL one: parallel loops are
 * outlined and run by the runtime's tj_rt_parallel_for_sched (the LLVM
 * backend's schedule and thread count), atomic updates use the compiler's
 * __atomic builtins, and vector loops print as their scalar loops, so no
 * flags beyond these (no -fopenmp) are needed. Every failure (no compiler, a compile error with the
 * compiler's first lines, dlopen) becomes a Diag; nothing exits.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi_text.h"
#include "backend.h"
#include "engine.h"   /* jit_now_ms, jit_cpu_ms */

#define BIND_SYMBOL "tj_c_bind_helpers"

/* Runtime helpers as pointers (after abi.h, whose prototypes they shadow). */
static const char helpers_c[] =
    "static int32_t (*tj_p_reserve)(tj_storage *, int32_t, int32_t, int64_t);\n"
    "static int32_t (*tj_p_alloc)(int64_t, void **);\n"
    "static void (*tj_p_free)(void *);\n"
    "static void (*tj_p_sort_crd)(void *, int64_t, int32_t);\n"
    "static int32_t (*tj_p_gett)(tj_storage **, const int32_t *, tj_gett_ukernel);\n"
    "static int (*tj_p_threads)(void);\n"
    "static int64_t (*tj_p_thread_slot)(int64_t);\n"
    "static void (*tj_p_parallel_for_sched)(int64_t, int64_t, const void *, int32_t,\n"
    "                                       const void *, int32_t, int32_t, tj_par_body, void *);\n"
    "static int64_t (*tj_p_marked_crd)(void *, const void *, int64_t, int32_t);\n"
    "#define tj_rt_reserve tj_p_reserve\n#define tj_rt_alloc tj_p_alloc\n"
    "#define tj_rt_free tj_p_free\n#define tj_rt_sort_crd tj_p_sort_crd\n"
    "#define tj_rt_gett tj_p_gett\n#define tj_rt_threads tj_p_threads\n"
    "#define tj_rt_thread_slot tj_p_thread_slot\n"
    "#define tj_rt_parallel_for_sched tj_p_parallel_for_sched\n"
    "#define tj_rt_marked_crd tj_p_marked_crd\n\n";

static const char bind_c[] =
    "\nvoid " BIND_SYMBOL "(void *const *h) {\n"
    "  tj_p_reserve = (int32_t (*)(tj_storage *, int32_t, int32_t, int64_t))h[0];\n"
    "  tj_p_alloc = (int32_t (*)(int64_t, void **))h[1];\n"
    "  tj_p_free = (void (*)(void *))h[2];\n"
    "  tj_p_sort_crd = (void (*)(void *, int64_t, int32_t))h[3];\n"
    "  tj_p_gett = (int32_t (*)(tj_storage **, const int32_t *, tj_gett_ukernel))h[4];\n"
    "  tj_p_threads = (int (*)(void))h[5];\n"
    "  tj_p_thread_slot = (int64_t (*)(int64_t))h[6];\n"
    "  tj_p_parallel_for_sched = (void (*)(int64_t, int64_t, const void *, int32_t, const void *,\n"
    "                                      int32_t, int32_t, tj_par_body, void *))h[7];\n"
    "  tj_p_marked_crd = (int64_t (*)(void *, const void *, int64_t, int32_t))h[8];\n"
    "}\n";

typedef struct CState {
  int vector_bits;
} CState;

/* One compile's private folder and the files in it. */
typedef struct Build {
  char dir[256];
  char path[4][300];   /* k.c, runtime/abi.h, the output, cc.log */
} Build;
enum { B_SRC, B_ABI, B_OUT, B_LOG };

static const char *compiler(void) {
  const char *cc = getenv("CC");
  return cc && *cc ? cc : "cc";
}

/* The C file the backend compiles: lir_print's header, the helper
 * pointers, the kernel, and the function that binds the pointers. */
static void render(FILE *f, const LirKernel *k) {
  fputs("#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n"
        "#include <string.h>\n\n#include \"runtime/abi.h\"\n\n", f);
  fputs(helpers_c, f);
  lir_print(f, k, LIR_PRINT_PARALLEL);
  fputs(bind_c, f);
}

static bool write_text(const char *path, const LirKernel *k, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  if (k) render(f, k);
  else if (text) fputs(text, f);
  return fclose(f) == 0;
}

static void build_close(Build *b) {
  for (int i = 0; i < 4; i++) unlink(b->path[i]);
  char sub[300];
  snprintf(sub, sizeof sub, "%s/runtime", b->dir);
  rmdir(sub);
  rmdir(b->dir);
}

/* Creates the private folder and writes k's C and runtime/abi.h into it. */
static bool build_open(Build *b, const LirKernel *k, const char *out_name, Diag *d) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp || strchr(tmp, '\'') || strlen(tmp) > 200) tmp = "/tmp";
  snprintf(b->dir, sizeof b->dir, "%s/tj-c-XXXXXX", tmp);
  memset(b->path, 0, sizeof b->path);
  if (!mkdtemp(b->dir))
    return diag_error(d, TJ_ERR_IO, "C backend: cannot create a temporary folder in %s", tmp);
  static const char *names[] = {"k.c", "runtime/abi.h", NULL, "cc.log"};
  for (int i = 0; i < 4; i++)
    snprintf(b->path[i], sizeof b->path[i], "%s/%s", b->dir, names[i] ? names[i] : out_name);
  char sub[300];
  snprintf(sub, sizeof sub, "%s/runtime", b->dir);
  if (mkdir(sub, 0700) == 0 && write_text(b->path[B_ABI], NULL, abi_text) &&
      write_text(b->path[B_SRC], k, NULL))
    return true;
  build_close(b);
  return diag_error(d, TJ_ERR_IO, "C backend: cannot write the kernel's C into %s", b->dir);
}

/* The first six lines of the compiler's output (at most n - 1 bytes). */
static void first_lines(const char *log, char *out, size_t n) {
  FILE *f = fopen(log, "r");
  size_t len = f ? fread(out, 1, n - 1, f) : 0;
  if (f) fclose(f);
  out[len] = 0;
  int lines = 0;
  for (size_t i = 0; i < len; i++)
    if (out[i] == '\n' && ++lines == 6) len = i;
  while (len > 0 && out[len - 1] == '\n') len--;
  out[len] = 0;
}

/* Runs `$CC <flags> -o <out> k.c`, its output into cc.log. */
static bool run_cc(Build *b, const char *flags, Diag *d) {
  const char *cc = compiler();
  size_t n = strlen(cc) + strlen(flags) + 4 * sizeof b->path[0] + 64;
  char *cmd = malloc(n);
  if (!cmd) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  snprintf(cmd, n, "%s %s -I'%s' -o '%s' '%s' >'%s' 2>&1", cc, flags, b->dir, b->path[B_OUT],
           b->path[B_SRC], b->path[B_LOG]);
  int rc = system(cmd);
  free(cmd);
  if (rc == 0) return true;
  char out[600];
  first_lines(b->path[B_LOG], out, sizeof out);
  if (rc == -1 || (WIFEXITED(rc) && WEXITSTATUS(rc) == 127))
    return diag_error(d, TJ_ERR_JIT,
                      "C backend: the C compiler '%s' was not found (set CC to a C compiler)%s%s",
                      cc, *out ? ": " : "", out);
  return diag_error(d, TJ_ERR_JIT, "C backend: '%s' failed on the kernel's C:\n%s", cc, out);
}

static void *c_open(const char *cpu, const char *features, Diag *d) {
  (void)cpu;
  CState *s = malloc(sizeof *s);
  if (!s) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  s->vector_bits = be_vector_bits_of(features);
#if defined(__x86_64__) || defined(__i386__)
  if (!features) {
    __builtin_cpu_init();
    s->vector_bits = __builtin_cpu_supports("avx512f") ? 512
                     : __builtin_cpu_supports("avx") ? 256 : 128;
  }
#endif
  return s;
}

static void c_close(void *state) { free(state); }

static bool c_compile(void *state, const LirKernel *k, const BackendOptions *o,
                      BackendKernel *out, Diag *d) {
  (void)state;
  memset(out, 0, sizeof *out);
  double t0 = jit_now_ms(), c0 = jit_cpu_ms();
  Build b;
  if (!build_open(&b, k, "k.so", d)) return false;
  double t1 = jit_now_ms(), c1 = jit_cpu_ms();
  char flags[64];
  snprintf(flags, sizeof flags, "-O%d -shared -fPIC%s", o->opt_level > 2 ? 2 : o->opt_level,
           o->fp_contract ? "" : " -ffp-contract=off");
  void *so = NULL;
  struct stat st = {0};
  if (run_cc(&b, flags, d) && !(so = dlopen(b.path[B_OUT], RTLD_NOW | RTLD_LOCAL)))
    diag_error(d, TJ_ERR_JIT, "C backend: dlopen: %s", dlerror());
  if (so) stat(b.path[B_OUT], &st);   /* its size: what dlopen maps, roughly */
  build_close(&b);
  if (!so) return false;
  void (*bind)(void *const *) = (void (*)(void *const *))dlsym(so, BIND_SYMBOL);
  tj_kernel_fn fn = (tj_kernel_fn)dlsym(so, k->name);
  if (!bind || !fn) {
    dlclose(so);
    return diag_error(d, TJ_ERR_JIT, "C backend: no symbol %s in the compiled C",
                      bind ? k->name : BIND_SYMBOL);
  }
  void *const helpers[] = {(void *)tj_rt_reserve, (void *)tj_rt_alloc, (void *)tj_rt_free,
                           (void *)tj_rt_sort_crd, (void *)tj_rt_gett,
                           (void *)tj_rt_threads, (void *)tj_rt_thread_slot,
                           (void *)tj_rt_parallel_for_sched, (void *)tj_rt_marked_crd};
  bind(helpers);
  *out = (BackendKernel){.fn = fn, .handle = so,
                         .times = {.ir_ms = t1 - t0, .codegen_ms = jit_now_ms() - t1,
                                   .ir_cpu_ms = c1 - c0, .codegen_cpu_ms = jit_cpu_ms() - c1},
                         .code_bytes = st.st_size > 0 ? (size_t)st.st_size : 0};
  return true;
}

static void c_release(void *state, BackendKernel *bk) {
  (void)state;
  if (bk->handle) dlclose(bk->handle);
  memset(bk, 0, sizeof *bk);
}

/* Copies a file's contents to f. */
static bool copy_file(const char *path, FILE *f) {
  FILE *in = fopen(path, "r");
  if (!in) return false;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, f);
  fclose(in);
  return true;
}

/* The source is what c_compile compiles; the assembly is the compiler's
 * (`-S` with the same flags); there is no LLVM IR. */
static bool c_print(void *state, const LirKernel *k, const BackendOptions *o, BackendStage st,
                    FILE *f, Diag *d) {
  (void)state;
  if (st == BE_STAGE_SOURCE) {
    render(f, k);
    return true;
  }
  if (st != BE_STAGE_ASM)
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "the C backend has no LLVM IR stage; its stages are the C it compiles "
                      "(-print-c) and the C compiler's assembly (-print-asm)");
  Build b;
  if (!build_open(&b, k, "k.s", d)) return false;
  char flags[32];
  snprintf(flags, sizeof flags, "-O%d -fPIC -S", o->opt_level > 2 ? 2 : o->opt_level);
  bool ok = run_cc(&b, flags, d);
  if (ok && !copy_file(b.path[B_OUT], f))
    ok = diag_error(d, TJ_ERR_IO, "C backend: no assembly from the C compiler");
  build_close(&b);
  return ok;
}

static int c_vector_bits(void *state) { return ((CState *)state)->vector_bits; }

const Backend backend_c = {
    .name = "c",
    .open = c_open,
    .close = c_close,
    .compile = c_compile,
    .release = c_release,
    .print = c_print,
    .vector_bits = c_vector_bits,
};
