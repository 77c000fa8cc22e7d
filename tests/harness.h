/* harness.h — the minimal test harness every C test binary uses: CHECK macros that
 * count passes and failures, and a final "N passed, N failed" line. */
#ifndef SPLAT_TESTS_HARNESS_H
#define SPLAT_TESTS_HARNESS_H

#include <stdio.h>

static int harness_passed, harness_failed;

/* Records one assertion; prints the failing expression with its location. */
#define CHECK(cond)                                                   \
  do {                                                                \
    if (cond) {                                                       \
      harness_passed++;                                               \
    } else {                                                          \
      harness_failed++;                                               \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                 \
  } while (0)

/* Like CHECK, with a printf-style explanation on failure. */
#define CHECKF(cond, ...)                                             \
  do {                                                                \
    if (cond) {                                                       \
      harness_passed++;                                               \
    } else {                                                          \
      harness_failed++;                                               \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
    }                                                                 \
  } while (0)

/* Prints the summary line and returns the process exit code. */
static inline int harness_finish(void) {
  printf("%d passed, %d failed\n", harness_passed, harness_failed);
  return harness_failed ? 1 : 0;
}

#endif
