/* tensor.c — helpers for building tensor descriptors. */
#include "splat.h"

splat_tensor splat_tensor_contiguous(void *data, splat_dtype dtype, int64_t d0, int64_t d1,
                                     int64_t d2, int64_t d3) {
  splat_tensor t = {data, dtype, {d0, d1, d2, d3}, {d1 * d2 * d3, d2 * d3, d3, 1}};
  return t;
}
