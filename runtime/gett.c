/* Dense tensor contractions C(I_m, I_n) (+)= A(I_m, I_k) * B(I_n, I_k):
 * the packing and macro-kernel of GETT (Springer & Bientinesi), and TTGT
 * and LoG built on the same core.
 *
 * Every index set is linearized (its first index fastest) and described
 * by offset arrays: am[m] is the offset in A of linear m, ak[k] of linear
 * k, and so on. A tensor transposition then is just a gather through
 * these arrays, fused with packing:
 *
 *   for jc in N by nc                     B block: kc x nc, in L3
 *     for pc in K by kc                     packed into nr-wide panels
 *       pack B(jc.., pc..)                  (threads share the panels)
 *       for ic in M by mc      (threads)  A block: mc x kc, in L2
 *         pack A(ic.., pc..)                into mr-tall panels
 *         for jr in nc by nr, ir in mc by mr
 *           micro-kernel: mr x nr tile of C, in place when the tile's rows
 *           are unit-stride and its columns evenly spaced, else through a
 *           tile buffer scattered into C
 *
 * The micro-kernel is the JIT's (emitted for the host's vector registers)
 * or, when none is given, the portable one here (the loop-IR interpreter
 * and the C backend use it). TTGT gathers A and B into column-major
 * matrices, multiplies them with the same core (or a GEMM the caller
 * registered, e.g. OpenBLAS through tj_set_ttgt_gemm) and folds the result
 * into C. LoG keeps the first index of each set and loops over the others,
 * one GEMM per 2-D slice.
 */
#include <omp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../include/tensorjit.h"
#include "abi.h"
#include "tensor.h"

/* One contraction over linearized index sets. */
typedef struct Gp {
  int64_t M, N, K;
  const int64_t *cm, *cn, *am, *ak, *bn, *bk;   /* offsets, in elements */
  char *C;
  const char *A, *B;
  int beta, f32, esz;
  int mr, nr, mc, kc, nc;
  tj_gett_ukernel uk;
} Gp;

static tj_gemm_fn registered_gemm;

void tj_set_ttgt_gemm(tj_gemm_fn fn) { registered_gemm = fn; }

/* ---- offsets ---- */

/* Element strides of a dense storage's dims; false unless every level is
 * dense and stores one dim. */
static bool dense_strides(const tj_storage *s, int64_t *stride) {
  int64_t st = 1;
  for (int l = s->order - 1; l >= 0; l--) {
    if (s->levels[l].kind != TJ_LVL_DENSE || s->map[l].op != TJ_LX_DIM) return false;
    stride[s->map[l].dim] = st;
    st *= s->dims[s->map[l].dim];
  }
  return true;
}

/* out[l] for linear l over n indices (first fastest) of extents ext and
 * strides st; returns the count. */
static int64_t fill_offsets(int n, const int64_t *ext, const int64_t *st, int64_t *out) {
  int64_t len = 1;
  out[0] = 0;
  for (int q = 0; q < n; q++) {
    for (int64_t c = 1; c < ext[q]; c++)
      for (int64_t l = 0; l < len; l++) out[c * len + l] = out[l] + c * st[q];
    len *= ext[q];
  }
  return len;
}

/* ---- the portable micro-kernel ---- */

#define DEF_UKERNEL(T, NAME)                                                           \
  static void NAME(const Gp *g, int64_t kc, const void *a, const void *b, void *c,    \
                   int64_t cs, int beta) {                                            \
    const T *pa = a, *pb = b;                                                         \
    T *pc = c;                                                                        \
    for (int j = 0; j < g->nr; j++)                                                   \
      for (int i = 0; i < g->mr; i++) {                                               \
        T s = 0;                                                                      \
        for (int64_t p = 0; p < kc; p++) s += pa[p * g->mr + i] * pb[p * g->nr + j]; \
        pc[i + j * cs] = beta ? pc[i + j * cs] + s : s;                               \
      }                                                                               \
  }
DEF_UKERNEL(double, ukernel_f64)
DEF_UKERNEL(float, ukernel_f32)

