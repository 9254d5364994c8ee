/* Internal structures of the compile driver shared by driver.c (compile,
 * cache), driver_run.c (running kernels) and driver_stages.c (printing stages). */
#ifndef TJ_JIT_DRIVER_H
#define TJ_JIT_DRIVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "../include/tensorjit.h"
#include "../ir/arena.h"
#include "../ir/loop_ir.h"
#include "../ir/notation.h"
#include "../lower/lower.h"
#include "../runtime/tensor.h"
#include "backend.h"
#include "engine.h"   /* jit_now_ms only: code generation goes through Backend */

/* A disk-cache folder a context was given. Owned by the context (kept in
 * its list until tj_context_free, so entries may borrow it); opened and
 * checked once, on the first compile that needs it (drv_disk_open). */
typedef struct DiskCache {
  struct DiskCache *next;     /* the context's list */
  char *path;                 /* as given ("" the default until opened; malloc'd) */
  int fd;                     /* O_DIRECTORY descriptor when trusted, else -1 */
  bool checked;               /* drv_disk_open ran (fd < 0 then: refused) */
} DiskCache;

/* Kernel variants of an entry: a LowerPhase, DRV_ROWS(phase) for the
 * row-range kernel of that phase (parallel sparse outputs), DRV_COMBINE,
 * or DRV_PLAIN(phase): the kernel of that phase reading every operand as
 * declared, without the plan's vec_layout copies (run when a copy would
 * be large next to the work: driver_run.c, layout_copy_pays). */
#define DRV_VARIANTS 10
#define DRV_ROWS(ph) ((ph) + 3)
#define DRV_COMBINE 6   /* lower_kernel_combine: partials by a definition */
#define DRV_PLAIN(ph) ((ph) + 7)

/* One compiled kernel shape, shared by every tj_kernel with the same
 * canonical key (expression up to renaming, formats, dtypes, widths,
 * schedule, options, target). Owned by its context, in its list from the
 * most recently used (cx->entries) to the least (cx->entries_tail); refs
 * counts the tj_kernel handles (and compiles in flight) using it. An entry
 * with refs == 0 may be evicted (its code removed from the JIT, its memory
 * freed) when the context holds more than its limit; one in use never is,
 * so a kernel that runs always has its code. refs, prev, next, bytes:
 * cx->lock. */
/* One statement of a sequence (plan_sequence in driver.c), planned as an
 * entry's single statement is: its assignment, notation, plan, options and
 * dense contraction method. */
typedef struct SeqStmt {
  Assignment *as;
  Cin *cin;
  LowerPlan plan;
  LowerOptions opt;
  GettPlan gett;
  uint64_t gett_probed;       /* as CacheEntry.gett_probed, for this statement */
} SeqStmt;

typedef struct CacheEntry {
  struct CacheEntry *next, *prev;
  long refs;
  struct tj_context *cx;      /* its context */
  size_t bytes;               /* its size as last accounted (drv_entry_size) */
  char *key;                  /* canonical key (malloc'd) */
  uint64_t hash;
  Arena arena;                /* assignment, plan, loop IR */
  Assignment *as;
  Cin *cin;
  LowerPlan plan;             /* analysis: loop order, conversions, workspace */
  LowerOptions opt;           /* code-generation switches */
  GettPlan gett;              /* a pure dense contraction's method (GETT_LOOPS: none) */
  int nseq;                   /* > 0: as runs as sequence(seq[0], seq[1], ...), each */
  SeqStmt *seq;               /* statement its own loop nest in one kernel; e->cin
                                 prints it, e->plan has their conversions */
  uint64_t gett_probed;       /* the last GETT timing key looked up on disk (atomic) */
  /* method(sell): y(i) (+)= A(i,j) * x(j) runs rt_sell_spmv over a SELL copy
   * of A kept on A (runtime/sell.c); tensor ids, sell_a 0: off */
  int sell_a, sell_x;
  LirKernel *lir[DRV_VARIANTS];          /* by variant, lowered on demand */
  BackendKernel bk[DRV_VARIANTS];
  bool compiled[DRV_VARIANTS];
  const Backend *be;
  void *bstate;               /* the backend's state (owned by the context) */
  BackendOptions bopt;
  const DiskCache *disk;      /* trusted on-disk cache (the context's), or NULL */
  bool from_disk[DRV_VARIANTS];          /* variant loaded from the disk cache */
  bool no_vectorize;          /* tensorjit's own vectorization pass off */
  bool no_unroll_jam;         /* register blocking of dense nests off */
  const char *semiring;       /* its name (static), NULL: plus.times */
  const char *defs;           /* the user's definitions (in arena), or NULL */
  pthread_mutex_t lock;       /* guards lazy lowering/compiling */
} CacheEntry;

