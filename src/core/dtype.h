/* dtype.h — element loads and stores for f32, f16 and bf16 through double, with
 * round-to-nearest-even on narrowing. */
#ifndef SPLAT_CORE_DTYPE_H
#define SPLAT_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "splat.h"

/* Widening is exact and cheap: inline, since the CPU kernels call it per element. */
static inline float splat__f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else {
    const float mag = (float)mant * 0x1p-24f; /* exact: mant < 2^10 */
    return sign ? -mag : mag;
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline float splat__bf16_to_f32(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t splat__f32_to_f16(float f);
uint16_t splat__f32_to_bf16(float f);

/* Bytes per element. */
int splat__dtype_size(splat_dtype dtype);
/* Element `offset` (in elements) of a buffer of the given dtype, widened to double. */
double splat__load(const void *base, splat_dtype dtype, int64_t offset);
/* Stores v, rounded to the dtype, at element `offset`. */
void splat__store(void *base, splat_dtype dtype, int64_t offset, double v);

#endif
