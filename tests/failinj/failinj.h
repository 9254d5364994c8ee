/* Failure injection for tests: fail the n-th allocation from now.
 *
 * A test binary that links failinj.c with FAILINJ_LINK_OPTIONS
 * (-Wl,--wrap=malloc,... see tests/CMakeLists.txt) routes every call to
 * malloc, calloc, realloc, aligned_alloc (tensor arrays), strdup and
 * open_memstream made by tensorjit's objects (and by the test itself)
 * through counting wrappers, so the
 * library needs no hook of its own and nothing of this exists outside
 * test binaries. Allocations made inside shared libraries (libc's own,
 * LLVM's C++ heap, libomp, zlib) are not counted: LLVM's would abort, not
 * fail. The counter is atomic: kernels allocate from OpenMP threads.
 * With TJ_FAILINJ_TRACE set, each failing allocation prints a backtrace.
 */
#ifndef TJ_TESTS_FAILINJ_H
#define TJ_TESTS_FAILINJ_H

#include <stdbool.h>
#include <stdint.h>

/* Starts counting; the n-th allocation from now (n >= 1) returns NULL
 * (errno ENOMEM), the others succeed. n = 0 counts without failing. */
void fi_arm(int64_t n);
/* As fi_arm, but the n-th allocation and every one after it fail (memory
 * that stays exhausted). */
void fi_arm_all(int64_t n);
/* Stops counting; returns how many allocations were seen since fi_arm. */
int64_t fi_disarm(void);
/* Whether the armed failure happened since the last fi_arm. */
bool fi_fired(void);
/* In an ASan build: runs LeakSanitizer now and returns true when it found
 * leaks (it prints them). Always false without LeakSanitizer. */
bool fi_leaked(void);

#endif