/* A backend opened for one target, shared by the context's entries. */
typedef struct Engine {
  struct Engine *next;
  const Backend *be;
  char *cpu, *features;       /* as requested (NULL host) */
  void *state;
} Engine;

struct tj_context {
  pthread_mutex_t lock;
  CacheEntry *entries, *entries_tail;   /* most .. least recently used */
  size_t nentries;
  size_t limit;               /* entries kept; 0: no limit (eviction skips those in use) */
  size_t max_bytes;           /* their total size kept; 0: no limit */
  size_t bytes;               /* the entries' sizes summed (CacheEntry.bytes) */
  uint64_t hits, misses, evictions;
  Engine *engines;
  struct tj_kernel *kernels;  /* live handles (doubly linked) */
  DiskCache *disk;            /* the current on-disk cache, NULL off */
  DiskCache *disks;           /* every one set on this context (owned) */
};

/* ---- sequence (driver_sequence.c) ---- */
/* Whether as runs as a sequence of statements: sequence() forces it (or
 * says why not), nosequence() denies it, and by default it runs so when a
 * statement is a dense contraction GETT takes of at least 1e8 flops
 * (smaller ones ran slower) and the schedule asks for nothing but
 * parallelize and method. Returns the statements' count (their
 * assignments in parts), 0 for one statement, -1 with d set. */
int drv_sequence_wanted(Arena *a, const Assignment *as, const Schedule *s, Assignment **parts,
                        Diag *d);
/* Plans each statement with plan (the driver's plan_statement) under the
 * schedule's directives that name its loops, and e as the sequence: e->seq,
 * its notation printed as sequence(...), the statements' conversions in
 * e->plan (refused where two statements read one operand in two formats). */
typedef bool (*DrvPlanStmt)(CacheEntry *e, Assignment *as, Schedule *s, Diag *d);
bool drv_plan_sequence(CacheEntry *e, Assignment *as, const Schedule *s, Assignment **parts,
                       int n, DrvPlanStmt plan, Diag *d);
/* Variant v of a sequence entry: lower_kernel_seq over its statements. */
LirKernel *drv_lower_sequence(CacheEntry *e, Arena *a, int v, const char *name, Diag *d);

/* Kernels over blocked operands (driver_blocked.c): the rewritten
 * expression and what each operand runs as. */
typedef struct DrvBlocked DrvBlocked;
/* Whether one of ops has a blocked format. */
bool drv_blocked_any(tj_tensor *const *ops, int n);
/* Plans a kernel over blocked operands: the rewritten expression and
 * schedule, each operand's view. NULL with d set when refused. Owned by
 * the caller: drv_blocked_free. */
DrvBlocked *drv_blocked_plan(const char *expr, tj_tensor *const *ops, int n,
                             const char *schedule, Diag *d);
void drv_blocked_free(DrvBlocked *b);
/* st, or where the rewritten kernel of expr failed on a bound(...) the
 * plan added (a sum over blocks nested beside unblocked operands), a
 * refusal naming the construct in the user's terms (tj_last_error). */
tj_status drv_blocked_explain(const DrvBlocked *b, const char *expr, tj_status st);
const char *drv_blocked_expr(const DrvBlocked *b);
const char *drv_blocked_schedule(const DrvBlocked *b);
/* The output's name when it is blocked (a kernel writes it through its
 * levels), else NULL. */
const char *drv_blocked_output(const DrvBlocked *b);
/* Whether the output is rebuilt whole at every run (n_out_of_m: every
 * phase evaluates into its stand-in and repacks it). */
bool drv_blocked_rebuilds(const DrvBlocked *b);
/* The operands the kernel was compiled over (by position). */
tj_tensor *const *drv_blocked_orig(const DrvBlocked *b, int *n);
/* How many masks of views of blocked tensors read in place the kernel
 * takes after the n operands given (drv_blocked_views puts them there). */
