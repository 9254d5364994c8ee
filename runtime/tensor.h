/* The tensor object behind the public tj_tensor handle (internal header).
 *
 * A tensor is a name, a format (tj_format: level letters, mode order,
 * widths), the kernel-visible storage (tj_storage, embedded so &t->st can
 * be handed to a kernel) and a COO insertion buffer that tj_tensor_pack()
 * merges into the storage. The runtime, the driver and tests include this;
 * lower/ and jit/ see only abi.h.
 *
 * Widths: pos/crd entries are 32-bit unless the format asks for 64 (a 0
 * width means the default, 32). A default crd width widens to 64 when a
 * level's extent does not fit in int32.
 */
#ifndef TJ_RUNTIME_TENSOR_H
#define TJ_RUNTIME_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../include/tensorjit.h"
#include "abi.h"

/* A value on its way into or out of storage, exact in every dtype:
 * integer dtypes and bool use .i, floating ones (f64, f32) use .f. */
typedef union RtVal {
  double f;
  int64_t i;
} RtVal;

/* The COO insertion buffer: n entries, coords[e*order + mode], values in
 * the tensor's dtype as RtVal. */
typedef struct RtCoo {
  int64_t *coords;
  RtVal *vals;
  int64_t n, cap;
} RtCoo;

/* Arrays a tensor adopted (tj_tensor_adopt), released at tj_tensor_free
 * whether or not its storage still points at them. */
typedef struct RtAdopted {
  tj_free_fn free_fn;
  void *user;
  int n;
  void *arrays[2 * TJ_MAX_ORDER + 1];
} RtAdopted;

/* A blocked tensor (a format with floordiv / mod levels, e.g. BSR) is
 * stored as the tensor of its levels: fmt is the expanded format (one dim
 * per level, identity mode order, rt_format_expand) and st its storage,
 * so pack, iteration and kernels see an ordinary order-`levels` tensor;
 * order, dims and ufmt are what the user sees (the same as fmt's and st's
 * for every other tensor). Coordinates cross between the two at the COO
 * buffer (rt_coo_push_val maps dims to levels) and at rt_tensor_entries /
 * rt_tensor_lookup (levels back to dims, padding past the extents
 * skipped). */
struct tj_tensor {
  char *name;
  tj_format fmt;   /* widths resolved: always 32 or 64 */
  tj_storage st;
  bool blocked;
  int32_t order;               /* dims the user sees */
  int64_t dims[TJ_MAX_ORDER];  /* their extents */
  tj_format ufmt;              /* the format as given (widths resolved) */
  bool padded;                 /* a view (rt_tensor_view_split) over a padded copy */
  int32_t split[TJ_MAX_ORDER]; /* its split */
  int64_t frame[TJ_MAX_ORDER][2]; /* per split dim {lead, stride} of a framed
                                     split (rt_tensor_view_split); stride 0: none */
  const tj_tensor *base;       /* a view (tj_tensor_slice): its base, borrowed;
                                  st is a copy of base's, refreshed by
                                  rt_view_sync (slice.c) */
  bool owns_base;              /* the view frees base (one read with slices) */
  RtCoo coo;
  RtAdopted adopted;
  struct RtSell *sell;         /* a SELL copy for method(sell) (sell.c), or
                                  NULL; dropped by rt_tensor_touch */
};

/* ---- errors (error.c) ---- */

