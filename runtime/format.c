/* Storage formats: parsing, checking and printing tj_format.
 *
 * Two spellings describe the same object: taco letters per level with an
 * optional mode order ("ds", "ds:1,0" = CSC), and MLIR's map syntax
 * "(i,j) -> (j : dense, i : compressed)". Letters: d dense, s compressed,
 * u compressed-nonunique, o compressed-nonordered (coordinates of a segment
 * in any order: what a kernel writes without sorting), w
 * compressed(nonunique, nonordered), q singleton, c singleton-nonunique,
 * z singleton(nonordered) (unsorted COO is "wz"), l loose_compressed (lo and hi positions per
 * segment: pos[2p] .. pos[2p+1]), n n_out_of_m (MLIR's structured[n, m]:
 * n coordinates stored in every block of m; the letter takes its n, "n2",
 * and stores `d mod m`, so 2:4 is "ddn2:0,1/4,1%4"). A singleton
 * needs a nonunique parent (u, w, q, c or z): COO is "uq", COO-3 "uqq", where a
 * singleton above another singleton is implicitly nonunique.
 *
 * Blocked levels (MLIR's floordiv / mod): a level stores a dim, its block
 * number (d floordiv k) or its offset in the block (d mod k). MLIR spells
 * BSR "(i,j) -> (i floordiv 4 : dense, j floordiv 4 : compressed,
 * i mod 4 : dense, j mod 4 : dense)", the taco spelling "dsdd:0/4,1/4,0%4,1%4"
 * (a mode-order entry d/k is d floordiv k, d%k is d mod k). A blocked dim
 * has exactly one floordiv level and, below it, one mod level of the same
 * k. The runtime stores such a tensor as the tensor of its levels
 * (rt_format_expand: one dim per level, extents ceil(n/k) and k).
 *
 * Slices (MLIR's dimSlices) mark a view over a stored tensor
 * (tj_tensor_slice): per dim an offset, a size and a stride. MLIR spells
 * them on the dims, "(i : #sparse_tensor<slice(1, 3, 2)>, j) -> ...", or
 * as the field "dimSlices = [(1, 3, 2), (0, 8, 1)]"; the taco spelling
 * appends one entry per dim, "ds[1:3:2,:]" (':' = the whole dim).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor.h"

/* The level types as the runtime stores them: letter, MLIR spelling, ABI
 * kind and flags. Adding a level type adds a row here (the parser, the
 * storage set-up and the printer read it), its storage in pack.c /
 * iterate.c, and its lowering properties in ir/level.c. */
static const RtLevelType level_types[] = {
  {'d', "dense", "", TJ_LVL_DENSE, 0},
  {'s', "compressed", "", TJ_LVL_COMPRESSED, 0},
  {'u', "compressed", "nonunique", TJ_LVL_COMPRESSED, TJ_LVL_NONUNIQUE},
  {'o', "compressed", "nonordered", TJ_LVL_COMPRESSED, TJ_LVL_NONORDERED},
  {'w', "compressed", "nonunique, nonordered", TJ_LVL_COMPRESSED,
   TJ_LVL_NONUNIQUE | TJ_LVL_NONORDERED},
  {'q', "singleton", "", TJ_LVL_SINGLETON, 0},
  {'c', "singleton", "nonunique", TJ_LVL_SINGLETON, TJ_LVL_NONUNIQUE},
  {'z', "singleton", "nonordered", TJ_LVL_SINGLETON, TJ_LVL_NONORDERED},
  {'l', "loose_compressed", "", TJ_LVL_LOOSE_COMPRESSED, 0},
  {'n', "structured", "", TJ_LVL_N_OUT_OF_M, 0},   /* structured[n, m] */
};
#define NLEVEL_TYPES ((int)(sizeof level_types / sizeof level_types[0]))

const RtLevelType *rt_level_type(char c) {
  for (int k = 0; k < NLEVEL_TYPES && c; k++)
    if (level_types[k].letter == c) return &level_types[k];
  return NULL;
}

static bool is_letter(char c) { return rt_level_type(c) != NULL; }

/* "d, s, u, o, q or c": the letters, for messages. */
static const char *letter_list(void) {
  static char buf[4 * NLEVEL_TYPES + 8];
  if (buf[0]) return buf;
  size_t k = 0;
  for (int t = 0; t < NLEVEL_TYPES; t++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%c",
                          t == 0 ? "" : t + 1 == NLEVEL_TYPES ? " or " : ", ",
                          level_types[t].letter);
  return buf;
}

/* Whether level l of f may repeat a coordinate: a nonunique level, or a
 * singleton with a singleton below it (COO-3's middle level). */
bool rt_format_level_nonunique(const tj_format *f, int l) {
  const RtLevelType *lt = rt_level_type(f->levels[l]);
  const RtLevelType *below = l + 1 < f->order ? rt_level_type(f->levels[l + 1]) : NULL;
  return (lt->flags & TJ_LVL_NONUNIQUE) ||
         (lt->kind == TJ_LVL_SINGLETON && below && below->kind == TJ_LVL_SINGLETON);
}

/* A blocked format's map: every level names a dim below ndims; each dim
 * is stored by one plain level, or by one floordiv level and, below it, one
 * mod level with the same block size. */
static tj_status check_blocks(const tj_format *f) {
  if (f->ndims < 1 || f->ndims > f->order)
    return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": %d dims for %d levels",
                        f->levels, f->ndims, f->order);
  int plain[TJ_MAX_ORDER] = {0}, div[TJ_MAX_ORDER], mod[TJ_MAX_ORDER];
  for (int d = 0; d < TJ_MAX_ORDER; d++) div[d] = mod[d] = -1;
  for (int l = 0; l < f->order; l++) {
    int d = f->mode_order[l], op = f->lvl_op[l];
    if (d < 0 || d >= f->ndims)
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": level %d stores dim %d, "
                          "not one of 0..%d", f->levels, l, d, f->ndims - 1);
    if (op != TJ_LVL_DIM && (f->lvl_k[l] < 1 || f->lvl_k[l] > (1 << 30)))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": level %d has block size "
                          "%d (expected 1..2^30)", f->levels, l, f->lvl_k[l]);
    int *slot = op == TJ_LVL_DIM ? &plain[d] : NULL;
    if (slot) (*slot)++;
    else if (op == TJ_LVL_FLOORDIV && div[d] < 0) div[d] = l;
    else if (op == TJ_LVL_MOD && mod[d] < 0) mod[d] = l;
    else
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": dim %d has two %s levels",
                          f->levels, d, op == TJ_LVL_MOD ? "mod" : op == TJ_LVL_FLOORDIV
                                                                   ? "floordiv" : "unknown");
  }
  for (int d = 0; d < f->ndims; d++) {
    bool blocked = div[d] >= 0 || mod[d] >= 0;
    if (plain[d] + blocked != 1 || (blocked && (div[d] < 0 || mod[d] < 0)))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": dim %d must be stored by "
                          "one level, or by one 'floordiv k' and one 'mod k' level",
                          f->levels, d);
    if (blocked && (div[d] > mod[d] || f->lvl_k[div[d]] != f->lvl_k[mod[d]]))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": dim %d's 'floordiv %d' level "
                          "must come before its 'mod %d' level, with the same block size",
                          f->levels, d, f->lvl_k[div[d]], f->lvl_k[mod[d]]);
  }
  return TJ_OK;
}