int drv_blocked_masks(const DrvBlocked *b);
/* Room for the compile's views (NT_MAX_TENSORS, owned by b). */
tj_tensor *drv_blocked_compile_views(DrvBlocked *b);
/* out[k] = what ops[k] runs as: itself, or a view in store[k] (the tensor
 * of its levels, or a dense tensor reshaped), or a converted copy of a view
 * of a blocked tensor; out[n ..] the masks (drv_blocked_masks more).
 * A framed dense input whose blocked indices block windows keep to the
 * view is read in place; overwrite (the run computes an `=` output, or
 * nothing runs) leaves a dense output's padded copy zeroed, not copied
 * in. False with d set on a mismatch (a dense extent not a multiple of
 * its block, ...). */
bool drv_blocked_views(const DrvBlocked *b, tj_tensor *const *ops, int n, tj_tensor *store,
                       bool overwrite, tj_tensor **out, Diag *d);
/* After a run (out_name: the output's name; NULL after a compile, which
 * wrote nothing): a blocked output takes its level view's arrays, failed
 * or not (the run left it as an unblocked output would be left); a dense
 * output takes its split view's values when ok; an n_out_of_m output is
 * repacked from its stand-in when ok (TJ_ERR_FORMAT, naming the block,
 * when one does not fit; the output is then empty). Padded copies and
 * stand-ins are freed. */
tj_status drv_blocked_finish(const DrvBlocked *b, tj_tensor *const *ops,
                             tj_tensor *const *views, int n, const char *out_name, bool ok);

/* `+=` (or `=`) into a sparse output from a sum below its indices
 * (driver_accum.c): each additive term with a sum into a temporary T<m>,
 * then `A += <the rhs over the T<m>>`. */
typedef struct DrvAccum DrvAccum;
/* One read of a compile's expression for the routes it may take
 * (driver_accum.c): its checked tree (drv_notation), its output operand
 * and the sums that would become temporaries. drv_compile reads it once
 * and hands it to every route's question. */
typedef struct DrvSplit DrvSplit;
/* Reads expr into *out; *out stays NULL where no route needs it (no
 * operand has a sparse level) or expr does not check (the usual route then
 * says why). TJ_ERR_NOMEM when reading ran out of memory. */
tj_status drv_split_read(const char *expr, tj_tensor *const *ops, int n, const tj_options *o,
                         DrvSplit **out);
void drv_split_free(DrvSplit *s);
/* The operand the expression writes (NULL for a NULL split). */
const tj_tensor *drv_split_output(const DrvSplit *s);
/* Whether the expression is a `+=`. */
bool drv_split_accumulates(const DrvSplit *s);
/* Whether s is such a `+=` (accumulate; else such a `=`): an index of the
 * rhs the output lacks, a sparse, unblocked output among the operands. */
bool drv_accum_wanted(const DrvSplit *s, bool accumulate);
/* The schedule `reorder(<A's indices by level but the last>, <sums>,
 * <A's last>)` of s (`A(...) = rhs` or `+=`) into buf: Gustavson's loops
 * in the output's level order; false when A's last level is full, there is
 * no sum, or buf is too short. */
bool drv_accum_level_schedule(const DrvSplit *s, char *buf, size_t len);
/* Compiles s as T<m> = term m (schedule, opts) and A += the rhs over
 * them; *out is the latter, owning the former. An error when either does
 * not compile (the caller then compiles the union form). s's arena takes
 * the texts' trees. */
tj_status drv_accum_compile(tj_context *cx, DrvSplit *s, tj_tensor *const *ops, int n,
                            const char *schedule, const tj_options *opts, tj_kernel **out);
/* A run: each T<m> (fresh each run) evaluated, then k in phase. */
tj_status drv_accum_run(tj_kernel *k, tj_phase phase, tj_tensor *const *operands, int n,
                        bool interpret);
void drv_accum_free(DrvAccum *a);
/* The kernel of temporary m (T<m> = a term of the rhs), NULL past the last. */
tj_kernel *drv_accum_sum(const DrvAccum *a, int m);
/* tj_compile; with exact, refused (TJ_ERR_UNSUPPORTED) unless the
 * output's pattern is exact (lower_plan_output_exact). */
tj_status drv_compile(tj_context *cx, const char *expr, tj_tensor *const *operands, int n,
                      const char *schedule, const tj_options *opts, bool exact,
                      tj_kernel **out);