/* Records a printf-style message for tj_last_error() and returns st. */
tj_status rt_set_error(tj_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- memory (memory.c) ---- */

/* Bytes this process may use: physical memory, or a smaller cgroup limit
 * (0 when unknown). */
double rt_memory_bytes(void);
/* TJ_OK when bytes fit in rt_memory_bytes(); else TJ_ERR_NOMEM with a
 * message "<what> would need N GB, more than this machine's memory". */
tj_status rt_check_fits(const char *what, double bytes);

/* ---- storage (tensor.c) ---- */

/* The kernel-visible storage of t (owned by t). */
tj_storage *rt_tensor_storage(tj_tensor *t);
/* Frees every pos/crd/vals array of s that is not foreign (the caller's,
 * see abi.h) and resets arrays, lengths, capacities and foreign bits. */
tj_status rt_storage_clear(tj_storage *s);
/* Forgets s's arrays without freeing them (they live on elsewhere):
 * arrays NULL, lengths, capacities and foreign bits 0. */
void rt_storage_detach(tj_storage *s);
/* s, just written into arrays of tensorjit's own, and callers, the
 * storage it had before with the arrays the caller wrapped (foreign):
 * when every array of s fits the caller's in its place, the contents go
 * back into the caller's arrays (s's own freed, foreign bits restored), so
 * a wrapped output is written in place while it fits; else s keeps its
 * own arrays and the caller's are left as they were. Never some of each:
 * a caller reading pos from its arrays and crd from its old ones would
 * read past their ends (wrap.c). */
void rt_storage_keep_callers(tj_storage *s, const tj_storage *callers);
/* Stored entries of s (the vals length). */
int64_t rt_storage_nnz(const tj_storage *s);
/* Value at position i of s's vals, as a double. */
double rt_storage_val(const tj_storage *s, int64_t i);
/* Stores v (converted to s's dtype) at position i of s's vals. */
void rt_storage_set_val(tj_storage *s, int64_t i, double v);
/* Bytes per value of dtype dt; whether dt is a dtype; whether its values
 * are integers (RtVal.i: the integers and bool). */
int rt_dtype_size(tj_dtype dt);
bool rt_dtype_valid(int dt);
bool rt_dtype_is_int(int dt);
/* A tensor array of n elements of w bytes (room for one when n is 0),
 * zeroed when zero, starting on a 64-byte boundary. Arrays of RT_HUGE_BYTES and more are advised for
 * transparent huge pages before their first touch: a kernel reading rows
 * of a large dense operand at random (SpMM's B, SpMV's x) then misses the
 * TLB once per 2 MB instead of once per 4 kB. Freed with free(). NULL when
 * out of memory or when n * w overflows. */
#define RT_HUGE_BYTES ((size_t)4 << 20)
/* Arrays above this many bytes grow by realloc: glibc maps every block
 * above its mmap threshold, which adapts up to 32 MB, so realloc moves such
 * a block by mremap, without a copy and keeping its page offset (so its
 * alignment). A smaller block may sit in the heap, where realloc copies it
 * to a 16-byte boundary and the alignment then took a second copy (6 of
 * the 7 grows from 4 to 32 MB of a cage11 SpGEMM output did). */
#define RT_REMAP_BYTES ((size_t)32 << 20)
void *rt_array_new(int64_t n, size_t w, bool zero);
/* Grows array *p from old to n elements of w bytes, zeroing the new part
 * when zero (tj_rt_reserve); keeps the alignment and huge-page advice of
 * rt_array_new (a fresh array and a copy; realloc, whose mremap keeps
 * the page offset, only above RT_REMAP_BYTES). */
bool rt_array_grow(void **p, int64_t old, int64_t n, size_t w, bool zero);
/* Whether t's storage has its arrays (it was packed, read or computed);
 * a tensor only created (tj_tensor_new) has none and reads as empty. */
bool rt_tensor_is_packed(const tj_tensor *t);
/* Appends (coord, value) to t's COO buffer without range checks. */
tj_status rt_coo_push(tj_tensor *t, const int64_t *coord, double v);
/* The same with a value already in t's dtype. */
tj_status rt_coo_push_val(tj_tensor *t, const int64_t *coord, RtVal v);
/* TJ_OK unless t is a view, else an error: "tensor V is a view ... and
 * cannot be <what>". */
tj_status rt_check_writable(const tj_tensor *t, const char *what);
/* TJ_OK when coord lies inside t's dims, else an error naming it. */
tj_status rt_check_coord(const tj_tensor *t, const int64_t *coord);

/* ---- values in a dtype (value.c) ---- */

/* v in dtype dt: integers round to nearest and saturate at the range. */
/* Unsigned dtypes (u64 .. u8): RtVal.i holds the value's bits. */
bool rt_dtype_is_unsigned(int dt);
RtVal rt_val_from_double(int dt, double v);
/* v in dtype dt, exactly where it fits: integers saturate at the range,
 * bool is v != 0. */
RtVal rt_val_from_int(int dt, int64_t v);
/* -v in dt (integers saturate: -INT64_MIN is INT64_MAX, -(-128) in i8 127). */
RtVal rt_val_neg(int dt, RtVal v);
double rt_val_to_double(int dt, RtVal v);
/* a + b in dt (integers wrap around, as two's complement). */
RtVal rt_val_add(int dt, RtVal a, RtVal b);
bool rt_val_is_zero(int dt, RtVal v);
/* v of dtype from as dtype to (exact between integer dtypes). */
RtVal rt_val_cast(int from, int to, RtVal v);
/* Value at position i of s's vals / stores v there (i32: the low 32 bits). */
RtVal rt_storage_get(const tj_storage *s, int64_t i);
void rt_storage_put(tj_storage *s, int64_t i, RtVal v);

/* Reads entry i of an index array of width w bytes: 1 and 2 are unsigned
 * (MLIR's posWidth / crdWidth 8 and 16), 4 and 8 signed. */
static inline int64_t rt_idx(const void *a, int32_t w, int64_t i) {
  switch (w) {
  case 1: return ((const uint8_t *)a)[i];
  case 2: return ((const uint16_t *)a)[i];
  case 4: return ((const int32_t *)a)[i];
  default: return ((const int64_t *)a)[i];
  }
}
/* Writes entry i of an index array of width w bytes (v must fit:
 * rt_idx_max). */
static inline void rt_idx_set(void *a, int32_t w, int64_t i, int64_t v) {
  switch (w) {
  case 1: ((uint8_t *)a)[i] = (uint8_t)v; break;
  case 2: ((uint16_t *)a)[i] = (uint16_t)v; break;
  case 4: ((int32_t *)a)[i] = (int32_t)v; break;
  default: ((int64_t *)a)[i] = v;
  }
}
/* The largest value an index array of width w bytes holds. */
static inline int64_t rt_idx_max(int32_t w) {
  return w == 1 ? UINT8_MAX : w == 2 ? UINT16_MAX : w == 4 ? INT32_MAX : INT64_MAX;
}
/* FNV-1a over n bytes at p, continuing from h (start from RT_FNV_BASIS):
 * the one hash of kernel-cache keys, disk-cache checksums and GETT's
 * tuning table. */
#define RT_FNV_BASIS 1469598103934665603ull
static inline uint64_t rt_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}
/* TJ_OK when n positions fit level l of tensor name at a position width of
 * w bytes; else a TJ_ERR_FORMAT naming them (pack, wrap). */