static void ukernel(const Gp *g, int64_t kc, const void *a, const void *b, void *c, int64_t cs,
                    int beta) {
  if (g->uk) g->uk(kc, a, b, c, cs, beta);
  else if (g->f32) ukernel_f32(g, kc, a, b, c, cs, beta);
  else ukernel_f64(g, kc, a, b, c, cs, beta);
}

/* ---- packing: a gather through the offset arrays ---- */

/* The offsets o[0..n) advance by one constant step (*step) when true. */
static bool even_steps(const int64_t *o, int n, int64_t *step) {
  *step = n > 1 ? o[1] - o[0] : 1;
  for (int i = 2; i < n; i++)
    if (o[i] - o[i - 1] != *step) return false;
  return true;
}


/* Packs rows [r0, r0+rows) x k [p0, p0+kb) of X (offsets xr, xk) into
 * panels of w rows (zero-padded): dst[panel][p][i]. Reads along whichever
 * of the two is unit-stride. */
#define DEF_PACK(T, NAME)                                                              \
  static void NAME(const char *X, const int64_t *xr, const int64_t *xk, int64_t r0,    \
                   int64_t rows, int64_t p0, int64_t kb, int w, void *dstv) {          \
    const T *x = (const T *)X;                                                        \
    T *dst = dstv;                                                                    \
    int64_t k_step;                                                                   \
    bool k_unit = even_steps(xk + p0, (int)(kb < 1 << 30 ? kb : 1 << 30), &k_step);   \
    for (int64_t q = 0; q < rows; q += w, dst += w * kb) {                            \
      int64_t h = rows - q < w ? rows - q : w;                                        \
      const int64_t *ro = xr + r0 + q, *ko = xk + p0;                                 \
      int64_t r_step;                                                                 \
      bool rows_unit = h == w && even_steps(ro, (int)h, &r_step) && r_step == 1;      \
      if (rows_unit && k_unit) {      /* a contiguous w x kb block, by columns */    \
        const T *s = x + ro[0] + ko[0];                                               \
        for (int64_t p = 0; p < kb; p++)                                              \
          for (int i = 0; i < w; i++) dst[p * w + i] = s[p * k_step + i];              \
        continue;                                                                     \
      }                                                                               \
      if (rows_unit) {                                                                \
        for (int64_t p = 0; p < kb; p++) {                                            \
          const T *s = x + ro[0] + ko[p];                                             \
          for (int i = 0; i < w; i++) dst[p * w + i] = s[i];                          \
        }                                                                             \
        continue;                                                                     \
      }                                                                               \
      for (int64_t i = 0; i < h; i++) {                                               \
        const T *s = x + ro[i];                                                       \
        if (k_unit && k_step == 1) /* rows along k: contiguous reads */               \
          for (int64_t p = 0; p < kb; p++) dst[p * w + i] = s[ko[0] + p];             \
        else                                                                          \
          for (int64_t p = 0; p < kb; p++) dst[p * w + i] = s[ko[p]];                 \
      }                                                                               \
      for (int64_t i = h; i < w; i++)                                                 \
        for (int64_t p = 0; p < kb; p++) dst[p * w + i] = 0;                          \
    }                                                                                 \
  }
DEF_PACK(double, pack_f64)
DEF_PACK(float, pack_f32)

static void pack(const Gp *g, const char *X, const int64_t *xr, const int64_t *xk, int64_t r0,
                 int64_t rows, int64_t p0, int64_t kb, int w, void *dst) {
  if (g->f32) pack_f32(X, xr, xk, r0, rows, p0, kb, w, dst);
  else pack_f64(X, xr, xk, r0, rows, p0, kb, w, dst);
}

/* C(m0.., n0..) (+)= the tile t (mr x nr, column-major), h x w of it. */
#define DEF_SCATTER(T, NAME)                                                           \
  static void NAME(const Gp *g, const void *tv, int64_t m0, int64_t n0, int h, int w,  \
                   int beta) {                                                        \
    const T *t = tv;                                                                  \
    T *c = (T *)g->C;                                                                 \
    for (int j = 0; j < w; j++)                                                       \
      for (int i = 0; i < h; i++) {                                                   \
        T *d = c + g->cm[m0 + i] + g->cn[n0 + j];                                     \
        *d = beta ? *d + t[i + j * g->mr] : t[i + j * g->mr];                         \
      }                                                                               \
  }