/* Runs k alone (its blocked views, not its DrvAccum; driver_run.c). */
tj_status drv_run_one(tj_kernel *k, tj_phase phase, tj_tensor *const *operands, int n,
                      bool interpret);
/* A run of a kernel past its stand-in (driver_run.c's dispatch). */
typedef tj_status (*DrvRunFn)(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                              int n, bool interpret);
/* An output with levels no kernel writes (loose_compressed), compiled over
 * a stand-in in the levels written in their place and repacked into the
 * output after each run (driver_standin.c). */
typedef struct DrvStandin DrvStandin;
/* Whether s's output is such an output (not blocked, no view). */
bool drv_standin_wanted(const DrvSplit *s);
/* tj_compile over the stand-in; *out owns it. */
tj_status drv_standin_compile(tj_context *cx, const DrvSplit *s, const char *expr,
                              tj_tensor *const *ops, int n, const char *schedule,
                              const tj_options *opts, tj_kernel **out);
/* A run (any phase evaluates): a fresh stand-in (the output's contents
 * under +=) run by `run`, then repacked into the output. */
tj_status drv_standin_run(tj_kernel *k, tj_tensor *const *operands, int n, bool interpret,
                          DrvRunFn run);
void drv_standin_free(DrvStandin *s);
/* Takes sub out of its context's kernel list: its owner frees it with
 * drv_kernel_drop (driver.c). */
void drv_kernel_own(tj_kernel *sub);
void drv_kernel_drop(tj_kernel *sub);

struct tj_kernel {
  struct tj_kernel *next, *prev;
  DrvBlocked *blk;            /* blocked operands: runs go through views */
  DrvAccum *acc;              /* a sum below a sparse +=: run through a temporary */
  DrvStandin *standin;        /* an output no kernel writes: run on a stand-in */
  tj_context *cx;
  CacheEntry *entry;
  Arena arena;                /* this binding's assignment */
  Assignment *as;
  int nbound;
  tj_tensor *bound[NT_MAX_TENSORS];   /* by TensorId */
  tj_compile_times times;
  tj_options opts;
  /* Chunk outputs of parallel assembly, kept between runs so their arrays
   * are reused instead of grown from scratch (fresh pages faulted in by
   * two threads at once cost more than the kernels); taken with trylock,
   * so concurrent runs of one kernel allocate their own. */
  pthread_mutex_t chunk_lock;
  tj_storage *chunks;
  int nchunks;
  /* The 0/1 patterns of sparse masks (LowerPlan.pattern), kept between
   * runs and rebuilt only when the mask's structure changed; held (with
   * trylock) from the refresh to the kernel's end, so a concurrent run
   * builds its own. */
  pthread_mutex_t pattern_lock;
  RtPattern patterns[NT_MAX_TENSORS];
};

/* Frees a kernel's cached chunk outputs (driver_run.c). */
void drv_kernel_release_chunks(struct tj_kernel *k);

/* Opens dc's folder once (creating it, and the default's path, with mode
 * 0700) and checks that it can be trusted; a refused folder gets one
 * warning on stderr and dc->fd stays -1. Call with the context locked. */
void drv_disk_open(DiskCache *dc);
/* Closes and frees dc (not its list successors). */
void drv_disk_free(DiskCache *dc);
/* Compiles variant v (already lowered) through the trusted on-disk cache
 * dc: loads a valid cached object (*from_disk) or compiles and stores one;
 * an untrusted file is neither loaded nor replaced (compiled in memory). */
bool drv_disk_compile(CacheEntry *e, int v, const DiskCache *dc, bool *from_disk, Diag *d);

/* The method GETT timing chose for the runtime's key (rt_gett_tune_key)
 * in e's disk cache (e->disk set): load puts a stored one into the
 * runtime's table (false when there is none, or with a warning when the
 * file is bad); save writes the table's entry for key, if it has one. */
bool drv_disk_gett_load(const CacheEntry *e, uint64_t key);
void drv_disk_gett_save(const CacheEntry *e, uint64_t key);

