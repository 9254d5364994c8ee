/* tensorjit: compile tensor index notation over dense and sparse formats
 * into machine code in-process (LLVM ORC LLJIT).
 *
 * Ownership: tj_tensor is owned by the caller (tj_tensor_free). tj_context
 * is owned by the caller (tj_context_free) and owns its kernels, which the
 * caller may free earlier (tj_kernel_free) so that a long-running process
 * keeps a bounded number of compiled kernels. Every call
 * returns a tj_status; on failure tj_last_error() (thread-local) says why
 * and nothing the caller owns has been changed or freed.
 */
#ifndef TENSORJIT_H
#define TENSORJIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TJ_VERSION_STRING "0.1.0"
#define TJ_MAX_ORDER_PUBLIC 8

typedef enum {
  TJ_OK = 0,
  TJ_ERR_INVALID,     /* bad argument */
  TJ_ERR_PARSE,       /* syntax error in an expression, format or schedule */
  TJ_ERR_SHAPE,       /* dims / extents / orders disagree */
  TJ_ERR_DTYPE,       /* dtype mix without a defined promotion */
  TJ_ERR_FORMAT,      /* unsupported or malformed storage format */
  TJ_ERR_IO,          /* file missing, unreadable or malformed */
  TJ_ERR_NOMEM,       /* allocation failed */
  TJ_ERR_UNSUPPORTED, /* valid but not implemented yet */
  TJ_ERR_JIT,         /* LLVM reported an error */
  TJ_ERR_INTERNAL     /* a broken invariant inside tensorjit (a bug) */
} tj_status;

/* Value types. Integers are signed two's complement and wrap around; bool
 * values are 0 (false) or 1 (true), one byte each, and in an expression +
 * is or, * is and, min is and, max is or (numpy's and GraphBLAS's rules).
 * TJ_NDTYPES counts them. */
typedef enum {
  TJ_F64 = 0, TJ_F32 = 1, TJ_I64 = 2, TJ_I32 = 3, TJ_I16 = 4, TJ_I8 = 5, TJ_BOOL = 6,
  TJ_U64 = 7, TJ_U32 = 8, TJ_U16 = 9, TJ_U8 = 10   /* unsigned: wrap modulo 2^bits */
} tj_dtype;
#define TJ_NDTYPES 11

/* Level letters: d dense, s compressed, u compressed-nonunique,
 * o compressed-nonordered, q singleton, (and c: singleton-nonunique, used
 * inside COO), l loose_compressed (lo and hi positions per segment,
 * pos[2p] and pos[2p+1]: segments in any order, with gaps; inputs only),
 * n n_out_of_m (MLIR's structured[n, m]: every block of m stores exactly n
 * coordinates within the block, crd[p*n .. p*n+n) under parent position p,
 * ascending, with zero values where a block holds fewer; lvl_n[l] is n and
 * the level must be the last one and store `d mod m`, so m is lvl_k[l]:
 * 2:4 is "ddn2:0,1/4,1%4"; inputs only).
 * Blocked levels (MLIR's `floordiv` / `mod` maps, e.g. BSR): when ndims is
 * not 0 the format has `order` levels over ndims dims, and level l stores
 * dim mode_order[l] itself (lvl_op[l] = TJ_LVL_DIM), its block number
 * mode_order[l] floordiv lvl_k[l] (TJ_LVL_FLOORDIV) or its offset in the
 * block mode_order[l] mod lvl_k[l] (TJ_LVL_MOD). BSR with 4x4 blocks is
 * levels "dsdd", mode_order {0,1,0,1}, lvl_op {FLOORDIV, FLOORDIV, MOD,
 * MOD}, lvl_k {4,4,4,4}, ndims 2; spelled "dsdd:0/4,1/4,0%4,1%4". With
 * ndims 0 (every format without blocks) there is one level per dim. */