bool rt_format_blocked(const tj_format *f) { return f->ndims != 0; }

int rt_format_dims(const tj_format *f) { return f->ndims ? f->ndims : f->order; }

void rt_format_expand(const tj_format *f, const int64_t *dims, tj_format *ef,
                      int64_t *edims) {
  *ef = *f;
  ef->ndims = 0;
  for (int l = 0; l < f->order; l++) {
    int64_t n = dims[f->mode_order[l]], k = f->lvl_k[l];
    edims[l] = f->lvl_op[l] == TJ_LVL_FLOORDIV ? (n + k - 1) / k
               : f->lvl_op[l] == TJ_LVL_MOD    ? k : n;
    ef->mode_order[l] = l, ef->lvl_op[l] = TJ_LVL_DIM, ef->lvl_k[l] = 0;
  }
}

static bool width_ok(int w) { return w == 0 || w == 8 || w == 16 || w == 32 || w == 64; }

/* An n_out_of_m level is the last level, stores `d mod m` of a blocked dim
 * and keeps 1 <= n <= m of every block; no other level has an n. */
static tj_status check_structured(const tj_format *f) {
  for (int l = 0; l < f->order; l++) {
    bool nm = rt_level_type(f->levels[l])->kind == TJ_LVL_N_OUT_OF_M;
    if (!nm && f->lvl_n[l] != 0)
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": level %d is not n_out_of_m "
                          "but has n = %d", f->levels, l, f->lvl_n[l]);
    if (!nm) continue;
    if (f->ndims == 0 || f->lvl_op[l] != TJ_LVL_MOD)
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": n_out_of_m level %d must store "
                          "a dim mod m (MLIR: j mod 4 : structured[2, 4]; taco: "
                          "ddn2:0,1/4,1%%4)", f->levels, l);
    if (l != f->order - 1)
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": n_out_of_m level %d must be "
                          "the last level", f->levels, l);
    if (f->lvl_n[l] < 1 || f->lvl_n[l] > f->lvl_k[l])
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": n_out_of_m level %d keeps %d "
                          "of every %d; n must be 1..m", f->levels, l, f->lvl_n[l],
                          f->lvl_k[l]);
  }
  return TJ_OK;
}

bool rt_format_sliced(const tj_format *f) {
  for (int d = 0; d < TJ_MAX_ORDER; d++)
    if (f->slice[d][2] != 0) return true;
  return false;
}

void rt_format_unslice(tj_format *f) {
  memset(f->slice, 0, sizeof f->slice);
  memset(f->win, 0, sizeof f->win);
}

/* Slices: offset >= 0, size >= 0 and stride >= 1 on dims of the format
 * (stride 0 with offset and size 0: not sliced); a blocked format's slices
 * are on its dims (ndims), not its levels. Extents are checked against a
 * base by tj_tensor_slice. */
static tj_status check_slices(const tj_format *f) {
  bool any = false;
  for (int d = 0; d < TJ_MAX_ORDER; d++) any |= f->slice[d][0] || f->slice[d][1] || f->slice[d][2];
  if (!any) return TJ_OK;
  int nd = f->ndims ? f->ndims : f->order;
  for (int d = 0; d < TJ_MAX_ORDER; d++) {
    const int64_t *sl = f->slice[d];
    if (!sl[0] && !sl[1] && !sl[2]) continue;
    if (d >= nd)
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": a slice on dim %d, but the "
                          "format has %d dims", f->levels, d, nd);
    const int64_t dyn = TJ_SLICE_DYNAMIC;
    if ((sl[0] < 0 && sl[0] != dyn) || (sl[1] < 0 && sl[1] != dyn) || (sl[2] < 1 && sl[2] != dyn))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": dim %d's slice (%lld, %lld, "
                          "%lld) needs offset >= 0, size >= 0 and stride >= 1 (or "
                          "TJ_SLICE_DYNAMIC, '?')", f->levels,
                          d, (long long)sl[0], (long long)sl[1], (long long)sl[2]);
  }
  return TJ_OK;
}

/* The structural checks shared by parse and rt_format_check. */
static tj_status check_levels(const tj_format *f) {
  if (f->order < 0 || f->order > TJ_MAX_ORDER)
    return rt_set_error(TJ_ERR_FORMAT, "format has %d levels; at most %d are "
                        "supported", f->order, TJ_MAX_ORDER);
  if ((int)strlen(f->levels) != f->order)
    return rt_set_error(TJ_ERR_FORMAT, "format \"%s\" has %d level letters "
                        "but order %d", f->levels, (int)strlen(f->levels),
                        f->order);
  bool seen[TJ_MAX_ORDER] = {0};
  for (int l = 0; l < f->order; l++) {
    char c = f->levels[l];
    if (!is_letter(c))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": bad level letter "
                          "'%c' (expected %s)", f->levels, c, letter_list());
    int m = f->mode_order[l];
    if (f->ndims == 0 && (m < 0 || m >= f->order || seen[m]))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": mode order is not a "
                          "permutation of 0..%d", f->levels, f->order - 1);
    if (f->ndims == 0) seen[m] = true;
    if (rt_level_type(c)->kind == TJ_LVL_SINGLETON &&
        (l == 0 || !(rt_level_type(f->levels[l - 1])->kind == TJ_LVL_SINGLETON ||
                     (rt_level_type(f->levels[l - 1])->flags & TJ_LVL_NONUNIQUE))))
      return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": singleton level %d "
                          "needs a nonunique level (u, w, q, c or z) above it",
                          f->levels, l);
  }
  tj_status st = TJ_OK;
  if (f->ndims != 0) {
    st = check_blocks(f);
    if (st != TJ_OK) return st;
  } else {
    for (int l = 0; l < f->order; l++)
      if (f->lvl_op[l] != TJ_LVL_DIM)
        return rt_set_error(TJ_ERR_FORMAT, "format \"%s\": level %d is blocked "
                            "but ndims is 0", f->levels, l);
  }
  if (!width_ok(f->pos_width) || !width_ok(f->crd_width))
    return rt_set_error(TJ_ERR_FORMAT, "position and coordinate widths must "
                        "be 8, 16, 32 or 64 bits, or 0 for the default (got %d, %d)",
                        f->pos_width, f->crd_width);
  st = check_slices(f);
  if (st != TJ_OK) return st;
  return check_structured(f);
}