tj_status rt_check_positions(const char *name, int l, int64_t n, int32_t w);

/* ---- formats (format.c) ---- */

/* A level type as stored: its letter in tj_format.levels, its MLIR
 * spelling (word and property: "compressed", "nonunique"), its ABI kind
 * and flags. */
typedef struct RtLevelType {
  char letter;
  const char *word, *prop;
  int32_t kind;     /* tj_level_kind */
  uint32_t flags;   /* TJ_LVL_* */
} RtLevelType;
/* The type of letter c, or NULL when c is no level letter. */
const RtLevelType *rt_level_type(char c);
/* Whether level l of the checked format f may repeat a coordinate (its
 * flags, or a singleton above a singleton: COO-3's middle level). */
bool rt_format_level_nonunique(const tj_format *f, int l);

/* Checks f (letters, permutation, widths, singleton placement) for a
 * tensor of order `order`; TJ_OK or an error with a message. */
tj_status rt_format_check(const tj_format *f, int order);
/* The default format of file reads: CSR ("ds") for order 2, all
 * compressed ("s..s") otherwise. */
tj_format rt_format_default(int order);
/* True when every level of f is dense. */
bool rt_format_all_dense(const tj_format *f);
/* Whether f has slices (dimSlices: a view's format); f without them. */
bool rt_format_sliced(const tj_format *f);
void rt_format_unslice(tj_format *f);
/* Whether f has floordiv / mod levels (f->ndims != 0). */
bool rt_format_blocked(const tj_format *f);
/* The dims of a tensor of format f (ndims, or order when not blocked). */
int rt_format_dims(const tj_format *f);
/* The tensor of f's levels: ef has f's letters and widths over one dim per
 * level (identity mode order, no blocks), edims[l] the extent of level l
 * (n for a dim of extent n, ceil(n/k) for floordiv k, k for mod k). */
