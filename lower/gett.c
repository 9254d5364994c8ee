/* Dense tensor contractions as GETT, TTGT or LoG: recognizing them,
 * choosing a method and its blocking with a performance model, and the
 * kernel that hands them to the runtime (tj_rt_gett, runtime/gett.c).
 *
 * A pure contraction is C(I_m, I_n) = (or +=) A(I_m, I_k) * B(I_n, I_k):
 * dense operands, f64 or f32, every index in exactly two of the three
 * accesses, plus.times. Anything else (a batch index in all three, a sum
 * of products, functions, literals) stays on the loop-IR path.
 *
 * A is the operand that holds C's unit-stride index (the micro-kernel's
 * vector lanes run along it, and C's tiles are then updated in place).
 * Each index set is ordered by stride, smallest first (I_m by C's, or A's
 * fastest I_m index first and then C's order when the model finds that
 * cheaper: packing then reads A along its unit stride and C's tiles go
 * through the tile buffer): the first I_m index
 * is split for the micro-kernel, the first I_n index gives the tile's
 * columns, and I_k follows A's and B's unit strides so packing reads
 * contiguous memory where it can.
 *
 * The model (after the GETT paper's, simplified) estimates each method's
 * time as compute at the micro-kernel's efficiency for the tile fill and
 * the k depth, plus memory traffic at a streaming bandwidth, gathers
 * (non-unit-stride reads) costing four times as much:
 *   GETT  packs A once per nc block of N, B once, updates C once per kc
 *         block (through a tile buffer when C's tile is not contiguous);
 *   TTGT  adds two full transpositions and a folded copy of C;
 *   LoG   runs one GEMM per slice, each with its packing, efficient only
 *         when the slices' first indices are long.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/abi.h"
#include "lowerer.h"

_Static_assert(TJ_GP_WORDS == LIR_GETT_WORDS, "loop_ir.h's LIR_GETT_WORDS is TJ_GP_WORDS");

static const char *const METHOD_NAMES[] = {"gett", "ttgt", "log"};

const char *lower_gett_method_name(int m) {
  return m >= 0 && m < 3 ? METHOD_NAMES[m] : "loops";
}

int lower_gett_method_of(const char *name) {
  for (int m = 0; m < 3; m++)
    if (strcmp(name, METHOD_NAMES[m]) == 0) return m;
  if (strcmp(name, "model") == 0) return GETT_MODEL;
  return strcmp(name, "loops") == 0 ? GETT_LOOPS : -2;
}

/* Which tensor an index is in: bit 0 the output, 1 the first factor, 2
 * the second; and its dim there. */
typedef struct Use {
  unsigned in;
  int dim[3];
} Use;

static bool dense_format(const TensorVar *t) { return !lv_format_has_sparse(&t->decl.format); }

/* Records e's accesses' indices in u (slot s); false on a repeated index. */
static bool note_access(const Expr *e, int s, Use *u) {
  for (int q = 0; q < e->u.access.n; q++) {
    Use *x = &u[e->u.access.idx[q]->id];
    if (x->in & (1u << s)) return false;
    x->in |= 1u << s;
    x->dim[s] = q;
  }
  return true;
}

