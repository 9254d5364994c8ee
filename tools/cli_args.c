/* Command-line parsing for `tensorjit [options] '<expression>'`.
 *
 * Flags follow taco's spelling: one dash, values after '=', per-tensor
 * values as <T>:<value> (`-f=A:ds:1,0`, `-d=A:100,200`, `-g=x:s:0.05`).
 * A double dash is accepted too (`--time=5`). Parsing only checks syntax;
 * whether a name is a tensor or an index of the expression is settled in
 * cli_run.c once the expression has been scanned.
 */
#include "tool.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_REPS 10

void cli_usage(FILE *out) {
  fputs(
      "usage: tensorjit [options] '<expression>'     compile (and run) one kernel\n"
      "       tensorjit [-repl]                       interactive session (:help)\n"
      "\n"
      "tensors (T is a tensor name of the expression):\n"
      "  -f=T:<levels>[:<mode order>]  format: d dense, s compressed, u nonunique,\n"
      "                                o nonordered (SpGEMM into A:do skips the\n"
      "                                per-row sort), q singleton, c singleton-\n"
      "                                nonunique, l loose_compressed;\n"
      "                                -f=A:ds:1,0 is CSC; -f=A:dsdd:0/4,1/4,0%4,1%4\n"
      "                                is BSR 4x4 (d/k: d floordiv k, d%k: d mod k);\n"
      "                                also -f='A:(i,j) -> (j : dense, i : compressed)';\n"
      "                                n<N> n_out_of_m: -f=A:ddn2:0,1/4,1%4 is 2:4\n"
      "                                (MLIR: j mod 4 : structured[2, 4]); widths:\n"
      "                                -f='A:(i,j) -> (i : dense, j : compressed),\n"
      "                                posWidth = 8, crdWidth = 16'\n"
      "  -t=T:<dtype>                  f64 (default), f32, i64, i32, i16, i8, bool,\n"
      "                                u64, u32, u16, u8\n"
      "  -d=T:<n1>,<n2>,...            dims of T;  -d=<index>:<n> extent of an index\n"
      "  -i=T:<file>                   read .mtx / .tns (.gz) into T\n"
      "  -g=T:<kind>[:<density>]       random T: d dense, s uniform sparse, p power-law\n"
      "                                rows (density default 0.01); s keeps at most n\n"
      "                                per block of an n_out_of_m T (2:4 pruning)\n"
      "  -seed=<n>                     seed for -g (default 0)\n"
      "  -o=T:<file>                   write T after evaluation (.mtx or .tns)\n"
      "compiling and running:\n"
      "  -s=<directives>               schedule, e.g. -s='reorder(i,k,j) parallelize(i)';\n"
      "                                sequence() / nosequence(): a sum of terms into a dense\n"
      "                                output as statements in turn (A = D, A += B C), or not\n"
      "  -nthreads=<n>                 threads (default: TJ_NUM_THREADS or all cores)\n"
      "  -O<n>                         LLVM optimization level 0..3 (default 3)\n"
      "  -no-vectorize                 skip tensorjit's vectorization pass\n"
      "  -no-llvm-vectorize            turn LLVM's loop and SLP vectorizers off\n"
      "  -no-unroll-jam                skip register blocking (unroll-and-jam) of dense nests\n"
      "  -backend=<llvm|c>             code generator: llvm (default, in-process) or c, the\n"
      "                                C rendering built by $CC (else cc) and dlopen'ed, for\n"
      "                                cross-checking the LLVM backend\n"
      "  -def='f(x) = <expr>'          define an element operator the expression may call,\n"
      "                                e.g. -def='relu(x) = max(x, 0)' (repeatable; f(x, y)\n"
      "                                takes two); inlined, sparsity follows its body\n"
      "  -semiring=<add.mul>           reinterpret + (and sums) and * : plus.times (default),\n"
      "                                min.plus, max.plus, min.times, max.times, min.max,\n"
      "                                max.min, plus.pair, plus.min, or.and; absent entries\n"
      "                                are the add's identity (+inf under min.plus)\n"
      "  -time[=<reps>]                time assemble and compute (default 10 reps)\n"
      "  -check                        compare the result with the reference interpreter\n"
      "printing:\n"
      "  -print-notation -print-cin -print-lattice -print-assembly -print-compute\n"
      "  -print-c -print-llvm -print-llvm-opt -print-asm\n"
      "  -print-gett                   a dense contraction's GETT/TTGT/LoG plan; the\n"
      "                                schedule's method(gett|ttgt|log|loops) forces one\n"
      "  -print-after=<pass>           loop IR after lower, tile, promote, vectorize,\n"
      "                                unroll-jam, peel or prefetch\n"
      "  -write-source=<file>          write the C rendering of the kernel\n"
      "  -repl  --help  --version\n",
      out);
}