tj_status rt_format_check(const tj_format *f, int order) {
  tj_status st = check_levels(f);
  if (st != TJ_OK) return st;
  if (rt_format_dims(f) != order)
    return rt_set_error(TJ_ERR_SHAPE, "format \"%s\" has %d %s but the "
                        "tensor has order %d", f->levels, rt_format_dims(f),
                        f->ndims ? "dims" : "levels", order);
  return TJ_OK;
}

tj_format tj_format_dense(int order) {
  tj_format f;
  memset(&f, 0, sizeof f);
  if (order < 0) order = 0;
  if (order > TJ_MAX_ORDER) order = TJ_MAX_ORDER;
  f.order = order;
  for (int l = 0; l < order; l++) f.levels[l] = 'd', f.mode_order[l] = l;
  return f;
}

tj_format rt_format_default(int order) {
  tj_format f = tj_format_dense(order);
  for (int l = 0; l < f.order; l++) f.levels[l] = 's';
  if (order == 2) f.levels[0] = 'd';
  return f;
}

bool rt_format_all_dense(const tj_format *f) {
  for (int l = 0; l < f->order; l++)
    if (!rt_level_type(f->levels[l]) || rt_level_type(f->levels[l])->kind != TJ_LVL_DENSE)
      return false;
  return true;
}

/* Skips blanks and "// ..." comments (MLIR text pasted with its comments). */
static const char *skip_ws(const char *p) {
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (p[0] != '/' || p[1] != '/') return p;
    while (*p && *p != '\n') p++;
  }
}

/* A parsed format with a blocked level has as many dims as its largest
 * dim + 1 (the checks then ask that every dim be stored); else ndims 0. */
static void set_ndims(tj_format *f) {
  int nd = 0;
  bool blocked = false;
  for (int l = 0; l < f->order; l++) {
    blocked |= f->lvl_op[l] != TJ_LVL_DIM;
    if (f->mode_order[l] + 1 > nd) nd = f->mode_order[l] + 1;
  }
  f->ndims = blocked ? nd : 0;
}

/* Reads an integer in 0..2^30 at *p (after blanks) into *v. */
static bool read_int(const char **p, int32_t *v) {
  const char *s = skip_ws(*p);
  if (!isdigit((unsigned char)*s)) return false;
  long k = strtol(s, (char **)p, 10);
  *v = (int32_t)(k > (1L << 30) ? -1 : k);
  return true;
}

/* Reads a non-negative integer (at most 2^62) at *p (after blanks). */
static bool read_i64(const char **p, int64_t *v) {
  const char *s = skip_ws(*p);
  if (!isdigit((unsigned char)*s)) return false;
  long long k = strtoll(s, (char **)p, 10);
  *v = k > (1LL << 62) ? (1LL << 62) : k;
  return true;
}

static bool eat(const char **p, const char *tok);

/* A slice value at *p: a number, or '?' (TJ_SLICE_DYNAMIC: the view's
 * own, tj_tensor_slice_set). */
static bool read_slice_value(const char **p, int64_t *v) {
  if (eat(p, "?")) return *v = TJ_SLICE_DYNAMIC, true;
  return read_i64(p, v);
}

/* One MLIR slice triple "(0, 4, 1)" or "(?, ?, 1)" (after "slice" or in
 * dimSlices) into sl. */
static tj_status read_triple(const char *spec, const char **p, int64_t *sl) {
  const char *at = skip_ws(*p);
  if (!eat(p, "("))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '(offset, size, stride)' "
                        "at column %d", spec, (int)(at - spec) + 1);
  for (int k = 0; k < 3; k++) {
    if (k && !eat(p, ","))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ',' at column %d in a "
                          "slice", spec, (int)(skip_ws(*p) - spec) + 1);
    const char *v = skip_ws(*p);
    if (!read_slice_value(p, &sl[k]))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a number at column %d "
                          "in a slice", spec, (int)(v - spec) + 1);
  }
  if (!eat(p, ")"))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ')' at column %d after "
                        "a slice", spec, (int)(skip_ws(*p) - spec) + 1);
  if (sl[2] == 0)
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": a slice's stride must be >= 1 "
                        "(column %d)", spec, (int)(at - spec) + 1);
  return TJ_OK;
}

/* The taco slices after the levels: "[off:size:stride, off:size, :]",
 * one entry per dim (':' the whole dim, a missing stride 1). */
static tj_status parse_taco_slices(const char *spec, const char **p, tj_format *f) {
  int d = 0, nd = f->ndims ? f->ndims : f->order;
  if (nd > f->order || nd > TJ_MAX_ORDER_PUBLIC)   /* a map naming a dim past them */
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": %d dims for %d levels", spec, nd,
                        f->order);
  const char *open = *p;
  (*p)++;
  for (;;) {
    const char *at = skip_ws(*p);
    if (d == nd)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": more slices than the %d dims "
                          "at column %d", spec, nd, (int)(at - spec) + 1);
    int64_t sl[3] = {0, 0, 1};
    if (eat(p, ":")) {
      sl[2] = 0;
    } else if (!(read_slice_value(p, &sl[0]) && eat(p, ":") && read_slice_value(p, &sl[1]) &&
                 (!eat(p, ":") || read_slice_value(p, &sl[2])))) {
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a slice "
                          "'offset:size:stride' or ':' at column %d", spec,
                          (int)(at - spec) + 1);
    } else if (sl[2] == 0) {
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": a slice's stride must be >= 1 "
                          "(column %d)", spec, (int)(at - spec) + 1);
    }
    memcpy(f->slice[d++], sl, sizeof sl);
    if (eat(p, "]")) break;
    if (!eat(p, ","))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ',' or ']' at column %d",
                          spec, (int)(skip_ws(*p) - spec) + 1);
  }
  if (d != nd)
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": %d slices at column %d for %d "
                        "dims (':' keeps a dim whole)", spec, d, (int)(open - spec) + 1,
                        nd);
  return TJ_OK;
}