DEF_SCATTER(double, scatter_f64)
DEF_SCATTER(float, scatter_f32)

/* One mr x nr tile at (m0, n0) from packed panels ap, bp. */
static void tile(const Gp *g, int64_t m0, int64_t n0, int h, int w, int64_t kb,
                 const void *ap, const void *bp, int beta, void *buf) {
  int64_t cs;
  if (h == g->mr && w == g->nr && g->cm[m0 + h - 1] - g->cm[m0] == h - 1 &&
      even_steps(g->cm + m0, h, &cs) && even_steps(g->cn + n0, w, &cs)) {
    ukernel(g, kb, ap, bp, g->C + (g->cm[m0] + g->cn[n0]) * g->esz, cs, beta);
    return;
  }
  ukernel(g, kb, ap, bp, buf, g->mr, 0);
  if (g->f32) scatter_f32(g, buf, m0, n0, h, w, beta);
  else scatter_f64(g, buf, m0, n0, h, w, beta);
}

/* The macro-kernel: the packed A block (mb x kb) times the packed B block
 * (kb x nb) into C(ic.., jc..). */
static void macro(const Gp *g, int64_t ic, int64_t mb, int64_t jc, int64_t nb, int64_t kb,
                  const char *pa, const char *pb, int beta, void *buf) {
  for (int64_t jr = 0; jr < nb; jr += g->nr) {
    int w = nb - jr < g->nr ? (int)(nb - jr) : g->nr;
    const char *bp = pb + jr * kb * g->esz;
    for (int64_t ir = 0; ir < mb; ir += g->mr) {
      int h = mb - ir < g->mr ? (int)(mb - ir) : g->mr;
      tile(g, ic + ir, jc + jr, h, w, kb, pa + ir * kb * g->esz, bp, beta, buf);
    }
  }
}

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* Zeroes C (beta 0) where K is empty. */
static void zero_c(const Gp *g) {
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t m = 0; m < g->M; m++)
      memset(g->C + (g->cm[m] + g->cn[n]) * g->esz, 0, (size_t)g->esz);
}

/* The packing buffers of this thread's contractions, kept between calls
 * (fresh pages would be faulted in and zeroed on every call: a few ms for
 * the 7 MB B block); grown as needed, freed when the thread ends. */
typedef struct Workspace {
  char *mem;
  size_t size;
} Workspace;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static bool ws_key_ok;

static void ws_free(void *p) {
  Workspace *w = p;
  free(w->mem);
  free(w);
}

static void ws_init(void) { ws_key_ok = pthread_key_create(&ws_key, ws_free) == 0; }

static char *workspace(size_t n) {
  pthread_once(&ws_once, ws_init);
  if (!ws_key_ok) return NULL;
  Workspace *w = pthread_getspecific(ws_key);
  if (!w) {
    if (!(w = calloc(1, sizeof *w))) return NULL;
    if (pthread_setspecific(ws_key, w) != 0) {
      free(w);
      return NULL;
    }
  }
  if (n <= w->size) return w->mem;
  free(w->mem);
  w->size = 0;
  w->mem = aligned_alloc(64, n);
  if (w->mem) w->size = n;
  return w->mem;
}

/* gett_core on nt threads that split N, not M: each takes whole nc-wide
 * column blocks (nc / nt wide, so the threads' B panels take the room of
 * one), packs its own B and A blocks and runs all of M, with no barrier
 * until the end. For problems with fewer A blocks than threads (M = 48
 * under mc = 240): split by M, the threads met at two barriers per
 * (jc, pc) block, each a sleep and a wake-up under KMP_BLOCKTIME=0, and
 * C(d,c,b,a) = A(a,e) * B(d,c,b,e) at extents 48 ran in 8.8 ms on two
 * threads against 7.4 on one. */
