/* Helpers that JIT-compiled kernels call (see abi.h).
 *
 * Output arrays grow by doubling through tj_rt_reserve; new space is
 * zeroed so a kernel may accumulate into it, unless the kernel says it
 * writes every new entry first (TJ_ARR_NOZERO). Arrays are malloc/free memory
 * (rt_array_new: large ones advised for huge pages), the same the runtime
 * uses, so a tensor owns what a kernel grew. An array the caller wrapped
 * (tj_storage.foreign) is never realloc'd: growing it copies it into a
 * fresh array the tensor owns, and the caller's stays where it was.
 * No helper aborts: failures come back as TJ_KERNEL_* codes.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tensor.h"

static int elem_size(const tj_storage *s, int32_t arr) {
  if (arr == TJ_ARR_POS) return s->pos_width;
  if (arr == TJ_ARR_CRD) return s->crd_width;
  return rt_dtype_size((tj_dtype)s->dtype);
}

int32_t tj_rt_reserve(tj_storage *s, int32_t arr, int32_t level, int64_t need) {
  void **p;
  int64_t *cap;
  uint32_t bit;
  bool zero = !(arr & TJ_ARR_NOZERO);
  arr &= ~TJ_ARR_NOZERO;
  if (arr == TJ_ARR_VALS) {
    p = &s->vals, cap = &s->vals_cap, bit = TJ_FOREIGN_VALS;
  } else {
    if (level < 0 || level >= s->order) return TJ_KERNEL_SHAPE;
    tj_level_storage *lv = &s->levels[level];
    if (arr == TJ_ARR_POS) p = &lv->pos, cap = &lv->pos_cap, bit = TJ_FOREIGN_POS(level);
    else p = &lv->crd, cap = &lv->crd_cap, bit = TJ_FOREIGN_CRD(level);
  }
  if (need <= *cap && *p) return TJ_KERNEL_OK;
  int64_t ncap = *cap < 16 ? 16 : *cap;
  while (ncap < need) {
    if (ncap > INT64_MAX / 2) return TJ_KERNEL_NOMEM;
    ncap *= 2;
  }
  int64_t w = elem_size(s, arr);
  if (ncap > INT64_MAX / w || (uint64_t)(ncap * w) > SIZE_MAX)
    return TJ_KERNEL_NOMEM;
  if (s->foreign & bit) {   /* the caller's array: copy it, never realloc it */
    void *q = rt_array_new(ncap, (size_t)w, false);
    if (!q) return TJ_KERNEL_NOMEM;
    int64_t kept = *p ? *cap : 0;
    if (kept) memcpy(q, *p, (size_t)(kept * w));
    if (zero) memset((char *)q + kept * w, 0, (size_t)((ncap - kept) * w));
    *p = q;
    s->foreign &= ~bit;
  } else if (!rt_array_grow(p, *p ? *cap : 0, ncap, (size_t)w, zero)) {
    return TJ_KERNEL_NOMEM;
  }
  *cap = ncap;
  return TJ_KERNEL_OK;
}

int32_t tj_rt_alloc(int64_t n, void **out) {
  *out = NULL;
  if (n <= 0) return TJ_KERNEL_OK;
  if ((uint64_t)n > SIZE_MAX) return TJ_KERNEL_NOMEM;
  *out = rt_array_new(n, 1, true);
  return *out ? TJ_KERNEL_OK : TJ_KERNEL_NOMEM;
}

void tj_rt_free(void *p) { free(p); }

/* Sorting a workspace's coordinate list (one per output row of SpGEMM):
 * qsort's comparator calls cost more than the rest of the row, so an
 * introsort-style quicksort specialized per width, with insertion sort
 * for short runs and heapsort when partitions degenerate. */
#define DEFINE_SORT(NAME, T)                                                  \
  static void NAME##_insertion(T *a, int64_t n) {                             \
    for (int64_t i = 1; i < n; i++) {                                         \
      T x = a[i];                                                             \
      int64_t j = i;                                                          \
      for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];                     \
      a[j] = x;                                                               \
    }                                                                         \
  }                                                                           \
  static void NAME##_sift(T *a, int64_t n, int64_t r) {                       \
    for (;;) {                                                                \
      int64_t c = 2 * r + 1;                                                  \
      if (c >= n) return;                                                     \
      if (c + 1 < n && a[c + 1] > a[c]) c++;                                  \
      if (a[r] >= a[c]) return;                                               \
      T t = a[r];                                                             \
      a[r] = a[c];                                                            \
      a[c] = t;                                                               \
      r = c;                                                                  \
    }                                                                         \
  }                                                                           \
  static void NAME##_heap(T *a, int64_t n) {                                  \
    for (int64_t r = n / 2 - 1; r >= 0; r--) NAME##_sift(a, n, r);            \
    for (int64_t e = n - 1; e > 0; e--) {                                     \
      T t = a[0];                                                             \
      a[0] = a[e];                                                            \
      a[e] = t;                                                               \
      NAME##_sift(a, e, 0);                                                   \
    }                                                                         \
  }                                                                           \
  static void NAME(T *a, int64_t n, int depth) {                              \
    while (n > 24) {                                                          \
      if (depth-- == 0) {                                                     \
        NAME##_heap(a, n);                                                    \
        return;                                                               \
      }                                                                       \
      T x = a[0], y = a[n / 2], z = a[n - 1];                                 \
      T pivot = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y); \
      int64_t i = 0, j = n - 1;                                               \
      for (;;) {                                                              \
        while (a[i] < pivot) i++;                                             \
        while (a[j] > pivot) j--;                                             \
        if (i >= j) break;                                                    \
        T t = a[i];                                                           \
        a[i++] = a[j];                                                        \
        a[j--] = t;                                                           \
      }                                                                       \
      NAME(a, j + 1, depth);                                                  \
      a += j + 1;                                                             \
      n -= j + 1;                                                             \
    }                                                                         \
    NAME##_insertion(a, n);                                                   \
  }