/* "ds", "ds:1,0" or "dsdd:0/4,1/4,0%4,1%4", with slices "ds[0:4:1,:]". */
static tj_status parse_taco(const char *spec, tj_format *f) {
  const char *p = spec;
  int n = 0;
  while (*p && *p != ':' && *p != '[' && !isspace((unsigned char)*p)) {
    if (n == TJ_MAX_ORDER)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\" has more than %d "
                          "levels", spec, TJ_MAX_ORDER);
    if (!is_letter(*p))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": bad level letter "
                          "'%c' at column %d (expected %s)",
                          spec, *p, (int)(p - spec) + 1, letter_list());
    if (*p == 'n') {   /* n_out_of_m: its n follows the letter */
      const char *at = p++;
      if (!isdigit((unsigned char)*p) || !read_int(&p, &f->lvl_n[n]))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": the n_out_of_m letter 'n' at "
                            "column %d needs its n (n2 for 2:4)", spec, (int)(at - spec) + 1);
      f->levels[n++] = 'n';
      continue;
    }
    f->levels[n++] = *p++;
  }
  f->order = n;
  for (int l = 0; l < n; l++) f->mode_order[l] = l;
  p = skip_ws(p);
  if (*p == ':') {
    int k = 0;
    p++;
    for (;;) {
      p = skip_ws(p);
      if (!isdigit((unsigned char)*p))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a mode "
                            "number at column %d", spec, (int)(p - spec) + 1);
      long m = strtol(p, (char **)&p, 10);
      if (k == TJ_MAX_ORDER || k == n)
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": mode order has "
                            "more entries than the %d levels", spec, n);
      p = skip_ws(p);
      if (*p == '/' || *p == '%') {   /* d/k: d floordiv k; d%k: d mod k */
        f->lvl_op[k] = *p == '/' ? TJ_LVL_FLOORDIV : TJ_LVL_MOD;
        p = skip_ws(p + 1);
        if (!read_int(&p, &f->lvl_k[k]))
          return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a block "
                              "size at column %d", spec, (int)(p - spec) + 1);
      }
      f->mode_order[k++] = (int32_t)(m > 99 ? 99 : m);
      p = skip_ws(p);
      if (*p != ',') break;
      p++;
    }
    if (k != n)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": mode order has %d "
                          "entries but the format has %d levels", spec, k, n);
  }
  p = skip_ws(p);
  set_ndims(f);
  if (*p == '[') {
    tj_status st = parse_taco_slices(spec, &p, f);
    if (st != TJ_OK) return st;
  }
  if (*skip_ws(p))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unexpected '%c' at "
                        "column %d", spec, *skip_ws(p),
                        (int)(skip_ws(p) - spec) + 1);
  set_ndims(f);
  return TJ_OK;
}

/* Reads an identifier at *p into buf (at most n-1 chars). */
static bool read_ident(const char **p, char *buf, size_t n) {
  const char *s = skip_ws(*p);
  size_t k = 0;
  while (isalnum((unsigned char)*s) || *s == '_') {
    if (k + 1 < n) buf[k++] = *s;
    s++;
  }
  buf[k] = 0;
  *p = s;
  return k > 0;
}

static bool eat(const char **p, const char *tok) {
  const char *s = skip_ws(*p);
  size_t n = strlen(tok);
  if (strncmp(s, tok, n) != 0) return false;
  *p = s + n;
  return true;
}

/* n_out_of_m's spellings: structured[n, m] (MLIR 19), n_out_of_m(n, m) and
 * blockN_M (MLIR 18's block2_4); word is read already. */
static bool structured(const char *word, const char **p, int32_t *n, int32_t *m) {
  int a, b, len = 0;
  if (sscanf(word, "block%d_%d%n", &a, &b, &len) == 2 && word[len] == 0 && a >= 0 && b >= 0)
    return *n = a, *m = b, true;
  const char *open = !strcmp(word, "structured") ? "[" : !strcmp(word, "n_out_of_m") ? "(" : NULL;
  const char *close = open && *open == '[' ? "]" : ")";
  return open && eat(p, open) && read_int(p, n) && eat(p, ",") && read_int(p, m) &&
         eat(p, close);
}

/* The flags a property word sets (0: not a property). */
static uint32_t prop_flag(const char *w) {
  return !strcmp(w, "nonunique") ? TJ_LVL_NONUNIQUE : !strcmp(w, "nonordered") ? TJ_LVL_NONORDERED : 0;
}

/* The flags of a row's property list ("nonunique, nonordered"). */
static uint32_t row_flags(const RtLevelType *lt) {
  uint32_t fl = 0;
  char w[32];
  for (const char *p = lt->prop; read_ident(&p, w, sizeof w); eat(&p, ",")) fl |= prop_flag(w);
  return fl;
}

/* One MLIR level type: dense, compressed, singleton, loose_compressed
 * with properties "(nonunique)", "(nonordered)" or both in either order
 * (compressed(nonunique, nonordered), singleton(nonordered)), and
 * structured[n, m]; returns the letter (n and m of structured in *n, *m)
 * or 0. */
static char level_letter(const char **p, int32_t *n, int32_t *m, bool *known_word) {
  char word[32], prop[32];
  *known_word = false;
  if (!read_ident(p, word, sizeof word)) return 0;
  const char *save = *p;
  if (structured(word, p, n, m)) return 'n';
  *p = save;
  for (int t = 0; t < NLEVEL_TYPES; t++)   /* structured is known only with its [n, m] */
    *known_word |= !strcmp(word, level_types[t].word) && level_types[t].kind != TJ_LVL_N_OUT_OF_M;
  uint32_t flags = 0;
  if (eat(p, "(")) {
    do {
      uint32_t fl = read_ident(p, prop, sizeof prop) ? prop_flag(prop) : 0;
      if (!fl || (flags & fl)) return 0;   /* unknown or repeated */
      flags |= fl;
    } while (eat(p, ","));
    if (!eat(p, ")")) return 0;
  }
  for (int t = 0; t < NLEVEL_TYPES; t++)
    if (!strcmp(word, level_types[t].word) && row_flags(&level_types[t]) == flags &&
        level_types[t].kind != TJ_LVL_N_OUT_OF_M)   /* only with its [n, m] */
      return level_types[t].letter;
  return 0;
}

/* Skips an expression up to a ',' or ')' outside parentheses (the inverse
 * map "i = il * 2 + ii" of MLIR's explicit form, derived here anyway). */
static void skip_expr(const char **p) {
  int depth = 0;
  const char *s = *p;
  for (; *s && (depth > 0 || (*s != ',' && *s != ')')); s++)
    depth += *s == '(' ? 1 : *s == ')' ? -1 : 0;
  *p = s;
}