static int32_t gett_core_n(const Gp *g, int nt, int64_t kc) {
  int64_t nc = round_up((g->nc + nt - 1) / nt, g->nr);
  if (nc > round_up((g->N + nt - 1) / nt, g->nr)) nc = round_up((g->N + nt - 1) / nt, g->nr);
  int64_t mc = g->M < g->mc ? round_up(g->M, g->mr) : g->mc;
  size_t bsz = (size_t)round_up(kc * nc * g->esz, 64), asz = (size_t)round_up(kc * mc * g->esz, 64);
  size_t tsz = (size_t)round_up(g->mr * g->nr * g->esz, 64), each = bsz + asz + tsz;
  char *mem = workspace(each * (size_t)nt);
  if (!mem) return TJ_KERNEL_NOMEM;
  int64_t nblocks = (g->N + nc - 1) / nc;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t q = 0; q < nblocks; q++) {
    char *pb = mem + (size_t)omp_get_thread_num() * each, *pa = pb + bsz, *buf = pa + asz;
    int64_t jc = q * nc, nb = g->N - jc < nc ? g->N - jc : nc;
    for (int64_t pc = 0; pc < g->K; pc += kc) {
      int64_t kb = g->K - pc < kc ? g->K - pc : kc;
      int beta = pc == 0 ? g->beta : 1;
      for (int64_t p = 0; p * g->nr < nb; p++) {
        int64_t w = nb - p * g->nr < g->nr ? nb - p * g->nr : g->nr;
        pack(g, g->B, g->bn, g->bk, jc + p * g->nr, w, pc, kb, g->nr, pb + p * g->nr * kb * g->esz);
      }
      for (int64_t ic = 0; ic < g->M; ic += mc) {
        int64_t mb = g->M - ic < mc ? g->M - ic : mc;
        pack(g, g->A, g->am, g->ak, ic, mb, pc, kb, g->mr, pa);
        macro(g, ic, mb, jc, nb, kb, pa, pb, beta, buf);
      }
    }
  }
  return TJ_KERNEL_OK;
}

/* The GETT core over one problem. */
static int32_t gett_core(const Gp *g0) {
  if (g0->M == 0 || g0->N == 0) return TJ_KERNEL_OK;
  if (g0->K == 0) {
    if (!g0->beta) zero_c(g0);
    return TJ_KERNEL_OK;
  }
  Gp g = *g0;
  int nt = tj_rt_threads();
  if (nt < 1) nt = 1;
  int64_t kc = g.K < g.kc ? g.K : g.kc;
  if (nt > 1 && (g.M + g.mc - 1) / g.mc < nt && g.N >= 2 * nt * g.nr) return gett_core_n(&g, nt, kc);
  int64_t nc = round_up(g.N < g.nc ? g.N : g.nc, g.nr);
  /* The same work for every thread: a number of A blocks that is a
   * multiple of the thread count, and blocks whose mr-tiles differ by at
   * most one (block b starts at tile b * tiles / mblocks). A short last
   * block had left one thread waiting: M = 2048, mc = 288, 7.1 blocks, 4
   * against 3.1 (1.77x on 2 threads); mr = 24 cannot divide 2048 evenly
   * into blocks at all (1.70x). */
  int64_t tiles = (g.M + g.mr - 1) / g.mr;
  int64_t mblocks = (g.M + g.mc - 1) / g.mc;
  if (nt > 1) mblocks = (mblocks + nt - 1) / nt * nt;
  if (mblocks > tiles) mblocks = tiles;
  int64_t mc = (tiles + mblocks - 1) / mblocks * g.mr;   /* the largest block */
  if (mblocks < 2) nt = 1;
  size_t bsz = (size_t)(kc * nc * g.esz), asz = (size_t)(round_up(kc * mc * g.esz, 64));
  size_t tsz = (size_t)round_up(g.mr * g.nr * g.esz, 64);
  bsz = (size_t)round_up((int64_t)bsz, 64);
  char *mem = workspace((size_t)round_up((int64_t)(bsz + nt * (asz + tsz)), 64));
  if (!mem) return TJ_KERNEL_NOMEM;
  char *pb = mem;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int tid = omp_get_thread_num();
    char *pa = mem + bsz + (size_t)tid * (asz + tsz), *buf = pa + asz;
    for (int64_t jc = 0; jc < g.N; jc += nc) {
      int64_t nb = g.N - jc < nc ? g.N - jc : nc;
      for (int64_t pc = 0; pc < g.K; pc += kc) {
        int64_t kb = g.K - pc < kc ? g.K - pc : kc;
        int beta = pc == 0 ? g.beta : 1;
        int64_t npanels = (nb + g.nr - 1) / g.nr;
#pragma omp for schedule(static)
        for (int64_t q = 0; q < npanels; q++) {
          int64_t w = nb - q * g.nr < g.nr ? nb - q * g.nr : g.nr;
          pack(&g, g.B, g.bn, g.bk, jc + q * g.nr, w, pc, kb, g.nr, pb + q * g.nr * kb * g.esz);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t blk = 0; blk < mblocks; blk++) {
          int64_t ic = blk * tiles / mblocks * g.mr, end = (blk + 1) * tiles / mblocks * g.mr;
          int64_t mb = (end < g.M ? end : g.M) - ic;
          pack(&g, g.A, g.am, g.ak, ic, mb, pc, kb, g.mr, pa);
          macro(&g, ic, mb, jc, nb, kb, pa, pb, beta, buf);
        }
      }
    }
  }
  return TJ_KERNEL_OK;
}

