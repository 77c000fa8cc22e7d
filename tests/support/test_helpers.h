/* test_helpers.h — small helpers the numeric tests share: a seeded splitmix64 stream,
 * an allocation that exits on failure, a clock, and the dtypes' names, ulps and unit
 * roundoffs (from their definitions, independent of the library's dtype code). */
#ifndef SPLAT_TESTS_TEST_HELPERS_H
#define SPLAT_TESTS_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "splat.h"

/* Restarts the stream (one per test binary) at seed. */
void rng_seed(uint64_t seed);
/* The next 64 random bits (splitmix64). */
uint64_t rng_next(void);
/* A uniform double in [0, 1), 53 bits. */
double rng_unit(void);

/* malloc that exits the test with status 2 when memory runs out (n 0 allowed). */
void *xmalloc(size_t n);
/* Seconds on the monotonic clock. */
double now_s(void);

/* "f32", "f16" or "bf16". */
const char *dt_name(splat_dtype dt);
/* One ulp of the dtype at magnitude max(|x|, smallest normal). */
double ulp_of(splat_dtype dt, double x);
/* Unit roundoff of the dtype. */
double eps_of(splat_dtype dt);

#endif