/* The CliTensor named name (created if new); NULL (tool_fail) if full. */
static CliTensor *tensor_spec(CliArgs *a, const char *name, size_t len) {
  for (int i = 0; i < a->nt; i++)
    if (strlen(a->t[i].name) == len && !strncmp(a->t[i].name, name, len)) return &a->t[i];
  if (a->nt == TOOL_MAX_TENSORS) {
    tool_fail("too many tensors named in flags (at most %d)", TOOL_MAX_TENSORS);
    return NULL;
  }
  CliTensor *t = &a->t[a->nt++];
  memset(t, 0, sizeof *t);
  memcpy(t->name, name, len);
  return t;
}

/* Splits "T:<rest>" of flag `flag`; *rest points after the ':'. */
static CliTensor *split_tensor(CliArgs *a, const char *flag, const char *v,
                               const char **rest) {
  const char *colon = strchr(v, ':');
  size_t len = colon ? (size_t)(colon - v) : 0;
  bool ident = len > 0 && len < TOOL_NAME && (isalpha((unsigned char)v[0]) || v[0] == '_');
  for (size_t i = 0; ident && i < len; i++)
    ident = isalnum((unsigned char)v[i]) || v[i] == '_';
  if (!ident || !colon[1]) {
    tool_fail("%s=%s: expected %s=<name>:<value>", flag, v, flag);
    return NULL;
  }
  *rest = colon + 1;
  return tensor_spec(a, v, len);
}

static bool parse_dtype(const char *s, tj_dtype *out) { return tj_dtype_parse(s, out) == TJ_OK; }

/* -d=T:<n1>,<n2>,... (or -d=<index>:<n>). */
static bool parse_dims(CliTensor *t, const char *v, const char *all) {
  char buf[256];
  if (strlen(v) >= sizeof buf) return tool_fail("-d=%s: value too long", all);
  strcpy(buf, v);
  t->ndims = 0;
  for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (t->ndims == TJ_MAX_ORDER_PUBLIC)
      return tool_fail("-d=%s: more than %d dims", all, TJ_MAX_ORDER_PUBLIC);
    if (!tool_parse_int(tok, 0, &t->dims[t->ndims++]))
      return tool_fail("-d=%s: '%s' is not a dimension (a whole number >= 0)", all, tok);
  }
  if (t->ndims == 0 || v[strlen(v) - 1] == ',' || strstr(v, ",,"))
    return tool_fail("-d=%s: expected a comma-separated list of dims", all);
  return true;
}

/* -g=T:<kind>[:<density>]. */
static bool parse_gen(CliTensor *t, const char *v, const char *all) {
  if (!strchr("dsp", v[0]) || (v[1] && v[1] != ':'))
    return tool_fail("-g=%s: kind must be d (dense), s (sparse) or p (power-law)", all);
  t->gen = (GenKind)v[0];
  t->density = GEN_DEFAULT_DENSITY;
  if (v[1] == ':' && (!tool_parse_double(v + 2, &t->density) ||
                      !(t->density > 0 && t->density <= 1)))
    return tool_fail("-g=%s: density '%s' is not a number in (0, 1]", all, v + 2);
  return true;
}

/* Handles one -X=T:<value> per-tensor flag; false if it is not one. */
static bool tensor_flag(CliArgs *a, const char *arg, bool *matched) {
  static const char *flags[] = {"-f", "-t", "-d", "-i", "-g", "-o"};
  const char *eq = strchr(arg, '=');
  *matched = false;
  for (int i = 0; eq && i < 6; i++) {
    if ((size_t)(eq - arg) != 2 || strncmp(arg, flags[i], 2)) continue;
    *matched = true;
    const char *rest;
    CliTensor *t = split_tensor(a, flags[i], eq + 1, &rest);
    if (!t) return false;
    switch (arg[1]) {
    case 'f': t->format = rest; return true;
    case 't':
      t->has_dtype = true;
      return parse_dtype(rest, &t->dtype) ||
             tool_fail("-t=%s: unknown dtype '%s' (f64, f32, i64, i32, i16, i8, bool, u64, u32, u16 or u8)", eq + 1, rest);
    case 'd': return parse_dims(t, rest, eq + 1);
    case 'i': t->file = rest; return true;
    case 'g': return parse_gen(t, rest, eq + 1);
    case 'o': t->out = rest; return true;
    }
  }
  return true;
}