enum { TJ_LVL_DIM = 0, TJ_LVL_FLOORDIV = 1, TJ_LVL_MOD = 2 };
typedef struct tj_format {
  int32_t order;                           /* levels (= dims unless blocked) */
  char levels[TJ_MAX_ORDER_PUBLIC + 1];   /* e.g. "ds", NUL-terminated */
  int32_t mode_order[TJ_MAX_ORDER_PUBLIC]; /* level l stores dim mode_order[l] */
  int32_t pos_width, crd_width;            /* 0 = default (32); else 8, 16, 32 or 64
                                              (bits, unsigned below 32) */
  int32_t ndims;                           /* blocked: dims; else 0 */
  int32_t lvl_op[TJ_MAX_ORDER_PUBLIC];     /* TJ_LVL_DIM / FLOORDIV / MOD */
  int32_t lvl_k[TJ_MAX_ORDER_PUBLIC];      /* the block size of FLOORDIV / MOD */
  int32_t lvl_n[TJ_MAX_ORDER_PUBLIC];      /* n of an n_out_of_m level, else 0 */
  /* MLIR's dimSlices, per dim: {offset, size, stride}; stride 0 = the dim
   * is not sliced. A format with slices describes a view (tj_tensor_slice):
   * dim d's coordinate i is the base's offset + i * stride, 0 <= i < size.
   * TJ_SLICE_DYNAMIC (MLIR's '?') in any of the three: a value given per
   * view (tj_tensor_slice_set) and read by kernels at run time. */
  int64_t slice[TJ_MAX_ORDER_PUBLIC][3];
  /* Internal: set only in the level view a kernel reads a cut view of a
   * blocked tensor through (rt_tensor_view_levels_sliced), 0 elsewhere.
   * win[l] is the block window of (full) mod level l, see tj_window. */
  struct tj_window {
    int32_t block;          /* the level of the dim's blocks + 1; 0: no window */
    int32_t k;              /* the block size */
    int64_t lead, size, stride;  /* the dim's frame (RtBlockFrame) */
  } win[TJ_MAX_ORDER_PUBLIC];
} tj_format;
/* A block window: inside block b of level `block` (counted from the
 * frame's first block), level l reads only the coordinates
 * lead + i * stride - b * k (0 <= i < size) that fall in 0 .. k-1; the
 * others are outside the view (a cut edge block, a stride). */
typedef struct tj_window tj_window;
#define TJ_SLICE_DYNAMIC (-1)

typedef struct tj_tensor tj_tensor;
typedef struct tj_context tj_context;
typedef struct tj_kernel tj_kernel;

/* The message of the last failed call on this thread ("" if none). */
const char *tj_last_error(void);
const char *tj_version(void);
const char *tj_dtype_name(tj_dtype t);
/* The dtype named "f64", "f32", "i64", "i32", "i16", "i8", "bool", "u64",
 * "u32", "u16" or "u8". */
tj_status tj_dtype_parse(const char *name, tj_dtype *out);

/* ---- formats ---------------------------------------------------------- */

/* Parses "ds", "ds:1,0", the MLIR spelling
 * "(i,j) -> (j : dense, i : compressed)" or the old one
 * (dimLevelType = [...], tj_format_print_mlir_legacy) into *out. */
tj_status tj_format_parse(const char *spec, tj_format *out);
/* The all-dense format of the given order, identity mode order. */
tj_format tj_format_dense(int order);
/* Writes the taco spelling ("ds:1,0", "dsdd:0/4,1/4,0%4,1%4") into buf. */
void tj_format_print(const tj_format *f, char *buf, size_t n);
/* Writes the MLIR spelling ("(d0, d1) -> (d0 : dense, d1 : compressed)",
 * "(d0, d1) -> (d0 floordiv 4 : dense, ...)") into buf. */
void tj_format_print_mlir(const tj_format *f, char *buf, size_t n);
/* Writes LLVM 15-16's spelling, which tj_format_parse also reads (as it
 * reads LLVM 17's lvlTypes / dimToLvl / posWidth / crdWidth):
 * "#sparse_tensor.encoding<{ dimLevelType = [ "dense", "compressed" ],
 * dimOrdering = affine_map<(d0, d1) -> (d1, d0)>, pointerBitWidth = 8,
 * indexBitWidth = 16 }>" (widths other than 32 only). Formats that
 * spelling cannot say (blocked levels, n_out_of_m, loose_compressed,
 * slices) are TJ_ERR_UNSUPPORTED, as is a buf too small (TJ_ERR_INVALID);
 * buf then holds "". */
tj_status tj_format_print_mlir_legacy(const tj_format *f, char *buf, size_t n);

/* ---- tensors ---------------------------------------------------------- */

/* Creates an empty tensor (no entries) owned by the caller. name is copied.
 * fmt NULL means all dense. */
tj_status tj_tensor_new(const char *name, tj_dtype dtype, int order,
                        const int64_t *dims, const tj_format *fmt,
                        tj_tensor **out);
void tj_tensor_free(tj_tensor *t);

