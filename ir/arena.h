/* A bump allocator for per-compilation IR: everything built while compiling
 * one kernel (AST, concrete notation, lattices, loop IR) lives in one arena
 * and is released by one arena_free on every exit path. */
#ifndef TJ_IR_ARENA_H
#define TJ_IR_ARENA_H

#include <stddef.h>

typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
  ArenaBlock *head;
  size_t used;       /* bytes used in head */
  size_t total;      /* bytes allocated in all blocks */
  int failed;        /* set once an allocation failed */
  ArenaBlock *reserve; /* arena_reserve's block, not yet in use */
} Arena;

void arena_init(Arena *a);
/* Releases every block; the arena may be reused after arena_init. */
void arena_free(Arena *a);
/* Zeroed, 16-byte aligned memory owned by the arena; NULL (and a->failed
 * set) when out of memory. */
void *arena_alloc(Arena *a, size_t n);
/* Sets aside a block of n bytes that an allocation failing later takes
 * over: a->failed is still set, but the allocation and those after it
 * succeed, so code that builds IR without checking every constructor runs
 * to its end, where the caller sees a->failed and discards what was built.
 * False when the block itself cannot be had (report out of memory). */
int arena_reserve(Arena *a, size_t n);
/* Frees the reserve if no failure took it. */
void arena_unreserve(Arena *a);
/* Copies n bytes of s plus a NUL into the arena. */
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_strdup(Arena *a, const char *s);
/* printf into arena memory. */
char *arena_printf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