bool lower_gett_form(const Assignment *as) {
  const Expr *r = as->rhs;
  if (as->semiring || as->root_op != OP_ADD || nt_expr_op(r) != OP_MUL) return false;
  const Expr *f[2] = {r->u.op.a, r->u.op.b};
  const TensorVar *t[3] = {as->lhs->u.access.t, NULL, NULL};
  for (int s = 0; s < 2; s++) {
    if (f[s]->kind != EX_ACCESS) return false;
    t[s + 1] = f[s]->u.access.t;
    if (lv_format_sliced(&t[s + 1]->decl.format)) return false;   /* views: loops */
  }
  for (int s = 0; s < 3; s++) {
    tj_dtype dt = t[s]->decl.dtype;
    if (!dense_format(t[s]) || (dt != TJ_F64 && dt != TJ_F32) || t[s]->decl.order < 1)
      return false;
  }
  Use u[NT_MAX_INDICES] = {0};
  if (!note_access(as->lhs, 0, u) || !note_access(f[0], 1, u) || !note_access(f[1], 2, u))
    return false;
  int nm = 0, nn = 0, nk = 0;
  for (int v = 0; v < as->nindices; v++) {
    unsigned in = u[v].in;
    if (in == 3) nm++;
    else if (in == 5) nn++;
    else if (in == 6) nk++;
    else return false;   /* in one tensor only, or in all three (batch) */
  }
  return nm >= 1 && nn >= 1 && nk >= 1 && nm <= TJ_GETT_MAX_IDX && nn <= TJ_GETT_MAX_IDX &&
         nk <= TJ_GETT_MAX_IDX;
}

/* Rank of dim `dim` of t in its storage: 0 the innermost (unit-stride)
 * level, larger further out. */
static int stride_rank(const TensorVar *t, int dim) {
  const tj_format *f = &t->decl.format;
  for (int l = 0; l < f->order; l++)
    if (f->mode_order[l] == dim) return f->order - 1 - l;
  return 0;
}

/* Element strides of t's dims at the checked extents. */
static void strides_of(const TensorVar *t, const Assignment *as, const Expr *acc,
                       int64_t *st) {
  const tj_format *f = &t->decl.format;
  int64_t s = 1;
  for (int l = f->order - 1; l >= 0; l--) {
    int dim = f->mode_order[l];
    st[dim] = s;
    s *= acc->u.access.idx[dim]->extent > 0 ? acc->u.access.idx[dim]->extent : 1;
  }
  (void)as;
}

/* Sorts the n index ids in ids by key (ascending, stable). */
static void sort_by(int *ids, int n, const int *key) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && key[ids[j - 1]] > key[ids[j]]; j--) {
      int t = ids[j];
      ids[j] = ids[j - 1];
      ids[j - 1] = t;
    }
}

/* The share of mr-tiles over a set of `total` flattened entries whose
 * first index has `first` entries that are whole and inside one run of
 * that index: the others go through the tile buffer and a scatter. */
static double whole_tiles(double total, double first, int mr) {
  int64_t n = (int64_t)total, f = (int64_t)first, whole = 0, tiles = 0;
  for (int64_t s = 0; s < n; s += mr, tiles++)
    whole += s + mr <= n && s / f == (s + mr - 1) / f;
  return tiles ? (double)whole / (double)tiles : 1;
}

/* The micro-kernel for a vector width and dtype: mr x nr with vl lanes.
 * AVX-512 has two shapes: 3 x 8 (24 accumulators + 3 A + 1 B, 28 of 32
 * registers, one broadcast per three FMAs: 3-5% faster than 2 x 14 in
 * dgemm and sgemm on this Zen 5) and 2 x 14 (28 + 2 + 1, 31 of 32); the
 * one whose tiles are more often whole runs of C's first I_m and I_n
 * indices wins, 3 x 8 on a tie (2 x 14 is 5-10% faster where it tiles
 * 28-extent sets exactly and 3 x 8 does not, TCCG abcd-aebf-dfce). Below
 * AVX-512: 2 x 6 + 2 + 1, 15 of 16. M, M0, N, N0: the sets' sizes and
 * their first indices' extents (0 when unknown). */
static void micro_shape(int vector_bits, bool f32, double M, double M0, double N, double N0,
                        int *mr, int *nr, int *vl) {
  int bits = vector_bits >= 512 ? 512 : vector_bits >= 256 ? 256 : 128;
  *vl = bits / (f32 ? 32 : 64);
  *mr = 2 * *vl;
  *nr = 6;
  if (bits != 512) return;
  *mr = 3 * *vl, *nr = 8;
  if (M0 < 1 || N0 < 1) return;
  double three = whole_tiles(M, M0, 3 * *vl) * whole_tiles(N, N0, 8);
  double two = whole_tiles(M, M0, 2 * *vl) * whole_tiles(N, N0, 14);
  if (two > three + 0.05) *mr = 2 * *vl, *nr = 14;
}