/* Adds (coord, value) to the tensor's COO buffer; visible after pack. */
tj_status tj_tensor_insert(tj_tensor *t, const int64_t *coord, double value);
/* Packs the COO buffer (plus current contents) into the tensor's format:
 * sorts in level order, sums duplicates (keeps them in nonunique levels). */
tj_status tj_tensor_pack(tj_tensor *t);
/* Reads the value at coord (0 if not stored). */
tj_status tj_tensor_get(const tj_tensor *t, const int64_t *coord, double *out);
/* Unpacks to COO in level order: *coords (nnz*order) and *vals (nnz), both
 * malloc'd and owned by the caller (free()); *nnz entries. */
tj_status tj_tensor_unpack(const tj_tensor *t, int64_t **coords,
                           double **vals, int64_t *nnz);
/* A new tensor (owned by the caller) with src's contents in format fmt. */
tj_status tj_tensor_convert(const tj_tensor *src, const tj_format *fmt,
                            tj_tensor **out);
/* A view of base without copying (MLIR's dimSlices): dim d of the view is
 * base's coordinates offset[d] + i * stride[d], 0 <= i < size[d] (stride
 * NULL: all 1). The view borrows base: it reads base's arrays as they are
 * at each use, so base must outlive it (free the view first); base may be
 * repacked or recomputed meanwhile. The view is an input only: inserting,
 * packing, or binding it as a kernel's output is refused. Its format is
 * base's with the slices set (tj_format.slice; printed "ds[0:4:1,2:3:2]"
 * and "(d0 : #sparse_tensor<slice(0, 4, 1)>, ...) -> (...)"). Kernels read
 * it in place: dense levels by offset/stride arithmetic, compressed levels
 * by the part of each segment inside the slice (binary search when stride
 * is 1, filtered otherwise); converting, unpacking or printing a view
 * gives the slice's entries. A view of a blocked tensor (BSR, 2:4) is read
 * through its base's blocks (README, "Slices"). Refused for views of
 * views. *out is owned by the caller (tj_tensor_free). */
tj_status tj_tensor_slice(const tj_tensor *base, const char *name, const int64_t *offset,
                          const int64_t *size, const int64_t *stride, tj_tensor **out);
/* A view of base with the slices of fmt (a format equal to base's apart
 * from fmt->slice, e.g. parsed from "ds[1:3:1,:]"), as tj_tensor_slice.
 * Slice values TJ_SLICE_DYNAMIC ('?': "ds[?:?:1,:]", MLIR
 * "slice(?, ?, 1)") are the view's own, set by tj_tensor_slice_set; until
 * then offset 0, stride 1 and the size reaching the extent. The view's
 * format (tj_tensor_format) keeps the '?', so a kernel compiled on it
 * reads the values at each run: one kernel serves every slice value. */
tj_status tj_tensor_view(const tj_tensor *base, const char *name, const tj_format *fmt,
                         tj_tensor **out);
/* Sets the slice values of view v made with dynamic ('?') values: per dim
 * offset[d], size[d], stride[d] (stride NULL: 1). Entries its format fixes
 * must be given as fixed, and an unsliced dim as (0, extent, 1); the slice
 * must lie inside base's extent. v's dims become the sizes. On failure v
 * is unchanged. */
tj_status tj_tensor_slice_set(tj_tensor *v, const int64_t *offset, const int64_t *size,
                              const int64_t *stride);
/* Whether t is a view (tj_tensor_slice). */
bool tj_tensor_is_view(const tj_tensor *t);
/* A new tensor with src's contents and dtype dt, same format. */
tj_status tj_tensor_cast(const tj_tensor *src, tj_dtype dt, tj_tensor **out);

const char *tj_tensor_name(const tj_tensor *t);
tj_status tj_tensor_rename(tj_tensor *t, const char *name);
int tj_tensor_order(const tj_tensor *t);
int64_t tj_tensor_dim(const tj_tensor *t, int mode);
tj_dtype tj_tensor_dtype(const tj_tensor *t);
const tj_format *tj_tensor_format(const tj_tensor *t);
/* Stored entries (including explicit zeros and dense fill): the positions
 * of the last level that the levels above reach, which is its values'
 * count except under a loose_compressed level, whose gaps between
 * segments hold no entries (there: the segments' lengths, summed). */
int64_t tj_tensor_nnz(const tj_tensor *t);
/* Bytes held by index arrays and values. */
int64_t tj_tensor_bytes(const tj_tensor *t);
/* Prints a readable listing, eliding past max_entries (0 = all). */
void tj_tensor_print(const tj_tensor *t, void *file, int64_t max_entries);

