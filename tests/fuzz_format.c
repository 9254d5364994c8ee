/* libFuzzer target for format strings (runtime/format.c): taco letters
 * with a mode order ("ds:1,0") and the MLIR spelling
 * ("(i,j) -> (j : dense, i : compressed)", and LLVM 15-17's dimLevelType
 * spelling). A string either fails with a
 * message or gives a format that prints (taco spelling) and re-parses to
 * the same format; a tensor of small dims in that format then takes a few
 * entries, packs, converts to CSR-like and back, and keeps its entries.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"

static void must(bool cond, const char *what, const char *src) {
  if (cond) return;
  fprintf(stderr, "fuzz_format: %s for \"%s\"\n", what, src);
  abort();
}

static bool same_format(const tj_format *a, const tj_format *b) {
  if (a->order != b->order || strcmp(a->levels, b->levels) != 0 || a->ndims != b->ndims)
    return false;
  for (int l = 0; l < a->order; l++)
    if (a->mode_order[l] != b->mode_order[l] || a->lvl_n[l] != b->lvl_n[l] ||
        (a->ndims && (a->lvl_op[l] != b->lvl_op[l] || a->lvl_k[l] != b->lvl_k[l])))
      return false;
  return memcmp(a->slice, b->slice, sizeof a->slice) == 0;
}

/* Coordinate m of the e-th distinct entry: e's base-3 digits. */
static int64_t coord_of(int e, int m) {
  for (; m > 0; m--) e /= 3;
  return e % 3;
}

static bool is_sliced(const tj_format *f) {
  for (int d = 0; d < TJ_MAX_ORDER_PUBLIC; d++)
    if (f->slice[d][2]) return true;
  return false;
}

/* A format with slices: a view of a 3 x ... x 3 base holding a few
 * entries either is refused with a message (a slice past the extent) or
 * reads, converted or by get, the base's entries inside the slice. */
static void use_view(const tj_format *f, const char *src) {
  int order = f->ndims ? f->ndims : f->order;   /* dims: fewer than levels when blocked */
  int n = order == 1 ? 3 : 5;                   /* distinct coordinates */
  int64_t dims[TJ_MAX_ORDER_PUBLIC];
  for (int m = 0; m < order; m++) dims[m] = 3;
  tj_format bf = *f;
  memset(bf.slice, 0, sizeof bf.slice);
  tj_tensor *t, *v, *c;
  must(tj_tensor_new("T", TJ_F64, order, dims, &bf, &t) == TJ_OK, "tensor_new failed", src);
  for (int e = 0; e < n; e++) {
    int64_t coord[TJ_MAX_ORDER_PUBLIC];
    for (int m = 0; m < order; m++) coord[m] = coord_of(e, m);
    must(tj_tensor_insert(t, coord, e + 1) == TJ_OK, "insert failed", src);
  }
  if (tj_tensor_pack(t) != TJ_OK) {   /* entries that overfill n_out_of_m blocks */
    must(strchr(f->levels, 'n') && strstr(tj_last_error(), "nonzeros; n_out_of_m"),
         "pack failed", src);
    tj_tensor_free(t);
    return;
  }
  if (tj_tensor_view(t, "V", f, &v) != TJ_OK) {
    must(tj_last_error()[0] != 0, "view failed without a message", src);
    tj_tensor_free(t);
    return;
  }
  /* dynamic ('?') values start as offset 0, stride 1, the rest of the dim */
  int64_t vals[TJ_MAX_ORDER_PUBLIC][3];
  for (int m = 0; m < order; m++) {
    const int64_t *sl = f->slice[m];
    bool dyn = sl[0] == TJ_SLICE_DYNAMIC || sl[1] == TJ_SLICE_DYNAMIC || sl[2] == TJ_SLICE_DYNAMIC;
    int64_t o = sl[0] == TJ_SLICE_DYNAMIC ? 0 : sl[0], s = sl[2] == TJ_SLICE_DYNAMIC ? 1 : sl[2];
    vals[m][0] = o, vals[m][2] = s;
    vals[m][1] = sl[1] != TJ_SLICE_DYNAMIC ? sl[1] : o < dims[m] ? (dims[m] - o + s - 1) / s : 0;
    if (!dyn) memcpy(vals[m], sl, sizeof vals[m]);
  }
  int64_t inside = 0;
  for (int e = 0; e < n; e++) {
    bool in = true;
    int64_t vc[TJ_MAX_ORDER_PUBLIC];
    for (int m = 0; m < order; m++) {
      const int64_t *sl = vals[m];
      int64_t x = coord_of(e, m) - (sl[2] ? sl[0] : 0), st = sl[2] ? sl[2] : 1;
      in = in && x >= 0 && x % st == 0 && (!sl[2] || x / st < sl[1]);
      vc[m] = x / st;
    }
    inside += in;
    double y;
    if (in) must(tj_tensor_get(v, vc, &y) == TJ_OK && y == e + 1, "a view's value", src);
  }
  tj_format all = tj_format_dense(order);
  for (int l = 0; l < order; l++) all.levels[l] = 's';
  must(tj_tensor_convert(v, &all, &c) == TJ_OK, "convert of a view failed", src);
  must(tj_tensor_nnz(c) == inside, "a view's entries converted", src);   /* fill dropped */
  tj_tensor_free(c);
  tj_tensor_free(v);
  tj_tensor_free(t);
}