/* ---- the plan's problem ---- */

/* Offsets of one index set in one tensor: n indices with their dims in x
 * (plan words), extents from the dims of e (plan words) in tensor ex. */
static int64_t set_offsets(const int32_t *plan, int n, int x_at, const int64_t *xs,
                           const int64_t *ext, int64_t *out) {
  int64_t st[TJ_GETT_MAX_IDX];
  for (int q = 0; q < n; q++) st[q] = xs[plan[x_at + q]];
  return fill_offsets(n, ext, st, out);
}

/* Extents of an index set (dims e_at of tensor s) and whether tensor t
 * agrees at its dims t_at. */
static int64_t set_extents(const int32_t *plan, int n, const tj_storage *s, int e_at,
                           const tj_storage *t, int t_at, int64_t *ext, bool *ok) {
  int64_t len = 1;
  for (int q = 0; q < n; q++) {
    ext[q] = s->dims[plan[e_at + q]];
    if (t->dims[plan[t_at + q]] != ext[q]) *ok = false;
    len *= ext[q];
  }
  return len;
}

/* TTGT: gather A and B into column-major matrices (M x K, N x K), GEMM
 * into an M x N matrix, fold it into C. */
static int32_t ttgt(const Gp *g) {
  if (g->M == 0 || g->N == 0 || g->K == 0) return gett_core(g);
  int64_t M = g->M, N = g->N, K = g->K, e = g->esz;
  int64_t *id = malloc(sizeof(int64_t) * (size_t)(M + 2 * N + 3 * K));
  char *mat = malloc((size_t)((M * K + N * K + M * N) * e));
  if (!id || !mat) {
    free(id);
    free(mat);
    return TJ_KERNEL_NOMEM;
  }
  int64_t *im = id, *in = im + M, *ik = in + N, *kM = ik + K, *kN = kM + K, *nM = kN + K;
  for (int64_t i = 0; i < M; i++) im[i] = i;
  for (int64_t i = 0; i < N; i++) in[i] = i, nM[i] = i * M;
  for (int64_t i = 0; i < K; i++) ik[i] = i, kM[i] = i * M, kN[i] = i * N;
  char *Am = mat, *Bm = Am + M * K * e, *Cm = Bm + N * K * e;
  /* the transpositions: a gather through the offsets, as in packing */
  pack(g, g->A, g->am, g->ak, 0, M, 0, K, (int)M, Am);
  pack(g, g->B, g->bn, g->bk, 0, N, 0, K, (int)N, Bm);
  if (registered_gemm) {
    registered_gemm(g->f32, M, N, K, Am, M, Bm, N, Cm, M);
  } else {
    Gp m = *g;
    m.A = Am, m.B = Bm, m.C = Cm, m.beta = 0;
    m.am = im, m.ak = kM, m.bn = in, m.bk = kN, m.cm = im, m.cn = nM;
    int32_t rc = gett_core(&m);
    if (rc) {
      free(id);
      free(mat);
      return rc;
    }
  }
  Gp f = *g;
  f.mr = (int)M;   /* Cm as one M x N tile */
  if (g->f32) scatter_f32(&f, Cm, 0, 0, (int)M, (int)N, g->beta);
  else scatter_f64(&f, Cm, 0, 0, (int)M, (int)N, g->beta);
  free(id);
  free(mat);
  return TJ_KERNEL_OK;
}