/* ---- typed values ------------------------------------------------------ */

/* tj_tensor_insert / tj_tensor_get in the tensor's own dtype, exact (an
 * i64 value above 2^53 survives insert, pack and get unchanged). The
 * suffix must match the tensor's dtype, else TJ_ERR_DTYPE. Inserted
 * duplicates are summed in the dtype (integers wrap around). */
tj_status tj_tensor_insert_f64(tj_tensor *t, const int64_t *coord, double value);
tj_status tj_tensor_insert_f32(tj_tensor *t, const int64_t *coord, float value);
tj_status tj_tensor_insert_i64(tj_tensor *t, const int64_t *coord, int64_t value);
tj_status tj_tensor_insert_i32(tj_tensor *t, const int64_t *coord, int32_t value);
tj_status tj_tensor_insert_i16(tj_tensor *t, const int64_t *coord, int16_t value);
tj_status tj_tensor_insert_i8(tj_tensor *t, const int64_t *coord, int8_t value);
tj_status tj_tensor_insert_bool(tj_tensor *t, const int64_t *coord, bool value);
tj_status tj_tensor_insert_u64(tj_tensor *t, const int64_t *coord, uint64_t value);
tj_status tj_tensor_insert_u32(tj_tensor *t, const int64_t *coord, uint32_t value);
tj_status tj_tensor_insert_u16(tj_tensor *t, const int64_t *coord, uint16_t value);
tj_status tj_tensor_insert_u8(tj_tensor *t, const int64_t *coord, uint8_t value);
tj_status tj_tensor_get_f64(const tj_tensor *t, const int64_t *coord, double *out);
tj_status tj_tensor_get_f32(const tj_tensor *t, const int64_t *coord, float *out);
tj_status tj_tensor_get_i64(const tj_tensor *t, const int64_t *coord, int64_t *out);
tj_status tj_tensor_get_i32(const tj_tensor *t, const int64_t *coord, int32_t *out);
tj_status tj_tensor_get_i16(const tj_tensor *t, const int64_t *coord, int16_t *out);
tj_status tj_tensor_get_i8(const tj_tensor *t, const int64_t *coord, int8_t *out);
tj_status tj_tensor_get_bool(const tj_tensor *t, const int64_t *coord, bool *out);
tj_status tj_tensor_get_u64(const tj_tensor *t, const int64_t *coord, uint64_t *out);
tj_status tj_tensor_get_u32(const tj_tensor *t, const int64_t *coord, uint32_t *out);
tj_status tj_tensor_get_u16(const tj_tensor *t, const int64_t *coord, uint16_t *out);
tj_status tj_tensor_get_u8(const tj_tensor *t, const int64_t *coord, uint8_t *out);

/* ---- a tensor's arrays: wrapping caller memory, reading in place -------- */

/* The arrays of a tensor, as the kernel sees them (runtime/abi.h). Level l
 * stores dim fmt->mode_order[l]. A compressed level has pos (one entry per
 * parent position, plus one: pos[p]..pos[p+1] is parent p's segment, pos[0]
 * = 0) and crd (one coordinate per position); a loose_compressed level a
 * lo and a hi per parent position (pos[2p], pos[2p+1]: see tj_tensor_wrap)
 * and crd; a singleton level has crd only
 * (one per parent position); a dense level neither. pos entries are
 * fmt->pos_width bits, crd entries fmt->crd_width bits (0 means 32), signed.
 * vals holds one value of dtype per position of the last level (for an
 * all-dense tensor, prod(dims) values in level order); bool values are
 * bytes 0 or 1 (kernels compute or / and as max / min of them: other
 * bytes are not checked, an output's are overwritten). */
typedef struct tj_arrays {
  tj_dtype dtype;
  int order;
  const int64_t *dims;            /* order extents, indexed by dim */
  const tj_format *fmt;           /* NULL: all dense, identity mode order */
  const int64_t *strides;         /* all-dense only, else NULL: element strides
                                     per dim (see tj_tensor_wrap) */
  void *pos[TJ_MAX_ORDER_PUBLIC];
  int64_t pos_len[TJ_MAX_ORDER_PUBLIC];
  void *crd[TJ_MAX_ORDER_PUBLIC];
  int64_t crd_len[TJ_MAX_ORDER_PUBLIC];
  void *vals;
  int64_t vals_len;
} tj_arrays;