/* "dimSlices = [(0, 4, 1), (0, 8, 1)]" (after its name): nd triples. */
static tj_status parse_dim_slices(const char *spec, const char **p, tj_format *f, int nd) {
  const char *at = skip_ws(*p);
  if (!eat(p, "=") || !eat(p, "["))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected 'dimSlices = [' at "
                        "column %d", spec, (int)(at - spec) + 1);
  int d = 0;
  while (!eat(p, "]")) {
    if (d == nd || (d && !eat(p, ",")))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected %s at column %d",
                          spec, d == nd ? "']' (one slice per dim)" : "','",
                          (int)(skip_ws(*p) - spec) + 1);
    tj_status st = read_triple(spec, p, f->slice[d++]);
    if (st != TJ_OK) return st;
  }
  if (d != nd)
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": dimSlices has %d slices for %d "
                        "dims", spec, d, nd);
  return TJ_OK;
}

/* The fields after the map: ", posWidth = 8, crdWidth = 16" (bits) and
 * ", dimSlices = [...]". */
static tj_status parse_widths(const char *spec, const char **p, tj_format *f, int nd) {
  while (eat(p, ",")) {
    char key[32];
    int32_t w;
    const char *at = skip_ws(*p);
    if (read_ident(p, key, sizeof key) && !strcmp(key, "dimSlices")) {
      tj_status st = parse_dim_slices(spec, p, f, nd);
      if (st != TJ_OK) return st;
      continue;
    }
    *p = at;
    bool known = read_ident(p, key, sizeof key) &&
                 (!strcmp(key, "posWidth") || !strcmp(key, "crdWidth"));
    if (!known || !eat(p, "=") || !read_int(p, &w))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected 'posWidth = N', "
                          "'crdWidth = N' or 'dimSlices = [...]' at column %d", spec,
                          (int)(at - spec) + 1);
    if (!strcmp(key, "posWidth")) f->pos_width = w;
    else f->crd_width = w;
  }
  return TJ_OK;
}

/* LLVM 15-17's level type strings ("compressed-nu-no": nonunique,
 * nonordered; "compressed-hi": loose) and their letters; 0: no letter. */
static const struct { const char *name; char letter; } legacy_types[] = {
  {"dense", 'd'}, {"compressed", 's'}, {"compressed-nu", 'u'}, {"compressed-no", 'o'},
  {"compressed-nu-no", 'w'}, {"singleton", 'q'}, {"singleton-nu", 'c'},
  {"singleton-no", 'z'}, {"singleton-nu-no", 0}, {"compressed-hi", 'l'},
  {"compressed-hi-nu", 0}, {"compressed-hi-no", 0}, {"compressed-hi-nu-no", 0},
};
#define NLEGACY ((int)(sizeof legacy_types / sizeof legacy_types[0]))

/* An affine map of the old spelling, "(i,j) -> (j, i floordiv 2, i mod 2)":
 * per result a dim, an op (TJ_LVL_*) and a block size. */
typedef struct LegacyMap {
  int ndims, n;
  int32_t dim[TJ_MAX_ORDER], op[TJ_MAX_ORDER], k[TJ_MAX_ORDER];
} LegacyMap;

/* "affine_map<(i,j) -> (j, i)>" after its field name and '='. */
static tj_status parse_affine_map(const char *spec, const char **p, LegacyMap *m) {
  char names[TJ_MAX_ORDER][32], w[32];
  memset(m, 0, sizeof *m);
  const char *at = skip_ws(*p);
  if (!eat(p, "affine_map") || !eat(p, "<") || !eat(p, "("))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected 'affine_map<(' at column %d",
                        spec, (int)(at - spec) + 1);
  while (!eat(p, ")")) {
    if (m->ndims == TJ_MAX_ORDER || (m->ndims && !eat(p, ",")) ||
        !read_ident(p, names[m->ndims], sizeof names[0]))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a dim name at column %d",
                          spec, (int)(skip_ws(*p) - spec) + 1);
    m->ndims++;
  }
  at = skip_ws(*p);
  if (eat(p, "["))
    return rt_set_error(TJ_ERR_UNSUPPORTED, "format \"%s\": symbols at column %d (as in "
                        "ELL's '[s0]') are not supported; a level stores a dim, 'dim "
                        "floordiv k' or 'dim mod k'", spec, (int)(at - spec) + 1);
  if (!eat(p, "->") || !eat(p, "("))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '-> (' at column %d", spec,
                        (int)(skip_ws(*p) - spec) + 1);
  while (!eat(p, ")")) {
    bool sep = m->n == 0 || eat(p, ",");
    at = skip_ws(*p);
    if (m->n == TJ_MAX_ORDER || !sep || !read_ident(p, w, sizeof w))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a dim at column %d", spec,
                          (int)(skip_ws(*p) - spec) + 1);
    int d = 0;
    while (d < m->ndims && strcmp(names[d], w) != 0) d++;
    if (d == m->ndims)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unknown dim '%s' at column %d",
                          spec, w, (int)(at - spec) + 1);
    m->dim[m->n] = d;
    m->op[m->n] = eat(p, "floordiv") ? TJ_LVL_FLOORDIV : eat(p, "mod") ? TJ_LVL_MOD : TJ_LVL_DIM;
    if (m->op[m->n] != TJ_LVL_DIM && !read_int(p, &m->k[m->n]))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a block size at column %d",
                          spec, (int)(skip_ws(*p) - spec) + 1);
    m->n++;
  }
  if (!eat(p, ">"))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '>' at column %d", spec,
                        (int)(skip_ws(*p) - spec) + 1);
  return TJ_OK;
}

/* '[ "dense", "compressed" ]' after its field name and '=': the letters. */
static tj_status parse_legacy_types(const char *spec, const char **p, tj_format *f) {
  if (!eat(p, "["))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '[' at column %d", spec,
                        (int)(skip_ws(*p) - spec) + 1);
  while (!eat(p, "]")) {
    const char *at = skip_ws(*p);
    char w[32];
    size_t k = 0;
    if (f->order == TJ_MAX_ORDER || (f->order && !eat(p, ",")) || !eat(p, "\""))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a quoted level type at "
                          "column %d", spec, (int)(skip_ws(*p) - spec) + 1);
    at = *p;
    while (**p && **p != '"') {
      if (k + 1 < sizeof w) w[k++] = **p;
      (*p)++;
    }
    w[k] = 0;
    if (!eat(p, "\""))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unterminated string at column %d",
                          spec, (int)(at - spec));
    int t = 0;
    while (t < NLEGACY && strcmp(legacy_types[t].name, w) != 0) t++;
    if (t == NLEGACY || !legacy_types[t].letter)
      return rt_set_error(t == NLEGACY ? TJ_ERR_PARSE : TJ_ERR_UNSUPPORTED,
                          "format \"%s\": %s level type \"%s\" at column %d (tensorjit stores "
                          "dense, compressed, compressed-nu, compressed-no, compressed-nu-no, "
                          "singleton, singleton-nu, singleton-no or compressed-hi)", spec,
                          t == NLEGACY ? "unknown" : "unsupported", w, (int)(at - spec));
    f->levels[f->order++] = legacy_types[t].letter;
  }
  return TJ_OK;
}