void rt_format_expand(const tj_format *f, const int64_t *dims, tj_format *ef,
                      int64_t *edims);
/* Level coordinates lc of the dim coordinates coord of blocked tensor t. */
void rt_block_to_levels(const tj_tensor *t, const int64_t *coord, int64_t *lc);
/* Dim coordinates of level coordinates lc; false when they fall in the
 * padding past a dim's extent. */
bool rt_block_to_dims(const tj_tensor *t, const int64_t *lc, int64_t *coord);
/* v (filled in, owns nothing: never tj_tensor_free it) = blocked tensor t
 * seen as the tensor of its levels (its storage's order, dims and format). */
void rt_tensor_view_levels(const tj_tensor *t, tj_tensor *v);
/* After a kernel wrote output t through its level view v: t's storage
 * takes the arrays and lengths v's holds (those the kernel made in place
 * of t's are t's own from here; t's replaced ones are freed unless
 * foreign). Called after every run, failed or not, so nothing leaks. */
void rt_tensor_view_levels_finish(tj_tensor *t, const tj_tensor *v);
/* How a kernel sees blocked dim m of a blocked tensor or of a view of one
 * (rt_block_frame): the blocks first .. first + nb - 1 of the (base's)
 * dim, of k coordinates each, and a view coordinate i at the frame's
 * coordinate lead + i * stride (frame coordinate J = b * k + inner, b
 * counted from first). masked: some coordinate of the frame's blocks is
 * none of the view's (an edge block only partly inside the slice, a
 * stride over the blocks), so a kernel must skip those positions. */
typedef struct RtBlockFrame {
  int64_t k, first, nb, lead, stride, size;
  bool masked;
} RtBlockFrame;
/* The frame of dim m of blocked t (a view of a blocked base or not);
 * false when m is not blocked. The slice values must be fixed (not '?'). */
bool rt_block_frame(const tj_tensor *t, int m, RtBlockFrame *fr);
/* Whether blocked dim m of t (a blocked tensor or a view of one) can be
 * read through a block window: its mod level is dense or n_out_of_m. */
bool rt_block_windowed(const tj_tensor *t, int m);
/* v (filled in, owns nothing) = view t of a blocked tensor seen as the
 * tensor of its base's levels, each level of a sliced dim narrowed: a
 * floordiv level to the frame's blocks (a level slice (first, nb, 1)), a
 * level storing a dim whole to the dim's slice; mod levels whole, except
 * that for each dim m in the bit set `windowed` whose frame is masked and
 * rt_block_windowed, the mod level gets the frame's block window
 * (tj_format.win), so a kernel's loop over it runs only over the view's
 * coordinates of each block. Fixed slice values only. */
void rt_tensor_view_levels_sliced(const tj_tensor *t, uint32_t windowed, tj_tensor *v);
/* *out (the caller's) = a dense bool tensor named name of dims (nb, k),
 * 1 at the frame's coordinates that are the view's (lead + i * stride,
 * 0 <= i < size), 0 elsewhere: the mask a kernel reads a masked frame
 * through. */
tj_status rt_block_frame_mask(const char *name, const RtBlockFrame *fr, tj_tensor **out);
/* Turns blocked tensor t (owning its arrays) into the tensor of its levels
 * in place, as rt_tensor_view_levels sees it, keeping its arrays. */
void rt_tensor_become_levels(tj_tensor *t);
/* Sets every stored value of blocked tensor t that lies in the padding
 * past a dim's extent to zero (walking only the last block of each padded
 * dim). */