DEFINE_SORT(sort_u8, uint8_t)
DEFINE_SORT(sort_u16, uint16_t)
DEFINE_SORT(sort_i32, int32_t)
DEFINE_SORT(sort_i64, int64_t)

/* Sorting n distinct coordinates whose span (max - min + 1) is at most
 * BITMAP_BITS through a bitmap over the span: a bit per coordinate and a
 * byte per bitmap word that holds one (`touched`), then the words read back
 * in order, O(n + span / 512). Both stay all zero between calls (each word
 * and byte is cleared as it is read), so nothing is cleared up front; they
 * are per thread. A row of a workspace's list (SpGEMM) is distinct, and this
 * beats comparison sorting by several times there. Setting a coordinate
 * does not branch: a repeat is or'ed into a flag, and `touched` is stored,
 * not or'ed into a summary word (that chained every coordinate behind the
 * last through memory, since a list's runs share summary words: cage11 x
 * cage11's rows sorted ~9% faster without it). A repeated coordinate gives
 * up: false, crd unchanged. */
enum { BITMAP_BITS = 1 << 16, BITMAP_WORDS = BITMAP_BITS / 64 };
static _Thread_local uint64_t bitmap[BITMAP_WORDS];
static _Thread_local uint8_t touched[BITMAP_WORDS];

/* The 8 bytes of v (each 0 or 1) as a bit mask, bit i for byte i: the
 * multiply gathers each byte's low bit into the top byte. */
static uint64_t byte_bits(uint64_t v) { return (v * 0x0102040810204080ull) >> 56; }

/* The 64 bytes from b on (each 0 or 1) as a bit mask, bit i for byte i. */
static uint64_t bytes_mask(const uint8_t *b) {
  uint64_t mask = 0;
  for (int c = 0; c < 8; c++) {
    uint64_t v;
    memcpy(&v, b + c * 8, sizeof v);
    mask |= byte_bits(v) << (c * 8);
  }
  return mask;
}

/* The 64 bytes of touched from word g * 64 on as a bit mask. */
static uint64_t touched_mask(int64_t g) { return bytes_mask(touched + g * 64); }

#define DEFINE_BITMAP_SORT(NAME, T)                                           \
  static bool NAME(T *a, int64_t n) {                                         \
    T lo = a[0], hi = a[0];                                                   \
    for (int64_t i = 1; i < n; i++) {                                         \
      lo = a[i] < lo ? a[i] : lo;                                             \
      hi = a[i] > hi ? a[i] : hi;                                             \
    }                                                                         \
    if ((uint64_t)hi - (uint64_t)lo >= BITMAP_BITS) return false;             \
    uint64_t repeated = 0;                                                    \
    for (int64_t i = 0; i < n; i++) {                                         \
      uint64_t b = (uint64_t)a[i] - (uint64_t)lo, m = (uint64_t)1 << (b % 64); \
      repeated |= bitmap[b / 64] & m;                                         \
      bitmap[b / 64] |= m;                                                    \
      touched[b / 64] = 1;                                                    \
    }                                                                         \
    int64_t w_end = (int64_t)(((uint64_t)hi - (uint64_t)lo) / 64);            \
    if (repeated) { /* undo, give up */                                       \
      memset(bitmap, 0, (size_t)(w_end + 1) * sizeof *bitmap);                \
      memset(touched, 0, (size_t)(w_end + 1));                                \
      return false;                                                           \
    }                                                                         \
    int64_t k = 0;                                                            \
    for (int64_t g = 0; g <= w_end / 64; g++) /* the span's groups of 64 words */ \
      for (uint64_t gw = touched_mask(g); gw; gw &= gw - 1) {                 \
        int64_t wd = g * 64 + __builtin_ctzll(gw);                            \
        for (uint64_t x = bitmap[wd]; x; x &= x - 1)                          \
          a[k++] = (T)((uint64_t)lo + (uint64_t)wd * 64 + (uint64_t)__builtin_ctzll(x)); \
        bitmap[wd] = 0;                                                       \
        touched[wd] = 0;                                                      \
      }                                                                       \
    return true;                                                              \
  }