/* Handles a flag without a per-tensor value; false on an unknown flag. */
static bool plain_flag(CliArgs *a, const char *arg) {
  const char *v = strchr(arg, '=');
  int64_t n;
  tj_stage st;
  if (!strcmp(arg, "-help") || !strcmp(arg, "-h")) a->help = true;
  else if (!strcmp(arg, "-version")) a->version = true;
  else if (!strcmp(arg, "-repl")) a->repl = true;
  else if (!strcmp(arg, "-check")) a->check = true;
  else if (!strcmp(arg, "-no-vectorize")) a->opts.no_vectorize = 1;
  else if (!strcmp(arg, "-no-llvm-vectorize")) a->opts.no_llvm_vectorize = 1;
  else if (!strcmp(arg, "-no-unroll-jam")) a->opts.no_unroll_jam = 1;
  else if (!strcmp(arg, "-time")) a->time = true;
  else if (!strncmp(arg, "-time=", 6)) {
    if (!tool_parse_int(v + 1, 1, &n) || n > 1000000)
      return tool_fail("%s: repetitions must be a whole number in 1..1000000", arg);
    a->time = true, a->reps = (int)n;
  } else if (!strncmp(arg, "-O", 2) && arg[2] >= '0' && arg[2] <= '3' && !arg[3]) {
    a->opts.opt_level = arg[2] - '0';
  } else if (!strncmp(arg, "-O", 2)) {
    return tool_fail("%s: optimization level must be -O0, -O1, -O2 or -O3", arg);
  } else if (!strncmp(arg, "-print-", 7) && kop_stage(arg + 7, &st) && strcmp(arg + 7, "ir")) {
    a->stages |= 1u << st;
  } else if (!strncmp(arg, "-nthreads=", 10)) {
    if (!tool_parse_int(v + 1, 1, &n) || n > 4096)
      return tool_fail("%s: thread count must be a whole number in 1..4096", arg);
    a->opts.nthreads = (int)n;
  } else if (!strncmp(arg, "-seed=", 6)) {
    if (!tool_parse_int(v + 1, 0, &n)) return tool_fail("%s: seed must be a whole number >= 0", arg);
    a->seed = (uint64_t)n;
  } else if (!strncmp(arg, "-s=", 3)) {
    a->schedule = v + 1;
  } else if (!strncmp(arg, "-print-after=", 13) && arg[13]) {
    a->print_after = v + 1;
  } else if (!strncmp(arg, "-backend=", 9)) {
    if (strcmp(v + 1, "llvm") && strcmp(v + 1, "c"))
      return tool_fail("%s: the backend must be llvm or c", arg);
    a->opts.backend = strcmp(v + 1, "c") ? TJ_BACKEND_LLVM : TJ_BACKEND_C;
  } else if (!strncmp(arg, "-def=", 5) && arg[5]) {
    size_t used = strlen(a->defs);
    if (used + strlen(v + 1) + 2 > sizeof a->defs) return tool_fail("%s: definitions too long", arg);
    snprintf(a->defs + used, sizeof a->defs - used, "%s%s", used ? ";" : "", v + 1);
    a->opts.defs = a->defs;
  } else if (!strncmp(arg, "-semiring=", 10) && arg[10]) {
    a->opts.semiring = v + 1;
  } else if (!strncmp(arg, "-write-source=", 14) && arg[14]) {
    a->write_source = v + 1;
  } else {
    return tool_fail("unknown flag '%s' (see --help)", arg);
  }
  return true;
}

bool cli_parse(int argc, char **argv, CliArgs *a) {
  memset(a, 0, sizeof *a);
  a->opts = tj_options_default();
  a->reps = DEFAULT_REPS;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || !arg[1]) {
      if (a->expr) return tool_fail("more than one expression: '%s' and '%s'", a->expr, arg);
      a->expr = arg;
      continue;
    }
    if (arg[1] == '-' && arg[2]) arg++;     /* --flag is -flag */
    bool matched;
    if (!tensor_flag(a, arg, &matched)) return false;
    if (!matched && !plain_flag(a, arg)) return false;
  }
  if (a->expr && !*a->expr) return tool_fail("the expression is empty");
  return true;
}