/* Blocking for the caches: the B micro-panel (kc x nr) in half of L1, the
 * A block (mc x kc) in half of L2, the B block (kc x nc) in L3; this
 * host's L1 48 KB, L2 1 MB (TJ_GETT_BLOCK=mc,kc,nc overrides, for tuning). */
static void blocking(const GettPlan *g, int esz, int *mc, int *kc, int *nc) {
  *kc = 2048 / esz;
  if (*kc * g->nr * esz > 24 * 1024) *kc = 24 * 1024 / (g->nr * esz);
  *mc = (512 * 1024 / (*kc * esz)) / g->mr * g->mr;
  if (*mc < g->mr) *mc = g->mr;
  *nc = (4096 / g->nr) * g->nr;
  const char *env = getenv("TJ_GETT_BLOCK");
  int m, k, n;
  if (env && sscanf(env, "%d,%d,%d", &m, &k, &n) == 3 && m > 0 && k > 0 && n > 0) {
    *mc = (m + g->mr - 1) / g->mr * g->mr;
    *kc = k;
    *nc = (n + g->nr - 1) / g->nr * g->nr;
  }
}

/* ---- the model ---- */

enum { GATHER = 4 };   /* a non-unit-stride read costs this many streaming ones */

typedef struct Sizes {
  double M, N, K, M0, N0, K0;   /* sets, and their first indices */
  bool a_unit, b_unit, c_tile;  /* packing reads unit-stride; C tiles contiguous */
} Sizes;

/* Seconds for a GEMM of m x n x k through the core, with the tile fill
 * and the k depth's efficiency; peak flops and bandwidth from the width. */
static double core_time(const GettPlan *g, double m, double n, double k, bool a_unit,
                        bool b_unit, bool c_tile, double peak, double bw, int esz) {
  double fill_m = m / (double)((int64_t)((m + g->mr - 1) / g->mr) * g->mr);
  double fill_n = n / (double)((int64_t)((n + g->nr - 1) / g->nr) * g->nr);
  double depth = k / (k + 16.0);
  double flops = 2 * m * n * k / (peak * 0.9 * fill_m * fill_n * depth);
  double nblocks = n / g->nc > 1 ? n / g->nc : 1, kblocks = k / g->kc > 1 ? k / g->kc : 1;
  double bytes = esz * (m * k * nblocks * (a_unit ? 1 : GATHER) + n * k * (b_unit ? 1 : GATHER) +
                        2 * m * n * kblocks * (c_tile ? 1 : GATHER));
  return flops + bytes / bw;
}

static void model(GettPlan *g, const Sizes *z, int vector_bits, int esz) {
  double peak = vector_bits >= 512 ? 110e9 : vector_bits >= 256 ? 55e9 : 25e9;
  if (esz == 4) peak *= 2;
  double bw = 20e9;
  g->cost[TJ_GETT_GETT] = core_time(g, z->M, z->N, z->K, z->a_unit, z->b_unit, z->c_tile, peak,
                                    bw, esz);
  double transposes = esz * (2 * (z->M * z->K + z->N * z->K) * (GATHER + 1) / 2.0 +
                             3 * z->M * z->N * (z->c_tile ? 1 : GATHER));
  g->cost[TJ_GETT_TTGT] =
      core_time(g, z->M, z->N, z->K, true, true, true, peak, bw, esz) + transposes / bw;
  double slices = (z->M / z->M0) * (z->N / z->N0) * (z->K / z->K0);
  g->cost[TJ_GETT_LOG] =
      slices * (core_time(g, z->M0, z->N0, z->K0, z->a_unit, z->b_unit, z->c_tile, peak, bw,
                          esz) + 2e-6);
}