/* Flags of tj_tensor_wrap / tj_tensor_adopt. */
enum {
  TJ_WRAP_TRUSTED = 1u << 0  /* skip the O(nnz) content checks (lengths are
                                still checked): the caller vouches for them */
};

/* Makes a tensor (owned by the caller, tj_tensor_free) whose storage is the
 * caller's arrays a->pos, a->crd, a->vals, without copying: kernels read
 * them in place, so values changed in place are seen by the next
 * tj_kernel_run (no re-pack, no recompile). The caller keeps ownership
 * and must keep the arrays alive and unmoved until tj_tensor_free; the
 * struct a itself (and dims, fmt, strides) is copied and may go.
 * Dense data: fmt NULL (or all dense) with strides NULL is row-major over
 * the fmt's mode order; strides (in elements, one per dim) describe any
 * layout that is a permutation of a contiguous one (row- or column-major,
 * any transposition), which becomes the tensor's mode order; other strides
 * (gaps, negative, overlapping) are refused.
 * A loose_compressed level takes MLIR's arrays as they are: pos holds a
 * lo and a hi per parent position (2 * parents entries; segment p is
 * crd[pos[2p] .. pos[2p+1]]), segments in any order with gaps between
 * them; the next level's parents, or vals, count every crd position,
 * gaps included. Gap positions are not entries: nothing reads them or
 * what lies below them.
 * Unless flags has TJ_WRAP_TRUSTED, the contents are validated first:
 * positions start at 0, never decrease, end at the level's crd length
 * (loose: each segment lies in 0..crd length, lo <= hi, and no position
 * lies in two segments); coordinates lie in 0..extent-1; in each segment
 * of an ordered level they
 * increase (strictly where the level is unique; a singleton level compares
 * with the previous position when all coordinates above are equal). The
 * first violation is TJ_ERR_FORMAT with a message naming the tensor, the
 * level, the array and the position. On any failure nothing is created
 * and the caller's arrays are untouched.
 * When the tensor is an output, a dense one is written in place; a sparse
 * one is assembled into arrays of the tensor's own and copied back into
 * the caller's when the result fits every one of them (in place, as
 * tj_tensor_arrays then shows), else it stays in the tensor's arrays
 * (tj_tensor_arrays points there) and the caller's keep their old contents
 * whole: never new positions over old coordinates. A values-only
 * TJ_COMPUTE writes the arrays the tensor holds in place.
 * tj_tensor_pack replaces them by arrays of its own. */
tj_status tj_tensor_wrap(const char *name, const tj_arrays *a, unsigned flags,
                         tj_tensor **out);

/* Called once per array a tensor adopted, when the tensor is freed. */
typedef void (*tj_free_fn)(void *array, void *user);
/* tj_tensor_wrap that takes ownership: on success, tj_tensor_free calls
 * free_fn(array, user) once for each distinct non-NULL array of a (pos,
 * crd, vals). On failure nothing is freed: the arrays stay the caller's. */
tj_status tj_tensor_adopt(const char *name, const tj_arrays *a, unsigned flags,
                          tj_free_fn free_fn, void *user, tj_tensor **out);

/* Fills *out with t's current arrays, without copying: pointers owned by
 * t, valid until t is next changed (insert + pack, convert into it, a kernel
 * assembling it as its output, free). Values may be changed in place; a
 * compute kernel rerun then reads them. Works for outputs after a run. */
tj_status tj_tensor_arrays(tj_tensor *t, tj_arrays *out);
/* Tells the library that t's arrays or values were changed in place
 * behind its back (through pointers kept from an earlier tj_tensor_arrays,
 * or the caller's own arrays of a wrapped tensor). Only copies the library
 * keeps of a tensor need it: the SELL copy of a schedule's method(sell)
 * (MKL's mkl_sparse_update_values plays the same part); plain kernels read
 * the arrays in place at every run. Calls that change t themselves (pack,
 * tj_tensor_arrays, a kernel writing t) do it already. */
tj_status tj_tensor_changed(tj_tensor *t);

/* Reads .mtx / .tns (optionally .gz) into a new tensor in format fmt
 * (NULL: CSR for order 2, all-compressed otherwise). Errors say file:line.
 * A format with slices ("ds[1:3:1,:]") returns a view (tj_tensor_slice)
 * that owns the file's whole tensor as its base: freeing the view frees it. */
tj_status tj_tensor_read(const char *path, const char *name,
                         const tj_format *fmt, tj_tensor **out);