/* The levels of the old spelling from its maps: level l stores result
 * l of dimOrdering / dimToLvl, over the dims of higherOrdering when that
 * map is given (LLVM 16's blocked maps); identity when neither is. */
static tj_status legacy_levels(const char *spec, const LegacyMap *order, const LegacyMap *higher,
                               tj_format *f, int *nd) {
  *nd = higher->n ? higher->ndims : order->n ? order->ndims : f->order;
  for (int l = 0; l < f->order; l++) {
    int d = l, op = TJ_LVL_DIM, k = 0;
    if (order->n && l < order->n) d = order->dim[l], op = order->op[l], k = order->k[l];
    if (higher->n && op == TJ_LVL_DIM && d < higher->n)
      op = higher->op[d], k = higher->k[d], d = higher->dim[d];
    f->mode_order[l] = d, f->lvl_op[l] = op, f->lvl_k[l] = k;
  }
  int nmap = order->n ? order->n : higher->n ? higher->n : f->order;
  if (nmap != f->order || (higher->n && order->n && order->ndims != higher->n))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": %d level types but the maps give %d "
                        "levels", spec, f->order, nmap);
  set_ndims(f);
  if (f->ndims) f->ndims = *nd;
  return TJ_OK;
}

/* LLVM 15-16's fields inside "#sparse_tensor.encoding<{ ... }>", any
 * order: dimLevelType = [ "dense", "compressed" ], dimOrdering =
 * affine_map<(i,j) -> (j,i)>, higherOrdering = affine_map<...>,
 * pointerBitWidth = 64, indexBitWidth = 64; and LLVM 17's names of the
 * same: lvlTypes, dimToLvl, posWidth, crdWidth, with dimSlices. */
static tj_status parse_legacy(const char *spec, const char **p, tj_format *f) {
  LegacyMap order = {0}, higher = {0};
  const char *slices = NULL;
  bool types = false;
  do {
    char key[32];
    const char *at = skip_ws(*p);
    bool named = read_ident(p, key, sizeof key);
    const char *key_end = *p;
    if (!named || !eat(p, "="))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected 'name = ' at column %d",
                          spec, (int)(at - spec) + 1);
    tj_status st = TJ_OK;
    int32_t w;
    if (!strcmp(key, "dimLevelType") || !strcmp(key, "lvlTypes"))
      st = parse_legacy_types(spec, p, f), types = true;
    else if (!strcmp(key, "dimOrdering") || !strcmp(key, "dimToLvl"))
      st = parse_affine_map(spec, p, &order);
    else if (!strcmp(key, "higherOrdering"))
      st = parse_affine_map(spec, p, &higher);
    else if (!strcmp(key, "dimSlices")) {   /* read once the dims are known */
      slices = key_end;
      while (**p && **p != ']') (*p)++;
      if (**p) (*p)++;
    } else if (!strcmp(key, "pointerBitWidth") || !strcmp(key, "posWidth") ||
               !strcmp(key, "indexBitWidth") || !strcmp(key, "crdWidth")) {
      if (!read_int(p, &w))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a width at column %d",
                            spec, (int)(skip_ws(*p) - spec) + 1);
      *(key[0] == 'p' ? &f->pos_width : &f->crd_width) = w;
    } else {
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unknown field '%s' at column %d "
                          "(expected dimLevelType, dimOrdering, higherOrdering, "
                          "pointerBitWidth, indexBitWidth or their LLVM 17 names lvlTypes, "
                          "dimToLvl, posWidth, crdWidth, dimSlices)", spec, key,
                          (int)(at - spec) + 1);
    }
    if (st != TJ_OK) return st;
  } while (eat(p, ","));
  if (!types)
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": no dimLevelType (lvlTypes)", spec);
  int nd;
  tj_status st = legacy_levels(spec, &order, &higher, f, &nd);
  if (st == TJ_OK && slices) {
    const char *q = slices;
    st = parse_dim_slices(spec, &q, f, nd);
  }
  return st;
}

/* "(i,j) -> (j : dense, i : compressed)", optionally with ", posWidth =
 * 8, crdWidth = 16" and inside "#sparse_tensor.encoding<{ map = ... }>". */