void rt_tensor_zero_padding(tj_tensor *t);
/* TJ_ERR_FORMAT naming the first nonzero value of blocked tensor t in the
 * padding past a dim's extent (a wrapped tensor's: kernels would sum it
 * in, `s = A(i,j)`), else TJ_OK. */
tj_status rt_tensor_check_padding(const tj_tensor *t);
/* Whether blocked format f ends in an n_out_of_m level. */
bool rt_format_structured(const tj_format *f);
/* f with its n_out_of_m levels compressed: the format of an n_out_of_m
 * output's stand-in, and of a converted copy of a view of one (whose own
 * blocks may hold more than n entries). */
void rt_format_unstructure(tj_format *f);
/* A kernel's stand-in for an n_out_of_m output t: a fresh tensor over t's
 * levels (name, dtype, dims and levels of t->st) whose n_out_of_m level is
 * compressed, empty or holding t's entries (with_contents, for +=).
 * *out is the caller's (tj_tensor_free). */
tj_status rt_tensor_structured_temp(const tj_tensor *t, bool with_contents, tj_tensor **out);
/* dst's contents := src's stored entries, src's level coordinates being
 * dst's level coordinates (one blocked, the other its levels as dims):
 * repacked, so an n_out_of_m dst refuses a block that does not fit, naming
 * it; entries in a blocked dst's padding are dropped. Arrays of dst the
 * caller wrapped are refilled in place when the new contents fit them.
 * On failure dst is left empty, or as it was with restore (a `+=` run's
 * output: no data lost). */
tj_status rt_tensor_assign_levels(tj_tensor *dst, const tj_tensor *src, bool restore);
/* v = dense tensor t with each dim m where split[m] > 0 seen as two dims
 * (ceil(dims[m] / split[m]), split[m]), next to each other and in t's
 * level order: the same values array, nothing copied, when every split dim
 * is a multiple of its block; else a zero-padded copy the view owns (freed
 * by rt_tensor_view_finish). frame (NULL: none) puts a dim in a blocked
 * view's frame (RtBlockFrame): where frame[m][1] > 0, t's coordinate c is
 * the view's lead + c * stride (frame[m] = {lead, stride}), over
 * (lead + (dims[m]-1) * stride) / split[m] + 1 blocks, in a zero-filled
 * copy. A tensor with no values yet gets them (zeroed) first. Refused
 * unless t is dense. how (RtSplitHow bits) spares the copy where the
 * kernel allows: RT_SPLIT_IN_PLACE, for an input whose framed dims the
 * kernel reads only at the view's positions (block windows), reads t's
 * own array through a shifted pointer (frame position p of the first
 * level's dim is t's coordinate p - lead) when that is the only framed
 * dim, by stride 1, and every other dim is a whole number of blocks or
 * not split; RT_SPLIT_NO_COPY_IN, for an output the kernel overwrites
 * whole (`=`), leaves a padded copy zeroed instead of copying t in. */
typedef enum RtSplitHow {
  RT_SPLIT_IN_PLACE = 1u << 0,
  RT_SPLIT_NO_COPY_IN = 1u << 1
} RtSplitHow;
tj_status rt_tensor_view_split(const tj_tensor *t, const int32_t *split,
                               const int64_t (*frame)[2], unsigned how, tj_tensor *v);
/* After a kernel ran on view v of t (v from rt_tensor_view_split): when t
 * is the output it takes the values v holds (copied back from a padded
 * copy, or the array a kernel that had to grow them made) and their
 * length; a padded copy is freed. */
void rt_tensor_view_finish(tj_tensor *t, tj_tensor *v, bool output);

/* Which zero values a walk of stored entries skips: none; fill (zeros
 * under a dense last level or in 2:4 padding: what a conversion drops,
 * explicit zeros of CSR kept); or every zero of a format with any dense
 * level (what a written file leaves out: a kernel's sparse output may
 * store structural zeros, README "Not yet"). */
typedef enum RtDrop { RT_DROP_NONE = 0, RT_DROP_FILL = 1, RT_DROP_DENSE_ZEROS = 2 } RtDrop;

/* ---- views (slice.c) ---- */