/* Packs a few distinct entries into a tensor of format f and converts it
 * to all compressed and back: the entries survive. */
static void use_format(const tj_format *f, const char *src) {
  int order = f->ndims ? f->ndims : f->order;   /* dims: fewer than levels when blocked */
  int n = order == 0 ? 1 : order == 1 ? 3 : 5;
  int64_t dims[TJ_MAX_ORDER_PUBLIC];
  for (int m = 0; m < order; m++) dims[m] = 3;
  tj_tensor *t, *c, *b;
  must(tj_tensor_new("T", TJ_F64, order, dims, f, &t) == TJ_OK, "tensor_new failed", src);
  for (int e = 0; e < n; e++) {
    int64_t coord[TJ_MAX_ORDER_PUBLIC];
    for (int m = 0; m < order; m++) coord[m] = coord_of(e, m);
    must(tj_tensor_insert(t, coord, e + 1) == TJ_OK, "insert failed", src);
  }
  if (tj_tensor_pack(t) != TJ_OK) {   /* entries that overfill n_out_of_m blocks */
    must(strchr(f->levels, 'n') && strstr(tj_last_error(), "nonzeros; n_out_of_m"),
         "pack failed", src);
    tj_tensor_free(t);
    return;
  }
  tj_format all = tj_format_dense(order);
  for (int l = 0; l < order; l++) all.levels[l] = 's';
  must(tj_tensor_convert(t, &all, &c) == TJ_OK, "convert failed", src);
  must(tj_tensor_convert(c, f, &b) == TJ_OK, "convert back failed", src);
  must(tj_tensor_nnz(b) == tj_tensor_nnz(t), "convert changed nnz", src);
  for (int e = 0; e < n; e++) {
    int64_t coord[TJ_MAX_ORDER_PUBLIC];
    for (int m = 0; m < order; m++) coord[m] = coord_of(e, m);
    double x, y;
    must(tj_tensor_get(t, coord, &x) == TJ_OK && tj_tensor_get(b, coord, &y) == TJ_OK &&
             x == y, "convert changed a value", src);
  }
  tj_tensor_free(t);
  tj_tensor_free(c);
  tj_tensor_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *src = malloc(size + 1);
  memcpy(src, data, size);
  src[size] = 0;
  tj_format f;
  memset(&f, 0x5a, sizeof f);
  tj_format before = f;
  if (tj_format_parse(src, &f) == TJ_OK) {
    must(f.order >= 0 && f.order <= TJ_MAX_ORDER_PUBLIC, "order out of range", src);
    must((int)strlen(f.levels) == f.order, "levels do not match the order", src);
    char buf[1024];
    tj_format_print(&f, buf, sizeof buf);
    tj_format g;
    must(tj_format_parse(buf, &g) == TJ_OK, "the printed format does not parse", src);
    must(same_format(&f, &g), "the printed format parses differently", src);
    char mlir[2048];
    tj_format_print_mlir(&f, mlir, sizeof mlir);
    must(tj_format_parse(mlir, &g) == TJ_OK, "the MLIR spelling does not parse", src);
    must(same_format(&f, &g) && (g.pos_width ? g.pos_width : 32) == (f.pos_width ? f.pos_width : 32) &&
             (g.crd_width ? g.crd_width : 32) == (f.crd_width ? f.crd_width : 32),
         "the MLIR spelling parses differently", src);
    if (tj_format_print_mlir_legacy(&f, mlir, sizeof mlir) == TJ_OK) {   /* LLVM 15-16's */
      must(tj_format_parse(mlir, &g) == TJ_OK, "the old MLIR spelling does not parse", src);
      must(same_format(&f, &g) && (g.pos_width ? g.pos_width : 32) == (f.pos_width ? f.pos_width : 32) &&
               (g.crd_width ? g.crd_width : 32) == (f.crd_width ? f.crd_width : 32),
           "the old MLIR spelling parses differently", src);
    } else {
      must(tj_last_error()[0] != 0 && mlir[0] == 0, "old spelling refused without a message", src);
    }
    if (f.order <= 4 && is_sliced(&f)) use_view(&f, src);
    else if (f.order <= 4) use_format(&f, src);
  } else {
    must(tj_last_error()[0] != 0, "failed without a message", src);
    must(memcmp(&f, &before, sizeof f) == 0, "a failed parse changed *out", src);
  }
  free(src);
  return 0;
}