static tj_status parse_mlir(const char *spec, tj_format *f) {
  char names[TJ_MAX_ORDER][32];
  int nd = 0, nl = 0;
  const char *p = spec;
  const char *alias = skip_ws(p);   /* "#CSR = #sparse_tensor.encoding<{...}>" */
  char word[64];
  if (*alias == '#' && strncmp(alias, "#sparse_tensor", 14) != 0) {
    p = alias + 1;
    if (!read_ident(&p, word, sizeof word) || !eat(&p, "="))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '#name = ' at column %d",
                          spec, (int)(alias - spec) + 1);
  }
  bool wrapped = eat(&p, "#sparse_tensor.encoding");
  if (wrapped && !(eat(&p, "<") && eat(&p, "{")))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '<{' at column %d", spec,
                        (int)(skip_ws(p) - spec) + 1);
  if (wrapped && (strstr(p, "dimLevelType") || strstr(p, "lvlTypes"))) {   /* LLVM 15-17 */
    tj_status st = parse_legacy(spec, &p, f);
    if (st == TJ_OK && !(eat(&p, "}") && eat(&p, ">")))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '}>' at column %d", spec,
                          (int)(skip_ws(p) - spec) + 1);
    if (st == TJ_OK && *skip_ws(p))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unexpected text at column %d", spec,
                          (int)(skip_ws(p) - spec) + 1);
    return st;
  }
  if (eat(&p, "map")) eat(&p, "=");
  const char *at = skip_ws(p);
  if (eat(&p, "["))
    return rt_set_error(TJ_ERR_UNSUPPORTED, "format \"%s\": symbols at column %d ('[s0]', "
                        "as in ELL's 'd0 * (s0 * 4)') are not supported; a level stores a "
                        "dim, 'dim floordiv k' or 'dim mod k'", spec, (int)(at - spec) + 1);
  if (eat(&p, "{")) {   /* explicit level variables "{l0, l1}": named again below */
    while (read_ident(&p, word, sizeof word) && eat(&p, ",")) {}
    if (!eat(&p, "}"))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '}' after the level "
                          "variables at column %d", spec, (int)(skip_ws(p) - spec) + 1);
  }
  if (!eat(&p, "("))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '(' at column "
                        "%d", spec, (int)(skip_ws(p) - spec) + 1);
  while (!eat(&p, ")")) {
    if (nd == TJ_MAX_ORDER)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\" has more than %d "
                          "dims", spec, TJ_MAX_ORDER);
    if (!read_ident(&p, names[nd], sizeof names[nd]))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a dim name "
                          "at column %d", spec, (int)(skip_ws(p) - spec) + 1);
    nd++;
    if (eat(&p, "=")) skip_expr(&p);   /* "d0 = l0": the inverse map */
    if (eat(&p, ":")) {   /* MLIR's dimSlices: i : #sparse_tensor<slice(0, 4, 1)> */
      const char *at = skip_ws(p);
      if (!(eat(&p, "#sparse_tensor") && eat(&p, "<") && eat(&p, "slice")))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected "
                            "'#sparse_tensor<slice(offset, size, stride)>' after dim %s at "
                            "column %d", spec, names[nd - 1], (int)(at - spec) + 1);
      tj_status st = read_triple(spec, &p, f->slice[nd - 1]);
      if (st != TJ_OK) return st;
      if (!eat(&p, ">"))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '>' at column %d",
                            spec, (int)(skip_ws(p) - spec) + 1);
    }
    if (!eat(&p, ",") && !eat(&p, ")"))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ',' or ')' "
                          "at column %d", spec, (int)(skip_ws(p) - spec) + 1);
    else if (*(p - 1) == ')') break;
  }
  if (!eat(&p, "->") || !eat(&p, "("))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '-> (' at "
                        "column %d", spec, (int)(skip_ws(p) - spec) + 1);
  while (!eat(&p, ")")) {
    char dim[32];
    if (nl == TJ_MAX_ORDER || !read_ident(&p, dim, sizeof dim))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected 'dim : "
                          "level-type' at column %d", spec,
                          (int)(skip_ws(p) - spec) + 1);
    const char *after = skip_ws(p);
    if (after[0] == '=' && after[1] != '=') {   /* "l0 = d0 : dense": the level named */
      p = after + 1;
      if (!read_ident(&p, dim, sizeof dim))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a dim after '=' at "
                            "column %d", spec, (int)(skip_ws(p) - spec) + 1);
    }
    int d = 0;
    while (d < nd && strcmp(names[d], dim) != 0) d++;
    if (d == nd)
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unknown dim '%s'",
                          spec, dim);
    int op = eat(&p, "floordiv") ? TJ_LVL_FLOORDIV : eat(&p, "mod") ? TJ_LVL_MOD : 0;
    if (op) {
      f->lvl_op[nl] = op;
      if (!read_int(&p, &f->lvl_k[nl]))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected a block size "
                            "at column %d", spec, (int)(skip_ws(p) - spec) + 1);
      if (!eat(&p, ":"))
        return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ':' at column "
                            "%d", spec, (int)(skip_ws(p) - spec) + 1);
    } else if (!eat(&p, ":")) {
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected 'dim : "
                          "level-type' at column %d", spec,
                          (int)(skip_ws(p) - spec) + 1);
    }
    const char *at = skip_ws(p);
    int32_t sn = 0, sm = 0;
    bool known_word;
    char c = level_letter(&p, &sn, &sm, &known_word);
    if (!c)
      return rt_set_error(known_word ? TJ_ERR_UNSUPPORTED : TJ_ERR_PARSE,
                          "format \"%s\": %s level type at column %d (tensorjit stores "
                          "dense, compressed, compressed(nonunique), compressed(nonordered), "
                          "compressed(nonunique, nonordered), singleton, singleton(nonunique), "
                          "singleton(nonordered), loose_compressed or structured[n, m])", spec, known_word ? "unsupported" : "unknown",
                          (int)(at - spec) + 1);
    if (c == 'n' && (op != TJ_LVL_MOD || sm != f->lvl_k[nl]))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": structured[%d, %d] at column %d "
                          "must store '%s mod %d'", spec, sn, sm, (int)(at - spec) + 1, dim, sm);
    f->lvl_n[nl] = c == 'n' ? sn : 0;
    f->levels[nl] = c;
    f->mode_order[nl++] = d;
    if (!eat(&p, ",") && !eat(&p, ")"))
      return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected ',' or ')' "
                          "at column %d", spec, (int)(skip_ws(p) - spec) + 1);
    else if (*(p - 1) == ')') break;
  }
  f->order = nl;
  set_ndims(f);
  if (f->ndims) f->ndims = nd;
  if (nl != nd && !f->ndims)
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": %d dims but %d levels",
                        spec, nd, nl);
  tj_status st = parse_widths(spec, &p, f, nd);
  if (st != TJ_OK) return st;
  if (wrapped && !(eat(&p, "}") && eat(&p, ">")))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": expected '}>' at column %d", spec,
                        (int)(skip_ws(p) - spec) + 1);
  if (*skip_ws(p))
    return rt_set_error(TJ_ERR_PARSE, "format \"%s\": unexpected text at "
                        "column %d", spec, (int)(skip_ws(p) - spec) + 1);
  return TJ_OK;
}

tj_status tj_format_parse(const char *spec, tj_format *out) {
  if (!spec || !out)
    return rt_set_error(TJ_ERR_INVALID, "tj_format_parse: NULL argument");
  tj_format f;
  memset(&f, 0, sizeof f);
  const char *s = skip_ws(spec);
  bool mlir = strstr(s, "->") || strstr(s, "#sparse_tensor");
  tj_status st = mlir ? parse_mlir(s, &f) : parse_taco(s, &f);
  if (st != TJ_OK) return st;
  st = check_levels(&f);
  if (st != TJ_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tj_last_error());
    return rt_set_error(TJ_ERR_PARSE, "%s", msg);
  }
  *out = f;
  return TJ_OK;
}

/* A slice value as printed: the number, or '?' for TJ_SLICE_DYNAMIC. */
static void slice_value(int64_t v, char out[24]) {
  if (v == TJ_SLICE_DYNAMIC) snprintf(out, 24, "?");
  else snprintf(out, 24, "%lld", (long long)v);
}

