/* dtype.h — element loads and stores for f32, f16 and bf16 through double, with
 * round-to-nearest-even on narrowing. */
#ifndef SPLAT_CORE_DTYPE_H
#define SPLAT_CORE_DTYPE_H

#include <stdint.h>

#include "splat.h"

float splat__f16_to_f32(uint16_t h);
uint16_t splat__f32_to_f16(float f);
float splat__bf16_to_f32(uint16_t h);
uint16_t splat__f32_to_bf16(float f);

/* Bytes per element. */
int splat__dtype_size(splat_dtype dtype);
/* Element `offset` (in elements) of a buffer of the given dtype, widened to double. */
double splat__load(const void *base, splat_dtype dtype, int64_t offset);
/* Stores v, rounded to the dtype, at element `offset`. */
void splat__store(void *base, splat_dtype dtype, int64_t offset, double v);

#endif
