/* Bump allocation in blocks that double in size; no per-object free. */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ArenaBlock {
  ArenaBlock *next;
  size_t size;
  _Alignas(16) unsigned char data[];
};

void arena_init(Arena *a) { memset(a, 0, sizeof *a); }

void arena_free(Arena *a) {
  free(a->reserve);
  ArenaBlock *b = a->head;
  while (b) {
    ArenaBlock *next = b->next;
    free(b);
    b = next;
  }
  arena_init(a);
}

static int arena_grow(Arena *a, size_t n) {
  size_t size = a->head ? a->head->size * 2 : 4096;
  if (size > ((size_t)1 << 24)) size = (size_t)1 << 24;
  if (size < n) size = n;
  ArenaBlock *b = malloc(sizeof *b + size);
  if (!b) return 0;
  b->next = a->head;
  b->size = size;
  a->head = b;
  a->used = 0;
  a->total += size;
  return 1;
}

int arena_reserve(Arena *a, size_t n) {
  if (a->reserve && a->reserve->size >= n) return 1;
  arena_unreserve(a);
  a->reserve = malloc(sizeof *a->reserve + n);
  if (!a->reserve) return 0;
  a->reserve->size = n;
  return 1;
}

void arena_unreserve(Arena *a) {
  free(a->reserve);
  a->reserve = NULL;
}

/* After a failed grow: the reserve becomes the head block if n fits. */
static int take_reserve(Arena *a, size_t n) {
  ArenaBlock *b = a->reserve;
  if (!b || b->size < n) return 0;
  a->reserve = NULL;
  b->next = a->head;
  a->head = b;
  a->used = 0;
  a->total += b->size;
  return 1;
}

void *arena_alloc(Arena *a, size_t n) {
  if (n == 0) n = 1;
  n = (n + 15) & ~(size_t)15;
  if (!a->head || a->used + n > a->head->size) {
    if (!arena_grow(a, n)) {
      a->failed = 1;
      if (!take_reserve(a, n)) return NULL;
    }
  }
  void *p = a->head->data + a->used;
  a->used += n;
  memset(p, 0, n);
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *arena_strdup(Arena *a, const char *s) {
  return arena_strndup(a, s, strlen(s));
}

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *p = arena_alloc(a, (size_t)n + 1);
  if (!p) return NULL;
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}