/* ---- the plan ---- */

/* The entries of an index set: the product of its n indices' extents. */
static double set_size(const Assignment *as, const int *ids, int n) {
  double size = 1;
  for (int q = 0; q < n; q++) size *= (double)as->indices[ids[q]]->extent;
  return size;
}

/* The model's view of g's sets at the checked extents: their sizes, their
 * first indices', and whether packing and C's tiles read unit strides. */
static Sizes sizes_of(const GettPlan *g, const Assignment *as, const Use *u, int sa, int sb,
                      const int64_t *sc, const int64_t *sta, const int64_t *stb) {
  Sizes z = {1, 1, 1, 0, 0, 0, false, false, false};
  z.M = set_size(as, g->m, g->nm), z.N = set_size(as, g->n, g->nn);
  z.K = set_size(as, g->k, g->nk);
  z.M0 = (double)as->indices[g->m[0]]->extent;
  z.N0 = (double)as->indices[g->n[0]]->extent;
  z.K0 = (double)as->indices[g->k[0]]->extent;
  if (z.M < 1 || z.N < 1 || z.K < 1 || z.M0 < 1 || z.N0 < 1 || z.K0 < 1)
    return (Sizes){1, 1, 1, 1, 1, 1, true, true, true};
  z.a_unit = sta[u[g->m[0]].dim[sa]] == 1 || sta[u[g->k[0]].dim[sa]] == 1;
  z.b_unit = stb[u[g->n[0]].dim[sb]] == 1 || stb[u[g->k[0]].dim[sb]] == 1;
  /* C's tiles contiguous, or (lanes along another index, C's unit-stride
   * index next) the lines of C one slab of that index touches fit in L2,
   * so each is filled before it leaves */
  double n_block = z.N < g->nc ? z.N : g->nc;
  z.c_tile = (sc[u[g->m[0]].dim[0]] == 1 && z.M0 >= g->mr) ||
             (g->nm > 1 && sc[u[g->m[1]].dim[0]] == 1 && z.M0 * n_block * 64 <= 512 * 1024);
  return z;
}

/* The model's fastest method (the first of equals). */
static int cheapest(const GettPlan *g) {
  int best = TJ_GETT_GETT;
  for (int m = 1; m < 3; m++)
    if (g->cost[m] < g->cost[best]) best = m;
  return best;
}


