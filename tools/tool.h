/* Shared declarations of the tensorjit command-line tool and REPL.
 *
 * The tool sits on the public API only (include/tensorjit.h). The library
 * needs every tensor's order and dims before it compiles, so the tool scans
 * an expression lightly itself (expr_scan.c) to learn which tensors appear,
 * with which index lists, and infers dims from index extents. Errors inside
 * the tool are one message in a process-wide buffer (tool_fail / tool_msg):
 * the tool is single-threaded, and every failing call returns false at once.
 */
#ifndef TENSORJIT_TOOL_H
#define TENSORJIT_TOOL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../include/tensorjit.h"

#define TOOL_NAME 64          /* longest tensor or index name + 1 */
#define TOOL_MAX_TENSORS 32          /* the library's NT_MAX_TENSORS */
#define TOOL_MAX_ACCESSES 64
#define TOOL_MAX_INDICES 16
#define TOOL_PRINT_MAX 20     /* entries shown by a result print */

/* ---- errors and small parsers (tool_util.c) ---- */

/* Records a printf-style message as the tool's current error; returns false. */
bool tool_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Records "<what>: <tj_last_error()>" as the current error; returns false. */
bool tool_fail_lib(const char *what);
/* The current error message. */
const char *tool_msg(void);
/* Parses a whole decimal integer >= min into *out; false if malformed. */
bool tool_parse_int(const char *s, int64_t min, int64_t *out);
/* Parses a whole floating-point number into *out; false if malformed. */
bool tool_parse_double(const char *s, double *out);
/* Milliseconds on a monotonic clock. */
double tool_now_ms(void);

/* ---- expression scanning (expr_scan.c) ---- */

typedef struct XsAccess {
  int tensor;                          /* index into XsScan.tensors */
  int order;
  int idx[TJ_MAX_ORDER_PUBLIC];        /* index ids, one per mode */
} XsAccess;

typedef struct XsTensor {
  char name[TOOL_NAME];
  int order;
} XsTensor;

typedef struct XsScan {
  XsTensor tensors[TOOL_MAX_TENSORS];  /* tensors[0] is the output */
  int ntensors;
  XsAccess acc[TOOL_MAX_ACCESSES];     /* acc[0] is the left-hand side */
  int nacc;
  char index[TOOL_MAX_INDICES][TOOL_NAME];
  int nindex;
  bool accumulate;                     /* "+=" */
} XsScan;

/* Scans expr's accesses into *s (the names defs defines, "f(x) = ...;
 * g(x, y) = ...", may be NULL, are calls, not tensors); false (tool_fail)
 * on a malformed access or a tensor used with two different orders. Full checking is the
 * library's job; this only learns names and index lists. */
bool xs_scan(const char *expr, const char *defs, XsScan *s);
/* The id of tensor `name` in s, or -1. */
int xs_tensor(const XsScan *s, const char *name);
/* The id of index `name` in s, or -1. */
int xs_index(const XsScan *s, const char *name);
/* Sets ext[i] (pre-filled, -1 = unknown) for each index still unknown from
 * the dims of tensors[t] (NULL = no dims yet) where it is accessed. */
void xs_extents(const XsScan *s, tj_tensor *const *tensors, int64_t *ext);
/* Fills dims of tensor t from the index extents of its first access;
 * false (tool_fail, naming the index) when one is unknown. */
bool xs_dims_from_extents(const XsScan *s, int t, const int64_t *ext,
                          int64_t *dims);

/* ---- random data (random_gen.c) ---- */

typedef enum { GEN_NONE = 0, GEN_DENSE = 'd', GEN_SPARSE = 's',
               GEN_POWERLAW = 'p' } GenKind;
#define GEN_DEFAULT_DENSITY 0.01

/* Fills empty tensor t with random entries of kind k at density (ignored
 * for GEN_DENSE), deterministic in (seed, tensor name), and packs it. */
bool gen_fill(tj_tensor *t, GenKind k, double density, uint64_t seed);

/* ---- running kernels (kernel_ops.c) ---- */

typedef struct TimeStats {
  tj_compile_times compile;   /* of the kernel's tj_compile */
  double assemble_ms, median_ms, min_ms, max_ms;
  int reps;
} TimeStats;

/* Times k: one warm-up, one timed ASSEMBLE, then reps timed COMPUTE runs
 * on ops (NULL: the operands bound at compile time). */
bool kop_time(tj_kernel *k, tj_tensor *const *ops, int n, int reps,
              TimeStats *ts);
/* Prints ts in the three-line -time format to out. */
void kop_print_time(const TimeStats *ts, FILE *out);
/* A copy of ops[out] holding the reference interpreter's result of expr
 * (owned by the caller); NULL with tool_fail on failure. Call it before a
 * "+=" kernel runs, since the reference reads the output's old values. */
tj_tensor *kop_reference(const char *expr, tj_tensor *const *ops, int n,
                         int out, const tj_options *opts);
/* Compares got with ref entry by entry; prints "check: ok (max abs error
 * e)" to out, or returns false (tool_fail) naming the first bad entry. */
bool kop_compare(const tj_tensor *got, const tj_tensor *ref, FILE *out);
/* Prints a one-line description of t (dims, format, dtype, nnz, bytes). */
void kop_info(const tj_tensor *t, FILE *out);
/* Looks up a stage by its flag/command name ("cin", "llvm-opt", ...);
 * false if unknown. */
bool kop_stage(const char *name, tj_stage *st);

/* ---- command line (cli_args.c, cli_run.c) and REPL (repl.c) ---- */

typedef struct CliTensor {
  char name[TOOL_NAME];
  const char *format;        /* -f spec, or NULL */
  bool has_dtype;
  tj_dtype dtype;            /* -t */
  int ndims;                 /* -d=<T>:..., 0 if none */
  int64_t dims[TJ_MAX_ORDER_PUBLIC];
  const char *file;          /* -i */
  GenKind gen;               /* -g */
  double density;
  const char *out;           /* -o */
} CliTensor;

typedef struct CliArgs {
  const char *expr;
  CliTensor t[TOOL_MAX_TENSORS];
  int nt;
  const char *schedule;      /* -s */
  tj_options opts;
  uint64_t seed;
  bool time;
  int reps;
  unsigned stages;           /* bit (1u << tj_stage) per -print-* flag */
  const char *write_source;
  const char *print_after;   /* -print-after=<pass> */
  char defs[4096];           /* -def= texts joined by ';' (opts.defs) */
  bool check, repl, help, version;
} CliArgs;

/* Parses argv into *a; false (tool_fail) on an unknown flag or bad value. */
bool cli_parse(int argc, char **argv, CliArgs *a);
/* Prints the usage text to out. */
void cli_usage(FILE *out);
/* Runs the command line described by a; returns the exit status and
 * prints "tensorjit: <message>" on failure. */
int cli_run(CliArgs *a);
/* Runs the REPL on stdin; returns the exit status. */
int repl_run(const CliArgs *a);
/* A REPL session (repl_run's, also driven line by line by tests/fuzz_repl):
 * owned by the caller (repl_free); NULL with tool_fail on failure. */
typedef struct Repl Repl;
Repl *repl_new(const CliArgs *a);
void repl_free(Repl *r);
/* Runs one line (modified in place); false with tool_msg() on an error,
 * which changes nothing in the session. *quit: the line asked to leave. */
bool repl_line(Repl *r, char *line, bool *quit);

#endif