/* Refreshes view v's storage from its base (nothing for a non-view). */
void rt_view_sync(tj_tensor *v);
/* The view coordinates vc of base coordinates bc; false when bc lies
 * outside the slice. */
bool rt_view_from_base(const tj_tensor *v, const int64_t *bc, int64_t *vc);
/* The base coordinates of view coordinates vc. */
void rt_view_to_base(const tj_tensor *v, const int64_t *vc, int64_t *bc);
/* rt_tensor_entries_val of a view: its base's entries inside the slice. */
tj_status rt_view_entries(const tj_tensor *v, RtDrop drop, int64_t **coords,
                          RtVal **vals, int64_t *n);

/* ---- pack, unpack, conversion (pack.c, convert.c) ---- */

/* Stored entries of t as COO in level order, less the zeros drop names.
 * The arrays are malloc'd, owned by the caller; coords[e*order + mode]. */
tj_status rt_tensor_entries(const tj_tensor *t, RtDrop drop,
                            int64_t **coords, double **vals, int64_t *n);
/* The same with values exact in t's dtype. */
tj_status rt_tensor_entries_val(const tj_tensor *t, RtDrop drop,
                                int64_t **coords, RtVal **vals, int64_t *n);
/* rt_tensor_entries_val in level coordinates of t's storage (the same as
 * dims unless t is blocked): coords[e*levels + l]. */
tj_status rt_tensor_level_entries_val(const tj_tensor *t, RtDrop drop,
                                      int64_t **coords, RtVal **vals, int64_t *n);
/* The sum (in t's dtype) of the values stored at coord, 0 if none. */
RtVal rt_tensor_lookup(const tj_tensor *t, const int64_t *coord);
/* Fills out (prod(dims) doubles, row-major over dims) with t's values and,
 * when stored is not NULL, stored (prod(dims) bytes) with 1 where t stores
 * an entry, 0 elsewhere. */
tj_status rt_tensor_to_dense(const tj_tensor *t, double *out, uint8_t *stored);
/* Replaces t's contents with the entries of dense (row-major over dims)
 * where keep is 1, or (keep NULL) the nonzeros; all-dense formats store
 * every value. */
tj_status rt_tensor_from_dense(tj_tensor *t, const double *dense, const uint8_t *keep);

/* ---- parallel assembly (parallel.c, concat.c) ---- */
/* Splits rows [lo, hi) into n chunks (bounds[0..n]) of about equal work:
 * rows plus nonzeros by pos (width pos_width) when pos is non-NULL. */
void rt_split_rows(int64_t lo, int64_t hi, const void *pos, int32_t pos_width,
                   int n, int64_t *bounds);
/* An empty storage shaped like s (order, dtype, widths, dims, levels). */
void rt_storage_empty_like(const tj_storage *s, tj_storage *out);
/* Frees the arrays of a storage made by rt_storage_empty_like. */
void rt_storage_release(tj_storage *s);
/* Concatenates n row chunks (first level dense, the rest compressed, built
 * by row-range kernels in row order) into out, replacing its contents. */
tj_status rt_storage_concat(tj_storage *out, tj_storage *const *chunks, int n);

/* The segment [*lo, *hi) of parent position p in level lv of s, which is
 * compressed, loose_compressed or n_out_of_m; false when p has none. */
bool rt_level_segment(const tj_storage *s, const tj_level_storage *lv, int64_t p, int64_t *lo,
                      int64_t *hi);
/* Calls emit(ctx, coord, p) for every stored position p of s (coord by
 * dim), in level order; nothing when s holds no values (iterate.c). */
typedef void (*RtEmitFn)(void *ctx, const int64_t *coord, int64_t p);
void rt_storage_walk(const tj_storage *s, RtEmitFn emit, void *ctx);

/* The value position of s where coord (by dim) is stored, or -1 when s
 * stores no entry there (the first one when a nonunique level holds several;
 * iterate.c). */
int64_t rt_storage_locate(const tj_storage *s, const int64_t *coord);
/* After the assembly of a `+=` into a sparse output (accumulate.c): sets
 * each value of dst to old's at the same coordinates where old stores an
 * entry, else to fill. dst's pattern must hold old's (both in one format);
 * entries of old that dst does not store are counted in *lost. */