bool lower_gett_plan(const Assignment *as, int vector_bits, int forced, GettPlan *g) {
  memset(g, 0, sizeof *g);
  g->method = GETT_LOOPS;
  if (forced == GETT_LOOPS || !lower_gett_form(as)) return false;
  const Expr *acc[3] = {as->lhs, as->rhs->u.op.a, as->rhs->u.op.b};
  Use u[NT_MAX_INDICES] = {0};
  for (int s = 0; s < 3; s++) note_access(acc[s], s, u);
  /* A holds C's unit-stride index */
  const TensorVar *c = acc[0]->u.access.t;
  int inner = c->decl.format.mode_order[c->decl.format.order - 1];
  int unit = acc[0]->u.access.idx[inner]->id;
  int sa = u[unit].in == 3 ? 1 : 2, sb = 3 - sa;
  g->a = acc[sa]->u.access.t->id;
  g->b = acc[sb]->u.access.t->id;
  int key_c[NT_MAX_INDICES], key_k[NT_MAX_INDICES];
  for (int v = 0; v < as->nindices; v++) {
    key_c[v] = u[v].in & 1 ? stride_rank(c, u[v].dim[0]) : 0;
    int ra = stride_rank(acc[sa]->u.access.t, u[v].dim[sa]);
    int rb = stride_rank(acc[sb]->u.access.t, u[v].dim[sb]);
    key_k[v] = ra < rb ? ra : rb;
  }
  for (int v = 0; v < as->nindices; v++) {
    unsigned in = u[v].in;
    if (in == (1u | 1u << sa)) g->m[g->nm++] = v;
    else if (in == (1u | 1u << sb)) g->n[g->nn++] = v;
    else g->k[g->nk++] = v;
  }
  sort_by(g->m, g->nm, key_c);
  sort_by(g->n, g->nn, key_c);
  sort_by(g->k, g->nk, key_k);
  bool f32 = as->lhs->dtype == TJ_F32;
  int esz = f32 ? 4 : 8;
  micro_shape(vector_bits, f32, set_size(as, g->m, g->nm), (double)as->indices[g->m[0]]->extent,
              set_size(as, g->n, g->nn), (double)as->indices[g->n[0]]->extent, &g->mr, &g->nr,
              &g->vl);
  blocking(g, esz, &g->mc, &g->kc, &g->nc);
  /* the model, at the extents the checker saw */
  int64_t sc[NT_MAX_ORDER], sta[NT_MAX_ORDER], stb[NT_MAX_ORDER];
  strides_of(c, as, acc[0], sc);
  strides_of(acc[sa]->u.access.t, as, acc[sa], sta);
  strides_of(acc[sb]->u.access.t, as, acc[sb], stb);
  Sizes z = sizes_of(g, as, u, sa, sb, sc, sta, stb);
  model(g, &z, vector_bits, esz);
  /* The micro-kernel's lanes run along C's unit-stride index; when that
   * index is far apart in A, lanes along A's fastest I_m index, followed
   * by C's order (C's unit-stride index second, so an mc block writes whole
   * lines of C), may cost less: the model picks, but only where the lines
   * of C one slab touches fit in L2 (where they do not, the model's gather
   * cost is too kind to the scattered tiles: 5x slower on f32
   * abcdef-efga-gdbc). */
  GettPlan alt = *g;
  int first = 0;
  for (int q = 1; q < g->nm; q++)
    if (stride_rank(acc[sa]->u.access.t, u[g->m[q]].dim[sa]) <
        stride_rank(acc[sa]->u.access.t, u[g->m[first]].dim[sa]))
      first = q;
  if (first > 0) {
    alt.m[0] = g->m[first];
    for (int q = 0, r = 1; q < g->nm; q++)
      if (q != first) alt.m[r++] = g->m[q];
    Sizes za = sizes_of(&alt, as, u, sa, sb, sc, sta, stb);
    model(&alt, &za, vector_bits, esz);
    if (za.c_tile && alt.cost[cheapest(&alt)] < g->cost[cheapest(g)]) *g = alt, z = za;
  }
  g->method = cheapest(g);
  g->forced = forced >= 0;
  if (forced >= 0) g->method = forced;
  double flops = 2 * z.M * z.N * z.K;
  for (int m = 0; m < 3 && forced == -2 && flops >= GETT_TUNE_MIN_FLOPS; m++)
    if (g->cost[m] <= 2 * g->cost[g->method]) g->tune |= 1u << m;
  if (__builtin_popcount(g->tune) < 2) g->tune = 0;
  /* the words tj_rt_gett reads */
  int32_t *w = g->words;
  w[TJ_GP_METHOD] = g->method;
  w[TJ_GP_DTYPE] = f32 ? 1 : 0;
  w[TJ_GP_BETA] = as->accumulate;
  w[TJ_GP_A] = g->a;
  w[TJ_GP_B] = g->b;
  w[TJ_GP_MR] = g->mr, w[TJ_GP_NR] = g->nr, w[TJ_GP_VL] = g->vl;
  w[TJ_GP_TUNE] = (int32_t)g->tune;
  w[TJ_GP_MC] = g->mc, w[TJ_GP_KC] = g->kc, w[TJ_GP_NC] = g->nc;
  w[TJ_GP_NM] = g->nm, w[TJ_GP_NN] = g->nn, w[TJ_GP_NK] = g->nk;
  for (int q = 0; q < g->nm; q++)
    w[TJ_GP_M_C + q] = u[g->m[q]].dim[0], w[TJ_GP_M_A + q] = u[g->m[q]].dim[sa];
  for (int q = 0; q < g->nn; q++)
    w[TJ_GP_N_C + q] = u[g->n[q]].dim[0], w[TJ_GP_N_B + q] = u[g->n[q]].dim[sb];
  for (int q = 0; q < g->nk; q++)
    w[TJ_GP_K_A + q] = u[g->k[q]].dim[sa], w[TJ_GP_K_B + q] = u[g->k[q]].dim[sb];
  return true;
}