void tj_format_print(const tj_format *f, char *buf, size_t n) {
  if (!buf || n == 0) return;
  int k = 0;
  buf[0] = 0;
  for (int l = 0; l < f->order && k >= 0 && (size_t)k < n; l++)
    k += f->levels[l] == 'n' ? snprintf(buf + k, n - (size_t)k, "n%d", f->lvl_n[l])
                             : snprintf(buf + k, n - (size_t)k, "%c", f->levels[l]);
  bool identity = true;
  for (int l = 0; l < f->order; l++)
    if (f->mode_order[l] != l) identity = false;
  for (int l = 0; l < f->order; l++)
    if (f->lvl_op[l] != TJ_LVL_DIM) identity = false;
  for (int l = 0; !identity && l < f->order && k >= 0 && (size_t)k < n; l++) {
    k += snprintf(buf + k, n - (size_t)k, "%c%d", l ? ',' : ':',
                  f->mode_order[l]);
    if (f->lvl_op[l] != TJ_LVL_DIM && k >= 0 && (size_t)k < n)
      k += snprintf(buf + k, n - (size_t)k, "%c%d",
                    f->lvl_op[l] == TJ_LVL_FLOORDIV ? '/' : '%', f->lvl_k[l]);
  }
  int nd = rt_format_dims(f);
  for (int d = 0; rt_format_sliced(f) && d < nd && k >= 0 && (size_t)k < n; d++) {
    const int64_t *sl = f->slice[d];
    char v[3][24];
    for (int c = 0; c < 3; c++) slice_value(sl[c], v[c]);
    const char *sep = d ? "," : "[";
    k += sl[2] ? snprintf(buf + k, n - (size_t)k, "%s%s:%s:%s", sep, v[0], v[1], v[2])
               : snprintf(buf + k, n - (size_t)k, "%s:", sep);
  }
  if (rt_format_sliced(f) && k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
}

void tj_format_print_mlir(const tj_format *f, char *buf, size_t n) {
  if (!buf || n == 0) return;
  int nd = rt_format_dims(f), k = snprintf(buf, n, "(");
  for (int d = 0; d < nd && k >= 0 && (size_t)k < n; d++) {
    k += snprintf(buf + k, n - (size_t)k, "%sd%d", d ? ", " : "", d);
    const int64_t *sl = f->slice[d];
    char v[3][24];
    for (int c = 0; c < 3; c++) slice_value(sl[c], v[c]);
    if (sl[2] && k >= 0 && (size_t)k < n)
      k += snprintf(buf + k, n - (size_t)k, " : #sparse_tensor<slice(%s, %s, %s)>", v[0],
                    v[1], v[2]);
  }
  if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, ") -> (");
  for (int l = 0; l < f->order && k >= 0 && (size_t)k < n; l++) {
    const RtLevelType *lt = rt_level_type(f->levels[l]);
    const char *op = f->lvl_op[l] == TJ_LVL_FLOORDIV ? " floordiv "
                     : f->lvl_op[l] == TJ_LVL_MOD    ? " mod " : NULL;
    k += snprintf(buf + k, n - (size_t)k, "%sd%d", l ? ", " : "", f->mode_order[l]);
    if (op && k >= 0 && (size_t)k < n)
      k += snprintf(buf + k, n - (size_t)k, "%s%d", op, f->lvl_k[l]);
    if (k >= 0 && (size_t)k < n && f->levels[l] == 'n')
      k += snprintf(buf + k, n - (size_t)k, " : structured[%d, %d]", f->lvl_n[l], f->lvl_k[l]);
    else if (k >= 0 && (size_t)k < n)
      k += snprintf(buf + k, n - (size_t)k, " : %s%s%s%s", lt ? lt->word : "?",
                    lt && lt->prop[0] ? "(" : "", lt ? lt->prop : "",
                    lt && lt->prop[0] ? ")" : "");
  }
  if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, ")");
  /* widths other than the default 32 (0 before a tensor resolves it) */
  if (k >= 0 && (size_t)k < n && f->pos_width && f->pos_width != 32)
    k += snprintf(buf + k, n - (size_t)k, ", posWidth = %d", f->pos_width);
  if (k >= 0 && (size_t)k < n && f->crd_width && f->crd_width != 32)
    snprintf(buf + k, n - (size_t)k, ", crdWidth = %d", f->crd_width);
}

tj_status tj_format_print_mlir_legacy(const tj_format *f, char *buf, size_t n) {
  if (!f || !buf || n == 0)
    return rt_set_error(TJ_ERR_INVALID, "tj_format_print_mlir_legacy: NULL argument");
  buf[0] = 0;
  char taco[256];
  tj_format_print(f, taco, sizeof taco);
  if (f->ndims || rt_format_sliced(f))
    return rt_set_error(TJ_ERR_UNSUPPORTED, "format \"%s\": LLVM 15-16's encoding has no %s; "
                        "tj_format_print_mlir spells it", taco,
                        f->ndims ? "blocked (floordiv / mod) levels" : "dimSlices");
  int k = snprintf(buf, n, "#sparse_tensor.encoding<{ dimLevelType = [ ");
  for (int l = 0; l < f->order; l++) {
    int t = 0;
    while (t < NLEGACY && legacy_types[t].letter != f->levels[l]) t++;
    if (t == NLEGACY || f->levels[l] == 'l') {
      buf[0] = 0;
      return rt_set_error(TJ_ERR_UNSUPPORTED, "format \"%s\": level %d (%s) has no LLVM 15-16 "
                          "spelling; tj_format_print_mlir spells it", taco, l,
                          rt_level_type(f->levels[l]) ? rt_level_type(f->levels[l])->word : "?");
    }
    if (k >= 0 && (size_t)k < n)
      k += snprintf(buf + k, n - (size_t)k, "%s\"%s\"", l ? ", " : "", legacy_types[t].name);
  }
  if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, " ]");
  bool identity = true;
  for (int l = 0; l < f->order; l++) identity &= f->mode_order[l] == l;
  for (int l = 0; !identity && l < f->order && k >= 0 && (size_t)k < n; l++) {
    if (l == 0) {
      k += snprintf(buf + k, n - (size_t)k, ", dimOrdering = affine_map<(");
      for (int d = 0; d < f->order && k >= 0 && (size_t)k < n; d++)
        k += snprintf(buf + k, n - (size_t)k, "%sd%d", d ? ", " : "", d);
      if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, ") -> (");
    }
    if (k >= 0 && (size_t)k < n)
      k += snprintf(buf + k, n - (size_t)k, "%sd%d%s", l ? ", " : "", f->mode_order[l],
                    l + 1 == f->order ? ")>" : "");
  }
  if (k >= 0 && (size_t)k < n && f->pos_width && f->pos_width != 32)
    k += snprintf(buf + k, n - (size_t)k, ", pointerBitWidth = %d", f->pos_width);
  if (k >= 0 && (size_t)k < n && f->crd_width && f->crd_width != 32)
    k += snprintf(buf + k, n - (size_t)k, ", indexBitWidth = %d", f->crd_width);
  if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, " }>");
  if (k < 0 || (size_t)k >= n) {
    buf[0] = 0;
    return rt_set_error(TJ_ERR_INVALID, "tj_format_print_mlir_legacy: %d bytes do not hold "
                        "the spelling of \"%s\"", (int)n, taco);
  }
  return TJ_OK;
}