/* A cache file's object code as read by drv_disk_parse. */
typedef struct DiskObject {
  void *obj;                  /* malloc'd, owned by the caller */
  size_t len;
  char symbol[128];           /* NUL-terminated */
} DiskObject;
/* Reads a cache file's bytes from f and checks them against key (header,
 * format version, key, size, checksum, symbol, nothing after the object):
 * true with *out filled; else false, *out empty, and one warning on stderr
 * naming dir/name. Loads nothing: the caller decides (tests/fuzz_cache). */
bool drv_disk_parse(FILE *f, const char *key, const char *dir, const char *name,
                    DiskObject *out);
/* Writes a cache file for key and its object code to f; false on a
 * write error. */
bool drv_disk_serialize(FILE *f, const char *key, const void *obj, size_t len,
                        const char *symbol);

/* Sets e's code-generation switches (e->opt) from the backend's target
 * and the environment, for e's plan (driver_options.c). */
void drv_set_options(CacheEntry *e, const Assignment *as);
/* Whether the on-by-default switch `name` (TJ_VECTOR_GATHER, TJ_MASKED_TAIL,
 * TJ_PROMOTE) is on: unless its value starts with '0'. In the cache key. */
bool drv_env_on(const char *name);
/* LowerPlan.lattice_max from TJ_WIDE_UNION_THRESHOLD (a test and benchmark
 * switch between lattice and merged loops), 0 (the default) when unset. */
int drv_lattice_max(void);
/* LowerOptions.prefetch: LOWER_PREFETCH_AHEAD, or TJ_PREFETCH (0 off, else
 * positions ahead, up to 256). In the cache key. */
int drv_prefetch_ahead(void);
/* LowerOptions.peel: LOWER_PEEL_WIDTH, or TJ_PEEL (0 or 1 off, else the
 * widest fiber peeled, up to LOWER_PEEL_MAX). In the cache key. */
int drv_peel_width(void);
/* The fewest additive terms a union scatters through a workspace with
 * (lower_plan_scatter_union), from TJ_SCATTER_UNION_MIN (a test and
 * benchmark switch; a large value turns the path off), else 0: the
 * lowering's defaults (LOWER_SCATTER_MIN, LOWER_SCATTER_MIN_SPARSE_SUM). */
int drv_scatter_min(void);
/* The fewest terms a root sum over a union is split into (split_sum): the
 * same switch, else LOWER_SPLIT_SUM_MIN. */
int drv_split_sum_min(void);



/* Sets the thread-local error from a diagnostic; returns its status. */
tj_status drv_fail(const Diag *d);
/* Lowers (if needed) and JIT-compiles variant v of entry e. */
bool drv_ensure_compiled(CacheEntry *e, int v, Diag *d);
/* Variant v of e lowered into a (the entry's arena, or a scratch one) with
 * the first npasses of LOWER_PASSES run, and verified; NULL with d set. */
LirKernel *drv_lower_variant(CacheEntry *e, Arena *a, int v, int npasses, Diag *d);
/* How many loop-IR passes run up to and including `name` ("lower": 0),
 * or -1 for an unknown name. */
int drv_pass_count(const char *name);
/* Lowers variant v of entry e (no JIT). */
bool drv_ensure_lowered(CacheEntry *e, int v, Diag *d);
/* Runs a phase like tj_kernel_run, through the loop-IR interpreter instead
 * of the JIT (tests cross-check the two). */
tj_status drv_kernel_interpret(tj_kernel *k, tj_phase phase,
                               tj_tensor *const *operands, int n);
/* Parses and checks expr against the operands (declarations taken from
 * them), in arena a; NULL with d set on an error. */
Assignment *drv_front_end(Arena *a, const char *expr, tj_tensor *const *ops, int n,
                          const tj_options *o, Diag *d);
/* The operand among ops[0..n) named name, or NULL. */
tj_tensor *drv_operand_named(tj_tensor *const *ops, int n, const char *name);
/* The assignment as written (`+=` kept, + and * not yet the semiring's),
 * checked against the operands, its sums placed (ir/sums.c): what the
 * routes that rewrite an expression read (driver_accum.c,
 * driver_standin.c). NULL with d set on an error. */
Assignment *drv_notation(Arena *a, const char *expr, tj_tensor *const *ops, int n,
                         const tj_options *o, Diag *d);
/* Binds the expression's tensors to operands by name (by TensorId). */
bool drv_bind(const Assignment *as, tj_tensor *const *ops, int n,
              tj_tensor **out, Diag *d);

#endif
