/* reference_patterns.h — an independent brute-force table of pattern specs: for each
 * spec text, a predicate "row i sees column j" written straight from the semantics in
 * docs/patterns.md (never from the library's code). Tests of every stage compare
 * against it. */
#ifndef SPLAT_TESTS_REFERENCE_PATTERNS_H
#define SPLAT_TESTS_REFERENCE_PATTERNS_H

#include <stdint.h>

typedef struct ref_pattern {
  const char *spec;
  /* 1 when row i may see column j, 0 <= i < seq_q, 0 <= j < seq_k. */
  int (*contains)(const struct ref_pattern *p, int64_t i, int64_t j, int64_t seq_q, int64_t seq_k);
  int64_t a[6]; /* the arguments the predicate reads, in the order of the spec text */
} ref_pattern;

extern const ref_pattern splat_ref_patterns[];
extern const int splat_ref_pattern_count;

/* Looks an entry up by its exact spec text; NULL when absent. */
const ref_pattern *splat_ref_pattern_find(const char *spec);

/* The bigbird rule by itself (docs/patterns.md), for building other predicates:
 * b, w, g, r and the seed. Not thread-safe across different arguments (caches the
 * random blocks of the last query block per thread). */
int splat_ref_bigbird(int64_t b, int64_t w, int64_t g, int64_t r, uint64_t seed, int64_t i,
                      int64_t j, int64_t seq_k);

#endif