LirStmt *lower_gett_call(Arena *a, const GettPlan *g, Diag *d) {
  int32_t *words = arena_alloc(a, sizeof(int32_t) * LIR_GETT_WORDS);
  LirStmt *s = lir_call(a, LH_GETT);
  if (!words || !s) return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering"), NULL;
  memcpy(words, g->words, sizeof(int32_t) * LIR_GETT_WORDS);
  s->u.call.plan = words;
  char note[96];
  snprintf(note, sizeof note, "dense contraction by %s (-print-gett)",
           lower_gett_method_name(g->method));
  LirStmt *c = lir_comment(a, arena_strdup(a, note));
  lir_append(&c, s);
  return c;
}

LirKernel *lower_gett_kernel(Arena *a, const LowerInput *in, const GettPlan *g,
                             const char *name, Diag *d) {
  /* the dense output's assembly: sized, its length set, not zeroed */
  LirKernel *k = lower_kernel(a, in, PHASE_ASSEMBLE, name, d);
  LirStmt *call = k ? lower_gett_call(a, g, d) : NULL;
  if (!call) return NULL;
  lir_append(&k->body, call);
  return k;
}

static void print_set(FILE *f, const Assignment *as, const char *name, const int *ids, int n) {
  fprintf(f, "  %s = {", name);
  for (int q = 0; q < n; q++) fprintf(f, "%s%s", q ? "," : "", as->indices[ids[q]]->name);
  fputs("}", f);
}

void lower_gett_print(FILE *f, const Assignment *as, const GettPlan *g) {
  if (g->method == GETT_LOOPS) {
    fprintf(f, "not a pure dense contraction, or the schedule asks for loops: loop-IR kernel\n");
    return;
  }
  fprintf(f, "dense contraction %s(I_m, I_n) %s= %s(I_m, I_k) * %s(I_n, I_k)\n",
          as->tensors[0]->name, as->accumulate ? "+" : "", as->tensors[g->a]->name,
          as->tensors[g->b]->name);
  print_set(f, as, "I_m", g->m, g->nm);
  print_set(f, as, "I_n", g->n, g->nn);
  print_set(f, as, "I_k", g->k, g->nk);
  fprintf(f, "   (each fastest first)\n");
  fprintf(f, "  micro-kernel %dx%d (%d lanes), blocks mc=%d kc=%d nc=%d, beta=%d\n", g->mr,
          g->nr, g->vl, g->mc, g->kc, g->nc, as->accumulate);
  fprintf(f, "  model (us): gett %.1f  ttgt %.1f  log %.1f\n", g->cost[0] * 1e6,
          g->cost[1] * 1e6, g->cost[2] * 1e6);
  fprintf(f, "  method: %s (%s)\n", lower_gett_method_name(g->method),
          g->forced ? "forced by method()" : "the model's choice");
  if (g->tune) {
    fprintf(f, "  timed at the first run (within 2x of the model's best):");
    for (int m = 0; m < 3; m++)
      if (g->tune >> m & 1) fprintf(f, " %s", lower_gett_method_name(m));
    fprintf(f, "; the fastest runs from then on\n");
  }
}