tj_status rt_storage_carry(tj_storage *dst, const tj_storage *old, RtVal fill, int64_t *lost);
/* A new tensor (owned by the caller) with src's format, dtype and arrays
 * copied as they are (explicit zeros and fill too), by memcpy. */
tj_status rt_tensor_copy(const tj_tensor *src, tj_tensor **out);
/* Fresh copies of s's positions and coordinates, level by level, into d
 * (runtime/convert.c; shared by rt_tensor_copy and tj_tensor_cast); false
 * when out of memory (the arrays made so far are d's). */
bool rt_copy_index_arrays(const tj_storage *s, tj_storage *d);
/* tj_tensor_convert keeping every stored entry of src, dense fill included
 * (a kernel's operand read in another format: a stored 0 is an entry that
 * min, max and semirings see). */
tj_status rt_tensor_convert_all(const tj_tensor *src, const tj_format *fmt, tj_tensor **out);

/* A tensor of format fmt (src's order) holding 1 where src stores an entry
 * (explicit zeros too) and 0 elsewhere: a structural mask as values. */
tj_status rt_tensor_pattern(const tj_tensor *src, const tj_format *fmt, tj_tensor **out);

/* A kept pattern of a sparse mask (pattern.c): rt_pattern_refresh returns
 * the pattern of src in the all-dense format fmt, rebuilt only when src's
 * structure (dims, lengths, pos and crd arrays, compared byte for byte
 * against a copy, so arrays the caller changed in place are seen too)
 * differs from the last call's; then only the old entries are cleared and
 * the new ones set, in the same arrays. Not thread-safe: one user at a
 * time (the kernel's pattern lock). Zero-initialize; rt_pattern_free. */
typedef struct RtPattern {
  tj_tensor *pat;          /* the pattern, owned */
  int64_t *set;            /* its linear positions holding 1 */
  int64_t nset, set_cap;
  unsigned char *shape;    /* src's structure as last seen */
  size_t shape_len, shape_cap;
} RtPattern;
tj_status rt_pattern_refresh(RtPattern *p, const tj_tensor *src, const tj_format *fmt,
                             tj_tensor **out, bool *rebuilt);
void rt_pattern_free(RtPattern *p);

/* ---- SELL-C-sigma copies for SpMV (sell.c) ----
 * A CSR matrix copied into slices of RT_SELL_C rows, each padded to its
 * longest row and stored column-major; rows sorted by length within
 * windows of RT_SELL_SIGMA when that cuts padding (see sell.c). */
#define RT_SELL_C 8
#define RT_SELL_SIGMA 256
#define RT_SELL_MAX_MEAN 32
#define RT_SELL_MAX_MEAN_AVX2 128
typedef struct RtSell RtSell;
/* Whether a is a CSR matrix the SELL copy takes (f64/f32, identity mode
 * order, dims < 2^31, packed). */
bool rt_sell_form(const tj_storage *a);
/* Whether a SELL copy of a (rt_sell_form) pays over the CSR loops: its
 * rows average fewer than rt_sell_max_mean() entries. O(1). */
bool rt_sell_pays(const tj_storage *a);
/* The mean row length below which the copy pays: TJ_SELL_MAX_MEAN, else
 * RT_SELL_MAX_MEAN_AVX2 for f64 where the AVX2 loop runs (rt_sell_isa),
 * else RT_SELL_MAX_MEAN (see sell.c). */
double rt_sell_max_mean(tj_dtype dt);
/* t's SELL copy, built now unless t holds one built from its current
 * arrays, with a reference the caller gives back by rt_sell_release (the
 * copy stays valid until then, even if t changes or is freed meanwhile).
 * Thread-safe against other rt_sell_get and rt_tensor_touch calls.
 * TJ_ERR_UNSUPPORTED when t is not rt_sell_form, TJ_ERR_NOMEM. */