/* The same with values of dtype dt, read exactly (an integer file's values
 * above 2^53 too; a pattern file's entries are 1, true in a bool tensor). */
tj_status tj_tensor_read_as(const char *path, const char *name, const tj_format *fmt,
                            tj_dtype dt, tj_tensor **out);
/* Writes .mtx (order 2, coordinate real) or .tns (any order). */
tj_status tj_tensor_write(const tj_tensor *t, const char *path);


/* ---- compiling and running kernels ------------------------------------ */

typedef struct tj_options {
  int opt_level;            /* LLVM optimization level 0..3 (default 3) */
  int no_vectorize;         /* skip tensorjit's explicit vectorization pass */
  int no_llvm_vectorize;    /* turn LLVM's loop and SLP vectorizers off */
  int nthreads;             /* 0: TJ_NUM_THREADS or all cores; 1: serial */
  const char *cpu;          /* NULL: host CPU; else e.g. "x86-64-v3" */
  const char *features;     /* NULL: host features; else "+avx2,+fma" */
  int no_unroll_jam;        /* skip register blocking of dense nests */
  int backend;              /* TJ_BACKEND_LLVM (default) or TJ_BACKEND_C */
  const char *semiring;     /* NULL: plus.times; "min.plus", "max.plus",
                               "min.times", "max.times", "min.max", "max.min",
                               "plus.pair", "plus.min", "or.and": the
                               expression's + (and sums) and * mean the
                               semiring's add and mul, absent entries are
                               its zero (the identity of add) */
  const char *defs;         /* NULL, or element operators the expression may
                               call, ';'-separated: "relu(x) = max(x, 0);
                               huber(x) = min(x * x / 2, abs(x) - 0.5)";
                               inlined where called, the lattices following
                               their bodies */
} tj_options;

/* Code-generation backends. TJ_BACKEND_C compiles the kernel's C rendering
 * with the system C compiler ($CC, else cc) and loads it with dlopen: a
 * second, independent code generator for cross-checking the LLVM one. It
 * needs a C compiler at run time; the default backend never does. */
enum { TJ_BACKEND_LLVM = 0, TJ_BACKEND_C = 1 };

/* The defaults above (opt_level 3, everything on, host CPU). */
tj_options tj_options_default(void);

/* A context owns compiled kernels and the in-memory kernel cache. */
tj_status tj_context_new(tj_context **out);
void tj_context_free(tj_context *cx);
/* Enables the on-disk kernel cache (LLVM backend) in dir; NULL turns it off.
 * The environment TJ_CACHE_DIR does the same for every new context; unset,
 * there is no disk cache. dir "" (or TJ_CACHE_DIR set but empty) asks for
 * the default folder, $XDG_CACHE_HOME/tensorjit (XDG_CACHE_HOME must be
 * absolute), else $HOME/.cache/tensorjit. Missing folders are created with
 * mode 0700 and cache files 0600. The folder is trusted only if it is a
 * directory (not a symbolic link) owned by the effective user and writable
 * by neither group nor others, and a file only if it is a regular file
 * (not a link, and with no other hard link) with the same owner and mode
 * rules; every folder above dir must be owned by root or the user and be
 * writable by group or others only if sticky (as /tmp); otherwise one warning on
 * stderr says which path and why, nothing is loaded from it or written to
 * it, and kernels compile in memory. The folder is checked on the first
 * compile that uses it, so this call fails only for NULL cx or memory. */
tj_status tj_context_set_cache_dir(tj_context *cx, const char *dir);

/* The in-memory kernel cache keeps at most max_kernels compiled kernels
 * (0: no limit); the default is 1024, or TJ_KERNEL_CACHE_MAX (a count, read
 * by tj_context_new, which fails on a value that is not one). Past the
 * limit the least recently used kernel that no live tj_kernel handle uses
 * is evicted: its machine code is removed from the JIT and its memory
 * freed; a later tj_compile of the same expression compiles it again. A
 * handle keeps its kernel (it never becomes invalid and never recompiles
 * behind the caller's back), so the cache holds more than the limit while
 * the caller holds more handles than that: free handles with tj_kernel_free
 * to let them go. Lowering the limit evicts at once. */