/* LoG: one GEMM per combination of the indices after each set's first,
 * on the 2-D slices (first m index x first k index of A, ...). */
static int32_t log_gemms(const Gp *g, const int64_t *ext_m, const int64_t *ext_n,
                         const int64_t *ext_k, const int32_t *plan, const int64_t *const st[3],
                         int64_t *scratch) {
  int nm = plan[TJ_GP_NM], nn = plan[TJ_GP_NN], nk = plan[TJ_GP_NK];
  int64_t M0 = ext_m[0], N0 = ext_n[0], K0 = ext_k[0];
  int64_t Mr = g->M / (M0 ? M0 : 1), Nr = g->N / (N0 ? N0 : 1), Kr = g->K / (K0 ? K0 : 1);
  if (M0 == 0 || N0 == 0 || K0 == 0) return gett_core(g);
  int64_t *cm = scratch, *am = cm + M0, *cn = am + M0, *bn = cn + N0, *ak = bn + N0,
          *bk = ak + K0, *rcm = bk + K0, *ram = rcm + Mr, *rcn = ram + Mr, *rbn = rcn + Nr,
          *rak = rbn + Nr, *rbk = rak + Kr;
  const int64_t *sc = st[0], *sa = st[1], *sb = st[2];
  int64_t s1[TJ_GETT_MAX_IDX], s2[TJ_GETT_MAX_IDX];
#define SLICE(n, ext, xa, xb, sx, sy, o1, o2, r1, r2)                                   \
  do {                                                                                \
    s1[0] = sx[plan[xa]], s2[0] = sy[plan[xb]];                                       \
    fill_offsets(1, ext, s1, o1);                                                     \
    fill_offsets(1, ext, s2, o2);                                                     \
    for (int q = 1; q < n; q++) s1[q - 1] = sx[plan[xa + q]], s2[q - 1] = sy[plan[xb + q]]; \
    fill_offsets(n - 1, ext + 1, s1, r1);                                             \
    fill_offsets(n - 1, ext + 1, s2, r2);                                             \
  } while (0)
  SLICE(nm, ext_m, TJ_GP_M_C, TJ_GP_M_A, sc, sa, cm, am, rcm, ram);
  SLICE(nn, ext_n, TJ_GP_N_C, TJ_GP_N_B, sc, sb, cn, bn, rcn, rbn);
  SLICE(nk, ext_k, TJ_GP_K_A, TJ_GP_K_B, sa, sb, ak, bk, rak, rbk);
#undef SLICE
  Gp s = *g;
  s.M = M0, s.N = N0, s.K = K0;
  s.cm = cm, s.am = am, s.cn = cn, s.bn = bn, s.ak = ak, s.bk = bk;
  for (int64_t n = 0; n < Nr; n++)
    for (int64_t m = 0; m < Mr; m++)
      for (int64_t k = 0; k < Kr; k++) {
        s.C = g->C + (rcm[m] + rcn[n]) * g->esz;
        s.A = g->A + (ram[m] + rak[k]) * g->esz;
        s.B = g->B + (rbn[n] + rbk[k]) * g->esz;
        s.beta = k == 0 ? g->beta : 1;
        int32_t rc = gett_core(&s);
        if (rc) return rc;
      }
  return TJ_KERNEL_OK;
}

/* ---- methods timed at the first run ---- */

/* Runs method m of the problem g. */
static int32_t run_method(int m, const Gp *g, const int64_t *em, const int64_t *en,
                          const int64_t *ek, const int32_t *plan, const int64_t *const st[3],
                          int64_t *scratch) {
  switch (m) {
  case TJ_GETT_TTGT: return ttgt(g);
  case TJ_GETT_LOG: return log_gemms(g, em, en, ek, plan, st, scratch);
  default: return gett_core(g);
  }
}