DEFINE_BITMAP_SORT(bitmap_u16, uint16_t)
DEFINE_BITMAP_SORT(bitmap_i32, int32_t)
DEFINE_BITMAP_SORT(bitmap_i64, int64_t)

/* Widths 1 and 2 are the unsigned coordinates of crdWidth 8 and 16 (a
 * 16-bit span always fits the bitmap; 8-bit lists are short, or repeat). */
void tj_rt_sort_crd(void *crd, int64_t n, int32_t w) {
  if (!crd || n < 2) return;
  int depth = 2 * (64 - __builtin_clzll((unsigned long long)n));
  if (w == 1) {
    sort_u8(crd, n, depth);
  } else if (w == 2) {
    if (n <= 24 || !bitmap_u16(crd, n)) sort_u16(crd, n, depth);
  } else if (w == 4) {
    if (n <= 24 || !bitmap_i32(crd, n)) sort_i32(crd, n, depth);
  } else if (n <= 24 || !bitmap_i64(crd, n)) {
    sort_i64(crd, n, depth);
  }
}

/* The coordinates marked in a workspace's marks (SpGEMM's list-free
 * scatter: mark[j] = 1 and mark[64 * words + j / 64] = 1 per product, no
 * list), read back in ascending order into crd: only the 64-mark words
 * whose touched byte is set are read, 8 touched bytes tested at a time, a
 * word's marks turned into a bit mask and walked by its set bits. The
 * touched bytes read are cleared; the marks are not (the caller clears
 * each mark as it moves the entry's value). */
#define DEFINE_MARKED_CRD(NAME, T)                                            \
  static int64_t NAME(T *crd, const uint8_t *mark, int64_t words) {           \
    uint8_t *tw = (uint8_t *)mark + words * 64;                               \
    int64_t n = 0;                                                            \
    for (int64_t c = 0; c < words; c += 8) {                                  \
      uint64_t t8;                                                            \
      memcpy(&t8, tw + c, sizeof t8);                                         \
      if (!t8) continue;                                                      \
      memset(tw + c, 0, sizeof t8);                                           \
      for (uint64_t tm = byte_bits(t8); tm; tm &= tm - 1) {                  \
        int64_t wd = c + __builtin_ctzll(tm);                                 \
        for (uint64_t x = bytes_mask(mark + wd * 64); x; x &= x - 1)          \
          crd[n++] = (T)(wd * 64 + __builtin_ctzll(x));                       \
      }                                                                       \
    }                                                                         \
    return n;                                                                 \
  }

DEFINE_MARKED_CRD(marked_u8, uint8_t)
DEFINE_MARKED_CRD(marked_u16, uint16_t)
DEFINE_MARKED_CRD(marked_i32, int32_t)
DEFINE_MARKED_CRD(marked_i64, int64_t)

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
/* The same with AVX-512BW: 64 touched bytes, and a word's 64 marks, each
 * tested by one vptestmb (the touched bytes are readable 64 past words). */
__attribute__((target("avx512f,avx512bw"))) static int64_t marked_i32_avx512(
    int32_t *crd, const uint8_t *mark, int64_t words) {
  uint8_t *tw = (uint8_t *)mark + words * 64;
  int64_t n = 0;
  for (int64_t c = 0; c < words; c += 64) {
    __m512i t = _mm512_loadu_si512(tw + c);
    uint64_t tm = _mm512_test_epi8_mask(t, t);
    if (!tm) continue;
    _mm512_storeu_si512(tw + c, _mm512_setzero_si512());
    for (; tm; tm &= tm - 1) {
      int64_t wd = c + __builtin_ctzll(tm);
      __m512i m = _mm512_loadu_si512(mark + wd * 64);
      for (uint64_t x = _mm512_test_epi8_mask(m, m); x; x &= x - 1)
        crd[n++] = (int32_t)(wd * 64 + __builtin_ctzll(x));
    }
  }
  return n;
}
#define HAVE_MARKED_AVX512 1
#endif

static int64_t (*marked_i32_best)(int32_t *, const uint8_t *, int64_t) = marked_i32;
static pthread_once_t marked_picked = PTHREAD_ONCE_INIT;

/* The 32-bit read-back for this host (AVX-512BW where it runs). */
static void pick_marked(void) {
#ifdef HAVE_MARKED_AVX512
  if (__builtin_cpu_supports("avx512bw")) marked_i32_best = marked_i32_avx512;
#endif
}

int64_t tj_rt_marked_crd(void *crd, const void *mark, int64_t words, int32_t w) {
  if (w == 1) return marked_u8(crd, mark, words);
  if (w == 2) return marked_u16(crd, mark, words);
  if (w == 4) {
    pthread_once(&marked_picked, pick_marked);
    return marked_i32_best(crd, mark, words);
  }
  return marked_i64(crd, mark, words);
}