tj_status tj_context_set_cache_limit(tj_context *cx, size_t max_kernels);
/* The same for the kernels' total size in bytes (0, the default: no limit;
 * TJ_KERNEL_CACHE_BYTES, read by tj_context_new, a count of bytes with an
 * optional K, M or G suffix). A kernel's size is the memory its machine
 * code and data take in the JIT (its objects' allocated sections, each
 * kind page-rounded as the JIT's linker maps them) plus its loop IR and
 * plan, counted as they are built; not counted is LLVM's own bookkeeping
 * for it (symbol tables, a few KB). Eviction keeps the cache under both
 * limits, again never evicting a kernel a handle uses. */
tj_status tj_context_set_cache_bytes(tj_context *cx, size_t max_bytes);
typedef struct tj_cache_stats {
  size_t entries;      /* compiled kernels (distinct cache keys) held */
  size_t in_use;       /* of those, used by a live tj_kernel handle */
  size_t limit;        /* 0: no limit */
  uint64_t hits, misses, evictions;   /* since tj_context_new */
  size_t bytes;        /* the entries' sizes summed (see tj_context_set_cache_bytes) */
  size_t byte_limit;   /* 0: no limit */
} tj_cache_stats;
tj_status tj_context_cache_stats(tj_context *cx, tj_cache_stats *out);

/* Compiles `expr` (e.g. "y(i) = A(i,j) * x(j)") over operands, matched to
 * the expression's tensors by name (tj_tensor_name); the output tensor
 * must be among them (its dims and format say what to build). schedule may
 * be NULL ("reorder(i,k,j) parallelize(i) vectorize(j,8)"). opts may be
 * NULL. On success *out is owned by cx and stays bound to these operands. */
tj_status tj_compile(tj_context *cx, const char *expr,
                     tj_tensor *const *operands, int n, const char *schedule,
                     const tj_options *opts, tj_kernel **out);
/* Frees a kernel handle before its context does (NULL: nothing); the
 * compiled code stays in the context's cache, evictable once no other
 * handle uses it. k must not be running, nor be used afterwards. */
void tj_kernel_free(tj_kernel *k);

typedef enum { TJ_ASSEMBLE, TJ_COMPUTE, TJ_EVALUATE } tj_phase;
/* Runs a phase of k on the operands bound at compile time, or, when
 * operands is non-NULL, on other tensors with the same names, formats and
 * dtypes. COMPUTE requires an output assembled by ASSEMBLE (or EVALUATE). */
tj_status tj_kernel_run(tj_kernel *k, tj_phase phase,
                        tj_tensor *const *operands, int n);

typedef enum {
  TJ_STAGE_NOTATION, TJ_STAGE_CIN, TJ_STAGE_LATTICE, TJ_STAGE_ASSEMBLY,
  TJ_STAGE_COMPUTE, TJ_STAGE_C, TJ_STAGE_LLVM, TJ_STAGE_LLVM_OPT,
  TJ_STAGE_ASM,
  TJ_STAGE_GETT   /* a dense contraction's plan: index sets, blocking, the
                     model's estimates and the method (GETT / TTGT / LoG) */
} tj_stage;
/* Writes one stage of k's compilation to file (a FILE *). */
tj_status tj_kernel_print(const tj_kernel *k, tj_stage stage, void *file);
/* Writes the evaluate kernel's loop IR (as C) right after one pass of the
 * pipeline: "lower" (the loop nest as lowered), then "tile", "vectorize",
 * "unroll-jam", "peel", "prefetch" (the loop-IR passes, in that order). */
tj_status tj_kernel_print_after(const tj_kernel *k, const char *pass, void *file);

/* Where tj_compile spent its time, by stage (a cache hit: parse and setup). */
typedef struct tj_compile_times {
  double parse_ms;          /* parse, check, cache key, bind operands */
  double setup_ms;          /* cache lookup; the first compile for a target in a
                               context also starts the LLJIT engine here */
  double lower_ms;          /* plan, loop IR and its passes, verification */
  double llvm_ir_ms;        /* loop IR -> LLVM IR, LLVM's verifier */
  double optimize_ms;       /* LLVM's middle end */
  double codegen_ms;        /* machine code, linked by LLJIT */
  double total_ms;          /* all of tj_compile */
  int cache_hit;            /* 1 memory, 2 disk */
  /* The calling thread's CPU time in the same stages (robust against a
   * loaded machine, where wall time includes waiting for a core). */
  double lower_cpu_ms, llvm_ir_cpu_ms, optimize_cpu_ms, codegen_cpu_ms, total_cpu_ms;
} tj_compile_times;
tj_compile_times tj_kernel_times(const tj_kernel *k);
/* The format k reads the tensor named `name` in, into *fmt: the tensor's
 * own (*converted = 0), or the format of the copy each run makes of it:
 * 1 its values in another format (a transposed dense operand, an
 * unordered level made ordered: tj_tensor_convert), 2 a mask's 0/1
 * pattern in that format (1 where the mask stores an entry). A caller of
 * the C rendering (TJ_STAGE_C), whose kernel takes storages as it reads
 * them, makes such copies first. */