/* The methods chosen by timing, per plan and sizes: a direct-mapped table
 * of the process (a slot taken by another key is overwritten). */
enum { TUNED_SLOTS = 512 };
static struct { uint64_t key; int method; } tuned[TUNED_SLOTS];
static pthread_mutex_t tuned_lock = PTHREAD_MUTEX_INITIALIZER;

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

uint64_t rt_gett_tune_key(tj_storage *const *operands, const int32_t *plan) {
  const tj_storage *ops[3] = {operands[0], operands[plan[TJ_GP_A]], operands[plan[TJ_GP_B]]};
  uint64_t key = rt_fnv1a(RT_FNV_BASIS, plan, sizeof(int32_t) * TJ_GP_WORDS);
  for (int t = 0; t < 3; t++) key = rt_fnv1a(key, ops[t]->dims, sizeof(int64_t) * (size_t)ops[t]->order);
  int threads = tj_rt_threads();
  return rt_fnv1a(key, &threads, sizeof threads);
}

int rt_gett_tuned_get(uint64_t key) {
  int slot = (int)(key % TUNED_SLOTS), method = -1;
  pthread_mutex_lock(&tuned_lock);
  if (tuned[slot].key == key) method = tuned[slot].method;
  pthread_mutex_unlock(&tuned_lock);
  return method;
}

void rt_gett_tuned_put(uint64_t key, int method) {
  if (method < 0 || method > TJ_GETT_LOG) return;
  int slot = (int)(key % TUNED_SLOTS);
  pthread_mutex_lock(&tuned_lock);
  tuned[slot].key = key, tuned[slot].method = method;
  pthread_mutex_unlock(&tuned_lock);
}

/* The plan's candidate methods (plan[TJ_GP_TUNE]) run into a copy of C in
 * interleaved rounds (a warm-up, then TUNE_ROUNDS timed), each keeping its
 * fastest run; another method replaces the model's only when it is faster
 * by TUNE_MARGIN, so noise on a loaded machine does not overturn the model
 * for a few percent. Remembered per plan, operand dims and thread count
 * (rt_gett_tune_key), so later runs (of this kernel or of one compiled
 * again) take it at once, and the driver keeps it in the disk cache when
 * the context has one. The model's method when the copy cannot be made or
 * a candidate fails. TJ_GETT_TUNE=0 in the environment turns the timing
 * off. */
enum { TUNE_ROUNDS = 2 };
#define TUNE_MARGIN 0.95
static int tuned_method(const Gp *g, tj_storage *const *operands, const int64_t *em,
                        const int64_t *en, const int64_t *ek, const int32_t *plan,
                        const int64_t *const st[3], int64_t *scratch) {
  unsigned mask = (unsigned)plan[TJ_GP_TUNE];
  const char *env = getenv("TJ_GETT_TUNE");
  int model = plan[TJ_GP_METHOD];
  if (env && strcmp(env, "0") == 0) return model;
  uint64_t key = rt_gett_tune_key(operands, plan);
  int method = rt_gett_tuned_get(key);
  if (method >= 0) return method;
  size_t bytes = (size_t)operands[0]->vals_len * (size_t)g->esz;
  char *copy = malloc(bytes ? bytes : 1);
  if (!copy) return model;
  memcpy(copy, g->C, bytes);
  Gp t = *g;
  t.C = copy;
  double best[3] = {0, 0, 0};
  for (int r = 0; r <= TUNE_ROUNDS; r++)
    for (int m = 0; m < 3; m++) {
      if (!(mask >> m & 1)) continue;
      double t0 = seconds();
      if (run_method(m, &t, em, en, ek, plan, st, scratch) != TJ_KERNEL_OK) {
        free(copy);
        return model;
      }
      double dt = seconds() - t0;
      if (r > 0 && (best[m] == 0 || dt < best[m])) best[m] = dt;
    }
  free(copy);
  method = model;
  double bar = mask >> model & 1 ? best[model] * TUNE_MARGIN : 0;
  for (int m = 0; m < 3; m++)
    if (mask >> m & 1 && m != model && (bar == 0 || best[m] < bar)) bar = best[m], method = m;
  if (getenv("TJ_GETT_VERBOSE"))
    fprintf(stderr,
            "tensorjit: GETT timed methods 0x%x (gett %.3f, ttgt %.3f, log %.3f ms), chose %s\n",
            mask, best[0] * 1e3, best[1] * 1e3, best[2] * 1e3,
            method == TJ_GETT_TTGT ? "ttgt" : method == TJ_GETT_LOG ? "log" : "gett");
  rt_gett_tuned_put(key, method);
  return method;
}

