/* smoke.cuh — the smallest real kernel template, used by the CUDA runtime tests and as
 * a first check on a new GPU: out[i] = SPLAT_SMOKE_VALUE + i for i < n.
 * Prelude: SPLAT_SMOKE_NAME (the kernel's extern "C" name), SPLAT_SMOKE_VALUE (an int). */
#include "params.cuh"

extern "C" __global__ void SPLAT_SMOKE_NAME(int32_t *out, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (int32_t)(SPLAT_SMOKE_VALUE + i);
}