tj_status tj_kernel_operand_format(const tj_kernel *k, const char *name, tj_format *fmt,
                                   int *converted);

/* ---- building expressions without a string ---------------------------- */

typedef struct tj_builder tj_builder; /* owned by the caller: tj_builder_free */
typedef struct tj_expr tj_expr;       /* owned by its builder */

tj_status tj_builder_new(tj_builder **out);
void tj_builder_free(tj_builder *b);
/* An access tensor(i, j, ...) over n index names (n = 0: a scalar). Every
 * tj_build_* returns NULL on bad arguments or when an argument is NULL, and
 * records the first such error in b (reported by tj_builder_assign). */
tj_expr *tj_build_access(tj_builder *b, const char *tensor, int n,
                         const char *const *indices);
tj_expr *tj_build_literal(tj_builder *b, double value);
/* op: '+', '-', '*' or '/'. */
tj_expr *tj_build_binary(tj_builder *b, char op, tj_expr *x, tj_expr *y);
tj_expr *tj_build_neg(tj_builder *b, tj_expr *x);
/* fn: "sqrt", "abs", "exp", "log" (y NULL); "min", "max", "pow", "or",
 * "and", "pair", "mask", "except" (y given; except's x must be an access);
 * tj_function_name lists them. */
tj_expr *tj_build_call(tj_builder *b, const char *fn, tj_expr *x, tj_expr *y);
/* The name of the i-th function of index notation ("sqrt", ...), i from 0;
 * NULL past the last. A static string. */
const char *tj_function_name(int i);
/* sum(index, x): x summed over index, explicitly. Without it an index
 * that appears only on the right is summed over the smallest subexpression
 * holding every use of it (TACO's rule: b(i) - A(i,j) * x(j) is b - Ax). */
tj_expr *tj_build_sum(tj_builder *b, const char *index, tj_expr *x);
/* reduce(op, index, x): x reduced over index by op: "+", "*", "min", "max",
 * "or", "and". Over the entries where x exists (a sparse operand's stored
 * ones); over none it is op's identity (min: +inf), and an output entry no
 * contribution reaches stays absent in a sparse output. */
tj_expr *tj_build_reduce(tj_builder *b, const char *op, const char *index, tj_expr *x);
/* Makes the statement lhs = rhs (accumulate: +=); lhs must be an access. */
tj_status tj_builder_assign(tj_builder *b, tj_expr *lhs, tj_expr *rhs, int accumulate);
/* Writes the statement as index notation (what tj_compile would parse). */
tj_status tj_builder_print(const tj_builder *b, char *buf, size_t n);
/* tj_compile for a built statement: the same kernel (and cache entry) as
 * its index-notation text. */
tj_status tj_compile_built(tj_context *cx, const tj_builder *b,
                           tj_tensor *const *operands, int n,
                           const char *schedule, const tj_options *opts,
                           tj_kernel **out);

/* Evaluates expr with the reference interpreter (dense, long double) into
 * the output among operands: the oracle tests compare kernels against. */
tj_status tj_reference(const char *expr, tj_tensor *const *operands, int n);
/* tj_reference under opts (NULL: defaults); only opts->semiring matters. */
tj_status tj_reference_opts(const char *expr, tj_tensor *const *operands, int n,
                            const tj_options *opts);

/* The GEMM TTGT multiplies with: C (m x n) = A (m x k) * B (n x k)^T, all
 * column-major with leading dimensions lda, ldb, ldc; f32 nonzero for
 * float, else double. tj_set_ttgt_gemm(NULL) (the default) uses
 * tensorjit's own GETT core; a benchmark can pass e.g. a CBLAS wrapper.
 * Process-wide; set it before running kernels, not while they run. */
typedef void (*tj_gemm_fn)(int f32, int64_t m, int64_t n, int64_t k, const void *a,
                           int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc);
void tj_set_ttgt_gemm(tj_gemm_fn fn);

/* Releases LLVM's global state at process exit (for leak checkers). */
void tj_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