int32_t tj_rt_gett(tj_storage **operands, const int32_t *plan, tj_gett_ukernel uk) {
  tj_storage *C = operands[0], *A = operands[plan[TJ_GP_A]], *B = operands[plan[TJ_GP_B]];
  int nm = plan[TJ_GP_NM], nn = plan[TJ_GP_NN], nk = plan[TJ_GP_NK];
  if (nm < 1 || nn < 1 || nk < 1 || nm > TJ_GETT_MAX_IDX || nn > TJ_GETT_MAX_IDX ||
      nk > TJ_GETT_MAX_IDX)
    return TJ_KERNEL_SHAPE;
  int64_t sc[TJ_MAX_ORDER], sa[TJ_MAX_ORDER], sb[TJ_MAX_ORDER];
  if (!dense_strides(C, sc) || !dense_strides(A, sa) || !dense_strides(B, sb))
    return TJ_KERNEL_SHAPE;
  int64_t em[TJ_GETT_MAX_IDX], en[TJ_GETT_MAX_IDX], ek[TJ_GETT_MAX_IDX];
  bool ok = true;
  int64_t M = set_extents(plan, nm, C, TJ_GP_M_C, A, TJ_GP_M_A, em, &ok);
  int64_t N = set_extents(plan, nn, C, TJ_GP_N_C, B, TJ_GP_N_B, en, &ok);
  int64_t K = set_extents(plan, nk, A, TJ_GP_K_A, B, TJ_GP_K_B, ek, &ok);
  if (!ok) return TJ_KERNEL_SHAPE;
  /* offsets, and room for LoG's slices (M0 + Mr <= M + 1 per set and tensor) */
  int64_t total = 2 * (M + N + K);
  int64_t *off = malloc(sizeof(int64_t) * (size_t)(2 * total + 8));
  if (!off) return TJ_KERNEL_NOMEM;
  Gp g = {.M = M, .N = N, .K = K, .C = C->vals, .A = A->vals, .B = B->vals,
          .beta = plan[TJ_GP_BETA], .f32 = plan[TJ_GP_DTYPE] == 1,
          .mr = plan[TJ_GP_MR], .nr = plan[TJ_GP_NR], .mc = plan[TJ_GP_MC],
          .kc = plan[TJ_GP_KC], .nc = plan[TJ_GP_NC], .uk = uk};
  g.esz = g.f32 ? 4 : 8;
  int64_t *cm = off, *am = cm + M, *cn = am + M, *bn = cn + N, *ak = bn + N, *bk = ak + K;
  set_offsets(plan, nm, TJ_GP_M_C, sc, em, cm);
  set_offsets(plan, nm, TJ_GP_M_A, sa, em, am);
  set_offsets(plan, nn, TJ_GP_N_C, sc, en, cn);
  set_offsets(plan, nn, TJ_GP_N_B, sb, en, bn);
  set_offsets(plan, nk, TJ_GP_K_A, sa, ek, ak);
  set_offsets(plan, nk, TJ_GP_K_B, sb, ek, bk);
  g.cm = cm, g.am = am, g.cn = cn, g.bn = bn, g.ak = ak, g.bk = bk;
  const int64_t *const st[3] = {sc, sa, sb};
  int method = plan[TJ_GP_TUNE] ? tuned_method(&g, operands, em, en, ek, plan, st, off + total)
                                : plan[TJ_GP_METHOD];
  int32_t rc = run_method(method, &g, em, en, ek, plan, st, off + total);
  free(off);
  return rc;
}
