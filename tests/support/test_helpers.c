/* test_helpers.c — the shared numeric test helpers (test_helpers.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "support/test_helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

void rng_seed(uint64_t seed) {
  rng_state = seed;
}

uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double rng_unit(void) {
  return (double)(rng_next() >> 11) * 0x1p-53;
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *dt_name(splat_dtype dt) {
  return dt == SPLAT_F32 ? "f32" : dt == SPLAT_F16 ? "f16" : "bf16";
}

double ulp_of(splat_dtype dt, double x) {
  const int mbits = dt == SPLAT_F32 ? 23 : dt == SPLAT_F16 ? 10 : 7;
  const int emin = dt == SPLAT_F16 ? -14 : -126;
  x = fabs(x);
  int e;
  frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
  e -= 1;
  if (x == 0.0 || e < emin) e = emin;
  return ldexp(1.0, e - mbits);
}

double eps_of(splat_dtype dt) {
  return dt == SPLAT_F32 ? 0x1p-24 : dt == SPLAT_F16 ? 0x1p-11 : 0x1p-8;
}