tj_status rt_sell_get(tj_tensor *t, const RtSell **out);
void rt_sell_release(const RtSell *s);
/* y = A x (accumulate: y += A x) over A's SELL copy s; x and y dense of
 * s's dtype, x of A's column count, y of its row count. Threads:
 * tj_rt_threads(), balanced by padded entries. */
void rt_sell_spmv(const RtSell *s, const void *x, void *y, bool accumulate);
/* Stored entries, entries after padding, and whether rows were sorted. */
void rt_sell_stats(const RtSell *s, int64_t *nnz, int64_t *padded, bool *sorted);
/* Whether s keeps 16-bit column offsets from each slice's least column
 * (every slice's columns span at most 65536; see sell.c). */
bool rt_sell_narrow(const RtSell *s);
/* The column panels of the copy (1 unless x passes 4 MB; see sell.c). */
int64_t rt_sell_panels(const RtSell *s);
/* The instruction set of the f64 SELL loop this process runs: "avx512",
 * "avx2" (AVX2 + FMA) or "portable" (TJ_SELL_PORTABLE=1, or neither;
 * TJ_SELL_AVX2=1 stops at AVX2), decided once at the first call or run. */
const char *rt_sell_isa(void);
void rt_sell_free(RtSell *s);
/* t changed (its arrays, or values in place): derived copies (the SELL
 * copy) are dropped. Every library call that changes a tensor calls it. */
void rt_tensor_touch(tj_tensor *t);

/* GETT methods chosen by timing at a first run (gett.c): a process-wide
 * table keyed by rt_gett_tune_key (the plan's words, the dims of C, A and
 * B, and the thread count). rt_gett_tuned_get is -1 for a key not timed;
 * the driver reads and writes the entries of its disk cache through them. */
uint64_t rt_gett_tune_key(tj_storage *const *operands, const int32_t *plan);
int rt_gett_tuned_get(uint64_t key);
void rt_gett_tuned_put(uint64_t key, int method);

/* How partial outputs combine: the root reduction's operator. */
typedef enum {
  RT_COMBINE_ADD, RT_COMBINE_MUL, RT_COMBINE_MIN, RT_COMBINE_MAX,
  RT_COMBINE_OR, RT_COMBINE_AND   /* 1 where either / both are nonzero, else 0 */
} RtCombine;
/* Combines n >= 1 dense partial outputs (all dense levels, same shape as
 * out) into out in chunk order, starting from out's values when
 * accumulate, else from the first partial (which may be out itself: its
 * values are then left where they are). */
tj_status rt_storage_sum_partials(tj_storage *out, tj_storage *const *parts, int n,
                                  bool accumulate, RtCombine how);
/* The same over the values [lo, hi) of the flattened output alone, whose
 * values the caller has reserved: disjoint ranges may run on different
 * threads, each value combined in chunk order as above. */
void rt_storage_combine_range(tj_storage *out, tj_storage *const *parts, int n,
                              bool accumulate, RtCombine how, int64_t lo, int64_t hi);
/* The same, combining by a kernel (a definition's combine kernel, run as
 * fn({out, part}) to fold one partial into out in place); the first
 * partial may be out itself. */
tj_status rt_storage_fold_partials(tj_storage *out, tj_storage *const *parts, int n,
                                   bool accumulate, int32_t (*fn)(tj_storage **));

/* Merges n >= 1 sparse partial outputs (out's format, every level dense or
 * compressed, ordered and unique) into out, replacing its contents: its
 * pattern the union of theirs, each value the present parts' combined in
 * chunk order (concat.c). */
tj_status rt_storage_merge(tj_storage *out, tj_storage *const *parts, int n, RtCombine how);

/* ---- file I/O (mtx.c, tns.c) ---- */

typedef struct RtReader RtReader;
/* Reads a Matrix Market file from r into a new tensor (*out, owned by the
 * caller); on error nothing is returned. */
tj_status mtx_read(RtReader *r, const char *name, const tj_format *fmt, tj_dtype dt,
                   tj_tensor **out);
/* Reads a FROSTT .tns file from r into a new tensor (*out). */
tj_status tns_read(RtReader *r, const char *name, const tj_format *fmt, tj_dtype dt,
                   tj_tensor **out);

#endif
